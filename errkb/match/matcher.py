"""One index over every record's ``messagePattern``: match text to records, fast and safe.

How a text is matched:

1. **Normalise** (``errkb.match.normalize``): the raw text plus the messages inside it (log
   prefixes, ANSI codes and JSON envelopes removed, traceback exceptions, wrapped
   lines joined). A record matches when ``re.search(pattern, m)`` would succeed for
   one of these messages; the raw text is always one of them.
2. **Prefilter**: every match of a pattern contains the pattern's longest required
   literal (``errkb.match.patterns``), so one literal automaton (Hyperscan in literal mode;
   pyahocorasick or plain ``in`` as fallbacks) scanning a whole batch of lines at
   once finds the few (line, pattern) candidates.
3. **Confirm** each candidate exactly with RE2, on a translation of the pattern that
   means what ``re`` means. RE2 runs in linear time, so no dataset pattern can stall
   matching. Patterns only a backtracking engine can run (backreferences,
   lookaround) go to a bounded path (the ``regex`` module with a timeout and an
   input cap) and their matches say so (``Match.bounded``).
4. **Rank**: the text's error class equals the record's ``errorClass``, the pattern's
   specificity, repo hints in the text (``site-packages/vllm/``, ``vllm/x.py``).

The compiled index is saved in our own plain format (a JSON header and Hyperscan's
serialised database), never a pickle; ``errkb.kb`` caches it per dataset version.
"""

from __future__ import annotations

import bisect
import gc
import json
import struct
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from errkb.cache import write_atomic
from errkb.errors import ErrkbError
from errkb.match import normalize
from errkb.match.gaps import gap_match  # the analysis (patterns) is imported to build and on the bounded path

try:
    import hyperscan
except ImportError:  # optional: x86-64 only
    hyperscan = None
try:
    import ahocorasick
except ImportError:
    ahocorasick = None
try:
    import re2 as _re2_module
    from re2 import _re2
except ImportError:
    _re2_module = None
    _re2 = None
import re as _re

# The `regex` module runs the bounded path only (patterns that need backtracking): it is
# imported on first use, not by every process that loads an index (a cold `errkb
# explain` on a linear-safe match never needs it).
_REGEX_UNSET = object()
_regex_cache = _REGEX_UNSET


def _regex_module():
    """The `regex` module, or None where it is not installed."""
    global _regex_cache
    if _regex_cache is _REGEX_UNSET:
        try:
            import regex
        except ImportError:
            regex = None
        _regex_cache = regex
    return _regex_cache

INDEX_FORMAT = 7  # 7: literals a blob of their own, decoded on use; 6: entry line ends in the header
_MAGIC = b"ERRKB-MATCHER\n"
# The bounded path (patterns that need backtracking) gives up on one text after
# BOUNDED_TIMEOUT_S and does not run at all on texts longer than BOUNDED_MAX_CHARS
# (cutting the text instead would change what `$` means). Both count as no match and
# are counted in `bounded_timeouts` / `bounded_skipped`.
BOUNDED_MAX_CHARS = 1_000_000
BOUNDED_TIMEOUT_S = 0.05
# A pattern that runs out of time this many times is not run again by this matcher
# (its record is listed in `bounded_disabled`): ten hostile records over a long log
# would otherwise cost 50 ms per record per line.
BOUNDED_STRIKES = 3
# A pasted text longer than this is matched on its head and its tail (where a
# traceback's final exception line is): no real message is megabytes long.
MAX_TEXT_CHARS = 1 << 20
TAIL_CHARS = 64 * 1024
# Literals shorter than this are not worth a prefilter key: such patterns are
# confirmed on every text.
MIN_PREFILTER_BYTES = 2
MAX_PREFILTER_CHARS = 256

# Patterns per Hyperscan database of the confirm stage: bounds compile memory.
FULL_DB_CHUNK = 5000

PREFILTERS = ("hyperscan", "ahocorasick", "python")
CONFIRMS = ("re2", "re")


class MatcherError(ErrkbError):
    """The index cannot be built or loaded (named engine missing, bad index file)."""


class Match:
    """One record matching a text, best first in a result list.

    Cheap to create (batch matching makes many): the record's fields come from the
    index entry, and ``score``, ``span``/``message`` (located in the normalised
    message) and ``record`` (the full dict) are computed on first access."""

    __slots__ = ("_matcher", "_entry_index", "_text", "_classes", "_score", "_span", "_message", "_record", "_raw")

    def __init__(self, matcher: Matcher, entry_index: int, text: str, span=None, message=None, classes=None,
                 raw: bool = False):
        self._raw = raw
        self._matcher = matcher
        self._entry_index = entry_index
        self._text = text
        self._classes = classes
        self._score: float | None = None
        self._span = span
        self._message = message
        self._record = None

    @property
    def _entry(self) -> _Entry:
        return self._matcher.entries[self._entry_index]

    @property
    def record_id(self) -> str:
        return self._matcher.entries[self._entry_index].record_id

    @property
    def slug(self) -> str:
        return self._matcher.entries[self._entry_index].slug

    @property
    def repo(self) -> str:
        return self._matcher.entries[self._entry_index].repo

    @property
    def error_class(self) -> str | None:
        return self._matcher.entries[self._entry_index].error_class

    @property
    def severity(self) -> str | None:
        return self._matcher.entries[self._entry_index].severity

    @property
    def bounded(self) -> bool:
        """True when the pattern needs backtracking and ran on the bounded path."""
        return self.engine == "regex-bounded"

    @property
    def engine(self) -> str:
        """The engine that decided the match: "re2", "re" (the pure-Python path: the
        pattern's exact translation on the `regex` module, time-bounded) or "regex-bounded"."""
        entry = self._entry
        if entry.bounded or (self._matcher.confirm == "re" and entry.exponential and _regex_module() is not None):
            return "regex-bounded"
        return self._matcher.confirm

    @property
    def score(self) -> float:
        if self._score is None:
            self._score = _score(self._matcher.entries[self._entry_index], self._text, self._classes)
        return self._score

    def _ensure_located(self) -> None:
        if self._message is None:
            self._message, self._span = self._matcher._locate(self._entry_index, self._text, self._raw)

    @property
    def span(self) -> tuple[int, int]:
        """(start, end) of the match in ``message``."""
        self._ensure_located()
        return self._span

    @property
    def message(self) -> str:
        """The normalised message the pattern matched."""
        self._ensure_located()
        return self._message

    @property
    def variant(self) -> dict | None:
        """For a match on another release's wording of the record: its releases, first, last."""
        return self._entry.variant

    @property
    def record(self) -> dict | None:
        if self._record is None and self._matcher._resolve is not None:
            self._record = self._matcher._resolve(self.record_id)
        return self._record

    def to_dict(self, with_record: bool = True) -> dict:
        out = {
            "id": self.record_id, "slug": self.slug, "repo": self.repo, "errorClass": self.error_class,
            "severity": self.severity, "score": round(self.score, 4), "span": list(self.span),
            "message": self.message, "engine": self.engine, "bounded": self.bounded,
            "variant": self.variant,
        }
        if with_record:
            out["record"] = self.record
        return out

    def __repr__(self) -> str:
        return f"Match({self.record_id!r}, {self.slug!r}, score={self.score:.3f}, engine={self.engine!r})"


