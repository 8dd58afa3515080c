"""3e53cb19: init_process_group called a second time in one process.

before: the program initialises unconditionally (twice: a helper does it again);
after: it initialises only when dist.is_initialized() is False. The state's argv says
which (what the validation reads).
"""

STATES = {"before": {"argv": ["--always-init"], "env": {}}, "after": {"argv": ["--init-once"], "env": {}}}


def trigger(state):
    import socket

    import torch.distributed as dist

    def init():
        if "--init-once" in state["argv"] and dist.is_initialized():
            return
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1)

    init()
    try:
        init()  # the second call, e.g. from a library helper
    finally:
        dist.destroy_process_group()
    return "second call skipped: the group was already initialised"
