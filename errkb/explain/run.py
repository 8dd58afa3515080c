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
        stdout = _fileno(sys.stdout)
        use_pty = stdout is not None and os.isatty(stdout)
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

    def send_interrupt(signum: int) -> None:
        # The command shares errkb's process group: a terminal's Ctrl-C reached it already
        # when that group is the terminal's foreground; a SIGINT sent to errkb alone did not.
        if not _terminal_foreground():
            send(signum)

    routes = {proc.stdout.fileno(): sys.stdout.fileno(), proc.stderr.fileno(): sys.stderr.fileno()}
    size = 0
    forwarded = [s for s in FORWARDED if s != signal.SIGINT]
    with _forwarding(send, forwarded), _forwarding(send_interrupt, [signal.SIGINT]):
        status = None
        while routes:
            ready, _, _ = _select(list(routes), DRAIN_QUIET_S if status is not None else 0.2)
            if not ready and status is not None:
                break  # the command is gone and whoever still holds its pipes is quiet
            for fd in ready:
                data = _read(fd)
                if data is None:
                    continue
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


def _terminal_foreground() -> bool:
    """Whether errkb's process group is the foreground of its controlling terminal (then a
    Ctrl-C there signalled the whole group, the command included)."""
    try:
        fd = os.open("/dev/tty", os.O_RDONLY | os.O_NOCTTY)
    except OSError:
        return False
    try:
        return os.tcgetpgrp(fd) == os.getpgrp()
    except OSError:
        return False
    finally:
        os.close(fd)


def _select(fds: list[int], timeout: float) -> tuple[list, list, list]:
    while True:
        try:
            return select.select(fds, [], [], timeout)
        except InterruptedError:  # a forwarded signal: PEP 475 retries, but be explicit
            continue


def _read(fd: int) -> bytes | None:
    """Up to a chunk from ``fd``: b"" at its end, None when a non-blocking one has nothing."""
    try:
        return os.read(fd, _CHUNK)
    except BlockingIOError:
        return None
    except OSError as e:
        if e.errno == errno.EIO:  # a pty whose last writer closed it: end of output
            return b""
        raise


def _run_pty(argv: list[str], explainer: _Explainer) -> tuple[int, int]:
    import fcntl
    import pty
    import termios
    import tty

    stdin = _fileno(sys.stdin)
    stdin_tty = stdin is not None and os.isatty(stdin)
    # Input that is not a terminal (a file, a pipe) goes to the command as it is, not
    # through the pty: the pty would echo it into the output (and the explanation).
    kept_stdin = os.dup(stdin) if stdin is not None and not stdin_tty else None
    # Report a failed exec through a pipe that closes on a successful one.
    exec_error_r, exec_error_w = os.pipe()
    os.set_inheritable(exec_error_w, False)
    pid, master = pty.fork()
    if pid == 0:  # the child: exec the command on the pty, or say why not
        os.close(exec_error_r)
        try:
            if kept_stdin is not None:
                os.dup2(kept_stdin, 0)
            os.execvp(argv[0], argv)
        except OSError as e:
            os.write(exec_error_w, f"{e.errno}:{e.strerror}".encode())
        os._exit(127)
    if kept_stdin is not None:
        os.close(kept_stdin)
    saved_mode = None
    previous_winch = None
    status = None
    size = 0
    try:
        os.close(exec_error_w)
        failure = b""
        while chunk := os.read(exec_error_r, 4096):
            failure += chunk
        os.close(exec_error_r)
        if failure:
            number, _, reason = failure.decode(errors="replace").partition(":")
            raise _not_runnable(argv, OSError(int(number), reason))

        def copy_window_size(*_args) -> None:
            with contextlib.suppress(OSError, TypeError):
                size = fcntl.ioctl(_fileno(sys.stdout), termios.TIOCGWINSZ, b"\0" * 8)
                fcntl.ioctl(master, termios.TIOCSWINSZ, size)

        def send(signum: int) -> None:
            # The command leads its own session on the pty: signal its whole process group.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signum)

        copy_window_size()
        # Never block on the command's terminal: keys typed while it reads nothing wait
        # here (the pty's input buffer is a few KiB), while its output keeps flowing.
        os.set_blocking(master, False)
        pending = bytearray()
        saved_mode = termios.tcgetattr(stdin) if stdin_tty else None
        previous_winch = install({signal.SIGWINCH: copy_window_size})
        inputs = [master] + ([stdin] if stdin_tty else [])
        if stdin_tty:
            tty.setraw(stdin)  # keys (Ctrl-C included) go to the command's terminal
        stdout = _fileno(sys.stdout)
        with _forwarding(send, FORWARDED):
            while True:
                ready, writable = _select_rw(inputs, [master] if pending else [], DRAIN_QUIET_S if status is not None else 0.2)
                if not ready and not writable and status is not None:
                    break
                if master in ready:
                    data = _read(master)
                    if data is None:
                        pass  # nothing after all (non-blocking)
                    elif not data:
                        break
                    else:
                        size += len(data)
                        if stdout is not None:
                            _write_all(stdout, data)
                        explainer.feed(data)
                if stdin_tty and stdin in ready:
                    data = os.read(stdin, _CHUNK)
                    if data:
                        pending += data
                    else:
                        inputs.remove(stdin)
                if pending and master in writable:
                    with contextlib.suppress(BlockingIOError):
                        del pending[:os.write(master, pending)]
                if status is None:
                    done, wait_status = os.waitpid(pid, os.WNOHANG)
                    if done:
                        status = _exit_status(wait_status)
    except BaseException:
        if status is None:  # never leave the command running behind errkb
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)
            status = -1
        raise
    finally:
        if saved_mode is not None:
            termios.tcsetattr(stdin, termios.TCSAFLUSH, saved_mode)
        if previous_winch is not None:
            restore(previous_winch)
        os.close(master)
    if status is None:
        status = _exit_status(os.waitpid(pid, 0)[1])
    return status, size


def _fileno(stream) -> int | None:
    """A stream's file descriptor, None where it has none (replaced, closed, captured)."""
    import io

    try:
        return stream.fileno() if stream is not None else None
    except (AttributeError, ValueError, io.UnsupportedOperation):
        return None


def _select_rw(reads: list[int], writes: list[int], timeout: float) -> tuple[list, list]:
    while True:
        try:
            ready, writable, _ = select.select(reads, writes, [], timeout)
            return ready, writable
        except InterruptedError:
            continue


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
