"""Explain: from what a program printed to the record that explains it and its fix.

The input is one text (a log line, a pasted traceback) or a whole log. A short input
(at most ``TEXT_MAX_LINES`` lines holding one message) is matched as one text, so a
message wrapped over several lines or a chained traceback is found; anything longer is
a log, read as a stream in bounded memory, and every distinct known error is reported
with its count and its first and last line. When nothing matches, the closest records
are offered as near matches (``errkb.match.near``), never as matches.

Records, the matcher and near matches come from the store's
:class:`errkb.kb.KnowledgeBase`, which a cold CLI call loads without opening DuckDB.
"""

from __future__ import annotations

import bisect
import itertools
import os
import re
from collections.abc import Iterator

from errkb.errors import ErrkbError
from errkb.kb import KnowledgeBase
from errkb.plain import Plain

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (~3 ms of a cold explain)
if TYPE_CHECKING:
    from typing import BinaryIO

# A short input is matched as one text: at most this many lines and bytes.
TEXT_MAX_LINES = 50
TEXT_MAX_BYTES = 1 << 20
# A longer line is read as its head and its tail (a giant line is usually a progress
# bar or a payload, and the error, if any, ends it); the middle is never held.
MAX_LINE_BYTES = 1 << 20
LINE_TAIL_BYTES = 64 << 10
READ_CHUNK = 1 << 16
# Unmatched messages kept from a log (only those naming an error class) to look for
# near matches; beside exact matches, at most this many are shown.
NEAR_CANDIDATES_FROM_LOG = 20
NEAR_BESIDE_MATCHES = 3


class ExplainError(ErrkbError):
    """Input problem; the message is one line naming the file, position and reason."""


class EmptyInput(ExplainError):
    """The input holds nothing but whitespace (the caller names where it came from)."""


# -- reading input -------------------------------------------------------------------


class InputStats(Plain):
    _fields = ("lines", "long_lines", "long_line_count", "binary")

    def __init__(self, lines: int = 0, long_lines: list[int] | None = None, long_line_count: int = 0,
                 binary: bool = False) -> None:
        self.lines = lines
        self.long_lines = [] if long_lines is None else long_lines  # line numbers cut to head + tail (first 10)
        self.long_line_count = long_line_count
        self.binary = binary


def read_lines(stream: BinaryIO, stats: InputStats | None = None) -> Iterator[bytes]:
    """The lines of a byte stream without their newline, in bounded memory.

    A line longer than ``MAX_LINE_BYTES`` is yielded as its first ``MAX_LINE_BYTES -
    LINE_TAIL_BYTES`` bytes, `` … `` and its last ``LINE_TAIL_BYTES`` bytes.
    """
    stats = stats if stats is not None else InputStats()
    head_max = MAX_LINE_BYTES - LINE_TAIL_BYTES
    head = bytearray()
    tail = b""
    long = False
    number = 0
    read = getattr(stream, "read1", stream.read)
    while True:
        chunk = read(READ_CHUNK)
        if not chunk:
            break
        if number == 0 and not stats.binary and b"\0" in chunk:
            stats.binary = True
        pieces = chunk.split(b"\n")
        for k, piece in enumerate(pieces):
            if long:
                tail = (tail + piece)[-LINE_TAIL_BYTES:]
            elif len(head) + len(piece) <= MAX_LINE_BYTES:
                head += piece
            else:  # this line just became too long: keep its head, then only a tail
                long = True
                if len(head) < head_max:
                    need = head_max - len(head)
                    head += piece[:need]
                    over = piece[need:]
                else:
                    over = bytes(head[head_max:]) + piece
                    del head[head_max:]
                tail = over[-LINE_TAIL_BYTES:]
            if k < len(pieces) - 1:  # a newline ends this line
                number += 1
                yield _finish_line(head, tail, long, number, stats)
                head = bytearray()
                tail = b""
                long = False
    if head or long:
        number += 1
        yield _finish_line(head, tail, long, number, stats)
    stats.lines = number


def _finish_line(head: bytearray, tail: bytes, long: bool, number: int, stats: InputStats) -> bytes:
    if not long:
        return bytes(head)
    stats.long_line_count += 1
    if len(stats.long_lines) < 10:
        stats.long_lines.append(number)
    return bytes(head) + " … ".encode() + tail


