"""Near matches: records whose message is close to a text that no pattern matched.

Messages drift between versions of a project: a record analysed at one commit, a
user on another release where a word changed. When no pattern matches, the closest
records are offered as "similar, not exact", with a similarity score and the words
that differ. They are never a match.

Each record is reduced to the literal words of its ``messagePattern`` in order, with
a *slot* wherever the pattern has a wildcard or any other non-literal part (so the
values a message carries are not counted as differences). A text is compared with
a word-level alignment (``difflib``), weighting words by how rare they are across the
dataset. Candidates come from an inverted index over those words, so only a few
dozen records are aligned whatever the size of the dataset.

No dataset regex is ever executed here: patterns are only parsed.
"""

from __future__ import annotations

import difflib
import heapq
import json
import math
import os
import re
import struct
import sys
from array import array
from collections.abc import Mapping, Sequence
from pathlib import Path

from errkb.cache import write_atomic
from errkb.plain import Plain

INDEX_FORMAT = 5  # 5: flat arrays in one file, records cut on access (4: contractions are one word)
_MAGIC = b"ERRKB-SIMILAR\n"
# Below this a record is too far from the text to be worth showing.
MIN_SIMILARITY = 0.6
DEFAULT_LIMIT = 3
# Records aligned exactly per text; the rest are ranked out by the inverted index.
CANDIDATES = 40
# Words in more than this share of records say nothing about which record is meant;
# they still count in the final score, but do not nominate candidates.
COMMON_SHARE = 0.2
# Text beyond this many words is not aligned (a message is short; a log is not).
MAX_TEXT_WORDS = 400
# A value filling a wildcard is a number, a name, a path: words beyond this many in one
# slot count as extra text, or a record of few literal words would "explain" anything.
MAX_VALUE_WORDS = 6
# Fewer literal words in common than this is not a resemblance worth showing.
MIN_SHARED_WORDS = 3
# Span scoring (docs/matching.md, "Near matches: truncated, reworded, extra text"): a text
# cut short, or one holding the message among other words, is scored on the span it
# shares with the record. A cut text must share this much of the record's word weight,
# and its score is scaled by how much of the record it holds (TRUNCATED_BASE + the rest
# times that share), so the whole message still ranks above its first clause.
MIN_SPAN_SHARE = 0.3
TRUNCATED_BASE = 0.7
# Text words a cut text may have after the shared span: a word cut mid-way, a value.
CUT_WORDS = 2
# Words around the shared span are forgiven, but a text that only holds the message
# among others is not the message: its score is at most this.
EXTRA_TEXT_CAP = 0.95
# ... and they are forgiven only when the span holds this share of the record's word
# weight (what the text did not cut): a short record sharing a few words with a long
# text does not "explain" it.
CONTAINED_SHARE = 0.75
# Span scoring needs this many shared words: "is not supported" inside a long text is
# not that record's message.
MIN_SPAN_WORDS = 5
# When no record reaches the cutoff, the best one is still shown if it scores at least
# MARGIN_FLOOR and beats the runner-up by MARGIN_RATIO times.
MARGIN_FLOOR = 0.15
MARGIN_RATIO = 1.5
# Shared words are not enough to show a record as "similar": real pastes of errors that no
# record describes share phrases like "must be divisible by" or "is not supported for the
# current GPU" with records, at scores that overlap those of true drift. What a drifted or
# cut message keeps and a different one does not is the record's *opening* (a title cut
# short, a message whose hint changed: its first words, values allowed) or a long unbroken
# run of its words (a message reworded at its start). A record is shown only with one of
# the two: OPENING_WORDS of its first words (all of them if it has fewer), RUN_WORDS in one
# run, or its first word and a run of RUN_WORDS - OPENING_WORDS.
OPENING_WORDS = 3
RUN_WORDS = 8

