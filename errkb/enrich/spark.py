"""Enrichment on Apache Spark: the matcher of ``errkb enrich``, run inside Spark.

For log archives that outgrow one machine errkb does not grow its own cluster; it runs
in the engine such archives are already processed with. :func:`enrich` adds the ``errkb``
column to a DataFrame with ``mapInArrow``:

- The driver compiles the store's index once per dataset version into one file (our
  own format, :meth:`errkb.match.matcher.Matcher.save`, never a pickle) named after the
  SHA-256 of its bytes, and ships it to the executors as a file: ``SparkContext.addFile``
  (Spark copies it to each executor once), or a path every executor can read
  (``ship="shared"``: NFS, a mounted bucket). The function Spark pickles per task only
  carries the file's name and hash.
- Each Python worker process keeps the loaded index in a process-level cache keyed by
  that hash, so it loads the index once per dataset version, not per row, batch or
  task (Spark reuses Python workers across tasks: ``spark.python.worker.reuse``, on by
  default). A partition without rows loads nothing.
- Each Arrow batch is matched with one ``Matcher.match_lines`` call, and its errkb
  values are :class:`errkb.enrich.value.RecordValues`', the same ``errkb enrich`` uses,
  so the column equals the ``errkb`` struct ``errkb enrich --input ... --output
  x.parquet`` writes for the same rows (and `errkb query` reads either).

Input columns pass through untouched (invalid UTF-8 in a string column included); the
message is matched with invalid bytes read as U+FFFD, as ``errkb enrich`` does. A row whose
message is null or matches nothing gets a null ``errkb``.
"""

from __future__ import annotations

import hashlib
import os
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from errkb.cache import cache_root, read_intact, seal, vouched, write_atomic
from errkb.enrich.value import ERRKB_FIELDS, SITE_FIELDS, RecordValues, errkb_struct_type  # noqa: F401 - the column's type
from errkb.errors import ErrkbError

if TYPE_CHECKING:  # pyspark is an optional extra: `pip install 'errkb[spark]'`
    from pyspark.sql import DataFrame, SparkSession

INSTALL_HINT = "pip install 'errkb[spark]'"

# The column added: the same ``errkb`` struct as ``errkb enrich --input ... --output
# x.parquet`` writes (errkb.enrich.value), so `errkb query` reads either output.
OUTPUT_COLUMN = "errkb"
# The message as matched, a column that exists only between the driver's select and
# the executors' batches.
MESSAGE_COLUMN = "__errkb_message"

# What a shipped index keeps of each record: the keys the matcher compiles and ranks
# with, and those errkb_object reads (the first solution). Sources, prose and code stay
# home, which keeps the file executors load small.
_SHIPPED_KEYS = ("id", "slug", "repo", "errorClass", "severity", "messagePattern", "filePath")


class SparkEnrichError(ErrkbError):
    """Bad input or setup for a Spark enrichment; the message is one line for the user."""


def require_pyspark():
    """Import pyspark, or fail with the command that installs it."""
    try:
        import pyarrow  # noqa: F401
        import pyspark
    except ImportError as e:
        raise SparkEnrichError(f"errkb spark needs pyspark and pyarrow ({e.name} is missing): {INSTALL_HINT}") from e
    return pyspark


# -- the index file ------------------------------------------------------------


@dataclass(frozen=True)
class IndexFile:
    """A compiled matcher index on disk, named and keyed by the SHA-256 of its bytes."""

    path: Path
    sha256: str
    dataset_hash: str | None = None
    dataset_version: str | None = None

    @property
    def name(self) -> str:
        return self.path.name


def _file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _content_named(sha: str) -> str:
    return f"errkb-index-{sha[:24]}.idx"


def shipped_record(record: dict) -> dict:
    """The part of a record an executor needs (see ``_SHIPPED_KEYS``)."""
    slim = {k: record.get(k) for k in _SHIPPED_KEYS}
    slim["solutions"] = list(record.get("solutions") or [])[:1]
    return slim


