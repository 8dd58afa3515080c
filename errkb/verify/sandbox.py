"""Run untrusted dataset code in a separate, limited process.

Dataset code (example fixes, validation snippets) is untrusted input, so every run:

* is a separate process in its own session, started in an empty temporary folder;
* gets a scrubbed environment: only what the run declares, plus a minimal PATH and a
  HOME/TMPDIR inside that folder (never the real HOME);
* runs under rlimits (CPU time, address space, file size, open files, processes);
* where the OS allows it (root, util-linux ``unshare``): its own network namespace
  (no network, or only its own loopback), its own PID namespace (every descendant dies
  with it, even one that left the process group), its own IPC namespace (SysV objects
  die with it), its own mount namespace with the root file system read-only, every
  non-system top-level folder emptied, a private ``/dev/shm``, the real HOME and
  root-owned secrets hidden, a pids cgroup (RLIMIT_NPROC does not bind root) and a
  memory cgroup for the whole run;
* started by root with those namespaces, runs as nobody with no capabilities (the
  project's own reproducer drivers, which mount, keep root and drop capabilities
  themselves);
* is killed, with its whole process group and namespace, at the wall-time limit.

Every isolation step that could not be applied is said in ``SandboxResult.notes``.
This is the parent's side; the part that runs inside the namespaces is
``errkb/verify/launcher.py``, started from an open descriptor with its spec in a memfd
(``python -I -S /dev/fd/N --launch-fd M``: no host path on a command line the code can
read). The reproducer drivers load that file by path too, so it imports nothing outside
the standard library; this module adds only ``errkb.verify.cgroups`` (the run's cgroups)
and ``errkb.cache`` (where caches live; standard library only). Every run ends in a ``finally`` that kills its
processes and removes its folder and cgroups, also when a stop signal unwinds it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from errkb.cache import cache_root
from errkb.verify import cgroups as cgroups_

OUTCOMES = ("pass", "fail", "skipped", "error", "timeout")

MINIMAL_PATH = "/usr/local/bin:/usr/bin:/bin"

# Dataset code started by root runs as this user and group (nobody/nogroup), so that no
# file readable only by root is readable to it.
UNPRIVILEGED = (65534, 65534)
LAUNCHER = Path(__file__).resolve().parent / "launcher.py"

# What a state captured from a record's exampleFix may carry into a later run: the
# configuration variables of the libraries the dataset covers, and nothing that changes
# which code runs (PATH, shell functions, the loader's LD_*, PYTHON*), whatever the prefix.
STATE_ALLOWED_PREFIXES = ("VLLM_", "TORCH_", "PYTORCH_", "CUDA_", "NCCL_", "GLOO_", "FLASHINFER_", "HF_",
                          "TRANSFORMERS_", "TOKENIZERS_", "OMP_", "MKL_", "NVIDIA_", "TP_", "DS_", "TRITON_",
                          "HIP_", "ROCR_", "HSA_", "UCX_", "XLA_", "JAX_")
STATE_ALLOWED_NAMES = frozenset({"MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK", "LOCAL_RANK",
                                 "LOCAL_WORLD_SIZE", "GROUP_RANK", "NODE_RANK", "TOKENIZERS_PARALLELISM"})
# Inside an allowed prefix, still refused: names that load a library or a plugin
# (CUDA_INJECTION64_PATH, NCCL_NET_PLUGIN, TORCH_..._PRELOAD) or point a loader at a folder.
_STATE_DENIED = re.compile(r"INJECTION|PRELOAD|PLUGIN|LIBRARY|_LIB_|LIBCUDA|_PATH$|_EXECUTABLE$|_SHELL$")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def allowed_state_env(env: dict[str, str]) -> tuple[dict[str, str], list[str]]:
    """Split a state's variables into those on the allow-list and the names dropped."""
    kept, dropped = {}, []
    for name, value in env.items():
        ok = (_ENV_NAME.match(name) and "\0" not in value and not _STATE_DENIED.search(name)
              and (name in STATE_ALLOWED_NAMES or name.startswith(STATE_ALLOWED_PREFIXES)))
        if ok:
            kept[name] = value
        else:
            dropped.append(name)
    return kept, sorted(dropped)


