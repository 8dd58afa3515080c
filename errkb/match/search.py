"""Keyword search over records: for when a user has words, not a log line.

Ranked with BM25F: each field's term counts are weighted (the message counts most,
then the error class and tags, then the prose and the fixes) before the usual
BM25 saturation and length normalisation. Identifiers are found by their parts too
(``VLLM_FLASHINFER_ALLREDUCE_BACKEND`` by ``allreduce``, ``ValueError`` by ``value``),
and a query word matches words it is a prefix of when it is at least
``PREFIX_MIN`` characters long (``quantiz`` finds ``quantization``).

The index is built from the store's records and cached next to the store, keyed by
the dataset hash: a JSON header and packed arrays of postings (never a pickle). (DuckDB's fts extension would download at run
time, so the ranking is done here.)
"""

from __future__ import annotations

import bisect
import json
import math
import os
import re
import struct
import sys
from array import array
from dataclasses import dataclass
from pathlib import Path

from errkb.cache import write_atomic

INDEX_FORMAT = 2
_MAGIC = b"ERRKB-SEARCH\n"
K1 = 1.2
B = 0.75
PREFIX_MIN = 4
# A prefix query word counts a little less than the whole word.
PREFIX_WEIGHT = 0.7

# field -> weight; list fields are joined.
FIELDS = {
    "errorMessage": 3.0,
    "errorClass": 2.0,
    "tags": 2.0,
    "slug": 1.0,
    "documentation": 1.0,
    "triggerScenarios": 1.0,
    "commonSituations": 1.0,
    "solutions": 1.2,
    "preventionTips": 0.8,
    "exampleFix": 0.6,
    "handlingStrategy": 0.3,
    "filePath": 0.5,
}

_TOKEN = re.compile(r"[^\W_]+(?:_[^\W_]+)*|\w+")
_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")
_STOP = frozenset(
    "a an and are as at be by for from has have in into is it its of on or that the this to was were will with".split()
)


def tokens(text: str) -> list[str]:
    """Lowercased words, identifiers with their parts (snake_case and CamelCase)."""
    out: list[str] = []
    for word in _TOKEN.findall(text):
        out.extend(_word_tokens(word))
    return out


_WORD_TOKENS: dict[str, tuple[str, ...]] = {}


def _word_tokens(word: str, _cache: dict[str, tuple[str, ...]] = _WORD_TOKENS) -> tuple[str, ...]:
    # Prose repeats its words: splitting each distinct word once makes indexing ~5x faster.
    found = _cache.get(word)
    if found is not None:
        return found
    lowered = word.lower()
    out = [lowered] if lowered not in _STOP else []
    parts = [p for piece in word.split("_") for p in _CAMEL.findall(piece)] if not word.isdigit() else []
    if len(parts) > 1:
        out.extend(p.lower() for p in parts if p.lower() not in _STOP and len(p) > 1)
    found = tuple(out)
    if len(_cache) < 200_000:
        _cache[word] = found
    return found


def _field_text(value) -> str:
    if value is None:
        return ""
    if isinstance(value, list):
        return "\n".join(str(v) for v in value if v is not None)
    return str(value)


@dataclass
class SearchHit:
    record_id: str
    slug: str
    repo: str
    error_class: str | None
    message: str
    score: float
    matched: list[str]  # the query words found in the record
    fields: list[str]  # the fields they were found in, best weighted first

    def as_dict(self) -> dict:
        return {
            "id": self.record_id,
            "slug": self.slug,
            "repo": self.repo,
            "errorClass": self.error_class,
            "errorMessage": self.message,
            "score": round(self.score, 4),
            "matched": self.matched,
            "fields": self.fields,
        }