class _Entry:
    """What the matcher keeps per record (not the record itself)."""

    __slots__ = ("record_id", "slug", "repo", "error_class", "severity", "pattern", "re2_pattern",
                 "ascii_only", "needs_context", "bounded", "literal_chars", "hints", "specificity", "exponential", "gap_plan",
                 "variant")

    FIELDS = __slots__

    def __init__(self, **kw):
        for k in self.FIELDS:
            setattr(self, k, kw.get(k))


def _hints_for(record: dict) -> list[str]:
    """Strings whose presence in a text suggests it comes from the record's project."""
    hints: list[str] = []
    repo = (record.get("repo") or "").lower()
    name = repo.rsplit("/", 1)[-1]
    file_path = (record.get("filePath") or "").lower()
    package = file_path.split("/", 1)[0] if "/" in file_path else ""
    for pkg in dict.fromkeys(p for p in (name, package) if p and len(p) >= 3):
        hints.extend([f"site-packages/{pkg}/", f"{pkg}/", f"{pkg}."])
    if file_path:
        hints.append(file_path)
    return hints


class _LazyEntries:
    """The entries of a loaded index, each decoded from its JSON text on first access."""

    def __init__(self, blob: bytes, ends: list[int], path="matcher index", on_damage=None) -> None:
        # one JSON line per entry; ``ends[i]`` is where entry i's line ends in ``blob``
        # (the lines are cut on access: a CLI call touches a handful of 10,000)
        self._blob = blob
        self._ends = ends
        self._decoded: list[_Entry | None] = [None] * len(ends)
        self._path = path
        self._on_damage = on_damage  # told when a line does not decode (the cache then rebuilds it)

    def __len__(self) -> int:
        return len(self._ends)

    def __getitem__(self, i: int) -> _Entry:
        entry = self._decoded[i]
        if entry is None:
            if i < 0:
                i += len(self._ends)
            try:
                start = self._ends[i - 1] + 1 if i > 0 else 0
                row = json.loads(bytes(self._blob[start:self._ends[i]]))  # the blob may be a memoryview
                entry = self._decoded[i] = _Entry(**dict(zip(_Entry.FIELDS, row)))
            except (ValueError, TypeError, IndexError) as e:
                # Damage the file's checksum did not catch (it was rewritten with it): one
                # line, and the index is rebuilt by the next call rather than fail every time.
                if self._on_damage is not None:
                    self._on_damage()
                raise MatcherError(f"{self._path}: damaged matcher index (entry {i}: {e}); "
                                   "it is rebuilt on the next call") from None
        return entry

    def __iter__(self):
        return (self[i] for i in range(len(self._ends)))

    def materialize(self) -> list[_Entry]:
        """Every entry decoded, as a plain list (indexing it costs no Python call)."""
        return [self[i] for i in range(len(self._ends))]


