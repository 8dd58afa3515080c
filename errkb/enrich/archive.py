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

- JSON Lines out: each line goes through the streaming filter's own line enricher
  (errkb.enrich.lines.LineEnricher) in the workers, so the output is byte for byte
  what ``errkb enrich < archive.jsonl`` writes: object lines keep their bytes with the
  ``errkb`` member spliced in as text, any other line becomes ``{"message": <line>}``.
- Parquet/CSV out: a first pass asks DuckDB for the structure of every object line
  (``json_group_structure``); each top-level key becomes a column under its own name,
  typed only where the type holds every value exactly, else a JSON column holding the
  value's JSON text; lines that are not JSON objects become rows whose ``message``
  holds the line. The second pass converts each batch with ``json_transform``.

DESIGN.md keeps SQL *to the errkb store* inside ``errkb.store.db``. This module does
not touch the store: it uses DuckDB as a file engine over the user's own archives,
which is what DuckDB is for. Paths, column names and structures reach SQL only quoted.
"""

from __future__ import annotations

import base64
import glob
import json
import multiprocessing
import os
import time
from collections import Counter, deque
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from errkb.cache import replacing, shipped_file
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


def _check_name(path: str) -> None:
    """DuckDB and Arrow take a path as UTF-8 text: a name with other bytes (kept by Python
    as lone surrogates) failed inside them as an "internal error"."""
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        shown = os.fsencode(path).decode("utf-8", "backslashreplace")
        raise ArchiveError(f"{shown}: the file name is not UTF-8, which DuckDB cannot open; rename the file") from None


def input_format(inputs: Sequence[str]) -> str:
    """The one format of ``inputs`` ("json", "parquet" or "csv"), after checking that
    each exists (a glob: matches a file) and has a known extension."""
    if not inputs:
        raise ArchiveError("no --input given")
    formats = set()
    for spec in inputs:
        spec = str(spec)
        for name in [spec] + (glob.glob(spec) if glob.has_magic(spec) else []):
            _check_name(name)
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
    (``errkb query`` reads enriched archives with it; enriching reads JSON Lines as raw lines)."""
    fmt = input_format(inputs)
    files = "[" + ", ".join(sql_string(str(s)) for s in inputs) + "]"
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


# -- matching, in this process or in workers ----------------------------------------------

_worker_matcher = None
_worker_lines = None  # JSON Lines output: the streaming filter's LineEnricher, errkb objects left as placeholders


def _init_worker(index_path: str, fields: Sequence[str] | None = None, only_matched: bool = False) -> None:
    global _worker_matcher, _worker_lines
    from errkb.match.matcher import Matcher

    _worker_matcher = Matcher.load(index_path)
    if fields is not None:
        _worker_lines = _line_enricher(_worker_matcher, fields, only_matched)


def _bounded(matcher) -> tuple[int, dict] | None:
    """(this process, what its matcher's time bound cut short so far)."""
    report = getattr(matcher, "bounded_report", None)
    return (os.getpid(), report()) if report is not None else None


def _match_column(messages: list, matcher=None) -> tuple[list[int], list[str], list[float], Any]:
    """(rows, record ids, scores) of the best match of each matched message, and the
    matcher's time-bound report."""
    m = matcher if matcher is not None else _worker_matcher
    texts = [t if isinstance(t, str) else "" for t in messages]
    rows, ids, scores = [], [], []
    for i, found in enumerate(m.match_lines(texts)):
        if found:
            best = found[0]
            rows.append(i)
            ids.append(best.record_id)
            scores.append(float(best.score))
    return rows, ids, scores, _bounded(m)


def _add_bounded(summary: ArchiveSummary, per_process: dict, report) -> None:
    """Sum the latest time-bound report of each process into ``summary.bounded``."""
    if report is None:
        return
    pid, counts = report
    per_process[pid] = counts
    disabled: list[str] = []
    for c in per_process.values():
        disabled += [r for r in c["disabled"] if r not in disabled]
    summary.bounded = {"timeouts": sum(c["timeouts"] for c in per_process.values()),
                       "skipped": sum(c["skipped"] for c in per_process.values()), "disabled": disabled}


# -- JSON Lines in: raw lines, never read_json ---------------------------------------------

RAW_READ = 16 << 20  # a block: up to batch_rows lines
_CODECS = {".gz": "gzip", ".zst": "zstd", ".zstd": "zstd"}
# A number DuckDB would not hold exactly in a BIGINT/DOUBLE column: 16 or more digits
# before the point (beyond 2**53 possibly) or a 3-digit exponent (1e999 is not a
# double). A member whose value holds one is kept as JSON text (false alarms, e.g. such
# text inside a string, only cost a typed column). RE2 inside DuckDB: linear time.
_RISKY_NUMBER = r"(^|[:,\[])\s*-?(\d{16}|\d+(\.\d+)?[eE][+-]?\d{3})"
_INTS = frozenset({"UBIGINT", "BIGINT", "HUGEINT"})
_MAX_DEPTH = 32  # deeper structures are kept as JSON text
RAW_TABLE = "__errkb_raw"
TEXT_COLUMN = "__errkb_text"