@dataclass(frozen=True)
class Limits:
    """Resource limits of one run. ``None`` leaves a limit as inherited."""

    wall_seconds: float = 60.0
    cpu_seconds: int | None = 30
    memory_bytes: int | None = 1 << 30  # RLIMIT_AS
    file_size_bytes: int | None = 64 << 20
    open_files: int | None = 256
    processes: int | None = 64
    output_bytes: int = 1 << 20  # kept of each of stdout and stderr
    # the run's folder is a tmpfs of this size where the mount namespace allows it (a
    # disk quota: without it, code filled the host's /tmp at 400 MB/s)
    disk_bytes: int | None = 256 << 20
    # every process of the run together (a memory cgroup where one can be made): four
    # forked children each under RLIMIT_AS held 4.8 GB, memfds and SysV segments more
    run_memory_bytes: int | None = 8 << 30


@dataclass
class SandboxResult:
    outcome: str  # pass | fail | skipped | error | timeout
    reason: str
    returncode: int | None
    duration_s: float
    stdout: str
    stderr: str
    exception_class: str | None = None
    exception_message: str | None = None
    network: str = "host"  # what was really applied: none | loopback | host
    notes: list[str] = field(default_factory=list)
    pgid: int | None = None
    pid_namespace: str | None = None  # "pid:[inode]" of the run's PID namespace, if it had one

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Capabilities:
    """What isolation this host can give (probed once per process)."""

    unshare: str | None
    namespaces: bool  # unshare --net --pid --ipc --uts --mount works
    pids_cgroup_root: Path | None
    # (version, folder) under which a run's memory cgroup is made: "v2" (memory.max) or
    # "v1" (memory.limit_in_bytes), below errkb's own cgroup so the run stays charged to it
    memory_cgroup: tuple[str, Path] | None = None


_CAPS: Capabilities | None = None


def capabilities() -> Capabilities:
    global _CAPS
    if _CAPS is None:
        _CAPS = _probe_capabilities()
    return _CAPS


def _probe_capabilities() -> Capabilities:
    unshare = shutil.which("unshare") or (os.path.exists("/usr/bin/unshare") and "/usr/bin/unshare") or None
    namespaces = False
    if unshare:
        try:
            probe = subprocess.run(
                [unshare, "--net", "--pid", "--ipc", "--uts", "--fork", "--mount", "--propagation", "private", "true"],
                capture_output=True,
                timeout=10,
            )
            namespaces = probe.returncode == 0
        except (OSError, subprocess.TimeoutExpired):
            namespaces = False
    return Capabilities(unshare=unshare, namespaces=namespaces, pids_cgroup_root=cgroups_.pids_cgroup_root(),
                        memory_cgroup=cgroups_.memory_cgroup_parent())


def has_mount_namespace() -> bool:
    """Whether runs can use ``unshare --mount`` (needed by reproducers that fake nodes)."""
    return capabilities().namespaces


