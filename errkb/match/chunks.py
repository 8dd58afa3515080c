"""Patterns made of literal chunks and non-empty wildcards, the only kind the miner
builds: parsing one back into its chunks, and matching it in linear time by leftmost
placement of each chunk (which is optimal for such patterns).

Shared by errkb.mine.templates (Template.matches) and errkb.match.sites (the known-site
tier); it imports only re, so the site tier's cold start does not pay for the miner.
"""

from __future__ import annotations

import re
from functools import lru_cache

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


# A text cut short is read for at most this many characters past where the message begins:
# a title or a paste's last line, never a log's megabyte line (each wildcard's cut is found
# by trying the text's last few characters against the next literal).
MAX_CUT_TEXT = 4000
# A wildcard's value holding a space, where the text ends in the literal after it: that
# part must hold this many letters/digits ("... ['A', 'B'] are not supp"), so a text that
# merely ends in "." or a space is not read as cut inside the pattern.
MIN_CUT_PART_ALNUM = 3


def cut_chunks(chunks: list[str | None], text: str, start: int = 0,
               spaced_value_after: int | None = None) -> list[str | None] | None:
    """The chunks ``text`` gives of a message the pattern matches when the text stops inside
    it: the message begins at ``start`` with the pattern's first literal, each chunk placed
    leftmost, and the text ends inside a literal (its part is the last chunk returned) or
    inside a wildcard's value (the last chunk is then None): a value without spaces (a
    number, a name), or, once ``spaced_value_after`` literal letters/digits are given, any
    value (an inner error's message: the literal text before it already says which message
    it is). None when the text holds the whole message (a match, not a cut) or does not
    begin it. ``text`` and ``chunks`` are folded (fold_space, folded_chunks)."""
    if not chunks or chunks[0] is None or len(text) - start > MAX_CUT_TEXT:
        return None
    out: list[str | None] = []
    pos, gap = start, 0
    for chunk in chunks:
        if chunk is None:
            gap += 1
            out.append(None)
            continue
        if not gap:  # the first literal: at ``start`` itself
            if text.startswith(chunk, pos):
                out.append(chunk)
                pos += len(chunk)
                continue
            rest = text[pos:]
            return out + [rest] if rest and chunk.startswith(rest) else None
        at = text.find(chunk, pos + gap)
        if at >= 0:
            out.append(chunk)
            pos, gap = at + len(chunk), 0
            continue
        # the text ends inside the wildcard's value or inside this literal
        cut = _cut_into(text, chunk, pos + gap)
        if cut is not None:
            value, part = text[pos:cut], text[cut:]
            if " " in value and sum(c.isalnum() for c in part) < MIN_CUT_PART_ALNUM:
                return None
            return out + [part]
        value = text[pos:]
        if not value.strip():
            return out  # the text stops right before the value ("... got ")
        spaced_ok = spaced_value_after is not None and \
            sum(ch.isalnum() for c in out if c for ch in c) >= spaced_value_after
        return out if len(value) >= gap and (spaced_ok or " " not in value) else None
    if gap and not text[pos:].strip():
        return out  # the pattern ends in a value the text stops right before ("... num_tokens=")
    return None  # every literal placed: the text holds the whole message


def _cut_into(text: str, chunk: str, lo: int) -> int | None:
    """The leftmost position from ``lo`` on where the rest of ``text`` is a true beginning of
    ``chunk`` (None if none): what the text gives of the literal it stops in."""
    j = max(lo, len(text) - len(chunk) + 1)
    while True:
        j = text.find(chunk[0], j)
        if j < 0:
            return None
        if chunk.startswith(text[j:]):
            return j
        j += 1


# What continues a message past a pattern's last literal on its line: a word character right
# after a word character or a dot (the text's word or dotted name is longer: "num_embedding" in
# "num_embeddings", "torch." in "torch.cuda", "0." in "0.5"), or after optional sentence
# punctuation and one space, a word, a negative number, an opening parenthesis or quote ("...
# than 0 or equal to -1", "... num_heads (got 3)", "... num_embeddings. Got 3", "...: -2").
# Not a continuation: the line's end; a line break, a tab or other control whitespace (a
# multi-line cell's next line, a TSV column; a run of plain spaces is not: PyTorch puts two
# between sentences); a quote,
# bracket or backslash closing the text the message sits in (repr, JSON, an HTTP error body);
# and what a wrapper or a log format appends to any message: PyTorch's "(Triggered internally
# at ...)" and "(function ...)" after a C++ warning, fields in parentheses (pydantic's
# "(type=value_error)", vLLM's VLLMValidationError "(parameter=top_p, value=0)"; pydantic v2's
# "[type=...]" is a bracket), a "(file.py:12)" location, vLLM's worker wrapper's ", Traceback
# (most recent call last):", and after a bare space, logfmt fields (" request_id=7 status=500";
# after punctuation, "; pipeline_parallel_size=1 is required", "key=value" is the message's own).
# ASCII classes, as the site's copy (templates/site/static/site.js, END_LOOKAHEAD) has them.
_TRAILER = (r"\((?:Triggered internally at|function |[A-Za-z0-9_]+=|[A-Za-z0-9_./-]+\.(?:py|pyx|c|cc|cpp|cu|cuh|h|hpp):[0-9]+\))"
            r"|Traceback \(most recent call last\)")
