"""e6731f41: init_process_group("nccl") on a CPU-only torch build (no NCCL).

The state's argv is the backend the launch asks for (what the validation reads).
"""

STATES = {"before": {"argv": ["nccl"], "env": {}}, "after": {"argv": ["gloo"], "env": {}}}


def trigger(state):
    import socket

    import torch.distributed as dist

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    dist.init_process_group(state["argv"][0], init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1)
    backend = dist.get_backend()
    dist.destroy_process_group()
    return f"process group up with backend {backend}"
