"""Matching text to records: the Matcher and its stages (engines, prefilter, confirm,
result, index_file), a whole log (log), near matches and keyword search. The pattern
analysis and the normalisation they run on are one layer down, in ``errkb.text``.

The names below are imported on first use, so importing the package (or one light
module in it) does not load the heavy ones: explain's cold start depends on it.
"""

import importlib

_EXPORTS = {
    "Match": "errkb.match.matcher",
    "Matcher": "errkb.match.matcher",
    "MatcherError": "errkb.match.matcher",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