_NEXT_WORD = r"""(?:[A-Za-z0-9_('"`]|-[0-9])"""
_LOGFMT = r"[A-Za-z0-9_.]+="  # a field, after a bare space only (each run stops at the next space or dot)
_GOES_ON = rf"[.,;:!?] (?!{_TRAILER}){_NEXT_WORD}| (?!{_TRAILER}|{_LOGFMT}){_NEXT_WORD}"
END_LOOKAHEAD = f"(?!{_GOES_ON})"
# after a literal ending in a word character or a dot, a word character also goes on
_WORD_END_LOOKAHEAD = END_LOOKAHEAD[:-1] + "|[A-Za-z0-9_])"
_GOES_ON_AT = re.compile(_GOES_ON)
_WORD_CHAR = re.compile(r"[A-Za-z0-9_]")
# Placements tried one by one (a find and a match each, no compile) before the literal's own
# regular expression (compiled once per literal, then one linear search) takes over: nearly every
# message ends at its first or second placement; a hostile line's thousands go to the search.
_PLACEMENTS_BY_HAND = 8


def _word_end(literal: str) -> bool:
    return bool(literal) and (literal[-1] == "." or literal[-1].isascii() and (literal[-1].isalnum() or literal[-1] == "_"))


@lru_cache(maxsize=1024)
def _end_of(literal: str) -> re.Pattern:
    """The pattern's last literal where the message ends after it (on :func:`fold_marked` text:
    each space of the literal may be a line break there)."""
    body = "".join("[ \n]" if c == " " else re.escape(c) for c in literal)
    return re.compile(body + (_WORD_END_LOOKAHEAD if _word_end(literal) else END_LOOKAHEAD))


def message_span(chunks: list[str | None], text: str, marked: str | None = None) -> tuple[int, int] | None:
    """:func:`chunks_span` of a whole message: a pattern ending in a literal must end where the
    message ends (above): the first placement of its last literal, from the leftmost one on,
    after which the message does not go on, each earlier literal placed leftmost. ``text`` is
    :func:`fold_space` of a line, ``marked`` its :func:`fold_marked` (where a line break or tab
    ends the message). A message is what its site raises, whole: "group_size must be greater
    than 0" is not "group_size must be greater than 0 or equal to -1", which another library
    raises. A pattern ending in a wildcard ends wherever the text does. The first placements are
    judged one by one; past _PLACEMENTS_BY_HAND, one search of the literal and a fixed lookahead
    (linear in the text) finds the rest."""
    span = chunks_span(chunks, text)
    if span is None or not chunks or chunks[-1] is None:
        return span
    last = chunks[-1]
    marked = text if marked is None else marked
    word_end = _word_end(last)
    one_literal = sum(c is not None for c in chunks) == 1  # then the span starts where it is placed
    at = span[1] - len(last)
    for _ in range(_PLACEMENTS_BY_HAND):  # the text's own occurrences: the same in ``marked``
        end = at + len(last)
        if not ((word_end and _WORD_CHAR.match(marked, end)) or _GOES_ON_AT.match(marked, end)):
            return (at if one_literal else span[0], end)
        at = text.find(last, at + 1)
        if at < 0:
            return None
    m = _end_of(last).search(marked, at)
    if m is None:
        return None
    return (m.start() if one_literal else span[0], m.end())


# ASCII whitespace only: the browser's copy (templates/site/static/site.js) folds the same set.
# Only runs that are not already one space are replaced: most lines have none, and re.sub
# then returns the line itself (replacing every single space cost the batch scan 20%).
_SPACE = re.compile(r" [ \t\n\r\f\v]+|[\t\n\r\f\v][ \t\n\r\f\v]*")


def _mark(m: re.Match) -> str:
    return " " if m.group().strip(" ") == "" else "\n"


def fold_marked(text: str, folded: str) -> str:
    """:func:`fold_space` of ``text`` (given: ``folded``) with each folded run that held a line
    break or a tab as a line break instead of a space: the same positions, and where a message
    ends (errkb.match.chunks.message_span)."""
    if folded is text:
        return text
    return _SPACE.sub(_mark, text)


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
