"""enrich writes strict JSON that keeps the input's members byte for byte (docs/enrich.md).

Hypothesis generates JSON object lines with what re-encoding would change: numbers
out of double range, non-ASCII text, duplicate keys, odd spacing, an existing errkb
member; each is enriched by the real streaming filter (the seed record, a matching
message) and checked with a strict parser.
"""

from __future__ import annotations

import io
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from errkb.enrich.lines import Counters, LineEnricher, stream
from errkb.match.matcher import Matcher
from tests.support import SEED_FILE, SEED_MESSAGE


def strict_loads(line: str):
    """RFC 8259: no NaN/Infinity constants; duplicate keys are kept in pairs."""
    def reject(name):
        raise ValueError(f"{name} is not JSON")
    return json.loads(line, parse_constant=reject, object_pairs_hook=list)


@pytest.fixture(scope="module")
def enricher_factory(seed_record_module):
    matcher = Matcher.from_records([seed_record_module])
    return lambda: LineEnricher(matcher, counters=Counters())


@pytest.fixture(scope="module")
def seed_record_module():
    return json.loads(SEED_FILE.read_text())["record"]


def run(enricher, data: bytes) -> list[str]:
    out = io.BytesIO()
    stream([io.BytesIO(data)], out, enricher, handle_signals=False)
    return out.getvalue().decode("utf-8").split("\n")[:-1]


members = st.lists(st.tuples(
    st.sampled_from(["level", "Host", "host", "n", "é", "level", "x"]),
    st.sampled_from(['1e999', '-1e999', '123456789012345678901234567890', '"café ☃"', '[1, "a", null]', '{"a": {"b": []}}',
                     'true', '"\\u00e9\\ud83d\\ude00"', '0.1'])), max_size=5)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(members, st.sampled_from(["", " ", "  "]), st.booleans())
def test_object_lines_keep_their_members_byte_for_byte(enricher_factory, pairs, space, already):
    parts = [f'"message":{space}{json.dumps(SEED_MESSAGE)}'] + [f'"{k}":{space}{v}' for k, v in pairs]
    if already:
        parts.append('"errkb": {"id": "old"}')
    line = "{" + ("," + space).join(parts) + space + "}"
    enricher = enricher_factory()
    [out] = run(enricher, line.encode("utf-8") + b"\n")
    decoded = strict_loads(out)
    if already:
        assert out == line and enricher.counters.already_enriched == 1
        return
    assert out.startswith(line[:-1]) and out.endswith("}")
    assert [k for k, _ in decoded].count("errkb") == 1
    assert decoded[-1][0] == "errkb"
    assert "Infinity" not in out and "\\u00e9\\ud83d" not in out.replace('"\\u00e9\\ud83d\\ude00"', "")


def test_empty_object_and_plain_lines_stay_valid_json(enricher_factory):
    lines = run(enricher_factory(), b"{}\n" + SEED_MESSAGE.encode() + b"\nplain \xc3\xa9\n")
    for out in lines:
        strict_loads(out)
    assert json.loads(lines[2]) == {"message": "plain é"} and "é" in lines[2]


def test_a_lone_cr_ending_the_input_is_kept_and_crlf_still_ends_lines(enricher_factory):
    assert [json.loads(x)["message"] for x in run(enricher_factory(), b"a\r\nb\r")] == ["a", "b\r"]
    assert [json.loads(x)["message"] for x in run(enricher_factory(), b"a\r\nb\r\n")] == ["a", "b"]
