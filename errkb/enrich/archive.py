"""Enrich whole log archives in bulk (``errkb query`` asks them: errkb.enrich.query).

``errkb enrich --input logs.jsonl --output enriched.parquet``: DuckDB reads the
archive (JSON Lines, Parquet or CSV; globs and several files allowed) as a stream of
Arrow record batches, the matcher runs over each batch's message column
(``Matcher.match_lines``, in worker processes so every core works), an ``errkb``
struct column is added, and DuckDB writes the batches out (Parquet, JSON Lines or
CSV) as they come. Memory stays bounded by a few batches whatever the input size.

DESIGN.md keeps SQL *to the errkb store* inside ``errkb.store.db``. This module does
not touch the store: it uses DuckDB as a file engine over the user's own archives,
which is what DuckDB is for. Paths and column names reach SQL only quoted.

JSON archives are read with their schema detected over the whole file (DuckDB would
otherwise silently drop keys that first appear after its sample), so they are read
twice: once for the schema, once for the rows.
"""

from __future__ import annotations

import glob
import multiprocessing
import os
import tempfile
import time
from collections import Counter, deque
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from errkb.enrich.lines import errkb_object
from errkb.errors import ErrkbError

BATCH_ROWS = 65536
MESSAGE_COLUMN = "__errkb_message"
INSTALL_HINT = "the archive path needs pyarrow: pip install 'errkb[archive]'"

ERRKB_FIELDS = ("id", "slug", "repo", "errorClass", "severity", "score", "solution", "url")
_INPUT_FORMATS = {
    ".jsonl": "json", ".ndjson": "json", ".json": "json",
    ".parquet": "parquet", ".pq": "parquet",
    ".csv": "csv", ".tsv": "csv",
}
_OUTPUT_FORMATS = {
    ".parquet": "(FORMAT parquet, COMPRESSION zstd)",
    ".jsonl": "(FORMAT json)", ".ndjson": "(FORMAT json)", ".json": "(FORMAT json)",
    ".csv": "(FORMAT csv, HEADER true)",
}


class ArchiveError(ErrkbError):
    """Bad archive input or usage; the message is one line naming file and reason."""


@dataclass
class ArchiveSummary:
    inputs: list[str]
    output: str
    rows: int = 0
    matched: int = 0
    written: int = 0
    batches: int = 0
    workers: int = 1
    seconds: float = 0.0
    by_record: Counter = field(default_factory=Counter)
    labels: dict[str, str] = field(default_factory=dict)

    def as_dict(self) -> dict:
        return {
            "inputs": self.inputs,
            "output": self.output,
            "rows": self.rows,
            "matched": self.matched,
            "written": self.written,
            "batches": self.batches,
            "workers": self.workers,
            "seconds": round(self.seconds, 3),
            "rows_per_s": round(self.rows / self.seconds) if self.seconds > 0 else None,
            "top": [{"id": rid, "record": self.labels.get(rid, rid), "rows": n} for rid, n in self.by_record.most_common(10)],
        }

    def summary(self) -> str:
        d = self.as_dict()
        rate = f"{d['rows_per_s']:,} rows/s" if d["rows_per_s"] else "-"
        lines = [
            f"errkb enrich: {self.rows:,} rows, {self.matched:,} matched, {self.written:,} written to {self.output}, "
            f"{self.seconds:.2f} s, {rate}, {self.workers} worker(s)"
        ]
        lines += [f"  {t['rows']:>10,}  {t['id']}  {t['record']}" for t in d["top"]]
        return "\n".join(lines)


# -- SQL pieces (quoted, never interpolated raw) ----------------------------------------


def sql_string(value: str) -> str:
    return "'" + str(value).replace("'", "''") + "'"


def sql_ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _require_pyarrow():
    try:
        import pyarrow  # noqa: F401
    except ImportError as e:
        raise ArchiveError(INSTALL_HINT) from e


def _format_of(path: str) -> str | None:
    name = path.lower()
    for comp in (".gz", ".zst", ".zstd"):
        if name.endswith(comp):
            name = name[: -len(comp)]
    return _INPUT_FORMATS.get(os.path.splitext(name)[1])


def source_sql(inputs: Sequence[str]) -> str:
    """``read_json(...)`` / ``read_parquet(...)`` / ``read_csv(...)`` over the inputs."""
    if not inputs:
        raise ArchiveError("no --input given")
    formats = set()
    for spec in inputs:
        spec = str(spec)
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
    files = "[" + ", ".join(sql_string(str(s)) for s in inputs) + "]"
    fmt = formats.pop()
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
    return str(e).strip().splitlines()[0]


# -- matching, in this process or in workers ----------------------------------------------

_worker_matcher = None


