"""The prefilter stage: which patterns can match which lines at all.

Every match of a pattern contains the pattern's longest required literal
(``errkb.text.patterns``), so one literal automaton (Hyperscan in literal mode;
pyahocorasick or plain ``in`` as fallbacks) scanning a whole batch of lines at once
finds the few (line, pattern) candidates the confirm stage then decides.
"""

from __future__ import annotations

import bisect
import re

from errkb.match.engines import ahocorasick, hyperscan
from errkb.text import normalize

# Literals shorter than this are not worth a prefilter key: such patterns are
# confirmed on every text.
MIN_PREFILTER_BYTES = 2
# A piece of a required literal is required too; a 16 KB literal made Hyperscan refuse
# the whole database.
MAX_PREFILTER_CHARS = 256
# Hyperscan's binding ends literals at NUL; lone surrogates have no UTF-8 form.
_UNKEYABLE = re.compile("[\x00\ud800-\udfff]")


def prefilter_pieces(required_literals: list[str], max_chars: int = MAX_PREFILTER_CHARS) -> list[str]:
    """Required literals usable as prefilter keys: cut at NUL and at lone surrogates, at
    most ``max_chars`` long, at least MIN_PREFILTER_BYTES."""
    pieces = [p[:max_chars] for lit in required_literals for p in _UNKEYABLE.split(lit) if p]
    return [p for p in pieces if len(p.encode("utf-8")) >= MIN_PREFILTER_BYTES]


def choose_key(pieces: list[str], usage: dict[str, int], shared_ok: int = 1) -> str | None:
    """The literal a pattern is prefiltered on: among its reasonably long literals the
    one fewest other patterns share (a shared key makes every pattern sharing it a
    candidate of every line holding it), then the longest. A literal ``shared_ok``
    patterns or fewer share counts as unshared: with many patterns (the site index's
    53k), a short unique key (" request") is in far more lines than a long one a few
    patterns share ("Communication failed during "), and each line it is in costs a
    confirm."""
    if not pieces:
        return None
    pool = [p for p in pieces if len(p) >= 8] or pieces
    return min(pool, key=lambda p: (max(usage.get(p, 0), shared_ok), -len(p)))


def literal_database(literals: list[str], literal_entries: list[tuple[int, ...]], always: list[int],
                     lids: list[int] | None = None):
    """A Hyperscan literal database over ``lids`` (default: every literal), or None.
    Literals Hyperscan refuses are found by halving (the binding does not say which one
    failed) and left out: their patterns move from ``literal_entries`` to ``always``
    (confirmed on every text), so one record Hyperscan cannot take never takes the index
    down."""
    if lids is None:
        lids = list(range(len(literals)))
    db = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
    try:
        db.compile(expressions=[literals[i].encode("utf-8") for i in lids], ids=lids,
                   elements=len(lids), flags=0, literal=True)
        return db
    except hyperscan.error:
        if len(lids) == 1:
            always.extend(literal_entries[lids[0]])
            literal_entries[lids[0]] = ()
            return None
    half = len(lids) // 2
    for part in (lids[:half], lids[half:]):
        literal_database(literals, literal_entries, always, part)
    kept = [i for i in lids if literal_entries[i]]
    return literal_database(literals, literal_entries, always, kept) if kept else None


def load_database(data: bytes):
    """A saved Hyperscan database, with its scratch space, ready to scan."""
    db = hyperscan.loadb(data, hyperscan.HS_MODE_BLOCK)
    db.scratch = hyperscan.Scratch(db)
    return db


def automaton(literals: list[str]):
    """A pyahocorasick automaton over the literals (value: literal id), or None."""
    if not literals:
        return None
    found = ahocorasick.Automaton()
    for lid, lit in enumerate(literals):
        found.add_word(lit, lid)
    found.make_automaton()
    return found


def hyperscan_hits(db, buf: bytes) -> list[tuple[int, int]]:
    """(end offset, literal id) of every Hyperscan hit in ``buf``, in the order found."""
    hits: list[tuple[int, int]] = []
    append = hits.append

    def on_hit(lid, _from, to, _flags, _context):
        append((to, lid))

    db.scan(buf, match_event_handler=on_hit)
    return hits


def scan_hyperscan(db, segments: list[str], owners: list[int], pairs: set) -> None:
    """Add (owner, literal id) to ``pairs`` for every literal found in a segment."""
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
    hits = hyperscan_hits(db, buf)
    if not hits:
        return
    locate = bisect.bisect_right
    add = pairs.add
    for to, lid in hits:
        seg = locate(starts, to - 1) - 1
        add((owners[seg], lid))


def scan_hyperscan_lines(db, members: list[tuple[int, ...]], skip: set[int], buf: bytes, extra: list[str],
                         extra_owners: list[int], n: int) -> dict:
    """One Hyperscan call over all lines joined by newlines (plus rewritten forms).

    Hits come back in ascending end offset; the line of a hit is the number of
    newlines before it, counted incrementally between hits, so no per-line offset
    table is built. ``skip``: literals holding a newline (they can only span two lines
    here). Returns line -> (None, entry ids)."""
    if db is None:
        return {}
    if extra:
        buf = buf + b"\n" + "\n".join(extra).encode("utf-8")
    hits = hyperscan_hits(db, buf)
    if not hits:
        return {}
    hits.sort()  # already ascending: Timsort only verifies it
    count = buf.count
    find = buf.find
    lids_of: dict[int, list[int]] = {}
    seg = 0
    prev = 0
    seg_end = -1
    current: list[int] = []
    for to, lid in hits:
        if skip and lid in skip:
            continue
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


def clean_lines(lines: list) -> tuple[list[str], bytes]:
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


def rewritten_forms(lines: list[str], buf: bytes) -> tuple[list[str], list[int]]:
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
