"""The archive path keeps every line of a JSON Lines archive (docs/enrich.md, "Archives").

`errkb enrich --input X.jsonl --output Y` with real DuckDB and real files: a line that
is not a JSON object is kept and counted, never dropped and never the end of the run;
integers beyond 2**53 / 2**64 and numbers beyond a double keep their digits; arrays of
mixed values stay JSON; keys differing only in case keep their own names. JSON Lines
out is the streaming filter's output byte for byte; Parquet/CSV out keeps each
member's value (typed where the type holds it exactly, else the value's JSON text).
"""

from __future__ import annotations

import gzip
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pa = pytest.importorskip("pyarrow", reason="needs pyarrow: pip install 'errkb[archive]'")
import duckdb  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

from errkb.enrich.archive import ArchiveError, enrich_archive  # noqa: E402
from errkb.enrich.lines import LineEnricher, stream  # noqa: E402
from errkb.match.matcher import Matcher  # noqa: E402
from tests.support import SEED_ID, SEED_MESSAGE, build_store, seed_records  # noqa: E402

MATCHING = f"ValueError: {SEED_MESSAGE}"


@pytest.fixture(scope="module")
def matcher():
    return Matcher.from_records(seed_records())


def write(path: Path, lines: list[bytes]) -> Path:
    path.write_bytes(b"".join(line + b"\n" for line in lines))
    return path


def streamed(matcher, data: bytes, only_matched: bool = False) -> bytes:
    """What the streaming filter (`errkb enrich < file`) writes for ``data``."""
    out = io.BytesIO()
    stream([io.BytesIO(data)], out, LineEnricher(matcher, only_matched=only_matched), handle_signals=False)
    return out.getvalue()


def parquet_rows(path: Path) -> tuple[list[dict], dict[str, str]]:
    """The rows as written (pyarrow: the names exactly as in the file) and each column's type."""
    table = pq.read_table(path)
    return table.to_pylist(), {f.name: str(f.type) for f in table.schema}


def strict(text: str):
    """RFC 8259 JSON (no NaN/Infinity); integers stay exact Python ints."""
    def reject(name):
        raise ValueError(f"{name} is not JSON")
    return json.loads(text, parse_constant=reject)


# -- 1. a line that is not a JSON object ---------------------------------------------------

MIXED = [
    b'{"ts": "2026-11-01T00:00:00Z", "message": "GET / 200", "n": 1}',
    b'{"message": ',                                   # broken JSON
    b'[1, 2]',                                         # JSON, not an object
    MATCHING.encode(),                                 # plain text that matches
    b'',                                               # a blank line
    b'caf\xe9 \xff not UTF-8',                         # invalid UTF-8
    b'{"ts": "2026-11-01T00:00:01Z", "message": ' + json.dumps(MATCHING).encode() + b', "n": 2}',
    b'  {"message": "leading spaces"}',
    b'{"message": "x", "bad": NaN}',                   # NaN is not JSON
]


def test_bad_lines_are_kept_and_counted_in_jsonl_output(matcher, tmp_path):
    src = write(tmp_path / "mixed.jsonl", MIXED)
    out = tmp_path / "out.jsonl"
    summary = enrich_archive([str(src)], out, matcher, workers=1, batch_rows=4)
    assert out.read_bytes() == streamed(matcher, src.read_bytes())
    lines = out.read_bytes().split(b"\n")[:-1]
    assert len(lines) == len(MIXED) == summary.rows == summary.written
    assert (summary.not_json, summary.invalid_utf8, summary.matched) == (7, 1, 2)
    assert lines[0] == MIXED[0]
    assert strict(lines[1].decode()) == {"message": '{"message": '}
    assert strict(lines[2].decode()) == {"message": "[1, 2]"}
    assert strict(lines[3].decode())["errkb"]["id"] == SEED_ID
    assert strict(lines[4].decode()) == {"message": ""}
    assert strict(lines[5].decode()) == {"message": "caf\ufffd \ufffd not UTF-8", "message_b64": "Y2Fm6SD/IG5vdCBVVEYtOA=="}
    assert lines[6].startswith(MIXED[6][:-1] + b', "errkb": {"id": "' + SEED_ID.encode())
    assert strict(lines[8].decode()) == {"message": '{"message": "x", "bad": NaN}'}