# A contraction is one word ("isn't", "don’t"): split at the apostrophe, a diff would
# show "isn t".
_WORD = re.compile(r"\w+(?:['’]\w+)*")
_SLOT = None  # a wildcard position in a record's word sequence
_NUL = "\0"  # a slot in the saved form


class DiffOp(Plain):
    """One step of the word-level alignment between a record and a text.

    ``op`` is ``same`` (words in both), ``changed`` (record words replaced by text
    words), ``missing`` (record words absent from the text), ``extra`` (text words
    the record does not have) or ``value`` (text words filling a wildcard slot).
    """

    _fields = ("op", "record", "text")

    def __init__(self, op: str, record: str, text: str) -> None:
        self.op = op
        self.record = record
        self.text = text

    def as_dict(self) -> dict:
        return {"op": self.op, "record": self.record, "text": self.text}


class NearMatch(Plain):
    _fields = ("record_id", "slug", "repo", "error_class", "similarity", "message", "diff", "closeness", "record")

    def __init__(self, record_id: str, slug: str, repo: str, error_class: str | None, similarity: float, message: str,
                 diff: list[DiffOp] | None = None, closeness: list[str] | None = None, record: dict | None = None) -> None:
        self.record_id = record_id
        self.slug = slug
        self.repo = repo
        self.error_class = error_class
        self.similarity = similarity
        self.message = message  # the normalised text it was compared with
        self.diff = [] if diff is None else diff
        # which kinds of closeness were found: "truncated" (the text stops inside the
        # record's message), "extra text" (words around the shared span), "reworded"
        # (words inside the span differ); "same words" when none of these
        self.closeness = [] if closeness is None else closeness
        self.record = record  # the full record, attached by the caller that has it

    @property
    def differences(self) -> list[DiffOp]:
        return [d for d in self.diff if d.op in ("changed", "missing", "extra")]

    def as_dict(self) -> dict:
        return {
            "id": self.record_id,
            "slug": self.slug,
            "repo": self.repo,
            "errorClass": self.error_class,
            "similarity": round(self.similarity, 4),
            "closeness": list(self.closeness),
            "message": self.message,
            "diff": [d.as_dict() for d in self.diff],
        }


def site_constants() -> dict:
    """The scoring constants, for the static site's port of this module (templates/site/static/site.js
    reads them from the index page's manifest, so the two cannot drift apart by a copied number)."""
    names = ("MIN_SIMILARITY", "DEFAULT_LIMIT", "CANDIDATES", "COMMON_SHARE", "MAX_TEXT_WORDS", "MAX_VALUE_WORDS",
             "MIN_SHARED_WORDS", "MIN_SPAN_SHARE", "TRUNCATED_BASE", "CUT_WORDS", "EXTRA_TEXT_CAP", "CONTAINED_SHARE",
             "MIN_SPAN_WORDS", "MARGIN_FLOOR", "MARGIN_RATIO", "OPENING_WORDS", "RUN_WORDS")
    return {name: globals()[name] for name in names}


def record_words(record: dict) -> str | None:
    """A record's literal message words as the index keeps them: space-separated, NUL for a
    slot; None for a record without literal words (it is not indexed)."""
    message = record.get("errorMessage") if isinstance(record.get("errorMessage"), str) else ""
    pattern = record.get("messagePattern") if isinstance(record.get("messagePattern"), str) else ""
    seq = pattern_words(pattern, message)
    if not any(w is not _SLOT for w in seq):
        return None
    return " ".join(_NUL if w is _SLOT else w for w in seq)


def words(text: str) -> list[str]:
    return _WORD.findall(text)


