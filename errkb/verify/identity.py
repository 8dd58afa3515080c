"""Who ran a verification: the host, OS, Python, errkb, the packages of the reproducer's
environment, the GPUs ``nvidia-smi`` sees and the isolation the sandbox had. Stored
with every run and shown on the fix page."""

from __future__ import annotations

import platform
import shutil
import socket
import subprocess

from errkb import __version__
from errkb.verify import sandbox


def gpu_identity() -> list[dict]:
    """GPUs seen by ``nvidia-smi`` (name and driver), empty where there is none."""
    smi = shutil.which("nvidia-smi")
    if not smi:
        return []
    try:
        out = subprocess.run(
            [smi, "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=20,
        )
    except (OSError, subprocess.TimeoutExpired):
        return []
    gpus = []
    for line in out.stdout.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) >= 2:
            gpus.append({"name": parts[0], "driver": parts[1], "memory": parts[2] if len(parts) > 2 else None})
    return gpus


def runner_identity(packages: dict[str, str] | None = None) -> dict:
    caps = sandbox.capabilities()
    return {
        "hostname": socket.gethostname(),
        "os": platform.platform(),
        "python": platform.python_version(),
        "errkb": __version__,
        "packages": dict(packages or {}),
        "gpus": gpu_identity(),
        "isolation": {"namespaces": caps.namespaces, "pids_cgroup": caps.pids_cgroup_root is not None},
    }


def cuda_gpu_count() -> int:
    return len(gpu_identity())