def _reason(e: BaseException) -> str:
    return (getattr(e, "strerror", None) or str(e)).strip().splitlines()[0] if str(e).strip() else type(e).__name__


def json_files(inputs: Sequence[str]) -> list[str]:
    """The files of ``inputs``, a glob's matches in sorted order."""
    files: list[str] = []
    for spec in inputs:
        files += sorted(glob.glob(spec)) if glob.has_magic(spec) else [spec]
    return files


def _split_lines(block: bytes, limit: int) -> list[bytes]:
    """``block`` (lines joined by "\n") cut into pieces of at most ``limit`` lines."""
    if block.count(b"\n") < limit:
        return [block]
    import numpy as np

    pieces, start = [], 0
    for cut in np.flatnonzero(np.frombuffer(block, dtype=np.uint8) == 10)[limit - 1::limit].tolist():
        pieces.append(block[start:cut])
        start = cut + 1
    pieces.append(block[start:])
    return pieces


def raw_blocks(files: Sequence[str], max_lines: int) -> Iterator[tuple[str, bytes, bool]]:
    """(file, block, final) for each file in turn: a block is at most ``max_lines``
    complete lines joined by "\n" (framed as the streaming filter frames them: a last
    line without "\n" is a line, and ``final`` says so). .gz and .zst are decompressed."""
    import gzip
    import zlib

    import pyarrow as pa

    for path in files:
        codec = _CODECS.get(os.path.splitext(path.lower())[1])
        pending: list[bytes] = []
        try:
            # gzip's own reader checks the stream's end and CRC (pyarrow's stops quietly at a cut)
            opened = gzip.open(path, "rb") if codec == "gzip" else pa.input_stream(path, compression=codec)
            with opened as stream:
                while True:
                    chunk = stream.read(RAW_READ)
                    if not chunk:
                        break
                    last = chunk.rfind(b"\n")
                    if last < 0:
                        pending.append(chunk)
                        continue
                    block = b"".join([*pending, chunk[:last]]) if pending else chunk[:last]
                    pending = [chunk[last + 1:]] if last + 1 < len(chunk) else []
                    for piece in _split_lines(block, max_lines):
                        yield path, piece, False
        except (OSError, EOFError, zlib.error, pa.ArrowException) as e:
            raise ArchiveError(f"{path}: cannot read: {_reason(e)}") from e
        if pending:  # no "\n" in it: one line
            yield path, b"".join(pending), True


# JSON Lines out: the streaming filter's lines, errkb objects put in by the parent


class _Placeholders:
    """Stands in for the streaming filter's errkb fragments in a worker, which has the
    matcher but not the records: a matched line gets a NUL where its errkb object goes
    (no line the enricher writes holds a NUL: JSON escapes it) and the match is noted;
    the parent puts the objects in."""

    def __init__(self):
        self.found: list[tuple] = []

    def prepare(self, matches) -> None:
        pass

    def text(self, match) -> str:
        self.found.append((match.record_id, float(match.score), match.repo, match.slug, match.error_class, match.severity))
        return "\x00"


class _Found:
    """A match noted by a worker, with what the errkb object needs."""

    __slots__ = ("record_id", "score", "repo", "slug", "error_class", "severity", "_matcher")

    def __init__(self, found: tuple, matcher):
        self.record_id, self.score, self.repo, self.slug, self.error_class, self.severity = found
        self._matcher = matcher

    @property
    def record(self) -> dict | None:
        return self._matcher.record(self.record_id)


def _line_enricher(matcher, fields: Sequence[str], only_matched: bool):
    from errkb.enrich.lines import LineEnricher

    enricher = LineEnricher(matcher, fields=list(fields), only_matched=only_matched)
    enricher.fragments = _Placeholders()
    return enricher


def _enrich_lines(block: bytes, final: bool, enricher=None):
    """The streaming filter's output for ``block`` with a NUL for each errkb object, the
    matches in line order, (lines, JSON object lines, invalid UTF-8 lines, already
    enriched) and the time-bound report."""
    from errkb.enrich.lines import Counters

    e = enricher if enricher is not None else _worker_lines
    e.counters = Counters()
    e.fragments.found = []
    out = _objects_block(e, block)
    if out is None:
        out = e.enrich_block(block, final)
    c = e.counters
    return out, e.fragments.found, (c.lines, c.json_lines, c.invalid_utf8, c.already_enriched), _bounded(e.matcher)


