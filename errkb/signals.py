"""The one way errkb installs and restores signal handlers.

Every command stops the same way on SIGINT/SIGTERM (exit 128 + signal, clean-up run,
the store as it was) and on a reader that went away (SIGPIPE's 141, quietly), so how a
handler is put in place and taken out again is written once, here:

* :func:`installed` puts handlers in place for a block and restores the ones it found,
  on the main thread only (Python refuses elsewhere; a library caller's thread keeps
  its process's handlers);
* :func:`stop_on_signals` turns SIGINT/SIGTERM into :class:`errkb.errors.Stopped`, which
  unwinds through the command's clean-up; :func:`signals_held` defers them across a step
  that must not be cut in two (a COMMIT);
* :func:`exit_on_stop_signals` ends the process with 128 + signal, streams flushed, and
  :func:`ignore_stop_signals` keeps a late signal from interrupting the interpreter's exit;
* :func:`quiet_broken_pipe` is what a command does when its reader went away.

Base layer: imports only ``errkb.errors``.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from errkb.errors import Stopped

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
BROKEN_PIPE_EXIT = 128 + signal.SIGPIPE  # what a shell reports for `ls | head`


def on_main_thread() -> bool:
    # threading is looked up, not imported: a cold `errkb explain` never imports it
    # (1 ms), and without it no other thread can be running.
    threading = sys.modules.get("threading")
    return threading is None or threading.current_thread() is threading.main_thread()


def install(handlers: dict[int, Callable | int]) -> dict[int, Callable | int | None]:
    """Install ``handlers`` (signal -> handler); returns the ones they replaced, for
    :func:`restore`. Nothing is installed off the main thread (an empty dict back)."""
    if not on_main_thread():
        return {}
    old = {}
    try:
        for sig, handler in handlers.items():
            old[sig] = signal.signal(sig, handler)
    except BaseException:
        restore(old)
        raise
    return old


def restore(old: dict[int, Callable | int | None]) -> None:
    """Put back the handlers :func:`install` replaced."""
    for sig, handler in old.items():
        signal.signal(sig, handler if handler is not None else signal.SIG_DFL)


@contextmanager
def installed(handlers: dict[int, Callable | int]) -> Iterator[None]:
    """``handlers`` for the duration of the block, the previous ones restored after."""
    old = install(handlers)
    try:
        yield
    finally:
        restore(old)


def _raise_stopped(signum, frame):
    raise Stopped(signum)


@contextmanager
def stop_on_signals() -> Iterator[None]:
    """Turn SIGINT and SIGTERM into :class:`Stopped` for the duration.

    Installed explicitly, not inherited: a process started in the background of a
    non-interactive shell inherits SIGINT as *ignored*, and Python then never raises
    KeyboardInterrupt, so a ``kill -INT`` (or a supervisor's stop) did nothing while an
    ingest read a pipe. SIGTERM's default action kills without cleanup; as an exception
    it unwinds through the store's ROLLBACK like Ctrl-C does.
    """
    with installed(dict.fromkeys(STOP_SIGNALS, _raise_stopped)):
        yield


@contextmanager
def signals_held() -> Iterator[Callable[[], None]]:
    """Hold SIGINT/SIGTERM back for a step that must not be cut in two (a COMMIT).

    Yields a function that raises :class:`Stopped` for a signal that has already
    arrived (call it just before the step: stopping is still free then). A signal that
    arrives during the step is dropped: the step finished, so the run is done and says
    so, rather than exit as if it had not. The handlers are swapped rather than the
    signals blocked, because a process-wide signal also reaches DuckDB's threads, and
    DuckDB then interrupts the query from the handler.
    """
    arrived: list[int] = []

    def stop_if_asked() -> None:
        if arrived:
            raise Stopped(arrived[0])

    with installed(dict.fromkeys(STOP_SIGNALS, lambda signum, frame: arrived.append(signum))):
        yield stop_if_asked


def exit_on_stop_signals() -> None:
    """From now on SIGINT/SIGTERM end the process with 128 + signal, streams flushed,
    instead of a traceback or death by the signal's default action."""

    def exit_now(signum, frame):
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass
        os._exit(128 + signum)

    install(dict.fromkeys(STOP_SIGNALS, exit_now))


def ignore_stop_signals() -> None:
    """Ignore SIGINT/SIGTERM from now on (the interpreter's own exit, after the command's)."""
    try:
        install(dict.fromkeys(STOP_SIGNALS, signal.SIG_IGN))
    except (ValueError, OSError):  # an embedding host that forbids it
        pass


def quiet_broken_pipe() -> int:
    """The reader went away (``errkb list | head``): what is still buffered goes nowhere,
    not into a second BrokenPipeError when the interpreter flushes stdout at exit. The
    exit code to stop with is returned (128 + SIGPIPE)."""
    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError):
        pass
    return BROKEN_PIPE_EXIT
