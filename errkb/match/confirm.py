"""The confirm stage: deciding exactly whether a candidate pattern matches a text.

RE2 decides most patterns in linear time (``re2_span``); a batch may confirm with the
translated patterns compiled into Hyperscan databases instead (``FullDatabase``).
Patterns only a backtracking engine can run go to the bounded path (``BoundedPath``:
the ``regex`` module with a timeout, an input cap and three strikes), never to plain
``re``, which has no time bound and holds off signal handlers.
"""

from __future__ import annotations

from errkb.match.engines import UNANCHORED, hyperscan, regex_module

# The bounded path gives up on one text after BOUNDED_TIMEOUT_S and does not run at all
# on texts longer than BOUNDED_MAX_CHARS (cutting the text instead would change what `$`
# means). Both count as no match and are counted (``BoundedPath.report``).
BOUNDED_MAX_CHARS = 1_000_000
BOUNDED_TIMEOUT_S = 0.05
# A pattern that runs out of time this many times is not run again by this matcher
# (its record is listed as disabled): ten hostile records over a long log would
# otherwise cost 50 ms per record per line. One that costs just under the bound on
# every line is disabled once it has cost this many bounds beyond a fair share
# (errkb.text.bounded.TimeBudget).
BOUNDED_STRIKES = 3
# Patterns per Hyperscan database of the confirm stage: bounds compile memory.
FULL_DB_CHUNK = 5000


def re2_span(compiled, re2_pattern: str, text: str) -> tuple[int, int] | None:
    """The span (in characters) of RE2's leftmost match of ``compiled`` in ``text``, as
    ``re`` would report it, or None."""
    data = text.encode("utf-8")
    start, end = compiled.Match(UNANCHORED, data, 0, len(data))[0]
    if start < 0:
        return None
    char_start = len(data[:start].decode("utf-8"))
    char_end = char_start + len(data[start:end].decode("utf-8"))
    if re2_pattern.endswith("(?:\\x{a}?\\z)") and text[char_start:char_end].endswith("\n") and char_end == len(text):
        char_end -= 1  # re's $ sits before the final newline; report re's span
    return char_start, char_end


class BoundedPath:
    """The `regex` module under a time bound, per entry, with its strikes and counts."""

    def __init__(self, timeout_s: float = BOUNDED_TIMEOUT_S, max_chars: int = BOUNDED_MAX_CHARS,
                 strikes: int = BOUNDED_STRIKES) -> None:
        self.timeout_s = timeout_s
        self.max_chars = max_chars
        self.max_strikes = strikes
        self.timeouts = 0
        self.skipped = 0
        self.disabled: list[str] = []  # record ids that ran out of time `strikes` times
        self._strikes: dict[int, int] = {}
        self._compiled: dict[int, object] = {}
        self._budget = None  # errkb.text.bounded.TimeBudget, made with the first pattern compiled

    def search(self, ei: int, entry, text: str) -> tuple[int, int] | None:
        """The span of entry ``ei``'s pattern in ``text``; None for no match, out of
        time, a text too long, or a pattern disabled or that `regex` cannot compile."""
        compiled = self._compiled.get(ei)
        if compiled is None:
            _regex = regex_module()
            if _regex is None or self._strikes.get(ei, 0) >= self.max_strikes:
                self.skipped += 1
                return None
            # linear-safe patterns run as their exact translation (re's \w, \s, \b);
            # the rest as written
            from errkb.text.patterns import bounded_translation

            source = None if entry.bounded else bounded_translation(entry.pattern)
            if self._budget is None:
                from errkb.text.bounded import TimeBudget

                self._budget = TimeBudget(self.max_strikes * self.timeout_s)
            try:
                compiled = self._compiled[ei] = _regex.compile(source or entry.pattern, flags=_regex.VERSION0)
            except (_regex.error, OverflowError, RecursionError, MemoryError, ValueError):
                # `re` took it, `regex` does not: this one record cannot run, the rest can
                self._strikes[ei] = self.max_strikes
                self.disabled.append(entry.record_id)
                self.skipped += 1
                return None
        if len(text) > self.max_chars:
            self.skipped += 1
            return None
        began = self._budget.clock()
        try:
            m = compiled.search(text, timeout=self.timeout_s)
        except TimeoutError:
            self.timeouts += 1
            strikes = self._strikes[ei] = self._strikes.get(ei, 0) + 1
            if strikes >= self.max_strikes:
                del self._compiled[ei]
                self.disabled.append(entry.record_id)
            return None
        if self._budget.over(ei, self._budget.clock() - began, len(text)):
            # slow on every text without ever running out of time: disabled the same way
            self._strikes[ei] = self.max_strikes
            del self._compiled[ei]
            self.disabled.append(entry.record_id)
        return m.span() if m else None

    def report(self) -> dict:
        """What the time bound cut short so far: texts given up on, texts too long to
        run, and the records no longer run (ids)."""
        return {"timeouts": self.timeouts, "skipped": self.skipped, "disabled": list(self.disabled)}


class FullDatabase:
    """The translated patterns themselves in Hyperscan databases (chunks of
    FULL_DB_CHUNK), scanned once per candidate line instead of one RE2 call per (line,
    pattern). Costly to build (about 2 s per 1,000 patterns); saved with the index."""

    def __init__(self, chunk_of: dict[int, int] | None = None, blobs: list[bytes] | None = None) -> None:
        self.chunk_of = chunk_of or {}  # entry index -> chunk
        self.blobs = blobs or []  # each chunk's serialised database
        self.chunks = []
        for data in self.blobs:
            db = hyperscan.loadb(data, hyperscan.HS_MODE_BLOCK)
            db.scratch = hyperscan.Scratch(db)
            self.chunks.append(db)

    @classmethod
    def build(cls, re2_patterns: dict[int, str], chunk_size: int = FULL_DB_CHUNK) -> FullDatabase:
        """Databases over ``re2_patterns`` (entry index -> translated pattern); patterns
        Hyperscan rejects are left out (they keep using RE2)."""
        chunk_of: dict[int, int] = {}
        blobs: list[bytes] = []
        eligible = list(re2_patterns)
        for offset in range(0, len(eligible), chunk_size):
            chunk = _compile_chunk(re2_patterns, eligible[offset:offset + chunk_size])
            if chunk is None:
                continue
            db, members = chunk
            for ei in members:
                chunk_of[ei] = len(blobs)
            blobs.append(hyperscan.dumpb(db))
        return cls(chunk_of, blobs)


def _compile_chunk(re2_patterns: dict[int, str], members: list[int]):
    """One database over `members`; patterns Hyperscan rejects are found by halving
    the chunk (the binding does not say which expression failed) and left out."""
    if not members:
        return None
    flags = hyperscan.HS_FLAG_UTF8 | hyperscan.HS_FLAG_SINGLEMATCH
    db = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
    try:
        db.compile(
            expressions=[re2_patterns[i].encode("utf-8") for i in members],
            ids=members, elements=len(members), flags=[flags] * len(members),
        )
        return db, members
    except hyperscan.error:
        if len(members) == 1:
            return None
    half = len(members) // 2
    kept = []
    for part in (members[:half], members[half:]):
        sub = _compile_chunk(re2_patterns, part)
        if sub is not None:
            kept.extend(sub[1])
    return _compile_chunk(re2_patterns, kept) if kept else None
