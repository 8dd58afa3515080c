"""dd0a1508: an init_method whose URL scheme has no registered rendezvous handler.

torch registers env://, tcp:// and file:// when torch.distributed is imported, so the
message names whatever scheme the user mistyped ("localhost://" for a bare
"localhost:29500", as here). The state's argv is the init_method (what the validation reads).
"""

STATES = {"before": {"argv": ["localhost:29500"], "env": {}}, "after": {"argv": ["tcp://127.0.0.1:{port}"], "env": {}}}


def trigger(state):
    import socket

    import torch.distributed as dist

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    dist.init_process_group("gloo", init_method=state["argv"][0].format(port=port), rank=0, world_size=1)
    dist.destroy_process_group()
    return "process group initialised"
