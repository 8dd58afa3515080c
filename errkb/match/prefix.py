"""A paste cut short: text that is a true beginning of a record's message.

Users paste the first line they see, and titles cut messages at 80 characters:
``torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB`` is the
start of the record whose pattern goes on ``\\. GPU (.+?) has a total capacity of ...``;
no pattern matches it, and near matching, which scores the share of a record's words
a text holds, ranks a long record's first clause low. This module answers it exactly:
the text is served as a record when the record's pattern, read from its start, accepts
the whole text and wants more (a partial match), and the text's error class, if it
names one, is the record's.

Partial matching uses the ``regex`` module (RE2 has none) with a hard time bound, on
the few records whose pattern opens with the text's first characters; a pattern the
matcher runs on its bounded path (backreferences, lookaround) or flags as exponential
is never tried.
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
# The time bound of one partial match (regex's own timeout, in seconds).
PARTIAL_TIMEOUT_S = 0.05
# Pattern syntax that ends a literal opening.
_META = set(".^$*+?{}[]()|\\")
_ESCAPED_LITERAL = re.compile(r"\\([^A-Za-z0-9])")
_TRAILING_CUT = re.compile(r"(?:\s*(?:\.\.\.|…))+\s*$")


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


class PrefixIndex:
    """Records by the opening literal of their pattern (built from the matcher's entries)."""

    def __init__(self, entries) -> None:
        self.entries = entries
        self.by_key: dict[str, list[tuple[str, int]]] = {}
        for i, entry in enumerate(entries):
            if entry.bounded or entry.exponential or not isinstance(entry.pattern, str):
                continue
            opening = opening_literal(entry.pattern)
            if len(opening) >= KEY_CHARS:
                self.by_key.setdefault(opening[:KEY_CHARS], []).append((opening, i))

    def find(self, text: str, error_class: str | None = None) -> list[int]:
        """Entries whose message ``text`` truly begins (see the module's docstring)."""
        text = _TRAILING_CUT.sub("", text.strip())
        if sum(ch.isalnum() for ch in text) < MIN_PREFIX_CHARS or len(text.split()) < MIN_PREFIX_WORDS:
            return []
        wanted_class = error_class.rsplit(".", 1)[-1] if error_class else None
        found = []
        for opening, i in self.by_key.get(text[:KEY_CHARS], ()):
            if not (opening.startswith(text) or text.startswith(opening)):
                continue
            if len(text) > len(opening) and sum(ch.isalnum() for ch in opening) < MIN_OPENING_CHARS:
                continue
            entry = self.entries[i]
            if wanted_class and entry.error_class and wanted_class != entry.error_class:
                continue
            if _is_true_prefix(entry.pattern, text):
                found.append(i)
        return found


def _is_true_prefix(pattern: str, text: str) -> bool:
    """Whether ``pattern``, matched from the start, takes all of ``text`` and wants more."""
    import regex

    try:
        m = regex.compile(pattern).match(text, partial=True, timeout=PARTIAL_TIMEOUT_S)
    except (regex.error, TimeoutError, ValueError, OverflowError):
        return False
    return bool(m) and m.partial and m.end() == len(text)