class Matcher:
    """Compiled index over records' message patterns (see module docstring)."""

    def __init__(self) -> None:
        self.entries: list[_Entry] = []
        self.skipped: list[dict] = []  # {"id", "pattern", "reason"} for patterns that cannot run
        self.prefilter = "python"
        self.confirm = "re"
        self.dataset_hash: str | None = None
        self.build_seconds: float | None = None
        self._literals: list[str] | None = []
        self._literals_json: bytes | memoryview | None = None  # a loaded index's literals, decoded on use
        self.literal_entries: list[tuple[int, ...]] = []
        self.always: list[int] = []  # entries without a usable literal: confirmed on every text
        self.bounded_timeouts = 0
        self.bounded_skipped = 0
        self.bounded_disabled: list[str] = []  # record ids that ran out of time BOUNDED_STRIKES times
        self._strikes: dict[int, int] = {}
        self._hs_db = None
        self._hs_bytes: bytes | None = None
        # Optional second stage for batches: the translated patterns themselves in
        # Hyperscan databases (chunks of FULL_DB_CHUNK), scanned once per candidate
        # line instead of one RE2 call per (line, pattern).
        self.full_db = False
        self.full_db_seconds: float | None = None
        # True when loads() was not allowed to trust the saved Hyperscan bytes and rebuilt them.
        self.rebuilt_native = False
        self._full_chunks: list = []
        self._full_bytes: list[bytes] = []
        self._full_chunk_of: dict[int, int] = {}  # entry index -> chunk
        self._aho = None
        self._compiled: dict[int, object] = {}  # RE2 programs, compiled on first use
        self._plan_of: dict[int, tuple | None] = {}  # entry -> (gap plan, needs context) or None
        self._compiled_re: dict[int, object] = {}
        self._compiled_bounded: dict[int, object] = {}
        self._records: dict[str, dict] | None = None
        self._resolve: Callable[[str], dict | None] | None = None
        self._lines_seen = 0

    # ------------------------------------------------------------------ building

    @classmethod
    def from_records(cls, records: Iterable[dict], prefilter: str = "auto", confirm: str = "auto") -> Matcher:
        import time

        started = time.perf_counter()
        m = cls()
        m._choose_engines(prefilter, confirm)
        records = list(records)
        # Variant entries (errkb.mine.variants) carry their record's id: never served as the record.
        m._records = {str(r.get("id")): r for r in records if isinstance(r, dict) and not r.get("_variant")}
        m._resolve = m._records.get
        from errkb.match.patterns import analyze

        literal_ids: dict[str, int] = {}
        literal_members: list[list[int]] = []
        pieces_of: list[list[str]] = []
        usage: dict[str, int] = {}  # literal -> how many patterns require it
        for record in records:
            if not isinstance(record, dict):
                continue
            pattern = record.get("messagePattern")
            a = analyze(pattern)
            if a.unusable is not None:
                m.skipped.append({"id": record.get("id"), "pattern": pattern, "reason": a.unusable})
                continue
            bounded = not a.linear_safe
            if bounded and _regex_module() is None:
                m.skipped.append({"id": record.get("id"), "pattern": pattern,
                                  "reason": f"{a.re2_issue}; the bounded path needs the 'regex' package"})
                continue
            entry = _Entry(
                record_id=str(record.get("id")), slug=record.get("slug"), repo=record.get("repo"),
                error_class=record.get("errorClass"), severity=record.get("severity"), pattern=pattern,
                re2_pattern=a.re2_pattern, ascii_only=a.re2_ascii_only,
                needs_context=a.has_assertions or bounded, bounded=bounded,
                literal_chars=a.literal_chars, hints=_hints_for(record), exponential=a.exponential_in_re,
                gap_plan=a.gap_plan, variant=record.get("_variant"),
                specificity=min(a.literal_chars, 120) / 120.0,
            )
            if not bounded and m.confirm == "re2":
                try:
                    m._compile_re2(entry)
                except MatcherError as e:  # e.g. a program above RE2's memory budget
                    if _regex_module() is None:
                        m.skipped.append({"id": entry.record_id, "pattern": pattern, "reason": str(e)})
                        continue
                    entry.bounded = entry.needs_context = True
            m.entries.append(entry)
            pieces = _prefilter_pieces(a.required_literals)
            pieces_of.append(pieces)
            for piece in set(pieces):
                usage[piece] = usage.get(piece, 0) + 1
        for index, pieces in enumerate(pieces_of):
            literal = _choose_key(pieces, usage)
            if literal is None:
                m.always.append(index)
                continue
            lid = literal_ids.get(literal)
            if lid is None:
                lid = literal_ids[literal] = len(m.literals)
                m.literals.append(literal)
                literal_members.append([])
            literal_members[lid].append(index)
        m.literal_entries = [tuple(v) for v in literal_members]
        m._compiled.clear()  # compiled lazily on first use: loading stays cheap
        m._build_prefilter()
        m.build_seconds = time.perf_counter() - started
        return m

    def record(self, record_id: str) -> dict | None:
        """The record behind a match, from whoever serves records for this matcher (the
        records saved in the index, or a knowledge base); None when nobody does."""
        return self._resolve(record_id) if self._resolve is not None else None

    def serve_records_from(self, resolve: Callable[[str], dict | None]) -> None:
        """Have ``Match.record`` and :meth:`record` look records up with ``resolve``."""
        self._resolve = resolve

    def _choose_engines(self, prefilter: str, confirm: str) -> None:
        self.prefilter, self.confirm = _resolve_engines(prefilter, confirm)

    @property
    def literals(self) -> list[str]:
        """The prefilter's literals, by literal id. A loaded index decodes them on first
        use: with Hyperscan's saved database a cold call never needs them."""
        if self._literals is None:
            self._literals = json.loads(bytes(self._literals_json))
            self._literals_json = None
        return self._literals

    @literals.setter
    def literals(self, value: list[str]) -> None:
        self._literals, self._literals_json = value, None

    def _build_prefilter(self, newline_literals: set[int] | None = None) -> None:
        if newline_literals is None:
            newline_literals = {lid for lid, lit in enumerate(self.literals) if "\n" in lit}
        self._newline_literals = newline_literals
        if self.prefilter == "hyperscan":
            if self._hs_bytes is not None:
                self._hs_db = hyperscan.loadb(self._hs_bytes, hyperscan.HS_MODE_BLOCK)
                self._hs_db.scratch = hyperscan.Scratch(self._hs_db)
                return
            db = None
            if self.literals:
                db = self._literal_db(list(range(len(self.literals))))
            if db is not None:
                self._hs_bytes = hyperscan.dumpb(db)
            self._hs_db = db
        elif self.prefilter == "ahocorasick":
            automaton = ahocorasick.Automaton()
            for lid, lit in enumerate(self.literals):
                automaton.add_word(lit, lid)
            if self.literals:
                automaton.make_automaton()
                self._aho = automaton
            else:
                self._aho = None

    def _literal_db(self, lids: list[int]):
        """A Hyperscan literal database over ``lids``. Literals Hyperscan refuses are
        found by halving (the binding does not say which one failed) and left out;
        their patterns are then confirmed on every text instead (``always``), so one
        record Hyperscan cannot take never takes the index down."""
        db = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
        try:
            db.compile(expressions=[self.literals[i].encode("utf-8") for i in lids], ids=lids,
                       elements=len(lids), flags=0, literal=True)
            return db
        except hyperscan.error:
            if len(lids) == 1:
                self.always.extend(self.literal_entries[lids[0]])
                self.literal_entries[lids[0]] = ()
                return None
        half = len(lids) // 2
        for part in (lids[:half], lids[half:]):
            self._literal_db(part)
        kept = [i for i in lids if self.literal_entries[i]]
        return self._literal_db(kept) if kept else None

    def _compile_re2(self, entry: _Entry):
        options = _re2_module.Options()
        options.never_capture = True
        options.max_mem = 64 << 20
        options.log_errors = False  # the refusal is reported by the caller, not logged by RE2 on stderr
        compiled = _re2.RE2(entry.re2_pattern.encode("utf-8"), options)
        if not compiled.ok():
            raise MatcherError(f"RE2 cannot run the pattern: {compiled.error().decode('utf-8', 'replace')}")
        return compiled

    def build_full_db(self) -> None:
        """Compile the translated patterns into Hyperscan databases (the fast confirm
        stage of ``match_lines``). Costly once (about 2 s per 1,000 patterns), cached
        on request (``bench/bench_match.py``); patterns Hyperscan rejects keep using RE2."""
        import time

        if hyperscan is None or self.full_db:
            return
        started = time.perf_counter()
        eligible = [i for i, e in enumerate(self.entries)
                    if not e.bounded and e.re2_pattern is not None and self.confirm == "re2"
                    and i not in set(self.always)]
        self._full_chunk_of = {}
        self._full_bytes = []
        for offset in range(0, len(eligible), FULL_DB_CHUNK):
            chunk = self._compile_full_chunk(eligible[offset:offset + FULL_DB_CHUNK])
            if chunk is None:
                continue
            db, members = chunk
            for ei in members:
                self._full_chunk_of[ei] = len(self._full_bytes)
            self._full_bytes.append(hyperscan.dumpb(db))
        self._load_full_chunks()
        self.full_db_seconds = time.perf_counter() - started

    def _compile_full_chunk(self, members: list[int]):
        """One database over `members`; patterns Hyperscan rejects are found by halving
        the chunk (the binding does not say which expression failed) and left out."""
        if not members:
            return None
        flags = hyperscan.HS_FLAG_UTF8 | hyperscan.HS_FLAG_SINGLEMATCH
        db = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
        try:
            db.compile(
                expressions=[self.entries[i].re2_pattern.encode("utf-8") for i in members],
                ids=members, elements=len(members), flags=[flags] * len(members),
            )
            return db, members
        except hyperscan.error:
            if len(members) == 1:
                return None
        half = len(members) // 2
        kept = []
        for part in (members[:half], members[half:]):
            sub = self._compile_full_chunk(part)
            if sub is not None:
                kept.extend(sub[1])
        return self._compile_full_chunk(kept) if kept else None

    def _load_full_chunks(self) -> None:
        self._full_chunks = []
        for data in self._full_bytes:
            db = hyperscan.loadb(data, hyperscan.HS_MODE_BLOCK)
            db.scratch = hyperscan.Scratch(db)
            self._full_chunks.append(db)
        self.full_db = bool(self._full_chunks)

    # ------------------------------------------------------------------ persistence

    def save(self, path: str | Path, include_records: bool = True) -> None:
        """Write the compiled index to ``path`` (atomically, through ``errkb.cache``)."""
        write_atomic(path, self.dumps(include_records))

    def native_parts(self) -> list[bytes]:
        """The parts of :meth:`dumps`'s bytes that Hyperscan's deserialiser reads: the
        cache authenticates exactly these before :meth:`loads` may hand them on."""
        return [self._hs_bytes or b"", *self._full_bytes]

    def dumps(self, include_records: bool = True) -> bytes:
        """The compiled index as bytes (our own format: JSON header + Hyperscan bytes)."""
        header = {
            "format": INDEX_FORMAT,
            "prefilter": self.prefilter,
            "confirm": self.confirm,
            "dataset_hash": self.dataset_hash,
            "entries": len(self.entries),
            "skipped": self.skipped,
            "literals": len(self.literals),
            "newline_literals": sorted(lid for lid, lit in enumerate(self.literals) if "\n" in lit),
            "literal_entries": self.literal_entries,
            "always": self.always,
            "records": list(self._records.values()) if include_records and self._records is not None else None,
        }
        # one JSON line per entry, decoded on first use: a CLI call touches a handful
        rows = [json.dumps([getattr(e, k) for k in _Entry.FIELDS], ensure_ascii=False).encode("utf-8") for e in self.entries]
        entries = b"\n".join(rows)
        ends, end = [], -1
        for row in rows:
            end += len(row) + 1
            ends.append(end)
        header["entry_ends"] = ends
        literals = json.dumps(self.literals, ensure_ascii=False).encode("utf-8")
        blobs = [self._hs_bytes or b"", entries, literals, *self._full_bytes]
        header["blobs"] = [len(b) for b in blobs]
        header["full_chunk_of"] = sorted(self._full_chunk_of.items()) if self.full_db else None
        blob = json.dumps(header, ensure_ascii=False).encode("utf-8")
        hs = b"".join(blobs)
        return _MAGIC + struct.pack("<QQ", len(blob), len(hs)) + blob + hs

    @classmethod
    def load(cls, path: str | Path, prefilter: str | None = None, confirm: str | None = None) -> Matcher:
        path = Path(path)
        try:
            return cls.loads(path.read_bytes(), path, prefilter, confirm)
        except OSError as e:
            raise MatcherError(f"{path}: cannot read matcher index: {e}") from e

    @classmethod
    def loads(cls, data: bytes, path: str | Path = "matcher index", prefilter: str | None = None,
              confirm: str | None = None, vouch=None, on_damage=None) -> Matcher:
        """:meth:`load` from the index file's bytes (read once, e.g. by the cache's check).

        ``vouch(parts)``, where given, says whether the Hyperscan bytes may be handed to
        Hyperscan (whose deserialiser trusts its input: crafted bytes crash the process);
        when it says no they are rebuilt from the index's literals instead, or left out
        (the full-pattern stage: the matches are the same, only slower). ``on_damage()`` is
        called when an entry, decoded on first use, turns out damaged."""
        try:
            if not data.startswith(_MAGIC):
                raise MatcherError(f"{path}: not an errkb matcher index")
            n_blob, n_hs = struct.unpack_from("<QQ", data, len(_MAGIC))
            start = len(_MAGIC) + 16
            header = json.loads(data[start:start + n_blob])
            offset = start + n_blob
            # Views, not copies: the entries (most of the file) are cut from it on access.
            view = memoryview(data)
            blobs = []
            for size in header.get("blobs") or [n_hs]:
                blobs.append(view[offset:offset + size])
                offset += size
            hs_bytes = bytes(blobs[0]) or None
        except (OSError, ValueError, struct.error) as e:
            raise MatcherError(f"{path}: cannot read matcher index: {e}") from e
        if header.get("format") != INDEX_FORMAT:
            raise MatcherError(f"{path}: index format {header.get('format')} is not {INDEX_FORMAT}")
        m = cls()
        m.prefilter, m.confirm = _resolve_engines(prefilter or header["prefilter"], confirm or header["confirm"])
        m.dataset_hash = header.get("dataset_hash")
        m.entries = _LazyEntries(blobs[1], header["entry_ends"] if header["entries"] else [], path, on_damage)
        m.skipped = header["skipped"]
        m._literals, m._literals_json = None, blobs[2]
        m.literal_entries = [tuple(v) for v in header["literal_entries"]]
        m.always = header["always"]
        if header.get("records") is not None:
            m._records = {str(r.get("id")): r for r in header["records"]}
            m._resolve = m._records.get
        native = [hs_bytes or b"", *blobs[3:]]
        trusted = vouch is None or vouch(native)
        if m.prefilter == "hyperscan" and header["prefilter"] == "hyperscan" and trusted:
            m._hs_bytes = hs_bytes
        if header.get("full_chunk_of") is not None and hyperscan is not None and trusted:
            m._full_chunk_of = {int(k): v for k, v in header["full_chunk_of"]}
            m._full_bytes = [bytes(b) for b in blobs[3:]]
        m.rebuilt_native = not trusted
        try:
            m._build_prefilter(set(header["newline_literals"]))
            if m._full_bytes:
                m._load_full_chunks()
        except Exception as e:  # hyperscan.error: a truncated or foreign database
            raise MatcherError(f"{path}: cannot load the prefilter database: {e}") from e
        return m

    # ------------------------------------------------------------------ matching

    def match(self, text: str | bytes) -> list[Match]:
        """Records matching a text (a line, a traceback, a pasted log excerpt), best first."""
        text = normalize.to_text(text)
        if len(text) > MAX_TEXT_CHARS:
            text = text[:MAX_TEXT_CHARS] + "\n" + text[-TAIL_CHARS:]
        messages = normalize.text_messages(text)
        found = self._match_messages(messages)
        if not found:
            repaired = normalize.repaired_forms(messages, text)
            if repaired:
                found = self._match_messages(repaired)
        return found

    def match_message(self, message: normalize.LogMessage) -> list[Match]:
        """Records matching one message of ``normalize.iter_messages``."""
        return self._match_messages(message.candidates or [normalize.Message(message.text, message.error_class)])

    def match_log(self, lines: Iterable[str | bytes], batch: int = 4096) -> Iterator[tuple[normalize.LogMessage, list[Match]]]:
        """Every message of a log with its matches, streamed in batches (constant memory)."""
        pending: list[normalize.LogMessage] = []
        for message in normalize.iter_messages(lines):
            pending.append(message)
            if len(pending) >= batch:
                yield from self._match_log_batch(pending)
                pending = []
        if pending:
            yield from self._match_log_batch(pending)

    def _match_log_batch(self, messages: list[normalize.LogMessage]):
        singles = [i for i, m in enumerate(messages) if m.kind == "line"]
        results = self.match_lines([messages[i].raw for i in singles]) if singles else []
        by_index = dict(zip(singles, results))
        for i, message in enumerate(messages):
            found = by_index.get(i)
            yield message, (found if found is not None else self.match_message(message))

    def match_lines(self, lines: list[str], raw: bool = False) -> list[list[Match]]:
        """Batch API: for each line, the records matching it (as ``match(line)``), best first.

        Scans the whole batch in one prefilter call and normalises only lines that have
        a candidate, so ordinary log lines cost well under a microsecond each. A line
        without a match gets an empty tuple (shared, immutable).

        ``raw=True`` matches each line exactly as given (no prefix/JSON/ANSI forms): the
        records found are then exactly those for which ``re.search(pattern, line)``
        succeeds."""
        n = len(lines)
        if n == 0:
            return []
        if self._lines_seen < MATERIALIZE_AFTER_LINES:
            # A long stream (enrich) touches thousands of entries millions of times:
            # decode them all once rather than go through the lazy list each time.
            self._lines_seen += n
            if self._lines_seen >= MATERIALIZE_AFTER_LINES and isinstance(self.entries, _LazyEntries):
                self.entries = self.entries.materialize()
        # A batch allocates many small acyclic objects (hits, candidates, matches): the
        # cyclic collector would rescan them all again and again, for nothing.
        gc_was_enabled = gc.isenabled()
        gc.disable()
        try:
            if n <= CHUNK_LINES and sum(map(len, lines)) <= CHUNK_CHARS:
                return self._match_lines(lines, raw, n)
            results: list = []
            for chunk in _chunks(lines):
                results.extend(self._match_lines(chunk, raw, len(chunk)))
            return results
        finally:
            if gc_was_enabled:
                gc.enable()

    def _match_lines(self, lines: list[str], raw: bool, n: int) -> list:
        # lines without a match share one empty tuple: most lines match nothing
        results: list = [_NO_MATCHES] * n
        if not self.entries:
            return results
        lines, buf = _clean_lines(lines)
        extra, extra_owners = ([], []) if raw else _rewritten_forms(lines, buf)
        fast = self.prefilter == "hyperscan" and buf.count(b"\n") == n - 1 and not any("\n" in e for e in extra)
        if fast:
            candidates = self._scan_hyperscan_lines(buf, extra, extra_owners, n)
            if self.always:
                for i in range(n):
                    data, ids = candidates.get(i, (None, ()))
                    candidates[i] = (data, sorted({*ids, *self.always}))
        else:
            segments = lines + extra if extra else lines
            owners = list(range(n)) + extra_owners
            candidates = {owner: (None, ids) for owner, ids in self._scan(segments, owners, n).items()}
        entries = self.entries
        plan_of = self._plan_of
        plan_get = plan_of.get
        use_re2 = self.confirm == "re2"
        compiled_cache = self._compiled
        line_forms: dict[int, list[normalize.Message]] = {}
        rewritten = set(extra_owners)
        full = self._full_chunks if self.full_db else None
        chunk_of = self._full_chunk_of
        full_hits: set[int] = set()
        add_full_hit = full_hits.add

        def on_full_hit(ei, _from, _to, _flags, _context):
            add_full_hit(ei)

        for line_no, (raw_bytes, entry_ids) in candidates.items():
            line = lines[line_no]
            multiline = not fast and "\n" in line
            found = []
            scanned_chunks: set[int] | None = None
            if full is not None:
                full_hits.clear()
                scanned_chunks = set()
            for ei in entry_ids:
                plan = plan_get(ei, _UNSET)
                if plan is _UNSET:
                    e = entries[ei]
                    plan = plan_of[ei] = (e.gap_plan, e.needs_context) if e.gap_plan is not None else None
                if plan is not None and not multiline:
                    # literals and (.+?) gaps only: str.find decides, exactly and linearly
                    if gap_match(line, plan[0]):
                        found.append(Match(self, ei, line, raw=raw))
                    elif not raw and (plan[1] or line_no in rewritten):
                        if self._search_forms(ei, self._forms(line_forms, line_no, line)) is not None:
                            found.append(Match(self, ei, line, raw=raw))
                    continue
                entry = entries[ei]
                if use_re2 and line and not entry.bounded and (not entry.ascii_only or line.isascii()):
                    if raw_bytes is None:
                        raw_bytes = line.encode("utf-8")
                    chunk = chunk_of.get(ei) if full is not None else None
                    if chunk is not None:
                        if chunk not in scanned_chunks:
                            scanned_chunks.add(chunk)
                            full[chunk].scan(raw_bytes, match_event_handler=on_full_hit)
                        hit = ei in full_hits
                    else:
                        compiled = compiled_cache.get(ei)
                        if compiled is None:
                            compiled = compiled_cache[ei] = self._compile_re2(entry)
                        hit = compiled.Match(_UNANCHORED, raw_bytes, 0, len(raw_bytes))[0][0] >= 0
                    if not hit and not raw and (entry.needs_context or line_no in rewritten):
                        hit = self._search_forms(ei, self._forms(line_forms, line_no, line)) is not None
                elif raw:
                    hit = self._search(ei, line) is not None
                else:
                    hit = self._search_forms(ei, self._forms(line_forms, line_no, line)) is not None
                if hit:
                    found.append(Match(self, ei, line, raw=raw))
            if found:
                if len(found) > 1:
                    lowered = line.lower() if len(line) < 1 << 16 else line[: 1 << 16].lower()
                    for m in found:
                        m._score = _score(entries[m._entry_index], line, None, lowered)
                    found.sort(key=_by_score)
                results[line_no] = found
        return results

    def _hyperscan_hits(self, buf: bytes) -> list[tuple[int, int]]:
        """(end offset, entry id) of every Hyperscan hit in ``buf``, in the order found."""
        hits: list[tuple[int, int]] = []
        append = hits.append

        def on_hit(lid, _from, to, _flags, _context):
            append((to, lid))

        self._hs_db.scan(buf, match_event_handler=on_hit)
        return hits

    def _scan_hyperscan_lines(self, buf: bytes, extra: list[str], extra_owners: list[int], n: int) -> dict:
        """One Hyperscan call over all lines joined by newlines (plus rewritten forms).

        Hits come back in ascending end offset; the line of a hit is the number of
        newlines before it, counted incrementally between hits, so no per-line offset
        table is built. Returns line -> (None, entry ids)."""
        if self._hs_db is None:
            return {}
        if extra:
            buf = buf + b"\n" + "\n".join(extra).encode("utf-8")
        hits = self._hyperscan_hits(buf)
        if not hits:
            return {}
        hits.sort()  # already ascending: Timsort only verifies it
        count = buf.count
        find = buf.find
        members = self.literal_entries
        skip = self._newline_literals
        lids_of: dict[int, list[int]] = {}
        seg = 0
        prev = 0
        seg_end = -1
        current: list[int] = []
        for to, lid in hits:
            if skip and lid in skip:
                continue  # a literal with a newline can only span two lines here
            last = to - 1
            if last >= seg_end:
                seg += count(b"\n", prev, last)
                prev = last
                seg_end = find(b"\n", last)
                if seg_end < 0:
                    seg_end = len(buf)
                owner = seg if seg < n else extra_owners[seg - n]
                current = lids_of.get(owner)
                if current is None:
                    current = lids_of[owner] = []
            current.append(lid)
        out: dict[int, tuple[None, list[int] | tuple[int, ...]]] = {}
        for owner, lids in lids_of.items():
            if len(lids) == 1:
                out[owner] = (None, members[lids[0]])
                continue
            first = lids[0]
            if all(lid == first for lid in lids):  # one literal seen several times
                out[owner] = (None, members[first])
                continue
            out[owner] = (None, sorted({ei for lid in set(lids) for ei in members[lid]}))
        return out

    # ------------------------------------------------------------------ internals

    def _forms(self, cache: dict, line_no: int, line: str) -> list[normalize.Message]:
        forms = cache.get(line_no)
        if forms is None:
            forms = cache[line_no] = normalize.line_messages(line)
        return forms

    def _scan(self, segments: list[str], owners: list[int], n_owners: int) -> dict[int, list[int]]:
        """(owner -> candidate entry ids) for every segment text, prefiltered by literal."""
        candidate_pairs: set[tuple[int, int]] = set()
        if self.prefilter == "hyperscan":
            if self._hs_db is not None:
                self._scan_hyperscan(segments, owners, candidate_pairs)
        elif self.prefilter == "ahocorasick":
            if self._aho is not None:
                iterate = self._aho.iter
                for seg, owner in zip(segments, owners):
                    for _end, lid in iterate(seg):
                        candidate_pairs.add((owner, lid))
        else:
            for seg, owner in zip(segments, owners):
                for lid, lit in enumerate(self.literals):
                    if lit in seg:
                        candidate_pairs.add((owner, lid))
        out: dict[int, list[int]] = {}
        members = self.literal_entries
        for owner, lid in candidate_pairs:
            bucket = out.get(owner)
            if bucket is None:
                out[owner] = list(members[lid])
            else:
                bucket.extend(members[lid])
        if self.always:
            for owner in set(owners):
                out.setdefault(owner, []).extend(self.always)
        for owner, bucket in out.items():
            if len(bucket) > 1:
                out[owner] = sorted(set(bucket))
        return out

    def _scan_hyperscan(self, segments: list[str], owners: list[int], pairs: set) -> None:
        joined = "\n".join(segments)
        if joined.isascii():
            buf = joined.encode("ascii")
            lengths = map(len, segments)
        else:
            encoded = [s.encode("utf-8") for s in segments]
            buf = b"\n".join(encoded)
            lengths = map(len, encoded)
        # start offset of each segment in buf: a hit ending at `to` belongs to the last
        # segment starting at or before to-1.
        starts = [0]
        total = 0
        for length in lengths:
            total += length + 1
            starts.append(total)
        hits = self._hyperscan_hits(buf)
        if not hits:
            return
        locate = bisect.bisect_right
        add = pairs.add
        for to, lid in hits:
            seg = locate(starts, to - 1) - 1
            add((owners[seg], lid))

    def _search(self, ei: int, text: str) -> tuple[int, int] | None:
        """Exact search of one entry's pattern in one text: the span, or None."""
        entry = self.entries[ei]
        if not text:
            # Engines disagree on the empty text (RE2's \B matches it, re's does not);
            # re's answer is the dataset's meaning, and on no text it cannot backtrack.
            return (0, 0) if self._python_re(ei).search(text) else None
        if not entry.bounded and self.confirm == "re2" and (not entry.ascii_only or (text and text.isascii())):
            data = text.encode("utf-8")
            compiled = self._compiled.get(ei)
            if compiled is None:
                compiled = self._compiled[ei] = self._compile_re2(entry)
            start, end = compiled.Match(_UNANCHORED, data, 0, len(data))[0]
            if start < 0:
                return None
            char_start = len(data[:start].decode("utf-8"))
            char_end = char_start + len(data[start:end].decode("utf-8"))
            if entry.re2_pattern.endswith("(?:\\x{a}?\\z)") and text[char_start:char_end].endswith("\n") and char_end == len(text):
                char_end -= 1  # re's $ sits before the final newline; report re's span
            return char_start, char_end
        # Where RE2 cannot decide (the pure-Python path; a Unicode \b on non-ASCII text,
        # RE2's \b being ASCII-only; patterns needing backtracking) the bounded path
        # does, never plain `re`: `re` has no time bound and holds off signal handlers.
        return self._bounded_search(ei, text)

    def _bounded_search(self, ei: int, text: str) -> tuple[int, int] | None:
        compiled = self._compiled_bounded.get(ei)
        if compiled is None:
            _regex = _regex_module()
            if _regex is None or ei in self._strikes and self._strikes[ei] >= BOUNDED_STRIKES:
                self.bounded_skipped += 1
                return None
            entry = self.entries[ei]
            # linear-safe patterns run as their exact translation (re's \w, \s, \b);
            # the rest as written
            from errkb.match.patterns import bounded_translation

            source = None if entry.bounded else bounded_translation(entry.pattern)
            try:
                compiled = self._compiled_bounded[ei] = _regex.compile(source or entry.pattern, flags=_regex.VERSION0)
            except (_regex.error, OverflowError, RecursionError, MemoryError, ValueError):
                # `re` took it, `regex` does not: this one record cannot run, the rest can
                self._strikes[ei] = BOUNDED_STRIKES
                self.bounded_disabled.append(entry.record_id)
                self.bounded_skipped += 1
                return None
        if len(text) > BOUNDED_MAX_CHARS:
            self.bounded_skipped += 1
            return None
        try:
            m = compiled.search(text, timeout=BOUNDED_TIMEOUT_S)
        except TimeoutError:
            self.bounded_timeouts += 1
            strikes = self._strikes[ei] = self._strikes.get(ei, 0) + 1
            if strikes >= BOUNDED_STRIKES:
                del self._compiled_bounded[ei]
                self.bounded_disabled.append(self.entries[ei].record_id)
            return None
        return m.span() if m else None

    def bounded_report(self) -> dict:
        """What the time bound cut short so far: texts given up on, texts too long to
        run, and the records no longer run (ids)."""
        return {"timeouts": self.bounded_timeouts, "skipped": self.bounded_skipped,
                "disabled": list(self.bounded_disabled)}

    def _python_re(self, ei: int):
        compiled = self._compiled_re.get(ei)
        if compiled is None:
            compiled = self._compiled_re[ei] = _re.compile(self.entries[ei].pattern)
        return compiled

    def _search_forms(self, ei: int, forms: list[normalize.Message]) -> tuple[normalize.Message, tuple[int, int]] | None:
        # most specific message first: the span is reported in the normalised message
        for form in reversed(forms):
            span = self._search(ei, form.text)
            if span is not None:
                return form, span
        return None

    def _locate(self, ei: int, line: str, raw: bool = False) -> tuple[str, tuple[int, int]]:
        forms = [normalize.Message(line)] if raw else normalize.line_messages(line)
        found = self._search_forms(ei, forms)
        if found is None:  # cannot happen for a confirmed match; keep the raw line
            return line, (0, 0)
        return found[0].text, found[1]

    def _match_messages(self, messages: list[normalize.Message]) -> list[Match]:
        if not self.entries:
            return []
        texts = [m.text for m in messages]
        candidates = self._scan(texts, [0] * len(texts), 1).get(0, [])
        classes = {m.error_class for m in messages if m.error_class}
        whole = "\n".join(texts)
        found = []
        for ei in candidates:
            hit = self._search_forms(ei, messages)
            if hit is None:
                continue
            form, span = hit
            found.append(self._make_match(ei, whole, span=span, message=form.text, classes=classes))
        found.sort(key=_by_score)
        return found

    def _make_match(self, ei: int, text: str, span=None, message=None, classes=None) -> Match:
        return Match(self, ei, text, span=span, message=message, classes=classes)

    def stats(self) -> dict:
        return {
            "entries": len(self.entries),
            "bounded": sum(1 for e in self.entries if e.bounded),
            "skipped": len(self.skipped),
            "literals": len(self.literals),
            "always_checked": len(self.always),
            "prefilter": self.prefilter,
            "confirm": self.confirm,
            "build_seconds": self.build_seconds,
            "full_db": self.full_db,
            "full_db_patterns": len(self._full_chunk_of),
            "full_db_seconds": self.full_db_seconds,
        }


