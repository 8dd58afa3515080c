"""3e53cb19: init_process_group called a second time in one process.

The states are the record's own program (errkb.verify.fixstates derives its 'before' from
its `# before:` line): a helper has already initialised the group, and the program calls
init_process_group again unconditionally before, only when dist.is_initialized() is False
after; its fixed port 29500 is replaced by a free one. The validation runs as the record
says, `python validate.py program.py`, on the state's program written to program.py.
"""

MAPPING = {"python": True, "substitute": {"29500": "{port}"},
           "validation_argv": {"before": ["program.py"], "after": ["program.py"]}}


def setup(state):
    from _program import free_port

    with open("program.py", "w") as f:  # the user's program, which the validation runs
        f.write(state["program"].replace("{port}", str(free_port())))


def trigger(state):
    from _program import run_distributed_program

    run_distributed_program(state)
    return "second call skipped: the group was already initialised"
