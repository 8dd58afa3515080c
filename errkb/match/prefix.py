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
    """Records by the opening literal of their pattern (built from the matcher's entries)."""

    def __init__(self, entries) -> None:
        self.entries = entries
        self.by_key: dict[str, list[tuple[str, int]]] = {}
        for i, entry in enumerate(entries):
            if not isinstance(entry.pattern, str):
                continue
            opening = opening_literal(entry.pattern)
            if len(opening) >= KEY_CHARS:
                self.by_key.setdefault(opening[:KEY_CHARS], []).append((opening, i))

    def find(self, text: str, error_class: str | None = None) -> list[int]:
        """Entries whose message ``text`` truly begins."""
        text = cut_end(text)
        return [i for opening, i in self.by_key.get(text[:KEY_CHARS], ())
                if is_beginning(text, opening, error_class, self.entries[i].error_class)]
