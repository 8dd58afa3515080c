"""A typed, read-only view of a schema-v2 record for the code that reads records.

The raw dict stays the truth (it is what was ingested, what ``errkb show --json`` prints
and what the store keeps); consumers read it through :class:`RecordView`, so a field's
name and type are checked by the type checker and the editor instead of by a
``record.get("camelCase")`` that silently answers None on a typo.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (a cold explain reads records)
if TYPE_CHECKING:
    from typing import Any

DRAFT_TAG = "draft"


@dataclass(frozen=True, slots=True)
class RecordView:
    id: str = ""
    repo: str = ""
    slug: str = ""
    error_message: str = ""
    message_pattern: str = ""
    error_class: str = ""
    error_type: str = ""
    severity: str = ""
    file_path: str = ""
    line_number: int | None = None
    source_code: str = ""
    source_code_start: int | None = None
    source_code_end: int | None = None
    github_url: str = ""
    analyzed_sha: str = ""
    documentation: str = ""
    trigger_scenarios: str = ""
    common_situations: str = ""
    handling_strategy: str = ""
    solutions: tuple[str, ...] = ()
    prevention_tips: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    example_fix: str | None = None
    validation_code: str | None = None
    error_code: str | None = None
    http_status: int | None = None
    analyzed_at: str | None = None
    raw: Mapping[str, Any] | None = field(default=None, repr=False, compare=False)  # the record as ingested

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


_CAMEL = {f.name: _camel(f.name) for f in fields(RecordView) if f.name != "raw"}
_LISTS = {"solutions", "prevention_tips", "tags"}
_INTS = {"line_number", "source_code_start", "source_code_end", "http_status"}
_OPTIONAL = {"example_fix", "validation_code", "error_code", "analyzed_at"}
