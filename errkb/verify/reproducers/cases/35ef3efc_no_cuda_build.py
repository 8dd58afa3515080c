"""35ef3efc: moving a model to CUDA with a CPU-only torch build.

The states are the record's own program (errkb.verify.fixstates derives its 'before' from
its commented-out `# before` block): `model.cuda()` unconditionally before, the device
chosen by `torch.cuda.is_available()` after. The validation is given the device each
state's program asks for ("cuda" before; "auto", cuda when usable else cpu, after), as a
user runs `python validate.py <device>`.
"""

MAPPING = {"python": True, "validation_argv": {"before": ["cuda"], "after": ["auto"]}}


def trigger(state):
    from _program import run_program

    namespace = run_program(state)
    return f"model on {next(namespace['model'].parameters()).device}"