def test_bad_lines_are_rows_whose_message_is_the_line_in_parquet_and_csv(matcher, tmp_path):
    src = write(tmp_path / "mixed.jsonl", MIXED)
    out = tmp_path / "out.parquet"
    summary = enrich_archive([str(src)], out, matcher, workers=1, batch_rows=4)
    rows, types = parquet_rows(out)
    assert (summary.rows, summary.written, summary.not_json, summary.invalid_utf8) == (9, 9, 7, 1)
    assert list(types) == ["ts", "message", "n", "message_b64", "errkb"]  # no "bad": its line is text
    assert [r["message"] for r in rows] == [
        "GET / 200", '{"message": ', "[1, 2]", MATCHING, "", "caf\ufffd \ufffd not UTF-8", MATCHING,
        '  {"message": "leading spaces"}', '{"message": "x", "bad": NaN}',
    ]
    assert [r["n"] for r in rows] == [1, None, None, None, None, None, 2, None, None]
    assert [r["message_b64"] for r in rows] == [None] * 5 + ["Y2Fm6SD/IG5vdCBVVEYtOA=="] + [None] * 3
    assert [r["errkb"]["id"] if r["errkb"] else None for r in rows] == [None, None, None, SEED_ID] + [None] * 2 + [SEED_ID, None, None]
    csv = tmp_path / "out.csv"
    enrich_archive([str(src)], csv, matcher, workers=1)
    back = duckdb.sql(f"SELECT message FROM read_csv('{csv}', all_varchar=true)").fetchall()
    assert [m or "" for (m,) in back] == [r["message"] for r in rows]


def test_bad_lines_with_two_workers(matcher, tmp_path):
    lines = [json.dumps({"message": MATCHING if i % 7 == 0 else f"line {i}", "i": i}).encode() if i % 5 else b"not json %d" % i
             for i in range(3000)]
    src = write(tmp_path / "many.jsonl", lines)
    one, two = tmp_path / "one.jsonl", tmp_path / "two.jsonl"
    enrich_archive([str(src)], one, matcher, workers=1, batch_rows=500)
    summary = enrich_archive([str(src)], two, matcher, workers=2, batch_rows=500)
    assert one.read_bytes() == two.read_bytes() == streamed(matcher, src.read_bytes())
    assert (summary.rows, summary.not_json, summary.batches) == (3000, 600, 6)
    only = tmp_path / "only.jsonl"
    summary = enrich_archive([str(src)], only, matcher, workers=2, batch_rows=500, only_matched=True)
    assert only.read_bytes() == streamed(matcher, src.read_bytes(), only_matched=True)
    assert summary.written == summary.matched == 343
    p1, p2 = tmp_path / "one.parquet", tmp_path / "two.parquet"
    enrich_archive([str(src)], p1, matcher, workers=1, batch_rows=500)
    enrich_archive([str(src)], p2, matcher, workers=2, batch_rows=500)
    assert parquet_rows(p1) == parquet_rows(p2)
    assert len(parquet_rows(p1)[0]) == 3000


# -- 2. big integers and numbers beyond a double ----------------------------------------------

NUMBERS = {
    "small": ["1", "-5", "123456789012345"],
    "beyond_2_53": ["9007199254740993", "1", "-9007199254740993"],
    "beyond_int64": ["9223372036854775808", "-9223372036854775809", "0"],
    "beyond_uint64": ["18446744073709551617", "123456789012345678901234567890", "-1"],
    "floaty": ["1.5", "2", "-0.25"],
    "overflow": ["1e999", "-1E+400", "2.5"],
}


def number_lines() -> list[bytes]:
    return [("{" + ", ".join(f'"{k}": {v[i]}' for k, v in NUMBERS.items()) + f', "message": "row {i}"}}').encode()
            for i in range(3)]


