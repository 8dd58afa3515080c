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


def chunks_match(chunks: list[str | None], text: str) -> bool:
    pos = 0
    gap = 0  # characters a preceding wildcard still has to consume
    started = False
    for chunk in chunks:
        if chunk is None:
            gap += 1
            continue
        at = text.find(chunk, pos + gap) if started else text.find(chunk, gap)
        if at < 0:
            return False
        # A leading wildcard needs `gap` characters anywhere before the first chunk.
        pos = at + len(chunk)
        gap = 0
        started = True
    if not started:
        return len(text) >= gap
    return len(text) - pos >= gap