def _init_worker(index_path: str) -> None:
    global _worker_matcher
    from errkb.match.matcher import Matcher

    _worker_matcher = Matcher.load(index_path)


def _match_column(messages: list, matcher=None) -> tuple[list[int], list[str], list[float]]:
    """(rows, record ids, scores) of the best match of each matched message."""
    m = matcher if matcher is not None else _worker_matcher
    texts = [t if isinstance(t, str) else "" for t in messages]
    rows, ids, scores = [], [], []
    for i, found in enumerate(m.match_lines(texts)):
        if found:
            best = found[0]
            rows.append(i)
            ids.append(best.record_id)
            scores.append(float(best.score))
    return rows, ids, scores


class _RecordColumns:
    """The ``errkb`` struct of each record seen so far, as Arrow columns to ``take`` from."""

    def __init__(self, resolve_many, resolve_one, site_url: str | None):
        self.resolve_many = resolve_many
        self.resolve_one = resolve_one
        self.site_url = site_url
        self.index: dict[str, int] = {}
        self.values: dict[str, list] = {k: [] for k in ERRKB_FIELDS if k != "score"}
        self._arrays: dict | None = None
        self.labels: dict[str, str] = {}

    def _add(self, record_id: str, record: dict | None) -> int:
        if record is None and self.resolve_one is not None:
            record = self.resolve_one(record_id)
        record = record or {"id": record_id}
        obj = errkb_object(_RecordMatch(record_id, record), self.site_url)
        for k in self.values:
            self.values[k].append(obj[k])
        self.labels[record_id] = f"{obj['repo']}/{obj['slug']}"
        self._arrays = None
        self.index[record_id] = len(self.index)
        return self.index[record_id]

    def struct(self, n: int, rows: list[int], ids: list[str], scores: list[float]):
        import numpy as np
        import pyarrow as pa

        new = set(ids) - self.index.keys()
        if new:
            found = self.resolve_many(sorted(new)) if self.resolve_many is not None else {}
            for rid in sorted(new):
                self._add(rid, found.get(rid))
        idx = [self.index[r] for r in ids]
        if self._arrays is None:
            self._arrays = {k: pa.array(v, type=pa.string()) for k, v in self.values.items()}
        take = np.zeros(n, dtype=np.int32)
        valid = np.zeros(n, dtype=bool)
        score = np.zeros(n, dtype=np.float64)
        if rows:
            take[rows] = idx
            valid[rows] = True
            score[rows] = np.round(scores, 3)
        mask = pa.array(~valid)
        take_arr = pa.array(take)
        children = []
        for k in ERRKB_FIELDS:
            if k == "score":
                children.append(pa.array(score, type=pa.float64()))
            else:
                children.append(self._arrays[k].take(take_arr) if len(self._arrays[k]) else pa.nulls(n, pa.string()))
        return pa.StructArray.from_arrays(children, names=list(ERRKB_FIELDS), mask=mask)


class _RecordMatch:
    """Just enough of a Match for :func:`errkb_object` when only the record is known."""

    def __init__(self, record_id: str, record: dict):
        self.record_id = record_id
        self.record = record
        self.slug = record.get("slug") or record_id
        self.repo = record.get("repo") or "unknown/unknown"
        self.error_class = record.get("errorClass")
        self.severity = record.get("severity")
        self.score = 0.0


def errkb_struct_type():
    import pyarrow as pa

    return pa.struct([(k, pa.float64() if k == "score" else pa.string()) for k in ERRKB_FIELDS])


# -- the batch path ------------------------------------------------------------------------