# -- explaining ------------------------------------------------------------------------


class Occurrences(Plain):
    _fields = ("count", "first_line", "last_line")

    def __init__(self, count: int, first_line: int, last_line: int) -> None:
        self.count = count
        self.first_line = first_line
        self.last_line = last_line

    def as_dict(self) -> dict:
        return {"count": self.count, "firstLine": self.first_line, "lastLine": self.last_line}


class Found(Plain):
    """One record that matched, with where and how well."""

    _fields = ("record_id", "slug", "repo", "error_class", "severity", "score", "span", "message", "engine", "bounded",
               "record", "occurrences", "variant", "truncated")

    def __init__(self, record_id: str, slug: str, repo: str, error_class: str | None, severity: str | None, score: float,
                 span: tuple[int, int], message: str, engine: str, bounded: bool, record: dict | None,
                 occurrences: Occurrences | None = None, variant: dict | None = None, truncated: bool = False) -> None:
        self.record_id = record_id
        self.slug = slug
        self.repo = repo
        self.error_class = error_class
        self.severity = severity
        self.score = score
        self.span = span
        self.message = message
        self.engine = engine
        self.bounded = bounded
        self.record = record
        self.occurrences = occurrences
        # matched another release's wording: {"releases", "first", "last", "relation", "project"}
        self.variant = variant
        # the text stops inside the record's message: a true beginning of it (errkb.match.prefix)
        self.truncated = truncated

    @classmethod
    def from_match(cls, m, record: dict | None, truncated: bool = False) -> Found:
        return cls(m.record_id, m.slug, m.repo, m.error_class, m.severity, m.score, tuple(m.span), m.message,
                   m.engine, m.bounded, record, variant=getattr(m, "variant", None), truncated=truncated)

    def proof(self) -> dict:
        """The record's committed proof: ``{"status", "line", "library", "date", "findings"}``."""
        return _proof(self.record_id, self.record)

    def as_dict(self) -> dict:
        return {
            "id": self.record_id,
            # which tier answered: a curated record, or another release's wording of one
            "tier": "variant" if self.variant else "curated",
            "slug": self.slug,
            "repo": self.repo,
            "errorClass": self.error_class,
            "severity": self.severity,
            "score": round(self.score, 4),
            "span": list(self.span),
            "message": self.message,
            "engine": self.engine,
            "bounded": self.bounded,
            "variant": ({k: self.variant.get(k) for k in ("releases", "first", "last", "relation")} if self.variant else None),
            "occurrences": self.occurrences.as_dict() if self.occurrences else None,
            "truncated": self.truncated,
            "proof": _proof(self.record_id, self.record),
            "record": self.record,
        }


class Explanation(Plain):
    _fields = ("mode", "found", "near", "lines", "skipped", "notes", "dataset_hash", "search", "search_words", "sites")

    def __init__(self, mode: str, found: list[Found], near: list, lines: int, skipped: list[dict], notes: list[str],
                 dataset_hash: str, search: list | None = None, search_words: list[str] | None = None,
                 sites: list | None = None) -> None:
        self.mode = mode  # "text" | "log"
        self.found = found
        self.near = near  # list[errkb.match.near.NearMatch], with .record attached
        self.lines = lines
        self.skipped = skipped
        self.notes = notes
        self.dataset_hash = dataset_hash
        # when nothing matched and nothing is close: what `errkb search WORDS` finds for the
        # paste's words (errkb.match.search.SearchHit), and those words
        self.search = [] if search is None else search
        self.search_words = [] if search_words is None else search_words
        # the known-site tier (errkb.match.sites.SiteMatch) for messages no record matched:
        # where a library raises them, never a fix
        self.sites = [] if sites is None else sites

    @property
    def matched(self) -> bool:
        return bool(self.found)

    def as_dict(self) -> dict:
        """The documented ``errkb explain --json`` shape (docs/matching.md: ``## explain --json``)."""
        return {
            "format": 1,
            "mode": self.mode,
            "lines": self.lines,
            "matched": self.matched,
            "matches": [f.as_dict() for f in self.found],
            "sites": [m.as_dict() for m in self.sites],
            "nearMatches": [dict(n.as_dict(), record=n.record) for n in self.near],
            "skipped": [{"id": s.get("id"), "reason": s.get("reason")} for s in self.skipped],
            "notes": self.notes,
            "search": {"command": search_command(self.search_words), "hits": [h.as_dict() for h in self.search]}
            if self.search_words else None,
            "datasetHash": self.dataset_hash,
        }