_UNANCHORED = _re2_module._Anchor.UNANCHORED if _re2_module is not None else None


_NO_MATCHES: tuple = ()
_UNSET = object()


def _score(entry: _Entry, text: str, classes: set[str] | None = None, lowered: str | None = None) -> float:
    """Error class agreement first, then specificity, then project hints."""
    score = 1.0 + entry.specificity
    cls = entry.error_class
    if cls:
        short = cls.rsplit(".", 1)[-1]
        if classes is not None:
            if any(c == cls or c.rsplit(".", 1)[-1] == short for c in classes):
                score += 2.0
        elif f"{short}:" in text or text.rstrip().endswith(short):
            score += 2.0
    if entry.hints:
        if lowered is None:
            lowered = text.lower() if len(text) < 1 << 16 else text[: 1 << 16].lower()
        hits = 0
        for hint in entry.hints:
            if hint in lowered:
                hits += 1
                if hits == 2:
                    break
        # a tie-breaker: below a clear difference in specificity
        score += min(hits, 2) * 0.1
    return score


# A big batch is matched in chunks that stay in the CPU caches: 200k log lines at 10k
# patterns went from 0.95M to 1.8M lines/s in 1,024-line chunks (bench_match.py).
CHUNK_LINES = 1024
# Lines matched by one matcher after which a loaded index's entries are all decoded.
MATERIALIZE_AFTER_LINES = 50_000
CHUNK_CHARS = 1 << 22


