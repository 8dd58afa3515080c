"""The embedded DuckDB store: current records, their history, rejects, runs.

This is the only module that speaks SQL to the store. Every ingest is one
transaction: an error or Ctrl-C half-way leaves the store as it was.

Default location: ``$ERRKB_DB``, else a per-user cache file built from the bundled
``data/`` on first use and refreshed when ``data/`` changes, so ``errkb explain``
works right after install with no setup step. A small JSON stamp next to the file
carries the dataset hash, so a caller can key caches on it without importing DuckDB
(which alone costs ~150 ms of a CLI call).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import json
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from errkb import __version__
from errkb.cache import atomic_write, default_db_path, view_root
from errkb.errors import ErrkbError
from errkb.records.read import (
    SIDECAR_DIRS,
    SourcedRecord,
    canonical_json,
    content_hash,
    file_name,
    iter_files,
    read_records,
)
from errkb.records.urls import shared_slug_order
from errkb.resources import data_dir
from errkb.signals import signals_held
from errkb.store.paths import LAYOUT_VERSION, read_stamp, resolve_db_path, stamp_path

# errkb runs offline and in pipelines: DuckDB must never fetch an extension at run
# time (json and parquet, which errkb uses, are statically linked).
NO_EXTENSION_DOWNLOADS = {"autoinstall_known_extensions": False, "autoload_known_extensions": False}

FLUSH_EVERY = 2000
INGEST_MEMORY_LIMIT = "150MB"

_DDL = """
CREATE TABLE IF NOT EXISTS meta (key VARCHAR, value VARCHAR);
CREATE TABLE IF NOT EXISTS ingest_runs (
    run_id INTEGER, started_at TIMESTAMPTZ, finished_at TIMESTAMPTZ, paths VARCHAR,
    errkb_version VARCHAR, new INTEGER, updated INTEGER, unchanged INTEGER, rejected INTEGER);
CREATE TABLE IF NOT EXISTS records (
    id VARCHAR, repo VARCHAR, slug VARCHAR, error_class VARCHAR, severity VARCHAR,
    error_type VARCHAR, tags VARCHAR[], draft BOOLEAN, content_hash VARCHAR,
    dataset_version VARCHAR, source_file VARCHAR, source_position VARCHAR,
    warnings INTEGER, run_id INTEGER);
CREATE TABLE IF NOT EXISTS record_versions (
    id VARCHAR, content_hash VARCHAR, dataset_version VARCHAR, record VARCHAR,
    ingested_at TIMESTAMPTZ, run_id INTEGER, source_file VARCHAR, source_position VARCHAR);
CREATE TABLE IF NOT EXISTS rejects (
    reject_id INTEGER, run_id INTEGER, source_file VARCHAR, line INTEGER, col INTEGER,
    item_index INTEGER, record_id VARCHAR, raw BLOB, raw_hash VARCHAR, reasons VARCHAR,
    rejected_at TIMESTAMPTZ);
CREATE TABLE IF NOT EXISTS findings (
    record_id VARCHAR, content_hash VARCHAR, code VARCHAR, name VARCHAR, level VARCHAR,
    message VARCHAR, source_file VARCHAR, line INTEGER, col INTEGER);
CREATE TABLE IF NOT EXISTS runs (
    run_id INTEGER, record_id VARCHAR, record_hash VARCHAR, tier VARCHAR, "check" VARCHAR,
    runner VARCHAR, started_at TIMESTAMPTZ, duration_s DOUBLE, outcome VARCHAR, reason VARCHAR,
    exception_class VARCHAR, exception_message VARCHAR, message_matched BOOLEAN, details VARCHAR);