def build_index(db: str | os.PathLike | None = None, folder: str | os.PathLike | None = None) -> IndexFile:
    """Compile the store's records into an index file for executors, once per dataset version.

    The file lands in ``folder`` (default: the store's knowledge-base cache) as
    ``errkb-index-<sha256>.idx``; a later call for the same dataset finds it again.
    Executors have no store, so this index carries the few record fields an ``errkb``
    column needs (``shipped_record``).
    """
    from errkb.kb import KnowledgeBase
    from errkb.match.matcher import INDEX_FORMAT, Matcher, MatcherError

    kb = KnowledgeBase.open(db)
    dataset_hash = kb.dataset_hash
    out_dir = Path(folder) if folder is not None else kb.folder.path if kb.folder is not None else cache_root() / "spark"
    out_dir.mkdir(parents=True, exist_ok=True)
    # The pointer maps a dataset hash (and the index format, which changes with
    # errkb) to the content-named file compiled from it.
    pointer = out_dir / f"spark-index-v{INDEX_FORMAT}-{dataset_hash}.txt"
    if pointer.is_file():
        known = out_dir / pointer.read_text(encoding="utf-8").strip()
        data = read_intact(known)
        # Reused only when errkb wrote it for this user (errkb.cache's MAC): the index
        # holds Hyperscan bytes, and executors load whatever file the driver names.
        if data is not None and vouched(known, [data]):
            sha = hashlib.sha256(data).hexdigest()
            if known.name == _content_named(sha):
                return IndexFile(known, sha, dataset_hash, _dataset_version(kb))
    records = [shipped_record(r) for r in kb.records()]
    if not records:
        raise SparkEnrichError(f"{db or 'the default store'}: no records to match against (ingest some with `errkb ingest`)")
    try:
        matcher = Matcher.from_records(records)
    except MatcherError as e:
        raise SparkEnrichError(f"cannot compile the index: {e}") from e
    matcher.dataset_hash = dataset_hash
    data = matcher.dumps(include_records=True)
    sha = hashlib.sha256(data).hexdigest()
    final = out_dir / _content_named(sha)
    write_atomic(final, data)
    seal(final, native=[data])
    write_atomic(pointer, (final.name + "\n").encode("utf-8"))
    return IndexFile(final, sha, dataset_hash, _dataset_version(kb))


def _dataset_version(kb) -> str | None:
    """The newest datasetVersion among the store's records (what the store reports)."""
    from errkb.store.db import Store

    with Store.open(kb.db_path, read_only=True) as store:
        return store.dataset_version()


def index_file(path: str | os.PathLike) -> IndexFile:
    """An index file made elsewhere (:func:`build_index`, or :meth:`Matcher.save`):
    checked to be an errkb matcher index, and content-named (copied) when it is not."""
    path = Path(path)
    if not path.is_file():
        raise SparkEnrichError(f"{path}: no such index file")
    matcher, _ = load_matcher(path)
    sha = _file_sha256(path)
    wanted = _content_named(sha)
    if path.name != wanted:
        # Spark registers shipped files by name; a content name means two different
        # indexes can never collide in one session. The copy lives in errkb's cache,
        # where the next job with the same index finds it.
        target = cache_root() / "spark" / wanted
        if not target.is_file():
            target.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(target, path.read_bytes())
        path = target
    return IndexFile(path, sha, matcher.dataset_hash)


def load_matcher(path: str | os.PathLike) -> tuple[Any, bool]:
    """(matcher, fell back) for an index file.

    A Hyperscan database loads only on CPUs like the one that compiled it, and only
    where hyperscan is installed; elsewhere the literal prefilter is rebuilt from the
    index's literals (pyahocorasick, else plain Python). Candidates are confirmed
    exactly either way, so the matches are the same; only speed differs. (An index
    that also holds full-pattern Hyperscan databases, which the matcher builds for
    large datasets, still needs them to load: build it on a machine like the
    executors.)"""
    from errkb.match.matcher import Matcher, MatcherError

    try:
        return Matcher.load(path), False
    except MatcherError as first:
        for prefilter in ("ahocorasick", "python"):
            try:
                return Matcher.load(path, prefilter=prefilter), True
            except MatcherError:
                continue
        raise SparkEnrichError(str(first)) from first


# -- executors: one index per Python worker process ------------------------------

_cache_lock = threading.Lock()
_cached: dict[str, Any] = {}  # index sha256 -> Matcher; holds the newest only


_values: dict[tuple[str, str | None], RecordValues] = {}  # (index sha256, site_url) -> values


def _values_for(sha: str, site_url: str | None, resolve_one=None) -> RecordValues:
    """The worker's record values for this index and site URL, kept across tasks
    (``resolve_one``: the loaded index's own record look-up, ``Matcher.record``)."""
    key = (sha, site_url)
    values = _values.get(key)
    if values is None:
        with _cache_lock:
            if any(k[0] != sha for k in _values):
                _values.clear()
            values = _values.setdefault(key, RecordValues(site_url, resolve_one=resolve_one))
    return values


