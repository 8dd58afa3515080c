"""The errors errkb's library raises, and how a run is asked to stop.

Every error a user can cause (a bad path, a bad record, a store that cannot be
opened) derives from :class:`ErrkbError`, whose ``str()`` is one line naming where
and why, so the CLI maps all of them with one ``except`` (exit code 2), the way
cog maps ``CogError``.
"""

from __future__ import annotations

import signal
from contextlib import contextmanager


class ErrkbError(Exception):
    """A problem with errkb's input or environment, said in one line.

    ``where`` (a file, ``file:line:col``, a store path, a command) is prefixed to the
    message when given, so every error names its place the same way.
    """

    exit_code = 2

    def __init__(self, message: str = "", where: str | None = None):
        self.message = message
        self.where = where
        super().__init__(f"{where}: {message}" if where else message)


class Stopped(KeyboardInterrupt):
    """SIGINT or SIGTERM arrived; raised where Python next runs, so ``finally`` blocks
    (a store's ROLLBACK, a temp file's removal) still run before the process exits.

    A ``KeyboardInterrupt`` so that code which lets Ctrl-C through lets it through too.
    """

    def __init__(self, signum: int):
        self.signum = signum
        super().__init__(signal.Signals(signum).name)

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


def _raise_stopped(signum, frame):
    raise Stopped(signum)


@contextmanager
def stop_on_signals():
    """Turn SIGINT and SIGTERM into :class:`Stopped` for the duration.

    Installed explicitly, not inherited: a process started in the background of a
    non-interactive shell inherits SIGINT as *ignored*, and Python then never raises
    KeyboardInterrupt, so a ``kill -INT`` (or a supervisor's stop) did nothing while an
    ingest read a pipe. SIGTERM's default action kills without cleanup; as an exception
    it unwinds through the store's ROLLBACK like Ctrl-C does.
    """
    old = {sig: signal.signal(sig, _raise_stopped) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)


STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


@contextmanager
def signals_held():
    """Hold SIGINT/SIGTERM back for a step that must not be cut in two (a COMMIT).

    Yields a function that raises :class:`Stopped` for a signal that has already
    arrived (call it just before the step: stopping is still free then). A signal that
    arrives during the step is dropped: the step finished, so the run is done and says
    so, rather than exit as if it had not. The handlers are swapped rather than the
    signals blocked, because a process-wide signal also reaches DuckDB's threads, and
    DuckDB then interrupts the query from the handler.
    """
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield lambda: None
        return
    arrived: list[int] = []
    old = {sig: signal.signal(sig, lambda signum, frame: arrived.append(signum)) for sig in STOP_SIGNALS}

    def stop_if_asked() -> None:
        if arrived:
            raise Stopped(arrived[0])

    try:
        yield stop_if_asked
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)


def exit_quietly_on_signals() -> None:
    """From now on SIGINT/SIGTERM end the process with 128 + signal, streams flushed,
    instead of a traceback or death by the signal's default action (what both doors of
    the console script install while the process winds down after its work)."""
    import os
    import sys

    def exit_now(signum, frame):
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass
        os._exit(128 + signum)

    for sig in STOP_SIGNALS:
        signal.signal(sig, exit_now)
