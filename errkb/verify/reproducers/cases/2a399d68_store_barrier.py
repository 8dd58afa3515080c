"""2a399d68: new_group() called on some ranks only, so its store-based barrier times out.

A real two-rank gloo job on 127.0.0.1, each rank running the record's own program (its
exampleFix; errkb.verify.fixstates derives the 'before' from its commented-out block) as
torchrun would start it (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT): rank 0 is this process
(so torch's own exception and traceback are what the driver sees), rank 1 a child process of
the same interpreter. torch <= 2.0 ends every new_group() with a store-based barrier that
waits for every rank of the world, members of the group or not. before: only rank 0 creates
its subgroup, so rank 0's barrier sees worker_count=1 of world_size=2 and times out; after:
every rank calls new_group(ranks=[0]). The mapping shortens new_group's timeout from the
program's 30 s to 5 s so a run takes seconds. The validation is given which ranks call
new_group in each state's program (`--member-ranks` before, `--all-ranks` after).
"""

MAPPING = {"python": True, "substitute": {"timedelta(seconds=30)": "timedelta(seconds=5)"},
           "validation_argv": {"before": ["--member-ranks"], "after": ["--all-ranks"]}}

JOIN_S = 90  # the most rank 1 may take (a cold runner imports torch slowly); killed after that


def trigger(state):
    import os
    import subprocess
    import sys

    import torch.distributed as dist
    from _program import free_port, run_program

    job = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port()), "WORLD_SIZE": "2",
           "GLOO_SOCKET_IFNAME": "lo"}  # the sandbox has loopback only
    rank1 = subprocess.Popen([sys.executable, "-c", state["program"]], env={**os.environ, **job, "RANK": "1"},
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    os.environ.update({**job, "RANK": "0"})
    try:
        run_program(state)  # rank 0: its TCPStore serves the job until rank 1 is through
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
        if rank1.poll() is None:  # rank 0 raised: rank 1 gets a moment, then goes
            try:
                rank1.communicate(timeout=10)
            except subprocess.TimeoutExpired:
                rank1.kill()
                rank1.communicate()
        if dist.is_initialized():
            dist.destroy_process_group()
