"""The ``errkb`` console script, and the body of ``errkb explain``.

``errkb explain "<log line>"`` is the call people make most, from a fresh process each
time, so it must answer fast (issue 18: within 8x of ``python -c pass``). Importing
click and building errkb's whole command tree costs about a fifth of such a call.
So :func:`main` first looks whether the arguments are a plain ``explain`` call
(:func:`plain_explain`: TEXT or ``-``, ``--file``, ``--db``, ``--json``, ``--all``,
each at most once, values click would accept) and then runs :func:`explain_command`,
the same body the click command runs, without click. Anything else — another command,
``--help``, an option or value that click would refuse or read differently, a stream
click would re-encode, shell completion — goes to click (``errkb.cli``), which answers
exactly as it always did. An exception from the body goes through click too: the
group's handler and click's ``main`` present it (:func:`errkb.cli.present_failure`),
so error messages and exit codes are those of the click command.

tests/test_console.py runs both paths side by side and compares their output.
"""

from __future__ import annotations

import os
import sys

from errkb.errors import ErrkbError

# A log this big takes seconds to explain: it gets a progress bar (errkb.progress).
LARGE_LOG_BYTES = 8 << 20

_FLAGS = {"--json": "as_json", "--all": "show_all"}
_VALUED = {"--db": "db_path", "--file": "file_path"}


class ExplainUsageError(ErrkbError):
    """Bad usage or input of explain (one line; the CLI's exit 2)."""


def main() -> None:
    """The ``errkb`` console script: a plain ``errkb explain`` call is answered here,
    everything else by click (:func:`errkb.cli.main`). While the process winds down
    after its work, a stop signal ends it with 128 + signal quietly."""
    options = plain_explain(sys.argv[1:])
    if options is None:
        from errkb.cli import main as click_main

        click_main()
        return
    # Installed first as well (as errkb.cli.main does): stop_on_signals restores the
    # handler it found when the command ends, and the default one there would leave a
    # window before the `finally` in which SIGTERM kills the process (-15, not 143).
    exit_quietly_on_signals()
    try:
        _run(options)
    finally:
        exit_quietly_on_signals()


def exit_quietly_on_signals() -> None:
    """From now on SIGINT/SIGTERM end the process with 128 + signal, streams flushed,
    instead of a traceback or death by the signal's default action."""
    import signal

    def exit_now(signum, frame):
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass
        os._exit(128 + signum)

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, exit_now)


def _run(options: dict) -> None:
    from errkb.errors import stop_on_signals

    # Signal handlers can be set on the main thread only; no other thread runs unless
    # something imported threading (not imported here: it is 1 ms of a cold call).
    threading = sys.modules.get("threading")
    try:
        if threading is None or threading.current_thread() is threading.main_thread():
            with stop_on_signals():
                explain_command(**options, echo=_echo)
        else:
            explain_command(**options, echo=_echo)
    except SystemExit:
        raise
    except BaseException as e:
        from errkb.cli import present_failure

        present_failure(e, "explain")


def plain_explain(argv: list[str]) -> dict | None:
    """The options of ``errkb explain ...`` when click would read ``argv`` exactly so
    and accept it, else None (click then reads it). Conservative: whatever is not
    plainly an explain call with values click takes as they are is left to click."""
    if not argv or argv[0] != "explain" or os.environ.get("_ERRKB_COMPLETE") or os.name == "nt":
        return None  # (on Windows click expands globs in arguments and wraps the console)
    for stream in (sys.stdout, sys.stderr):
        # click re-encodes a stream without an encoding or with an ASCII one
        if stream is None or _is_ascii(getattr(stream, "encoding", None) or "ascii"):
            return None
    options: dict = {"text": None, "file_path": None, "show_all": False, "db_path": None, "as_json": False}
    seen: set[str] = set()
    args = iter(argv[1:])
    for arg in args:
        if arg.startswith("-") and arg != "-":
            name, eq, value = arg.partition("=")
            if name in _FLAGS and not eq:
                key = _FLAGS[name]
                options[key] = True
            elif name in _VALUED:
                key = _VALUED[name]
                if not eq:
                    value = next(args, None)
                if not value or value.startswith("-") or not _path_accepted(value):
                    return None
                options[key] = value
            else:
                return None  # --help, --, an unknown or abbreviated option: click says what
            if key in seen:
                return None
            seen.add(key)
        elif options["text"] is None:
            options["text"] = arg
        else:
            return None  # an extra argument: click's error
    if options["db_path"] is None:
        env = os.environ.get("ERRKB_DB")
        if env:  # click reads the option's envvar, and checks it as it checks --db
            if not _path_accepted(env):
                return None
            options["db_path"] = env
    from pathlib import Path

    for key in ("db_path", "file_path"):
        if options[key] is not None:
            options[key] = Path(options[key])
    return options


def _is_ascii(encoding: str) -> bool:
    import codecs

    try:
        return codecs.lookup(encoding).name == "ascii"
    except LookupError:
        return False


def _path_accepted(value: str) -> bool:
    """What ``click.Path(dir_okay=False)`` accepts: a path that is not an existing
    folder, nor an existing file that cannot be read."""
    try:
        st = os.stat(value)
    except (OSError, ValueError):
        return "\0" not in value
    import stat

    return not stat.S_ISDIR(st.st_mode) and os.access(value, os.R_OK)


_ANSI = None


def _echo(message: str | None = None, err: bool = False, nl: bool = True, color: bool | None = None) -> None:
    """``click.echo`` of a str on a stream click would not re-encode (plain_explain
    checked): ANSI styles stripped unless ``color`` or, when it is None, a terminal."""
    global _ANSI
    file = sys.stderr if err else sys.stdout
    out = message or ""
    if nl:
        out += "\n"
    if not out:
        file.flush()
        return
    if color is None:
        try:
            strip = not file.isatty()
        except Exception:
            strip = True
    else:
        strip = not color
    if strip and "\x1b" in out:
        if _ANSI is None:
            import re

            _ANSI = re.compile(r"\033\[[0-?]*[ -/]*[@-~]")  # click's own (click._compat._ansi_re)
        out = _ANSI.sub("", out)
    file.write(out)
    file.flush()


def explain_command(text, file_path, show_all, db_path, as_json, *, echo, large_log_bytes: int = LARGE_LOG_BYTES) -> None:
    """The body of ``errkb explain`` (its options as click parses them), ending in
    ``sys.exit``: 0 when a known error matched, 1 when none did. ``echo`` is
    ``click.echo`` or :func:`_echo`. Bad usage or input raises :class:`ExplainUsageError`."""
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