def _chunks(lines: list[str]):
    """Chunks of at most CHUNK_LINES lines, cut sooner where they reach CHUNK_CHARS. The
    usual chunk is sliced whole and measured in C; only one over the size bound is
    walked line by line."""
    for first in range(0, len(lines), CHUNK_LINES):
        chunk = lines[first:first + CHUNK_LINES]
        if sum(map(len, chunk)) < CHUNK_CHARS:
            yield chunk
            continue
        start, size = 0, 0
        for i, line in enumerate(chunk):
            size += len(line)
            if size >= CHUNK_CHARS:
                yield chunk[start:i + 1]
                start, size = i + 1, 0
        if start < len(chunk):
            yield chunk[start:]


def _by_score(m: Match) -> tuple[float, int]:
    # Specificity saturates in the score; among equal scores the pattern that pins
    # down more literal text is the better explanation (a message that extends
    # another one's text is matched by both).
    return -m.score, -m._entry.literal_chars


def _prefilter_pieces(required_literals: list[str]) -> list[str]:
    """Required literals usable as prefilter keys: cut at NUL (Hyperscan's binding ends
    literals there) and at lone surrogates (no UTF-8 form), at most
    MAX_PREFILTER_CHARS long (a piece of a required literal is required too; a 16 KB
    literal made Hyperscan refuse the whole database), at least MIN_PREFILTER_BYTES."""
    pieces = [p[:MAX_PREFILTER_CHARS] for lit in required_literals for p in _UNKEYABLE.split(lit) if p]
    return [p for p in pieces if len(p.encode("utf-8")) >= MIN_PREFILTER_BYTES]


