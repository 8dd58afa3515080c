"""Keyword search over records: for when a user has words, not a log line.

Ranked with BM25F: each field's term counts are weighted (the message counts most,
then the error class and tags, then the prose and the fixes) before the usual
BM25 saturation and length normalisation. Identifiers are found by their parts too
(``VLLM_FLASHINFER_ALLREDUCE_BACKEND`` by ``allreduce``, ``ValueError`` by ``value``),
and a query word matches words it is a prefix of when it is at least
``PREFIX_MIN`` characters long (``quantiz`` finds ``quantization``).

The index is built from the store's records and cached as plain JSON next to the
store, keyed by the dataset hash. (DuckDB's fts extension would download at run
time, so the ranking is done here.)
"""

from __future__ import annotations

import bisect
import json
import math
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

INDEX_FORMAT = 1
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
    for m in _TOKEN.finditer(text):
        word = m.group()
        lowered = word.lower()
        if lowered not in _STOP:
            out.append(lowered)
        parts = [p for piece in word.split("_") for p in _CAMEL.findall(piece)] if not word.isdigit() else []
        if len(parts) > 1:
            out.extend(p.lower() for p in parts if p.lower() not in _STOP and len(p) > 1)
    return out


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
    def __init__(self) -> None:
        self.docs: list[tuple[str, str, str, str | None, str]] = []  # id, slug, repo, class, message
        # term -> [[doc, weighted tf, field bitmask], ...]
        self.postings: dict[str, list[list]] = {}
        self.lengths: list[float] = []
        self._terms: list[str] | None = None

    @classmethod
    def from_records(cls, records) -> "SearchIndex":
        index = cls()
        names = list(FIELDS)
        for record in records:
            if not isinstance(record, dict):
                continue
            doc = len(index.docs)
            index.docs.append((
                str(record.get("id")), record.get("slug") or "", record.get("repo") or "",
                record.get("errorClass"), _field_text(record.get("errorMessage")),
            ))
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
                index.postings.setdefault(t, []).append([doc, value, mask[t]])
        return index

    # -- persistence: plain JSON, never a pickle ------------------------------------
    def save(self, path: str | os.PathLike) -> None:
        path = Path(path)
        data = {"format": INDEX_FORMAT, "docs": self.docs, "postings": self.postings, "lengths": self.lengths}
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(data, f, ensure_ascii=False, separators=(",", ":"))
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    @classmethod
    def load(cls, path: str | os.PathLike) -> "SearchIndex":
        """Raises ``ValueError`` for a file that is not a readable index."""
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except OSError as e:
            raise ValueError(f"{path}: cannot read: {e}") from e
        if not isinstance(data, dict) or data.get("format") != INDEX_FORMAT:
            raise ValueError(f"{path}: not a search index of format {INDEX_FORMAT}")
        index = cls()
        index.docs = [tuple(d) for d in data["docs"]]
        index.postings = data["postings"]
        index.lengths = data["lengths"]
        return index

    @classmethod
    def from_store(cls, store) -> "SearchIndex":
        """The store's index, from its cache folder when this dataset version was indexed before."""
        path = Path(store.cache_dir) / f"search-v{INDEX_FORMAT}-{store.dataset_hash()}.json"
        if path.is_file():
            try:
                return cls.load(path)
            except (ValueError, KeyError, TypeError):
                pass  # a damaged cache is rebuilt
        index = cls.from_records(store.records())
        try:
            for old in path.parent.glob(f"search-v{INDEX_FORMAT}-*.json"):
                old.unlink(missing_ok=True)
            index.save(path)
        except OSError:
            pass  # a read-only cache folder costs speed, not correctness
        return index

    # -- querying ------------------------------------------------------------------
    def _expand(self, word: str) -> list[tuple[str, float]]:
        """The index terms a query word stands for: itself, and the terms it prefixes."""
        out = [(word, 1.0)] if word in self.postings else []
        if len(word) >= PREFIX_MIN:
            if self._terms is None:
                self._terms = sorted(self.postings)
            i = bisect.bisect_left(self._terms, word)
            while i < len(self._terms) and self._terms[i].startswith(word):
                if self._terms[i] != word:
                    out.append((self._terms[i], PREFIX_WEIGHT))
                i += 1
        return out

    def search(self, query: str, limit: int = 10) -> list[SearchHit]:
        n = len(self.docs)
        if n == 0:
            return []
        avg = (sum(self.lengths) / n) or 1.0
        scores: dict[int, float] = {}
        matched: dict[int, dict[str, None]] = {}
        masks: dict[int, int] = {}
        for word in dict.fromkeys(tokens(query)):
            best_for_doc: dict[int, tuple[float, int]] = {}
            for term, factor in self._expand(word):
                posting = self.postings[term]
                idf = math.log(1.0 + (n - len(posting) + 0.5) / (len(posting) + 0.5))
                for doc, tf, mask in posting:
                    norm = tf * (K1 + 1) / (tf + K1 * (1 - B + B * self.lengths[doc] / avg))
                    value = factor * idf * norm
                    kept = best_for_doc.get(doc)
                    if kept is None or value > kept[0]:
                        best_for_doc[doc] = (value, mask)
            for doc, (value, mask) in best_for_doc.items():
                scores[doc] = scores.get(doc, 0.0) + value
                matched.setdefault(doc, {})[word] = None
                masks[doc] = masks.get(doc, 0) | mask
        # Records holding more of the query words first, then by score.
        ranked = sorted(scores, key=lambda d: (-len(matched[d]), -scores[d], self.docs[d][2], self.docs[d][1]))
        names = list(FIELDS)
        hits = []
        for doc in ranked[:limit]:
            rid, slug, repo, error_class, message = self.docs[doc]
            fields = [names[b] for b in range(len(names)) if masks[doc] >> b & 1]
            hits.append(SearchHit(rid, slug, repo, error_class, message, scores[doc], list(matched[doc]), fields))
        return hits


def search(store, query: str, limit: int = 10) -> list[SearchHit]:
    """Records ranked for a keyword query (BM25F over messages, docs and fixes)."""
    return SearchIndex.from_store(store).search(query, limit=limit)
