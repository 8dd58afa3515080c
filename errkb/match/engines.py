"""The engines the Matcher may run on, each optional, and choosing among them.

Hyperscan (x86-64 only) and pyahocorasick are prefilters; RE2 confirms; the `regex`
module runs the bounded path. Each is imported here once, so the rest of match/ asks
this module what is installed instead of repeating the try/except imports.
"""

from __future__ import annotations

from errkb.errors import ErrkbError

try:
    import hyperscan
except ImportError:  # optional: x86-64 only
    hyperscan = None
try:
    import ahocorasick
except ImportError:
    ahocorasick = None
try:
    import re2 as re2_module
    from re2 import _re2
except ImportError:
    re2_module = None
    _re2 = None

PREFILTERS = ("hyperscan", "ahocorasick", "python")
CONFIRMS = ("re2", "re")
# RE2's unanchored search, as its low-level binding spells it.
UNANCHORED = re2_module._Anchor.UNANCHORED if re2_module is not None else None
# A pattern's RE2 program may use this much memory; above it RE2 refuses the pattern.
RE2_MAX_MEM = 64 << 20


class MatcherError(ErrkbError):
    """The index cannot be built or loaded (named engine missing, bad index file)."""


# The `regex` module runs the bounded path only (patterns that need backtracking): it is
# imported on first use, not by every process that loads an index (a cold `errkb
# explain` on a linear-safe match never needs it).
_REGEX_UNSET = object()
_regex_cache = _REGEX_UNSET


def regex_module():
    """The `regex` module, or None where it is not installed."""
    global _regex_cache
    if _regex_cache is _REGEX_UNSET:
        try:
            import regex
        except ImportError:
            regex = None
        _regex_cache = regex
    return _regex_cache


def resolve_engines(prefilter: str, confirm: str) -> tuple[str, str]:
    """The (prefilter, confirm) pair to run: "auto" picks the fastest installed one."""
    available_prefilters = {"hyperscan": hyperscan is not None, "ahocorasick": ahocorasick is not None, "python": True}
    if prefilter == "auto":
        prefilter = next(p for p in PREFILTERS if available_prefilters[p])
    elif prefilter not in available_prefilters:
        raise MatcherError(f"unknown prefilter {prefilter!r} (choose from {', '.join(PREFILTERS)})")
    elif not available_prefilters[prefilter]:
        raise MatcherError(f"prefilter {prefilter!r} is not installed")
    if confirm == "auto":
        confirm = "re2" if _re2 is not None else "re"
    elif confirm not in CONFIRMS:
        raise MatcherError(f"unknown confirm engine {confirm!r} (choose from {', '.join(CONFIRMS)})")
    elif confirm == "re2" and _re2 is None:
        raise MatcherError("confirm engine 're2' is not installed (pip install google-re2)")
    return prefilter, confirm


def compile_re2(re2_pattern: str):
    """An RE2 program (the low-level binding: searches bytes without copying them)."""
    options = re2_module.Options()
    options.never_capture = True
    options.max_mem = RE2_MAX_MEM
    options.log_errors = False  # the refusal is reported by the caller, not logged by RE2 on stderr
    compiled = _re2.RE2(re2_pattern.encode("utf-8"), options)
    if not compiled.ok():
        raise MatcherError(f"RE2 cannot run the pattern: {compiled.error().decode('utf-8', 'replace')}")
    return compiled
