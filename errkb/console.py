"""The ``errkb`` console script: it decides which door a call goes through.

``errkb explain "<log line>"`` is the call people make most, from a fresh process each
time, so it must answer fast (issue 18: within 8x of ``python -c pass``). Importing
click and building errkb's whole command tree costs about a fifth of such a call.
So :func:`main` first looks whether the arguments are a plain ``explain`` call
(:func:`plain_explain`: TEXT or ``-``, ``--file``, ``--db``, ``--json``, ``--all``,
each at most once, values click would accept) and then runs
:func:`errkb.explain.command.explain_command`, the body click's ``explain`` command
runs too, without click. Anything else — another command, ``--help``, an option or
value that click would refuse or read differently, a stream click would re-encode,
shell completion — goes to click (``errkb.cli``), which answers exactly as it always
did. An exception from the body goes through click too: the group's handler and
click's ``main`` present it (:func:`errkb.cli.present_failure`), so error messages and
exit codes are those of the click command.

This module imports ``errkb.cli`` (only once click is needed), never the other way.
tests/test_console.py runs both doors side by side and compares their output.
"""

from __future__ import annotations

import os
import sys

from errkb.signals import exit_on_stop_signals

_FLAGS = {"--json": "as_json", "--all": "show_all"}
_VALUED = {"--db": "db_path", "--file": "file_path"}


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
    exit_on_stop_signals()
    try:
        _run(options)
    finally:
        exit_on_stop_signals()


def _run(options: dict) -> None:
    """The fast door: explain's body, under the signal handling click's group gives a
    command, its failures presented by click."""
    from errkb.explain.command import explain_command, write
    from errkb.signals import stop_on_signals

    try:
        with stop_on_signals():  # on the main thread only (errkb.signals)
            explain_command(**options, echo=write)
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
    from errkb.explain.command import is_pasted_text

    args = iter(argv[1:])
    for arg in args:
        if arg.startswith("-") and arg != "-" and not is_pasted_text(arg):
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