def pattern_words(pattern: str, fallback: str = "") -> list[str | None]:
    """The literal words of a pattern in order, ``None`` where a non-literal part sits.

    Parsed with the parser ``re`` itself uses, never compiled or run. A pattern that
    does not parse falls back to the words of ``fallback`` (the errorMessage).
    """
    import re._constants as C

    from errkb.text.patterns import parse

    try:
        parsed = parse(pattern)
    except Exception:  # re.error, RecursionError, OverflowError: an unreadable pattern
        return list(words(fallback))
    pieces: list[str | None] = []
    chunk: list[str] = []

    def flush() -> None:
        if chunk:
            pieces.append("".join(chunk))
            chunk.clear()

    def walk(items) -> None:
        for op, av in items:
            if op is C.LITERAL:
                chunk.append(chr(av))
            elif op is C.AT:
                continue  # anchors take no text
            elif op is C.SUBPATTERN and av[-1] is not None and _all_literal(av[-1]):
                walk(av[-1])  # (?:literal) or (literal): still literal text
            else:
                flush()
                pieces.append(_SLOT)

    walk(parsed)
    flush()
    out: list[str | None] = []
    for piece in pieces:
        if piece is _SLOT:
            if out and out[-1] is _SLOT:
                continue
            out.append(_SLOT)
        else:
            # a slot glued to a word ("x(.+?)y") leaves the word fragment as a word
            out.extend(words(piece))
    return out or list(words(fallback))


def _all_literal(items) -> bool:
    import re._constants as C

    return all(op is C.LITERAL for op, _ in items)


