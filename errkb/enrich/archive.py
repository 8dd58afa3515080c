"""Enrich whole log archives in bulk (``errkb query`` asks them: errkb.enrich.query).

``errkb enrich --input logs.jsonl --output enriched.parquet``: the archive (JSON Lines,
Parquet or CSV; globs and several files allowed) is read as a stream of batches, the
matcher runs over each batch's messages (``Matcher.match_lines``, in worker processes
so every core works), an ``errkb`` column is added, and the batches are written out
(Parquet, JSON Lines or CSV) as they come. Memory stays bounded by a few batches
whatever the input size.

Parquet and CSV archives are read by DuckDB as Arrow record batches. JSON Lines
archives are read as raw lines (pyarrow's input streams: plain, .gz, .zst), never
through ``read_json``, because that reader aborts on one bad line, turns integers
beyond 2**64 into floats, stringifies mixed arrays and renames ``host`` to
``host_1`` next to ``Host`` (docs/enrich.md, "Archives"):

Its parts, one concern a module:

- errkb.enrich.duck: the formats, DuckDB as the file engine (SQL quoting, connection, errors);
- errkb.enrich.jsonl: JSON Lines read as raw lines, in blocks and as Arrow tables;
- errkb.enrich.jsonl_out: JSON Lines out, the streaming filter's own bytes, in workers;
- errkb.enrich.shape: JSON Lines to Parquet/CSV, the shape inference and the SQL plan;
- errkb.enrich.value: the ``errkb`` value (the struct column) every path writes;
- errkb.enrich.writers: DuckDB's COPY, or pyarrow where DuckDB cannot name the columns;
- errkb.enrich.pool: the matcher worker processes.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from errkb.cache import replacing
from errkb.enrich.duck import (
    MESSAGE_COLUMN,
    ArchiveError,
    check_name,
    column_expr,
    connect,
    duck_error,
    input_format,
    source_sql,
)
from errkb.enrich.jsonl import RAW_TABLE, json_files, raw_batch, raw_blocks, reason
from errkb.enrich.jsonl_out import jsonl_to_jsonl
from errkb.enrich.pool import add_bounded, column_matcher, match_column, pool_map
from errkb.enrich.shape import TEXT_COLUMN, JsonPlan, json_plan
from errkb.enrich.value import ERRKB_FIELDS, RecordValues, errkb_struct_type, is_site  # noqa: F401 - the column, named here too
from errkb.enrich.writers import OUTPUT_FORMATS, write
from errkb.match.sites import prepared

BATCH_ROWS = 65536
INSTALL_HINT = "the archive path needs pyarrow: pip install 'errkb[archive]'"


@dataclass
class ArchiveSummary:
    inputs: list[str]
    output: str
    rows: int = 0
    matched: int = 0  # rows a record matched
    sites: int = 0  # rows no record matched but a known site does (tier "site": where, not a fix)
    site_errors: int = 0  # batches whose known-site lookup failed (their rows got no site)
    written: int = 0
    batches: int = 0
    workers: int = 1
    seconds: float = 0.0
    # JSON Lines archives: lines that are not a JSON object (kept as {"message": <line>}),
    # lines that are not valid UTF-8 (their bytes kept in message_b64), and, for JSON
    # Lines output, matched object lines that already had an errkb member (written unchanged)
    not_json: int = 0
    invalid_utf8: int = 0
    already_enriched: int = 0
    # what the matcher's time bound cut short, summed over the worker processes
    bounded: dict = field(default_factory=lambda: {"timeouts": 0, "skipped": 0, "disabled": []})
    by_record: Counter = field(default_factory=Counter)
    labels: dict[str, str] = field(default_factory=dict)

    def as_dict(self) -> dict:
        return {
            "inputs": self.inputs,
            "output": self.output,
            "rows": self.rows,
            "matched": self.matched,
            "sites": self.sites,
            "site_errors": self.site_errors,
            "written": self.written,
            "batches": self.batches,
            "workers": self.workers,
            "not_json": self.not_json,
            "invalid_utf8": self.invalid_utf8,
            "already_enriched": self.already_enriched,
            "bounded": self.bounded,
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
        if self.sites:
            lines.append(f"  {self.sites:,} more rows are raised at a known site (tier site: where, not a fix)")
        if self.site_errors:
            lines.append(f"  {self.site_errors:,} batches' known-site lookups failed (their rows got no site)")
        if self.not_json:
            lines.append(f"  {self.not_json:,} lines were not JSON objects (kept, their text in message)")
        if self.invalid_utf8:
            lines.append(f"  {self.invalid_utf8:,} lines were not valid UTF-8 (their bytes kept in message_b64)")
        if self.already_enriched:
            lines.append(f"  {self.already_enriched:,} matched JSON lines already had an errkb member (written unchanged)")
        cut = self.bounded
        if cut["timeouts"] or cut["skipped"]:
            lines.append(f"  {cut['timeouts']:,} pattern runs hit the time bound and {cut['skipped']:,} were not run "
                         f"(counted as no match); records no longer run: {', '.join(cut['disabled']) or 'none'}")
        lines += [f"  {t['rows']:>10,}  {t['id']}  {t['record']}" for t in d["top"]]
        return "\n".join(lines)


def _require_pyarrow():
    try:
        import pyarrow  # noqa: F401
    except ImportError as e:
        raise ArchiveError(INSTALL_HINT) from e


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
    sites: Any = None,
) -> ArchiveSummary:
    """Enrich every row of ``inputs`` into ``output`` (format from its extension).

    Rows keep every column and their order; an ``errkb`` struct column (null when
    the row matched nothing) is added, replacing one the input already had. A JSON
    Lines archive written as JSON Lines is the streaming filter's output, line for line
    (an ``errkb`` member only on matched lines; a line that already had one is kept as
    it is). ``resolve_many(ids) -> {id: record}`` supplies matched records' solutions and
    slugs in bulk (``KnowledgeBase.get_many``); without it, the matcher's own
    per-record look-up (``Matcher.record``) is used. ``sites`` (``KnowledgeBase.sites()``;
    None: the tier is off) tags a row no record matches but a known site does: tier
    "site", with where it is raised (the struct's ``site`` field; a JSON line gets the
    streaming filter's site object).
    """
    _require_pyarrow()
    import duckdb
    import pyarrow as pa

    inputs = [str(i) for i in inputs]
    output = str(output)
    check_name(output)
    out_ext = os.path.splitext(output.lower())[1]
    if out_ext not in OUTPUT_FORMATS:
        raise ArchiveError(f"{output}: unknown output format (use .parquet, .jsonl or .csv)")
    if os.path.abspath(output) in {os.path.abspath(p) for p in inputs}:
        raise ArchiveError(f"{output}: the output would overwrite an input")
    workers = workers or os.cpu_count() or 1
    started = time.perf_counter()
    summary = ArchiveSummary(inputs=inputs, output=output, workers=workers)
    fmt = input_format(inputs)
    if sites is not None:
        # built once here, so worker processes only open it (an index that cannot be
        # prepared turns the tier off: every batch counts a failed lookup)
        sites = prepared(sites)

    if fmt == "json" and OUTPUT_FORMATS[out_ext] == "(FORMAT json)":
        files = json_files(inputs)
        try:
            # outputs keep an ordinary file's mode (0666 less the umask), unlike caches
            with replacing(output, suffix=".tmp" + out_ext, mode=0o666) as tmp, open(tmp, "wb") as out:
                jsonl_to_jsonl(files, out, matcher, fields, site_url, only_matched, workers, batch_rows, resolve_many, summary,
                               sites)
        except OSError as e:
            raise ArchiveError(f"{output}: cannot write: {reason(e)}") from e
        summary.seconds = time.perf_counter() - started
        return summary

    con = connect()
    names: list[str] | None = None  # JSON in: the columns' own names (c0, c1, ... inside)
    json_cols: list[bool] = []
    if fmt == "json":
        files = json_files(inputs)
        plan = json_plan(con, files, fields, batch_rows, inputs[0])
        names, json_cols = plan.names, plan.json_columns
        in_schema = _empty_result(con, plan.sql).schema
        reader = _json_batches(con, files, plan, batch_rows, summary)
    else:
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
        # an input errkb column (an archive enriched before) is replaced; DuckDB's names are
        # case-insensitive, so "Errkb" is the same column to it and goes too
        keep = "* EXCLUDE (errkb)" if any(c.lower() == "errkb" for c in columns) else "*"
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
    values = RecordValues(site_url, resolve_many, matcher.record)
    failure: list[BaseException] = []
    per_process: dict = {}

    def enriched(batch, matched):
        rows, hits, report, site_failed = matched
        add_bounded(summary, per_process, report)
        summary.site_errors += site_failed
        summary.rows += batch.num_rows
        record_ids = [h.record_id for h in hits if not is_site(h)]
        summary.matched += len(record_ids)
        summary.sites += len(hits) - len(record_ids)
        summary.batches += 1
        summary.by_record.update(record_ids)
        values.fetch(record_ids)
        struct = values.struct(batch.num_rows, rows, hits)
        out = batch.drop_columns([MESSAGE_COLUMN]).append_column(pa.field("errkb", errkb_struct_type()), struct)
        if only_matched:
            out = out.filter(struct.is_valid())
        summary.written += out.num_rows
        return out

    def batches() -> Iterator:
        try:
            if workers <= 1:
                local = column_matcher(matcher, sites)
                for batch in reader:
                    yield enriched(batch, match_column(batch.column(MESSAGE_COLUMN).to_pylist(), local))
                return
            tasks = ((batch, (batch.column(MESSAGE_COLUMN).to_pylist(),), batch.column(MESSAGE_COLUMN).nbytes)
                     for batch in reader)
            for batch, matched in pool_map(tasks, match_column, workers, matcher, column_matcher, (sites,)):
                yield enriched(batch, matched)
        except duckdb.Error as e:
            failure.append(ArchiveError(f"{', '.join(inputs)}: {duck_error(e)}"))
            raise
        except BaseException as e:
            failure.append(e)
            raise

    out_reader = pa.RecordBatchReader.from_batches(out_schema, batches())
    writer = connect()
    try:
        with replacing(output, suffix=".tmp" + out_ext, mode=0o666) as tmp:
            write(writer, out_reader, str(tmp), out_ext, names, json_cols)
    except duckdb.Error as e:
        if failure:  # the error happened while reading or matching, not writing
            raise failure[0] from None
        raise ArchiveError(f"{output}: {duck_error(e)}") from e
    except BaseException:
        if failure:
            raise failure[0] from None
        raise
    finally:
        writer.close()
        con.close()
    summary.labels = values.labels
    summary.seconds = time.perf_counter() - started
    return summary


def _arrow(rel):
    return (getattr(rel, "to_arrow_table", None) or rel.arrow)()


def _empty_result(con, sql: str):
    """The plan's result for no lines: its schema is every batch's."""
    con.register(RAW_TABLE, raw_batch(b"", False).slice(0, 0))
    return _arrow(con.sql(sql)).drop_columns([TEXT_COLUMN])


def _json_batches(con, files: Sequence[str], plan: JsonPlan, max_lines: int, summary: ArchiveSummary) -> Iterator:
    """Each block of raw lines converted by the plan's SQL: one Arrow batch per block."""
    import duckdb
    import pyarrow.compute as pc

    for path, block, final in raw_blocks(files, max_lines):
        raw = raw_batch(block, final)
        con.register(RAW_TABLE, raw)
        try:
            try:  # the usual block: every line starting with "{" is JSON
                table = _arrow(con.sql(plan.fast_sql)).combine_chunks()
            except (duckdb.InvalidInputException, duckdb.ConversionException):
                table = _arrow(con.sql(plan.sql)).combine_chunks()
        except duckdb.Error as e:
            raise ArchiveError(f"{path}: {duck_error(e)}") from e
        summary.invalid_utf8 += len(raw) - raw.column("__b64").null_count
        summary.not_json += pc.sum(table.column(TEXT_COLUMN)).as_py() or 0
        table = table.drop_columns([TEXT_COLUMN])
        yield from table.to_batches()