def _not_json(name: str):
    raise ValueError(f"{name} is not JSON")


# The streaming filter's strictness: NaN/Infinity are not JSON, so such a line is text.
_STRICT = json.JSONDecoder(parse_constant=_not_json)


def _match_lines(e, messages: list[str]) -> list[list]:
    """The matcher's batch call; a failure there costs only the lines it failed on (as
    in the streaming filter)."""
    try:
        return e.matcher.match_lines(messages)
    except Exception:
        out = []
        for m in messages:
            try:
                out.append(e.matcher.match_lines([m])[0])
            except Exception:
                e.counters.matcher_errors += 1
                out.append([])
        return out


def _splice(line: str, text: str, empty: bool) -> str:
    """``line`` (a JSON object) with ``"errkb": text`` added before its closing brace, as
    text: the input's members stay byte for byte (the streaming filter's rule)."""
    body = line.rstrip()
    return f'{body[:-1]}"errkb": {text}}}' if empty else f'{body[:-1]}, "errkb": {text}}}'


def _objects_block(e, block: bytes) -> bytes | None:
    """``e.enrich_block(block)`` for the usual block of a JSON Lines archive, where every
    line is a JSON object (None for any other block): the block itself is the output of
    its unmatched lines, so only matched lines are rebuilt (the streaming filter wraps
    every line as text first, for pipes that mostly carry text). The tests hold the two
    to the same bytes."""
    from errkb.enrich.lines import field_value

    if b"\r" in block or not block.startswith(b"{"):
        return None
    try:
        text = block.decode("utf-8")
    except UnicodeDecodeError:
        return None
    lines = text.split("\n")
    if text.count("\n{") != len(lines) - 1:
        return None
    # per line: 0 an object, 1 the empty object, 2 an object with an errkb member (kept
    # as flags, not dicts: a block's dicts alive at once would keep the collector busy)
    kinds, messages, paths = [], [], e.paths
    scan = _STRICT.scan_once  # the decoder without its whitespace regexes: a line here starts with "{"
    try:
        for line in lines:
            obj, end = scan(line, 0)
            if end != len(line) and line[end:].strip(" \t\n\r"):
                return None
            kinds.append(2 if "errkb" in obj else 0 if obj else 1)
            messages.append(field_value(obj, paths) or "")
    except (ValueError, RecursionError, StopIteration):
        return None
    counters = e.counters
    counters.lines += len(lines)
    counters.json_lines += len(lines)
    results = _match_lines(e, messages)
    matched = [i for i, r in enumerate(results) if r]
    done = {i: lines[i] if kinds[i] == 2 else _splice(lines[i], e.fragments.text(results[i][0]), kinds[i] == 1)
            for i in matched}
    counters.already_enriched += sum(1 for i in matched if kinds[i] == 2)  # written as read (docs/enrich.md)
    if e.only_matched:
        return "".join(done[i] + "\n" for i in matched).encode("utf-8")
    if not matched:
        return block + b"\n"
    out_lines = block.split(b"\n")
    for i, line in done.items():
        out_lines[i] = line.encode("utf-8")
    out_lines.append(b"")
    return b"\n".join(out_lines)


def _jsonl_to_jsonl(files, out, matcher, fields, site_url, only_matched, workers, max_lines, resolve_many,
                    summary: ArchiveSummary) -> None:
    from errkb.enrich.lines import LineEnricher

    # the streaming filter's own errkb texts (one JSON text per record, the score put in)
    fragments = LineEnricher(matcher, site_url=site_url, resolve_many=resolve_many).fragments
    per_process: dict = {}
    tasks = (((block, final), (block, final)) for _, block, final in raw_blocks(files, max_lines))
    if workers <= 1:
        local = _line_enricher(matcher, fields, only_matched)
        results: Iterator = ((key, _enrich_lines(*args, local)) for key, args in tasks)
    else:
        results = _pool_map(tasks, _enrich_lines, workers, matcher, (list(fields), only_matched))
    for _, (data, found, (lines, objects, invalid, already), report) in results:
        summary.batches += 1
        summary.rows += lines
        summary.not_json += lines - objects
        summary.invalid_utf8 += invalid
        summary.already_enriched += already
        _add_bounded(summary, per_process, report)
        if found:
            matches = [_Found(f, matcher) for f in found]
            fragments.prepare(matches)
            parts = data.split(b"\x00")
            pieces = [parts[0]]
            for m, part in zip(matches, parts[1:]):
                pieces += [fragments.text(m).encode("utf-8"), part]
                summary.by_record[m.record_id] += 1
                summary.labels.setdefault(m.record_id, f"{m.repo}/{m.slug}")
            data = b"".join(pieces)
            summary.matched += len(matches)
        summary.written += data.count(b"\n")
        out.write(data)


