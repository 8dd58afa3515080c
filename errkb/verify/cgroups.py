"""The cgroups of one sandbox run: a pids cgroup (RLIMIT_NPROC does not bind root, and
counts every process of the user on the host) and a memory cgroup for the whole run
(v2 ``memory.max`` or v1 ``memory.limit_in_bytes``), probed by making one, and removed
with the run. Standard library only, like the rest of the sandbox."""

from __future__ import annotations

import os
import signal
import time
import uuid
from pathlib import Path


def pids_cgroup_root() -> Path | None:
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


def _own_cgroup(controller: str | None) -> str | None:
    """This process's cgroup path in the hierarchy of ``controller`` (None: the v2 one)."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _id, controllers, path = line.split(":", 2)
        if (controller is None and _id == "0" and controllers == "") or \
                (controller is not None and controller in controllers.split(",")):
            return path
    return None


def memory_cgroup_parent() -> tuple[str, Path] | None:
    """Where a run's memory cgroup can be made, probed by making one."""
    candidates = []
    for mount in (Path("/sys/fs/cgroup"), Path("/sys/fs/cgroup/unified")):
        own = _own_cgroup(None)
        if own is not None and (mount / "cgroup.controllers").exists():
            candidates.append(("v2", mount / own.lstrip("/"), "memory.max"))
    own = _own_cgroup("memory")
    if own is not None and Path("/sys/fs/cgroup/memory/cgroup.procs").exists():
        candidates.append(("v1", Path("/sys/fs/cgroup/memory") / own.lstrip("/"), "memory.limit_in_bytes"))
    for version, parent, knob in candidates:
        if version == "v2":
            try:  # a v2 child has the memory controller only if its parent hands it down
                if "memory" not in (parent / "cgroup.subtree_control").read_text().split():
                    (parent / "cgroup.subtree_control").write_text("+memory")
            except OSError:
                continue
        probe = parent / f"errkb-probe-{uuid.uuid4().hex[:8]}"
        try:
            probe.mkdir()
        except OSError:
            continue
        try:
            if (probe / knob).exists():
                return version, parent
        finally:
            try:
                probe.rmdir()
            except OSError:
                pass
    return None


def make_pids_cgroup(root: Path | None, processes: int) -> Path | None:
    if root is None:
        return None
    path = root / f"errkb-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    try:
        path.mkdir()
        # +2: the unshare process and the launcher are in the group too.
        (path / "pids.max").write_text(str(processes + 2))
        return path
    except OSError:
        return None


def make_memory_cgroup(parent: tuple[str, Path] | None, limit_bytes: int) -> Path | None:
    """The run's memory cgroup: every process of the run together under
    ``limit_bytes`` (memfds, tmpfs and SysV pages are charged there too), no swap."""
    if parent is None:
        return None
    version, folder = parent
    path = folder / f"errkb-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    limit = str(limit_bytes)
    try:
        path.mkdir()
    except OSError:
        return None
    try:
        if version == "v2":
            (path / "memory.max").write_text(limit)
            for knob, value in (("memory.swap.max", "0"), ("memory.oom.group", "1")):
                if (path / knob).exists():  # the whole run ends at once at the limit
                    (path / knob).write_text(value)
        else:
            (path / "memory.limit_in_bytes").write_text(limit)
            if (path / "memory.memsw.limit_in_bytes").exists():
                (path / "memory.memsw.limit_in_bytes").write_text(limit)
        return path
    except OSError:
        remove_cgroup(path)
        return None


def oom_kills(cgroup: Path) -> int:
    """How many of the run's processes the kernel killed at its memory limit."""
    for name in ("memory.events", "memory.oom_control"):
        try:
            for line in (cgroup / name).read_text().splitlines():
                key, _, value = line.partition(" ")
                if key == "oom_kill":
                    return int(value)
        except (OSError, ValueError):
            continue
    return 0


def cgroup_pids(cgroup: Path) -> list[int]:
    try:
        return [int(p) for p in (cgroup / "cgroup.procs").read_text().split()]
    except (OSError, ValueError):
        return []


def remove_cgroup(cgroup: Path) -> None:
    for _ in range(50):
        try:
            cgroup.rmdir()
            return
        except OSError:
            for pid in cgroup_pids(cgroup):
                try:
                    os.kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
            time.sleep(0.05)
