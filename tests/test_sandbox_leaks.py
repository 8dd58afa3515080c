"""The sandbox's leaks from issue 15, closed: host unix sockets, disk, the store, user
namespaces. Each check runs real code in the real sandbox (root with namespaces here;
skipped with the reason where namespaces are not available)."""

from __future__ import annotations

import os
import socket
import sys
import threading

import pytest

from errkb.verify import sandbox
from errkb.verify.sandbox import Limits

CAPS = sandbox.capabilities()
needs_ns = pytest.mark.skipif(not CAPS.namespaces, reason="needs root and util-linux unshare (namespaces)")
FAST = Limits(wall_seconds=20, cpu_seconds=10, memory_bytes=512 << 20, file_size_bytes=64 << 20, processes=32)


def py(code: str, **kw) -> sandbox.SandboxResult:
    kw.setdefault("limits", FAST)
    return sandbox.run([sys.executable, "-c", code], **kw)


@needs_ns
@pytest.mark.parametrize("folder", ["/tmp", "/run", "/var/tmp"])
def test_a_host_unix_socket_in_tmp_or_run_is_out_of_reach(folder, tmp_path):
    """A 0777 socket under /tmp or /run (X11, D-Bus, docker.sock live there) took data
    from validation code although the network was cut: the run's /tmp and /run are its own."""
    path = os.path.join(folder, f"errkb-test-{os.getpid()}.sock")
    server = socket.socket(socket.AF_UNIX)
    server.bind(path)
    os.chmod(path, 0o777)
    server.listen(1)
    server.settimeout(15)
    got = []

    def accept():
        try:
            conn, _ = server.accept()
            got.append(conn.recv(100))
        except OSError:
            pass

    thread = threading.Thread(target=accept)
    thread.start()
    try:
        r = py(f"import os, socket\nprint(os.path.exists({path!r}))\ns = socket.socket(socket.AF_UNIX)\n"
               f"try:\n    s.connect({path!r}); s.sendall(b'leak'); print('connected')\nexcept OSError as e:\n    print('refused')")
    finally:
        server.close()
        thread.join()
        os.unlink(path)
    assert r.outcome == "pass", r
    assert r.stdout.split() == ["False", "refused"]
    assert got == []


@needs_ns
def test_the_runs_folder_is_a_capped_tmpfs():
    """4.8 GB went to the host's /tmp in 13 s; now the run's folder is a tmpfs of
    Limits.disk_bytes and writing past it fails inside the run."""
    limits = Limits(wall_seconds=30, cpu_seconds=20, memory_bytes=512 << 20, file_size_bytes=64 << 20, disk_bytes=32 << 20)
    r = py("import os\nn = 0\ntry:\n    for i in range(100):\n        open(f'f{i}', 'wb').write(b'x' * (4 << 20)); n += 1\n"
           "except OSError as e:\n    print('stopped', e.errno)\nprint(n)", limits=limits)
    assert r.outcome == "pass", r
    first, count = r.stdout.split("\n")[0], int(r.stdout.split()[-1])
    assert first == "stopped 28" and count <= 8  # ENOSPC after at most 32 MiB


@needs_ns
def test_the_store_this_process_has_open_is_not_readable_inside(host_folder, monkeypatch):
    """A 0644 store outside /tmp (so not hidden by the private /tmp): what the run
    reads there is empty, so its contents cannot flow into verify output."""
    import shutil

    from errkb.store.db import Store
    from tests.support import SEED_FILE

    folder = host_folder
    db = folder / "store.duckdb"
    try:
        with Store.open(db) as store:
            store.ingest([SEED_FILE])
            os.chmod(db, 0o644)
            assert db.stat().st_size > 0
            # readable: host folders outside the system ones are hidden unless a run keeps them
            r = py(f"import os\nprint(os.path.getsize({str(db)!r}), len(open({str(db)!r}, 'rb').read()))",
                   readable=[folder])
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    assert r.outcome == "pass", r
    assert r.stdout.split() == ["0", "0"]


@needs_ns
@pytest.mark.parametrize("how", ["unshare(2)", "clone(2)", "unshare(1)"])
def test_no_new_user_namespace_inside(how):
    """A user namespace would hand the code every capability again inside it."""
    code = {
        "unshare(2)": "import ctypes; libc = ctypes.CDLL(None, use_errno=True); "
                      "print(libc.unshare(0x10000000), ctypes.get_errno())",
        "clone(2)": "import ctypes, os; libc = ctypes.CDLL(None, use_errno=True); "
                    "print(libc.syscall(56, 0x10000000 | 17, 0, 0, 0, 0), ctypes.get_errno())",
        "unshare(1)": "import subprocess; r = subprocess.run(['unshare', '--user', '--map-root-user', 'id', '-u'], "
                      "capture_output=True, text=True); print(r.returncode != 0, 'not permitted' in r.stderr)",
    }[how]
    r = py(code)
    assert r.outcome == "pass", r
    assert r.stdout.split() == (["True", "True"] if how == "unshare(1)" else ["-1", "1"])


@needs_ns
def test_threads_and_subprocesses_still_work_under_the_filter():
    r = py("import subprocess, threading\nt = threading.Thread(target=print, args=('thread',)); t.start(); t.join()\n"
           "print(subprocess.run(['echo', 'child'], capture_output=True, text=True).stdout.strip())")
    assert r.outcome == "pass", r
    assert r.stdout.split() == ["thread", "child"]
