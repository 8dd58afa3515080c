"""Explaining a text or a whole log: the known error, its fix, and near matches.

The names below are imported on first use, so importing the package (or one light
module in it) does not load the heavy ones: explain's cold start depends on it.
"""

import importlib

_EXPORTS = {
    "EmptyInput": "errkb.explain.explainer",
    "ExplainError": "errkb.explain.explainer",
    "Explanation": "errkb.explain.explainer",
    "explain_source": "errkb.explain.explainer",
    "render_text": "errkb.explain.render",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
