"""One record the matcher cannot build never disables the others.

Records are generated (hypothesis) from the shapes engines refuse or choke on: huge
literals (Hyperscan's length limit), lone surrogates and NULs (no UTF-8 form; the
binding cuts literals at NUL), huge counted repeats (RE2's limit), non-strings. Each
batch is built and matched in a fresh interpreter under a hard timeout.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support import REPO, SEED_FILE, SEED_ID, SEED_MESSAGE, force_stored_record

GOOD = {"id": "good", "slug": "good", "repo": "x/y", "errorClass": "E",
        "messagePattern": r"Worker (.+?) lost its heartbeat after (.+?) s"}
GOOD_TEXT = "Worker w7 lost its heartbeat after 30 s"


@st.composite
def bad_pattern(draw):
    kind = draw(st.sampled_from(["huge_literal", "surrogate", "nul", "huge_repeat", "not_string", "huge_class"]))
    n = draw(st.integers(1, 40))
    if kind == "huge_literal":
        return "Huge " + draw(st.sampled_from(["x", "é", "ab", "\\.", "中"])) * draw(st.integers(16_000, 40_000))
    if kind == "surrogate":
        return f"Broken \ud800{n} text \udfff here"
    if kind == "nul":
        return f"\x00\x00Nul{n}\x00 and more\x00"
    if kind == "huge_repeat":
        return f"Repeat (?:ab){{{draw(st.integers(1001, 65535))}}} x{n}"
    if kind == "huge_class":
        return "Class [" + "".join(chr(c) for c in range(0x4E00, 0x4E00 + draw(st.integers(100, 3000)))) + "]+ end"
    return draw(st.sampled_from([None, 42, ["a"], {"p": 1}]))


WORKER = textwrap.dedent(r"""
    import json, sys
    from errkb.match import matcher as M
    args = json.load(sys.stdin)
    m = M.Matcher.from_records(args["records"], prefilter=args["prefilter"], confirm=args["confirm"],
                               max_prefilter_chars=args["max_prefilter"] or M.MAX_PREFILTER_CHARS)
    if args["full_db"]:
        m.build_full_db()
    hits = [x.record_id for x in m.match(args["text"])]
    lines = [[x.record_id for x in found] for found in m.match_lines([args["text"], "nothing here"])]
    print(json.dumps({"hits": hits, "lines": lines, "skipped": [s["id"] for s in m.skipped]}))
