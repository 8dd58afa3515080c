"""One search of an untrusted pattern over an untrusted text, outside the Matcher.

For callers that check a single pattern once (lint's self-match, drift): RE2 where
the pattern has an exact translation, else the ``regex`` module under a time bound,
never plain ``re`` (exponential on some patterns, and deaf to signals while it runs).
"""

from __future__ import annotations

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
