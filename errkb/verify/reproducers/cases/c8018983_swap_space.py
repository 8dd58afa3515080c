"""c8018983: --swap-space times --tensor-parallel-size over 70% of the host's RAM, vLLM 0.3.3.

The record's exampleFix: `python -m vllm.entrypoints.openai.api_server --model
mistralai/Mixtral-8x7B-v0.1 --tensor-parallel-size 8 --swap-space 16` (GiB of CPU swap per GPU),
fixed by lowering --swap-space. The model folder holds Mixtral-8x7B-v0.1's config.json (no
weights). The engine configs are built as the api_server does first (see _vllm033.py; `--device
cuda` stands for the user's GPU host), then LLMEngine.__init__'s _verify_args runs in its order:
ModelConfig.verify_with_parallel_config (32 heads over 8 GPUs), then
CacheConfig.verify_with_parallel_config, which compares swap x TP with the host's total memory
(get_cpu_memory(), psutil), raises over 70% at the record's own line (config.py:365) and warns
("Possibly too large swap space") over 40%.

The check is relative to the host, so the states are too. 0.3.3's --swap-space is an integer
(GiB): the broken state asks for at least 16 GiB per GPU and never less than the whole RAM per
GPU (over 70% on any host); the fixed state keeps the record's 2 GiB per GPU where 16 GiB is
within 40% of this host's RAM (no warning either), else 1 GiB per GPU where that is, else 0 (no
swap), so the proof holds on a small runner.
"""

import os

from _vllm033 import MIXTRAL_8X7B, accepted, engine_configs, write_config

TP = 8
_RAM_GIB = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
_BEFORE = max(16, int(_RAM_GIB) + 1)
_AFTER = next(gib for gib in (2, 1, 0) if gib * TP <= 0.4 * _RAM_GIB)
MODEL = "./Mixtral-8x7B-v0.1"
# The record's exampleFix states (errkb.verify.fixstates), mapped: the checkpoint name to its local config.json, and
# the record's --swap-space values (16 GiB broken, 2 GiB fixed per GPU) scaled to this runner's RAM as above.
MAPPING = {"values": {"mistralai/Mixtral-8x7B-v0.1": MODEL},
           "flag_values": {"--swap-space": {"16": str(_BEFORE), "2": str(_AFTER)}}, "append": ["--device", "cuda"]}


def setup(state):
    write_config(MODEL, MIXTRAL_8X7B)


def trigger(state):
    configs = engine_configs(state["argv"])
    model, cache, parallel = configs[0], configs[1], configs[2]
    model.verify_with_parallel_config(parallel)
    cache.verify_with_parallel_config(parallel)
    used = cache.swap_space_bytes * parallel.tensor_parallel_size / 2**30
    return (accepted(configs) + f"; swap space {used:.2f} GiB ({used / parallel.tensor_parallel_size:g} GiB x "
            f"{parallel.tensor_parallel_size} GPUs) of {_RAM_GIB:.2f} GiB RAM")
