"""c7098e29: plan() without q_data_type (default float16), run() given a bfloat16 q (flashinfer-python 0.7.4).

The user's program is the record's exampleFix on a GPU (plan() then run()); here the real
flashinfer check run() calls first, _check_cached_qkv_data_type, is called directly with
the dtypes plan() would have cached (see _flashinfer_plan.py): CPU only, no kernel runs.
"""

from _flashinfer_plan import run_check

STATES = {"before": {"argv": ["--q-dtype", "bfloat16", "--kv-cache-dtype", "bfloat16"], "env": {}},
          "after": {"argv": ["--q-dtype", "bfloat16", "--kv-cache-dtype", "bfloat16",
                             "--q-data-type", "bfloat16", "--kv-data-type", "bfloat16"], "env": {}}}


def trigger(state):
    return run_check(state["argv"])
