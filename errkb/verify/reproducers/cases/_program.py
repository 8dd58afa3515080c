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