def explain(kb: KnowledgeBase, source: str | BinaryIO, all_matches: bool = False) -> Explanation:
    """Explain a text (``str``) or a stream of bytes (stdin, a file).

    Raises :class:`ExplainError` for an input with nothing in it.
    """
    stats = InputStats()
    if isinstance(source, str):
        # as for a stream, a final newline ends the last line rather than starting one
        lines: Iterator[bytes | str] = iter(source.removesuffix("\n").split("\n"))
        counted = False
    else:
        lines = read_lines(source, stats)
        counted = True
    head = list(itertools.islice(lines, TEXT_MAX_LINES + 1))
    size = sum(len(line) for line in head)
    short = len(head) <= TEXT_MAX_LINES and size <= TEXT_MAX_BYTES
    if short and not any(_decode(line).strip() for line in head):
        raise EmptyInput("empty input: nothing to explain")
    notes: list[str] = []
    cut_before = _bounded_report(kb)
    if short:
        result = _explain_short(kb, head, all_matches)
        n_lines = len(head)
    else:
        result = _explain_log(kb, itertools.chain(head, lines), all_matches)
        n_lines = stats.lines if counted else result.lines
    result.lines = n_lines
    if stats.binary:
        notes.append("the input looks binary (NUL bytes); it was read as text with invalid UTF-8 replaced")
    if stats.long_line_count:
        where = ", ".join(str(n) for n in stats.long_lines) + (", ..." if stats.long_line_count > len(stats.long_lines) else "")
        notes.append(
            f"{stats.long_line_count} line(s) longer than {MAX_LINE_BYTES >> 20} MiB (line {where}): "
            f"only their first {(MAX_LINE_BYTES - LINE_TAIL_BYTES) >> 10} KiB and last {LINE_TAIL_BYTES >> 10} KiB were read"
        )
    cut = _bounded_report(kb)
    timeouts, skipped = cut["timeouts"] - cut_before["timeouts"], cut["skipped"] - cut_before["skipped"]
    if timeouts or skipped:
        from errkb.match.confirm import BOUNDED_TIMEOUT_S

        disabled = [rid for rid in cut["disabled"] if rid not in cut_before["disabled"]]
        notes.append(
            f"{timeouts} pattern run(s) hit the {round(BOUNDED_TIMEOUT_S * 1000)} ms time bound and {skipped} were not run, "
            "so a backtracking record may have been missed"
            + (f"; records no longer run: {', '.join(disabled)}" if disabled else "")
        )
    result.notes = notes + result.notes
    return result


def _bounded_report(kb: KnowledgeBase) -> dict:
    """What the matcher's time bound has cut short so far (counts only grow)."""
    report = getattr(kb.matcher, "bounded_report", None)
    return report() if report is not None else {"timeouts": 0, "skipped": 0, "disabled": []}


def explain_source(db_path: str | os.PathLike | None, source: str | BinaryIO, all_matches: bool = False) -> Explanation:
    """Open the store's knowledge base and explain ``source``."""
    return explain(KnowledgeBase.open(db_path), source, all_matches=all_matches)


def _decode(line: bytes | str) -> str:
    from errkb.text.normalize import to_text

    return to_text(line)


