"""Records: every input form read one way, the JSON Schema, lint rules, a typed view.

The names below are imported on first use, so importing the package (or one light
module in it) does not load the heavy ones: explain's cold start depends on it.
"""

import importlib

_EXPORTS = {
    "InputError": "errkb.records.read",
    "Origin": "errkb.records.read",
    "SourcedRecord": "errkb.records.read",
    "content_hash": "errkb.records.read",
    "read_records": "errkb.records.read",
    "RecordView": "errkb.records.view",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