class SimilarIndex:
    """Inverted index over records' literal message words (see module docstring)."""

    def __init__(self) -> None:
        # per record: (id, slug, repo, errorClass, words): the pattern's literal words as
        # written, space-separated, NUL for a slot (one string parses much faster than a list)
        self.items: list[tuple[str, str, str, str | None, str]] = []
        # word -> records holding it; per record the summed weight of its words. Both
        # are saved with the index, so loading it is one JSON parse.
        self.postings: dict[str, list[int]] = {}
        self.weights: list[float] = []
        self._idf: dict[str, float] = {}

    # -- building ----------------------------------------------------------------
    @classmethod
    def from_records(cls, records) -> SimilarIndex:
        index = cls()
        for r in records:
            if not isinstance(r, dict):
                continue
            joined = record_words(r)
            if joined is None:
                continue
            index.items.append((str(r.get("id")), r.get("slug") or "", r.get("repo") or "", r.get("errorClass"), joined))
        lowered = [_split(item[4]) for item in index.items]
        for i, seq in enumerate(lowered):
            for w in dict.fromkeys(w for w in seq if w is not _SLOT):
                index.postings.setdefault(w, []).append(i)
        idf = index.idf
        index.weights = [sum(idf(w) for w in seq if w is not _SLOT) for seq in lowered]
        return index

    def idf(self, word: str) -> float:
        """How rare a word is among the records (a word no record has is rarest)."""
        value = self._idf.get(word)
        if value is None:
            posting = self.postings.get(word)
            value = self._idf[word] = math.log(1.0 + (len(self.items) + 1) / ((len(posting) if posting else 0) + 0.5))
        return value

    # -- persistence (plain data: a cache must never be able to run code) -----------
    # One file: magic, a small JSON header, then the blobs it lists: the vocabulary (words
    # joined by newlines; a word never holds one), each word's postings as offsets into
    # one flat array of record numbers, the records' weights (float64, the values
    # themselves), and the records as JSON lines with their line ends. Loading it is one
    # read and a split of the vocabulary; a record is decoded when a query aligns it
    # (a cold `errkb explain` touches a few dozen of 10,000).
    def save(self, path: str | os.PathLike) -> None:
        write_atomic(Path(path), self.dumps())

    def dumps(self) -> bytes:
        words = list(self.postings)
        if any("\n" in w for w in words):
            raise ValueError("a word of the similar-records index holds a newline")
        starts, ids = array("I", [0]), array("I")
        for w in words:
            ids.extend(self.postings[w])
            starts.append(len(ids))
        rows = [json.dumps(list(item), ensure_ascii=False, separators=(",", ":")).encode("utf-8") for item in self.items]
        ends, end = array("I"), 0
        for row in rows:
            end += len(row) + 1
            ends.append(end)
        arrays = [starts, ids, array("d", self.weights), ends]
        if sys.byteorder == "big":  # the file is little-endian everywhere
            for a in arrays:
                a.byteswap()
        blobs = ["\n".join(words).encode("utf-8"), *(a.tobytes() for a in arrays[:3]),
                 b"".join(row + b"\n" for row in rows), arrays[3].tobytes()]
        header = json.dumps({"format": INDEX_FORMAT, "items": len(self.items), "words": len(words),
                             "blobs": [len(b) for b in blobs]}).encode("ascii")
        return _MAGIC + struct.pack("<Q", len(header)) + header + b"".join(blobs)

    @classmethod
    def load(cls, path: str | os.PathLike) -> SimilarIndex:
        """Raises ``ValueError`` for a file that is not a readable index."""
        try:
            data = Path(path).read_bytes()
        except OSError as e:
            raise ValueError(f"{path}: cannot read: {e}") from e
        return cls.loads(data, path)

    @classmethod
    def loads(cls, data: bytes, path: str | os.PathLike = "similar-records index") -> SimilarIndex:
        """:meth:`load` from the file's bytes (read once, e.g. by the cache's check)."""
        if not data.startswith(_MAGIC):
            raise ValueError(f"{path}: not a similar-records index of format {INDEX_FORMAT}")
        try:
            at = len(_MAGIC) + 8
            (size,) = struct.unpack_from("<Q", data, len(_MAGIC))
            header = json.loads(data[at:at + size])
            if not isinstance(header, dict) or header.get("format") != INDEX_FORMAT:
                raise ValueError(f"{path}: not a similar-records index of format {INDEX_FORMAT}")
            at += size
            blobs = []
            for length in header["blobs"]:
                blobs.append(data[at:at + length])
                at += length
            vocabulary, starts_b, ids_b, weights_b, rows, ends_b = blobs
            arrays = [array("I"), array("I"), array("d"), array("I")]
            for a, raw in zip(arrays, (starts_b, ids_b, weights_b, ends_b)):
                a.frombytes(raw)
                if sys.byteorder == "big":
                    a.byteswap()
            starts, ids, weights, ends = arrays
            words = vocabulary.decode("utf-8").split("\n") if header["words"] else []
        except (ValueError, KeyError, TypeError, struct.error) as e:
            raise ValueError(f"{path}: damaged similar-records index: {e}") from e
        n = header["items"]
        if (at != len(data) or len(words) != header["words"] or len(starts) != len(words) + 1 or starts[-1] != len(ids)
                or len(weights) != n or len(ends) != n or (n and ends[-1] != len(rows))):
            raise ValueError(f"{path}: damaged similar-records index")
        index = cls()
        index.items = _Items(rows, ends)
        index.postings = _Postings(words, starts, ids)
        index.weights = weights
        return index

    # -- querying ------------------------------------------------------------------
    def near(self, texts: str | list[str], limit: int = DEFAULT_LIMIT, min_similarity: float = MIN_SIMILARITY) -> list[NearMatch]:
        """The records closest to a text, best first.

        A ``str`` is normalised first (``errkb.text.normalize.text_messages``: log prefixes,
        ANSI, JSON envelopes, the ``ErrorClass:`` of a traceback line); a list is taken
        as the already normalised forms of one message.
        """
        if isinstance(texts, str):
            from errkb.text.normalize import text_messages

            texts = [m.text for m in text_messages(texts)]
        if not self.items:
            return []
        best: dict[int, NearMatch] = {}
        floor = min(min_similarity, MARGIN_FLOOR)
        for text in dict.fromkeys(t for t in texts if t and t.strip()):
            original = words(text)[:MAX_TEXT_WORDS]
            if not original:
                continue
            lowered = [w.lower() for w in original]
            # one matcher per text: the text's word index is built once, not per record
            aligner = difflib.SequenceMatcher(None, (), lowered, autojunk=False)
            for i in self._candidates(lowered):
                found = self._compare(i, text, original, lowered, aligner)
                if found is None or found.similarity < floor:
                    continue
                kept = best.get(i)
                # the same score for two forms of one message: the one with fewer differences
                # (a span score forgives a prefix the normaliser removed from the other form)
                if kept is None or (found.similarity, -len(found.differences)) > (kept.similarity, -len(kept.differences)):
                    best[i] = found
        ranked = sorted((m for m in best.values() if m.evidence), key=lambda m: (-m.similarity, m.repo, m.slug))
        shown = [m for m in ranked if m.similarity >= min_similarity]
        if not shown and ranked:
            # below the cutoff, a record that clearly beats the runner-up is still worth showing
            runner_up = ranked[1].similarity if len(ranked) > 1 else 0.0
            if ranked[0].similarity >= MARGIN_RATIO * runner_up:
                shown = ranked[:1]
        return shown[:limit]

    def _candidates(self, lowered: list[str]) -> list[int]:
        common = max(8, int(len(self.items) * COMMON_SHARE))
        acc: dict[int, float] = {}
        get = acc.get
        for w in set(lowered):
            posting = self.postings.get(w)
            if not posting or len(posting) > common:
                continue
            weight = self.idf(w)
            for i in posting:
                acc[i] = get(i, 0.0) + weight
        if not acc:
            return []
        # an upper bound of each record's recall: the share of its word weight present
        weights = self.weights
        return heapq.nlargest(CANDIDATES, acc, key=lambda i: acc[i] / (weights[i] or 1.0))

    def _compare(self, i: int, text: str, original: list[str], lowered: list[str],
                 aligner: difflib.SequenceMatcher | None = None) -> NearMatch | None:
        record_id, slug, repo, error_class, joined = self.items[i]
        seq, keyed, display, total = self._prepared(i, joined)
        if aligner is None:
            aligner = difflib.SequenceMatcher(None, (), lowered, autojunk=False)
        aligner.set_seq1(keyed)
        opcodes = aligner.get_opcodes()
        matched = extra = 0.0
        diff: list[DiffOp] = []
        # Text around the message counts against it too: a log prefix has been removed
        # by the normaliser in one of the forms compared, and a short record must not
        # "explain" a long text by matching a few of its words.
        for tag, i1, i2, j1, j2 in opcodes:
            rec_words = [display[k] for k in range(i1, i2) if seq[k] is not _SLOT]
            has_slot = any(seq[k] is _SLOT for k in range(i1, i2))
            txt = original[j1:j2]
            if tag == "equal":
                matched += sum(self.idf(seq[k]) for k in range(i1, i2))
                diff.append(DiffOp("same", " ".join(rec_words), " ".join(txt)))
                continue
            if has_slot and txt:
                # the text's words here fill the wildcard(s); any record words beside them
                # are missing, and words beyond a plausible value are extra
                slots = sum(1 for k in range(i1, i2) if seq[k] is _SLOT)
                keep = MAX_VALUE_WORDS * slots
                diff.append(DiffOp("value", "…", " ".join(txt[:keep])))
                if len(txt) > keep:
                    diff.append(DiffOp("extra", "", " ".join(txt[keep:])))
                    extra += sum(self.idf(w) for w in lowered[j1 + keep:j2])
                if rec_words:
                    diff.append(DiffOp("missing", " ".join(rec_words), ""))
                continue
            if rec_words and txt:
                diff.append(DiffOp("changed", " ".join(rec_words), " ".join(txt)))
            elif rec_words:
                diff.append(DiffOp("missing", " ".join(rec_words), ""))
            elif txt:
                diff.append(DiffOp("extra", "", " ".join(txt)))
            extra += sum(self.idf(w) for w in lowered[j1:j2]) if txt and not has_slot else 0.0
        shared = sum(i2 - i1 for tag, i1, i2, _j1, _j2 in opcodes if tag == "equal")
        if matched == 0.0 or total == 0.0 or shared < MIN_SHARED_WORDS:
            return None
        similarity = matched / (total + extra)
        span, closeness = self._span_score(seq, lowered, opcodes, matched, total, extra)
        found = NearMatch(record_id, slug, repo, error_class, max(similarity, span), text, diff, closeness=closeness)
        found.evidence = _evidence(seq, opcodes)
        return found

    def _prepared(self, i: int, joined: str) -> tuple[list, list, list[str], float]:
        """A record's words as an alignment needs them, made once per record (the forms
        of one text nominate mostly the same records)."""
        cache = self.__dict__.setdefault("_prepared_items", {})
        found = cache.get(i)
        if found is None:
            seq = _split(joined)
            # Slots become tokens no text word can equal, so they align with values.
            keyed = [w if w is not _SLOT else ("\0slot", k) for k, w in enumerate(seq)]
            display = [w if w != _NUL else "…" for w in joined.split(" ")]
            total = sum(self.idf(w) for w in seq if w is not _SLOT)
            found = cache[i] = (seq, keyed, display, total)
        return found

    def _span_score(self, seq: list, lowered: list[str], opcodes: list, matched: float, total: float,
                    extra: float) -> tuple[float, list[str]]:
        """The score on the span the text shares with the record, and the kinds of closeness.

        Text words before the first shared word or after the last one (not filling a
        wildcard) are *extra text* and are not counted. Record words after the last
        shared word, where the text stops there (a title cut short, a message without its
        hint; at most CUT_WORDS text words after it), are *truncated* and are not counted either,
        but the score is scaled by the share of the record the text holds. Differences
        inside the span are *reworded* and count as before.
        """
        equal = [k for k, op in enumerate(opcodes) if op[0] == "equal"]
        first, last = equal[0], equal[-1]
        idf = self.idf

        def text_weight(ops) -> tuple[float, int]:
            weight, count = 0.0, 0
            for _tag, i1, i2, j1, j2 in ops:
                if any(seq[k] is _SLOT for k in range(i1, i2)):
                    keep = MAX_VALUE_WORDS * sum(1 for k in range(i1, i2) if seq[k] is _SLOT)
                    j1 = min(j2, j1 + keep)  # words beyond a value are extra
                weight += sum(idf(w) for w in lowered[j1:j2])
                count += j2 - j1
            return weight, count

        lead_weight, lead_words = text_weight(opcodes[:first])
        trail_weight, trail_words = text_weight(opcodes[last + 1:])
        cut = sum(idf(seq[k]) for _t, i1, i2, _j1, _j2 in opcodes[last + 1:] for k in range(i1, i2) if seq[k] is not _SLOT)
        # the text stops inside the record: at most a cut word or a value's two after the span
        after = sum(j2 - j1 for _t, _i1, _i2, j1, j2 in opcodes[last + 1:])
        truncated = cut > 0.0 and after <= CUT_WORDS and matched >= MIN_SPAN_SHARE * total
        inner = any(tag != "equal" and (i2 > i1 or j2 > j1) and not (
            tag == "replace" and all(seq[k] is _SLOT for k in range(i1, i2)) and j2 - j1 <= MAX_VALUE_WORDS)
            for tag, i1, i2, j1, j2 in opcodes[first:last + 1])
        closeness = []
        if truncated:
            closeness.append("truncated")
        if lead_words or (trail_words and not truncated):
            closeness.append("extra text")
        if inner or (cut and not truncated):
            closeness.append("reworded")
        if not closeness:
            closeness.append("same words")
        shared = sum(i2 - i1 for tag, i1, i2, _j1, _j2 in opcodes if tag == "equal")
        if matched < MIN_SPAN_SHARE * total or shared < MIN_SPAN_WORDS:
            return 0.0, closeness
        forgiven_cut = cut if truncated else 0.0
        contained = matched >= CONTAINED_SHARE * (total - forgiven_cut)
        forgiven_extra = lead_weight + trail_weight if contained else 0.0
        score = matched / max(total - forgiven_cut + max(extra - forgiven_extra, 0.0), matched)
        if truncated:
            score *= TRUNCATED_BASE + (1.0 - TRUNCATED_BASE) * matched / total
        if forgiven_extra:
            score = min(score, EXTRA_TEXT_CAP)
        return score, closeness