# Parquet/CSV out: typed columns where exact, JSON text elsewhere


def _raw_batch(block: bytes, final: bool):
    """One block's lines as an Arrow table: the text (U+FFFD for bytes that are not
    UTF-8), those bytes in base64, and whether the line may be a JSON object."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    if b"\r" in block:  # CRLF: the "\r" is not part of the line (as the streaming filter)
        block = block.replace(b"\r\n", b"\n")
        if block.endswith(b"\r") and not final:
            block = block[:-1]
    # The lines as one Arrow string array over the block's bytes (no Python string per
    # line): the newlines are taken out and the offsets say where each line starts.
    newlines = np.flatnonzero(np.frombuffer(block, dtype=np.uint8) == 10)
    offsets = np.empty(len(newlines) + 2, dtype=np.int64)
    offsets[0] = 0
    offsets[1:-1] = newlines - np.arange(len(newlines))
    offsets[-1] = len(block) - len(newlines)
    text = pa.LargeStringArray.from_buffers(len(newlines) + 1, pa.py_buffer(offsets), pa.py_buffer(block.replace(b"\n", b"")))
    b64 = None
    try:
        text.validate(full=True)  # UTF-8
    except pa.ArrowInvalid:
        lines, b64 = [], []
        for raw in block.split(b"\n"):
            try:
                lines.append(raw.decode("utf-8"))
                b64.append(None)
            except UnicodeDecodeError:
                lines.append(raw.decode("utf-8", "replace"))
                b64.append(base64.b64encode(raw).decode("ascii"))
        text = pa.array(lines, pa.large_string())
    obj = pc.starts_with(text, "{")
    if b"NaN" in block or b"Infinity" in block:
        obj = _strict_objects(block, newlines, obj)
    if b64 is None:
        b64_arr = pa.nulls(len(text), pa.string())
    else:
        b64_arr = pa.array(b64, pa.string())
        obj = pc.and_(obj, pc.is_null(b64_arr))
    return pa.table({"__text": text, "__b64": b64_arr, "__obj": obj})


def _strict_objects(block: bytes, newlines, obj):
    """``obj`` without the lines DuckDB takes for objects but JSON does not: NaN and
    Infinity are no JSON values (the streaming filter makes such a line text too). Only
    the lines holding either word are parsed here."""
    import numpy as np
    import pyarrow as pa

    flags = obj.to_numpy(zero_copy_only=False).copy()
    suspects = set()
    for word in (b"NaN", b"Infinity"):
        i = block.find(word)
        while i >= 0:
            suspects.add(int(np.searchsorted(newlines, i)))  # the line: newlines before it
            i = block.find(word, i + 1)
    for n in suspects:
        if not flags[n]:
            continue
        start = int(newlines[n - 1]) + 1 if n else 0
        end = int(newlines[n]) if n < len(newlines) else len(block)
        try:
            _STRICT.decode(block[start:end].decode("utf-8"))
        except ValueError:  # (UnicodeDecodeError too: such a line is no object here anyway)
            flags[n] = False
        except RecursionError:
            pass
    return pa.array(flags, pa.bool_())


# The block mapped so that a number's shape is left: digits -> "0", signs -> "+", e/E ->
# "e", "." stays, what may precede a number (: , [ and JSON whitespace) -> ":", all else
# -> "x". A risky number always leaves one of these shapes: ":" (and a sign) and 16
# digits, or an exponent "e000"/"e+000" right after ":" (and a sign), digits and points,
# a digit last (a false alarm, such text inside a string, costs one query over the block).
_SHAPE_TABLE = bytes(
    ord("0") if 48 <= b <= 57 else ord("+") if b in b"+-" else ord("e") if b in b"eE" else ord(".") if b == 46
    else ord(":") if b in b":,[ \t\r\n" else ord("x")
    for b in range(256)
)
_BIG_INT_SHAPES = (b":" + b"0" * 16, b":+" + b"0" * 16)


def _may_hold_risky_number(block: bytes) -> bool:
    """False when no JSON number in ``block`` can be one _RISKY_NUMBER flags: the usual
    block (hex ids and digits inside strings aside) costs a few C passes, not a regex
    over every line."""
    shape = block.translate(_SHAPE_TABLE)
    if any(mark in shape for mark in _BIG_INT_SHAPES):
        return True
    for mark in (b"e000", b"e+000"):  # a 3-digit exponent: does a number start right before it?
        i = shape.find(mark)
        while i >= 0:
            if shape[i - 1:i] == b"0":  # in JSON a digit comes right before the exponent
                before = shape[max(0, i - 64):i].rstrip(b"0.")
                if not before or before.endswith((b":", b":+")):  # (64 digits and points: say yes)
                    return True
            i = shape.find(mark, i + 1)
    return False


def _merge(a, b, depth: int = 0):
    """Two ``json_group_structure`` results merged (as DuckDB merges them, coarser)."""
    if a is None or a == "NULL":
        return b
    if b is None or b == "NULL":
        return a
    if depth > _MAX_DEPTH:
        return "JSON"
    if isinstance(a, dict) and isinstance(b, dict):
        out = dict(a)
        for k, v in b.items():
            out[k] = _merge(out[k], v, depth + 1) if k in out else v
        return out
    if isinstance(a, list) and isinstance(b, list):
        return [_merge(a[0] if a else None, b[0] if b else None, depth + 1)]
    if isinstance(a, str) and isinstance(b, str):
        if a == b:
            return a
        if a in _INTS and b in _INTS:
            return "HUGEINT"
        if a in _INTS | {"DOUBLE"} and b in _INTS | {"DOUBLE"}:
            return "DOUBLE"
    return "JSON"


def _fold(key: str) -> str:
    return key.lower()  # DuckDB's names are case-insensitive


def _exact(structure, risky: bool, depth: int = 0):
    """The ``json_transform`` structure that holds every value of ``structure`` exactly,
    or None when only JSON text does (mixed types, arrays of mixed values, numbers a
    BIGINT/DOUBLE would change, keys differing only in case, empty keys, deep nesting)."""
    if depth > _MAX_DEPTH:
        return None
    if isinstance(structure, str):
        if structure in ("VARCHAR", "BOOLEAN"):
            return structure
        if structure in _INTS:
            if not risky:  # at most 15 digits: a BIGINT holds it
                return "BIGINT"
            return structure if structure in ("UBIGINT", "BIGINT") else None
        if structure == "DOUBLE":
            return None if risky else "DOUBLE"
        return None  # NULL (never a value), JSON (mixed), or a type this code does not know
    if isinstance(structure, list):
        inner = _exact(structure[0], risky, depth + 1) if structure else None
        return [inner] if inner is not None else None
    if isinstance(structure, dict):
        if not structure or "" in structure or len({_fold(k) for k in structure}) < len(structure):
            return None
        out = {}
        for k, v in structure.items():
            t = _exact(v, risky, depth + 1)
            if t is None:
                return None
            out[k] = t
        return out
    return None


def _pointer(parts: Sequence[str]) -> str:
    """A JSON Pointer (RFC 6901) to a member: DuckDB's JSON paths cannot name every key."""
    return "".join("/" + p.replace("~", "~0").replace("/", "~1") for p in parts)