def enrich_archive(
    inputs: Sequence[str],
    output: str | os.PathLike,
    matcher: Any,
    fields: Sequence[str] = ("message",),
    site_url: str | None = None,
    only_matched: bool = False,
    workers: int | None = None,
    batch_rows: int = BATCH_ROWS,
    resolve_many=None,
) -> ArchiveSummary:
    """Enrich every row of ``inputs`` into ``output`` (format from its extension).

    Rows keep every column and their order; an ``errkb`` struct column (null when
    the row matched nothing) is added, replacing one the input already had.
    ``resolve_many(ids) -> {id: record}`` supplies matched records' solutions and
    slugs in bulk (``KnowledgeBase.get_many``); without it, the matcher's own
    per-record look-up (``Matcher.record``) is used.
    """
    _require_pyarrow()
    import duckdb
    import pyarrow as pa

    inputs = [str(i) for i in inputs]
    output = str(output)
    out_ext = os.path.splitext(output.lower())[1]
    if out_ext not in _OUTPUT_FORMATS:
        raise ArchiveError(f"{output}: unknown output format (use .parquet, .jsonl or .csv)")
    if os.path.abspath(output) in {os.path.abspath(p) for p in inputs}:
        raise ArchiveError(f"{output}: the output would overwrite an input")
    workers = workers or os.cpu_count() or 1
    started = time.perf_counter()
    summary = ArchiveSummary(inputs=inputs, output=output, workers=workers)

    con = connect()
    source = source_sql(inputs)
    try:
        rel = con.sql(f"SELECT * FROM {source}")
        columns = dict(zip(rel.columns, (str(t) for t in rel.types)))
    except duckdb.Error as e:
        raise ArchiveError(f"{', '.join(inputs)}: {duck_error(e)}") from e
    exprs = [e for e in (column_expr(f, columns) for f in fields) if e is not None]
    if not exprs:
        raise ArchiveError(
            f"{inputs[0]}: no column {' or '.join(map(repr, fields))} to read messages from "
            f"(columns: {', '.join(columns)}); name one with --field"
        )
    message = exprs[0] if len(exprs) == 1 else f"coalesce({', '.join(exprs)})"
    keep = "* EXCLUDE (errkb)" if "errkb" in columns else "*"
    try:
        # Built on the bound relation: the source's schema is not detected a second time.
        rel = rel.select(f"{keep}, {message} AS {MESSAGE_COLUMN}")
        # A streaming reader: DuckDB produces the next batch only when it is asked for.
        to_reader = getattr(rel, "to_arrow_reader", None) or rel.fetch_record_batch  # duckdb < 1.4
        reader = to_reader(batch_rows)
    except duckdb.Error as e:
        raise ArchiveError(f"{', '.join(inputs)}: {duck_error(e)}") from e
    in_schema = reader.schema
    out_schema = in_schema.remove(in_schema.get_field_index(MESSAGE_COLUMN)).append(pa.field("errkb", errkb_struct_type()))
    records = _RecordColumns(resolve_many, matcher.record, site_url)
    failure: list[BaseException] = []

    def enriched(batch, rows, ids, scores):
        summary.rows += batch.num_rows
        summary.matched += len(rows)
        summary.batches += 1
        summary.by_record.update(ids)
        struct = records.struct(batch.num_rows, rows, ids, scores)
        out = batch.drop_columns([MESSAGE_COLUMN]).append_column(pa.field("errkb", errkb_struct_type()), struct)
        if only_matched:
            out = out.filter(struct.is_valid())
        summary.written += out.num_rows
        return out

    def batches() -> Iterator:
        try:
            if workers <= 1:
                for batch in reader:
                    yield enriched(batch, *_match_column(batch.column(MESSAGE_COLUMN).to_pylist(), matcher))
                return
            yield from _parallel(reader, matcher, workers, enriched)
        except duckdb.Error as e:
            failure.append(ArchiveError(f"{', '.join(inputs)}: {duck_error(e)}"))
            raise
        except BaseException as e:
            failure.append(e)
            raise

    out_reader = pa.RecordBatchReader.from_batches(out_schema, batches())
    tmp = output + ".tmp" + out_ext
    writer = connect()
    try:
        writer.register("enriched_batches", out_reader)
        writer.execute(f"COPY (SELECT * FROM enriched_batches) TO {sql_string(tmp)} {_OUTPUT_FORMATS[out_ext]}")
        os.replace(tmp, output)
    except duckdb.Error as e:
        Path(tmp).unlink(missing_ok=True)
        if failure:  # the error happened while reading or matching, not writing
            raise failure[0] from None
        raise ArchiveError(f"{output}: {duck_error(e)}") from e
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    finally:
        writer.close()
        con.close()
    summary.labels = records.labels
    summary.seconds = time.perf_counter() - started
    return summary


def _parallel(reader, matcher, workers: int, enriched) -> Iterator:
    """Match batches in ``workers`` processes, at most two batches per worker in
    flight (bounded memory), yielding enriched batches in input order."""
    with tempfile.TemporaryDirectory(prefix="errkb-archive-") as tmp:
        index_path = os.path.join(tmp, "matcher.idx")
        matcher.save(index_path, include_records=False)
        # spawn, not fork: the parent runs DuckDB threads, which fork would not carry over safely.
        ctx = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(max_workers=workers, mp_context=ctx, initializer=_init_worker, initargs=(index_path,)) as pool:
            pending: deque[tuple[Any, Future]] = deque()
            for batch in reader:
                pending.append((batch, pool.submit(_match_column, batch.column(MESSAGE_COLUMN).to_pylist())))
                if len(pending) >= 2 * workers:
                    b, fut = pending.popleft()
                    yield enriched(b, *_result(fut))
            while pending:
                b, fut = pending.popleft()
                yield enriched(b, *_result(fut))


def _result(fut: Future):
    try:
        return fut.result()
    except BrokenProcessPool as e:
        raise ArchiveError(f"a matcher worker process died ({e}); retry with --workers 1") from e
