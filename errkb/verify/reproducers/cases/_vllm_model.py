"""A tiny model folder (config.json only) for vLLM's config checks: no weights, no network.

vLLM's ModelConfig reads the folder's config.json through transformers and inspects the
architecture in its registry; nothing is downloaded and no weights are loaded.
"""

import json
import os

LLAMA = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 416, "intermediate_size": 128,
    "num_attention_heads": 52, "num_key_value_heads": 52, "num_hidden_layers": 2, "vocab_size": 1000,
    "max_position_embeddings": 4096, "torch_dtype": "float16",
}


def write_model(folder: str = "model", **overrides) -> str:
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump({**LLAMA, **overrides}, f)
    return folder


def engine_args(argv: list[str]):
    """vLLM's own parser: the state's argv are the flags of `vllm serve` / LLM(...)."""
    from vllm.engine.arg_utils import EngineArgs
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    parser = EngineArgs.add_cli_args(FlexibleArgumentParser())
    return EngineArgs.from_cli_args(parser.parse_args(argv))


def create_engine_config(state: dict) -> str:
    """What `vllm serve <flags>` and LLM(...) do first: build and check the whole config."""
    config = engine_args(state["argv"]).create_engine_config()
    return (f"engine config accepted (max_model_len={config.model_config.max_model_len}, "
            f"tp={config.parallel_config.tensor_parallel_size}, "
            f"max_num_batched_tokens={config.scheduler_config.max_num_batched_tokens})")