@dataclass
class _JsonPlan:
    """How JSON object lines become columns (from the first pass over the archive)."""

    names: list[str]
    exprs: list[str]
    json_columns: list[bool]
    message: str
    sql: str
    fast_sql: str  # the same, for a block whose lines starting with "{" are all JSON


def _block_structure(con, block: bytes, final: bool) -> tuple[Any, set[str], int, int, int]:
    """(structure of the block's object lines, keys holding a risky number, object lines,
    other lines, lines not UTF-8)."""
    import duckdb

    con.register(RAW_TABLE, _raw_batch(block, final))
    query = (f"SELECT CAST(json_group_structure(j) AS VARCHAR), count(j), count(*) - count(j), count(__b64) "
             f"FROM (SELECT CASE WHEN __obj THEN {{}}(__text AS JSON) END AS j, __b64 FROM {RAW_TABLE})")
    try:  # the usual block: every line starting with "{" is JSON
        text, n_obj, n_other, n_b64 = con.execute(query.format("CAST")).fetchall()[0]
    except (duckdb.InvalidInputException, duckdb.ConversionException):
        text, n_obj, n_other, n_b64 = con.execute(query.format("TRY_CAST")).fetchall()[0]
    risky: set[str] = set()
    if _may_hold_risky_number(block):
        pattern = sql_string(_RISKY_NUMBER)
        risky.update(k for (k,) in con.execute(
            f"SELECT DISTINCT je.key FROM (SELECT TRY_CAST(__text AS JSON) AS j FROM {RAW_TABLE} "
            f"WHERE __obj AND regexp_matches(__text, {pattern})) f, json_each(f.j) je "
            f"WHERE regexp_matches(CAST(je.value AS VARCHAR), {pattern})"
        ).fetchall())
    found = None
    if text:
        try:
            found = json.loads(text)
        except RecursionError:  # nesting deeper than Python parses: per key, deep ones as JSON
            found = {}
            for key, sub in con.execute(
                f"SELECT je.key, CAST(json_group_structure(je.value) AS VARCHAR) FROM "
                f"(SELECT TRY_CAST(__text AS JSON) AS j, row_number() OVER () AS n FROM {RAW_TABLE} WHERE __obj) f, "
                f"json_each(f.j) je GROUP BY je.key ORDER BY min(f.n)"
            ).fetchall():
                try:
                    found[key] = json.loads(sub)
                except RecursionError:
                    found[key] = "JSON"
        # every line here is an object: a structure that is not one (DuckDB says "JSON"
        # for {}) means objects without members
        found = found if isinstance(found, dict) else {}
    return found, risky, n_obj, n_other, n_b64