def _worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def _matcher_for(name: str, sha: str, shared_path: str | None, counters) -> Any:
    """The matcher of the index file ``name``/``sha`` in this process, loaded at most once."""
    matcher = _cached.get(sha)
    if matcher is not None:
        return matcher
    with _cache_lock:
        matcher = _cached.get(sha)
        if matcher is not None:
            return matcher
        started = time.perf_counter()
        if shared_path is not None:
            path = shared_path
        else:
            from pyspark import SparkFiles

            path = SparkFiles.get(name)
        actual = _file_sha256(Path(path))
        if actual != sha:
            raise SparkEnrichError(f"{path}: index file changed since the job started (sha256 {actual[:12]}, expected {sha[:12]})")
        matcher, fallback = load_matcher(path)
        _cached.clear()  # a new dataset version replaces the old index, never piles up
        _cached[sha] = matcher
        if counters is not None:
            counters.add({"index_loads": 1, "load_seconds": time.perf_counter() - started, f"loads@{_worker_id()}": 1,
                          "prefilter_fallbacks": fallback})
        return matcher


def _messages(column) -> list:
    """A batch's message column as Python values for ``match_lines``.

    A string column holding invalid UTF-8 (``spark.read.text`` does not validate) is
    read as bytes, which the matcher decodes with U+FFFD, as ``errkb enrich`` does."""
    import pyarrow as pa

    typ = column.type
    if pa.types.is_string(typ) or pa.types.is_large_string(typ):
        try:
            return column.to_pylist()
        except UnicodeDecodeError:
            return column.cast(pa.large_binary() if pa.types.is_large_string(typ) else pa.binary()).to_pylist()
    if pa.types.is_binary(typ) or pa.types.is_large_binary(typ):
        return column.to_pylist()
    raise SparkEnrichError(f"message column has Arrow type {typ}; expected a string or binary column")


def enrich_batch(batch, matcher, site_url: str | None, message_column: str = MESSAGE_COLUMN,
                 values: RecordValues | None = None, sites: Any = None):
    """One Arrow record batch with ``message_column`` replaced by the ``errkb`` struct
    (null where nothing matched): the Spark-free core every executor runs.

    Like ``errkb enrich --input`` (errkb.enrich.pool.match_column): a null message is
    matched as an empty text, the best match fills the struct with
    :class:`errkb.enrich.value.RecordValues`' values, and a row no record matches is
    tagged with its known site when ``sites`` (a SiteIndex, or an
    errkb.enrich.pool.ColumnMatcher holding one) is given. ``values`` carries the
    values from batch to batch (a worker keeps one)."""
    import pyarrow as pa

    from errkb.enrich.pool import ColumnMatcher, match_column

    if values is None or values.site_url != site_url:
        values = RecordValues(site_url, resolve_one=matcher.record)
    elif values.resolve_one is None:  # hits carry no record: the shipped index's look-up gives the solution
        values.resolve_one = matcher.record
    state = sites if isinstance(sites, ColumnMatcher) else ColumnMatcher(matcher, sites)
    messages = _messages(batch.column(message_column))
    rows, hits, _, _ = match_column([m if m is not None else "" for m in messages], state)
    struct = values.struct(batch.num_rows, rows, hits)
    keep = [i for i, name in enumerate(batch.schema.names) if name != message_column]
    return pa.RecordBatch.from_arrays(
        [batch.column(i) for i in keep] + [struct],
        names=[batch.schema.names[i] for i in keep] + [OUTPUT_COLUMN],
    )


_site_state: dict[int, Any] = {}  # id(matcher) -> its ColumnMatcher with the bundled site index


def _sites_for(matcher) -> Any:
    """This worker's ColumnMatcher with the site index errkb ships (the executor's own
    install: nothing is copied), opened once per process."""
    state = _site_state.get(id(matcher))
    if state is None:
        from errkb.enrich.pool import ColumnMatcher
        from errkb.match.sites import prepared, reopen

        with _cache_lock:
            _site_state.clear()  # the newest index's matcher only, as _cached
            # one that cannot be opened here turns the tier off (site_errors), never the task
            state = _site_state[id(matcher)] = ColumnMatcher(matcher, prepared(reopen(None, None)))
    return state