class _Items(Sequence):
    """A loaded index's records, each decoded from its JSON line when first asked for."""

    def __init__(self, rows: bytes, ends: array) -> None:
        self._rows = rows
        self._ends = ends
        self._decoded: dict[int, tuple] = {}

    def __len__(self) -> int:
        return len(self._ends)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(len(self)))]
        if i < 0:
            i += len(self._ends)
        item = self._decoded.get(i)
        if item is None:
            start = self._ends[i - 1] if i > 0 else 0  # IndexError past the end, as a list
            item = self._decoded[i] = tuple(json.loads(self._rows[start:self._ends[i] - 1]))
        return item


class _Postings(Mapping):
    """A loaded index's word -> record numbers (slices of one flat array)."""

    def __init__(self, words: list[str], starts: array, ids: array) -> None:
        self._words = words
        self._starts = starts
        self._ids = ids
        self._at: dict[str, int] | None = None

    def __getitem__(self, word: str) -> array:
        if self._at is None:
            self._at = dict(zip(self._words, range(len(self._words))))
        k = self._at[word]
        return self._ids[self._starts[k]:self._starts[k + 1]]

    def get(self, word, default=None):
        try:
            return self[word]
        except KeyError:
            return default

    def __iter__(self):
        return iter(self._words)

    def __len__(self) -> int:
        return len(self._words)


