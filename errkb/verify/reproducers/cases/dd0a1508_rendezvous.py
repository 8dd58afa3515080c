"""dd0a1508: an init_method whose URL scheme has no registered rendezvous handler.

torch registers env://, tcp:// and file:// when torch.distributed is imported, so the
message names whatever scheme the user mistyped ("localhost://" for a bare
"localhost:29500", as here). The state is the record's own program; its argv is the init_method
(what the validation reads).
"""

# The record's exampleFix run as written (errkb.verify.fixstates derives its 'before' from its `# before:` line),
# its fixed port 29500 replaced by a free one; the validation is given the program's init_method, as the user
# runs it (`python validate.py <init_method>`).
MAPPING = {"python": True, "substitute": {"29500": "{port}"}, "argv_from": r'init_method="([^"]*)"'}


def trigger(state):
    from _program import run_distributed_program

    run_distributed_program(state)
    return "process group initialised"