def _explain_short(kb: KnowledgeBase, head: list, all_matches: bool) -> Explanation:
    from errkb.text.normalize import strip_ansi
    from errkb.text.printed import printed_forms

    lines = [_decode(line).rstrip("\r") for line in head]
    result = _explain_text(kb, lines, all_matches)
    if result.found or result.sites:
        return result
    # a paste that quotes its message (pytest's "E   " margin, a repr with its line breaks
    # written "\n") is read as the program printed it, where the paste as given found nothing
    for form in printed_forms(strip_ansi("\n".join(lines))):
        form_lines = form.text.split("\n")
        if len(form_lines) > TEXT_MAX_LINES or len(form.text) > TEXT_MAX_BYTES:
            continue  # a decoded literal is no way round the short path's bounds
        printed = _explain_text(kb, form_lines, all_matches)
        if printed.found or printed.sites:
            return _moved(printed, form.first_line, form.line_for_line)
    return result


def _moved(result: Explanation, first_line: int, line_for_line: bool) -> Explanation:
    """``result`` of a form quoted in a paste, its line numbers the paste's: each line of the
    form is the paste's line ``first_line`` on when the form keeps the paste's lines (a pytest
    run), else every line is ``first_line`` (a literal decoded from one place)."""
    def line(n: int) -> int:
        return first_line + n - 1 if line_for_line else first_line

    result.sites = [_at_line(m, line(m.line_number)) for m in result.sites]
    for f in result.found:
        if f.occurrences is not None:
            f.occurrences = Occurrences(f.occurrences.count, line(f.occurrences.first_line), line(f.occurrences.last_line))
    return result


def _explain_text(kb: KnowledgeBase, lines: list[str], all_matches: bool) -> Explanation:
    """A short paste's explanation."""
    from errkb.text.normalize import iter_messages, text_messages, unwrapped_messages, wrapped_messages

    text = "\n".join(lines)
    messages = [m for m in iter_messages(lines) if m.text.strip()]
    if len(messages) > 1:
        # Several messages: a short log. Count them as a log would; if none matches
        # alone, the lines may be one message wrapped, so try the whole text too.
        logged = _explain_log(kb, iter(lines), all_matches)
        if logged.found:
            return logged
    found = [Found.from_match(m, kb.get(m.record_id)) for m in kb.matcher.match(text)]
    near = []
    if not found:
        messages = text_messages(text)
        # a paste cut short ("CUDA out of memory. Tried to allocate 2.00 GiB") is its record, marked so
        found = [_truncated(kb, record_id, message) for record_id, message in kb.truncated(messages)]
        if not found:
            near = _near(kb, [m.text for m in messages])
    sites = _sites(kb, [text]) if not found else []
    if sites:
        sites += _longer_elsewhere(kb, text, sites)
    if not found and not sites and len(lines) > 1:
        # a message the paste wrapped over lines (a terminal's width, an issue's editor): its
        # lines joined back, each site at the line its message begins on
        wrapped = [m.text for m in wrapped_messages(text)]
        sites = [_at_line(m, _line_of(lines, m)) for m in _sites(kb, wrapped)]
    if not found and not sites:
        # a message inside a wrapper's text (pydantic's "Value error, ... [type=...]", an API
        # client's "Error code: 400 - {... 'message': '...'}", a JSON log line), read alone: the
        # wrapper's words are not foreign text the message could be lost in
        sites = [_at_line(m, _line_of(lines, m)) for m in _sites(kb, unwrapped_messages(text))]
    if not found and not sites:
        # a paste cut short inside a message a library raises (a title at 80 characters)
        sites = _sites(kb, [text], cut=True)
    words: list[str] = []
    hits: list = []
    if not found and not near and not sites and len(text.split()) <= SEARCH_WORDS:
        # a short paste (a few words, a title): its words say what it is about
        words, hits = _search(kb, messages)
    return Explanation("text", found, near, len(lines), kb.skipped, [], kb.dataset_hash, hits, words, sites)


def _longer_elsewhere(kb: KnowledgeBase, text: str, whole: list) -> list:
    """Messages of other libraries that ``text``, a whole message of the libraries in
    ``whole``, may be cut short inside: a library that copies another's message in part
    (FlashInfer's experimental cuDNN frontend raises torch's "view size is not compatible
    with input tensor's size and stride (...)" without torch's "Use .reshape(...) instead.")
    cannot tell which raised a title that stops there; both are listed, the whole match first.
    Only where the message cut short is on the whole match's line."""
    # only on a line whose whole matches are all mined sites: a curated table's answer (torch's
    # "Expected all tensors to be on the same device") already says what its line is
    lines: dict[int, set[str]] = {}
    tabled = {m.line_number for m in whole if m.meaning is not None}
    for m in whole:
        if m.meaning is None and m.line_number not in tabled:
            lines.setdefault(m.line_number, set()).update(s.library for s in m.sites)
    if not lines:
        return []
    return [m for m in _sites(kb, [text], cut=True)
            if m.meaning is None and m.sites and m.line_number in lines
            and not {s.library for s in m.sites} & lines[m.line_number]]


