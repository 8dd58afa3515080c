"""Run untrusted dataset code in a separate, limited process.

Dataset code (example fixes, validation snippets) is untrusted input, so every run:

* is a separate process in its own session, started in an empty temporary folder;
* gets a scrubbed environment: only what the run declares, plus a minimal PATH and a
  HOME/TMPDIR inside that folder (never the real HOME);
* runs under rlimits (CPU time, address space, file size, open files, processes);
* where the OS allows it (root, util-linux ``unshare``): its own network namespace
  (no network, or only its own loopback), its own PID namespace (every descendant dies
  with it, even one that left the process group), its own mount namespace with the
  root file system read-only, a private ``/dev/shm``, the real HOME and root-owned
  secrets hidden, and a pids cgroup, because RLIMIT_NPROC does not bind root;
* started by root with those namespaces, runs as nobody with no capabilities (the
  project's own reproducer drivers, which mount, keep root and drop capabilities
  themselves);
* is killed, with its whole process group and namespace, at the wall-time limit.

Every isolation step that could not be applied is said in ``SandboxResult.notes``.
This file is also the launcher that runs inside the namespaces (``python sandbox.py
--launch SPEC``), so it imports nothing outside the standard library.
"""

from __future__ import annotations

import ctypes
import json
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path

OUTCOMES = ("pass", "fail", "skipped", "error", "timeout")

MINIMAL_PATH = "/usr/local/bin:/usr/bin:/bin"

# Dataset code started by root runs as this user and group (nobody/nogroup), so that no
# file readable only by root is readable to it.
UNPRIVILEGED = (65534, 65534)


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
    namespaces: bool  # unshare --net --pid --mount works
    pids_cgroup_root: Path | None


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
                [unshare, "--net", "--pid", "--fork", "--mount", "--propagation", "private", "true"],
                capture_output=True,
                timeout=10,
            )
            namespaces = probe.returncode == 0
        except (OSError, subprocess.TimeoutExpired):
            namespaces = False
    return Capabilities(unshare=unshare, namespaces=namespaces, pids_cgroup_root=_pids_cgroup_root())


