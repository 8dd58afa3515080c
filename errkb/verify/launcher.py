"""The sandbox's launcher: runs inside the namespaces errkb.verify.sandbox made, sets
them up (read-only mounts, private folders, hidden secrets, loopback, rlimits, seccomp,
no capabilities, the unprivileged user), then runs the dataset code.

Started as ``python -I -S /dev/fd/N --launch-fd M`` (this file and the spec are open
descriptors, so no host path is on the command line the code can read), and loaded by path by the
reproducer drivers (for :func:`drop_capabilities`) in venvs where errkb is not
installed, so it imports nothing outside the standard library.
"""

from __future__ import annotations

import ctypes
import json
import os
import re
import resource
import shutil
import sys
import tempfile
from pathlib import Path

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


# CUDA's driver writes its own process's /proc entries while it starts: under a
# read-only /proc, cuInit fails with 304 "OS call failed or operation not supported on
# this OS" (seen on an H200 runner; a read-only /dev, /sys or / does not matter). A GPU
# run keeps its /proc (its own PID namespace's) writable, with the parts that reach the
# host (sysctls, IRQs, buses, the sysrq trigger: Docker's read-only set) read-only still.
PROC_READ_ONLY = ("/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus", "/proc/fs")


def _proc_read_only_parts(libc, notes: list[str]) -> None:
    for path in PROC_READ_ONLY:
        if not os.path.exists(path):
            continue
        try:
            _mount(libc, path, path, None, MS_BIND | MS_REC, None)
            _mount(libc, None, path, None, MS_REMOUNT | MS_BIND | MS_RDONLY, None)
        except OSError as e:
            notes.append(f"{path} left writable: {e}")


# What a run's /dev holds: the pseudo-devices programs expect, never the host's disks,
# consoles, kernel log, KVM, FUSE or loop devices. GPU runs also get the NVIDIA nodes.
DEV_NODES = ("null", "zero", "full", "random", "urandom", "tty")
DEV_LINKS = {"fd": "/proc/self/fd", "stdin": "/proc/self/fd/0", "stdout": "/proc/self/fd/1",
             "stderr": "/proc/self/fd/2", "core": "/proc/kcore"}
GPU_DEVICES = ("nvidia", "dri")  # name prefixes: nvidia0, nvidiactl, nvidia-uvm, nvidia-caps/, dri/