def _split(joined: str) -> list[str | None]:
    """The lowered words of a record, ``None`` for a slot."""
    return [_SLOT if w == _NUL else w.lower() for w in joined.split(" ")]


def _evidence(seq: list, opcodes: list) -> bool:
    """Whether the text holds the record's opening or a long run of its words (see
    OPENING_WORDS): evidence that it is this message, beyond words in common.

    The opening is read from the alignment: text before the record's first word is
    skipped (a log prefix, an issue title's "[Bug]:"), then record words matched in
    order, a wildcard's value (at most MAX_VALUE_WORDS words per slot) among them
    allowed, up to the first word the text changed or left out."""
    literal = sum(1 for w in seq if w is not _SLOT)
    opening = run = 0
    in_opening = True
    for tag, i1, i2, j1, j2 in opcodes:
        if tag == "equal":
            run = max(run, i2 - i1)
            if in_opening:
                opening += i2 - i1
            continue
        if not in_opening:
            continue
        if i1 == i2 and opening == 0:
            continue  # text before the record's first word
        slots = sum(1 for k in range(i1, i2) if seq[k] is _SLOT)
        if not (slots == i2 - i1 and j2 - j1 <= MAX_VALUE_WORDS * slots):
            in_opening = False
    # A record that opens with a wildcard has no fixed first words: any words before its
    # first literal ones ("Quantization scheme" before "is not supported for") pass as
    # the value, so its opening must be twice as long to count.
    scale = 2 if seq and seq[0] is _SLOT else 1
    # The opening, a long run, or both in part: the first word(s) kept and a run of
    # RUN_WORDS - OPENING_WORDS ("LoRA adapters are not supported with quantized models").
    return (opening >= min(OPENING_WORDS * scale, literal) or run >= RUN_WORDS
            or (opening >= scale and run >= RUN_WORDS - OPENING_WORDS))