class SearchIndex:
    """BM25F index. Postings are packed arrays (record, weighted term frequency, field
    mask) per term, saved as raw bytes after a JSON header, so loading an index reads
    the header and leaves the postings as bytes until a query needs a term's slice."""

    def __init__(self) -> None:
        self.docs: list[list] = []  # [id, slug, repo, errorClass, errorMessage]
        self.lengths: list[float] = []
        self.terms: dict[str, list[int]] = {}  # term -> [start, count] in the postings arrays
        self._doc = memoryview(array("I").tobytes()).cast("I")
        self._tf = memoryview(array("f").tobytes()).cast("f")
        self._mask = memoryview(array("H").tobytes()).cast("H")
        self._sorted_terms: list[str] | None = None

    @classmethod
    def from_records(cls, records) -> SearchIndex:
        index = cls()
        names = list(FIELDS)
        postings: dict[str, list[tuple[int, float, int]]] = {}
        for record in records:
            if not isinstance(record, dict):
                continue
            doc = len(index.docs)
            index.docs.append([
                str(record.get("id")), record.get("slug") or "", record.get("repo") or "",
                record.get("errorClass"), _field_text(record.get("errorMessage")),
            ])
            tf: dict[str, float] = {}
            mask: dict[str, int] = {}
            length = 0.0
            for bit, name in enumerate(names):
                weight = FIELDS[name]
                toks = tokens(_field_text(record.get(name)))
                length += weight * len(toks)
                for t in toks:
                    tf[t] = tf.get(t, 0.0) + weight
                    mask[t] = mask.get(t, 0) | (1 << bit)
            index.lengths.append(length)
            for t, value in tf.items():
                postings.setdefault(t, []).append((doc, value, mask[t]))
        docs, tfs, masks = array("I"), array("f"), array("H")
        for term in sorted(postings):
            rows = postings[term]
            index.terms[term] = [len(docs), len(rows)]
            for doc, value, m in rows:
                docs.append(doc)
                tfs.append(value)
                masks.append(m)
        index._doc, index._tf, index._mask = memoryview(docs), memoryview(tfs), memoryview(masks)
        return index

    # -- persistence: a JSON header and packed arrays, never a pickle ------------------
    def save(self, path: str | os.PathLike) -> None:
        write_atomic(Path(path), self.dumps())

    def dumps(self) -> bytes:
        header = json.dumps({
            "format": INDEX_FORMAT, "byteorder": sys.byteorder, "docs": self.docs,
            "lengths": self.lengths, "terms": self.terms, "postings": len(self._doc),
        }, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        return b"".join([_MAGIC, struct.pack("<Q", len(header)), header,
                         *(view.tobytes() for view in (self._doc, self._tf, self._mask))])

    @classmethod
    def load(cls, path: str | os.PathLike) -> SearchIndex:
        """Raises ``ValueError`` for a file that is not a readable index."""
        try:
            data = Path(path).read_bytes()
        except OSError as e:
            raise ValueError(f"{path}: cannot read: {e}") from e
        return cls.loads(data, path)

    @classmethod
    def loads(cls, data: bytes, path: str | os.PathLike = "search index") -> SearchIndex:
        """:meth:`load` from the file's bytes (read once, e.g. by the cache's check)."""
        if not data.startswith(_MAGIC):
            raise ValueError(f"{path}: not a search index of format {INDEX_FORMAT}")
        try:
            (n_header,) = struct.unpack_from("<Q", data, len(_MAGIC))
            start = len(_MAGIC) + 8
            header = json.loads(data[start:start + n_header])
        except (struct.error, ValueError) as e:
            raise ValueError(f"{path}: damaged search index: {e}") from e
        if header.get("format") != INDEX_FORMAT or header.get("byteorder") != sys.byteorder:
            raise ValueError(f"{path}: not a search index of format {INDEX_FORMAT} for this machine")
        n = header["postings"]
        body = memoryview(data)[start + n_header:]
        if len(body) != n * 10:
            raise ValueError(f"{path}: damaged search index (postings cut short)")
        index = cls()
        index.docs, index.lengths, index.terms = header["docs"], header["lengths"], header["terms"]
        index._doc = body[:n * 4].cast("I")
        index._tf = body[n * 4:n * 8].cast("f")
        index._mask = body[n * 8:].cast("H")
        return index

    # -- querying ------------------------------------------------------------------
    def _expand(self, word: str) -> list[tuple[str, float]]:
        """The index terms a query word stands for: itself, and the terms it prefixes."""
        out = [(word, 1.0)] if word in self.terms else []
        if len(word) >= PREFIX_MIN:
            if self._sorted_terms is None:
                self._sorted_terms = sorted(self.terms)
            terms = self._sorted_terms
            i = bisect.bisect_left(terms, word)
            while i < len(terms) and terms[i].startswith(word):
                if terms[i] != word:
                    out.append((terms[i], PREFIX_WEIGHT))
                i += 1
        return out

    def search(self, query: str, limit: int = 10) -> list[SearchHit]:
        n = len(self.docs)
        if n == 0:
            return []
        avg = (sum(self.lengths) / n) or 1.0
        lengths = self.lengths
        scores: dict[int, float] = {}
        matched: dict[int, dict[str, None]] = {}
        masks: dict[int, int] = {}
        words = list(dict.fromkeys(tokens(query)))
        for word in words:
            best_for_doc: dict[int, tuple[float, int]] = {}
            for term, factor in self._expand(word):
                start, count = self.terms[term]
                idf = math.log(1.0 + (n - count + 0.5) / (count + 0.5))
                docs = self._doc[start:start + count]
                tfs = self._tf[start:start + count]
                fields = self._mask[start:start + count]
                for doc, tf, mask in zip(docs, tfs, fields):
                    norm = tf * (K1 + 1) / (tf + K1 * (1 - B + B * lengths[doc] / avg))
                    value = factor * idf * norm
                    kept = best_for_doc.get(doc)
                    if kept is None or value > kept[0]:
                        best_for_doc[doc] = (value, mask)
            for doc, (value, mask) in best_for_doc.items():
                scores[doc] = scores.get(doc, 0.0) + value
                matched.setdefault(doc, {})[word] = None
                masks[doc] = masks.get(doc, 0) | mask
        # The score shown is the sort key: BM25F times the share of the query's words the
        # record holds (Lucene's coordination factor), so records holding more of the words
        # rise without a separate key that would leave the shown scores out of order.
        for doc in scores:
            scores[doc] *= len(matched[doc]) / len(words)
        ranked = sorted(scores, key=lambda d: (-scores[d], self.docs[d][2], self.docs[d][1]))
        names = list(FIELDS)
        hits = []
        for doc in ranked[:limit]:
            rid, slug, repo, error_class, message = self.docs[doc]
            fields = [names[b] for b in range(len(names)) if masks[doc] >> b & 1]
            hits.append(SearchHit(rid, slug, repo, error_class, message, scores[doc], list(matched[doc]), fields))
        return hits