def _enrich_partition(batches: Iterator, *, index_name: str, index_sha: str, shared_path: str | None,
                      site_url: str | None, counters, sites: bool = False) -> Iterator:
    """The function ``mapInArrow`` runs per partition, in a Python worker."""
    import pyarrow.compute as pc

    matcher = values = state = None
    for batch in batches:
        if batch.num_rows == 0:
            continue
        if matcher is None:
            matcher = _matcher_for(index_name, index_sha, shared_path, counters)
            values = _values_for(index_sha, site_url, matcher.record)
            state = _sites_for(matcher) if sites else None
        started = time.perf_counter()
        failed_before = state.site_errors if state is not None else 0
        out = enrich_batch(batch, matcher, site_url, values=values, sites=state)
        if counters is not None:
            column = out.column(OUTPUT_COLUMN)
            sited = pc.sum(pc.equal(column.field("tier"), "site")).as_py() or 0
            counters.add({"batches": 1, "rows": batch.num_rows, "matched": column.is_valid().sum().as_py() - sited,
                          "sites": sited, "site_errors": (state.site_errors if state is not None else 0) - failed_before,
                          "match_seconds": time.perf_counter() - started, f"batches@{_worker_id()}": 1})
        yield out


# -- counters ------------------------------------------------------------------


class CounterParam:
    """Accumulator parameter for a dict of numbers summed key by key: one accumulator
    carries every counter (duck-typed ``pyspark.accumulators.AccumulatorParam``)."""

    def zero(self, value: dict) -> dict:
        return {}

    def addInPlace(self, a: dict, b: dict) -> dict:
        for k, v in b.items():
            a[k] = a.get(k, 0) + v
        return a


@dataclass
class EnrichStats:
    """Counters the executors add to while Spark runs the enriched DataFrame.

    Read them after an action. ``index_loads`` counts index loads in all Python
    workers; ``loads_by_worker`` names each worker (host:pid) and how often it loaded
    (1 each: the process-level cache). Every action on the DataFrame adds to them
    (Spark may also re-run a task after a failure).
    """

    accumulator: Any

    @property
    def value(self) -> dict:
        return dict(self.accumulator.value)

    @property
    def index_loads(self) -> int:
        return int(self.value.get("index_loads", 0))

    @property
    def load_seconds(self) -> float:
        return float(self.value.get("load_seconds", 0.0))

    @property
    def match_seconds(self) -> float:
        return float(self.value.get("match_seconds", 0.0))

    @property
    def rows(self) -> int:
        return int(self.value.get("rows", 0))

    @property
    def matched(self) -> int:
        return int(self.value.get("matched", 0))

    @property
    def sites(self) -> int:
        return int(self.value.get("sites", 0))

    @property
    def batches(self) -> int:
        return int(self.value.get("batches", 0))

    def _by(self, prefix: str) -> dict[str, int]:
        return {k.split("@", 1)[1]: int(v) for k, v in self.value.items() if k.startswith(prefix + "@")}

    @property
    def loads_by_worker(self) -> dict[str, int]:
        return self._by("loads")

    @property
    def batches_by_worker(self) -> dict[str, int]:
        return self._by("batches")

    def as_dict(self) -> dict:
        return {
            "rows": self.rows, "matched": self.matched, "sites": self.sites,
            "site_errors": int(self.value.get("site_errors", 0)), "batches": self.batches, "index_loads": self.index_loads,
            "load_seconds": round(self.load_seconds, 3), "match_seconds": round(self.match_seconds, 3),
            "loads_by_worker": self.loads_by_worker, "batches_by_worker": self.batches_by_worker,
        }


# -- the driver side -----------------------------------------------------------


def output_schema(df: DataFrame):
    """The schema ``mapInArrow`` returns: ``df``'s columns less the message column,
    then the ``errkb`` struct."""
    from pyspark.sql.types import DoubleType, LongType, StringType, StructField, StructType

    site = StructType([StructField(k, LongType() if k in ("line", "otherSites") else StringType(), True)
                       for k in SITE_FIELDS])
    errkb = StructType([StructField(k, DoubleType() if k == "score" else StringType(), True) for k in ERRKB_FIELDS]
                       + [StructField("site", site, True)])
    fields = [f for f in df.schema.fields if f.name != MESSAGE_COLUMN]
    return StructType(fields + [StructField(OUTPUT_COLUMN, errkb, True)])


