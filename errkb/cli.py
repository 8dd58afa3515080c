"""The `errkb` command: a thin shell over the library.

Each command parses its arguments, calls one library function, and maps library
errors to ``click.ClickException`` (exit 2) with a one-line message. Shared option
bundles are decorators so every command spells ``--db`` and ``--json`` the same way.
"""

from __future__ import annotations

import functools
import json
import sys
from pathlib import Path

import click

from errkb import __version__


class UsageError(click.ClickException):
    """Bad input or usage: exit code 2, one line naming what and where."""

    exit_code = 2


def db_option(fn):
    """``--db PATH``: the DuckDB store (default ``$ERRKB_DB``, else the per-user cache)."""
    return click.option(
        "--db",
        "db_path",
        type=click.Path(dir_okay=False, path_type=Path),
        envvar="ERRKB_DB",
        default=None,
        help="DuckDB store file (default: $ERRKB_DB, else a per-user cache built from the bundled data/).",
    )(fn)


def json_option(fn):
    """``--json``: the one machine-readable output contract of every command."""
    return click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")(fn)


def print_json(data) -> None:
    click.echo(json.dumps(data, indent=2, ensure_ascii=False, default=str))


def open_store(db_path: Path | None):
    """Open the store named by ``--db``; library errors become one-line usage errors."""
    from errkb.store import Store, StoreError

    try:
        return Store.open(db_path)
    except StoreError as e:
        raise UsageError(str(e)) from e


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="errkb")
def cli():
    """errkb: paste an error, get the known fix.

    Matches log lines and tracebacks against an error-knowledge dataset
    (schema v2 records) and explains them.
    """


# ---- commands are added above this line (keep this marker) ----