def run(
    argv: list[str],
    *,
    env: dict[str, str] | None = None,
    limits: Limits = Limits(),
    network: str = "none",
    files: dict[str, str | bytes] | None = None,
    private_shm: bool = True,
    stdin: str | None = None,
    readable: list[str | Path] = (),
    keep_capabilities: bool = False,
    gpus: bool = False,
) -> SandboxResult:
    """Run ``argv`` in a fresh sandbox and classify how it ended.

    ``network``: "none" (own namespace, loopback down), "loopback" (own namespace,
    only its own 127.0.0.1) or "host". ``files`` are written into the empty working
    folder first (name -> content). ``env`` is everything the code gets besides a
    minimal PATH (overridable) and HOME/TMPDIR inside the working folder.
    ``readable``: folders the code needs that may lie under the real HOME (kept
    visible, read-only, when the HOME is hidden). ``keep_capabilities``: only for the
    project's own reproducer drivers, which need ``unshare``/``mount``; dataset code
    always runs with every capability dropped, so root inside cannot undo the mounts.
    Started by root, dataset code runs as nobody; a driver that keeps its capabilities
    finds that user in ``ERRKB_SANDBOX_RUN_AS`` ("uid:gid", absent when nobody could
    not reach the interpreter) and drops to it with ``drop_capabilities``.
    With a mount namespace the run gets a minimal, read-only /dev (null, zero, full,
    random, urandom, tty, the /proc links, its own /dev/shm); ``gpus`` adds the host's
    /dev/nvidia* and /dev/dri for reproducers that need a GPU.
    """
    if network not in ("none", "loopback", "host"):
        raise ValueError(f"network must be none, loopback or host, not {network!r}")
    for name in files or {}:
        if Path(name).is_absolute() or ".." in Path(name).parts:
            raise ValueError(f"sandbox file {name!r} would land outside the working folder")
    caps = capabilities()
    notes: list[str] = []
    base = Path(tempfile.mkdtemp(prefix="errkb-sandbox-", dir=_temp_root()))
    work = base / "work"
    (work / "home").mkdir(parents=True)
    (work / "tmp").mkdir()
    for name, content in (files or {}).items():
        target = work / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content.encode() if isinstance(content, str) else content)

    run_env = {"PATH": MINIMAL_PATH, "LANG": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1"}
    run_env.update(env or {})
    run_env.update({"HOME": str(work / "home"), "TMPDIR": str(work / "tmp"), "PWD": str(work)})

    cgroup = cgroups_.make_pids_cgroup(caps.pids_cgroup_root, limits.processes) if limits.processes else None
    if limits.processes and cgroup is None:
        notes.append("process limit: RLIMIT_NPROC only (no pids cgroup here): it does not bind root, "
                     "and it counts every process of the run's user on the host")
    memory_cgroup = cgroups_.make_memory_cgroup(caps.memory_cgroup, limits.run_memory_bytes) if limits.run_memory_bytes else None
    if limits.run_memory_bytes and memory_cgroup is None:
        notes.append("memory of the whole run not bounded (no writable memory cgroup here): only each "
                     "process's address space (RLIMIT_AS)")
    cgroups = [c for c in (cgroup, memory_cgroup) if c is not None]

    use_ns = caps.namespaces
    if not use_ns:
        notes.append("no namespaces (unshare unavailable or not permitted): network, PID and mount isolation "
                     "(private /tmp and /run, minimal /dev, hidden HOME and store) not applied")
    # Only with the mount namespace: it is what makes an interpreter under root's HOME
    # reachable to another user (the HOME is replaced by a tmpfs and what the run needs
    # is bound back). A run that keeps its capabilities gets the folder prepared all the
    # same, and is told the user in ERRKB_SANDBOX_RUN_AS to drop to once it has mounted.
    run_as = None
    if use_ns and os.geteuid() == 0:
        if _maps_id("/proc/self/uid_map", UNPRIVILEGED[0]) and _maps_id("/proc/self/gid_map", UNPRIVILEGED[1]):
            run_as = UNPRIVILEGED
        else:
            notes.append(f"ran as root without capabilities: uid {UNPRIVILEGED[0]} is not mapped in this user namespace")
    launch_limits = asdict(limits)
    if cgroup is not None:
        # The cgroup counts this run's tasks alone; RLIMIT_NPROC would count every task
        # of the run's user on the host (other runs, daemons running as nobody).
        launch_limits["processes"] = None
    spec = {
        "argv": argv,
        "env": run_env,
        "cwd": str(work),
        "base": str(base),
        "limits": launch_limits,
        "mounts": use_ns,
        "private_shm": use_ns and private_shm,
        "gpus": gpus,  # keep /dev/nvidia* (and /dev/dri) in the run's minimal /dev
        "loopback_up": use_ns and network == "loopback",
        "hide_home": _real_home(),
        "hide_files": _store_files(),
        "keep_visible": _paths_to_keep(argv, readable),
        "cgroups": [str(c) for c in cgroups],
        "drop_capabilities": not keep_capabilities,
        "run_as": run_as,
    }
    # The launcher reports how the code ended through a pipe, not a file in the
    # writable folder, so the code cannot forge its own outcome.
    control_read, control_write = os.pipe()
    spec["control_fd"] = control_write
    # The spec and the launcher's own file reach it as descriptors, not host paths: the
    # launcher's command line (/proc/1/cmdline) is readable by the code it starts.
    spec_fd = os.memfd_create("errkb-sandbox-spec", 0)
    os.write(spec_fd, json.dumps(spec).encode())
    os.lseek(spec_fd, 0, os.SEEK_SET)
    script_fd = os.open(LAUNCHER, os.O_RDONLY)
    launcher = [sys.executable, "-I", "-S", f"/dev/fd/{script_fd}", "--launch-fd", str(spec_fd)]
    if use_ns:
        # --mount-proc: a /proc of the run's own PID namespace. The host's would show host
        # processes, and /proc/<pid>/root of one running as the same user is a way into
        # the host's writable mounts. --ipc: SysV shared memory, semaphores and message
        # queues (and POSIX ones) die with the run; --uts: its host name is its own.
        ns_flags = ["--pid", "--ipc", "--uts", "--fork", "--kill-child", "--mount", "--propagation", "private",
                    "--mount-proc"]
        if network != "host":
            ns_flags.insert(0, "--net")
        command = [caps.unshare, *ns_flags, "--", *launcher]
        applied_network = network
    else:
        command = launcher
        applied_network = "host"
        if network != "host":
            notes.append(f"network {network!r} requested but not applied: the run had the host network")

    stdout_path, stderr_path = base / "stdout", base / "stderr"
    started = time.monotonic()
    timed_out = False
    proc = None
    control: dict = {}
    oom_kills = 0
    # Everything from here ends in the finally below, also when a stop signal (SIGTERM,
    # Ctrl-C: the CLI turns them into an exception) arrives mid-run: the run's processes,
    # its folder (with the record's code) and its cgroups go with it.
    try:
        # Read back through these same file objects, never by name: code that runs as root
        # without capabilities owns the folder and could swap the names for links.
        with open(stdout_path, "w+b") as out, open(stderr_path, "w+b") as err:
            proc = subprocess.Popen(
                command,
                stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                env={"PATH": MINIMAL_PATH, "LANG": "C.UTF-8"},
                cwd=work,
                start_new_session=True,
                pass_fds=(control_write, spec_fd, script_fd),
            )
            for fd in (control_write, spec_fd, script_fd):
                os.close(fd)
            control_write = spec_fd = script_fd = None
            pgid = proc.pid
            try:
                if stdin is not None:
                    try:
                        proc.stdin.write(stdin.encode())
                        proc.stdin.close()
                    except BrokenPipeError:
                        pass
                proc.wait(timeout=limits.wall_seconds)
            except subprocess.TimeoutExpired:
                timed_out = True
            finally:
                _kill_everything(proc, pgid, cgroups)
            duration = time.monotonic() - started
            stdout, out_cut = _read_capped(out, limits.output_bytes)
            stderr, err_cut = _read_capped(err, limits.output_bytes)
        control = _read_control(control_read)
        control_read = None
        if memory_cgroup is not None:
            oom_kills = cgroups_.oom_kills(memory_cgroup)
    finally:
        for fd in (control_write, spec_fd, script_fd, control_read):
            if fd is not None:
                os.close(fd)
        if proc is not None and proc.returncode is None:
            _kill_everything(proc, proc.pid, cgroups)
        try:
            shutil.rmtree(base)
        except OSError as e:
            notes.append(f"could not remove the working folder: {e}")
        for c in cgroups:
            cgroups_.remove_cgroup(c)
    notes.extend(control.get("notes", []))
    if out_cut or err_cut:
        notes.append(f"output capped at {limits.output_bytes} bytes per stream")
    launch_error = control.get("launch_error")
    returncode = proc.returncode
    if "signal" in control:
        returncode = -int(control["signal"])
    elif "exit_status" in control:
        returncode = int(control["exit_status"])

    result = SandboxResult(
        outcome="error",
        reason="",
        returncode=returncode,
        duration_s=round(duration, 3),
        stdout=stdout,
        stderr=stderr,
        network=applied_network,
        notes=notes,
        pgid=pgid,
        pid_namespace=control.get("pid_namespace"),
    )
    result.exception_class, result.exception_message = parse_exception(stderr)
    if launch_error:
        result.outcome, result.reason = "error", f"sandbox could not start the code: {launch_error}"
    elif timed_out:
        result.outcome, result.reason = "timeout", f"wall-time limit of {limits.wall_seconds:g}s reached; process group killed"
    elif oom_kills:
        result.outcome, result.reason = "error", (
            f"memory limit of the run ({limits.run_memory_bytes} bytes, all its processes together) reached: "
            f"{oom_kills} process(es) killed")
    else:
        result.outcome, result.reason = classify(returncode, stderr, limits, result.exception_class, result.exception_message)
    if applied_network != network:
        # Said in the outcome itself, not only in the notes: this run was not cut off.
        result.reason += f" [network not isolated: {network!r} needs root and util-linux unshare]"
    return result


def classify(
    returncode: int | None,
    stderr: str,
    limits: Limits,
    exception_class: str | None,
    exception_message: str | None,
) -> tuple[str, str]:
    """Outcome and reason of a run that ended by itself (not by the wall timeout)."""
    if returncode == 0:
        return "pass", "exit status 0"
    if returncode is not None and returncode < 0:
        sig = -returncode
        name = signal.Signals(sig).name if sig in signal.Signals._value2member_map_ else f"signal {sig}"
        if sig == signal.SIGXCPU or (sig == signal.SIGKILL and limits.cpu_seconds and "CPU" in stderr):
            return "timeout", f"CPU-time limit of {limits.cpu_seconds}s reached ({name})"
        if sig == signal.SIGXFSZ:
            return "error", f"file-size limit of {limits.file_size_bytes} bytes reached ({name})"
        return "error", f"killed by {name}"
    exc = f"{exception_class}: {exception_message}" if exception_class else None
    if exception_class == "MemoryError" or "Cannot allocate memory" in stderr[-2000:]:
        return "error", f"memory limit of {limits.memory_bytes} bytes reached ({exc or 'out of memory'})"
    tail = stderr[-2000:]
    if "[Errno 27]" in tail or "File too large" in tail:
        return "error", f"file-size limit of {limits.file_size_bytes} bytes reached ({exc or 'File too large'})"
    if "[Errno 24]" in tail or "Too many open files" in tail:
        return "error", f"open-file limit of {limits.open_files} reached ({exc or 'Too many open files'})"
    if "[Errno 11]" in tail or "Cannot fork" in tail or "fork: retry" in tail or "Resource temporarily unavailable" in tail:
        return "error", f"process limit of {limits.processes} reached ({exc or 'cannot fork'})"
    if exc:
        return "fail", exc
    last = next((line for line in reversed(stderr.splitlines()) if line.strip()), "")
    return "fail", f"exit status {returncode}" + (f": {last.strip()[:300]}" if last else "")


_EXC_LINE = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Warning|Failure|Fault)\w*)(?::\s?(.*))?$")


