"""4b92d358: --pipeline-parallel-size 2 --tensor-parallel-size 4 on Llama-2-70b-hf, vLLM 0.3.3.

The record's exampleFix: `python -m vllm.entrypoints.openai.api_server --model
meta-llama/Llama-2-70b-hf --pipeline-parallel-size 2 --tensor-parallel-size 4`, fixed with
--tensor-parallel-size 8 alone. The model folder holds Llama-2-70b-hf's config.json (64
attention heads, 8 KV heads, 80 layers; no weights). ParallelConfig._verify_args raises when
create_engine_configs() builds the parallel config, the api_server's first start-up step (see
_vllm033.py; `--device cuda` stands for the user's GPU host). In the fixed state the case also
runs the head/layer divisibility check LLMEngine.__init__ runs next
(ModelConfig.verify_with_parallel_config). It leaves out the swap-space check _verify_args runs
after that (CacheConfig.verify_with_parallel_config, c8018983's): the default 4 GiB x 8 GPUs =
32 GiB must be under 70% of the host's RAM, so a runner under 46 GiB would raise there (a 23.5
GiB runner does) while an 8-GPU host serving a 70B model has far more. Eight workers would then
be started with Ray (not installed in the venv).
"""

from _vllm033 import LLAMA2_70B, accepted, engine_configs, write

MODEL = "./Llama-2-70b-hf"
# The record's exampleFix states (errkb.verify.fixstates), mapped: the checkpoint name to its local config.json.
MAPPING = {"values": {"meta-llama/Llama-2-70b-hf": MODEL}, "append": ["--device", "cuda"]}


def setup(state):
    write(MODEL, LLAMA2_70B)


def trigger(state):
    configs = engine_configs(state["argv"])
    model, parallel = configs[0], configs[2]
    model.verify_with_parallel_config(parallel)
    return accepted(configs) + f"; {model.hf_config.num_attention_heads} heads divide over tp {parallel.tensor_parallel_size}"