def _pids_cgroup_root() -> Path | None:
    for root in (Path("/sys/fs/cgroup/pids"), Path("/sys/fs/cgroup")):
        if (root / "cgroup.procs").exists() and os.access(root, os.W_OK):
            probe = root / f"errkb-probe-{uuid.uuid4().hex[:8]}"
            try:
                probe.mkdir()
            except OSError:
                continue
            try:
                if (probe / "pids.max").exists():
                    return root
            finally:
                try:
                    probe.rmdir()
                except OSError:
                    pass
    return None


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

    cgroup = _make_cgroup(caps, limits) if limits.processes else None
    if limits.processes and cgroup is None:
        notes.append("process limit: RLIMIT_NPROC only (no pids cgroup here): it does not bind root, "
                     "and it counts every process of the run's user on the host")

    use_ns = caps.namespaces
    if not use_ns:
        notes.append("no namespaces (unshare unavailable or not permitted): network, PID and mount isolation not applied")
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
        "loopback_up": use_ns and network == "loopback",
        "hide_home": _real_home(),
        "hide_files": _store_files(),
        "keep_visible": _paths_to_keep(argv, readable),
        "cgroup": str(cgroup) if cgroup else None,
        "drop_capabilities": not keep_capabilities,
        "run_as": run_as,
    }
    # The launcher reports how the code ended through a pipe, not a file in the
    # writable folder, so the code cannot forge its own outcome.
    control_read, control_write = os.pipe()
    spec["control_fd"] = control_write
    (base / "spec.json").write_text(json.dumps(spec))
    launcher = [sys.executable, "-I", "-S", str(Path(__file__).resolve()), "--launch", str(base / "spec.json")]
    if use_ns:
        # --mount-proc: a /proc of the run's own PID namespace. The host's would show host
        # processes, and /proc/<pid>/root of one running as the same user is a way into
        # the host's writable mounts.
        ns_flags = ["--pid", "--fork", "--kill-child", "--mount", "--propagation", "private", "--mount-proc"]
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
            pass_fds=(control_write,),
        )
        os.close(control_write)
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
            _kill_everything(proc, pgid, cgroup)
        duration = time.monotonic() - started
        stdout, out_cut = _read_capped(out, limits.output_bytes)
        stderr, err_cut = _read_capped(err, limits.output_bytes)
    control = _read_control(control_read)
    notes.extend(control.get("notes", []))
    if out_cut or err_cut:
        notes.append(f"output capped at {limits.output_bytes} bytes per stream")
    launch_error = control.get("launch_error")
    returncode = proc.returncode
    if "signal" in control:
        returncode = -int(control["signal"])
    elif "exit_status" in control:
        returncode = int(control["exit_status"])
    try:
        shutil.rmtree(base)
    except OSError as e:
        notes.append(f"could not remove the working folder: {e}")
    if cgroup is not None:
        _remove_cgroup(cgroup)

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
    cache = os.environ.get("ERRKB_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "errkb")
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


def _make_cgroup(caps: Capabilities, limits: Limits) -> Path | None:
    if caps.pids_cgroup_root is None:
        return None
    path = caps.pids_cgroup_root / f"errkb-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    try:
        path.mkdir()
        # +2: the unshare process and the launcher are in the group too.
        (path / "pids.max").write_text(str(limits.processes + 2))
        return path
    except OSError:
        return None


def _cgroup_pids(cgroup: Path) -> list[int]:
    try:
        return [int(p) for p in (cgroup / "cgroup.procs").read_text().split()]
    except (OSError, ValueError):
        return []


def _kill_everything(proc: subprocess.Popen, pgid: int, cgroup: Path | None) -> None:
    """End the run's process group, PID namespace and cgroup members, then reap."""
    for _ in range(50):
        try:
            os.killpg(pgid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        stray = _cgroup_pids(cgroup) if cgroup else []
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


def _remove_cgroup(cgroup: Path) -> None:
    for _ in range(50):
        try:
            cgroup.rmdir()
            return
        except OSError:
            for pid in _cgroup_pids(cgroup):
                try:
                    os.kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
            time.sleep(0.05)


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


# ---------------------------------------------------------------------------
# The launcher: runs inside the namespaces, sets them up, then execs the code.
# ---------------------------------------------------------------------------

MS_RDONLY, MS_NOSUID, MS_NODEV, MS_REMOUNT, MS_BIND, MS_REC = 1, 2, 4, 32, 4096, 16384
MNT_DETACH = 2


def _mount(libc, source: str | None, target: str, fstype: str | None, flags: int, data: str | None) -> None:
    enc = lambda s: s.encode() if s is not None else None  # noqa: E731
    if libc.mount(enc(source), enc(target), enc(fstype), flags, enc(data)) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"mount {target}: {os.strerror(err)}")


def _mount_points() -> list[str]:
    points = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            # Field 5 is the mount point, with space, tab, newline and backslash octal-escaped.
            raw = line.split()[4]
            points.append(re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), raw))
    return points


def _remount_all_read_only(libc, writable: str, notes: list[str], private: tuple[str, ...] = ()) -> None:
    for point in _mount_points():
        if point == writable or point.startswith(writable.rstrip("/") + "/") or point in private:
            continue
        try:
            _mount(libc, None, point, None, MS_REMOUNT | MS_BIND | MS_RDONLY, None)
        except OSError as e:
            if point == "/":
                notes.append(f"root file system left writable: {e}")
            elif e.errno not in (2, 22):  # vanished or not a mount point any more
                notes.append(f"{point} left writable: {e}")


def _reachable_by_others(path: str) -> bool:
    """Whether a user that owns nothing can walk down to ``path`` (every folder on the
    way searchable by others), as this mount namespace shows it."""
    current = Path(path)
    for folder in [*reversed(current.parents), current]:
        try:
            if folder.is_dir() and not folder.stat().st_mode & 0o001:
                return False
        except OSError:
            return False
    return True


def _hand_over(folder: str, uid: int, gid: int) -> None:
    """Make the run's folder (and what was written into it) the unprivileged user's."""
    os.lchown(folder, uid, gid)
    for root, dirs, files in os.walk(folder):
        for name in dirs + files:
            os.lchown(os.path.join(root, name), uid, gid)


