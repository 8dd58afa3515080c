"""KnowledgeBase: the compiled, cached view of one store.

Every consumer that reads the dataset to answer something — explain, enrich, the
archive path, Spark, search, near matches — gets it from here, built one way:

* the **records** by id (a JSON-lines file read by offset, each record checked by its
  CRC, so no DuckDB is needed to serve them),
* the **matcher** (``errkb.match.Matcher``, its compiled index),
* **near matches** (``errkb.match.near``) and keyword **search** (``errkb.match.search``),
  indexed on first use.

They live in one cache folder per dataset version next to the store
(``<store>.cache/kb-v…-<dataset hash>/``), through ``errkb.cache``: written
atomically, checked on load, rebuilt on any damage, the matcher's Hyperscan bytes
authenticated before Hyperscan reads them, old versions dropped, and an unwritable
folder tolerated (the view is then kept in memory for the process).

A CLI call must answer fast from a cold start: while the store file is unchanged since
its view was last checked (``kb-fresh.json`` records the store's size, mtime and
inode), :meth:`KnowledgeBase.open` loads the view without importing DuckDB at all.
"""

from __future__ import annotations

import json
import os
import zlib
from collections.abc import Iterable, Iterator
from pathlib import Path

from errkb.cache import KeyedFolder, atomic_write, have_key, view_root
from errkb.errors import ErrkbError

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (~3 ms of a cold explain)
if TYPE_CHECKING:
    from errkb.match.matcher import Matcher
    from errkb.match.near import NearMatch, SimilarIndex
    from errkb.match.search import SearchHit, SearchIndex
    from errkb.store.db import Store

KB_FORMAT = 5  # 5: CRC-32 sidecars, near-match index of flat arrays; 4: the offset table is JSON lines
FRESH_MARKER = "kb-fresh.json"
OFFSETS = "records.offsets.jsonl"
# Record look-ups served by searching the offset table's bytes (each costs a scan of it);
# past these the table is parsed once into a dict.
SEARCHED_LOOKUPS = 16


class KnowledgeBaseError(ErrkbError):
    """The store cannot be opened or compiled; the message names the store file."""


class _Damaged(Exception):
    """A cache file failed its check while in use."""


