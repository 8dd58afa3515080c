"""The errors errkb's library raises, and how a run is asked to stop.

Every error a user can cause (a bad path, a bad record, a store that cannot be
opened) derives from :class:`ErrkbError`, whose ``str()`` is one line naming where
and why, so the CLI maps all of them with one ``except`` (exit code 2), the way
cog maps ``CogError``.
"""

from __future__ import annotations

import signal


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