def _field_type(schema, column: str):
    """The type of ``column`` in ``schema`` (a top-level name, else a dotted path into
    struct columns), or None. Walked here rather than asked of Spark, whose failed
    resolution logs a stack of errors before it raises."""
    from pyspark.sql.types import StructType

    if column in schema.names:
        return schema[column].dataType
    typ = schema
    for part in column.split("."):
        if not isinstance(typ, StructType) or part not in typ.names:
            return None
        typ = typ[part].dataType
    return typ


def _with_message(df: DataFrame, column: str) -> DataFrame:
    """``df`` less any ``errkb`` column it had (replaced, as ``errkb enrich`` does), plus
    the message to match: ``column`` (a column, or a dotted path into a struct column;
    a column whose name has dots wins), read as text unless it is binary."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import BinaryType, StringType

    names = df.schema.names
    if MESSAGE_COLUMN in names:
        raise SparkEnrichError(f"the input has a column named {MESSAGE_COLUMN!r}, which errkb uses internally")
    typ = _field_type(df.schema, column)
    if typ is None:
        raise SparkEnrichError(f"no column {column!r} to match (columns: {', '.join(names) or 'none'})")
    if column in names:
        ref = F.col("`" + column.replace("`", "``") + "`")
    else:
        ref = F.col(".".join("`" + p.replace("`", "``") + "`" for p in column.split(".")))
    if not isinstance(typ, (StringType, BinaryType)):
        ref = ref.cast("string")
    if OUTPUT_COLUMN in names:
        df = df.drop(OUTPUT_COLUMN)
    return df.withColumn(MESSAGE_COLUMN, ref)


def ship_index(spark: SparkSession, index: IndexFile) -> None:
    """Register the index file with Spark, which copies it to each executor once."""
    sc = spark.sparkContext
    already = {uri.rstrip("/").rsplit("/", 1)[-1] for uri in sc.listFiles}
    if index.name not in already:
        sc.addFile(str(index.path))


def enrich_with_stats(
    df: DataFrame,
    column: str = "message",
    db: str | os.PathLike | None = None,
    site_url: str | None = None,
    index: IndexFile | str | os.PathLike | None = None,
    ship: str = "files",
    sites: bool = False,
) -> tuple[DataFrame, EnrichStats]:
    """:func:`enrich`, plus the counters its executors fill in (index loads, time split)."""
    require_pyspark()
    df = _with_message(df, column)
    if ship not in ("files", "shared"):
        raise SparkEnrichError(f"ship must be 'files' or 'shared', not {ship!r}")
    if index is None:
        index = build_index(db)
    elif not isinstance(index, IndexFile):
        index = index_file(index)
    spark = df.sparkSession
    if ship == "files":
        ship_index(spark, index)
    counters = spark.sparkContext.accumulator({}, CounterParam())
    fn = partition_function(index, ship, site_url, counters, sites)
    return df.mapInArrow(fn, output_schema(df)), EnrichStats(counters)


def partition_function(index: IndexFile, ship: str, site_url: str | None, counters=None, sites: bool = False):
    """What Spark pickles into every task: a module function (pickled by reference) and
    the index file's name, hash and path, never the index itself (nor the site index:
    each executor opens the one its errkb install ships)."""
    return partial(
        _enrich_partition, index_name=index.name, index_sha=index.sha256,
        shared_path=str(index.path.resolve()) if ship == "shared" else None, site_url=site_url, counters=counters,
        sites=sites,
    )


def enrich(
    df: DataFrame,
    column: str = "message",
    db: str | os.PathLike | None = None,
    site_url: str | None = None,
    index: IndexFile | str | os.PathLike | None = None,
    ship: str = "files",
    sites: bool = False,
) -> DataFrame:
    """``df`` with an ``errkb`` struct column appended, row for row: id, slug, repo,
    errorClass, severity, score, solution, fix-page url and tier of the best match, null
    where nothing matched (the column ``errkb enrich --input ... --output`` writes).

    ``column`` holds the message (a column or dotted path into a struct; string or
    binary, other types are cast to string); ``db`` is the store (default:
    ``$ERRKB_DB``, else the bundled dataset); ``site_url`` makes fix-page URLs absolute
    (else they are site-relative, as in ``errkb enrich``); ``index`` is a prebuilt
    index file (default: compiled from ``db`` once per dataset version); ``ship`` is
    ``"files"`` (Spark copies the index to executors) or ``"shared"`` (every executor
    reads ``index`` at the same path). ``sites=True`` (``errkb spark-enrich``'s default,
    as ``enrich_records(..., sites=)`` opt-in in the API): a row no record matches but a
    known site does gets tier "site" and the struct's ``site`` field (where vLLM, PyTorch
    or FlashInfer raise it; each executor opens the site index its errkb ships).
    """
    return enrich_with_stats(df, column=column, db=db, site_url=site_url, index=index, ship=ship, sites=sites)[0]


# -- a whole job: files in, Parquet out (`errkb spark-enrich`) ---------------------

INPUT_FORMATS = ("parquet", "json", "text")
_SUFFIXES = {
    ".parquet": "parquet", ".pq": "parquet",
    ".json": "json", ".jsonl": "json", ".ndjson": "json",
    ".txt": "text", ".log": "text",
}


@dataclass
class JobReport:
    input: str
    output: str
    input_format: str
    rows: int
    matched: int  # rows a record matched
    sites: int  # rows only a known site matched (tier "site")
    corrupt_rows: int
    seconds: float
    index_file: str
    index_sha256: str
    dataset_version: str | None
    stats: dict

    def as_dict(self) -> dict:
        return {
            "input": self.input, "output": self.output, "format": self.input_format, "rows": self.rows,
            "matched": self.matched, "sites": self.sites, "corrupt_rows": self.corrupt_rows, "seconds": round(self.seconds, 3),
            "rows_per_s": round(self.rows / self.seconds) if self.seconds > 0 else None,
            "index_file": self.index_file, "index_sha256": self.index_sha256,
            "dataset_version": self.dataset_version, "executors": self.stats,
        }

    def summary(self) -> str:
        share = f" ({100 * self.matched / self.rows:.1f}%)" if self.rows else ""
        out = [f"errkb spark-enrich: {self.rows:,} rows, {self.matched:,} matched{share}, {self.seconds:.1f} s -> {self.output}"]
        if self.sites:
            out.append(f"  {self.sites:,} more rows are raised at a known site (tier site: where, not a fix)")
        if self.corrupt_rows:
            out.append(f"  {self.corrupt_rows:,} input lines were not JSON objects: kept in column _corrupt_record, unmatched")
        out.append(f"  index {self.index_sha256[:12]} (dataset {self.dataset_version or 'unknown'}) loaded "
                   f"{self.stats.get('index_loads', 0)} time(s) in {self.stats.get('load_seconds', 0)} s; "
                   f"matching {self.stats.get('match_seconds', 0)} s in executors")
        return "\n".join(out)


def _is_uri(path: str) -> bool:
    return "://" in path


def detect_format(path: str) -> str:
    """parquet, json or text, from the suffix of ``path`` or of the files in the folder."""
    name = path.rstrip("/")
    for suffix in (".gz", ".bz2", ".zst", ".snappy"):
        if name.endswith(suffix):
            name = name[: -len(suffix)]
    fmt = _SUFFIXES.get(os.path.splitext(name)[1].lower())
    if fmt is not None:
        return fmt
    if not _is_uri(path) and os.path.isdir(path):
        found = set()
        for p in Path(path).rglob("*"):
            if p.is_file() and not p.name.startswith(("_", ".")):
                stem = p.name
                for suffix in (".gz", ".bz2", ".zst", ".snappy"):
                    stem = stem.removesuffix(suffix)
                f = _SUFFIXES.get(os.path.splitext(stem)[1].lower())
                if f is not None:
                    found.add(f)
        if len(found) == 1:
            return found.pop()
        if len(found) > 1:
            raise SparkEnrichError(f"{path}: folder mixes {', '.join(sorted(found))} files; pick one with --format")
    raise SparkEnrichError(f"{path}: cannot tell the input format from the name; pass --format {'|'.join(INPUT_FORMATS)}")


def _read(spark: SparkSession, path: str, fmt: str, column: str) -> DataFrame:
    if fmt == "parquet":
        return spark.read.parquet(path)
    if fmt == "json":
        # Every line is kept: one that is not a JSON object lands in _corrupt_record.
        return spark.read.option("mode", "PERMISSIVE").option("columnNameOfCorruptRecord", "_corrupt_record").json(path)
    df = spark.read.text(path)
    return df.withColumnRenamed("value", column)


def _session(master: str | None) -> tuple[SparkSession, bool]:
    """The active session (a caller's, or spark-submit's), else a new one we must stop."""
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        return active, False
    import sys

    builder = SparkSession.builder.appName("errkb spark-enrich")
    submitted = "PYSPARK_GATEWAY_PORT" in os.environ  # spark-submit set master and Python
    if master is not None:
        builder = builder.master(master)
    elif not submitted:
        builder = builder.master("local[*]")
    if not submitted and not os.environ.get("PYSPARK_PYTHON"):
        # Python workers default to `python3` on PATH, which need not be the
        # interpreter errkb is installed in (a venv used without activating it);
        # PySpark reads only this variable for them.
        os.environ["PYSPARK_PYTHON"] = sys.executable
    return builder.getOrCreate(), True


def run_job(
    input_path: str,
    output_path: str,
    master: str | None = None,
    column: str = "message",
    input_format: str | None = None,
    db: str | os.PathLike | None = None,
    site_url: str | None = None,
    index: str | os.PathLike | None = None,
    overwrite: bool = False,
    sites: bool = False,
) -> JobReport:
    """Read ``input_path`` (Parquet, JSON Lines or text), enrich it, write Parquet to ``output_path``."""
    require_pyspark()
    if not _is_uri(input_path) and not os.path.exists(input_path):
        raise SparkEnrichError(f"{input_path}: no such file or folder")
    fmt = input_format or detect_format(input_path)
    if fmt not in INPUT_FORMATS:
        raise SparkEnrichError(f"{input_path}: unknown format {fmt!r} (choose from {', '.join(INPUT_FORMATS)})")
    if not overwrite and not _is_uri(output_path) and os.path.exists(output_path):
        raise SparkEnrichError(f"{output_path}: already exists (remove it, or pass --overwrite)")
    shipped = build_index(db) if index is None else index_file(index)
    started = time.perf_counter()
    from py4j.protocol import Py4JJavaError
    from pyspark.errors import PySparkException

    failures = (PySparkException, Py4JJavaError)
    spark, owned = _session(master)
    try:
        try:
            df = _read(spark, input_path, fmt, column)
            df.schema  # noqa: B018 - resolve the schema now: a bad file fails here, named
        except failures as e:
            raise SparkEnrichError(f"{input_path}: cannot read as {fmt}: {_first_line(e)}") from e
        try:
            out, stats = enrich_with_stats(df, column=column, site_url=site_url, index=shipped, sites=sites)
        except SparkEnrichError as e:
            raise SparkEnrichError(f"{input_path}: {e}") from e
        try:
            out.write.mode("overwrite" if overwrite else "errorifexists").parquet(output_path)
        except failures as e:
            raise SparkEnrichError(f"{output_path}: cannot write: {_first_line(e)}") from e
        written = spark.read.parquet(output_path)
        counts = written.selectExpr(
            "count(*) AS rows",
            "count_if(errkb.tier <> 'site') AS matched",
            "count_if(errkb.tier = 'site') AS sites",
            ("count(_corrupt_record) AS corrupt" if "_corrupt_record" in written.schema.names else "0L AS corrupt"),
        ).collect()[0]
        return JobReport(
            input=input_path, output=output_path, input_format=fmt, rows=counts["rows"], matched=counts["matched"],
            sites=counts["sites"],
            corrupt_rows=counts["corrupt"], seconds=time.perf_counter() - started, index_file=str(shipped.path),
            index_sha256=shipped.sha256, dataset_version=shipped.dataset_version, stats=stats.as_dict(),
        )
    finally:
        if owned:
            spark.stop()


def _first_line(e: BaseException) -> str:
    """The reason in one line: for an error raised in a Python worker, the traceback's
    last ``SomeError: message`` line (Spark's first line only says a worker failed)."""
    import re

    java = getattr(e, "java_exception", None)  # py4j's Py4JJavaError: the root cause says why
    if java is not None:
        try:
            while java.getCause() is not None:
                java = java.getCause()
            return str(java.toString()).strip().splitlines()[0]
        except Exception:  # a closed gateway: fall back to the text
            pass
    text = str(e).strip()
    if not text:
        return type(e).__name__
    raised = re.findall(r"^([A-Za-z_][\w.]*(?:Error|Exception): .+)$", text, flags=re.M)
    if "Python worker" in text.splitlines()[0] and raised:
        return raised[-1]
    return text.splitlines()[0]