class RecordFile:
    """Records as JSON lines, looked up by id through an offset table (no DuckDB).

    The table has one line per record, ``["<id>",offset,length,crc32]``: a lookup finds
    its id's line in the table's bytes (no parsing of 10,000 entries for the one a call
    needs), and a record whose bytes do not match its CRC is reported as damage instead
    of being served.

    The file is opened for each read and closed at once, never held: a handle left to
    the garbage collector raises a ResourceWarning at an arbitrary moment (issue 24: at
    48k records it fired inside an import on ``explain --json``'s output path and took
    the call down). A file replaced meanwhile fails its CRCs and is served from the store.
    """

    def __init__(self, records_path: Path, table: bytes) -> None:
        self._path = records_path
        self._table = table
        self._offsets: dict[str, list[int]] | None = None
        self._lookups = 0

    @property
    def offsets(self) -> dict[str, list[int]]:
        """Every id with its [offset, length, crc32], in the order they were written."""
        if self._offsets is None:
            rows = json.loads(b"[" + self._table.strip(b"\n").replace(b"\n", b",") + b"]")
            self._offsets = {row[0]: row[1:] for row in rows}
        return self._offsets

    def _where(self, record_id: str) -> list[int] | None:
        if self._offsets is not None:
            return self._offsets.get(record_id)
        self._lookups += 1
        if self._lookups > SEARCHED_LOOKUPS:  # many look-ups (enrich, a site build): one parse
            return self.offsets.get(record_id)
        # each line starts with the id's JSON text, written by this class: unambiguous
        key = b"\n" + json.dumps([record_id])[:-1].encode("ascii") + b","
        at = self._table.find(key)
        if at < 0:
            return None
        end = self._table.find(b"\n", at + 1)
        row = json.loads(self._table[at + 1:end if end >= 0 else None])
        return row[1:]

    def get(self, record_id: str) -> dict | None:
        where = self._where(record_id)
        if where is None:
            return None
        with open(self._path, "rb") as f:
            return _read_record(f, record_id, where)

    def all(self) -> Iterator[dict]:
        with open(self._path, "rb") as f:  # one open for the whole walk
            for record_id, where in self.offsets.items():
                yield _read_record(f, record_id, where)

    def __len__(self) -> int:
        return self._table.count(b"\n[")

    @staticmethod
    def write(records: Iterable[dict], records_path: Path) -> bytes:
        """Write the records file; returns its offset table (for :meth:`write_table`)."""
        table = [b""]
        pos = 0
        with open(records_path, "wb") as f:
            for r in records:
                data = json.dumps(r, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
                table.append(json.dumps([str(r.get("id")), pos, len(data), zlib.crc32(data)]).encode("ascii"))
                f.write(data + b"\n")
                pos += len(data) + 1
        return b"\n".join(table) + b"\n"


def _read_record(f, record_id: str, where: list[int]) -> dict:
    f.seek(where[0])
    data = f.read(where[1])
    if len(data) != where[1] or zlib.crc32(data) != where[2]:
        raise _Damaged(f"record {record_id} does not match its checksum")
    return json.loads(data)


class RecordMap:
    """Records held in memory: what a call serves from when the cache cannot be written."""

    def __init__(self, records: Iterable[dict]) -> None:
        self._by_id = {str(r.get("id")): r for r in records}
        self.offsets = self._by_id  # the ids, as RecordFile has them

    def get(self, record_id: str) -> dict | None:
        return self._by_id.get(record_id)

    def all(self) -> Iterator[dict]:
        return iter(self._by_id.values())

    def __len__(self) -> int:
        return len(self._by_id)


class KnowledgeBase:
    """The records, matcher, near matches and search of one dataset version.

    Open it with :meth:`open` (a store path, or the default store) or
    :meth:`from_store` (a store already open, e.g. for ingest-then-match in one
    process)."""

    def __init__(self, db_path: Path | None, folder: KeyedFolder | None, dataset_hash: str,
                 matcher: Matcher, records: RecordFile | RecordMap) -> None:
        self.db_path = db_path
        self.folder = folder
        self.dataset_hash = dataset_hash
        self.matcher = matcher
        self._records = records
        self._similar: SimilarIndex | None = None
        self._prefix = None  # errkb.match.prefix.PrefixIndex, read on the first paste cut short
        self._sites = None  # errkb.match.sites.SiteIndex, loaded on the first text no record matches
        self._search: SearchIndex | None = None
        matcher.serve_records_from(self.get)

    # -- opening -----------------------------------------------------------------------
    @classmethod
    def open(cls, db: str | os.PathLike | None = None) -> KnowledgeBase:
        """The view of the store at ``db`` (``$ERRKB_DB``, else the bundled-data store).

        Opens DuckDB only when the store changed since its view was last checked.
        """
        from errkb.store.paths import bundled_store_fresh, resolve_db_path

        path, is_cache = resolve_db_path(db)
        if is_cache and not bundled_store_fresh(path):
            from errkb.store.db import StoreError, ensure_bundled_store

            try:
                ensure_bundled_store(path)
            except StoreError as e:
                raise KnowledgeBaseError(str(e)) from e
        elif not path.exists():
            raise KnowledgeBaseError(f"no such store (create it with `errkb ingest --db {path} PATH`)", str(path))
        root = view_root(path)
        fresh = _fresh_hash(path, root)
        if fresh is not None:
            kb = cls._load(path, KeyedFolder(root, _prefix(), _key(fresh)), fresh)
            if kb is not None:
                return kb
        from errkb.store.db import Store, StoreError

        try:
            with Store.open(path, read_only=True) as store:
                kb = cls.from_store(store)
        except StoreError as e:
            raise KnowledgeBaseError(str(e)) from e
        _mark_fresh(path, root, kb.dataset_hash)
        return kb

    @classmethod
    def from_store(cls, store: Store) -> KnowledgeBase:
        """The view of an open store: loaded from its cache, else compiled and cached."""
        from errkb.match.matcher import Matcher, MatcherError

        dataset_hash = store.dataset_hash()
        folder = KeyedFolder(view_root(store.path) if store.path else store.cache_dir, _prefix(), _key(dataset_hash))
        kb = cls._load(store.path, folder, dataset_hash)
        if kb is not None:
            return kb
        records = store.records()
        try:
            matcher = Matcher.from_records(records + _variant_entries(records), keep_records=False)
        except MatcherError as e:
            raise KnowledgeBaseError(f"cannot build the matcher index: {e}", str(store.path or "store")) from e
        matcher.dataset_hash = dataset_hash
        table: list[bytes] = []
        wrote = (
            _put_matcher(folder, matcher)
            and folder.put("records.jsonl", lambda p: table.append(RecordFile.write(records, p)))
            and folder.put(OFFSETS, table[0])
        )
        if wrote:
            # The matcher just built serves this process; the files serve the next.
            return cls(store.path, folder, dataset_hash, matcher, RecordFile(folder.file("records.jsonl"), table[0]))
        return cls(store.path, None, dataset_hash, matcher, RecordMap(records))

    @classmethod
    def _load(cls, db_path: Path | None, folder: KeyedFolder, dataset_hash: str) -> KnowledgeBase | None:
        from errkb.match.matcher import Matcher

        records = folder.file("records.jsonl")
        table = folder.read(OFFSETS)
        index = folder.read("matcher.idx") if table is not None else None
        if index is None or table is None or not records.is_file():
            return None
        try:
            matcher = Matcher.loads(index, folder.file("matcher.idx"),
                                    vouch=lambda parts: folder.vouches("matcher.idx", parts),
                                    on_damage=lambda: folder.discard("matcher.idx"))
            record_file = RecordFile(records, table)
        except Exception:  # any bytes that do not load (MatcherError or other) are damage: rebuilt
            return None
        if matcher.rebuilt_native and have_key():
            # Bytes errkb did not vouch for were rebuilt; sealed again, the next call is fast.
            _put_matcher(folder, matcher)
        return cls(db_path, folder, dataset_hash, matcher, record_file)

    # -- records -----------------------------------------------------------------------
    def get(self, record_id: str) -> dict | None:
        """The record with this id, as ingested (None when there is none)."""
        try:
            return self._records.get(record_id)
        except (_Damaged, ValueError, OSError):
            return self._recover().get(record_id)

    def get_many(self, ids: Iterable[str]) -> dict[str, dict]:
        found = {}
        for record_id in ids:
            record = self.get(record_id)
            if record is not None:
                found[record_id] = record
        return found

    def records(self) -> Iterator[dict]:
        try:
            yield from list(self._records.all())
        except (_Damaged, ValueError, OSError):
            yield from self._recover().all()

    def ids(self) -> list[str]:
        return list(self._records.offsets)

    def __len__(self) -> int:
        return len(self._records)

    def _recover(self) -> RecordMap:
        """A records file damaged under us: serve this call from the store and have the
        next call rebuild the folder."""
        from errkb.store.db import Store

        if self.folder is not None:
            self.folder.discard(OFFSETS)
        with Store.open(self.db_path, read_only=True) as store:
            self._records = RecordMap(store.records())
        return self._records

    def variant_entries(self) -> list[dict]:
        """The variants the matcher indexes with the records (errkb.records.variants): a
        pseudo-record per other wording, carrying its record's id and the variant's
        pattern. An unreadable variants file raises VariantsError (the matcher has none)."""
        from errkb.records.variants import variant_entries

        return variant_entries(list(self.records()))

    @property
    def skipped(self) -> list[dict]:
        """Records the matcher cannot run (a pattern that stopped compiling, ...)."""
        return list(self.matcher.skipped)

    # -- near matches and search ---------------------------------------------------------
    def similar(self) -> SimilarIndex:
        from errkb.match.near import SimilarIndex

        if self._similar is None:
            self._similar = self._index("similar.idx", SimilarIndex)
        return self._similar

    def truncated(self, messages: list) -> list[tuple[str, str]]:
        """(record id, message) for each record whose message one of ``messages``
        (``errkb.text.normalize.Message``) truly begins, its class agreeing (errkb.match.prefix)."""
        from errkb.match.prefix import PrefixIndex

        if self._prefix is None:
            self._prefix = self._index("prefix.idx", PrefixIndex)
        prefix = self._prefix
        found: dict[str, str] = {}
        for m in messages:
            for record_id in prefix.find(m.text, m.error_class):
                found.setdefault(record_id, m.text)
        return list(found.items())

    def sites(self):
        """The known-site tier (errkb.match.sites.SiteIndex): where vLLM, PyTorch and FlashInfer
        raise a message, in which releases; never a fix. Loaded on first use."""
        from errkb.match.sites import SiteIndex

        if self._sites is None:
            self._sites = SiteIndex.load()
        return self._sites

    def near(self, texts: str | list[str], **options) -> list[NearMatch]:
        """Records close to texts that no pattern matched, each with ``.record`` set."""
        found = self.similar().near(texts, **options)
        for n in found:
            n.record = self.get(n.record_id)
        return found

    def search_index(self) -> SearchIndex:
        from errkb.match.search import SearchIndex

        if self._search is None:
            self._search = self._index("search.idx", SearchIndex)
        return self._search

    def search(self, query: str, limit: int = 10) -> list[SearchHit]:
        return self.search_index().search(query, limit=limit)

    def _index(self, name: str, kind):
        if self.folder is not None:
            data = self.folder.read(name)  # read once for the check and the load
            if data is not None:
                try:
                    return kind.loads(data, self.folder.file(name))
                except Exception:  # damaged in a way the checksum cannot see: rebuilt below
                    pass
        index = kind.from_records(self.records())
        if self.folder is not None:
            self.folder.put(name, index.dumps())
        return index


def _variant_entries(records: list[dict]) -> list[dict]:
    """The variants of these records (errkb.records.variants), indexed by the matcher."""
    from errkb.records.variants import VariantsError, variant_entries

    try:
        return variant_entries(records)
    except VariantsError:
        return []


def _key(dataset_hash: str) -> str:
    """The view's cache key: the dataset, and the variants indexed with it (a changed
    variants file must rebuild the view although the store did not change)."""
    from errkb.records.variants import signature

    return f"{dataset_hash}v{signature()}"


def _prefix() -> str:
    # The matcher's index format is part of the name: an errkb upgrade that changes it
    # must not find an old, unloadable index.
    from errkb.match.matcher import INDEX_FORMAT

    return f"kb-v{KB_FORMAT}-m{INDEX_FORMAT}-"


def _put_matcher(folder: KeyedFolder, matcher: Matcher):
    """The matcher's index into the folder, its Hyperscan bytes authenticated (errkb.cache)."""
    return folder.put("matcher.idx", matcher.dumps(include_records=False), native=matcher.native_parts())


def _db_signature(db: Path) -> list | None:
    from errkb.store.paths import LAYOUT_VERSION

    try:
        st = db.stat()
    except OSError:
        return None
    # A write-ahead log means a writer is (or was) at work: the file alone says nothing.
    if db.with_name(db.name + ".wal").exists():
        return None
    # The layout this errkb reads: after an upgrade the store is checked again (and
    # refused if it is of another layout) rather than served from an old view.
    return [str(db.resolve()), st.st_size, st.st_mtime_ns, st.st_ino, LAYOUT_VERSION]


def _fresh_hash(db: Path, root: Path) -> str | None:
    """The dataset hash recorded when the store was last checked, if it is unchanged since."""
    signature = _db_signature(db)
    if signature is None:
        return None
    try:
        marker = json.loads((root / FRESH_MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(marker, dict) or marker.get("db") != signature:
        return None
    value = marker.get("dataset_hash")
    return value if isinstance(value, str) and value.isalnum() else None


def _mark_fresh(db: Path, root: Path, dataset_hash: str) -> None:
    signature = _db_signature(db)
    if signature is None:
        return
    try:
        root.mkdir(parents=True, exist_ok=True)
        with atomic_write(root / FRESH_MARKER, "w", encoding="utf-8") as f:
            json.dump({"db": signature, "dataset_hash": dataset_hash}, f)
    except OSError:
        pass  # the next call checks the store again
