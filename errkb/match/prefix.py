"""A paste cut short: text that is a true beginning of a record's message.

Users paste the first line they see, and titles cut messages at 80 characters:
``torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB`` is the
start of the record whose pattern goes on ``\\. GPU (.+?) has a total capacity of ...``;
no pattern matches it, and near matching, which scores the share of a record's words
a text holds, ranks a long record's first clause low. This module answers it from the
pattern's *opening literal* (the text every match must start with):

* the text lies inside the opening ("CUDA out of memory"), at least MIN_PREFIX_CHARS
  letters/digits and MIN_PREFIX_WORDS words of it; or
* the text starts with the whole opening and goes on, where the opening itself has at
  least MIN_OPENING_CHARS letters/digits (past it, a pattern's wildcards accept almost
  anything, so only a long opening is evidence);
* and the text's error class, where it names one, is the record's.

No regex runs here (the openings are plain strings), so the cost is linear in the text
whatever the dataset holds; the site's paste box (templates/site/static/site.js,
``truncatedAnswer``) applies the same rule to the same openings.
"""

from __future__ import annotations

import json
import re

# Fewer literal characters than this are no evidence of which message was meant
# ("CUDA error" is the start of hundreds).
MIN_PREFIX_CHARS = 12
MIN_PREFIX_WORDS = 3
# A text that goes on past the pattern's opening literal is partly taken by its
# wildcards, which accept almost anything ("Invalid value (.+)" would "begin" every
# "Invalid value ..." of every library): the opening must then be this long itself.
MIN_OPENING_CHARS = 20
# Records are found by the first characters of their pattern's opening literal.
KEY_CHARS = 6
# Pattern syntax that ends a literal opening.
_META = set(".^$*+?{}[]()|\\")
_ESCAPED_LITERAL = re.compile(r"\\([^A-Za-z0-9])")
_TRAILING_CUT = re.compile(r"(?:\s*(?:\.\.\.|…))+\s*$")


def prefix_constants() -> dict:
    """The rule's numbers, for the site's port (site.js reads them from the index page)."""
    return {"MIN_PREFIX_CHARS": MIN_PREFIX_CHARS, "MIN_PREFIX_WORDS": MIN_PREFIX_WORDS,
            "MIN_OPENING_CHARS": MIN_OPENING_CHARS, "KEY_CHARS": KEY_CHARS}


def opening_literal(pattern: str) -> str:
    """The literal text a pattern must start with (escapes resolved), '' when none."""
    out: list[str] = []
    i = 1 if pattern.startswith("^") else 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\":
            m = _ESCAPED_LITERAL.match(pattern, i)
            if not m:
                break  # \d, \s, \b ...: not a literal
            out.append(m.group(1))
            i = m.end()
            continue
        if ch in _META:
            break
        out.append(ch)
        i += 1
    # a quantifier after the last literal char applies to that char alone
    if i < len(pattern) and pattern[i] in "*+?{" and out:
        out.pop()
    return "".join(out)


def is_beginning(text: str, opening: str, text_class: str | None, record_class: str | None) -> bool:
    """Whether ``text`` (a message, its class apart) truly begins a message whose pattern opens
    with ``opening`` (see the module's docstring)."""
    text = cut_end(text)
    if sum(ch.isalnum() for ch in text) < MIN_PREFIX_CHARS or len(text.split()) < MIN_PREFIX_WORDS:
        return False
    if not (opening.startswith(text) or (text.startswith(opening) and sum(ch.isalnum() for ch in opening) >= MIN_OPENING_CHARS)):
        return False
    wanted = text_class.rsplit(".", 1)[-1] if text_class else None
    return not (wanted and record_class and wanted != record_class)


def cut_end(text: str) -> str:
    """The text without surrounding space and a trailing "..." or "…" (where it was cut)."""
    return _TRAILING_CUT.sub("", text.strip())


class PrefixIndex:
    """Records by the opening literal of their pattern. Built from the records with the
    rest of the view and kept as bytes (``dumps``/``loads``), so a call that needs it reads
    one small file instead of every pattern."""

    FORMAT = 1

    def __init__(self, items: list[tuple[str, str, str | None]]) -> None:
        self.items = items  # (opening, record id, error class)
        self.by_key: dict[str, list[tuple[str, str, str | None]]] = {}
        for item in items:
            self.by_key.setdefault(item[0][:KEY_CHARS], []).append(item)

    @classmethod
    def from_records(cls, records) -> PrefixIndex:
        items = []
        for r in records:
            pattern = r.get("messagePattern")
            opening = opening_literal(pattern) if isinstance(pattern, str) else ""
            if len(opening) >= KEY_CHARS:
                cls_ = r.get("errorClass") if isinstance(r.get("errorClass"), str) else None
                items.append((opening, r["id"], cls_))
        return cls(items)

    def dumps(self) -> bytes:
        return json.dumps({"format": self.FORMAT, "items": self.items}, ensure_ascii=False).encode()

    @classmethod
    def loads(cls, data: bytes, path: str = "prefix index") -> PrefixIndex:
        try:
            body = json.loads(data)
            if body.get("format") != cls.FORMAT:
                raise ValueError(f"not format {cls.FORMAT}")
            items = [(str(o), str(i), c if isinstance(c, str) else None) for o, i, c in body["items"]]
        except (ValueError, TypeError, KeyError, AttributeError) as e:
            raise ValueError(f"{path}: damaged prefix index: {e}") from e
        return cls(items)

    def find(self, text: str, error_class: str | None = None) -> list[str]:
        """Ids of the records whose message ``text`` truly begins, the longest opening first."""
        text = cut_end(text)
        found = [(opening, rid) for opening, rid, record_class in self.by_key.get(text[:KEY_CHARS], ())
                 if is_beginning(text, opening, error_class, record_class)]
        return [rid for _opening, rid in sorted(found, key=lambda f: -len(f[0]))]
