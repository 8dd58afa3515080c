"""e6731f41: init_process_group("nccl") on a CPU-only torch build (no NCCL).

The states are the record's own program (errkb.verify.fixstates derives its 'before' from
its `# before:` line): `dist.init_process_group("nccl", ...)` before, the backend chosen by
`dist.is_nccl_available()` after, with its fixed port 29500 replaced by a free one. The
validation is given the backend each state's program runs with on this build (no NCCL:
"nccl" before, "gloo" after), as a user runs `python validate.py <backend>`.
"""

MAPPING = {"python": True, "substitute": {"29500": "{port}"},
           "validation_argv": {"before": ["nccl"], "after": ["gloo"]}}


def trigger(state):
    from _program import run_distributed_program

    _, backend = run_distributed_program(state)
    return f"process group up with backend {backend}"
