"""c7098e29: plan() without q_data_type (default float16), run() given a bfloat16 q (flashinfer-python 0.7.4).

The states are the record's own program (errkb.verify.fixstates; its 'before' from its
`# before:` line): `wrapper.plan(...)` without dtypes before, with `q_data_type=torch.bfloat16,
kv_data_type=torch.bfloat16` after. The program allocates its workspace on a GPU, so it is
not run here: its plan() call is read from its code (``call_keywords``), each keyword it passes
becoming the flag of the same name, and the real flashinfer check run() calls first,
_check_cached_qkv_data_type, is called with the dtypes plan() caches from those keywords (its
own defaults for a keyword not passed; see _flashinfer_plan.py): CPU only, no kernel runs.
What the program never shows, the q and KV cache run() is given, is the record's (bfloat16,
from its message), appended to both states; the validation gets the same flags.
"""

from _flashinfer_plan import PLAN_KEYWORDS, run_check

MAPPING = {"python": True, "call_keywords": PLAN_KEYWORDS,
           "append": ["--q-dtype", "bfloat16", "--kv-cache-dtype", "bfloat16"]}


def trigger(state):
    return run_check(state["argv"])