def test_big_integers_keep_their_digits(matcher, tmp_path):
    src = write(tmp_path / "numbers.jsonl", number_lines())
    out = tmp_path / "out.jsonl"
    enrich_archive([str(src)], out, matcher, workers=1)
    assert out.read_bytes() == src.read_bytes()
    parquet = tmp_path / "out.parquet"
    enrich_archive([str(src)], parquet, matcher, workers=1)
    rows, types = parquet_rows(parquet)
    assert types["small"] == "int64" and types["floaty"] == "double"
    for name in ("beyond_2_53", "beyond_int64", "beyond_uint64", "overflow"):
        assert types[name] == "extension<arrow.json>", name
        assert [r[name] for r in rows] == NUMBERS[name]
    assert [r["small"] for r in rows] == [1, -5, 123456789012345]
    assert [r["floaty"] for r in rows] == [1.5, 2.0, -0.25]
    # DuckDB reads the kept text as JSON: exact as HUGEINT/DECIMAL, never through a double
    assert duckdb.sql(f"SELECT CAST(beyond_int64 AS HUGEINT) FROM '{parquet}'").fetchall() == [
        (9223372036854775808,), (-9223372036854775809,), (0,)]
    csv = tmp_path / "out.csv"
    enrich_archive([str(src)], csv, matcher, workers=1)
    header, first = csv.read_text().splitlines()[:2]
    assert header.split(",")[:6] == list(NUMBERS)
    assert first.split(",")[:6] == [v[0] for v in NUMBERS.values()]


# -- 3. arrays of mixed values -------------------------------------------------------------


def test_mixed_arrays_stay_json(matcher, tmp_path):
    lines = [
        b'{"message": "a", "mixed": [1, "x", {"k": [true, null]}, 12345678901234567890], "tags": ["a", "b"]}',
        b'{"message": "b", "mixed": [], "tags": []}',
        b'{"message": "c", "mixed": [[1], "y"], "tags": ["c"]}',
    ]
    src = write(tmp_path / "arrays.jsonl", lines)
    out = tmp_path / "out.jsonl"
    enrich_archive([str(src)], out, matcher, workers=1)
    assert out.read_bytes() == src.read_bytes()
    parquet = tmp_path / "out.parquet"
    enrich_archive([str(src)], parquet, matcher, workers=1)
    rows, types = parquet_rows(parquet)
    assert types["mixed"] == "extension<arrow.json>" and types["tags"] == "list<element: string>"
    assert [strict(r["mixed"]) for r in rows] == [strict(x.decode())["mixed"] for x in lines]
    assert [r["tags"] for r in rows] == [["a", "b"], [], ["c"]]


# -- 4. keys differing only in case ------------------------------------------------------------


def test_keys_differing_only_in_case_keep_their_names(matcher, tmp_path):
    lines = [
        b'{"Host": "A", "host": "a", "message": "m1", "nested": {"K": 1, "k": 2}, "": "empty key"}',
        b'{"HOST": "B", "message": ' + json.dumps(MATCHING).encode() + b'}',
    ]
    src = write(tmp_path / "case.jsonl", lines)
    out = tmp_path / "out.jsonl"
    enrich_archive([str(src)], out, matcher, workers=1)
    assert out.read_bytes().split(b"\n")[0] == lines[0]
    parquet = tmp_path / "out.parquet"
    enrich_archive([str(src)], parquet, matcher, workers=1)
    rows, types = parquet_rows(parquet)
    assert list(types) == ["Host", "host", "message", "nested", "", "HOST", "errkb"]
    assert [(r["Host"], r["host"], r["HOST"]) for r in rows] == [("A", "a", None), (None, None, "B")]
    assert strict(rows[0]["nested"]) == {"K": 1, "k": 2} and rows[0][""] == '"empty key"'
    assert rows[1]["errkb"]["id"] == SEED_ID
    csv = tmp_path / "out.csv"
    enrich_archive([str(src)], csv, matcher, workers=1)
    assert csv.read_text().splitlines()[0] == "Host,host,message,nested,,HOST,errkb"
    assert csv.read_text().splitlines()[1].startswith('A,a,m1,"{""K"":1,""k"":2}","""empty key""",,')
    # an errkb member of the input is replaced in columns (one errkb column), kept as is in JSON Lines
    again = write(tmp_path / "again.jsonl", [b'{"message": ' + json.dumps(MATCHING).encode() + b', "errkb": {"id": "old"}}'])
    s = enrich_archive([str(again)], tmp_path / "again.jsonl.out.jsonl", matcher, workers=1)
    assert (tmp_path / "again.jsonl.out.jsonl").read_bytes() == again.read_bytes() and s.already_enriched == 1
    enrich_archive([str(again)], tmp_path / "again.parquet", matcher, workers=1)
    rows, types = parquet_rows(tmp_path / "again.parquet")
    assert list(types) == ["message", "errkb"] and rows[0]["errkb"]["id"] == SEED_ID


