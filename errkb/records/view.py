"""A typed, read-only view of a schema-v2 record for the code that reads records.

The raw dict stays the truth (it is what was ingested, what ``errkb show --json`` prints
and what the store keeps); consumers read it through :class:`RecordView`, so a field's
name and type are checked by the type checker and the editor instead of by a
``record.get("camelCase")`` that silently answers None on a typo.
"""

from __future__ import annotations

from collections.abc import Mapping

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (a cold explain reads records)
if TYPE_CHECKING:
    from typing import Any

DRAFT_TAG = "draft"

# Each field and its empty value, in order. A hand-written class, not a dataclass: importing
# ``dataclasses`` (with inspect, ast, dis) cost a cold ``errkb explain`` about 6 ms of its ~80,
# and every CLI command imports this module (errkb.plain says the same of the explain path).
_FIELDS: tuple[tuple[str, Any], ...] = (
    ("id", ""), ("repo", ""), ("slug", ""), ("error_message", ""), ("message_pattern", ""), ("error_class", ""),
    ("error_type", ""), ("severity", ""), ("file_path", ""), ("line_number", None), ("source_code", ""),
    ("source_code_start", None), ("source_code_end", None), ("github_url", ""), ("analyzed_sha", ""),
    ("documentation", ""), ("trigger_scenarios", ""), ("common_situations", ""), ("handling_strategy", ""),
    ("solutions", ()), ("prevention_tips", ()), ("tags", ()), ("example_fix", None), ("validation_code", None),
    ("error_code", None), ("http_status", None), ("analyzed_at", None),
    ("raw", None),  # the record as ingested: not compared, hashed or shown
)
_COMPARED = tuple(name for name, _ in _FIELDS if name != "raw")


class RecordView:
    """Read-only: the fields of ``_FIELDS`` (strings "" when absent, ints and optional
    strings None, lists as tuples), compared, hashed and shown without ``raw``."""

    __slots__ = tuple(name for name, _ in _FIELDS)
    if TYPE_CHECKING:
        id: str
        repo: str
        slug: str
        error_message: str
        message_pattern: str
        error_class: str
        error_type: str
        severity: str
        file_path: str
        line_number: int | None
        source_code: str
        source_code_start: int | None
        source_code_end: int | None
        github_url: str
        analyzed_sha: str
        documentation: str
        trigger_scenarios: str
        common_situations: str
        handling_strategy: str
        solutions: tuple[str, ...]
        prevention_tips: tuple[str, ...]
        tags: tuple[str, ...]
        example_fix: str | None
        validation_code: str | None
        error_code: str | None
        http_status: int | None
        analyzed_at: str | None
        raw: Mapping[str, Any] | None

    def __init__(self, **values: Any) -> None:
        for name, empty in _FIELDS:
            object.__setattr__(self, name, values.pop(name, empty))
        if values:
            raise TypeError(f"RecordView has no field {sorted(values)[0]!r}")

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"RecordView is read-only: cannot set {name!r}")

    __delattr__ = __setattr__

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return all(getattr(self, n) == getattr(other, n) for n in _COMPARED)

    def __hash__(self) -> int:
        return hash(tuple(getattr(self, n) for n in _COMPARED))

    def __repr__(self) -> str:
        return "RecordView(" + ", ".join(f"{n}={getattr(self, n)!r}" for n in _COMPARED) + ")"

    @classmethod
    def of(cls, record: Mapping[str, Any]) -> RecordView:
        """The view of one record. Types are checked here, once: a field that is missing or
        of the wrong type (a record stored by a laxer errkb, a hostile one) reads as empty
        ("" / None / ()), never as a value of another type."""
        values: dict[str, Any] = {}
        for name, key in _CAMEL.items():
            value = record.get(key)
            if name in _LISTS:
                values[name] = tuple(v for v in value if isinstance(v, str)) if isinstance(value, list) else ()
            elif name in _INTS:
                values[name] = value if isinstance(value, int) and not isinstance(value, bool) else None
            elif name in _OPTIONAL:
                values[name] = value if isinstance(value, str) else None
            elif isinstance(value, str):
                values[name] = value
        return cls(raw=record, **values)

    @property
    def owner(self) -> str:
        return self.repo.split("/", 1)[0]

    @property
    def name(self) -> str:
        return self.repo.split("/", 1)[-1]

    @property
    def is_draft(self) -> bool:
        return DRAFT_TAG in self.tags

    @property
    def first_solution(self) -> str | None:
        return self.solutions[0] if self.solutions else None


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.capitalize() for part in rest)


_CAMEL = {name: _camel(name) for name in _COMPARED}
_LISTS = {"solutions", "prevention_tips", "tags"}
_INTS = {"line_number", "source_code_start", "source_code_end", "http_status"}
_OPTIONAL = {"example_fix", "validation_code", "error_code", "analyzed_at"}
