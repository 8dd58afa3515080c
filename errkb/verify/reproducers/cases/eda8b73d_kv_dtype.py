"""eda8b73d: plan(kv_data_type=bfloat16) for a float8_e4m3fn paged KV cache (flashinfer-python 0.7.4).

The user's program is the record's exampleFix on a GPU (plan() then run()); here the real
flashinfer check run() calls first, _check_cached_qkv_data_type, is called directly with
the dtypes plan() would have cached (see _flashinfer_plan.py): CPU only, no kernel runs.
"""

from _flashinfer_plan import run_check

BASE = ["--q-dtype", "bfloat16", "--q-data-type", "bfloat16", "--kv-cache-dtype", "float8_e4m3fn"]
STATES = {"before": {"argv": BASE + ["--kv-data-type", "bfloat16"], "env": {}},
          "after": {"argv": BASE + ["--kv-data-type", "float8_e4m3fn"], "env": {}}}


def trigger(state):
    return run_check(state["argv"])
