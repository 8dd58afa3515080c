"""Patterns made of literal chunks and non-empty wildcards, the only kind the miner
builds: parsing one back into its chunks, and matching it in linear time by leftmost
placement of each chunk (which is optimal for such patterns).

Shared by errkb.mine.templates (Template.matches) and errkb.match.sites (the known-site
tier); it imports only re, so the site tier's cold start does not pay for the miner.
"""

from __future__ import annotations

import re

_CONTROL = {"n": "\n", "t": "\t", "r": "\r", "f": "\f", "v": "\v"}


# One token of a miner-built pattern: a wildcard, an escape, a run of plain characters,
# or (last) any other character, which such a pattern never holds unescaped.
_TOKEN = re.compile(r"(\(\.\+\?\)|\(\[\\s\\S\]\+\?\))|\\x([0-9a-fA-F]{2})|\\(.)|([^\\.^$*+?{}\[\]|()]+)|(.)", re.S)


def chunks_of(pattern: str) -> list[str | None]:
    """A miner-built pattern as literal chunks and wildcards (None); ValueError if it is not one."""
    out: list[str | None] = []
    buf: list[str] = []
    for m in _TOKEN.finditer(pattern):
        wildcard, hexa, escaped, plain, other = m.groups()
        if wildcard is not None:
            if buf:
                out.append("".join(buf))
                buf = []
            out.append(None)
        elif plain is not None:
            buf.append(plain)
        elif escaped is not None:
            buf.append(_CONTROL.get(escaped, escaped))
        elif hexa is not None:
            buf.append(chr(int(hexa, 16)))
        else:
            raise ValueError(f"not a miner-built pattern (unescaped {other!r} at {m.start()}): {pattern!r}")
    if buf:
        out.append("".join(buf))
    return out


def chunks_span(chunks: list[str | None], text: str) -> tuple[int, int] | None:
    """Where leftmost placement puts the pattern's literal text in ``text``: (the start of
    its first literal chunk, the end of its last), or None when it does not match;
    (0, 0) for a pattern of wildcards alone that matches."""
    pos = 0
    gap = 0  # characters a preceding wildcard still has to consume
    started = False
    start = 0
    for chunk in chunks:
        if chunk is None:
            gap += 1
            continue
        at = text.find(chunk, pos + gap) if started else text.find(chunk, gap)
        if at < 0:
            return None
        # A leading wildcard needs `gap` characters anywhere before the first chunk.
        if not started:
            start = at
        pos = at + len(chunk)
        gap = 0
        started = True
    if not started:
        return (0, 0) if len(text) >= gap else None
    return (start, pos) if len(text) - pos >= gap else None


def chunks_match(chunks: list[str | None], text: str) -> bool:
    return chunks_span(chunks, text) is not None


# What continues a message past a pattern's last literal on its line: a word character right
# after a word character or a dot (the text's word or dotted name is longer: "num_embedding" in
# "num_embeddings", "torch." in "torch.cuda", "0." in "0.5"), or after optional sentence
# punctuation and one space, a word, a negative number, an opening parenthesis or quote ("...
# than 0 or equal to -1", "... num_heads (got 3)", "... num_embeddings. Got 3", "...: -2").
# Not a continuation: the line's end; a line break, a tab or a wider gap (a multi-line cell's
# next line, a TSV column, a right-aligned file:line); a quote, bracket or backslash closing the
# text the message sits in (repr, JSON, an HTTP error body); and what a wrapper or a log format
# appends to any message: PyTorch's "(Triggered internally at ...)" and "(function ...)" after a
# C++ warning, fields (pydantic's "[type=value_error, ...]" and "(type=value_error)", vLLM's
# VLLMValidationError "(parameter=top_p, value=0)", a logfmt " request_id=7"), a "(file.py:12)"
# location, and vLLM's worker wrapper's ", Traceback (most recent call last):".
# ASCII classes, as the site's copy (templates/site/static/site.js, messageSpan) has them.
_GOES_ON = re.compile(r"""[.,;:!?]? (?!\((?:Triggered internally at|function |[A-Za-z0-9_]+=|[A-Za-z0-9_./-]+:[0-9]+\))"""
                      r"""|[A-Za-z0-9_.]+=|Traceback \(most recent call last\))(?:[A-Za-z0-9_('"`]|-[0-9])""")
_WORD_CHAR = re.compile(r"[A-Za-z0-9_]")
# At most this many placements of a pattern's last literal are tried on one text: the bound that
# keeps a hostile line (the literal again and again, each going on) linear for 256 candidates.
MAX_PLACEMENTS = 32


def message_goes_on(text: str, end: int, wide: frozenset[int] | WideSpaces = frozenset()) -> bool:
    """Whether the message in ``text`` goes on past ``end``, where a literal of it ends (above).
    ``wide``: the positions of ``text``'s spaces that stand for more than one space
    (:func:`wide_spaces`; ``text`` is then folded): a line break, a tab or a gap ends the message."""
    if end >= len(text):
        return False
    if wide and (end in wide or (end + 1 in wide and text[end] in ".,;:!?")):
        return False
    if _WORD_CHAR.match(text, end) and end and (text[end - 1] == "." or _WORD_CHAR.match(text, end - 1)):
        return True
    return _GOES_ON.match(text, end) is not None


