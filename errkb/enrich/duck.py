"""Archives as DuckDB reads them: their formats, SQL quoting, the connection, errors.

DESIGN.md keeps SQL *to the errkb store* inside ``errkb.store.db``. The archive path
(errkb.enrich.archive) and ``errkb query`` (errkb.enrich.query) do not touch the store:
they use DuckDB as a file engine over the user's own archives, which is what DuckDB is
for. Paths, column names and structures reach SQL only quoted (:func:`sql_string`,
:func:`sql_ident`).
"""

from __future__ import annotations

import glob
import os
from collections.abc import Sequence

from errkb.errors import ErrkbError

# The message as matched: a column that exists only between reading and matching.
MESSAGE_COLUMN = "__errkb_message"
_INPUT_FORMATS = {
    ".jsonl": "json", ".ndjson": "json", ".json": "json",
    ".parquet": "parquet", ".pq": "parquet",
    ".csv": "csv", ".tsv": "csv",
}


class ArchiveError(ErrkbError):
    """Bad archive input or usage; the message is one line naming file and reason."""


def sql_string(value: str) -> str:
    return "'" + str(value).replace("'", "''") + "'"


def sql_ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def lambda_sql(param: str, body: str) -> str:
    """A lambda in the running DuckDB's syntax: ``lambda x: ...`` from 1.3 on (2.0 refuses
    the arrow), ``x -> ...`` before."""
    import duckdb

    version = tuple(int(p) for p in duckdb.__version__.split(".")[:2] if p.isdigit())
    return f"lambda {param}: {body}" if version >= (1, 3) else f"{param} -> {body}"


def _format_of(path: str) -> str | None:
    name = path.lower()
    for comp in (".gz", ".zst", ".zstd"):
        if name.endswith(comp):
            name = name[: -len(comp)]
    return _INPUT_FORMATS.get(os.path.splitext(name)[1])


def check_name(path: str) -> None:
    """DuckDB and Arrow take a path as UTF-8 text: a name with other bytes (kept by Python
    as lone surrogates) failed inside them as an "internal error"."""
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        shown = os.fsencode(path).decode("utf-8", "backslashreplace")
        raise ArchiveError(f"{shown}: the file name is not UTF-8, which DuckDB cannot open; rename the file") from None


def folder_files(folder: str) -> list[str]:
    """The data files of a folder as Spark and Hadoop write one (``part-*.parquet``
    beside ``_SUCCESS`` and ``.crc`` files; partitions in ``key=value/`` subfolders):
    every file of a known format, in sorted order, skipping names starting with "_" or
    "." (their markers and checksums) at any depth."""
    found: list[str] = []
    for top, dirs, names in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not d.startswith(("_", ".")))
        found += [os.path.join(top, n) for n in sorted(names)
                  if not n.startswith(("_", ".")) and _format_of(n) is not None]
    return found


def archive_files(inputs: Sequence[str]) -> list[str]:
    """The files of ``inputs``: a glob's matches and a folder's data files, in sorted order."""
    files: list[str] = []
    for spec in inputs:
        spec = str(spec)
        if glob.has_magic(spec):
            files += sorted(glob.glob(spec))
        elif os.path.isdir(spec):
            files += folder_files(spec)
        else:
            files.append(spec)
    return files


def input_format(inputs: Sequence[str]) -> str:
    """The one format of ``inputs`` ("json", "parquet" or "csv"), after checking that
    each exists (a glob: matches a file; a folder: holds data files) and has a known
    extension."""
    if not inputs:
        raise ArchiveError("no --input given")
    formats = set()
    for spec in inputs:
        spec = str(spec)
        for name in [spec] + (glob.glob(spec) if glob.has_magic(spec) else []):
            check_name(name)
        if not glob.has_magic(spec) and os.path.isdir(spec):
            files = folder_files(spec)
            for name in files:
                check_name(name)
            kinds = {_format_of(f) for f in files}
            if not kinds:
                raise ArchiveError(f"{spec}: a folder without .parquet, .jsonl/.ndjson/.json or .csv/.tsv files")
            if len(kinds) > 1:
                raise ArchiveError(f"{spec}: the folder mixes formats ({', '.join(sorted(kinds))}); name the files")
            formats |= kinds
            continue
        fmt = _format_of(spec)
        if fmt is None:
            raise ArchiveError(f"{spec}: unknown archive format (use .jsonl/.ndjson/.json, .parquet or .csv/.tsv, optionally .gz)")
        formats.add(fmt)
        if glob.has_magic(spec):
            if not glob.glob(spec):
                raise ArchiveError(f"{spec}: no file matches")
        elif not os.path.isfile(spec):
            raise ArchiveError(f"{spec}: no such file")
    if len(formats) > 1:
        raise ArchiveError(f"inputs mix formats ({', '.join(sorted(formats))}); enrich one format per run")
    return formats.pop()


def source_sql(inputs: Sequence[str]) -> str:
    """``read_json(...)`` / ``read_parquet(...)`` / ``read_csv(...)`` over the inputs
    (``errkb query`` reads enriched archives with it; enriching reads JSON Lines as raw
    lines). A folder stands for its data files (Spark's output folder)."""
    fmt = input_format(inputs)
    names = [str(s) for s in inputs]
    if any(not glob.has_magic(s) and os.path.isdir(s) for s in names):
        names = archive_files(names)
    files = "[" + ", ".join(sql_string(s) for s in names) + "]"
    if fmt == "json":
        return f"read_json({files}, format='newline_delimited', sample_size=-1, union_by_name=true, maximum_object_size=268435456)"
    if fmt == "csv":
        return f"read_csv({files}, sample_size=-1, union_by_name=true)"
    return f"read_parquet({files}, union_by_name=true)"


def column_expr(path: str, columns: dict[str, str]) -> str | None:
    """SQL reading ``path`` (a column, or a dotted path into a STRUCT or JSON column) as
    VARCHAR; None when the archive has no such column."""
    if path in columns:
        return f"TRY_CAST({sql_ident(path)} AS VARCHAR)"
    parts = path.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        top = ".".join(parts[:cut])
        if top not in columns:
            continue
        rest = parts[cut:]
        ctype = columns[top].upper()
        if ctype == "JSON":
            json_path = "$" + "".join("." + sql_ident(p) for p in rest)
            return f"json_extract_string({sql_ident(top)}, {sql_string(json_path)})"
        if ctype.startswith("STRUCT"):
            expr = sql_ident(top)
            for p in rest:
                expr += f"[{sql_string(p)}]"
            return f"TRY_CAST({expr} AS VARCHAR)"
    return None


def connect(threads: int | None = None):
    import duckdb

    from errkb.store.db import NO_EXTENSION_DOWNLOADS

    con = duckdb.connect(config=NO_EXTENSION_DOWNLOADS)
    con.execute("SET enable_progress_bar = false")  # it would draw on stdout
    con.execute("SET preserve_insertion_order = true")
    con.execute("SET memory_limit = '1GB'")
    if threads:
        con.execute(f"SET threads = {int(threads)}")
    return con


def duck_error(e: Exception) -> str:
    """DuckDB's error as one line. A CSV error's first line only says where ("CSV Error
    on Line: 3"); the reason is on a later line, after the offending line's text."""
    lines = [line.strip() for line in str(e).strip().splitlines() if line.strip()]
    if not lines:
        return type(e).__name__
    if "CSV Error" in lines[0]:
        reason = next((line for line in lines[1:] if not line.startswith(("Original Line", "Possible Solution"))
                       and " = " not in line), None)
        if reason:
            return f"{lines[0]}: {reason}"
    return lines[0]