def _first_pass(con, files: Sequence[str], max_lines: int) -> tuple[Any, set[str], int, int, int]:
    """(merged structure of the object lines, keys holding a risky number, object lines,
    other lines, lines not UTF-8) over every line of ``files``. Blocks are read and
    asked in a few threads (DuckDB and numpy let go of the GIL), one block per thread
    and one more in flight; their structures are merged in file order, so columns come
    in the order their keys first appear."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    import duckdb

    local = threading.local()

    def run(block: bytes, final: bool):
        cursor = getattr(local, "cursor", None)
        if cursor is None:
            cursor = local.cursor = con.cursor()
        return _block_structure(cursor, block, final)

    structure = None
    risky: set[str] = set()
    objects = others = invalid = 0
    # half the cores, up to 4: the workers and DuckDB's own threads want the rest
    threads = max(1, min(4, (os.cpu_count() or 1) // 2))
    with ThreadPoolExecutor(threads, thread_name_prefix="errkb-archive") as pool:
        pending: deque[tuple[str, Future]] = deque()

        def collect() -> None:
            nonlocal structure, objects, others, invalid
            path, fut = pending.popleft()
            try:
                found, keys, n_obj, n_other, n_b64 = fut.result()
            except duckdb.Error as e:
                raise ArchiveError(f"{path}: {duck_error(e)}") from e
            if found is not None:
                structure = _merge(structure, found)
            risky.update(keys)
            objects += n_obj
            others += n_other
            invalid += n_b64

        for path, block, final in raw_blocks(files, max_lines):
            pending.append((path, pool.submit(run, block, final)))
            if len(pending) > threads:
                collect()
        while pending:
            collect()
    return structure, risky, objects, others, invalid


def json_plan(con, files: Sequence[str], fields: Sequence[str], max_lines: int, spec: str) -> _JsonPlan:
    """Read the archive once and decide its columns: every top-level key under its own
    name (``errkb`` aside: the new one replaces it), typed where the type is exact, else
    JSON text; ``message`` (and ``message_b64``) hold the lines that are not JSON objects."""
    structure, risky, objects, others, invalid = _first_pass(con, files, max_lines)
    members = structure if isinstance(structure, dict) else {}
    keys = [k for k in members if k != "errkb"]
    types = {k: _exact(members[k], k in risky) for k in keys}
    for name, needed in (("message", others > 0), ("message_b64", invalid > 0)):
        if needed and name in types and types[name] != "VARCHAR":
            types[name] = None  # holds the other lines' text too: JSON (the text as a JSON string)
    groups: list[dict] = []  # json_transform structures; keys differing only in case go to different ones
    where: dict[str, str] = {}
    for k in keys:
        if k == "":
            where[k] = f"CASE WHEN __ok THEN json_extract(__text, {sql_string(_pointer(['']))}) END"
            types[k] = None
            continue
        g = next((i for i, group in enumerate(groups) if _fold(k) not in {_fold(x) for x in group}), None)
        if g is None:
            groups.append({})
            g = len(groups) - 1
        groups[g][k] = types[k] if types[k] is not None else "JSON"
        where[k] = f"__j{g}[{sql_string(k)}]"
    names, exprs, json_cols = [], [], []
    for k in keys:
        names.append(k)
        exprs.append(where[k])
        json_cols.append(types[k] is None)
    # the lines that are not JSON objects: {"message": <line>} (+ message_b64), as the streaming filter
    for name, value, needed in (("message", "__text", others > 0), ("message_b64", "__b64", invalid > 0)):
        if not needed:
            continue
        if name in names:
            i = names.index(name)
            row = "to_json(" + value + ")" if json_cols[i] else value
            exprs[i] = f"CASE WHEN __ok THEN {exprs[i]} ELSE {row} END"
        else:
            names.append(name)
            exprs.append(f"CASE WHEN __ok THEN NULL ELSE {value} END")
            json_cols.append(False)
    # the message each object line is matched on: the first field holding a string
    candidates = []
    for f in fields:
        if f in where:
            e, t = where[f], types[f]
            candidates.append(e if t == "VARCHAR" else f"CASE WHEN json_type({e}) = 'VARCHAR' THEN {e} ->> '$' END"
                              if t is None else None)
        parts = f.split(".")
        if len(parts) > 1 and parts[0] in where:
            e, t = where[parts[0]], types[parts[0]]
            rest = parts[1:]
            while rest and isinstance(t, dict) and rest[0] in t:
                e, t = f"{e}[{sql_string(rest[0])}]", t[rest[0]]
                rest = rest[1:]
            if not rest and t == "VARCHAR":
                candidates.append(e)
            elif rest and t is None:
                ptr = sql_string(_pointer(rest))
                candidates.append(f"CASE WHEN json_type({e}, {ptr}) = 'VARCHAR' THEN json_extract_string({e}, {ptr}) END")
    candidates = [c for c in candidates if c is not None]
    if keys and not any(f in where or f.split(".")[0] in where for f in fields):
        raise ArchiveError(
            f"{spec}: no column {' or '.join(map(repr, fields))} to read messages from "
            f"(columns: {', '.join(keys)}); name one with --field"
        )
    matched_on = f"coalesce({', '.join(candidates)})" if len(candidates) > 1 else candidates[0] if candidates else "NULL"
    message = f"CASE WHEN __ok THEN {matched_on} ELSE __text END"
    parsed = [f"CASE WHEN __obj THEN TRY(json_transform(__text, {sql_string(json.dumps(g))})) END AS __j{i}"
              for i, g in enumerate(groups)]
    fast = [p.replace("TRY(json_transform(", "(json_transform(") for p in parsed]
    ok = "__j0 IS NOT NULL" if groups else "(__obj AND json_valid(__text))"
    columns = [f"{e} AS c{i}" for i, e in enumerate(exprs)]
    def select(parsed: list[str]) -> str:
        return (
            f"SELECT {', '.join([*columns, f'{message} AS {MESSAGE_COLUMN}', f'NOT __ok AS {TEXT_COLUMN}'])} "
            f"FROM (SELECT *, {ok} AS __ok FROM (SELECT {', '.join(['__text', '__b64', '__obj', *parsed])} FROM {RAW_TABLE}))"
        )

    return _JsonPlan(names, exprs, json_cols, message, select(parsed), select(fast))


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
    the row matched nothing) is added, replacing one the input already had. A JSON
    Lines archive written as JSON Lines is the streaming filter's output, line for line
    (an ``errkb`` member only on matched lines; a line that already had one is kept as
    it is). ``resolve_many(ids) -> {id: record}`` supplies matched records' solutions and
    slugs in bulk (``KnowledgeBase.get_many``); without it, the matcher's own
    per-record look-up (``Matcher.record``) is used.
    """
    _require_pyarrow()
    import duckdb
    import pyarrow as pa

    inputs = [str(i) for i in inputs]
    output = str(output)
    _check_name(output)
    out_ext = os.path.splitext(output.lower())[1]
    if out_ext not in _OUTPUT_FORMATS:
        raise ArchiveError(f"{output}: unknown output format (use .parquet, .jsonl or .csv)")
    if os.path.abspath(output) in {os.path.abspath(p) for p in inputs}:
        raise ArchiveError(f"{output}: the output would overwrite an input")
    workers = workers or os.cpu_count() or 1
    started = time.perf_counter()
    summary = ArchiveSummary(inputs=inputs, output=output, workers=workers)
    fmt = input_format(inputs)

    if fmt == "json" and _OUTPUT_FORMATS[out_ext] == "(FORMAT json)":
        files = json_files(inputs)
        try:
            with replacing(output, suffix=".tmp" + out_ext, mode=0o666) as tmp, open(tmp, "wb") as out:
                _jsonl_to_jsonl(files, out, matcher, fields, site_url, only_matched, workers, batch_rows, resolve_many, summary)
        except OSError as e:
            raise ArchiveError(f"{output}: cannot write: {_reason(e)}") from e
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
    per_process: dict = {}

    def enriched(batch, matched):
        rows, ids, scores, report = matched
        _add_bounded(summary, per_process, report)
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
                    yield enriched(batch, _match_column(batch.column(MESSAGE_COLUMN).to_pylist(), matcher))
                return
            tasks = ((batch, (batch.column(MESSAGE_COLUMN).to_pylist(),)) for batch in reader)
            for batch, matched in _pool_map(tasks, _match_column, workers, matcher):
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
            _write(writer, out_reader, str(tmp), out_ext, names, json_cols)
    except duckdb.Error as e:
        if failure:  # the error happened while reading or matching, not writing
            raise failure[0] from None
        raise ArchiveError(f"{output}: {duck_error(e)}") from e
    except OSError as e:
        if failure:
            raise failure[0] from None
        raise ArchiveError(f"{output}: cannot write: {_reason(e)}") from e
    except BaseException:
        if failure:
            raise failure[0] from None
        raise
    finally:
        writer.close()
        con.close()
    summary.labels = records.labels
    summary.seconds = time.perf_counter() - started
    return summary