"""

# The current version of each record: its text is stored once, in record_versions.
_CURRENT = (
    "SELECT v.record FROM records r JOIN record_versions v ON v.id = r.id AND v.content_hash = r.content_hash"
)

RUN_FIELDS = (
    "record_id", "record_hash", "tier", "check", "runner", "started_at", "duration_s", "outcome",
    "reason", "exception_class", "exception_message", "message_matched", "details",
)


class StoreError(ErrkbError):
    """A store that cannot be opened or used; the message is one line for the user."""


@dataclass
class Reject:
    source_file: str
    line: int
    column: int
    index: int | None
    record_id: str | None
    reasons: list[str]
    raw: bytes

    def as_dict(self) -> dict:
        return {
            "file": self.source_file,
            "line": self.line,
            "column": self.column,
            "index": self.index,
            "record_id": self.record_id,
            "reasons": self.reasons,
            "raw": self.raw.decode("utf-8", "replace"),
        }


@dataclass
class IngestReport:
    run_id: int = 0
    new: int = 0
    updated: int = 0
    unchanged: int = 0
    rejected: int = 0
    rejects: list[Reject] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def total(self) -> int:
        return self.new + self.updated + self.unchanged + self.rejected

    def summary(self) -> str:
        return f"{self.new} new, {self.updated} updated, {self.unchanged} unchanged, {self.rejected} rejected"

    def as_dict(self) -> dict:
        return {
            "run_id": self.run_id,
            "new": self.new,
            "updated": self.updated,
            "unchanged": self.unchanged,
            "rejected": self.rejected,
            "rejects": [r.as_dict() for r in self.rejects],
            "warnings": self.warnings,
        }


# -- locations ---------------------------------------------------------------


def _write_stamp(db_path: Path, **values) -> None:
    stamp = read_stamp(db_path) or {}
    stamp.update(values)
    with atomic_write(stamp_path(db_path), "w", encoding="utf-8") as f:
        f.write(json.dumps(stamp, indent=1, sort_keys=True))


# errkb's own files kept next to the bundled records (proof runs, findings): not records.


def bundled_record_paths(root: Path) -> list[Path]:
    """The bundled data's top-level entries that hold records (its sidecar folders left out)."""
    return sorted(p for p in root.iterdir() if not p.name.startswith(".") and p.name not in SIDECAR_DIRS)


def _bundled_manifest(root: Path) -> list[list]:
    out = []
    for f in iter_files(bundled_record_paths(root)):
        st = f.stat()
        out.append([str(f.relative_to(root)), st.st_size, st.st_mtime_ns])
    return out


def _bundled_hash(root: Path, manifest: list[list]) -> str:
    h = hashlib.sha256()
    for rel, _size, _mtime in manifest:
        h.update(rel.encode() + b"\0")
        h.update(hashlib.sha256((root / rel).read_bytes()).digest())
    return h.hexdigest()


@contextlib.contextmanager
def _file_lock(path: Path):
    import fcntl

    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(path.name + ".lock"), "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def ensure_bundled_store(db_path: Path | None = None) -> Path:
    """Create or refresh the cache store from the bundled data/ when it changed.

    The check costs a stat of each bundled file; files are hashed only when their
    size or mtime moved, and re-ingested only when their content did.
    """
    db_path = db_path or default_db_path()
    root = data_dir()
    manifest = _bundled_manifest(root)
    stamp = read_stamp(db_path) or {}
    if db_path.exists() and stamp.get("bundled_manifest") == manifest and stamp.get("layout") == LAYOUT_VERSION:
        return db_path
    with _file_lock(db_path):
        stamp = read_stamp(db_path) or {}
        digest = _bundled_hash(root, manifest)
        if db_path.exists() and stamp.get("layout") == LAYOUT_VERSION and stamp.get("bundled_hash") == digest:
            _write_stamp(db_path, bundled_manifest=manifest)
            return db_path
        if db_path.exists() and stamp.get("layout") != LAYOUT_VERSION:
            # A cache of another layout: it holds nothing but bundled data, rebuild it.
            for p in (db_path, db_path.with_name(db_path.name + ".wal")):
                p.unlink(missing_ok=True)
        store = Store(db_path, read_only=False)
        try:
            store.ingest(bundled_record_paths(root))
        finally:
            store.close()
        _write_stamp(db_path, bundled_manifest=manifest, bundled_hash=digest)
    return db_path