def _sites(kb: KnowledgeBase, texts: list[str], first_lines: list[int] | None = None, cut: bool = False) -> list:
    """Known sites of texts no record matched (errkb.match.sites), one per pattern (a curated
    table's entry: one per table and message, as CUDA and NCCL share "invalid argument"), in order;
    with ``first_lines`` (where each text begins in a log), each match's line is the log's; with
    ``cut``, the messages each text stops inside (SiteIndex.match_cut) instead."""
    from errkb.match.sites import SiteIndexError

    try:
        index = kb.sites()
        out: dict[tuple, object] = {}
        for k, text in enumerate(texts):
            for m in index.match_cut(text) if cut else index.match(text):
                if first_lines is not None:  # a line inside a normalised message is not a log line: its first
                    m = _at_line(m, first_lines[k])
                out.setdefault((m.meaning is not None and m.trust, m.pattern), m)
        return list(out.values())
    except SiteIndexError:
        return []  # the tier is an addition: an unreadable index leaves the curated answer whole


def _line_of(lines: list[str], match) -> int:
    """The line (1-based) a site's message begins on in lines a paste wrapped: where the first
    words of its first literal with letters or digits (a curated table's message: its text)
    are, read across the line breaks; 1 when they are not there."""
    from errkb.match.chunks import chunks_of

    if match.meaning is not None:
        literal = match.pattern
    else:
        try:
            literal = next((c for c in chunks_of(match.pattern) if c and any(ch.isalnum() for ch in c)), "")
        except ValueError:  # not a miner-built pattern: no words to look for
            literal = ""
    words = " ".join(literal.split()[:3])
    starts, pieces, at = [], [], 0
    for line in lines:
        piece = " ".join(line.split())
        starts.append(at)
        pieces.append(piece)
        at += len(piece) + 1
    found = " ".join(pieces).find(words) if words else -1
    return bisect.bisect_right(starts, found) if found >= 0 else 1


def _at_line(match, line: int):
    """A site match said at another line (of the paste rather than of the text it was found in)."""
    from errkb.match.sites import SiteMatch

    return SiteMatch(match.pattern, line, match.trust, match.sites, match.meaning, match.truncated)


def _truncated(kb: KnowledgeBase, record_id: str, message: str) -> Found:
    """A record the text truly begins (errkb.match.prefix), as a match marked truncated."""
    record = kb.get(record_id) or {}
    return Found(record_id, record.get("slug"), record.get("repo"), record.get("errorClass"), record.get("severity"),
                 1.0, (0, len(message)), message, "prefix", False, record, truncated=True)


# Keyword search when nothing matched: at most this many hits, for at most this many words.
SEARCH_HITS = 3
SEARCH_WORDS = 12


