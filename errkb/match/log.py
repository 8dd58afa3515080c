"""Matching a whole log: every message with its matches, streamed in bounded batches.

The one loop behind ``Matcher.match_log`` and ``errkb explain`` on a log. Batches are
bounded in count *and* in characters (4096 lines of 1 MiB would be 4 GiB at once).

Lines are grouped only where a traceback or a run of pytest's failure margin starts:
until a line holds a traceback header or begins with pytest's mark, each line is its own
message, so a batch of plain lines goes straight to ``Matcher.match_lines`` (about 15x
faster than normalising each line first). From there on, ``normalize.iter_messages``
reads the stream until the block is over and hands back the first plain line after it.
tests/test_explain_log.py checks that both give the same messages and matches as
``iter_messages`` alone.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator

from errkb.text.normalize import TRACEBACK_HEADER, LogMessage, iter_messages, strip_ansi, to_text
from errkb.text.printed import pytest_marked

# Messages and characters per batch handed to the matcher at once.
LOG_BATCH_MESSAGES = 4096
LOG_BATCH_CHARS = 4 << 20


def match_log(matcher, lines: Iterable[str | bytes], max_messages: int = LOG_BATCH_MESSAGES,
              max_chars: int = LOG_BATCH_CHARS) -> Iterator[tuple[LogMessage, list]]:
    """(message, matches) for every message of a log, as ``normalize.iter_messages``
    groups them (one per line, one per traceback block or pytest margin run), at most ``max_messages``
    messages or about ``max_chars`` characters matched at once.

    A plain line's message is the line as read (``text`` and ``raw``) without its
    normalised forms (``candidates`` is empty; ``normalize.line_messages(raw)`` gives
    them): computing them for every line is what the fast path saves."""
    source = iter(lines)
    number = 0
    while True:
        batch: list[str] = []
        size = 0
        header: str | None = None
        for raw in source:
            line = to_text(raw).rstrip("\r\n")
            if TRACEBACK_HEADER in line or pytest_marked(line) \
                    or ("\x1b" in line and (TRACEBACK_HEADER in (clean := strip_ansi(line)) or pytest_marked(clean))):
                header = line
                break
            batch.append(line)
            size += len(line)
            if len(batch) >= max_messages or size >= max_chars:
                break
        if batch:
            for k, (line, matches) in enumerate(zip(batch, matcher.match_lines(batch)), number + 1):
                yield LogMessage(k, k, line, None, "line", line, []), matches
            number += len(batch)
        if header is not None:
            # iter_messages yields a plain line only once no block is open, having read
            # nothing past it: from there the fast path can take over again.
            pending: list = []
            pending_size = 0
            for message in iter_messages(itertools.chain([header], source), start=number + 1):
                pending.append(message)
                pending_size += len(message.raw) + len(message.text)
                number = message.last_line
                if message.kind == "line" or len(pending) >= max_messages or pending_size >= max_chars:
                    yield from match_messages(matcher, pending)
                    pending, pending_size = [], 0
                    if message.kind == "line":
                        break
            if pending:
                yield from match_messages(matcher, pending)
        elif not batch:
            return


def match_messages(matcher, messages: list[LogMessage]) -> Iterator[tuple[LogMessage, list]]:
    """(message, matches) for messages of ``iter_messages``: the plain lines in one
    ``match_lines`` batch, each traceback block on its own."""
    singles = [m for m in messages if m.kind == "line"]
    found = dict(zip(map(id, singles), matcher.match_lines([m.raw for m in singles]))) if singles else {}
    for message in messages:
        matches = found.get(id(message))
        yield message, (matches if matches is not None else matcher.match_message(message))
