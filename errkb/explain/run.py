"""``errkb run -- COMMAND``: run a program, pass its output through, explain what it printed.

Users meet errors in running programs, often in child processes (vLLM's engine core,
torchrun workers) whose root cause is only printed, never raised to the parent; a
``sys.excepthook`` never sees it. So errkb reads what the command and every child
write to the terminal, not what reaches the parent's exception machinery:

* on a terminal the command runs on a pseudo-terminal (a pty), so colours, progress
  bars and line editing behave as when it runs bare; keys typed go to it, the window
  size follows ours;
* otherwise its stdout and stderr stay separate pipes passed through to ours;
* either way the bytes are passed through unchanged as they arrive, and a copy goes
  to the same explanation ``errkb explain`` gives a piped log, running in a thread
  while the command runs (streamed: memory does not grow with the output);
* signals errkb receives are forwarded to the command; its exit status is errkb's
  (a command killed by signal N exits 128+N, as in a shell);
* when the command is done, each known error it printed is reported once on stderr
  (the fix's headline and how to see more), and ``--json`` writes the report to a file.
"""

from __future__ import annotations

import contextlib
import errno
import os
import select
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from errkb.signals import install, installed, restore

# How long output is still read after the command itself has exited: a grandchild that
# printed the root cause may still be flushing (vLLM's engine core), but one that keeps
# the terminal open for good must not keep errkb waiting.
DRAIN_QUIET_S = 0.5
# Signals passed on to the command. SIGINT from a terminal already reaches a command
# that shares errkb's process group (pipe mode), so there it is not passed on twice.
FORWARDED = (signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2, signal.SIGINT)
_CHUNK = 1 << 16


@dataclass
class RunResult:
    """What ``errkb run`` saw: the command's exit status and errkb's explanation of its output."""

    argv: list[str]
    exit_status: int
    output_bytes: int
    explanation: object | None = None  # errkb.explain.explainer.Explanation
    error: str | None = None  # why there is no explanation (an unusable store, ...)
    pty: bool = False
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        explained = self.explanation.as_dict() if self.explanation is not None else None
        return {
            "format": 1,
            "command": self.argv,
            "exitStatus": self.exit_status,
            "outputBytes": self.output_bytes,
            "pty": self.pty,
            "error": self.error,
            "explanation": explained,
        }


class CommandNotRunnable(Exception):
    """The command could not be started (not found, not executable)."""

    def __init__(self, message: str, exit_status: int):
        super().__init__(message)
        self.exit_status = exit_status


class _Explainer(threading.Thread):
    """Reads the copy of the output from a pipe and explains it as ``errkb explain -`` would."""

    def __init__(self, open_kb: Callable[[], object]):
        super().__init__(name="errkb-run-explain", daemon=True)
        self.read_fd, self.write_fd = os.pipe()
        with contextlib.suppress(OSError, AttributeError):  # Linux: a roomier pipe absorbs bursts
            import fcntl

            fcntl.fcntl(self.write_fd, fcntl.F_SETPIPE_SZ, 1 << 20)
        self.open_kb = open_kb
        self.explanation = None
        self.error: str | None = None

    def run(self) -> None:
        from errkb.errors import ErrkbError
        from errkb.explain.explainer import EmptyInput, explain

        with os.fdopen(self.read_fd, "rb") as stream:
            try:
                self.explanation = explain(self.open_kb(), stream)
            except EmptyInput:
                self.explanation = None
            except ErrkbError as e:
                self.error = str(e)
            except Exception as e:  # the command's output must keep flowing, whatever broke here
                self.error = f"internal error: {type(e).__name__}: {e}"
            finally:
                # Whatever happened, keep reading: a full pipe would stall the command.
                while stream.read(_CHUNK):
                    pass

    def feed(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(self.write_fd, view):]

    def close(self) -> None:
        os.close(self.write_fd)