def message_span(chunks: list[str | None], text: str,
                 wide: frozenset[int] | WideSpaces = frozenset()) -> tuple[int, int] | None:
    """:func:`chunks_span` of a whole message: a pattern ending in a literal must end where the
    message ends (:func:`message_goes_on` is false there; the leftmost such placement of the
    last literal, each earlier one placed leftmost, as :func:`chunks_span`, at most
    MAX_PLACEMENTS tried). A message is what its site raises, whole: "group_size must be greater
    than 0" is not the message "group_size must be greater than 0 or equal to -1", which another
    library raises. A pattern ending in a wildcard ends wherever the text does. Linear in the
    text for one pattern."""
    span = chunks_span(chunks, text)
    if span is None or not chunks or chunks[-1] is None:
        return span
    last = chunks[-1]
    at = span[1] - len(last)
    for _ in range(MAX_PLACEMENTS):
        if not message_goes_on(text, at + len(last), wide):
            return (span[0] if sum(c is not None for c in chunks) > 1 else at, at + len(last))
        at = text.find(last, at + 1)
        if at < 0:
            return None
    return None


# ASCII whitespace only: the browser's copy (templates/site/static/site.js) folds the same set.
# Only runs that are not already one space are replaced: most lines have none, and re.sub
# then returns the line itself (replacing every single space cost the batch scan 20%).
_SPACE = re.compile(r" [ \t\n\r\f\v]+|[\t\n\r\f\v][ \t\n\r\f\v]*")


def wide_spaces(text: str) -> frozenset[int]:
    """The positions in :func:`fold_space` of ``text`` of the spaces that stand for more than
    one space (a line break, a tab, a run): where a message on that line ends."""
    out = []
    removed = 0
    for m in _SPACE.finditer(text):
        out.append(m.start() - removed)
        removed += m.end() - m.start() - 1
    return frozenset(out)


class WideSpaces:
    """:func:`wide_spaces` of a text, computed on first use (most matches never ask), for
    every pattern tried on that text; empty when the text folds to itself."""

    __slots__ = ("_text", "_positions")

    def __init__(self, text: str, folded: str):
        self._text = text
        self._positions: frozenset[int] | None = frozenset() if folded is text else None

    def __contains__(self, pos: int) -> bool:
        if self._positions is None:
            self._positions = wide_spaces(self._text)
        return pos in self._positions

    def __bool__(self) -> bool:
        return self._positions is None or bool(self._positions)


def fold_space(text: str) -> str:
    """``text`` with each run of whitespace as one space. A pasted message's whitespace is
    not the program's: an issue's renderer shows a tab as spaces, a terminal wraps a long
    line, a C++ message's indented continuation is re-indented; none of that tells one
    message from another."""
    # most lines hold nothing to fold: six C-speed searches say so faster than the regex
    if "  " not in text and "\t" not in text and "\n" not in text and "\r" not in text and "\f" not in text \
            and "\v" not in text:
        return text
    return _SPACE.sub(" ", text)


_NONSPACE = re.compile(r"[^ \t\n\r\f\v]+")
_SPACES = re.compile(r"[ \t\n\r\f\v]*")


def _past(text: str, want: int) -> int:
    """The position just after the ``want``-th character of ``text`` that is not whitespace."""
    if want == 0:
        return 0
    for m in _NONSPACE.finditer(text):
        n = m.end() - m.start()
        if want <= n:
            return m.start() + want
        want -= n
    return len(text)


def unfolded_span(text: str, folded: str, start: int, end: int) -> tuple[int, int]:
    """The span of ``text`` that ``folded[start:end]`` (folded = fold_space(text)) came
    from, with the whitespace its edges hold: folding keeps every other character, so
    the same count of them lies before each edge, and a space at an edge is the whole run
    of whitespace it stands for."""
    first = _past(text, start - folded.count(" ", 0, start))
    if not folded.startswith(" ", start):
        first = _SPACES.match(text, first).end()
    last = _past(text, end - folded.count(" ", 0, end))
    if end > start and folded[end - 1] == " ":
        last = _SPACES.match(text, last).end()
    return first, last


def folded_chunks(chunks: list[str | None]) -> list[str | None]:
    """``chunks`` matched against :func:`fold_space` of a text: each literal folded, and a
    message's own edges (a C++ message's leading newline, a trailing space) dropped, as a
    paste does not keep them; a literal that was only such an edge is dropped."""
    out: list[str | None] = []
    last = len(chunks) - 1
    for n, chunk in enumerate(chunks):
        if chunk is None:
            out.append(None)
            continue
        folded = fold_space(chunk)
        if n == 0:
            folded = folded.lstrip(" ")
        if n == last:
            folded = folded.rstrip(" ")
        if folded:
            out.append(folded)
    return out