def _arrow(rel):
    return (getattr(rel, "to_arrow_table", None) or rel.arrow)()


def _empty_result(con, sql: str):
    """The plan's result for no lines: its schema is every batch's."""
    con.register(RAW_TABLE, _raw_batch(b"", False).slice(0, 0))
    return _arrow(con.sql(sql)).drop_columns([TEXT_COLUMN])


def _json_batches(con, files: Sequence[str], plan: _JsonPlan, max_lines: int, summary: ArchiveSummary) -> Iterator:
    """Each block of raw lines converted by the plan's SQL: one Arrow batch per block."""
    import duckdb
    import pyarrow.compute as pc

    for path, block, final in raw_blocks(files, max_lines):
        raw = _raw_batch(block, final)
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


def _write(con, batches, tmp: str, out_ext: str, names: list[str] | None, json_cols: list[bool]) -> None:
    """Write the enriched batches to ``tmp``: DuckDB's COPY, under the columns' own
    names. DuckDB's names are case-insensitive (it writes ``host_1`` next to ``Host``),
    so when two names differ only in case pyarrow writes the Parquet file and the CSV
    header is written here."""
    con.register("enriched_batches", batches)
    options = _OUTPUT_FORMATS[out_ext]
    if names is None:
        con.execute(f"COPY (SELECT * FROM enriched_batches) TO {sql_string(tmp)} {options}")
        return
    all_names = [*names, "errkb"]
    values = [f"CAST(c{i} AS JSON)" if j else f"c{i}" for i, j in enumerate(json_cols)] + ["errkb"]
    if "" not in all_names and len({_fold(n) for n in all_names}) == len(all_names):
        select = ", ".join(f"{v} AS {sql_ident(n)}" for v, n in zip(values, all_names))
        con.execute(f"COPY (SELECT {select} FROM enriched_batches) TO {sql_string(tmp)} {options}")
        return
    # DuckDB cannot name these columns (two names differing only in case, an empty name)
    if options.startswith("(FORMAT parquet"):
        _write_parquet(batches, tmp, all_names, json_cols)
        return
    # CSV: DuckDB writes the rows, the header is written here
    import csv
    import io
    import shutil

    body = tmp + ".body"
    try:
        con.execute(f"COPY (SELECT {', '.join(values)} FROM enriched_batches) TO {sql_string(body)} (FORMAT csv, HEADER false)")
        header = io.StringIO()
        csv.writer(header, lineterminator="\n").writerow(all_names)
        with open(tmp, "wb") as out, open(body, "rb") as rows:
            out.write(header.getvalue().encode("utf-8"))
            shutil.copyfileobj(rows, out, 1 << 20)
    finally:
        Path(body).unlink(missing_ok=True)