def run(argv: Sequence[str], open_kb: Callable[[], object], use_pty: bool | None = None) -> RunResult:
    """Run ``argv`` with its output passed through; return its status and the explanation."""
    argv = list(argv)
    if use_pty is None:
        use_pty = os.isatty(sys.stdout.fileno())
    explainer = _Explainer(open_kb)
    explainer.start()
    try:
        if use_pty:
            status, size = _run_pty(argv, explainer)
        else:
            status, size = _run_pipes(argv, explainer)
    finally:
        explainer.close()
    explainer.join()
    return RunResult(argv, status, size, explainer.explanation, explainer.error, use_pty)


def _exit_status(wait_status: int) -> int:
    if os.WIFSIGNALED(wait_status):
        return 128 + os.WTERMSIG(wait_status)
    return os.waitstatus_to_exitcode(wait_status)


def _forwarding(send: Callable[[int], None], forwarded: Sequence[int]):
    """Pass the signals errkb receives on to the command for the duration."""
    return installed({signum: (lambda s, _frame: send(s)) for signum in forwarded})


def _not_runnable(argv: list[str], e: OSError) -> CommandNotRunnable:
    status = 127 if e.errno == errno.ENOENT else 126  # what a shell answers
    return CommandNotRunnable(f"run: cannot run {argv[0]!r}: {e.strerror}", status)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        try:
            view = view[os.write(fd, view):]
        except BlockingIOError:
            select.select([], [fd], [])
        except BrokenPipeError:
            return  # our reader went away (`errkb run ... | head`): keep explaining


def _run_pipes(argv: list[str], explainer: _Explainer) -> tuple[int, int]:
    import subprocess

    try:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    except OSError as e:
        raise _not_runnable(argv, e) from None

    def send(signum: int) -> None:
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signum)

    # The command shares errkb's process group, so a terminal's Ctrl-C reaches it already.
    forwarded = [s for s in FORWARDED if s != signal.SIGINT]
    routes = {proc.stdout.fileno(): sys.stdout.fileno(), proc.stderr.fileno(): sys.stderr.fileno()}
    size = 0
    with _forwarding(send, forwarded), _ignoring(signal.SIGINT):
        status = None
        while routes:
            ready, _, _ = _select(list(routes), DRAIN_QUIET_S if status is not None else 0.2)
            if not ready and status is not None:
                break  # the command is gone and whoever still holds its pipes is quiet
            for fd in ready:
                data = _read(fd)
                if not data:
                    del routes[fd]
                    continue
                size += len(data)
                _write_all(routes[fd], data)
                explainer.feed(data)
            if status is None:
                status = proc.poll()
        if status is None:
            status = proc.wait()
    proc.stdout.close()
    proc.stderr.close()
    return (128 - status if status < 0 else status), size


def _ignoring(signum: int):
    return installed({signum: signal.SIG_IGN})


def _select(fds: list[int], timeout: float) -> tuple[list, list, list]:
    while True:
        try:
            return select.select(fds, [], [], timeout)
        except InterruptedError:  # a forwarded signal: PEP 475 retries, but be explicit
            continue


def _read(fd: int) -> bytes:
    try:
        return os.read(fd, _CHUNK)
    except OSError as e:
        if e.errno == errno.EIO:  # a pty whose last writer closed it: end of output
            return b""
        raise


