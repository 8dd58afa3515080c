"""The JSON Schema (draft 2020-12) of a v2 record, and validation against it.

The schema file in the package is the single source of what a v2 record is.
Validation uses jsonschema-rs when it is installed (about 100x faster, which is what
lets 50k records ingest in seconds) and the reference ``jsonschema`` otherwise; both
read the same file and ``tests/test_schema.py`` checks they agree.
"""

from __future__ import annotations

import functools
import json
import re

from errkb.resources import schema_path


@functools.cache
def schema() -> dict:
    with open(schema_path(), encoding="utf-8") as f:
        return json.load(f)


def schema_text() -> str:
    return schema_path().read_text(encoding="utf-8")


def _pointer(path) -> str:
    parts = [str(p) for p in path]
    return "/" + "/".join(parts) if parts else "(record)"


class _RustValidator:
    def __init__(self, doc: dict):
        import jsonschema_rs

        self._v = jsonschema_rs.validator_for(doc, validate_formats=True)

    def errors(self, record) -> list[str]:
        if self._v.is_valid(record):
            return []
        return sorted(f"{_pointer(e.instance_path)}: {e.message}" for e in self._v.iter_errors(record))


class _PythonValidator:
    def __init__(self, doc: dict):
        import jsonschema

        cls = jsonschema.Draft202012Validator
        self._v = cls(doc, format_checker=cls.FORMAT_CHECKER)

    def errors(self, record) -> list[str]:
        return sorted(f"{_pointer(e.absolute_path)}: {e.message}" for e in self._v.iter_errors(record))


@functools.cache
def validator(engine: str = "auto"):
    """A validator with ``errors(record) -> list[str]`` (empty when valid)."""
    if engine in ("auto", "rust"):
        try:
            return _RustValidator(schema())
        except ImportError:
            if engine == "rust":
                raise
    return _PythonValidator(schema())


_REQUIRED = re.compile(r'^\(record\): "([^"]+)" is a required property$')


def validate(record) -> list[str]:
    """Every schema violation of ``record`` as ``/json/pointer: reason``; [] when valid.

    Missing keys are reported in one line rather than one line each.
    """
    problems, missing = [], []
    for p in validator().errors(record):
        m = _REQUIRED.match(p)
        if m:
            missing.append(m.group(1))
        else:
            problems.append(p)
    if missing:
        problems.insert(0, f"(record): missing required keys: {', '.join(sorted(missing))}")
    return problems