# -- generated archives ------------------------------------------------------------------------

keys = st.sampled_from(["Host", "host", "HOST", "level", "é", "naïve key", "a.b", "", "x"])
scalars = st.one_of(
    st.none(), st.booleans(),
    st.integers(min_value=-(10**30), max_value=10**30),
    st.sampled_from([2**53 + 1, 2**63, -(2**63) - 1, 2**64 + 1, 0, -1]),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(st.characters(blacklist_categories=("Cs",)), max_size=12),
)
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(keys, inner, max_size=4),
                      max_leaves=8)
objects = st.dictionaries(keys, values, max_size=6)
junk = st.sampled_from([b"plain text line", b"{broken", b"[1, 2]", b'"a string"', b"caf\xe9", b"", b'{"a": 1e999}',
                        b'{"a": 1, "a": 2}', b'{"message": "\\ud800 lone"}'])


def as_line(obj: dict, message: str | None, spaced: bool) -> bytes:
    if message is not None:
        obj = {**obj, "message": message}
    text = json.dumps(obj, ensure_ascii=not spaced, separators=(", ", ": ") if spaced else (",", ":"))
    return text.encode("utf-8")


def same(orig, back, json_text: bool = False) -> bool:
    """``back`` (read from Parquet) holds ``orig``'s value: a JSON column's text parses to it
    exactly; a typed one equals it (a struct has None for the members a row lacks)."""
    if json_text:  # (a JSON null: a null there, or the text null)
        return back is None or strict(back) is None if orig is None else back is not None and same(orig, strict(back))
    if orig is None:
        return back is None
    if isinstance(orig, bool) or isinstance(back, bool):
        return orig is back
    if isinstance(orig, dict):
        return isinstance(back, dict) and all(same(v, back.get(k)) for k, v in orig.items()) and all(
            back[k] is None for k in back if k not in orig)
    if isinstance(orig, list):
        return isinstance(back, list) and len(orig) == len(back) and all(map(same, orig, back))
    if isinstance(orig, int) and isinstance(back, int | float):
        return orig == back and (isinstance(back, int) or abs(orig) < 2**53)
    return orig == back


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=st.lists(st.tuples(objects, st.sampled_from([None, MATCHING, "GET / 200"]), st.booleans()), min_size=1, max_size=12),
       bad=st.lists(st.tuples(st.integers(min_value=0, max_value=20), junk), max_size=3))
