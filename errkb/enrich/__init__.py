"""Enriching logs: the streaming filter and Python API (``lines``), whole archives
(``archive`` and its parts, ``query``), and Spark (``spark``); the last two need
optional extras. The ``errkb`` value all of them write is built in ``value``.

The names below are imported on first use, so importing the package (or one light
module in it) does not load the heavy ones: explain's cold start depends on it.
"""

import importlib

_EXPORTS = {
    "EnrichError": "errkb.enrich.lines",
    "LineEnricher": "errkb.enrich.lines",
    "enrich_records": "errkb.enrich.lines",
    "errkb_object": "errkb.enrich.value",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
