"""What the index keeps per record (``Entry``), one record matching a text (``Match``),
and how matches rank: the text's error class equals the record's ``errorClass``, then the
pattern's specificity, then repo hints in the text (``site-packages/vllm/``, ``vllm/x.py``).
"""

from __future__ import annotations

from errkb.match.engines import regex_module

# Texts longer than this have their head only lowered for the repo hints.
HINT_CHARS = 1 << 16


class Entry:
    """What the matcher keeps per record (not the record itself)."""

    __slots__ = ("record_id", "slug", "repo", "error_class", "severity", "pattern", "re2_pattern",
                 "ascii_only", "needs_context", "bounded", "literal_chars", "hints", "specificity", "exponential", "gap_plan",
                 "variant")

    FIELDS = __slots__

    def __init__(self, **kw):
        for k in self.FIELDS:
            setattr(self, k, kw.get(k))


def hints_for(record: dict) -> list[str]:
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


def lowered_head(text: str) -> str:
    return text.lower() if len(text) < HINT_CHARS else text[:HINT_CHARS].lower()


def score(entry: Entry, text: str, classes: set[str] | None = None, lowered: str | None = None) -> float:
    """Error class agreement first, then specificity, then project hints."""
    value = 1.0 + entry.specificity
    cls = entry.error_class
    if cls:
        short = cls.rsplit(".", 1)[-1]
        if classes is not None:
            if any(c == cls or c.rsplit(".", 1)[-1] == short for c in classes):
                value += 2.0
        elif f"{short}:" in text or text.rstrip().endswith(short):
            value += 2.0
    if entry.hints:
        if lowered is None:
            lowered = lowered_head(text)
        hits = 0
        for hint in entry.hints:
            if hint in lowered:
                hits += 1
                if hits == 2:
                    break
        # a tie-breaker: below a clear difference in specificity
        value += min(hits, 2) * 0.1
    return value


def by_score(m: Match) -> tuple[float, int]:
    # Specificity saturates in the score; among equal scores the pattern that pins
    # down more literal text is the better explanation (a message that extends
    # another one's text is matched by both).
    return -m.score, -m._entry.literal_chars


class Match:
    """One record matching a text, best first in a result list.

    Cheap to create (batch matching makes many): the record's fields come from the
    index entry, and ``score``, ``span``/``message`` (located in the normalised
    message) and ``record`` (the full dict) are computed on first access. ``matcher``
    is the Matcher that found it (not imported here: the matcher imports this module)."""

    __slots__ = ("_matcher", "_entry_index", "_text", "_classes", "_score", "_span", "_message", "_record", "_raw")

    def __init__(self, matcher, entry_index: int, text: str, span=None, message=None, classes=None,
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
    def _entry(self) -> Entry:
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
        if entry.bounded or (self._matcher.confirm == "re" and entry.exponential and regex_module() is not None):
            return "regex-bounded"
        return self._matcher.confirm

    @property
    def score(self) -> float:
        if self._score is None:
            self._score = score(self._matcher.entries[self._entry_index], self._text, self._classes)
        return self._score

    def _ensure_located(self) -> None:
        if self._message is None:
            self._message, self._span = self._matcher.locate(self._entry_index, self._text, self._raw)

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
        if self._record is None:
            self._record = self._matcher.record(self.record_id)
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
