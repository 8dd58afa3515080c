"""vLLM 0.3.3 (2024-03-01), the release nearest the analysed commit c0c2335c: the engine's flags and configs.

The user's program is `python -m vllm.entrypoints.openai.api_server <flags>` (or LLM(...)): both
turn the flags into EngineArgs and call create_engine_configs() first, which builds and checks
ModelConfig (config.json through transformers, the max_model_len derivation), CacheConfig,
ParallelConfig, SchedulerConfig and LoRAConfig; LLMEngine.__init__ then runs its _verify_args
(ModelConfig.verify_with_parallel_config, the LoRA checks) before the tokenizer and the GPU
workers. The api_server's parser is argparse plus AsyncEngineArgs.add_cli_args (its other flags
are the HTTP server's); importing the api_server module needs fastapi, uvicorn and outlines, so
the case builds the same engine parser. Nothing on this path imports vLLM's CUDA kernels
(vllm._C, present in the wheel but never loaded).

DeviceConfig('auto') asks torch.cuda.is_available() and raises "No supported device detected."
on a host without CUDA; on the user's GPU host 'auto' is 'cuda'. Each state therefore passes
`--device cuda` (a 0.3.3 flag, choices auto/cuda/neuron), what 'auto' resolves to there; the
config checks touch no CUDA API.
"""

import json
import os

from _vllm_model import write_model

# config.json shapes of the checkpoints the records' exampleFix names (no weights, no tokenizer).
LLAMA2_7B = {"hidden_size": 4096, "intermediate_size": 11008, "num_attention_heads": 32, "num_key_value_heads": 32,
             "num_hidden_layers": 32, "vocab_size": 32000, "max_position_embeddings": 4096, "torch_dtype": "float16",
             "rms_norm_eps": 1e-05, "rope_scaling": None}
LLAMA2_70B = {**LLAMA2_7B, "hidden_size": 8192, "intermediate_size": 28672, "num_attention_heads": 64,
              "num_key_value_heads": 8, "num_hidden_layers": 80}
# TheBloke/Llama-2-7B-Chat-AWQ: Llama-2-7B's shape with the AutoAWQ quantization_config.
AWQ_CONFIG = {"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": True, "version": "gemm"}
# TheBloke/Llama-2-7B-Chat-GPTQ: Llama-2-7B's shape with the AutoGPTQ quantization_config.
GPTQ_CONFIG = {"quant_method": "gptq", "bits": 4, "group_size": 128, "damp_percent": 0.01, "desc_act": False,
               "sym": True, "true_sequential": True, "model_name_or_path": None, "model_file_base_name": "model"}
# Other architectures, written whole (config.json as published, no Llama keys merged in).
OPT_125M = {"architectures": ["OPTForCausalLM"], "model_type": "opt", "hidden_size": 768, "ffn_dim": 3072,
            "word_embed_proj_dim": 768, "num_attention_heads": 12, "num_hidden_layers": 12, "vocab_size": 50272,
            "max_position_embeddings": 2048, "do_layer_norm_before": True, "activation_function": "relu",
            "bos_token_id": 2, "eos_token_id": 2, "pad_token_id": 1, "torch_dtype": "float16"}
MISTRAL_7B = {"architectures": ["MistralForCausalLM"], "model_type": "mistral", "hidden_size": 4096,
              "intermediate_size": 14336, "num_attention_heads": 32, "num_key_value_heads": 8, "num_hidden_layers": 32,
              "vocab_size": 32000, "max_position_embeddings": 32768, "rms_norm_eps": 1e-05, "rope_theta": 10000.0,
              "sliding_window": 4096, "bos_token_id": 1, "eos_token_id": 2, "torch_dtype": "bfloat16"}
MIXTRAL_8X7B = {"architectures": ["MixtralForCausalLM"], "model_type": "mixtral", "hidden_size": 4096,
                "intermediate_size": 14336, "num_attention_heads": 32, "num_key_value_heads": 8, "num_hidden_layers": 32,
                "num_local_experts": 8, "num_experts_per_tok": 2, "vocab_size": 32000, "max_position_embeddings": 32768,
                "rms_norm_eps": 1e-05, "rope_theta": 1e6, "sliding_window": None, "torch_dtype": "bfloat16"}


def write(folder: str, shape: dict, **extra) -> str:
    return write_model(folder, **shape, **extra)


def write_config(folder: str, config: dict) -> str:
    """A model folder holding exactly this config.json (for the non-Llama checkpoints)."""
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(config, f)
    return folder


def engine_configs(argv: list[str]):
    """create_engine_configs() on the flags: (model, cache, parallel, scheduler, device, lora) configs."""
    import argparse

    from vllm.engine.arg_utils import AsyncEngineArgs

    parser = AsyncEngineArgs.add_cli_args(argparse.ArgumentParser())
    return AsyncEngineArgs.from_cli_args(parser.parse_args(argv)).create_engine_configs()


def accepted(configs) -> str:
    model, _cache, parallel, scheduler, device, lora = configs
    return (f"engine configs accepted (vllm 0.3.3: max_model_len={model.max_model_len}, quantization={model.quantization}, "
            f"pp={parallel.pipeline_parallel_size}, tp={parallel.tensor_parallel_size}, lora={lora is not None}, "
            f"device={device.device_type})")
