"""`errkb run -- COMMAND`: the command's output passes through unchanged, its status is
errkb's, signals reach it, and each known error it (or a child of it) printed is reported."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import textwrap
import time

from tests.support import REPO, SEED_ID, SEED_MESSAGE, SEED_SOLUTION, on_terminal


def errkb_run(db, *command: str, options: tuple[str, ...] = (), **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "errkb", "run", "--db", str(db), *options, "--", *command],
                          capture_output=True, timeout=120, cwd=REPO, **kwargs)


def test_output_passes_through_unchanged_and_the_known_error_is_reported(seed_db):
    script = textwrap.dedent(f"""
        import sys
        sys.stdout.buffer.write(b"loading \\xff\\xfe weights\\r\\nprogress 10%\\rprogress 100%\\n")
        sys.stdout.flush()
        sys.stderr.write("ValueError: " + {SEED_MESSAGE!r} + "\\n")
        sys.exit(3)
    """)
    result = errkb_run(seed_db, sys.executable, "-c", script)
    assert result.returncode == 3  # the command's status, not errkb's
    assert result.stdout == b"loading \xff\xfe weights\r\nprogress 10%\rprogress 100%\n"  # byte for byte
    err = result.stderr.decode()
    assert err.startswith("ValueError: " + SEED_MESSAGE + "\n")  # the command's stderr first, unchanged
    report = err.split("\n", 1)[1]
    assert f"errkb show {SEED_ID}" in report
    assert f"fix: {SEED_SOLUTION}" in report


def test_an_error_printed_by_a_child_process_and_re_raised_is_found(seed_db, tmp_path):
    # As vLLM's engine core does: the child logs its traceback and dies; the parent only
    # raises a wrapper that says to look above.
    script = textwrap.dedent(f"""
        import multiprocessing as mp, sys

        def engine_core():
            raise ValueError({SEED_MESSAGE!r})

        if __name__ == "__main__":
            p = mp.get_context("spawn").Process(target=engine_core)
            p.start(); p.join()
            raise RuntimeError("Engine core initialization failed. See root cause above.")
    """)
    (tmp_path / "serve.py").write_text(script)  # a spawned child imports its target from a file
    result = errkb_run(seed_db, sys.executable, str(tmp_path / "serve.py"))
    assert result.returncode == 1
    err = result.stderr.decode()
    assert "Traceback" in err and "Engine core initialization failed" in err  # passed through
    assert f"errkb show {SEED_ID}" in err.rsplit("Engine core initialization failed", 1)[1]


def test_on_a_terminal_the_command_runs_on_a_pty_so_colours_survive(seed_db):
    script = "import os; print('stdout is a tty:', os.isatty(1)); print('\\x1b[31m' + 'red' + '\\x1b[0m')"
    shown, _ = on_terminal(["run", "--db", str(seed_db), "--", sys.executable, "-c", script])
    assert "stdout is a tty: True" in shown
    assert "\x1b[31mred\x1b[0m" in shown
    assert "no known error in 2 line(s)" in shown


def test_without_a_terminal_the_command_sees_pipes(seed_db):
    result = errkb_run(seed_db, sys.executable, "-c", "import os; print(os.isatty(1), os.isatty(2))")
    assert result.stdout == b"False False\n"
    assert result.returncode == 0


def _signal_reaches_the_command(db, sig: int, **popen) -> None:
    """Start `errkb run` on a command that exits 7 when ``sig`` arrives; send ``sig`` to errkb."""
    name = signal.Signals(sig).name
    script = textwrap.dedent(f"""
        import signal, sys, time
        def stop(signum, frame):
            print("got", signal.Signals(signum).name, flush=True)
            sys.exit(7)
        signal.signal(signal.{name}, stop)
        print("ready", flush=True)
        time.sleep(60)
    """)
    proc = subprocess.Popen([sys.executable, "-m", "errkb", "run", "--db", str(db), "--", sys.executable, "-c", script],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO, **popen)
    try:
        assert proc.stdout.readline() == b"ready\n"
        proc.send_signal(sig)
        assert proc.stdout.readline() == f"got {name}\n".encode()
        assert proc.wait(timeout=30) == 7
    finally:
        proc.kill()
        proc.communicate()


def test_a_signal_sent_to_errkb_reaches_the_command(seed_db):
    _signal_reaches_the_command(seed_db, signal.SIGTERM)


def test_a_command_killed_by_a_signal_exits_128_plus_the_signal(seed_db):
    result = errkb_run(seed_db, sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGKILL)")
    assert result.returncode == 128 + signal.SIGKILL


def test_a_command_that_cannot_run_is_one_line_and_the_shell_status(seed_db, tmp_path):
    missing = errkb_run(seed_db, "no-such-command-errkb")
    assert missing.returncode == 127
    assert missing.stderr.decode().splitlines() == ["errkb: run: cannot run 'no-such-command-errkb': No such file or directory"]
    not_executable = tmp_path / "script.sh"
    not_executable.write_text("echo hi\n")
    denied = errkb_run(seed_db, str(not_executable))
    assert denied.returncode == 126
    assert "Permission denied" in denied.stderr.decode()


def test_the_report_as_json_in_a_file_and_on_a_file_descriptor(seed_db, tmp_path):
    out = tmp_path / "report.json"
    script = f"import sys; print('ValueError: ' + {SEED_MESSAGE!r}, file=sys.stderr); sys.exit(2)"
    result = errkb_run(seed_db, sys.executable, "-c", script, options=("--json", str(out)))
    assert result.returncode == 2
    report = json.loads(out.read_text())
    assert report["exitStatus"] == 2
    assert report["command"][0] == sys.executable
    assert [m["id"] for m in report["explanation"]["matches"]] == [SEED_ID]

    read_end, write_end = os.pipe()
    proc = subprocess.Popen([sys.executable, "-m", "errkb", "run", "--db", str(seed_db), "--json-fd", str(write_end), "--",
                             sys.executable, "-c", script], pass_fds=(write_end,), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, cwd=REPO)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as f:
        on_fd = json.loads(f.read())
    assert proc.wait(timeout=60) == 2
    assert [m["id"] for m in on_fd["explanation"]["matches"]] == [SEED_ID]


def test_a_reader_that_goes_away_does_not_stop_the_command(seed_db):
    # `errkb run ... | head -1`: the command keeps running to its end and errkb reports.
    script = "import sys\nfor i in range(200000): print('line', i)\nsys.exit(4)"
    cmd = [sys.executable, "-m", "errkb", "run", "--db", str(seed_db), "--", sys.executable, "-c", script]
    started = time.monotonic()
    head = subprocess.run(shlex.join(cmd) + " | head -1; echo status=${PIPESTATUS[0]}",
                          shell=True, executable="/bin/bash", capture_output=True, timeout=120, cwd=REPO)
    assert head.stdout.decode().splitlines() == ["line 0", "status=4"]
    assert time.monotonic() - started < 120


def test_a_sigint_sent_to_errkb_alone_reaches_the_command(seed_db):
    # `timeout -s INT`, `kill -INT PID`: not a terminal's Ctrl-C, which the command would get itself
    _signal_reaches_the_command(seed_db, signal.SIGINT, start_new_session=True)


def test_input_that_is_not_a_terminal_goes_to_the_command_as_is_not_echoed(seed_db):
    # on a pty, piped input went through the pty and came back as "output" (echo)
    cmd = [sys.executable, "-m", "errkb", "run", "--pty", "--db", str(seed_db), "--", sys.executable, "-c",
           "import sys; data = sys.stdin.read(); print('read', len(data), 'tty', sys.stdin.isatty())"]
    result = subprocess.run(cmd, input=b"ValueError: not the command's error\n", capture_output=True, timeout=120, cwd=REPO)
    assert result.returncode == 0
    assert result.stdout == b"read 36 tty False\r\n"  # the pty's line ending: stdout is the pty
    assert b"not the command's error" not in result.stdout + result.stderr
