"""c1f5104f: --gpu-memory-utilization 90 meant as 90%, vLLM 0.3.3.

The record's exampleFix: `python -m vllm.entrypoints.openai.api_server --model facebook/opt-125m
--gpu-memory-utilization 90`, fixed with 0.9. The model folder holds facebook/opt-125m's
config.json (no weights). create_engine_configs(), the api_server's first start-up step (see
_vllm033.py; `--device cuda` stands for the user's GPU host), passes the flag to CacheConfig,
whose _verify_args raises a plain ValueError at the record's own line (config.py:325).
"""

from _vllm033 import OPT_125M, accepted, engine_configs, write_config

MODEL = "./opt-125m"
# The record's exampleFix states (errkb.verify.fixstates), mapped: the checkpoint name to its local config.json.
MAPPING = {"values": {"facebook/opt-125m": MODEL}, "append": ["--device", "cuda"]}


def setup(state):
    write_config(MODEL, OPT_125M)


def trigger(state):
    configs = engine_configs(state["argv"])
    return accepted(configs) + f"; gpu_memory_utilization={configs[1].gpu_memory_utilization}"