def _loopback_up() -> None:
    import fcntl
    import socket
    import struct

    SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP = 0x8913, 0x8914, 0x1
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        ifreq = struct.pack("16sH22x", b"lo", 0)
        flags = struct.unpack("16sH22x", fcntl.ioctl(s, SIOCGIFFLAGS, ifreq))[1]
        fcntl.ioctl(s, SIOCSIFFLAGS, struct.pack("16sH22x", b"lo", flags | IFF_UP))


def _hide_folder(libc, folder: str, keep: list[str], base: str) -> None:
    """Empty tmpfs over ``folder``, with the folders of ``keep`` inside it bound back
    read-only. They are staged in ``base`` and unmounted from there afterwards: the
    run's folder is writable, so a stage left mounted in it would be a writable way
    into them."""
    inside = sorted({k for k in keep if k.startswith(folder.rstrip("/") + "/") and os.path.isdir(k)})
    staged = []
    for path in inside:
        stage = tempfile.mkdtemp(prefix="stage-", dir=base)
        _mount(libc, path, stage, None, MS_BIND | MS_REC, None)
        staged.append((stage, path))
    _mount(libc, "tmpfs", folder, "tmpfs", MS_NOSUID | MS_NODEV, "size=16m,mode=755")
    for stage, path in staged:
        os.makedirs(path, mode=0o755, exist_ok=True)
        _mount(libc, stage, path, None, MS_BIND | MS_REC, None)
        try:
            _mount(libc, None, path, None, MS_REMOUNT | MS_BIND | MS_RDONLY, None)
        except OSError:
            pass
        if libc.umount2(stage.encode(), MNT_DETACH) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"umount {stage}: {os.strerror(err)}")
        os.rmdir(stage)


def _private_folder(libc, folder: str, base: str, keep: list[str], options: str) -> None:
    """An empty tmpfs over ``folder``, with the run's base folder (writable) and the
    kept paths (read-only) inside it bound back. The sources are held as O_PATH
    descriptors while the tmpfs covers their paths (a staging folder in /tmp would be
    covered too)."""
    prefix = folder.rstrip("/") + "/"
    inside = sorted({k for k in [base, *keep] if k.startswith(prefix) and os.path.isdir(k)})
    # a kept path inside another kept one comes back with it
    inside = [p for p in inside if not any(p.startswith(q.rstrip("/") + "/") for q in inside if q != p)]
    held = [(path, os.open(path, os.O_PATH | os.O_DIRECTORY)) for path in inside]
    try:
        _mount(libc, "tmpfs", folder, "tmpfs", MS_NOSUID | MS_NODEV, options)
        for path, fd in held:
            os.makedirs(path, mode=0o755, exist_ok=True)
            _mount(libc, f"/proc/self/fd/{fd}", path, None, MS_BIND | MS_REC, None)
            if path != base:
                try:
                    _mount(libc, None, path, None, MS_REMOUNT | MS_BIND | MS_RDONLY, None)
                except OSError:
                    pass
    finally:
        for _path, fd in held:
            os.close(fd)


def _cap_folder(libc, folder: str, size: int, base: str) -> None:
    """Put ``folder`` (with what was written into it) on a tmpfs of ``size`` bytes."""
    stage = tempfile.mkdtemp(prefix="disk-", dir=base)
    _mount(libc, "tmpfs", stage, "tmpfs", MS_NOSUID | MS_NODEV, f"size={size},mode=755")
    shutil.copytree(folder, stage, symlinks=True, dirs_exist_ok=True)
    _mount(libc, stage, folder, None, MS_BIND, None)
    if libc.umount2(stage.encode(), MNT_DETACH) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"umount {stage}: {os.strerror(err)}")
    os.rmdir(stage)