def parse_exception(stderr: str) -> tuple[str | None, str | None]:
    """The exception class and message of the last Python traceback in ``stderr``."""
    start = stderr.rfind("Traceback (most recent call last):")
    if start < 0:
        return None, None
    lines = stderr[start:].splitlines()[1:]
    # Frame lines are indented; the first unindented line after them starts the
    # exception, whose message may continue over several lines.
    for i, line in enumerate(lines):
        if line and not line.startswith((" ", "\t")):
            m = _EXC_LINE.match(line)
            if not m:
                continue
            message = "\n".join([m.group(2) or "", *lines[i + 1 :]]).strip()
            return m.group(1).rsplit(".", 1)[-1], message
    return None, None


def _interpreter_roots(python: Path) -> set[str]:
    """The folders a Python interpreter (or a venv's) needs: its prefix and its base prefix."""
    roots: set[str] = set()
    exe = python if python.is_absolute() else Path(shutil.which(str(python)) or python)
    venv = exe.parent.parent
    cfg = venv / "pyvenv.cfg"
    if cfg.is_file():
        roots.add(str(venv.resolve()))
        for line in cfg.read_text().splitlines():
            key, _, value = line.partition("=")
            if key.strip() == "home" and value.strip():
                roots.add(str(Path(value.strip()).resolve().parent))
    resolved = exe.resolve()
    roots.add(str(resolved.parent.parent))
    return roots


