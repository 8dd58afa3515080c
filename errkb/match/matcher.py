"""One index over every record's ``messagePattern``: match text to records, fast and safe.

How a text is matched:

1. **Normalise** (``errkb.text.normalize``): the raw text plus the messages inside it (log
   prefixes, ANSI codes and JSON envelopes removed, traceback exceptions, wrapped
   lines joined). A record matches when ``re.search(pattern, m)`` would succeed for
   one of these messages; the raw text is always one of them.
2. **Prefilter** (``errkb.match.prefilter``): one literal automaton over every
   pattern's required literal, scanning a whole batch of lines at once, finds the few
   (line, pattern) candidates.
3. **Confirm** (``errkb.match.confirm``) each candidate exactly with RE2, on a
   translation of the pattern that means what ``re`` means (``errkb.text.patterns``).
   RE2 runs in linear time, so no dataset pattern can stall matching. Patterns only a
   backtracking engine can run (backreferences, lookaround) go to a bounded path and
   their matches say so (``Match.bounded``).
4. **Rank** (``errkb.match.result``): error class, specificity, repo hints.

The compiled index is saved in our own plain format (``errkb.match.index_file``),
never a pickle; ``errkb.kb`` caches it per dataset version. A whole log is matched by
``errkb.match.log`` (``Matcher.match_log``).
"""

from __future__ import annotations

import gc
import json
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from errkb.cache import write_atomic
from errkb.match import index_file, log
from errkb.match import prefilter as pf
from errkb.match.confirm import BOUNDED_STRIKES as BOUNDED_STRIKES
from errkb.match.confirm import BoundedPath, FullDatabase, re2_span
from errkb.match.engines import UNANCHORED, MatcherError, compile_re2, hyperscan, regex_module, resolve_engines
from errkb.match.index_file import INDEX_FORMAT as INDEX_FORMAT
from errkb.match.prefilter import MAX_PREFILTER_CHARS
from errkb.match.result import Entry, Match, by_score, hints_for, lowered_head, score
from errkb.text import normalize
from errkb.text.gaps import gap_match  # the analysis (patterns) is imported to build and on the bounded path

__all__ = ["Match", "Matcher", "MatcherError"]

# A pasted text longer than this is matched on its head and its tail (where a
# traceback's final exception line is): no real message is megabytes long.
MAX_TEXT_CHARS = 1 << 20
TAIL_CHARS = 64 * 1024
# A big batch is matched in chunks that stay in the CPU caches: 200k log lines at 10k
# patterns went from 0.95M to 1.8M lines/s in 1,024-line chunks (bench_match.py).
CHUNK_LINES = 1024
CHUNK_CHARS = 1 << 22
# Lines matched by one matcher after which a loaded index's entries are all decoded.
MATERIALIZE_AFTER_LINES = 50_000

_NO_MATCHES: tuple = ()
_UNSET = object()


