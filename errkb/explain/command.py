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
                if size < large_log_bytes:
                    result = explain_source(db_path, fh, all_matches=show_all)
                else:
                    from errkb.progress import Progress, ReadProgress

                    with Progress("explain: log read", size, "bytes") as progress:
                        result = explain_source(db_path, ReadProgress(fh, progress), all_matches=show_all)
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