def _paths_to_keep(argv: list[str], readable) -> list[str]:
    keep = {str(Path(p).resolve()) for p in readable}
    keep |= _interpreter_roots(Path(sys.executable))  # the launcher itself
    keep.add(str(Path(__file__).resolve().parent))
    if argv and os.sep in argv[0]:
        keep |= _interpreter_roots(Path(argv[0]))
    return sorted(keep)


def _store_files() -> list[str]:
    """Files the run must not read though they may be world-readable: every regular
    file this process holds open (the store verify is reading, its WAL) and the stores
    errkb would open ($ERRKB_DB, the cache folder's)."""
    found = set()
    try:
        for fd in os.listdir("/proc/self/fd"):
            try:
                target = os.readlink(f"/proc/self/fd/{fd}")
            except OSError:
                continue
            if target.startswith("/") and os.path.isfile(target):
                found.add(target)
    except OSError:
        pass
    for name in ("ERRKB_DB",):
        if os.environ.get(name):
            found.update(p for p in (os.environ[name], os.environ[name] + ".wal") if os.path.isfile(p))
    cache = str(cache_root())
    if os.path.isdir(cache):
        found.update(os.path.join(cache, n) for n in os.listdir(cache) if ".duckdb" in n and os.path.isfile(os.path.join(cache, n)))
    return sorted(found)


