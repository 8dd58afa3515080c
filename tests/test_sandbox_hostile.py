"""Hostile input, round 3 (issue 26), the sandbox: SysV IPC, the memory of the whole run,
host unix sockets anywhere, host paths in what the run reads, keyrings, SIGTERM during
verify. Each hostile input is generated (seeded, so a failure reproduces) and runs in a
real sandbox process under its wall-time limit; skipped with the reason where this host
cannot give the isolation at all."""

from __future__ import annotations

import json
import os
import random
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from errkb.verify import sandbox
from errkb.verify.sandbox import Limits
from tests.support import SEED_FILE, variant, write_jsonl

CAPS = sandbox.capabilities()
needs_ns = pytest.mark.skipif(not CAPS.namespaces, reason="needs root and util-linux unshare (namespaces)")
FAST = Limits(wall_seconds=30, cpu_seconds=20, memory_bytes=512 << 20, processes=32)
REPO = Path(__file__).resolve().parent.parent


def py(code: str, **kw) -> sandbox.SandboxResult:
    kw.setdefault("limits", FAST)
    return sandbox.run([sys.executable, "-I", "-c", textwrap.dedent(code)], **kw)


def sysv_keys(kind: str) -> set[int]:
    """The keys of the host's SysV objects of ``kind`` (shm, msg, sem)."""
    lines = Path(f"/proc/sysvipc/{kind}").read_text().splitlines()[1:]
    return {int(line.split()[0]) for line in lines if line.strip()}


@needs_ns
@pytest.mark.parametrize("seed", [1, 2])
def test_sysv_shared_memory_and_queues_die_with_the_run(seed):
    rng = random.Random(seed)
    keys = [rng.randrange(0x10000, 0x7FFFFFFF) for _ in range(3)]
    sizes = [rng.choice([4096, 1 << 20, 16 << 20]) for _ in keys]
    assert not set(keys) & (sysv_keys("shm") | sysv_keys("msg") | sysv_keys("sem"))
    r = py(f"""
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        libc.shmat.restype = ctypes.c_void_p
        IPC_CREAT = 0o1000
        for key, size in zip({keys}, {sizes}):
            shm = libc.shmget(key, size, IPC_CREAT | 0o666)
            assert shm >= 0, ctypes.get_errno()
            addr = libc.shmat(shm, None, 0)
            ctypes.memset(addr, 0x41, size)  # pages in use, not only reserved
            assert libc.msgget(key, IPC_CREAT | 0o666) >= 0, ctypes.get_errno()
            assert libc.semget(key, 1, IPC_CREAT | 0o666) >= 0, ctypes.get_errno()
        print(open("/proc/sysvipc/shm").read().count("\\n") - 1)
    """)
    assert r.outcome == "pass", r
    assert int(r.stdout.split()[-1]) == len(keys)  # made, and visible inside the run
    for kind in ("shm", "msg", "sem"):
        assert not set(keys) & sysv_keys(kind), f"SysV {kind} of the run outlived it"


@needs_ns
@pytest.mark.skipif(CAPS.memory_cgroup is None, reason="no writable memory cgroup (v1 or v2) on this host")
@pytest.mark.parametrize("how", ["heap", "memfd"])
def test_four_children_of_a_gigabyte_each_meet_the_runs_memory_limit(how):
    """RLIMIT_AS binds each process alone: four forked children of 1 GiB each (or memfds,
    which no address-space limit sees once unmapped) held 4.8 GB under a 2 GiB limit."""
    allocate = {
        "heap": "block = b'x' * (1 << 30)",
        "memfd": "fd = os.memfd_create('m'); [os.write(fd, b'x' * (64 << 20)) for _ in range(16)]",
    }[how]
    limits = Limits(wall_seconds=60, cpu_seconds=60, memory_bytes=3 << 30, run_memory_bytes=2 << 30, processes=32,
                    file_size_bytes=2 << 30)
    r = py(f"""
        import os, time
        children = []
        for _ in range(4):
            pid = os.fork()
            if pid == 0:
                {allocate}
                time.sleep(5)
                os._exit(0)
            children.append(pid)
        print([os.waitpid(p, 0)[1] for p in children])
    """, limits=limits)
    assert r.outcome == "error", r
    assert "memory limit of the run (2147483648 bytes, all its processes together) reached" in r.reason, r
    # the host is fine: this process still allocates, and the run's cgroup is gone
    assert len(b"y" * (64 << 20)) == 64 << 20
    assert leftover_cgroups() == []


def leftover_cgroups() -> list[str]:
    """errkb cgroups made by this process that still exist, in any hierarchy."""
    prefix = f"errkb-{os.getpid()}-"
    found = []
    for root, dirs, _files in os.walk("/sys/fs/cgroup"):
        found += [os.path.join(root, d) for d in dirs if d.startswith(prefix)]
        dirs[:] = [d for d in dirs if not d.startswith("errkb-")]
        if root.count("/") > 8:
            dirs[:] = []
    return found


def socket_folders(seed: int) -> list[Path]:
    """Host folders outside /tmp, /var/tmp and /run where a daemon could listen."""
    rng = random.Random(seed)
    tag = f"errkb-test-sock-{os.getpid()}-{rng.randrange(1 << 30):x}"
    picks = [Path("/var/lib") / tag, Path("/srv") / tag, Path("/opt") / tag, Path("/var/lib") / tag / "deep" / "er",
             REPO / f".{tag}"]
    return [p for p in picks if p.parent.exists() or p.parent.parent.exists()]


