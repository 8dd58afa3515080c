"""Running a record's Python exampleFix state as written: the program the record's fix gives (its
'after' as written, its 'before' derived from its own markers by errkb.verify.fixstates), with the
case's named substitutions (a fixed port -> a free one), in this process, as ``python fix.py`` would."""

import socket


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_program(state: dict, **values: str) -> dict:
    """Execute the state's program with each ``{name}`` placeholder the mapping put in it filled;
    its module namespace is returned (what it defined, for the case's report)."""
    program = state["program"]
    for name, value in values.items():
        program = program.replace("{" + name + "}", str(value))
    namespace = {"__name__": "__main__"}
    exec(compile(program, "<exampleFix>", "exec"), namespace)
    return namespace


def run_distributed_program(state: dict) -> tuple[dict, str | None]:
    """A torch.distributed program (its fixed port, put as ``{port}`` by the mapping, replaced
    by a free one): its namespace and the backend of the default process group it left up
    (None when none), which is destroyed after, also when the program raises."""
    import torch.distributed as dist

    try:
        namespace = run_program(state, port=free_port())
        return namespace, (str(dist.get_backend()) if dist.is_initialized() else None)
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()