def _minimal_dev(libc, base: str, private_shm: bool, gpus: bool, notes: list[str]) -> None:
    """A fresh, read-only /dev: a tmpfs holding bind mounts of the allowed host nodes (a
    bind needs no mknod), the usual /proc links, and /dev/shm (a private tmpfs, or the
    host's when the run asked to share it)."""
    stage = os.path.join(base, "host-dev")
    os.mkdir(stage, 0o700)
    _mount(libc, "/dev", stage, None, MS_BIND | MS_REC, None)
    replaced = False
    try:
        _mount(libc, "tmpfs", "/dev", "tmpfs", MS_NOSUID, "size=1m,mode=755")
        replaced = True
        wanted = list(DEV_NODES)
        if gpus:
            wanted += [n for n in sorted(os.listdir(stage)) if n.startswith(GPU_DEVICES)]
        for name in wanted:
            source, target = os.path.join(stage, name), os.path.join("/dev", name)
            if not os.path.exists(source):
                continue
            if os.path.isdir(source):
                os.mkdir(target)
            else:
                open(target, "w").close()
            _mount(libc, source, target, None, MS_BIND | MS_REC, None)
        for name, points_to in DEV_LINKS.items():
            if name != "core":
                os.symlink(points_to, os.path.join("/dev", name))
        os.mkdir("/dev/shm")
        if private_shm:
            _mount(libc, "tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "size=256m,mode=1777")
        elif os.path.isdir(os.path.join(stage, "shm")):
            _mount(libc, os.path.join(stage, "shm"), "/dev/shm", None, MS_BIND | MS_REC, None)
        os.mkdir("/dev/pts")
        os.mkdir("/dev/mqueue")
        _mount(libc, None, "/dev", None, MS_REMOUNT | MS_RDONLY | MS_NOSUID, "size=1m,mode=755")
    except OSError as e:
        if replaced:  # back to the host's (read-only) /dev rather than a half-made one
            libc.umount2(b"/dev", MNT_DETACH)
        notes.append(f"/dev is the host's (read-only): a minimal one could not be made: {e}")
    finally:
        libc.umount2(stage.encode(), MNT_DETACH)
        try:
            os.rmdir(stage)
        except OSError:
            pass


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
    # The folders leading to a kept path must be searchable by the unprivileged user
    # whatever umask errkb was started with (077 made them 0700: the run was refused).
    umask = os.umask(0o022)
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
        os.umask(umask)
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
NR_ADD_KEY, NR_REQUEST_KEY = 248, 249  # and NR_KEYCTL: keys would outlive the run in the user's keyrings
CLONE_NEWUSER = 0x10000000
PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 22, 2
SECCOMP_RET_ALLOW, SECCOMP_RET_ERRNO = 0x7FFF0000, 0x00050000
EPERM, ENOSYS = 1, 38


def forbid_user_namespaces(libc=None) -> bool:
    """Install a seccomp filter (inherited by every descendant, never removable) that
    fails unshare/clone with CLONE_NEWUSER (EPERM) and clone3 (ENOSYS: its flags sit in
    memory a filter cannot read, and libc then falls back to clone), and the keyring
    calls add_key/request_key/keyctl (ENOSYS: a key would outlive the run). Needs
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
        (JGE, 9, 0, 0x40000000),          # 4: the x32 ABI -> 14 (refused)
        (JEQ, 10, 0, NR_CLONE3),          # 5: clone3 -> 16 (ENOSYS)
        (JEQ, 9, 0, NR_ADD_KEY),          # 6: add_key -> 16 (ENOSYS: "no keyrings here")
        (JEQ, 8, 0, NR_REQUEST_KEY),      # 7: request_key -> 16
        (JEQ, 7, 0, NR_KEYCTL),           # 8: keyctl -> 16
        (JEQ, 2, 0, NR_UNSHARE),          # 9: unshare -> 12
        (JEQ, 1, 0, NR_CLONE),            # 10: clone -> 12
        (RET, 0, 0, allow),               # 11
        (LD, 0, 0, 16),                   # 12: args[0] (flags), low 32 bits
        (JSET, 0, 1, CLONE_NEWUSER),      # 13: CLONE_NEWUSER set -> 14, else 15
        (RET, 0, 0, eperm),               # 14
        (RET, 0, 0, allow),               # 15
        (RET, 0, 0, enosys),              # 16
    ]
    filters = (Filter * len(program))(*[Filter(*ins) for ins in program])
    prog = Prog(len(program), filters)
    if libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_SECCOMP)")
    return True


# Top-level folders of the host the run keeps (read-only): the system, and the ones
# the launcher makes its own. Every other one (/var, /srv, /opt, /home, /work, /mnt...)
# is an empty tmpfs with the run's kept paths bound back, so that no unix socket file
# there (/var/lib/docker.sock, an agent under /srv) can be reached.
SYSTEM_TOP_LEVEL = frozenset({"usr", "etc", "bin", "sbin", "lib", "lib32", "lib64", "libx32", "proc", "sys", "dev",
                              "tmp", "run"})
# What /var must still hold once emptied: its tmp (made private below) and the usual links.
VAR_LINKS = {"run": "/run", "lock": "/run/lock"}


def _hide_top_level(libc, keep: list[str], base: str, done: set[str], notes: list[str]) -> None:
    for name in sorted(os.listdir("/")):
        folder = "/" + name
        if name in SYSTEM_TOP_LEVEL or folder in done or os.path.islink(folder) or not os.path.isdir(folder):
            continue
        if (base.rstrip("/") + "/").startswith(folder + "/"):
            notes.append(f"{folder} left visible (read-only): the run's own folder is inside it")
            continue
        # The folders rebuilt on the way to a kept path must be searchable by the run's
        # user whatever umask errkb was started with.
        umask = os.umask(0o022)
        try:
            _hide_folder(libc, folder, keep, base)
        finally:
            os.umask(umask)
        if folder == "/var":
            os.makedirs("/var/tmp", mode=0o1777, exist_ok=True)
            for link, target in VAR_LINKS.items():
                if not os.path.lexists(os.path.join("/var", link)):
                    os.symlink(target, os.path.join("/var", link))


KEYCTL_JOIN_SESSION_KEYRING = 1
NR_KEYCTL = 250  # x86-64


def _new_session_keyring() -> None:
    """A fresh, anonymous session keyring for the run (dies with its last process)."""
    import platform

    if platform.machine() in ("x86_64", "AMD64"):
        ctypes.CDLL(None, use_errno=True).syscall(NR_KEYCTL, KEYCTL_JOIN_SESSION_KEYRING, None)


def _read_spec(fd: int) -> dict:
    chunks = []
    while chunk := os.read(fd, 1 << 16):
        chunks.append(chunk)
    os.close(fd)
    return json.loads(b"".join(chunks))


def _launch(spec: dict) -> None:
    """Set up the namespaces, then run the code as a child and report how it ended.

    The launcher stays as the parent (PID 1 of the namespace when there is one) so it
    can report a death by signal faithfully and reap orphans; when the code's main
    process ends, the launcher exits and the kernel kills whatever is left. Its report
    goes to the parent through an inherited pipe that the code never sees.
    """
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
        for cgroup in spec["cgroups"]:
            try:
                Path(cgroup, "cgroup.procs").write_text("0")
            except OSError as e:
                notes.append(f"could not join the cgroup {os.path.basename(os.path.dirname(cgroup))}: {e}")
        try:
            _new_session_keyring()
        except OSError:
            pass  # the seccomp filter refuses the keyring calls to the code in any case
        if spec["mounts"]:
            libc = ctypes.CDLL(None, use_errno=True)
            base = spec["base"]
            home = spec["hide_home"]
            if home:
                _hide_folder(libc, home, [spec["cwd"], *spec["keep_visible"]], base)
            if spec["run_as"]:
                _hide_closed_folders(libc, spec["keep_visible"], base)
            _hide_top_level(libc, [spec["cwd"], *spec["keep_visible"]], base, {home} if home else set(), notes)
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
            gpus = spec.get("gpus", False)
            _remount_all_read_only(libc, base, notes, tuple(private) + (("/proc",) if gpus else ()))
            if gpus:
                _proc_read_only_parts(libc, notes)
            if os.path.isdir("/dev"):
                _minimal_dev(libc, base, spec["private_shm"], spec.get("gpus", False), notes)
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


if __name__ == "__main__" and len(sys.argv) == 3 and sys.argv[1] == "--launch-fd":
    script = re.fullmatch(r"/dev/fd/(\d+)", sys.argv[0])
    if script:  # this file's own descriptor: not for the code
        os.close(int(script.group(1)))
    _launch(_read_spec(int(sys.argv[2])))
