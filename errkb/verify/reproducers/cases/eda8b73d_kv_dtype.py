"""eda8b73d: plan(kv_data_type=bfloat16) for a float8_e4m3fn paged KV cache (flashinfer-python 0.7.4).

The states are the record's own program (errkb.verify.fixstates; its 'before' from its
`# before:` line): `wrapper.plan(..., kv_data_type=torch.bfloat16)` before,
`kv_data_type=torch.float8_e4m3fn` after. The program allocates its workspace on a GPU, so it
is not run here: its plan() call is read from its code (``call_keywords``) and the real
flashinfer check run() calls first, _check_cached_qkv_data_type, is called with the dtypes
plan() caches from those keywords (see _flashinfer_plan.py): CPU only, no kernel runs. What
the program never shows, the q and KV cache run() is given, is the record's (a bfloat16 q, a
float8_e4m3fn cache, from its message), appended to both states; the validation gets the same flags.
"""

from _flashinfer_plan import PLAN_KEYWORDS, run_check

MAPPING = {"python": True, "call_keywords": PLAN_KEYWORDS,
           "append": ["--q-dtype", "bfloat16", "--kv-cache-dtype", "float8_e4m3fn"]}


def trigger(state):
    return run_check(state["argv"])
