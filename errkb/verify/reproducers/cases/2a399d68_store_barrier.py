"""2a399d68: new_group() called on some ranks only, so its store-based barrier times out.

A real two-rank gloo job on 127.0.0.1: rank 0 is this process (so torch's own exception and
traceback are what the driver sees), rank 1 a child process of the same interpreter. torch
<= 2.0 ends every new_group() with a store-based barrier that waits for every rank of the
world, members of the group or not. before: only rank 0 creates its subgroup (the record's
exampleFix 'before'), so rank 0's barrier sees worker_count=1 of world_size=2 and times out;
after: every rank calls new_group(ranks=[0]), as new_group's documentation requires. The
barrier timeout is new_group's timeout= (the exampleFix's 30 s, here 5 s so a run takes
seconds). The state's argv says which ranks call new_group (what the validation reads).
"""

STATES = {"before": {"argv": ["--member-ranks"], "env": {}}, "after": {"argv": ["--all-ranks"], "env": {}}}

TIMEOUT_S = 5  # new_group's timeout=, which its store-based barrier waits
INIT_S = 60  # init_process_group's: rank 1 may take a while to import torch on a cold runner
JOIN_S = 60  # the most rank 1 may take; killed after that

# Rank 1: the same program on the other rank; argv: port, "--all-ranks" | "--member-ranks", timeout, init timeout.
RANK1 = r"""
import sys
from datetime import timedelta

import torch.distributed as dist

port, mode, timeout = sys.argv[1], sys.argv[2], timedelta(seconds=float(sys.argv[3]))
dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=1, world_size=2,
                        timeout=timedelta(seconds=float(sys.argv[4])))
if mode == "--all-ranks":
    dist.new_group(ranks=[0], timeout=timeout)  # not a member; called so the barrier counts this rank
# "--member-ranks": rank 1 is not in the group and never calls new_group()
store = dist.distributed_c10d._get_default_store()
store.wait(["rank0-done"], timedelta(seconds=60))  # stay until rank 0 is through (rank 0 holds the store)
dist.destroy_process_group()
"""


def trigger(state):
    import contextlib
    import os
    import socket
    import subprocess
    import sys
    from datetime import timedelta

    import torch.distributed as dist

    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")  # the sandbox has loopback only
    with socket.socket() as s:  # a free loopback port for the job's store (rank 0 serves it)
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mode = "--all-ranks" if "--all-ranks" in state["argv"] else "--member-ranks"
    timeout = timedelta(seconds=TIMEOUT_S)
    rank1 = subprocess.Popen([sys.executable, "-c", RANK1, str(port), mode, str(TIMEOUT_S), str(INIT_S)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=2,
                                timeout=timedelta(seconds=INIT_S))
        try:
            if mode == "--member-ranks":  # before: only rank 0, the group's one member, creates it
                if dist.get_rank() == 0:
                    dist.new_group(ranks=[0], timeout=timeout)
            else:  # after: every rank calls new_group(), members of the group or not
                dist.new_group(ranks=[0], timeout=timeout)
        finally:
            dist.distributed_c10d._get_default_store().set("rank0-done", "1")
        try:
            _, err = rank1.communicate(timeout=JOIN_S)
        except subprocess.TimeoutExpired:
            rank1.kill()
            _, err = rank1.communicate()
            raise RuntimeError(f"rank 1 did not finish within {JOIN_S}s; killed") from None
        if rank1.returncode != 0:
            raise RuntimeError(f"rank 1 failed (exit {rank1.returncode}): {err.strip()[-500:]}")
        return "new_group(ranks=[0]) returned on both ranks: the barrier saw world_size=2"
    finally:
        if rank1.poll() is None:  # rank 0 raised: rank 1 (told "rank0-done" if the store is up) gets a moment
            try:
                rank1.communicate(timeout=10)
            except subprocess.TimeoutExpired:
                rank1.kill()
                rank1.communicate()
        with contextlib.suppress(Exception):
            dist.destroy_process_group()