def _search(kb: KnowledgeBase, messages: list) -> tuple[list[str], list]:
    """The paste's words and what `errkb search` finds for them, the weak hits left out."""
    from errkb.match.search import tokens

    text = " ".join(m.text for m in messages)
    words = [w for w in dict.fromkeys(re.findall(r"[A-Za-z_][\w.-]*[A-Za-z0-9_]|[A-Za-z]", text)) if tokens(w)][:SEARCH_WORDS]
    if not words:
        return [], []
    # A lead, not noise: a hit holds half the text's words at least (two at least), and
    # scores at least half the best hit (BM25 with coordination, errkb.match.search).
    wanted = max(2, -(-3 * len(set(tokens(" ".join(words)))) // 4))
    hits = [h for h in kb.search(" ".join(words), limit=SEARCH_HITS) if len(h.matched) >= wanted]
    return words, [h for h in hits if h.score >= 0.5 * hits[0].score] if hits else []


def search_command(words: list[str]) -> str:
    """The `errkb search` command line for ``words``, quoted for a POSIX shell."""
    import shlex

    return shlex.join(["errkb", "search", *words])


def _explain_log(kb: KnowledgeBase, lines: Iterator, all_matches: bool) -> Explanation:
    """Every distinct known error of a log with its count and first/last line (streamed)."""
    firsts: dict[str, object] = {}  # record id -> its first Match
    counts: dict[str, Occurrences] = {}
    # a few error-looking messages (text -> (its first line in the log, its forms)), for near
    # matches and known sites
    unmatched: dict[str, tuple[int, list[str]]] = {}
    last_line = 0
    last = None  # the log's last message, when nothing matched it
    from errkb.match.log import match_log

    for message, matches in match_log(kb.matcher, lines):
        last_line = message.last_line
        last = None if matches else message
        if not matches:
            if len(unmatched) < NEAR_CANDIDATES_FROM_LOG:
                _keep_unmatched(message, unmatched)
            continue
        for m in matches if all_matches else matches[:1]:
            occ = counts.get(m.record_id)
            if occ is None:
                counts[m.record_id] = Occurrences(1, message.first_line, message.last_line)
                firsts[m.record_id] = m
            else:
                occ.count += 1
                occ.last_line = message.last_line
    found = []
    for record_id in sorted(counts, key=lambda rid: (counts[rid].first_line, -firsts[rid].score)):
        f = Found.from_match(firsts[record_id], kb.get(record_id))
        f.occurrences = counts[record_id]
        found.append(f)
    near = []
    if unmatched:
        # Also beside exact matches: a log's known wrapper ("Engine core initialization failed.
        # See root cause above.") often sits under the cause, a message of another release.
        near = _near(kb, [t for _, forms in unmatched.values() for t in forms])
        if found:
            matched = {f.record_id for f in found}
            near = [n for n in near if n.record_id not in matched][:NEAR_BESIDE_MATCHES]
    # each site's line is the log's line (the message's first), not the line within its message
    sites = _sites(kb, list(unmatched), [first for first, _ in unmatched.values()]) if unmatched else []
    if not found and not sites and last is not None and last.text.strip():
        # a long paste that stops inside its last message, as a short one may (_explain_short)
        sites = _sites(kb, [last.text], [last.first_line], cut=True)
    return Explanation("log", found, near, last_line, kb.skipped, [], kb.dataset_hash, sites=sites)


def _keep_unmatched(message, unmatched: dict[str, tuple[int, list[str]]]) -> None:
    """Keep the forms of an unmatched message that names an error class (near-match
    candidates). Lines from the fast path carry no forms yet: computed here, rarely."""
    forms = message.candidates
    error_class = message.error_class
    from errkb.text.normalize import ERROR_HINTS, line_messages

    if not forms and message.kind == "line" and ERROR_HINTS.search(message.raw):
        forms = line_messages(message.raw)
        error_class = next((m.error_class for m in reversed(forms) if m.error_class), None)
    if error_class and forms:
        text = forms[-1].text
        if text not in unmatched:
            unmatched[text] = (message.first_line, [c.text for c in forms][-4:])


def _near(kb: KnowledgeBase, texts: list[str]) -> list:
    return kb.near(texts)


def _proof(record_id: str, record: dict | None) -> dict:
    """The record's committed proof, in one line ("Reproduced with torch 2.13.0+cpu on ...",
    or "Proof out of date: ..." when the record changed since it was proven)."""
    from errkb.records.proofs import ProofError, load_proof, observed_findings, proof_summary

    if record is None:
        # Without the record nothing can say the proof still covers it: never "Reproduced".
        return {"status": "unproven", "line": "Not reproduced yet (the record is not at hand)", "library": None, "date": None,
                "findings": []}
    try:
        # where the error the proof observed is not the record's (class, raise site): shown, not a note
        return dict(proof_summary(record), findings=observed_findings(load_proof(record_id), record))
    except ProofError as e:
        return {"status": "unproven", "line": f"Not reproduced yet ({e})", "library": None, "date": None, "findings": []}
