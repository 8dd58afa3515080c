"""The body of ``errkb explain``, for both of its doors.

click's ``explain`` command (``errkb.cli``) and the console script's fast door
(``errkb.console``: a plain call answered without importing click) both call
:func:`explain_command` with the options as click parses them, so the two answer
alike. It writes through the ``echo`` it is given (``click.echo``, or
:func:`write` on the fast door) and ends in ``sys.exit``; bad usage or input raises
:class:`ExplainUsageError`, which the door presents as click presents any
:class:`~errkb.errors.ErrkbError` (one line, exit 2).

Light on purpose (``os``, ``sys`` and the error base at import): it is on the cold path.
"""

from __future__ import annotations

import os
import sys

from errkb.errors import ErrkbError

# A log this big takes seconds to explain: it gets a progress bar (errkb.progress).
LARGE_LOG_BYTES = 8 << 20


class ExplainUsageError(ErrkbError):
    """Bad usage or input of explain (one line; the CLI's exit 2)."""


def is_pasted_text(arg: str) -> bool:
    """Whether a command-line argument that begins with a dash is pasted text, not an
    option. A Jupyter traceback begins with a rule of dashes and points at its line with
    ``-->``; a log line may begin with ``- `` or ``-1``. An option is one or two dashes, a
    letter, then letters, digits, ``-`` or ``_`` (and ``=value``); an argument of any
    other shape cannot be one, so explain reads it as TEXT instead of refusing it with
    "No such option" (both doors: ``errkb.console`` and ``errkb.cli``)."""
    if not arg.startswith("-") or arg in ("-", "--"):
        return False
    name = arg.partition("=")[0]
    body = name[2:] if name.startswith("--") else name[1:]
    shaped = body[:1].isascii() and body[:1].isalpha() and all(c.isascii() and (c.isalnum() or c in "-_") for c in body)
    return not shaped


def write(message: str | None = None, err: bool = False, nl: bool = True, color: bool | None = None) -> None:
    """What ``click.echo`` does with explain's output on a stream click would not
    re-encode (the fast door checks that): write it and flush.

    click.echo also strips ANSI styles from a stream that is not a terminal (or when
    ``color`` is false); explain's text never holds any then: it is styled only when
    ``color`` is true, and record text is made visible (``errkb.terminal``), so there is
    nothing to strip. ``color`` is taken for the same signature."""
    file = sys.stderr if err else sys.stdout
    file.write((message or "") + ("\n" if nl else ""))
    file.flush()


def explain_command(text, file_path, show_all, db_path, as_json, *, echo, large_log_bytes: int = LARGE_LOG_BYTES) -> None:
    """The body of ``errkb explain`` (its options as click parses them), ending in
    ``sys.exit``: 0 when a known error matched, 1 when none did. ``echo`` is
    ``click.echo`` or :func:`write`. Bad usage or input raises :class:`ExplainUsageError`."""
    from errkb.explain.explainer import EmptyInput, explain_source
    from errkb.explain.render import render_text
    from errkb.terminal import visible

    def echo_err(line: str) -> None:
        echo(visible(line), err=True)

    if file_path is not None and text not in (None, "-"):
        raise ExplainUsageError("give the text as TEXT or with --file PATH, not both")
    where = str(file_path) if file_path is not None else ("stdin" if text in (None, "-") else "TEXT")
    try:
        if file_path is not None:
            with open(file_path, "rb") as fh:
                size = os.fstat(fh.fileno()).st_size
                # a rotated log (app.log.1.gz) is read as what it holds, streamed
                gzipped = fh.read(2) == b"\x1f\x8b"
                fh.seek(0)
                if size < large_log_bytes:
                    result = explain_source(db_path, _gunzipped(fh, where) if gzipped else fh, all_matches=show_all)
                else:
                    from errkb.progress import Progress, ReadProgress

                    with Progress("explain: log read", size, "bytes") as progress:
                        read = ReadProgress(fh, progress)
                        result = explain_source(db_path, _gunzipped(read, where) if gzipped else read, all_matches=show_all)
        elif text in (None, "-"):
            if sys.stdin is None:  # started with stdin closed (`<&-`)
                raise ExplainUsageError("stdin: cannot read: stdin is closed")
            if sys.stdin.isatty():
                echo_err("errkb explain: reading the text from stdin (end with Ctrl-D)")
            result = explain_source(db_path, sys.stdin.buffer, all_matches=show_all)
        else:
            result = explain_source(db_path, text, all_matches=show_all)
    except EmptyInput as e:
        raise ExplainUsageError(f"{where}: {e}") from e
    except OSError as e:
        raise ExplainUsageError(f"{where}: cannot read: {e.strerror or e}") from e
    if as_json:
        import json

        echo(json.dumps(result.as_dict(), indent=2, ensure_ascii=False, default=str))
    else:
        tty = sys.stdout is not None and sys.stdout.isatty()  # None: started with stdout closed
        color = tty and not os.environ.get("NO_COLOR")
        width = 80
        if tty:
            import shutil

            width = min(80, shutil.get_terminal_size((80, 24)).columns)
        echo(render_text(result, show_all=show_all, color=color, width=width), nl=False, color=color)
        for note in result.notes:
            echo_err(f"note: {where}: {note}")
        for s in result.skipped[:5]:
            echo_err(f"warning: record {s.get('id')} skipped: {s.get('reason')} (fix it and re-ingest; `errkb lint` shows why)")
        if len(result.skipped) > 5:
            echo_err(f"warning: {len(result.skipped) - 5} more records skipped")
    sys.exit(0 if result.matched else 1)


class _Gunzipped:
    """A gzip file read as its text, a damaged or cut stream one usage error naming the file."""

    def __init__(self, raw, where: str) -> None:
        import gzip

        self._gz = gzip.GzipFile(fileobj=raw, mode="rb")
        self._where = where

    def _guard(self, call, *args):
        import gzip
        import zlib

        try:
            return call(*args)
        except (gzip.BadGzipFile, EOFError, zlib.error) as e:
            raise ExplainUsageError(f"{self._where}: not a complete gzip stream ({e or 'cut short'})") from None

    def read(self, n: int = -1) -> bytes:
        return self._guard(self._gz.read, n)

    def read1(self, n: int = -1) -> bytes:
        return self._guard(self._gz.read1, n)

    def readline(self, n: int = -1) -> bytes:
        return self._guard(self._gz.readline, n)

    def __iter__(self):
        while line := self.readline():
            yield line


def _gunzipped(raw, where: str) -> _Gunzipped:
    return _Gunzipped(raw, where)
