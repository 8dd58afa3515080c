"""One search of an untrusted pattern over an untrusted text, outside the Matcher.

For callers that check a single pattern once (lint's self-match, drift): RE2 where
the pattern has an exact translation, else the ``regex`` module under a time bound,
never plain ``re`` (exponential on some patterns, and deaf to signals while it runs).
"""

from __future__ import annotations

import time

from errkb.text.patterns import analyze, bounded_translation, compile_re

try:
    import re2 as _re2
except ImportError:
    _re2 = None
try:
    import regex as _regex
except ImportError:
    _regex = None


def search(pattern: str, text: str, timeout: float) -> bool | None:
    """Whether ``re.search(pattern, text)`` would find a match, decided in linear time
    or within ``timeout`` seconds; None when it cannot be decided that way (out of
    time, the pattern does not compile, or no bounded engine is installed)."""
    analysis = analyze(pattern)
    if analysis.unusable is not None:
        return None
    if not text:
        # On no text `re` cannot backtrack; and only `re` has re's answer there
        # (RE2's and the lookaround spelling's \B match the empty text, re's does not).
        return compile_re(pattern).search(text) is not None
    if analysis.linear_safe and _re2 is not None and (not analysis.re2_ascii_only or text.isascii()):
        options = _re2.Options()
        options.max_mem = 64 << 20
        options.log_errors = False  # a refused pattern is an answer here, not a C++ log line on stderr
        try:
            return _re2.compile(analysis.re2_pattern, options).search(text) is not None
        except _re2.error:
            pass  # e.g. a program over RE2's memory budget: the bounded path decides
    if _regex is None:
        return None
    source = bounded_translation(pattern) if analysis.linear_safe else None
    try:
        return _regex.search(source or pattern, text, flags=_regex.VERSION0, timeout=timeout) is not None
    except TimeoutError:
        return None


class TimeBudget:
    """What each pattern of the bounded path has cost beyond a fair share, in seconds.

    A time bound per search stops one slow text, not a pattern that costs just under the
    bound on every line (20 such records took ``enrich`` to 236 lines/s with no timeout
    counted). Every search is charged its time less a fair share (a normal pattern costs
    microseconds; a long text may take longer, so the share grows with its length); the
    debt never goes below zero, so cheap lines bank no credit for slow ones. A pattern
    whose debt passes ``limit_s`` is over budget: the caller disables it as if it had
    run out of time."""

    FAIR_SEARCH_S = 0.002
    FAIR_CHAR_S = 50e-9

    def __init__(self, limit_s: float) -> None:
        self.limit_s = limit_s
        self.debt: dict[int, float] = {}

    @staticmethod
    def clock() -> float:
        return time.perf_counter()

    def over(self, key: int, seconds: float, chars: int) -> bool:
        """Charge ``seconds`` spent on a text of ``chars`` characters to pattern ``key``;
        True when the pattern is now over its budget."""
        debt = self.debt.get(key, 0.0) + seconds - (self.FAIR_SEARCH_S + chars * self.FAIR_CHAR_S)
        self.debt[key] = debt = max(0.0, debt)
        return debt > self.limit_s