def test_generated_archives_round_trip(matcher, tmp_path_factory, rows, bad):
    tmp = tmp_path_factory.mktemp("gen")
    lines = [as_line(obj, message if i else message or "first", spaced) for i, (obj, message, spaced) in enumerate(rows)]
    for at, line in bad:
        lines.insert(min(at, len(lines)), line)
    src = write(tmp / "gen.jsonl", lines)
    out = tmp / "out.jsonl"
    summary = enrich_archive([str(src)], out, matcher, workers=1, batch_rows=5)
    data = out.read_bytes()
    assert data == streamed(matcher, src.read_bytes())
    outs = data.split(b"\n")[:-1]
    assert len(outs) == len(lines) == summary.rows
    for line, got in zip(lines, outs):
        value = strict(got.decode("utf-8"))
        try:
            obj = strict(line.decode("utf-8")) if line.startswith(b"{") else None
        except (UnicodeDecodeError, ValueError):
            obj = None
        if isinstance(obj, dict):  # the input's bytes, errkb's member spliced in before the brace
            assert got == line or (got.startswith(line[:-1]) and "errkb" in value and "errkb" not in obj)
        else:
            assert value["message"] == line.decode("utf-8", "replace")

    parquet = tmp / "out.parquet"
    summary = enrich_archive([str(src)], parquet, matcher, workers=1, batch_rows=5)
    back, types = parquet_rows(parquet)
    assert len(back) == len(lines) == summary.rows
    for line, row in zip(lines, back):
        try:
            obj = strict(line.decode("utf-8")) if line.startswith(b"{") else None
            json.dumps(obj, ensure_ascii=False).encode("utf-8")
        except (UnicodeError, ValueError):
            obj = None
        if not isinstance(obj, dict) or line.startswith(b'{"a": 1, "a"') or b"\\ud800" in line:
            continue  # a text row (or a member repeated: DuckDB keeps the first), checked above
        for key, value in obj.items():
            if key != "errkb":
                assert same(value, row[key], types[key] == "extension<arrow.json>"), (key, value, row[key], types[key])


# -- unreadable input: one line naming the file ---------------------------------------------