_UNKEYABLE = _re.compile("[\x00\ud800-\udfff]")


def _choose_key(pieces: list[str], usage: dict[str, int]) -> str | None:
    """The literal a pattern is prefiltered on: among its reasonably long literals the
    one fewest other patterns share (a shared key makes every pattern sharing it a
    candidate of every line holding it), then the longest."""
    if not pieces:
        return None
    pool = [p for p in pieces if len(p) >= 8] or pieces
    return min(pool, key=lambda p: (usage.get(p, 0), -len(p)))


def _resolve_engines(prefilter: str, confirm: str) -> tuple[str, str]:
    available_prefilters = {"hyperscan": hyperscan is not None, "ahocorasick": ahocorasick is not None, "python": True}
    if prefilter == "auto":
        prefilter = next(p for p in PREFILTERS if available_prefilters[p])
    elif prefilter not in available_prefilters:
        raise MatcherError(f"unknown prefilter {prefilter!r} (choose from {', '.join(PREFILTERS)})")
    elif not available_prefilters[prefilter]:
        raise MatcherError(f"prefilter {prefilter!r} is not installed")
    if confirm == "auto":
        confirm = "re2" if _re2 is not None else "re"
    elif confirm not in CONFIRMS:
        raise MatcherError(f"unknown confirm engine {confirm!r} (choose from {', '.join(CONFIRMS)})")
    elif confirm == "re2" and _re2 is None:
        raise MatcherError("confirm engine 're2' is not installed (pip install google-re2)")
    return prefilter, confirm


