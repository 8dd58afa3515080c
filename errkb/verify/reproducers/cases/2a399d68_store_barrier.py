"""2a399d68: the store-based barrier after a group's creation times out when not every
rank it waits for arrives.

torch (>= 2.1) runs that barrier only with TORCH_DIST_INIT_BARRIER=1. A two-rank job
(rank 1 is a second process started here) where only rank 0 calls
dist.new_group(ranks=[0]): without use_local_synchronization the barrier waits for the
whole world (2) on the default store, and rank 1 never comes. With
use_local_synchronization=True it waits only for the group's own ranks. The state's
argv says which (what the validation reads). Takes ~10 s: torch polls the barrier at
that interval.
"""

import os
import subprocess
import sys

STATES = {
    "before": {"argv": ["--global-sync"], "env": {"TORCH_DIST_INIT_BARRIER": "1"}},
    "after": {"argv": ["--local-sync"], "env": {"TORCH_DIST_INIT_BARRIER": "1"}},
}


def _port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _init(rank: int, port: int) -> None:
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)


def trigger(state):
    from datetime import timedelta

    import torch.distributed as dist

    port = _port()
    # Rank 1 joins the default group, then waits on its stdin (never for the subgroup).
    peer = subprocess.Popen([sys.executable, "-I", os.path.abspath(__file__), str(port)], stdin=subprocess.PIPE)
    try:
        _init(0, port)
        local = "--local-sync" in state["argv"]
        dist.new_group(ranks=[0], timeout=timedelta(seconds=2), use_local_synchronization=local)
        return "new_group([0]) returned; rank 1 was not waited for"
    finally:
        peer.kill()
        peer.wait(timeout=30)


if __name__ == "__main__":
    _init(1, int(sys.argv[1]))
    sys.stdin.read()