def _write_parquet(batches, tmp: str, names: list[str], json_cols: list[bool]) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    fields = []
    for i, (name, f) in enumerate(zip(names, batches.schema)):
        is_json = i < len(json_cols) and json_cols[i]
        fields.append(pa.field(name, pa.json_() if is_json else f.type))
    schema = pa.schema(fields)
    with pq.ParquetWriter(tmp, schema, compression="zstd") as writer:
        for batch in batches:
            arrays = [col.cast(pa.string()).cast(pa.json_()) if i < len(json_cols) and json_cols[i] else col
                      for i, col in enumerate(batch.columns)]
            writer.write_batch(pa.record_batch(arrays, schema=schema))


def _pool_map(tasks: Iterator[tuple[Any, tuple]], fn, workers: int, matcher, init_extra: tuple = ()) -> Iterator:
    """(key, fn(*args)) for each (key, args) of ``tasks``, in order, ``fn`` running in
    ``workers`` processes with at most two tasks per worker in flight (bounded memory)."""
    with shipped_file("matcher.idx", matcher.dumps(include_records=False)) as index_path:
        # spawn, not fork: the parent runs DuckDB threads, which fork would not carry over safely.
        ctx = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(max_workers=workers, mp_context=ctx, initializer=_init_worker,
                                 initargs=(str(index_path), *init_extra)) as pool:
            pending: deque[tuple[Any, Future]] = deque()
            for key, args in tasks:
                pending.append((key, pool.submit(fn, *args)))
                if len(pending) >= 2 * workers:
                    k, fut = pending.popleft()
                    yield k, _result(fut)
            while pending:
                k, fut = pending.popleft()
                yield k, _result(fut)


def _result(fut: Future):
    try:
        return fut.result()
    except BrokenProcessPool as e:
        raise ArchiveError(f"a matcher worker process died ({e}); retry with --workers 1") from e
