"""012b1dcb: torch.distributed used before init_process_group.

before: the program calls dist.get_rank() with no process group; after: it first
initialises a one-process gloo group (torchrun's variables, set here for a local run).
The state's argv is what the validation code reads: whether the program initialises.
"""

STATES = {
    "before": {"argv": ["--no-init"], "env": {}},
    "after": {"argv": ["--init"], "env": {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "0", "RANK": "0", "WORLD_SIZE": "1"}},
}


def trigger(state):
    import torch.distributed as dist

    if "--init" in state["argv"]:
        import socket

        with socket.socket() as s:  # a free loopback port for the rendezvous
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1)
    rank = dist.get_rank()
    dist.destroy_process_group()
    return f"dist.get_rank() returned {rank}"
