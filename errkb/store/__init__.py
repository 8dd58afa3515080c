"""The embedded DuckDB store (the only SQL on it) and errkb's one cache module.

The names below are imported on first use, so importing the package (or one light
module in it) does not load the heavy ones: explain's cold start depends on it.
"""

import importlib

_EXPORTS = {
    "Store": "errkb.store.db",
    "StoreError": "errkb.store.db",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