@needs_ns
@pytest.mark.parametrize("network", ["none", "loopback"])
def test_no_host_unix_socket_is_reachable_anywhere(network):
    folders = socket_folders(len(network))
    servers, paths, got = [], [], []
    abstract = f"\0errkb-test-abstract-{os.getpid()}-{network}"
    try:
        for folder in folders:
            folder.mkdir(parents=True, exist_ok=True)
            folder.chmod(0o777)
            path = str(folder / "agent.sock")
            s = socket.socket(socket.AF_UNIX)
            s.bind(path)
            os.chmod(path, 0o777)
            servers.append(s)
            paths.append(path)
        s = socket.socket(socket.AF_UNIX)
        s.bind(abstract)
        servers.append(s)
        paths.append(abstract)
        for s in servers:
            s.listen(4)
            s.settimeout(0.2)
        stop = threading.Event()

        def accept() -> None:
            while not stop.is_set():
                for s in servers:
                    try:
                        conn, _ = s.accept()
                        got.append(conn.recv(100))
                        conn.close()
                    except OSError:
                        pass

        thread = threading.Thread(target=accept)
        thread.start()
        try:
            r = py(f"""
                import socket
                for path in {paths!r}:
                    s = socket.socket(socket.AF_UNIX)
                    try:
                        s.connect(path); s.sendall(b"leak"); print("connected", path)
                    except OSError as e:
                        print("refused", type(e).__name__)
            """, network=network)
        finally:
            stop.set()
            thread.join()
    finally:
        for s in servers:
            s.close()
        for path in paths[:-1]:
            os.unlink(path)
        for folder in folders:
            for p in [folder, *folder.parents]:
                if "errkb-test-sock" in p.name:
                    try:
                        p.rmdir()
                    except OSError:
                        pass
    assert r.outcome == "pass", r
    assert [line.split()[0] for line in r.stdout.splitlines()] == ["refused"] * len(paths), r.stdout
    assert got == []


@needs_ns
def test_the_run_reads_no_host_path_of_its_launcher_or_spec():
    """The launcher (PID 1 of the run) had the spec's host path on its command line, and
    the spec named every host path the run hides."""
    r = py("""
        import os
        seen = []
        for pid in filter(str.isdigit, os.listdir("/proc")):
            for name in ("cmdline", "environ"):
                try:
                    seen.append(open(f"/proc/{pid}/{name}", "rb").read().decode(errors="replace"))
                except OSError:
                    pass
        print(repr("\\n".join(seen)))
        print(sorted(int(fd) for fd in os.listdir("/proc/self/fd")))
    """)
    assert r.outcome == "pass", r
    seen, fds = r.stdout.splitlines()[-2:]
    assert str(sandbox.LAUNCHER) not in seen and "launcher.py" not in seen
    assert "spec" not in seen
    # the spec's and the launcher's descriptors are not inherited either (3: listdir's own)
    assert json.loads(fds) in ([0, 1, 2], [0, 1, 2, 3])


@needs_ns
@pytest.mark.parametrize("keyring", [-1, -2, -3, -4, -5])  # thread, process, session, user, user-session
def test_keys_added_in_a_run_do_not_outlive_it(keyring):
    name = f"errkb-test-key-{os.getpid()}-{-keyring}"
    r = py(f"""
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        key = libc.syscall(248, b"user", {name.encode()!r}, b"secret", 6, {keyring})
        print(key, ctypes.get_errno())
        print(libc.syscall(250, 0, {keyring}, 1), ctypes.get_errno())  # KEYCTL_GET_KEYRING_ID, create
    """)
    assert r.outcome == "pass", r
    assert r.stdout.split()[:2] == ["-1", "38"]  # ENOSYS: no keyrings in the run
    try:
        keys = Path("/proc/keys").read_text()
    except OSError:
        keys = ""
    assert name not in keys


@needs_ns
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_sigterm_during_verify_leaves_no_folder_and_no_cgroup(tmp_path, seed_record, sig):
    """`errkb verify` stopped by SIGTERM mid-run left the run's folder (with the record's
    code) and an empty cgroup."""
    db = tmp_path / "store.duckdb"
    rec = variant(seed_record, 7)
    rec["exampleFix"] = "import time\nprint('running', flush=True)\ntime.sleep(60)\n"
    rec["validationCode"] = None
    records = write_jsonl(tmp_path / "records.jsonl", [rec])
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    for source in (SEED_FILE, records):
        subprocess.run([sys.executable, "-m", "errkb", "ingest", "--db", str(db), str(source)], env=env,
                       check=True, capture_output=True, timeout=120)
    temp_root = tmp_path / "temp-root"
    temp_root.mkdir()
    env["TMPDIR"] = str(temp_root)
    proc = subprocess.Popen([sys.executable, "-m", "errkb", "verify", "--db", str(db), rec["id"]], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not any(p.name.startswith("errkb-sandbox-") for p in temp_root.iterdir()):
            time.sleep(0.05)
        assert any(p.name.startswith("errkb-sandbox-") for p in temp_root.iterdir()), "the run never started"
        time.sleep(1.0)  # inside the run by now
        cgroups = [c for c in all_errkb_cgroups() if c.split("/")[-1].startswith(f"errkb-{proc.pid}-")]
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 128 + sig, err
    assert list(temp_root.iterdir()) == []
    assert cgroups, "the run had no cgroup to check"
    assert [c for c in all_errkb_cgroups() if c.split("/")[-1].startswith(f"errkb-{proc.pid}-")] == []


def all_errkb_cgroups() -> list[str]:
    found = []
    for root, dirs, _files in os.walk("/sys/fs/cgroup"):
        found += [os.path.join(root, d) for d in dirs if d.startswith("errkb-")]
        dirs[:] = [d for d in dirs if not d.startswith("errkb-")]
        if root.count("/") > 8:
            dirs[:] = []
    return found