class Matcher:
    """Compiled index over records' message patterns (see module docstring)."""

    def __init__(self, bounded: BoundedPath | None = None) -> None:
        self.entries: list[Entry] = []
        self.skipped: list[dict] = []  # {"id", "pattern", "reason"} for patterns that cannot run
        self.prefilter = "python"
        self.confirm = "re"
        self.dataset_hash: str | None = None
        self.build_seconds: float | None = None
        self._literals: list[str] | None = []
        self._literals_json: bytes | memoryview | None = None  # a loaded index's literals, decoded on use
        self.literal_entries: list[tuple[int, ...]] = []
        self.always: list[int] = []  # entries without a usable literal: confirmed on every text
        self._bounded = bounded if bounded is not None else BoundedPath()
        self._hs_db = None
        self._hs_bytes: bytes | None = None
        # True when loads() was not allowed to trust the saved Hyperscan bytes and rebuilt them.
        self.rebuilt_native = False
        self._newline_literals: set[int] = set()
        # Optional second stage for batches (``build_full_db``).
        self._full = FullDatabase()
        self.full_db_seconds: float | None = None
        self._aho = None
        self._compiled: dict[int, object] = {}  # RE2 programs, compiled on first use
        self._plan_of: dict[int, tuple | None] = {}  # entry -> (gap plan, needs context) or None
        self._compiled_re: dict[int, object] = {}
        self._records: dict[str, dict] | None = None
        self._resolve: Callable[[str], dict | None] | None = None
        self._lines_seen = 0

    # ------------------------------------------------------------------ building

    @classmethod
    def from_records(cls, records: Iterable[dict], prefilter: str = "auto", confirm: str = "auto",
                     keep_records: bool = True, max_prefilter_chars: int = MAX_PREFILTER_CHARS,
                     bounded: BoundedPath | None = None) -> Matcher:
        """Compile an index over ``records``. ``keep_records=False``: the matcher keeps
        no record (nor saves any) and serves none until :meth:`serve_records_from` says
        who does (a knowledge base). ``max_prefilter_chars`` bounds a prefilter key;
        ``bounded`` is the bounded path with its time and size bounds."""
        import time

        started = time.perf_counter()
        m = cls(bounded)
        m._choose_engines(prefilter, confirm)
        records = list(records)
        if keep_records:
            # Variant entries (errkb.mine.variants) carry their record's id: never served as the record.
            m._records = {str(r.get("id")): r for r in records if isinstance(r, dict) and not r.get("_variant")}
            m._resolve = m._records.get
        from errkb.text.patterns import analyze

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
            bounded_path = not a.linear_safe
            if bounded_path and regex_module() is None:
                m.skipped.append({"id": record.get("id"), "pattern": pattern,
                                  "reason": f"{a.re2_issue}; the bounded path needs the 'regex' package"})
                continue
            entry = Entry(
                record_id=str(record.get("id")), slug=record.get("slug"), repo=record.get("repo"),
                error_class=record.get("errorClass"), severity=record.get("severity"), pattern=pattern,
                re2_pattern=a.re2_pattern, ascii_only=a.re2_ascii_only,
                needs_context=a.has_assertions or bounded_path, bounded=bounded_path,
                literal_chars=a.literal_chars, hints=hints_for(record), exponential=a.exponential_in_re,
                gap_plan=a.gap_plan, variant=record.get("_variant"),
                specificity=min(a.literal_chars, 120) / 120.0,
            )
            if not bounded_path and m.confirm == "re2":
                try:
                    compile_re2(entry.re2_pattern)
                except MatcherError as e:  # e.g. a program above RE2's memory budget
                    if regex_module() is None:
                        m.skipped.append({"id": entry.record_id, "pattern": pattern, "reason": str(e)})
                        continue
                    entry.bounded = entry.needs_context = True
            m.entries.append(entry)
            pieces = pf.prefilter_pieces(a.required_literals, max_prefilter_chars)
            pieces_of.append(pieces)
            for piece in set(pieces):
                usage[piece] = usage.get(piece, 0) + 1
        for index, pieces in enumerate(pieces_of):
            literal = pf.choose_key(pieces, usage)
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
        self.prefilter, self.confirm = resolve_engines(prefilter, confirm)

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
                self._hs_db = pf.load_database(self._hs_bytes)
                return
            db = pf.literal_database(self.literals, self.literal_entries, self.always) if self.literals else None
            if db is not None:
                self._hs_bytes = hyperscan.dumpb(db)
            self._hs_db = db
        elif self.prefilter == "ahocorasick":
            self._aho = pf.automaton(self.literals)

    def build_full_db(self) -> None:
        """Compile the translated patterns into Hyperscan databases (the fast confirm
        stage of ``match_lines``). Costly once (about 2 s per 1,000 patterns), cached
        on request (``bench/bench_match.py``); patterns Hyperscan rejects keep using RE2."""
        import time

        if hyperscan is None or self.full_db:
            return
        started = time.perf_counter()
        always = set(self.always)
        eligible = {i: e.re2_pattern for i, e in enumerate(self.entries)
                    if not e.bounded and e.re2_pattern is not None and self.confirm == "re2" and i not in always}
        self._full = FullDatabase.build(eligible)
        self.full_db_seconds = time.perf_counter() - started

    @property
    def full_db(self) -> bool:
        """Whether the confirm stage's Hyperscan databases are built (or loaded)."""
        return bool(self._full.chunks)

    # ------------------------------------------------------------------ persistence

    def dumps(self, include_records: bool = True) -> bytes:
        """The compiled index as bytes (``errkb.match.index_file``)."""
        header = {
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
            "full_chunk_of": sorted(self._full.chunk_of.items()) if self.full_db else None,
        }
        return index_file.encode(header, self.entries, self.literals, self._hs_bytes,
                                 self._full.blobs if self.full_db else [])

    def native_parts(self) -> list[bytes]:
        """The parts of :meth:`dumps`'s bytes that Hyperscan's deserialiser reads: the
        cache authenticates exactly these before :meth:`loads` may hand them on."""
        return [self._hs_bytes or b"", *(self._full.blobs if self.full_db else [])]

    def save(self, path: str | Path, include_records: bool = True) -> None:
        """Write the compiled index to ``path``, atomically (through ``errkb.cache``)."""
        write_atomic(path, self.dumps(include_records))

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
        header, entries, blobs = index_file.decode(data, path, on_damage)
        trusted = vouch is None or vouch([blobs[0], *blobs[3:]])
        m = cls()
        m.prefilter, m.confirm = resolve_engines(prefilter or header["prefilter"], confirm or header["confirm"])
        m.dataset_hash = header.get("dataset_hash")
        m.entries = entries
        m.skipped = header["skipped"]
        m._literals, m._literals_json = None, blobs[2]
        m.literal_entries = [tuple(v) for v in header["literal_entries"]]
        m.always = header["always"]
        if header.get("records") is not None:
            m._records = {str(r.get("id")): r for r in header["records"]}
            m._resolve = m._records.get
        m.rebuilt_native = not trusted
        if m.prefilter == "hyperscan" and header["prefilter"] == "hyperscan" and trusted:
            m._hs_bytes = bytes(blobs[0]) or None
        try:
            m._build_prefilter(set(header["newline_literals"]))
            if header.get("full_chunk_of") is not None and hyperscan is not None and trusted:
                m._full = FullDatabase({int(k): v for k, v in header["full_chunk_of"]}, [bytes(b) for b in blobs[3:]])
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

    def match_log(self, lines: Iterable[str | bytes], batch: int = log.LOG_BATCH_MESSAGES,
                  max_chars: int = log.LOG_BATCH_CHARS) -> Iterator[tuple[normalize.LogMessage, list[Match]]]:
        """Every message of a log with its matches, streamed in batches of at most
        ``batch`` messages or about ``max_chars`` characters (``errkb.match.log``)."""
        return log.match_log(self, lines, batch, max_chars)

    def match_lines(self, lines: list[str], raw: bool = False, chunk_lines: int = CHUNK_LINES,
                    chunk_chars: int = CHUNK_CHARS) -> list[list[Match]]:
        """Batch API: for each line, the records matching it (as ``match(line)``), best first.

        Scans the whole batch in one prefilter call and normalises only lines that have
        a candidate, so ordinary log lines cost well under a microsecond each. A line
        without a match gets an empty tuple (shared, immutable). A batch over
        ``chunk_lines`` lines or ``chunk_chars`` characters is matched in chunks.

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
            if self._lines_seen >= MATERIALIZE_AFTER_LINES and isinstance(self.entries, index_file.LazyEntries):
                self.entries = self.entries.materialize()
        # A batch allocates many small acyclic objects (hits, candidates, matches): the
        # cyclic collector would rescan them all again and again, for nothing.
        gc_was_enabled = gc.isenabled()
        gc.disable()
        try:
            if n <= chunk_lines and sum(map(len, lines)) <= chunk_chars:
                return self._match_lines(lines, raw, n)
            results: list = []
            for chunk in _chunks(lines, chunk_lines, chunk_chars):
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
        lines, buf = pf.clean_lines(lines)
        extra, extra_owners = ([], []) if raw else pf.rewritten_forms(lines, buf)
        fast = self.prefilter == "hyperscan" and buf.count(b"\n") == n - 1 and not any("\n" in e for e in extra)
        if fast:
            candidates = pf.scan_hyperscan_lines(self._hs_db, self.literal_entries, self._newline_literals,
                                                 buf, extra, extra_owners, n)
            if self.always:
                for i in range(n):
                    data, ids = candidates.get(i, (None, ()))
                    candidates[i] = (data, sorted({*ids, *self.always}))
        else:
            segments = lines + extra if extra else lines
            owners = list(range(n)) + extra_owners
            candidates = {owner: (None, ids) for owner, ids in self._scan(segments, owners).items()}
        entries = self.entries
        plan_of = self._plan_of
        plan_get = plan_of.get
        use_re2 = self.confirm == "re2"
        compiled_cache = self._compiled
        line_forms: dict[int, list[normalize.Message]] = {}
        rewritten = set(extra_owners)
        full = self._full.chunks if self.full_db else None
        chunk_of = self._full.chunk_of
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
                            compiled = compiled_cache[ei] = compile_re2(entry.re2_pattern)
                        hit = compiled.Match(UNANCHORED, raw_bytes, 0, len(raw_bytes))[0][0] >= 0
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
                    lowered = lowered_head(line)
                    for m in found:
                        m._score = score(entries[m._entry_index], line, None, lowered)
                    found.sort(key=by_score)
                results[line_no] = found
        return results

    # ------------------------------------------------------------------ internals

    def _forms(self, cache: dict, line_no: int, line: str) -> list[normalize.Message]:
        forms = cache.get(line_no)
        if forms is None:
            forms = cache[line_no] = normalize.line_messages(line)
        return forms

    def _scan(self, segments: list[str], owners: list[int]) -> dict[int, list[int]]:
        """(owner -> candidate entry ids) for every segment text, prefiltered by literal."""
        candidate_pairs: set[tuple[int, int]] = set()
        if self.prefilter == "hyperscan":
            if self._hs_db is not None:
                pf.scan_hyperscan(self._hs_db, segments, owners, candidate_pairs)
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

    def _search(self, ei: int, text: str) -> tuple[int, int] | None:
        """Exact search of one entry's pattern in one text: the span, or None."""
        entry = self.entries[ei]
        if not text:
            # Engines disagree on the empty text (RE2's \B matches it, re's does not);
            # re's answer is the dataset's meaning, and on no text it cannot backtrack.
            return (0, 0) if self._python_re(ei).search(text) else None
        if not entry.bounded and self.confirm == "re2" and (not entry.ascii_only or text.isascii()):
            compiled = self._compiled.get(ei)
            if compiled is None:
                compiled = self._compiled[ei] = compile_re2(entry.re2_pattern)
            return re2_span(compiled, entry.re2_pattern, text)
        # Where RE2 cannot decide (the pure-Python path; a Unicode \b on non-ASCII text,
        # RE2's \b being ASCII-only; patterns needing backtracking) the bounded path
        # does, never plain `re`: `re` has no time bound and holds off signal handlers.
        return self._bounded.search(ei, entry, text)

    @property
    def bounded_timeouts(self) -> int:
        return self._bounded.timeouts

    @property
    def bounded_skipped(self) -> int:
        return self._bounded.skipped

    @property
    def bounded_disabled(self) -> list[str]:
        return self._bounded.disabled

    def bounded_report(self) -> dict:
        """What the time bound cut short so far: texts given up on, texts too long to
        run, and the records no longer run (ids)."""
        return self._bounded.report()

    def _python_re(self, ei: int):
        compiled = self._compiled_re.get(ei)
        if compiled is None:
            from errkb.text.patterns import compile_re

            compiled = self._compiled_re[ei] = compile_re(self.entries[ei].pattern)
        return compiled

    def _search_forms(self, ei: int, forms: list[normalize.Message]) -> tuple[normalize.Message, tuple[int, int]] | None:
        # most specific message first: the span is reported in the normalised message
        for form in reversed(forms):
            span = self._search(ei, form.text)
            if span is not None:
                return form, span
        return None

    def locate(self, ei: int, line: str, raw: bool = False) -> tuple[str, tuple[int, int]]:
        """(message, span) of entry ``ei``'s match in ``line``: where ``Match.span`` is."""
        forms = [normalize.Message(line)] if raw else normalize.line_messages(line)
        found = self._search_forms(ei, forms)
        if found is None:  # cannot happen for a confirmed match; keep the raw line
            return line, (0, 0)
        return found[0].text, found[1]

    def _match_messages(self, messages: list[normalize.Message]) -> list[Match]:
        if not self.entries:
            return []
        texts = [m.text for m in messages]
        candidates = self._scan(texts, [0] * len(texts)).get(0, [])
        classes = {m.error_class for m in messages if m.error_class}
        whole = "\n".join(texts)
        found = []
        for ei in candidates:
            hit = self._search_forms(ei, messages)
            if hit is None:
                continue
            form, span = hit
            found.append(Match(self, ei, whole, span=span, message=form.text, classes=classes))
        found.sort(key=by_score)
        return found

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
            "full_db_patterns": len(self._full.chunk_of),
            "full_db_seconds": self.full_db_seconds,
        }


def _chunks(lines: list[str], max_lines: int, max_chars: int):
    """Chunks of at most ``max_lines`` lines, cut sooner where they reach ``max_chars``.
    The usual chunk is sliced whole and measured in C; only one over the size bound is
    walked line by line."""
    for first in range(0, len(lines), max_lines):
        chunk = lines[first:first + max_lines]
        if sum(map(len, chunk)) < max_chars:
            yield chunk
            continue
        start, size = 0, 0
        for i, line in enumerate(chunk):
            size += len(line)
            if size >= max_chars:
                yield chunk[start:i + 1]
                start, size = i + 1, 0
        if start < len(chunk):
            yield chunk[start:]