# -- the store -----------------------------------------------------------------


class Store:
    """A DuckDB store file. Use :meth:`open`; close it (or use ``with``) when done."""

    def __init__(self, path: Path | str, read_only: bool = False):
        import duckdb

        self.path = Path(path) if str(path) != ":memory:" else None
        self.read_only = read_only
        try:
            if self.path is not None and not read_only:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            self.con = duckdb.connect(str(path), read_only=read_only, config=NO_EXTENSION_DOWNLOADS)
            # DuckDB draws a progress bar on stdout (even into a pipe) for queries over
            # 2 s, which would corrupt NDJSON/--json output.
            self.con.execute("SET enable_progress_bar = false")
        except duckdb.Error as e:
            raise StoreError(f"{path}: cannot open the store: {str(e).splitlines()[0]}") from e
        if not read_only:
            self.con.execute(_DDL)
            if self._meta("layout") is None:
                self._set_meta("layout", LAYOUT_VERSION)
        else:
            try:
                layout = self._meta("layout")
            except duckdb.Error as e:
                raise StoreError(f"{path}: not an errkb store (no meta table)") from e
            if layout != LAYOUT_VERSION:
                raise StoreError(f"{path}: store layout {layout} is not this errkb's ({LAYOUT_VERSION}); re-ingest into a new file")

    @classmethod
    def open(cls, path: str | os.PathLike | None = None, read_only: bool = False) -> Store:
        """Open ``path``, else ``$ERRKB_DB``, else the per-user cache built from data/.

        ``read_only`` stores may be opened by many processes at once; an explicit
        path opened read-only must exist.
        """
        db_path, is_cache = resolve_db_path(path)
        if str(db_path) == ":memory:":
            return cls(":memory:")
        if is_cache:
            ensure_bundled_store(db_path)
        elif read_only and not db_path.exists():
            raise StoreError(f"{db_path}: no such store (create it with `errkb ingest --db {db_path} PATH`)")
        return cls(db_path, read_only=read_only)

    def close(self) -> None:
        self.con.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    @property
    def cache_dir(self) -> Path:
        """Folder next to the store for derived artefacts (compiled matcher index, ...)."""
        d = view_root(self.path if self.path is not None else default_db_path())
        d.mkdir(parents=True, exist_ok=True)
        return d

    # -- meta ----------------------------------------------------------------
    def _meta(self, key: str) -> str | None:
        row = self.con.execute("SELECT value FROM meta WHERE key = ?", [key]).fetchone()
        return row[0] if row else None

    def _set_meta(self, key: str, value: str) -> None:
        self.con.execute("DELETE FROM meta WHERE key = ?", [key])
        self.con.execute("INSERT INTO meta VALUES (?, ?)", [key, value])

    def dataset_hash(self) -> str:
        """Changes whenever any current record changes: the key for compiled indexes."""
        row = self.con.execute(
            "SELECT coalesce(sha256(string_agg(id || ':' || content_hash, ',' ORDER BY id)), sha256('')) FROM records"
        ).fetchone()
        return row[0]

    def dataset_version(self) -> str | None:
        row = self.con.execute("SELECT max(dataset_version) FROM records").fetchone()
        return row[0]

    # -- ingest ----------------------------------------------------------------
    def ingest(self, paths: Iterable[str | os.PathLike], progress: Callable[[int], None] | None = None) -> IngestReport:
        """Ingest every record under ``paths`` in one transaction.

        Raises :class:`InputError` (nothing written) when a path cannot be read.
        """
        paths = [str(p) for p in paths]
        list(iter_files(paths))  # fail on an unusable path before anything is written
        return self.ingest_items(read_records(paths), source=", ".join(map(file_name, paths)), progress=progress)

    def ingest_items(
        self,
        items: Iterable[SourcedRecord],
        source: str = "api",
        progress: Callable[[int], None] | None = None,
    ) -> IngestReport:
        if self.read_only:
            raise StoreError(f"{self.path}: opened read-only, cannot ingest")
        import duckdb  # lazily, as in __init__: the warm explain path never loads it

        con = self.con
        # An ingest is one transaction, whose rows DuckDB keeps in memory until the
        # commit unless a limit makes it spill them to <db>.tmp: 50k records peak at
        # ~350 MB with it, ~620 MB without, at the same speed (bench/bench_ingest.py).
        con.execute(f"SET memory_limit = '{INGEST_MEMORY_LIMIT}'")
        con.execute("BEGIN TRANSACTION")
        try:
            report = self._ingest(items, source, progress)
            with signals_held() as stop_if_asked:
                stop_if_asked()
                con.execute("COMMIT")
        except BaseException as e:
            try:
                con.execute("ROLLBACK")
            except duckdb.Error:
                pass  # DuckDB aborted it already (out of memory): report the first error
            if isinstance(e, duckdb.Error):
                raise StoreError(f"{self.path}: ingest failed and was rolled back, nothing stored: {str(e).splitlines()[0]}") from e
            raise
        finally:
            con.execute("RESET memory_limit")
        if self.path is not None:
            _write_stamp(self.path, dataset_hash=self.dataset_hash(), layout=LAYOUT_VERSION)
        return report

    def _ingest(self, items, source, progress) -> IngestReport:
        # Imported here: lint pulls in the schema validator and the pattern analyser,
        # which read-only callers (explain's cold start) should not pay for.
        from errkb.records.lint import Linter

        con = self.con
        now = dt.datetime.now(dt.UTC)
        run_id = con.execute("SELECT coalesce(max(run_id), 0) + 1 FROM ingest_runs").fetchone()[0]
        report = IngestReport(run_id=run_id)
        current = dict(con.execute("SELECT id, content_hash FROM records").fetchall())
        versions = set(con.execute("SELECT id, content_hash FROM record_versions").fetchall())
        known_rejects = set(con.execute("SELECT raw_hash, source_file, line, col FROM rejects").fetchall())
        slugs: dict[tuple[str, str], list[str]] = {}
        for i, r, s in con.execute("SELECT id, repo, slug FROM records ORDER BY repo, slug, id").fetchall():
            slugs.setdefault((r, s), []).append(i)
        linter = Linter(known_slugs=slugs)
        next_reject = con.execute("SELECT coalesce(max(reject_id), 0) + 1 FROM rejects").fetchone()[0]

        pending_records: list[tuple] = []
        pending_versions: list[tuple] = []
        pending_findings: list[tuple] = []
        pending_rejects: list[tuple] = []

        def flush() -> None:
            if pending_records:
                ids = [r[0] for r in pending_records]
                con.execute("DELETE FROM records WHERE id IN (SELECT unnest($1))", [ids])
                con.execute("DELETE FROM findings WHERE record_id IN (SELECT unnest($1))", [ids])
                _insert_rows(con, "records", pending_records)
            for table, rows in (("record_versions", pending_versions), ("findings", pending_findings), ("rejects", pending_rejects)):
                if rows:
                    _insert_rows(con, table, rows)
            for rows in (pending_records, pending_versions, pending_findings, pending_rejects):
                rows.clear()

        seen = 0
        for item in items:
            seen += 1
            findings = linter.check(item)
            report.warnings.extend(item.warnings)
            errors = [f for f in findings if f.level == "error"]
            if errors or not item.ok:
                rec = item.record if isinstance(item.record, dict) else {}
                rid = rec.get("id") if isinstance(rec.get("id"), str) else None
                o = item.origin
                if item.record is None and item.error_at is not None:
                    # unreadable input has no record to point at: the reject is where its reason says
                    o = item.error_at
                reasons = [str(f) for f in errors] or [item.error_line or "rejected"]
                reject = Reject(o.file, o.line, o.column, o.index, rid, reasons, item.raw)
                report.rejected += 1
                report.rejects.append(reject)
                key = (hashlib.sha256(item.raw).hexdigest(), o.file, o.line, o.column)
                if key not in known_rejects:
                    known_rejects.add(key)
                    pending_rejects.append(
                        (next_reject, run_id, o.file, o.line, o.column, o.index, rid, item.raw, key[0], json.dumps(reasons), now)
                    )
                    next_reject += 1
            else:
                rec = item.record
                rid, digest = rec["id"], content_hash(rec)
                previous = current.get(rid)
                if previous == digest:
                    report.unchanged += 1
                else:
                    if previous is None:
                        report.new += 1
                    else:
                        report.updated += 1
                    current[rid] = digest
                    text = canonical_json(rec)
                    pos = f"{item.origin.line}:{item.origin.column}" + (
                        f"[{item.origin.index}]" if item.origin.index is not None else ""
                    )
                    warnings = [f for f in findings if f.level != "error"]
                    pending_records.append(
                        (rid, rec["repo"], rec["slug"], rec["errorClass"], rec["severity"], rec["errorType"],
                         list(rec["tags"]), "draft" in rec["tags"], digest, item.dataset_version,
                         item.origin.file, pos, len(warnings), run_id)
                    )
                    if (rid, digest) not in versions:
                        versions.add((rid, digest))
                        pending_versions.append((rid, digest, item.dataset_version, text, now, run_id, item.origin.file, pos))
                    for f in warnings:
                        o = f.origin or item.origin
                        pending_findings.append((rid, digest, f.code, f.name, f.level, f.message, o.file, o.line, o.column))
                        # the style findings `errkb show` lists with the record, said when it comes in
                        report.warnings.append(str(f))
            if len(pending_records) + len(pending_rejects) >= FLUSH_EVERY:
                flush()
            if progress is not None:
                progress(seen)
        flush()
        con.execute(
            "INSERT INTO ingest_runs VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [run_id, now, dt.datetime.now(dt.UTC), source, __version__,
             report.new, report.updated, report.unchanged, report.rejected],
        )
        return report

    # -- look-ups --------------------------------------------------------------
    # A key from the command line may hold bytes that are not UTF-8 (Python keeps them as
    # lone surrogates): DuckDB refuses such a parameter ("internal error"), and no stored
    # text, all UTF-8, can equal it, so a look-up by it finds nothing.
    def records(self, repo=None, tag=None, error_class=None, severity=None, include_drafts: bool = True) -> list[dict]:
        """Current version of each accepted record, as ingested, ordered by repo and slug."""
        if not _storable(repo, tag, error_class, severity):
            return []
        where, args = [], []
        for column, value in (("repo", repo), ("error_class", error_class), ("severity", severity)):
            if value is not None:
                where.append(f"r.{column} = ?")
                args.append(value)
        if tag is not None:
            where.append("list_contains(r.tags, ?)")
            args.append(tag)
        if not include_drafts:
            where.append("NOT r.draft")
        sql = _CURRENT + (" WHERE " + " AND ".join(where) if where else "") + " ORDER BY r.repo, r.slug, r.id"
        return [json.loads(r[0]) for r in self.con.execute(sql, args).fetchall()]

    def count(self) -> int:
        return self.con.execute("SELECT count(*) FROM records").fetchone()[0]

    def get(self, key: str) -> dict | None:
        """A record by id, by slug (when it names one record), or by ``owner/name/slug``.

        A slug that several records share (one message raised at several sites of a repo,
        lint W402) raises :class:`StoreError` naming them: only the id picks one."""
        if not _storable(key):
            return None
        rows = self.con.execute(_CURRENT + " WHERE r.id = ?", [key]).fetchall()
        if not rows and key.count("/") == 2:
            owner, name, slug = key.split("/")
            rows = self.con.execute(_CURRENT + " WHERE r.repo = ? AND r.slug = ?", [f"{owner}/{name}", slug]).fetchall()
        if not rows:
            rows = self.con.execute(_CURRENT + " WHERE r.slug = ? ORDER BY r.repo", [key]).fetchall()
            repos = list(dict.fromkeys(json.loads(r[0])["repo"] for r in rows))
            if len(repos) > 1:
                raise StoreError(f"slug {key!r} is used in several repos ({', '.join(repos)}); use OWNER/NAME/{key} or the id")
        if len(rows) > 1:
            records = sorted((json.loads(r[0]) for r in rows), key=shared_slug_order)
            first = records[0]
            sites = ", ".join(f"{r['id']} {r['filePath']}:{r['lineNumber']}" for r in records)
            raise StoreError(f"slug {first['slug']!r} of {first['repo']} is used by {len(records)} records ({sites}); use the id")
        return json.loads(rows[0][0]) if rows else None

    def get_many(self, ids: Iterable[str]) -> dict[str, dict]:
        """Current records by id, in one query (a per-id ``get`` costs a table scan
        each; enrichment resolves a batch's new matches at once). Unknown ids are left out."""
        ids = [i for i in dict.fromkeys(ids) if _storable(i)]
        if not ids:
            return {}
        sql = _CURRENT.replace("SELECT v.record", "SELECT r.id, v.record", 1) + " WHERE r.id IN (SELECT unnest(?::VARCHAR[]))"
        rows = self.con.execute(sql, [ids]).fetchall()
        return {rid: json.loads(text) for rid, text in rows}

    def record_fields(self, *json_paths: str) -> dict[str, tuple]:
        """For every current record, the value at each JSON path (``$.solutions[0]``) as
        text, in one scan: what enrichment needs of all records without parsing them."""
        cols = ", ".join("json_extract_string(v.record, ?)" for _ in json_paths)
        sql = _CURRENT.replace("SELECT v.record", f"SELECT r.id, {cols}", 1)
        out = {row[0]: tuple(row[1:]) for row in self.con.execute(sql, list(json_paths)).fetchall()}
        # The scan leaves every record's text in DuckDB's buffer pool (hundreds of MB for
        # a big dataset) in a process that may run for days; lowering the limit evicts it.
        limit = self.con.execute("SELECT current_setting('memory_limit')").fetchone()[0]
        self.con.execute("SET memory_limit = '16MB'")
        self.con.execute(f"SET memory_limit = '{limit}'")
        return out

    def history(self, record_id: str) -> list[dict]:
        if not _storable(record_id):
            return []
        rows = self.con.execute(
            "SELECT content_hash, dataset_version, ingested_at, run_id, source_file, record FROM record_versions "
            "WHERE id = ? ORDER BY ingested_at, run_id",
            [record_id],
        ).fetchall()
        return [
            {"content_hash": h, "dataset_version": v, "ingested_at": t.isoformat(), "run_id": r, "file": f, "record": json.loads(rec)}
            for h, v, t, r, f, rec in rows
        ]

    def findings(self, record_id: str | None = None) -> list[dict]:
        if not _storable(record_id):
            return []
        sql = "SELECT record_id, code, name, level, message, source_file, line, col FROM findings"
        where = " WHERE record_id = ?" if record_id else ""
        rows = self.con.execute(sql + where + " ORDER BY record_id, code", [record_id] if record_id else []).fetchall()
        keys = ("record_id", "code", "name", "level", "message", "file", "line", "column")
        return [dict(zip(keys, r)) for r in rows]

    def rejects(self, run_id: int | None = None) -> list[dict]:
        sql = "SELECT reject_id, run_id, source_file, line, col, item_index, record_id, raw, reasons, rejected_at FROM rejects"
        where = " WHERE run_id = ?" if run_id else ""
        rows = self.con.execute(sql + where + " ORDER BY reject_id", [run_id] if run_id else []).fetchall()
        return [
            {"reject_id": i, "run_id": r, "file": f, "line": ln, "column": c, "index": ix, "record_id": rid,
             "raw": bytes(raw).decode("utf-8", "replace"), "reasons": json.loads(reasons), "rejected_at": t.isoformat()}
            for i, r, f, ln, c, ix, rid, raw, reasons, t in rows
        ]

    def stats(self) -> dict:
        con = self.con

        def by(column: str) -> dict:
            return dict(con.execute(f"SELECT {column}, count(*) FROM records GROUP BY ALL ORDER BY 2 DESC, 1").fetchall())

        lint = dict(
            con.execute(
                "SELECT CASE WHEN draft THEN 'draft' WHEN warnings > 0 THEN 'warnings' ELSE 'clean' END, count(*) "
                "FROM records GROUP BY ALL ORDER BY 1"
            ).fetchall()
        )
        one = lambda sql: con.execute(sql).fetchone()[0]  # noqa: E731
        return {
            "records": one("SELECT count(*) FROM records"),
            "versions": one("SELECT count(*) FROM record_versions"),
            "rejects": one("SELECT count(*) FROM rejects"),
            "ingest_runs": one("SELECT count(*) FROM ingest_runs"),
            "verification_runs": one("SELECT count(*) FROM runs"),
            "dataset_version": self.dataset_version(),
            "by_repo": by("repo"),
            "by_class": by("error_class"),
            "by_type": by("error_type"),
            "by_severity": by("severity"),
            "by_lint_status": lint,
        }

    # -- verification runs -----------------------------------------------------
    def add_run(self, run: dict) -> int:
        unknown = set(run) - set(RUN_FIELDS)
        if unknown:
            raise StoreError(f"unknown run fields: {', '.join(sorted(unknown))}")
        row = dict.fromkeys(RUN_FIELDS)
        row.update(run)
        for key in ("runner", "details"):
            if row[key] is not None and not isinstance(row[key], str):
                row[key] = json.dumps(row[key], sort_keys=True, default=str)
        if row["started_at"] is None:
            row["started_at"] = dt.datetime.now(dt.UTC)
        run_id = self.con.execute("SELECT coalesce(max(run_id), 0) + 1 FROM runs").fetchone()[0]
        self.con.execute(
            f"INSERT INTO runs VALUES ({', '.join(['?'] * (len(RUN_FIELDS) + 1))})",
            [run_id] + [row[k] for k in RUN_FIELDS],
        )
        return run_id

    def runs(self, record_id: str | None = None) -> list[dict]:
        if not _storable(record_id):
            return []
        cols = ("run_id",) + RUN_FIELDS
        quoted = ", ".join(f'"{c}"' for c in cols)
        sql = f"SELECT {quoted} FROM runs" + (" WHERE record_id = ?" if record_id else "") + " ORDER BY started_at, run_id"
        out = []
        for row in self.con.execute(sql, [record_id] if record_id else []).fetchall():
            d = dict(zip(cols, row))
            for key in ("runner", "details"):
                if d[key]:
                    d[key] = json.loads(d[key])
            if d["started_at"] is not None:
                d["started_at"] = d["started_at"].isoformat()
            out.append(d)
        return out


def _storable(*values) -> bool:
    """Whether every str among ``values`` is text UTF-8 can hold (no lone surrogate)."""
    for v in values:
        if isinstance(v, str):
            try:
                v.encode("utf-8")
            except UnicodeEncodeError:
                return False
    return True


def _insert_rows(con, table: str, rows: list[tuple]) -> None:
    """Insert many rows at once: one list per column, unnested by DuckDB (several
    times faster than executemany)."""
    columns = list(zip(*rows))
    select = ", ".join(f"unnest(${i + 1})" for i in range(len(columns)))
    con.execute(f"INSERT INTO {table} SELECT {select}", [list(c) for c in columns])

