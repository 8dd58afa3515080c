"""The sandbox against hostile code: each run ends as timeout/error/fail with a reason,
leaves no process behind and changes nothing outside its temporary folder."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import pytest

from errkb.verify import sandbox
from errkb.verify.sandbox import Limits, parse_exception
from tests.support import PRIVATE_IN_SANDBOX

CAPS = sandbox.capabilities()
needs_ns = pytest.mark.skipif(not CAPS.namespaces, reason="needs root and util-linux unshare (namespaces)")

FAST = Limits(wall_seconds=10, cpu_seconds=5, memory_bytes=512 << 20, file_size_bytes=8 << 20, processes=32)


def make_venv(path: Path) -> None:
    """A real, pip-less venv of this interpreter: something a run can be started with."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True)


def py(code: str, **kw) -> sandbox.SandboxResult:
    kw.setdefault("limits", FAST)
    return sandbox.run([sys.executable, "-I", "-c", textwrap.dedent(code)], **kw)


def processes_with_token(token: str) -> list[int]:
    """Host pids whose environment carries ``token`` (every process the run started)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                if token.encode() in f.read():
                    found.append(int(entry))
        except OSError:
            continue
    return found


def live_processes_in_group(pgid: int) -> list[int]:
    """Pids in process group ``pgid`` that are not zombies (already dead, awaiting reaping)."""
    found = []
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[2]) == pgid and fields[0] != "Z":
            found.append(int(entry))
    return found


def assert_nothing_left(result: sandbox.SandboxResult, token: str) -> None:
    assert processes_with_token(token) == []
    assert live_processes_in_group(result.pgid) == []
    if result.pid_namespace:
        for entry in filter(str.isdigit, os.listdir("/proc")):
            try:
                in_namespace = os.readlink(f"/proc/{entry}/ns/pid") == result.pid_namespace
                state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
            except OSError:
                continue
            assert not (in_namespace and state != "Z"), f"pid {entry} of the run is still alive"


def test_pass_and_fail_are_told_apart():
    ok = py("print('hello')")
    assert ok.outcome == "pass" and ok.stdout.strip() == "hello" and ok.returncode == 0
    bad = py("raise ValueError('boom: it broke')")
    assert bad.outcome == "fail"
    assert bad.exception_class == "ValueError"
    assert bad.exception_message == "boom: it broke"
    assert bad.reason == "ValueError: boom: it broke"
    assert bad.duration_s > 0


def test_environment_is_scrubbed_and_home_is_inside_the_temp_folder(monkeypatch):
    monkeypatch.setenv("ERRKB_TEST_SECRET", "do-not-leak")
    r = py(
        """
        import json, os
        print(json.dumps({"env": dict(os.environ), "cwd": os.getcwd(), "ls": sorted(os.listdir("."))}))
        """,
        env={"DECLARED": "yes"},
    )
    import json

    seen = json.loads(r.stdout)
    assert "ERRKB_TEST_SECRET" not in seen["env"]
    assert seen["env"]["DECLARED"] == "yes"
    assert seen["env"]["HOME"].startswith(seen["cwd"]) and seen["env"]["HOME"] != os.path.expanduser("~")
    assert seen["env"]["TMPDIR"].startswith(seen["cwd"])
    assert set(seen["env"]) <= {"PATH", "LANG", "PYTHONDONTWRITEBYTECODE", "HOME", "TMPDIR", "PWD", "DECLARED", "LC_CTYPE"}
    assert seen["ls"] == ["home", "tmp"]
    assert not Path(seen["cwd"]).exists(), "the temporary folder is removed after the run"


def test_infinite_loop_hits_the_wall_time_limit():
    token = uuid.uuid4().hex
    r = py("while True: pass", env={"TOKEN": token}, limits=Limits(wall_seconds=1.5, cpu_seconds=60))
    assert r.outcome == "timeout"
    assert "wall-time limit of 1.5s" in r.reason
    assert 1.5 <= r.duration_s < 10
    assert_nothing_left(r, token)


def test_cpu_burn_hits_the_cpu_time_limit():
    r = py("while True: pass", limits=Limits(wall_seconds=30, cpu_seconds=1))
    assert r.outcome == "timeout"
    assert r.reason.startswith("CPU-time limit of 1s reached")


def test_unbounded_allocation_hits_the_memory_limit():
    token = uuid.uuid4().hex
    r = py(
        """
        hog = []
        while True:
            hog.append(bytearray(64 << 20))
        """,
        env={"TOKEN": token},
    )
    assert r.outcome == "error"
    assert r.reason.startswith("memory limit of 536870912 bytes reached")
    assert r.exception_class == "MemoryError"
    assert_nothing_left(r, token)


def test_fork_bomb_is_bounded_and_fully_killed():
    # Bounded in the test itself: at most 300 children, no grandchildren, so this is safe
    # on a 2-core machine even if every sandbox limit failed. Each child leaves the
    # process group (setsid) to prove the PID namespace/cgroup still catches it.
    token = uuid.uuid4().hex
    r = py(
        """
        import os, time
        for i in range(300):
            if os.fork() == 0:
                os.setsid()
                time.sleep(60)
                os._exit(0)
        time.sleep(60)
        """,
        env={"TOKEN": token},
        limits=Limits(wall_seconds=4, cpu_seconds=10, processes=32),
    )
    assert r.outcome in ("error", "timeout")
    if CAPS.pids_cgroup_root is not None:
        assert r.outcome == "error"
        assert r.reason.startswith("process limit of 32 reached")
    assert_nothing_left(r, token)


def test_huge_file_write_hits_the_file_size_limit():
    r = py(
        """
        with open("big.bin", "wb") as f:
            while True:
                f.write(b"x" * (1 << 20))
        """
    )
    assert r.outcome == "error"
    assert r.reason.startswith("file-size limit of 8388608 bytes reached")


def test_open_file_limit():
    r = py("fs = [open('f%d' % i, 'w') for i in range(10000)]", limits=Limits(wall_seconds=10, open_files=64))
    assert r.outcome == "error"
    assert r.reason.startswith("open-file limit of 64 reached")


def test_output_is_captured_and_capped():
    r = py("import sys; sys.stdout.write('y' * 3_000_000)", limits=Limits(wall_seconds=10, output_bytes=100_000))
    assert r.outcome == "pass"
    assert r.stdout.startswith("y" * 100_000)
    assert "[errkb: output truncated, 2900000 more bytes]" in r.stdout
    assert "output capped at 100000 bytes per stream" in r.notes


@pytest.fixture
def world_writable_folder():
    """A folder anyone may write to, so that only the read-only mounts (not the run's
    unprivileged user) can stop a write there."""
    import shutil
    import tempfile

    folder = Path(tempfile.mkdtemp(prefix="errkb-world-writable-", dir="/tmp"))
    folder.chmod(0o777)
    yield folder
    shutil.rmtree(folder)


@needs_ns
def test_reading_ssh_keys_finds_nothing(world_writable_folder, monkeypatch):
    # Readable by anyone on disk, so only hiding the real HOME (not the run's user) keeps
    # the key from the code.
    real_home = world_writable_folder / "realhome"
    (real_home / ".ssh").mkdir(parents=True, mode=0o755)
    (real_home / ".ssh" / "id_rsa").write_text("PRIVATE-KEY-MATERIAL")
    (real_home / ".ssh" / "id_rsa").chmod(0o644)
    monkeypatch.setenv("HOME", str(real_home))
    r = py(
        f"""
        import os
        for path in (os.path.expanduser("~/.ssh/id_rsa"), {str(real_home / ".ssh" / "id_rsa")!r}):
            try:
                print(open(path).read())
            except OSError as e:
                print("blocked", type(e).__name__)
        open({str(real_home / ".ssh" / "id_rsa")!r}).read()
        """
    )
    assert "PRIVATE-KEY-MATERIAL" not in r.stdout + r.stderr
    assert r.stdout.split() == ["blocked", "FileNotFoundError", "blocked", "FileNotFoundError"]
    assert r.outcome == "fail" and r.exception_class == "FileNotFoundError"
    assert (real_home / ".ssh" / "id_rsa").read_text() == "PRIVATE-KEY-MATERIAL"


@needs_ns
def test_opening_a_socket_gets_no_network():
    # A real listener on the host's loopback: the sandboxed code must not reach it.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        listener.settimeout(0.2)
        port = listener.getsockname()[1]
        r = py(f"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=3).sendall(b'leak')")
        assert r.outcome == "fail"
        assert r.exception_class in ("ConnectionRefusedError", "OSError")
        assert r.network == "none"
        with pytest.raises(socket.timeout):
            listener.accept()


@needs_ns
def test_loopback_network_is_the_runs_own():
    r = py(
        """
        import socket, threading
        srv = socket.socket(); srv.bind(("127.0.0.1", 0)); srv.listen(1)
        port = srv.getsockname()[1]
        c = socket.create_connection(("127.0.0.1", port), timeout=3)
        conn, _ = srv.accept(); c.sendall(b"ping"); print(conn.recv(4).decode())
        """,
        network="loopback",
    )
    assert r.outcome == "pass", r.stderr
    assert r.stdout.strip() == "ping"
    assert r.network == "loopback"


@needs_ns
def test_writes_outside_the_temp_folder_change_nothing(world_writable_folder):
    target = world_writable_folder / "escaped.txt"
    r = py(f"open({str(target)!r}, 'w').write('escaped')")
    assert r.outcome == "fail"
    # the folder is in /tmp, which the run has its own of: there is nothing to write to
    assert "No such file or directory" in r.reason
    assert not target.exists()
    r = py("open('/usr/escaped.txt', 'w').write('x')")
    assert r.outcome == "fail" and "Read-only file system" in r.reason, r
    assert not Path("/usr/escaped.txt").exists()
    home = Path(os.path.expanduser("~"))
    r = py(f"open({str(home / 'escaped.txt')!r}, 'w').write('escaped')")
    # The real HOME is hidden behind a read-only mount; a HOME under /tmp (CI's fresh
    # HOME) is not there at all, since the run has a /tmp of its own.
    in_private_tmp = any(Path(p) in home.resolve().parents for p in PRIVATE_IN_SANDBOX)
    expected = "No such file or directory" if in_private_tmp else "Read-only file system"
    assert r.outcome == "fail" and expected in r.reason, r
    assert not (home / "escaped.txt").exists()


@needs_ns
def test_dataset_code_started_by_root_runs_as_nobody(host_folder):
    # Without capabilities uid 0 still reads every file whose owner bits allow it;
    # as nobody it reads only what anyone may. Its own folder and HOME stay writable.
    assert os.geteuid() == 0
    folder = host_folder
    secret = folder / "root-only.txt"
    secret.write_text("root only")
    secret.chmod(0o600)
    r = py(
        f"""
        import os
        print(os.getuid(), os.getgid(), os.getgroups())
        open("here.txt", "w").write("ok"); open(os.path.join(os.environ["HOME"], "x"), "w").write("ok")
        print(open({str(secret)!r}).read())
        """,
        readable=[folder],  # host folders outside the system ones are hidden unless a run keeps them
    )
    assert r.outcome == "fail"
    assert r.stdout.splitlines()[0] == "65534 65534 []"
    assert r.reason == f"PermissionError: [Errno 13] Permission denied: {str(secret)!r}"
    assert r.notes == []


@needs_ns
def test_an_interpreter_in_a_closed_folder_is_reachable_and_nothing_else_there(tmp_path):
    # A venv inside folders only root may enter (pytest's 0700 tmp folders): the run's
    # view hides those folders but for the venv, so nobody can start it and read
    # nothing else in them.
    closed = tmp_path / "closed"
    closed.mkdir(mode=0o700)
    (closed / "sibling.txt").write_text("root's")
    make_venv(closed / "venv")
    r = sandbox.run(
        [str(closed / "venv" / "bin" / "python"), "-c",
         f"import os; print(os.getuid(), sorted(os.listdir({str(closed)!r})), os.path.exists({str(closed / 'sibling.txt')!r}))"],
        limits=FAST,
    )
    assert r.outcome == "pass", r
    assert r.stdout.strip() == "65534 ['venv'] False"
    assert r.notes == []
    assert (closed / "sibling.txt").read_text() == "root's"


@needs_ns
def test_an_interpreter_nobody_cannot_reach_is_refused_not_run_as_root(tmp_path):
    # A venv that is itself a 0700 folder (mktemp -d makes those): nobody could not start
    # it, and root without capabilities still reads root-only files through the owner
    # bits, so the run is refused with the reason and nothing runs.
    venv = tmp_path / "venv"
    make_venv(venv)
    venv.chmod(0o700)
    r = sandbox.run([str(venv / "bin" / "python"), "-c", "open('here.txt', 'w').write('ran')"], limits=FAST)
    assert r.outcome == "error", r
    assert r.reason.startswith(f"sandbox could not start the code: PermissionError: {venv} is not reachable by an "
                               "unprivileged user"), r.reason
    assert "refused rather than run the code as root" in r.reason


@needs_ns
def test_folders_bound_back_into_a_hidden_home_have_no_writable_way_in():
    # The kept folders are staged in the run's writable folder on the way; a stage left
    # mounted there would be a read-write view of the real interpreter.
    r = sandbox.run(["bash", "-c", "ls -a ..; grep -c ' /tmp/errkb-sandbox-[^ ]*/stage-' /proc/self/mountinfo"],
                    keep_capabilities=True, limits=FAST)
    assert "stage-" not in r.stdout
    assert r.stdout.split()[-1] == "0"


def test_reproducer_drivers_keep_root_to_mount_and_are_told_whom_to_become():
    r = sandbox.run(["bash", "-c", 'id -u; echo "${ERRKB_SANDBOX_RUN_AS:-unset}"; touch here.txt'], keep_capabilities=True, limits=FAST)
    assert r.outcome == "pass", r
    expected = "65534:65534" if CAPS.namespaces and os.geteuid() == 0 else "unset"
    assert r.stdout.split() == [str(os.geteuid()), expected]


def test_background_processes_are_ended_at_the_timeout():
    token = uuid.uuid4().hex
    r = sandbox.run(
        ["bash", "-c", "setsid sleep 300 & nohup sleep 300 & sleep 300"],
        env={"TOKEN": token},
        limits=Limits(wall_seconds=1, processes=16),
    )
    assert r.outcome == "timeout"
    assert_nothing_left(r, token)


def test_missing_program_is_an_error_with_the_reason():
    r = sandbox.run(["no-such-program-errkb"], limits=FAST)
    assert r.outcome == "error"
    assert r.reason.startswith("sandbox could not start the code: cannot run ['no-such-program-errkb']: FileNotFoundError")


def test_files_cannot_be_placed_outside_the_working_folder():
    with pytest.raises(ValueError, match="outside the working folder"):
        sandbox.run(["true"], files={"../escape.txt": "x"})


def test_parse_exception_takes_the_last_traceback_and_multiline_messages():
    stderr = (
        "noise\nTraceback (most recent call last):\n  File \"a.py\", line 1, in <module>\n    f()\n"
        "KeyError: 'first'\n\nDuring handling...\nTraceback (most recent call last):\n"
        "  File \"b.py\", line 2, in g\n    raise ValueError('x')\nvllm.errors.ValueError: line one\nline two\n"
    )
    assert parse_exception(stderr) == ("ValueError", "line one\nline two")
    assert parse_exception("no traceback here") == (None, None)


def test_without_namespaces_the_outcome_says_what_was_not_applied(monkeypatch):
    # A host without unshare/root (e.g. a non-root developer): the run still happens, with
    # rlimits and a scrubbed environment, and says plainly that it had the network.
    monkeypatch.setattr(sandbox, "_CAPS", sandbox.Capabilities(unshare=None, namespaces=False, pids_cgroup_root=None))
    r = py("print('ran')")
    assert r.outcome == "pass" and r.stdout.strip() == "ran"
    assert r.network == "host"
    assert r.reason == "exit status 0 [network not isolated: 'none' needs root and util-linux unshare]"
    assert ("no namespaces (unshare unavailable or not permitted): network, PID and mount isolation "
            "(private /tmp and /run, minimal /dev, hidden HOME and store) not applied") in r.notes


def test_code_cannot_forge_its_outcome():
    # Everything in the working folder's parent is the code's to write; the launcher's
    # report does not live there, so a forged "exit 0" changes nothing.
    r = py(
        """
        import json, os, pathlib
        for d in (pathlib.Path.cwd(), pathlib.Path.cwd().parent):
            for name in ("control.json", "exec_error"):
                try:
                    (d / name).write_text(json.dumps({"exit_status": 0}))
                except OSError:
                    pass
        raise SystemExit(3)
        """
    )
    assert r.outcome == "fail"
    assert r.returncode == 3


@needs_ns
def test_root_inside_cannot_undo_the_read_only_root():
    # Root with capabilities could remount / read-write inside its mount namespace and
    # write to the real disk; the sandbox drops every capability first.
    marker = Path("/errkb-sandbox-escape-test")
    r = sandbox.run(["bash", "-c", f"mount -o remount,rw / && touch {marker}; grep CapEff /proc/self/status; unshare -m true"],
                    limits=FAST)
    assert not marker.exists()
    assert "CapEff:\t0000000000000000" in r.stdout
    assert r.outcome == "fail"
    assert "unshare failed: Operation not permitted" in r.stderr


@needs_ns
@pytest.mark.parametrize("gpus", [False, True], ids=["cpu", "gpu"])
def test_code_cannot_lift_its_own_limits_or_write_host_settings(gpus):
    # uid 0 without capabilities could still write root-owned files in /sys and /proc:
    # its own cgroup's pids.max, or host sysctls. Every mount but the working folder is
    # read-only inside. A GPU run keeps its own /proc writable (CUDA's driver needs it:
    # cuInit fails with 304 under a read-only /proc) but the host's sysctls stay read-only.
    r = sandbox.run(
        ["bash", "-c",
         'cg=$(grep -o "errkb-[^ ]*" /proc/self/cgroup | head -1); '
         'echo 100000 > "/sys/fs/cgroup/pids/$cg/pids.max"; echo "pids:$?"; '
         'echo 60 > /proc/sys/vm/swappiness; echo "sysctl:$?"; '
         'echo ok > "$HOME/x" && echo home:0; '
         'echo renamed > /proc/self/comm; echo "comm:$?"'],
        limits=FAST, gpus=gpus,
    )
    assert "Read-only file system" in r.stderr
    lines = r.stdout.split()
    assert "pids:1" in lines and "sysctl:1" in lines and "home:0" in lines
    assert ("comm:0" if gpus else "comm:1") in lines


@needs_ns
def test_host_secrets_readable_by_root_are_hidden():
    # A reproducer's validation code runs as uid 0 without capabilities: owner bits
    # would still let it read root-owned secrets, so every run's mount namespace hides them.
    assert os.path.isfile("/etc/shadow")
    host = Path("/etc/shadow").read_text()
    r = py(
        """
        print(repr(open("/etc/shadow").read()))
        """
    )
    assert r.outcome == "pass", r
    assert r.stdout.strip() == "''"
    assert Path("/etc/shadow").read_text() == host


def _host_processes_as_nobody(count: int, token: str) -> list:
    return [subprocess.Popen(["setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups", "sleep", token])
            for _ in range(count)]


@needs_ns
def test_the_run_sees_only_its_own_processes():
    # With the host's /proc, /proc/<pid>/root of a host process running as the same user
    # (nobody) would lead into the host's writable mounts.
    token = "4321.%d" % os.getpid()
    host = _host_processes_as_nobody(1, token)
    try:
        r = py(
            f"""
            import os
            pids = [p for p in os.listdir("/proc") if p.isdigit()]
            others = [p for p in pids if p != str(os.getpid())]  # its own command line holds the token
            seen = [p for p in others if {token!r}.encode() in open(f"/proc/{{p}}/cmdline", "rb").read()]
            print(len(pids), seen)
            """
        )
    finally:
        for proc in host:
            proc.kill()
            proc.wait()
    assert r.outcome == "pass", r
    count, seen = r.stdout.split(maxsplit=1)
    assert seen.strip() == "[]"
    assert int(count) <= 3  # the launcher, the code (and nothing of the host)


@needs_ns
def test_other_processes_of_nobody_on_the_host_do_not_use_up_the_runs_process_limit():
    # RLIMIT_NPROC counts every task of the user on the host; the pids cgroup counts the
    # run's own, so where there is one, RLIMIT_NPROC is not set.
    host = _host_processes_as_nobody(FAST.processes + 8, "4322.%d" % os.getpid())
    try:
        r = sandbox.run(["bash", "-c", "for i in 1 2 3; do /bin/true; done; echo ran"], limits=FAST)
    finally:
        for proc in host:
            proc.kill()
            proc.wait()
    if CAPS.pids_cgroup_root is not None:
        assert r.outcome == "pass", r
        assert r.stdout.strip() == "ran"
    else:
        assert r.outcome == "error" and "process limit" in r.notes[0], r


@needs_ns
def test_a_driver_run_cannot_redirect_its_output_to_a_root_only_file(tmp_path):
    # A reproducer driver keeps root and owns the run's base folder: it can swap the
    # names of its output files for links; the parent reads the files it opened.
    secret = tmp_path / "secret.txt"
    secret.write_text("ROOT-ONLY-%d" % os.getpid())
    secret.chmod(0o600)
    r = sandbox.run(
        [sys.executable, "-c", f"import os; print('mine'); os.unlink('../stdout'); os.symlink({str(secret)!r}, '../stdout')"],
        limits=FAST, keep_capabilities=True,
    )
    assert "ROOT-ONLY" not in r.stdout + r.stderr
    assert r.stdout.strip() == "mine"


@needs_ns
def test_a_restrictive_umask_still_runs_as_nobody():
    old = os.umask(0o077)
    try:
        r = py("import os; print(os.getuid()); open('x', 'w').write('ok')")
    finally:
        os.umask(old)
    assert r.outcome == "pass", r
    assert r.stdout.strip() == "65534"
    assert r.notes == []


@needs_ns
def test_a_closed_readable_folder_is_not_emptied_and_the_run_is_refused(tmp_path):
    # A folder the run asked to read that is itself 0700, with the interpreter inside it:
    # hiding it would leave only the venv, and nobody cannot read it: refused, untouched.
    closed = tmp_path / "project"
    closed.mkdir(mode=0o700)
    (closed / "data.txt").write_text("needed")
    make_venv(closed / "venv")
    r = sandbox.run([str(closed / "venv" / "bin" / "python"), "-c", f"print(open({str(closed / 'data.txt')!r}).read())"],
                    readable=[closed], limits=FAST)
    assert r.outcome == "error" and f"{closed} is not reachable by an unprivileged user" in r.reason, r
    assert (closed / "data.txt").read_text() == "needed"


@needs_ns
def test_a_temp_folder_inside_home_still_works(tmp_path, monkeypatch):
    home = tmp_path / "home"
    (home / "tmp").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("TMPDIR", str(home / "tmp"))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)  # re-read TMPDIR
    r = py("print('ok')")
    assert r.outcome == "pass", r
    assert r.stdout.strip() == "ok"


def test_user_namespace_maps_are_read(tmp_path):
    full = tmp_path / "full"
    full.write_text("         0          0 4294967295\n")
    only_root = tmp_path / "only_root"
    only_root.write_text("         0       1000          1\n")
    assert sandbox._maps_id(str(full), 65534)
    assert not sandbox._maps_id(str(only_root), 65534)
    assert sandbox._maps_id(str(only_root), 0)
    assert not sandbox._maps_id(str(tmp_path / "missing"), 65534)