def _hide_closed_folders(libc, keep: list[str], base: str) -> None:
    """Hide each folder above a kept path that only its owner may enter (a 0700
    /root when HOME is elsewhere, a ``mktemp -d`` folder), with the kept paths bound
    back, so that an unprivileged run reaches what it needs and nothing else in there.
    Folders above the run's own folder are left alone: it must stay writable."""
    base_path = Path(base)
    kept = {Path(k) for k in keep}
    for path in keep:
        for folder in reversed(Path(path).parents):
            if folder == base_path or folder in base_path.parents or folder in kept:
                # A kept folder that is closed is not emptied: the reachability check
                # then keeps the run root (without capabilities) and says why.
                continue
            try:
                closed = not folder.stat().st_mode & 0o001
            except OSError:
                break
            if closed:
                _hide_folder(libc, str(folder), keep, base)


# Readable by uid 0 through the owner bits even without capabilities, so hidden
# behind /dev/null (files) or an empty tmpfs (folders) in the run's mount namespace.
SECRET_FILES = ("/etc/shadow", "/etc/shadow-", "/etc/gshadow", "/etc/gshadow-")
SECRET_GLOBS = ("/etc/ssh/ssh_host_*_key",)
SECRET_DIRS = ("/root/.ssh", "/root/.gnupg", "/root/.aws", "/root/.config/gcloud", "/root/.kube", "/root/.docker")


