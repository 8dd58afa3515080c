"""Progress of long work, on stderr only.

On a terminal (stderr a TTY, ``NO_COLOR`` unset, ``TERM`` not ``dumb``) a phase draws
click's progress bar, or a counter when its total is unknown. Anywhere else it prints
plain lines, and only when the phase takes long: one every ``EVERY_S`` seconds while it
runs and one when it ends after more than ``AFTER_S`` seconds, so short commands and
pipelines stay quiet. Nothing is ever written to stdout, which carries --json and NDJSON.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Self, TextIO

import click

# Plain-line mode: a phase shorter than this says nothing.
AFTER_S = 5.0
# Plain-line mode: at most one line this often while a phase runs.
EVERY_S = 10.0


def draws_on_terminal(stream: TextIO | None = None) -> bool:
    """True where a redrawn bar is wanted: a terminal that is not dumb, and NO_COLOR unset."""
    stream = stream or sys.stderr
    try:
        tty = stream.isatty()
    except (AttributeError, ValueError):
        return False
    return tty and not os.environ.get("NO_COLOR") and os.environ.get("TERM") != "dumb"


class Progress:
    """One phase of long work: ``with Progress("site: fix pages", total) as p: p.update()``."""

    def __init__(self, label: str, total: int | None = None, unit: str = "", *, stream: TextIO | None = None,
                 clock=time.monotonic) -> None:
        self.label = label
        self.total = total
        self.unit = unit
        self.done = 0
        self.stream = stream or sys.stderr
        self.clock = clock
        self.terminal = draws_on_terminal(self.stream)
        self._bar = None
        self._started = 0.0
        self._last_line = 0.0
        self._drawn = False

    def __enter__(self) -> Self:
        self._started = self._last_line = self.clock()
        if self.terminal and self.total:
            self._bar = click.progressbar(length=self.total, label=self.label, file=self.stream, show_pos=True)
            self._bar.__enter__()
        return self

    def set_total(self, total: int) -> None:
        if self.total is None and total and self.terminal and self._bar is None:
            self.total = total
            # a byte count is shown as a share (and MiB when the bar is done), not 9 digits
            in_bytes = self.unit == "bytes"
            self._bar = click.progressbar(length=total, label=self.label, file=self.stream, show_pos=not in_bytes,
                                          show_percent=True if in_bytes else None)
            self._bar.__enter__()
            self._bar.update(self.done)
        else:
            self.total = self.total or total

    def update(self, n: int = 1) -> None:
        self.set(self.done + n)

    def set(self, done: int) -> None:
        step, self.done = done - self.done, done
        if self._bar is not None:
            self._bar.update(step)
        elif self.terminal:
            # unknown total: a counter redrawn in place, at most every 1/10 s
            now = self.clock()
            if now - self._last_line >= 0.1:
                self._last_line = now
                self.stream.write(f"\r{self.label}: {self._count()}")
                self.stream.flush()
                self._drawn = True
        else:
            now = self.clock()
            finished = self.total is not None and self.done >= self.total  # the done line follows
            if now - self._last_line >= EVERY_S and not finished:
                self._last_line = now
                self._line(f"{self.label}: {self._count()} ({now - self._started:.0f} s)")

    def _count(self) -> str:
        if self.unit == "bytes" and max(self.done, self.total or 0) >= 1 << 20:  # people read big sizes in MiB
            mib = 1 << 20
            return f"{self.done / mib:,.0f}" + (f"/{self.total / mib:,.0f}" if self.total else "") + " MiB"
        count = f"{self.done:,}" + (f"/{self.total:,}" if self.total else "")
        return count + (f" {self.unit}" if self.unit else "")

    def _line(self, text: str) -> None:
        self.stream.write(text + "\n")
        self.stream.flush()

    def __exit__(self, exc_type, exc, tb) -> None:
        # Ctrl-C included: the bar's line is finished so the shell prompt starts clean.
        if self._bar is not None:
            self._bar.__exit__(exc_type, exc, tb)
            return
        if self._drawn:
            self.stream.write("\r\x1b[K" if self.terminal else "\n")
            self.stream.flush()
            return
        took = self.clock() - self._started
        if exc_type is None and not self.terminal and took >= AFTER_S:
            self._line(f"{self.label}: done, {self._count()} in {took:.1f} s")


class ReadProgress:
    """A binary file whose reads advance a :class:`Progress` by the bytes read."""

    def __init__(self, raw, progress: Progress) -> None:
        self._raw = raw
        self._progress = progress

    def read(self, n: int = -1) -> bytes:
        data = self._raw.read(n)
        self._progress.update(len(data))
        return data

    def read1(self, n: int = -1) -> bytes:
        data = self._raw.read1(n) if hasattr(self._raw, "read1") else self._raw.read(n)
        self._progress.update(len(data))
        return data

    def __getattr__(self, name):
        return getattr(self._raw, name)
