"""A sandbox run sees a minimal, read-only /dev: the pseudo-devices programs expect and
its own /dev/shm, never the host's disks, consoles, kernel log or KVM/FUSE/loop devices."""

from __future__ import annotations

import os
import sys
import textwrap
from pathlib import Path

import pytest

from errkb.verify import sandbox
from errkb.verify.sandbox import Limits

CAPS = sandbox.capabilities()
needs_ns = pytest.mark.skipif(not CAPS.namespaces, reason="needs root and util-linux unshare (namespaces)")
FAST = Limits(wall_seconds=10, cpu_seconds=5, memory_bytes=512 << 20, file_size_bytes=8 << 20, processes=32)
MINIMAL = ["fd", "full", "mqueue", "null", "pts", "random", "shm", "stderr", "stdin", "stdout", "tty", "urandom", "zero"]


def py(code: str, **kw) -> sandbox.SandboxResult:
    kw.setdefault("limits", FAST)
    return sandbox.run([sys.executable, "-I", "-c", textwrap.dedent(code)], **kw)


@needs_ns
def test_dev_holds_only_the_pseudo_devices():
    r = py("import os; print(' '.join(sorted(os.listdir('/dev'))))")
    assert r.outcome == "pass", r
    assert r.stdout.split() == MINIMAL
    assert r.notes == []


@needs_ns
def test_the_pseudo_devices_work_and_dev_is_read_only():
    r = py("""
        import os
        open('/dev/null', 'w').write('gone')
        assert len(open('/dev/urandom', 'rb').read(16)) == 16
        assert open('/dev/zero', 'rb').read(4) == bytes(4)
        try:
            open('/dev/sda', 'w')
        except OSError as e:
            print(type(e).__name__, e.errno)
        """)
    assert r.outcome == "pass", r
    assert r.stdout.strip() == "OSError 30"  # EROFS: nothing can be added to /dev


@needs_ns
@pytest.mark.parametrize("device", sorted(d for d in ("/dev/vda", "/dev/sda", "/dev/kmsg", "/dev/mem", "/dev/kvm",
                                                      "/dev/fuse", "/dev/loop0", "/dev/console") if os.path.exists(d))
                         or ["/dev/kmsg"])
def test_host_devices_are_absent(device):
    r = py(f"import os; print(os.path.exists({device!r}))")
    assert r.outcome == "pass", r
    assert r.stdout.strip() == "False"


@needs_ns
def test_dev_shm_is_private_and_writable(tmp_path):
    marker = f"errkb-dev-test-{os.getpid()}"
    r = py(f"open('/dev/shm/{marker}', 'w').write('x'); print(open('/dev/shm/{marker}').read())")
    assert r.outcome == "pass", r
    assert r.stdout.strip() == "x"
    assert not Path(f"/dev/shm/{marker}").exists()


@needs_ns
def test_a_gpu_run_keeps_the_nvidia_devices():
    host = sorted(n for n in os.listdir("/dev") if n.startswith(("nvidia", "dri")))
    if not host:
        pytest.skip("this host has no /dev/nvidia* to keep")
    r = py("import os; print(' '.join(sorted(n for n in os.listdir('/dev') if n.startswith(('nvidia', 'dri')))))", gpus=True)
    assert r.outcome == "pass", r
    assert r.stdout.split() == host
    r = py("import os; print(any(n.startswith('nvidia') for n in os.listdir('/dev')))")
    assert r.stdout.strip() == "False"
