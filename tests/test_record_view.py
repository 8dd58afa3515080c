"""RecordView: the typed view consumers read records through."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from errkb.records import RecordView

DATA = Path(__file__).resolve().parents[1] / "data"
RECORDS = [json.loads(p.read_text())["record"] for p in sorted(DATA.glob("*/*/*.json"))]


@pytest.mark.parametrize("record", RECORDS, ids=[r["id"] for r in RECORDS])
def test_every_field_reads_as_ingested(record):
    v = RecordView.of(record)
    assert (v.id, v.repo, v.slug, v.error_message, v.message_pattern, v.error_class) == (
        record["id"], record["repo"], record["slug"], record["errorMessage"], record["messagePattern"], record["errorClass"])
    assert (v.line_number, v.source_code_start, v.source_code_end) == (
        record["lineNumber"], record["sourceCodeStart"], record["sourceCodeEnd"])
    assert v.solutions == tuple(record["solutions"]) and v.tags == tuple(record["tags"])
    assert v.example_fix == record["exampleFix"] and v.validation_code == record["validationCode"]
    assert v.raw is record
    assert v.is_draft is ("draft" in record["tags"])


def test_a_field_of_the_wrong_type_reads_as_empty_never_as_another_type():
    v = RecordView.of({"id": "x", "errorMessage": 5, "tags": "draft", "solutions": ["ok", 3], "lineNumber": True,
                       "exampleFix": ["rm -rf /"]})
    assert (v.error_message, v.tags, v.solutions, v.line_number, v.example_fix) == ("", (), ("ok",), None, None)
    assert not v.is_draft and v.first_solution == "ok"


def test_the_view_is_read_only():
    v = RecordView.of(RECORDS[0])
    with pytest.raises(AttributeError):
        v.slug = "changed"
