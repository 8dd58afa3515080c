"""c7fb8f7d: --tensor-parallel-size 3 on Llama-2-70b-chat-hf (64 attention heads), vLLM 0.3.3.

The record's exampleFix: `python -m vllm.entrypoints.api_server --model
meta-llama/Llama-2-70b-chat-hf --tensor-parallel-size 3`, fixed with `CUDA_VISIBLE_DEVICES=0,1,2,3`
and --tensor-parallel-size 4 (the 'after' state's env; the CPU torch ignores it): 4 divides the 64 heads,
and four 80 GB GPUs hold the 70B model's fp16 weights (about 140 GB), which two cannot. The model
folder holds Llama-2-70b-chat-hf's config.json (64 attention heads, 8 KV heads, 80 layers; no
weights). That server builds its engine from the same AsyncEngineArgs parser (see
_vllm033.py; `--device cuda` stands for the user's GPU host); after create_engine_configs()
LLMEngine.__init__ runs _verify_args, whose first check, ModelConfig.verify_with_parallel_config,
raises at the record's own line (config.py:211). The case runs that check; it leaves out the
swap-space check _verify_args runs next (c8018983's, relative to the runner's RAM; see
4b92d358). The workers would then be started with Ray (not installed in the venv).
"""

from _vllm033 import LLAMA2_70B, accepted, engine_configs, write

MODEL = "./Llama-2-70b-chat-hf"
# The record's exampleFix states (errkb.verify.fixstates), mapped: the checkpoint name to its local config.json
# (the 'after' state's inline CUDA_VISIBLE_DEVICES=0,1,2,3 is passed on as written; no CUDA API reads it here).
MAPPING = {"values": {"meta-llama/Llama-2-70b-chat-hf": MODEL}, "append": ["--device", "cuda"]}


def setup(state):
    write(MODEL, LLAMA2_70B)


def trigger(state):
    configs = engine_configs(state["argv"])
    model, parallel = configs[0], configs[2]
    model.verify_with_parallel_config(parallel)
    return accepted(configs) + f"; {model.hf_config.num_attention_heads} heads divide over tp {parallel.tensor_parallel_size}"