def _clean_lines(lines: list) -> tuple[list[str], bytes]:
    """Lines as text the engines accept (bytes decoded, lone surrogates replaced),
    and the lines joined by newlines as UTF-8."""
    try:
        joined = "\n".join(lines)
    except TypeError:
        lines = [normalize.to_text(line) if not isinstance(line, str) else line for line in lines]
        joined = "\n".join(lines)
    try:
        return lines, joined.encode("utf-8")
    except UnicodeEncodeError:
        lines = [normalize.to_text(line) for line in lines]
        return lines, "\n".join(lines).encode("utf-8")


def _rewritten_forms(lines: list[str], buf: bytes) -> tuple[list[str], list[int]]:
    """Normalised messages of the lines whose messages are not substrings of them
    (ANSI codes inside, JSON escapes), with the index of their line."""
    suspects: set[int] = set()
    for marker in (b"\x1b", b"\\"):
        # line numbers of the (few) lines holding the marker, without a per-line loop
        pos = buf.find(marker)
        line_no = 0
        counted = 0
        while pos >= 0:
            line_no += buf.count(b"\n", counted, pos)
            counted = pos
            suspects.add(line_no)
            next_line = buf.find(b"\n", pos)
            if next_line < 0:
                break
            pos = buf.find(marker, next_line)
    extra: list[str] = []
    owners: list[int] = []
    for i in sorted(suspects):
        if i < len(lines) and normalize.needs_rewrite(lines[i]):
            for form in normalize.line_messages(lines[i])[1:]:
                extra.append(form.text)
                owners.append(i)
    return extra, owners