def test_unreadable_inputs_are_one_line_errors(matcher, tmp_path):
    out = tmp_path / "o.parquet"
    with pytest.raises(ArchiveError) as e:
        enrich_archive([str(tmp_path / "nope.jsonl")], out, matcher)
    assert str(e.value) == f"{tmp_path / 'nope.jsonl'}: no such file"
    (tmp_path / "logs.txt").write_text("x\n")
    with pytest.raises(ArchiveError) as e:
        enrich_archive([str(tmp_path / "logs.txt")], out, matcher)
    assert str(e.value) == f"{tmp_path / 'logs.txt'}: unknown archive format (use .jsonl/.ndjson/.json, .parquet or .csv/.tsv, optionally .gz)"
    broken = tmp_path / "broken.jsonl.gz"
    whole = gzip.compress(b"".join(b'{"message": "line %d"}\n' % i for i in range(5000)))
    broken.write_bytes(whole[: len(whole) // 2])
    for target in (out, tmp_path / "o.jsonl"):
        with pytest.raises(ArchiveError) as e:
            enrich_archive([str(broken)], target, matcher, workers=1)
        assert str(e.value).startswith(f"{broken}: cannot read: ") and "\n" not in str(e.value)
        assert not target.exists() and not list(tmp_path.glob("*.tmp*"))
    good = write(tmp_path / "good.jsonl", [b'{"msg": "a"}', b"text"])
    with pytest.raises(ArchiveError) as e:
        enrich_archive([str(good)], out, matcher)
    assert str(e.value) == f"{good}: no column 'message' to read messages from (columns: msg); name one with --field"


def test_gzip_and_globs(matcher, tmp_path):
    (tmp_path / "a.jsonl.gz").write_bytes(gzip.compress(b'{"message": "a", "n": 1}\nnot json\n'))
    (tmp_path / "b.jsonl.gz").write_bytes(gzip.compress(b'{"message": ' + json.dumps(MATCHING).encode() + b', "n": 2}'))
    out = tmp_path / "out.jsonl"
    summary = enrich_archive([str(tmp_path / "*.jsonl.gz")], out, matcher, workers=1)
    got = out.read_bytes().split(b"\n")
    assert got[:2] == [b'{"message": "a", "n": 1}', b'{"message": "not json"}'] and len(got) == 4
    assert (summary.rows, summary.not_json, summary.matched) == (3, 1, 1)


def test_deep_nesting_and_cli_summary(tmp_path):
    # 100k levels: DuckDB reads the object (its deep member as JSON text); Python's parser
    # cannot, so in JSON Lines out the line is text, kept whole in message (as `errkb enrich` does)
    store_db = build_store(tmp_path / "store.duckdb")
    deep = b'{"message": "deep", "d": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    src = write(tmp_path / "deep.jsonl", [deep, b"not json", b'{"message": ' + json.dumps(MATCHING).encode() + b"}"])
    for out, text_lines in (("o.parquet", 1), ("o.jsonl", 2)):
        proc = subprocess.run([sys.executable, "-m", "errkb", "enrich", "--db", str(store_db), "--input", str(src),
                               "--output", str(tmp_path / out), "--workers", "1"],
                              capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr
        assert f"\n  {text_lines} lines were not JSON objects (kept, their text in message)\n" in proc.stderr
    assert json.loads((tmp_path / "o.jsonl").read_bytes().split(b"\n")[0]) == {"message": deep.decode()}
    rows, types = parquet_rows(tmp_path / "o.parquet")
    assert types["d"] == "extension<arrow.json>" and rows[0]["d"] == "[" * 100_000 + "]" * 100_000
    assert rows[1]["message"] == "not json" and rows[2]["errkb"]["id"] == SEED_ID


# -- 6. a null errkb member, and JSON Lines out from every input format ------------------------


def test_a_null_errkb_member_is_enriched_in_both_json_lines_paths(matcher, tmp_path):
    """`"errkb": null` counts as absent: the archive path (both of its block routes, one
    and two workers) writes the streaming filter's bytes."""
    msg = json.dumps(MATCHING)
    lines = []
    for i in range(600):
        m = msg if i % 3 == 0 else json.dumps(f"line {i}")
        lines.append([f'{{"errkb": null, "message": {m}, "i": {i}}}', f'{{"message":{m},"errkb":null}}',
                      f'{{"message": {m}, "errkb": {{"id": "old"}}}}', f'{{"message": {m}}}'][i % 4].encode())
    src = write(tmp_path / "nulls.jsonl", lines)
    mixed = write(tmp_path / "mixed.jsonl", lines + [b"not json"])  # a block that is not all objects
    for path in (src, mixed):
        want = streamed(matcher, path.read_bytes())
        enriched = [line for line in want.split(b"\n") if SEED_ID.encode() in line]
        assert len(enriched) == 150 and all(line.count(b'"errkb"') == 1 for line in enriched)  # null taken out
        assert want.count(b'"errkb": null') == want.count(b'"errkb":null') == 100  # unmatched: as read
        for workers in (1, 2):
            out = tmp_path / f"{path.stem}-{workers}.jsonl"
            summary = enrich_archive([str(path)], out, matcher, workers=workers, batch_rows=128)
            assert out.read_bytes() == want
            assert summary.already_enriched == 50  # only {"id": "old"}, matched
    rows, _ = parquet_rows(enrich_archive([str(src)], tmp_path / "n.parquet", matcher, workers=1).output)
    assert sum(r["errkb"] is not None for r in rows) == 200


def test_json_lines_out_omits_errkb_on_unmatched_rows_whatever_the_input(matcher, tmp_path):
    """Parquet or CSV in, JSON Lines out: no `"errkb":null` on an unmatched row, as the
    streaming filter and JSON Lines in write it."""
    parquet = tmp_path / "logs.parquet"
    pq.write_table(pa.table({"message": [MATCHING, "GET / 200", None], "errkb": ["old", None, "x"]}), parquet)
    out = tmp_path / "out.jsonl"
    enrich_archive([str(parquet)], out, matcher, workers=1)
    got = out.read_text().splitlines()
    assert got[1:] == ['{"message":"GET / 200"}', '{"message":null}']
    assert strict(got[0])["errkb"]["id"] == SEED_ID and list(strict(got[0])) == ["message", "errkb"]
    csv = tmp_path / "logs.csv"
    csv.write_text(f"message\n{json.dumps(MATCHING)}\nplain\n")
    enrich_archive([str(csv)], out, matcher, workers=1)
    assert [list(strict(line)) for line in out.read_text().splitlines()] == [["message", "errkb"], ["message"]]