""")


def build_and_match(records, text=GOOD_TEXT, prefilter="auto", confirm="auto", full_db=False, max_prefilter=None):
    payload = json.dumps({"records": records, "text": text, "prefilter": prefilter, "confirm": confirm,
                          "full_db": full_db, "max_prefilter": max_prefilter})
    try:
        done = subprocess.run([sys.executable, "-c", WORKER], input=payload, capture_output=True, text=True,
                              timeout=240, cwd=REPO, errors="surrogateescape")
    except subprocess.TimeoutExpired:
        pytest.fail("building or matching hostile records ran past 240 s")
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


@settings(max_examples=6, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(st.lists(bad_pattern(), min_size=1, max_size=6), st.sampled_from(["auto", "ahocorasick"]), st.booleans())
def test_records_engines_refuse_never_disable_the_others(patterns, prefilter, full_db):
    bad = [{"id": f"bad{i}", "slug": f"bad{i}", "repo": "x/y", "messagePattern": p} for i, p in enumerate(patterns)]
    result = build_and_match(bad + [GOOD], prefilter=prefilter, full_db=full_db)
    assert result["hits"] == ["good"]
    assert result["lines"] == [["good"], []]


def test_a_literal_hyperscan_refuses_is_checked_on_every_text_instead():
    """Even with no cap on prefilter keys, the literal Hyperscan refuses ("Pattern
    length exceeds limit") leaves the database: that record is confirmed on every text,
    and both it and the others still match."""
    huge = "Huge " + "x" * 20_000
    records = [{"id": "huge", "slug": "huge", "repo": "x/y", "messagePattern": huge}, GOOD]
    result = build_and_match(records, text=huge, prefilter="hyperscan", max_prefilter=10**9)
    assert result["hits"] == ["huge"]
    assert build_and_match(records, prefilter="hyperscan", max_prefilter=10**9)["hits"] == ["good"]


def test_explain_and_enrich_work_with_a_16kb_literal_record_in_the_store(tmp_path):
    from errkb.store.db import Store

    record = json.loads(SEED_FILE.read_text())["record"]
    huge = dict(record, id="00000000000000ff", slug="huge", messagePattern="Huge " + "x" * 16_384,
                errorMessage="Huge " + "x" * 16_384)
    db = tmp_path / "s.duckdb"
    with Store.open(db) as store:
        store.ingest([SEED_FILE])
        force_stored_record(store.con, huge, like_id=SEED_ID)
    base = [sys.executable, "-m", "errkb"]
    done = subprocess.run(base + ["explain", "--db", str(db), "--json", SEED_MESSAGE], capture_output=True, text=True,
                          cwd=REPO, timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["matches"][0]["id"] == SEED_ID
    done = subprocess.run(base + ["enrich", "--db", str(db)], input=SEED_MESSAGE + "\nplain line\n",
                          capture_output=True, text=True, cwd=REPO, timeout=120)
    assert done.returncode == 0, done.stderr
    first, second = (json.loads(line) for line in done.stdout.splitlines())
    assert first["errkb"]["id"] == SEED_ID and "errkb" not in second


def test_lint_warns_about_a_pattern_over_the_size_limit():
    from errkb.records.lint import MAX_PATTERN_CHARS, lint_record

    record = json.loads(SEED_FILE.read_text())["record"]
    long = dict(record, messagePattern="Huge " + "x" * MAX_PATTERN_CHARS, errorMessage="Huge " + "x" * MAX_PATTERN_CHARS)
    codes = {f.code: f.message for f in lint_record(long)}
    assert "W206" in codes and f"over {MAX_PATTERN_CHARS:,}" in codes["W206"]
    assert "W206" not in {f.code for f in lint_record(record)}


def test_a_long_literal_pattern_is_only_warned_about_not_judged_too_costly():
    """E207 is about what compiling costs: a pattern long by itself is W206 only up to
    MAX_PATTERN_COST_CHARS (and its gap plan is built in linear time: joining it char by
    char was quadratic); past that, every command loading it would spend seconds (about
    7 microseconds a character), so it is E207."""
    from errkb.records.lint import lint_record
    from errkb.text.patterns import MAX_PATTERN_COST_CHARS, analyze

    record = json.loads(SEED_FILE.read_text())["record"]
    text = "Huge " + "".join(chr(97 + i * 7 % 26) for i in range(MAX_PATTERN_COST_CHARS - 10))
    for pattern in (text, "(?:Huge) " + text[5:]):
        assert analyze(pattern).too_costly is None
        assert [f.code for f in lint_record(dict(record, messagePattern=pattern, errorMessage=text))
                if f.level == "error"] == []
    assert analyze(text).gap_plan[3] == (text,)
    assert analyze("Big: (?:x{1000}){101}").too_costly is not None
    huge = text * 5
    assert [f.code for f in lint_record(dict(record, messagePattern=huge, errorMessage=huge))
            if f.level == "error"] == ["E207"]


def test_a_damaged_store_is_exit_2_with_one_line_never_exit_1(tmp_path):
    db = tmp_path / "junk.duckdb"
    db.write_bytes(b"\x00" * 4096)
    done = subprocess.run([sys.executable, "-m", "errkb", "explain", "--db", str(db), "anything"], capture_output=True,
                          text=True, cwd=REPO, timeout=120)
    assert done.returncode == 2, (done.returncode, done.stderr)
    assert len(done.stderr.strip().splitlines()) == 1 and done.stderr.startswith("Error: "), done.stderr


def test_an_unexpected_failure_inside_a_command_is_exit_2_and_one_line(monkeypatch):
    """Any exception that is not an ErrkbError (an engine's own error type, say) is
    still exit 2 and one line naming where, never a traceback with exit 1 ("no match")."""
    import click
    from click.testing import CliRunner

    from errkb.cli import cli

    @cli.command("raise-for-test", hidden=True)
    def _raise():
        raise RuntimeError("Pattern length exceeds limit")

    try:
        result = CliRunner().invoke(cli, ["raise-for-test"])
        assert result.exit_code == 2, result.output
        lines = result.output.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("Error: internal error at test_hostile_records.py:")
        assert "RuntimeError: Pattern length exceeds limit" in lines[0]
        monkeypatch.setenv("ERRKB_DEBUG", "1")
        assert isinstance(CliRunner().invoke(cli, ["raise-for-test"]).exception, RuntimeError)
    finally:
        cli.commands.pop("raise-for-test")
        assert isinstance(cli, click.Group)