def _hide_secrets(libc) -> None:
    import glob

    files = [f for f in SECRET_FILES if os.path.isfile(f)]
    files += [f for pattern in SECRET_GLOBS for f in glob.glob(pattern) if os.path.isfile(f)]
    for path in files:
        _mount(libc, "/dev/null", path, None, MS_BIND, None)
    for path in SECRET_DIRS:
        if os.path.isdir(path):
            _mount(libc, "tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV, "size=4k,mode=700")


PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS = 24, 38


def drop_capabilities(run_as: tuple[int, int] | None = None) -> None:
    """Give up every capability for good (bounding set, then the sets themselves) and
    forbid regaining any through set-uid programs. Root without capabilities cannot
    mount, remount the root read-write, or leave its namespaces. ``run_as`` (uid, gid):
    become that user too, after the bounding set (which needs CAP_SETPCAP) is gone."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)")
    try:
        last = int(Path("/proc/sys/kernel/cap_last_cap").read_text())
    except (OSError, ValueError):
        last = 40
    for cap in range(last + 1):
        if libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
            err = ctypes.get_errno()
            if err == 22:  # EINVAL: the kernel has no such capability
                continue
            if err == 1:  # EPERM: no CAP_SETPCAP (not root, or already dropped): capset below still clears the rest
                break
            raise OSError(err, f"prctl(PR_CAPBSET_DROP, {cap})")
    if run_as is not None:
        uid, gid = run_as
        os.setgroups([])
        os.setresgid(gid, gid, gid)
        os.setresuid(uid, uid, uid)  # clears the permitted and effective sets as well

    class Header(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

    class Data(ctypes.Structure):
        _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]

    header = Header(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3: two 32-bit data words
    data = (Data * 2)()
    if libc.capset(ctypes.byref(header), data) != 0:
        raise OSError(ctypes.get_errno(), "capset")
    forbid_user_namespaces(libc)


# seccomp: a new user namespace would give the code every capability again inside it
# (and with them mount, and the kernel surface behind CAP_SYS_ADMIN). x86-64 numbers.
AUDIT_ARCH_X86_64 = 0xC000003E
NR_CLONE, NR_UNSHARE, NR_CLONE3 = 56, 272, 435
CLONE_NEWUSER = 0x10000000
PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 22, 2
SECCOMP_RET_ALLOW, SECCOMP_RET_ERRNO = 0x7FFF0000, 0x00050000
EPERM, ENOSYS = 1, 38


def forbid_user_namespaces(libc=None) -> bool:
    """Install a seccomp filter (inherited by every descendant, never removable) that
    fails unshare/clone with CLONE_NEWUSER (EPERM) and clone3 (ENOSYS: its flags sit in
    memory a filter cannot read, and libc then falls back to clone). Needs
    no_new_privs, which drop_capabilities sets first. False where the filter does not
    apply (not x86-64)."""
    import platform

    if platform.machine() not in ("x86_64", "AMD64"):
        return False
    libc = libc or ctypes.CDLL(None, use_errno=True)

    class Filter(ctypes.Structure):
        _fields_ = [("code", ctypes.c_uint16), ("jt", ctypes.c_uint8), ("jf", ctypes.c_uint8), ("k", ctypes.c_uint32)]

    class Prog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_uint16), ("filter", ctypes.POINTER(Filter))]

    LD, JEQ, JGE, JSET, RET = 0x20, 0x15, 0x35, 0x45, 0x06  # BPF_LD|W|ABS, JMP|JEQ|K, JMP|JGE|K, JMP|JSET|K, RET|K
    allow, eperm, enosys = SECCOMP_RET_ALLOW, SECCOMP_RET_ERRNO | EPERM, SECCOMP_RET_ERRNO | ENOSYS
    # (code, jump if true, jump if false, k); a jump of n goes to the instruction n+1 ahead
    program = [
        (LD, 0, 0, 4),                    # 0: arch
        (JEQ, 1, 0, AUDIT_ARCH_X86_64),   # 1: x86-64 -> 3
        (RET, 0, 0, eperm),               # 2: another ABI (i386 through int 0x80): refused
        (LD, 0, 0, 0),                    # 3: syscall number
        (JGE, 6, 0, 0x40000000),          # 4: the x32 ABI -> 11 (refused)
        (JEQ, 7, 0, NR_CLONE3),           # 5: clone3 -> 13 (ENOSYS)
        (JEQ, 2, 0, NR_UNSHARE),          # 6: unshare -> 9
        (JEQ, 1, 0, NR_CLONE),            # 7: clone -> 9
        (RET, 0, 0, allow),               # 8
        (LD, 0, 0, 16),                   # 9: args[0] (flags), low 32 bits
        (JSET, 0, 1, CLONE_NEWUSER),      # 10: CLONE_NEWUSER set -> 11, else 12
        (RET, 0, 0, eperm),               # 11
        (RET, 0, 0, allow),               # 12
        (RET, 0, 0, enosys),              # 13
    ]
    filters = (Filter * len(program))(*[Filter(*ins) for ins in program])
    prog = Prog(len(program), filters)
    if libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_SECCOMP)")
    return True


def _launch(spec_path: str) -> None:
    """Set up the namespaces, then run the code as a child and report how it ended.

    The launcher stays as the parent (PID 1 of the namespace when there is one) so it
    can report a death by signal faithfully and reap orphans; when the code's main
    process ends, the launcher exits and the kernel kills whatever is left. Its report
    goes to the parent through an inherited pipe that the code never sees.
    """
    spec = json.loads(Path(spec_path).read_text())
    control_fd = spec["control_fd"]
    notes: list[str] = []
    control: dict = {"notes": notes}

    def report(message: dict) -> None:
        try:
            os.write(control_fd, json.dumps(message).encode() + b"\n")
        except OSError:
            pass

    def report_and_exit(code: int) -> None:
        report(control)
        os._exit(code)

    try:
        # Sent at once, so the parent knows the namespace even if this process is killed.
        report({"pid_namespace": os.readlink("/proc/self/ns/pid")})
    except OSError:
        pass
    try:
        if spec["cgroup"]:
            try:
                Path(spec["cgroup"], "cgroup.procs").write_text("0")
            except OSError as e:
                notes.append(f"could not join the pids cgroup: {e}")
        if spec["mounts"]:
            libc = ctypes.CDLL(None, use_errno=True)
            base = spec["base"]
            home = spec["hide_home"]
            if home:
                _hide_folder(libc, home, [spec["cwd"], *spec["keep_visible"]], base)
            if spec["run_as"]:
                _hide_closed_folders(libc, spec["keep_visible"], base)
            _hide_secrets(libc)
            for path in spec.get("hide_files", []):
                if os.path.isfile(path):
                    _mount(libc, "/dev/null", path, None, MS_BIND, None)
            # Private /tmp and /run: host sockets live there (X11, D-Bus, docker.sock; a
            # 0777 socket in /tmp took data from a run), and the run's own /tmp is capped.
            private = []
            for folder, options in (("/tmp", "size=64m,mode=1777"), ("/var/tmp", "size=64m,mode=1777"),
                                    ("/run", "size=4m,mode=755")):
                if os.path.isdir(folder) and not os.path.islink(folder):
                    _private_folder(libc, folder, base, spec["keep_visible"], options)
                    private.append(folder)
            if spec["limits"].get("disk_bytes"):
                _cap_folder(libc, spec["cwd"], spec["limits"]["disk_bytes"], base)
            # The working folder stays writable; every other mount becomes read-only:
            # not only /, but /sys (the run's own cgroup limits live there) and /proc
            # (host sysctls), which uid 0 could write even without capabilities.
            _mount(libc, base, base, None, MS_BIND | MS_REC, None)
            _remount_all_read_only(libc, base, notes, tuple(private))
            if spec["private_shm"] and os.path.isdir("/dev/shm"):
                _mount(libc, "tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "size=256m,mode=1777")
        if spec["loopback_up"]:
            _loopback_up()
        if spec["run_as"]:
            os.chmod(spec["base"], 0o711)
            # The run's folder itself is about to become the user's: only the way to it counts.
            unreachable = [p for p in [os.path.dirname(spec["cwd"]), *spec["keep_visible"]] if not _reachable_by_others(p)]
            if unreachable:
                # Root without capabilities still reads every root-owned file through
                # the owner bits: refused rather than run that way.
                raise PermissionError(f"{unreachable[0]} is not reachable by an unprivileged user (a folder on the way "
                                      "is closed to others); refused rather than run the code as root: make the way "
                                      "searchable (chmod o+x) or place the interpreter elsewhere")
            else:
                _hand_over(spec["cwd"], *spec["run_as"])
    except Exception as e:
        control["launch_error"] = f"{type(e).__name__}: {e}"
        report_and_exit(125)

    # exec failures come back through a close-on-exec pipe: empty means exec worked.
    exec_read, exec_write = os.pipe2(os.O_CLOEXEC)
    pid = os.fork()
    if pid == 0:
        try:
            os.close(control_fd)
            os.close(exec_read)
            limits = spec["limits"]
            for key, res in (
                ("cpu_seconds", resource.RLIMIT_CPU),
                ("memory_bytes", resource.RLIMIT_AS),
                ("file_size_bytes", resource.RLIMIT_FSIZE),
                ("open_files", resource.RLIMIT_NOFILE),
                ("processes", resource.RLIMIT_NPROC),
            ):
                if limits[key] is not None:
                    # CPU: soft < hard so the kernel sends SIGXCPU (reported as a timeout)
                    # before the SIGKILL at the hard limit.
                    hard = limits[key] + 1 if res == resource.RLIMIT_CPU else limits[key]
                    resource.setrlimit(res, (limits[key], hard))
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
            if spec["drop_capabilities"]:
                drop_capabilities(spec["run_as"])
            elif spec["run_as"]:
                spec["env"]["ERRKB_SANDBOX_RUN_AS"] = "%d:%d" % tuple(spec["run_as"])
            os.chdir(spec["cwd"])
            argv = spec["argv"]
            os.execvpe(argv[0], argv, spec["env"])
        except BaseException as e:
            message = f"cannot run {spec['argv'][:1]}: {type(e).__name__}: {e}"
            try:
                os.write(exec_write, message.encode())
                os.write(2, f"errkb sandbox: {message}\n".encode())
            finally:
                os._exit(126)
    os.close(exec_write)
    exec_error = b""
    while chunk := os.read(exec_read, 4096):
        exec_error += chunk
    os.close(exec_read)
    if exec_error:
        control["launch_error"] = exec_error.decode(errors="replace")
    while True:
        try:
            reaped, status = os.wait()
        except ChildProcessError:
            break
        if reaped == pid:
            if os.WIFSIGNALED(status):
                control["signal"] = os.WTERMSIG(status)
                report_and_exit(128 + os.WTERMSIG(status))
            control["exit_status"] = os.WEXITSTATUS(status)
            report_and_exit(os.WEXITSTATUS(status))
    report_and_exit(125)


if __name__ == "__main__" and len(sys.argv) == 3 and sys.argv[1] == "--launch":
    _launch(sys.argv[2])