def _run_pty(argv: list[str], explainer: _Explainer) -> tuple[int, int]:
    import pty
    import termios
    import tty

    # Report a failed exec through a pipe that closes on a successful one.
    exec_error_r, exec_error_w = os.pipe()
    os.set_inheritable(exec_error_w, False)
    pid, master = pty.fork()
    if pid == 0:  # the child: exec the command on the pty, or say why not
        os.close(exec_error_r)
        try:
            os.execvp(argv[0], argv)
        except OSError as e:
            os.write(exec_error_w, f"{e.errno}:{e.strerror}".encode())
        os._exit(127)
    os.close(exec_error_w)
    failure = b""
    while chunk := os.read(exec_error_r, 4096):
        failure += chunk
    os.close(exec_error_r)
    if failure:
        os.waitpid(pid, 0)
        os.close(master)
        number, _, reason = failure.decode(errors="replace").partition(":")
        raise _not_runnable(argv, OSError(int(number), reason))

    stdin = sys.stdin.fileno()
    stdin_tty = os.isatty(stdin)

    def copy_window_size(*_args) -> None:
        with contextlib.suppress(OSError):
            import fcntl

            size = fcntl.ioctl(sys.stdout.fileno(), termios.TIOCGWINSZ, b"\0" * 8)
            fcntl.ioctl(master, termios.TIOCSWINSZ, size)

    def send(signum: int) -> None:
        # The command leads its own session on the pty: signal its whole process group.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signum)

    copy_window_size()
    saved_mode = termios.tcgetattr(stdin) if stdin_tty else None
    previous_winch = install({signal.SIGWINCH: copy_window_size})
    size = 0
    status = None
    inputs = [master] + ([stdin] if _readable(stdin) else [])
    try:
        if stdin_tty:
            tty.setraw(stdin)  # keys (Ctrl-C included) go to the command's terminal
        with _forwarding(send, FORWARDED):
            while True:
                ready, _, _ = _select(inputs, DRAIN_QUIET_S if status is not None else 0.2)
                if not ready and status is not None:
                    break
                if master in ready:
                    data = _read(master)
                    if not data:
                        break
                    size += len(data)
                    _write_all(sys.stdout.fileno(), data)
                    explainer.feed(data)
                if stdin in ready:
                    data = os.read(stdin, _CHUNK)
                    if data:
                        _write_all(master, data)
                    else:  # our input ended: end the command's, as a terminal's Ctrl-D does
                        inputs.remove(stdin)
                        _write_all(master, termios.tcgetattr(master)[6][termios.VEOF])
                if status is None:
                    done, wait_status = os.waitpid(pid, os.WNOHANG)
                    if done:
                        status = _exit_status(wait_status)
    finally:
        if saved_mode is not None:
            termios.tcsetattr(stdin, termios.TCSAFLUSH, saved_mode)
        restore(previous_winch)
        os.close(master)
    if status is None:
        status = _exit_status(os.waitpid(pid, 0)[1])
    return status, size


def _readable(fd: int) -> bool:
    """Whether ``fd`` is an open input worth forwarding (not /dev/null, not closed)."""
    try:
        st = os.fstat(fd)
    except OSError:
        return False
    import stat

    return not (stat.S_ISCHR(st.st_mode) and os.major(st.st_rdev) == 1 and os.minor(st.st_rdev) == 3)


def report_lines(result: RunResult) -> list[str]:
    """The human report printed on stderr after the command: one block per known error."""
    name = os.path.basename(result.argv[0])
    if result.error:
        return [f"errkb run: could not explain {name}'s output: {result.error}"]
    explanation = result.explanation
    if explanation is None:
        return [f"errkb run: {name} printed nothing"]
    lines: list[str] = []
    for found in explanation.found:
        record = found.record or {}
        seen = found.occurrences
        where = f", {seen.count} time(s), first at line {seen.first_line}" if seen else ""
        lines.append(f"errkb: known error {found.error_class or 'Error'} {found.repo}/{found.slug}{where}")
        solutions = record.get("solutions") or []
        if solutions:
            lines.append(f"  fix: {solutions[0]}")
        lines.append(f"  more: errkb show {found.record_id}")
    for near in explanation.near:
        lines.append(f"errkb: similar, not exact: {near.repo}/{near.slug} ({near.similarity:.2f}): errkb show {near.record_id}")
    if not explanation.found and not explanation.near:
        lines.append(f"errkb run: no known error in {explanation.lines} line(s) of {name}'s output")
    return lines