def _temp_root() -> str:
    """Where runs get their folder: the temp folder, unless it lies inside the real HOME,
    which the run's mount namespace replaces (and its folder with it)."""
    root = tempfile.gettempdir()
    home = _real_home()
    if home and (root.rstrip("/") + "/").startswith(home.rstrip("/") + "/") and os.path.isdir("/tmp"):
        return "/tmp"
    return root


def _maps_id(map_file: str, wanted: int) -> bool:
    """Whether this user namespace maps ``wanted`` (a uid_map / gid_map file): as root
    in a namespace that maps only uid 0 (rootless containers), nobody does not exist."""
    try:
        with open(map_file) as f:
            for line in f:
                inside, _outside, count = (int(n) for n in line.split())
                if inside <= wanted < inside + count:
                    return True
    except (OSError, ValueError):
        pass
    return False


def _real_home() -> str | None:
    home = os.environ.get("HOME") or os.path.expanduser("~")
    return home if home and home != "/" and os.path.isdir(home) else None


def _kill_everything(proc: subprocess.Popen, pgid: int, cgroups: list[Path]) -> None:
    """End the run's process group, PID namespace and cgroup members, then reap."""
    for _ in range(50):
        try:
            os.killpg(pgid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        stray = [pid for c in cgroups for pid in cgroups_.cgroup_pids(c)]
        for pid in stray:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        try:
            proc.wait(timeout=0.1)
        except subprocess.TimeoutExpired:
            continue
        if not stray and not _group_alive(pgid):
            return
        time.sleep(0.02)
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        pass


def _group_alive(pgid: int) -> bool:
    """Whether a process of the group still runs (zombies, dead but not yet reaped by
    init, do not count)."""
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[2]) == pgid and fields[0] != "Z":
                return True
    return False


def _read_capped(f, cap: int) -> tuple[str, bool]:
    try:
        size = os.fstat(f.fileno()).st_size
        f.seek(0)
        data = f.read(cap)
    except OSError:
        return "", False
    text = data.decode("utf-8", errors="replace")
    if size > cap:
        text += f"\n[errkb: output truncated, {size - cap} more bytes]"
        return text, True
    return text, False


def _read_control(fd: int) -> dict:
    chunks = []
    try:
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
    except OSError:
        pass
    finally:
        os.close(fd)
    control: dict = {}
    for line in b"".join(chunks).splitlines():
        try:
            control.update(json.loads(line))
        except ValueError:
            continue
    return control
