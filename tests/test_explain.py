"""errkb explain on one text: sections, width, colour, --json, --all, inputs, bad input."""

from __future__ import annotations

import copy
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from errkb.cli import cli
from errkb.store.db import Store
from tests.support import REPO, SEED_ID, SEED_MESSAGE, force_stored_record, on_terminal, write_jsonl

ANSI = re.compile(r"\x1b\[[0-9;]*m")
SEED_FILE_PATH = "vllm/distributed/device_communicators/flashinfer_all_reduce.py"


def run(args, db, input=None):
    result = CliRunner().invoke(cli, ["explain", "--db", str(db), *args], input=input, catch_exceptions=False)
    return result


def test_seed_message_explained_with_every_section(sibling_db):
    r = run([SEED_MESSAGE], sibling_db)
    assert r.exit_code == 0, r.output
    out = r.output
    assert out.startswith("ValueError  flashinfer-allreduce-quantization-fusion-is-not-su\n"
                          "  vllm-project/vllm  score 2.00  id 2e3fedf4ee50f84a\n")
    for heading in ("What it is", "Where it is raised", "Why it happens", "How to fix", "Example fix",
                    "Validate the fix", "Prevention"):
        assert f"\n{heading}\n" in out, heading
    assert f"  {SEED_FILE_PATH}:221\n" in out
    assert ("  https://github.com/vllm-project/vllm/blob/c794754062d49a8fdb63ab3c5215b488b865030c/"
            f"{SEED_FILE_PATH}#L221\n") in out
    assert "  1. Set VLLM_FLASHINFER_ALLREDUCE_BACKEND=mnnvl on all nodes\n" in out
    assert "    export VLLM_FLASHINFER_ALLREDUCE_BACKEND=mnnvl\n" in out
    assert "    from vllm.distributed import get_node_count\n" in out
    # the other, less specific record is announced, not shown
    assert "1 other record also matched; `errkb explain --all` shows it with its score." in out
    assert "please-use-mnnvl-backend-instead" not in out


def _too_wide(text: str, width: int = 80) -> list[str]:
    """Lines wider than ``width``, except a URL alone on its line (kept whole to stay usable)."""
    bad = []
    for line in ANSI.sub("", text).split("\n"):
        if len(line) > width and not re.fullmatch(r"\s*https?://\S+", line):
            bad.append(line)
    return bad


def test_output_fits_80_columns_even_with_long_words_and_code(tmp_path, seed_record):
    rec = copy.deepcopy(seed_record)
    rec["documentation"] = "A" * 200 + " then words " * 30 + "\n\nsecond paragraph " + "x" * 95
    rec["exampleFix"] = "value = compute(" + ", ".join(f"argument_{i}" for i in range(30)) + ")\n" + "Q" * 300
    rec["solutions"] = ["Use " + "very_long_identifier_" * 10 + " with care"]
    db = tmp_path / "s.duckdb"
    with Store.open(db) as store:
        assert store.ingest([write_jsonl(tmp_path / "r.jsonl", [rec])]).rejected == 0
    for args in ([SEED_MESSAGE], ["--all", SEED_MESSAGE]):
        r = run(args, db)
        assert r.exit_code == 0
        assert _too_wide(r.output) == []
        assert "AAAA" in r.output and "↪ " in r.output  # cut, and code folded with a marker
    # the folded code keeps every character
    code_lines = [ln[4:] for ln in r.output.split("\n") if ln.startswith("    ")]
    assert "".join(ln.removeprefix("↪ ") for ln in code_lines).count("Q") == 300


def test_all_shows_every_match_with_its_score_best_first(sibling_db):
    r = run(["--all", f"ValueError: {SEED_MESSAGE}"], sibling_db)
    assert r.exit_code == 0
    scores = [float(s) for s in re.findall(r"^  vllm-project/vllm  score (\d+\.\d+)", r.output, re.M)]
    assert len(scores) == 2 and scores[0] > scores[1]
    first, second = r.output.index("flashinfer-allreduce-quantization"), r.output.index("please-use-mnnvl-backend-instead")
    assert first < second
    assert "-- match 2/2 " in r.output
    assert "other record" not in r.output


def test_json_shape(sibling_db, seed_record):
    r = run(["--json", f"2026-08-14 21:17:39 ERROR [core.py:12] ValueError: {SEED_MESSAGE}\n"], sibling_db)
    assert r.exit_code == 0
    data = json.loads(r.output)
    assert set(data) == {"format", "mode", "lines", "matched", "matches", "nearMatches", "skipped", "notes", "search",
                         "sites", "datasetHash"}
    assert data["search"] is None  # keyword search only when nothing matched nor came close
    assert data["sites"] == []  # the known-site tier only for what no record matched
    assert (data["format"], data["mode"], data["lines"], data["matched"], data["nearMatches"]) == (1, "text", 1, True, [])
    best, other = data["matches"]
    assert set(best) == {"id", "tier", "slug", "repo", "errorClass", "severity", "score", "span", "message", "engine",
                         "bounded", "variant", "occurrences", "truncated", "proof", "record"}
    assert best["truncated"] is False and best["tier"] == "curated"
    assert best["id"] == SEED_ID and best["repo"] == "vllm-project/vllm" and best["occurrences"] is None
    assert best["record"] == seed_record  # the full record, exactly as ingested
    start, end = best["span"]
    assert best["message"][start:end] == SEED_MESSAGE
    assert best["score"] > other["score"] and other["id"] == "0123456789abcdef"


def test_stdin_dash_and_no_argument(sibling_db):
    for args in (["-"], []):
        r = run(["--json", *args], sibling_db, input=f"ValueError: {SEED_MESSAGE}\n")
        assert r.exit_code == 0
        assert json.loads(r.output)["matches"][0]["id"] == SEED_ID


def test_file_option(sibling_db, tmp_path):
    log = tmp_path / "crash.log"
    log.write_text(f"INFO starting\n(EngineCore_DP0 pid=1234) ValueError: {SEED_MESSAGE}\r\n")
    r = run(["--json", "--file", str(log)], sibling_db)
    assert r.exit_code == 0
    assert json.loads(r.output)["matches"][0]["id"] == SEED_ID


def test_traceback_with_chained_exception(sibling_db):
    tb = (
        "Traceback (most recent call last):\n"
        '  File "/usr/lib/python3.12/site-packages/vllm/distributed/device_communicators/flashinfer_all_reduce.py", line 221, in f\n'
        "    raise ValueError(\n"
        f"ValueError: {SEED_MESSAGE}\n"
        "\n"
        "The above exception was the direct cause of the following exception:\n"
        "\n"
        "Traceback (most recent call last):\n"
        '  File "/app/serve.py", line 9, in <module>\n'
        "    main()\n"
        "RuntimeError: engine core failed to start\n"
    )
    r = run(["--json"], sibling_db, input=tb)
    assert r.exit_code == 0
    data = json.loads(r.output)
    assert data["mode"] == "text"
    assert data["matches"][0]["id"] == SEED_ID


def test_usage_errors_exit_2_with_one_line(sibling_db, tmp_path):
    r = run(["--file", str(tmp_path / "nope.log")], sibling_db)
    assert r.exit_code == 2
    assert r.output.strip().endswith(f"Error: {tmp_path / 'nope.log'}: cannot read: No such file or directory")
    r = run(["some text", "--file", str(tmp_path / "x.log")], sibling_db)
    assert (r.exit_code, r.output.strip()) == (2, "Error: give the text as TEXT or with --file PATH, not both")
    r = run([], tmp_path / "missing.duckdb", input="x")
    assert r.exit_code == 2
    assert "missing.duckdb: no such store (create it with `errkb ingest --db" in r.output


@pytest.mark.parametrize("given", ["", "\n\n", "   \r\n\t\n"])
def test_empty_input_is_a_usage_error(sibling_db, given):
    r = run([], sibling_db, input=given)
    assert (r.exit_code, r.output.strip()) == (2, "Error: stdin: empty input: nothing to explain")
    r = run([given], sibling_db)
    assert (r.exit_code, r.output.strip()) == (2, "Error: TEXT: empty input: nothing to explain")


def test_no_match_offers_similar_records_never_as_a_match(data_db):
    drifted = SEED_MESSAGE.replace("trtllm", "nccl")
    r = run([f"ValueError: {drifted}"], data_db)
    assert r.exit_code == 1
    assert r.output.startswith("No known error matches this text.\n")
    assert "Similar, not exact" in r.output
    assert "differs: trtllm -> nccl" in r.output
    assert f"see it:  errkb show {SEED_ID}" in r.output
    assert _too_wide(r.output) == []
    data = json.loads(run(["--json", drifted], data_db).output)
    assert data["matched"] is False and data["matches"] == []
    near = data["nearMatches"][0]
    assert near["id"] == SEED_ID and 0.6 <= near["similarity"] < 1.0
    assert {"op": "changed", "record": "trtllm", "text": "nccl"} in near["diff"]
    assert near["record"]["id"] == SEED_ID


def test_unrelated_text_has_no_match_and_no_near_match(sibling_db):
    r = run(["--json", "INFO:     10.24.37.211:36143 - \"GET /api/v1/items HTTP/1.1\" 404 Not Found"], sibling_db)
    assert r.exit_code == 1
    data = json.loads(r.output)
    assert data["matches"] == [] and data["nearMatches"] == []
    r = run(["INFO server started"], sibling_db)
    assert (r.exit_code, r.output) == (1, "No known error matches this text.\n")


def test_binary_input_is_read_as_text(sibling_db):
    noise = bytes(range(256)) * 40
    r = CliRunner().invoke(cli, ["explain", "--db", str(sibling_db)], input=noise)
    assert r.exit_code == 1
    assert r.output.startswith("No known error matches this text.")
    # a known message inside binary garbage is still found, and the input is flagged
    r = CliRunner().invoke(cli, ["explain", "--db", str(sibling_db), "--json"],
                           input=b"\x00\xff\xfe garbage\n" + SEED_MESSAGE.encode() + b"\n\x89PNG\x00")
    assert r.exit_code == 0
    data = json.loads(r.stdout)
    assert data["matches"][0]["id"] == SEED_ID
    assert data["notes"] == ["the input looks binary (NUL bytes); it was read as text with invalid UTF-8 replaced"]


def test_record_whose_pattern_became_invalid_is_skipped(tmp_path, seed_record):
    """A record stored by an older, laxer errkb: its pattern no longer compiles."""
    import duckdb

    db = tmp_path / "s.duckdb"
    with Store.open(db) as store:
        store.ingest([REPO / "data"])
    bad = copy.deepcopy(seed_record)
    bad.update(id="badbadbadbadbad0", slug="broken-pattern", messagePattern="Broken (unclosed [group",
               errorMessage="Broken (unclosed [group")
    con = duckdb.connect(str(db))
    force_stored_record(con, bad, like_id=SEED_ID)
    con.close()
    r = CliRunner().invoke(cli, ["explain", "--db", str(db), SEED_MESSAGE])
    assert r.exit_code == 0
    assert r.stdout.startswith("ValueError  flashinfer-allreduce-quantization")
    assert "warning: record badbadbadbadbad0 skipped: does not compile:" in r.stderr
    r = CliRunner().invoke(cli, ["explain", "--db", str(db), "--json", "Broken (unclosed [group"])
    assert r.exit_code == 1
    data = json.loads(r.stdout)
    assert data["matches"] == []
    assert [s["id"] for s in data["skipped"]] == ["badbadbadbadbad0"]


def test_bundle_follows_the_store(tmp_path, make_variant):
    """A store changed after a call (new record) is seen by the next call."""
    db = tmp_path / "s.duckdb"
    with Store.open(db) as store:
        store.ingest([REPO / "data"])
    rec = make_variant(7)
    before = json.loads(run(["--json", rec["errorMessage"]], db).output)
    assert rec["id"] not in [m["id"] for m in before["matches"]]
    with Store.open(db) as store:
        assert store.ingest([write_jsonl(tmp_path / "v.jsonl", [rec])]).new == 1
    r = run(["--json", rec["errorMessage"]], db)
    assert r.exit_code == 0
    after = json.loads(r.output)
    assert rec["id"] in [m["id"] for m in after["matches"]]
    assert after["datasetHash"] != before["datasetHash"]


def _cli_process(args, env=None, **kw):
    return subprocess.run([sys.executable, "-m", "errkb", *args], capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, cwd=REPO, **kw)


def test_warm_call_does_not_open_duckdb(sibling_db):
    """Once the bundle is cached, a call answers without importing DuckDB."""
    code = (
        "import sys\nfrom errkb.cli import cli\n"
        "try:\n    cli(['explain', '--db', sys.argv[1], sys.argv[2]])\nexcept SystemExit as e:\n    code = e.code\n"
        "print('duckdb' in sys.modules, code)\n"
    )
    subprocess.run([sys.executable, "-c", code, str(sibling_db), SEED_MESSAGE], capture_output=True, check=True)
    out = subprocess.run([sys.executable, "-c", code, str(sibling_db), SEED_MESSAGE], capture_output=True, text=True, check=True)
    assert out.stdout.strip().endswith("False 0")


def test_colour_only_on_a_tty_and_never_with_no_color(sibling_db):
    env = {k: v for k, v in os.environ.items() if k != "NO_COLOR"}
    env["COLUMNS"] = "80"
    args = ["explain", "--db", str(sibling_db), SEED_MESSAGE]
    coloured, _ = on_terminal(args, env)
    assert "\x1b[" in coloured and "What it is" in coloured
    assert "\x1b[" not in on_terminal(args, {**env, "NO_COLOR": "1"})[0]
    piped = _cli_process(["explain", "--db", str(sibling_db), SEED_MESSAGE], env={"NO_COLOR": ""})
    assert piped.returncode == 0 and "\x1b[" not in piped.stdout


def test_draft_record_shows_where_it_is_raised_and_says_it_is_a_draft(tmp_path, seed_record):
    rec = copy.deepcopy(seed_record)
    for key in ("documentation", "triggerScenarios", "commonSituations", "handlingStrategy"):
        rec[key] = ""
    rec.update(solutions=[], preventionTips=[], exampleFix=None, validationCode=None, tags=["draft"])
    db = tmp_path / "s.duckdb"
    with Store.open(db) as store:
        assert store.ingest([write_jsonl(tmp_path / "d.jsonl", [rec])]).rejected == 0
    r = run([SEED_MESSAGE], db)
    assert r.exit_code == 0
    assert "  Draft record: mined from the source, not yet curated; only the raise site is\n  known.\n" in r.output
    assert f"\nWhere it is raised\n  {SEED_FILE_PATH}:221\n" in r.output
    for heading in ("What it is", "Why it happens", "How to fix", "Example fix", "Validate the fix", "Prevention"):
        assert heading not in r.output


def test_unwritable_cache_still_answers(tmp_path, monkeypatch):
    """When the knowledge base cannot be written next to the store, the call is served from memory."""
    from errkb.cache import KeyedFolder

    db = tmp_path / "s.duckdb"
    with Store.open(db) as store:
        store.ingest([REPO / "data"])
    monkeypatch.setattr(KeyedFolder, "put", lambda *a, **k: None)
    r = run(["--json", SEED_MESSAGE], db)
    assert r.exit_code == 0
    assert json.loads(r.output)["matches"][0]["record"]["id"] == SEED_ID
    r = run(["--json", SEED_MESSAGE.replace("trtllm", "nccl")], db)
    assert r.exit_code == 1
    assert json.loads(r.output)["nearMatches"][0]["id"] == SEED_ID
    assert not list((tmp_path / "s.duckdb.cache").glob("kb-v*"))


def test_the_store_has_one_compiled_matcher_index_on_disk(tmp_path):
    db = tmp_path / "s.duckdb"
    with Store.open(db) as store:
        store.ingest([REPO / "data"])
    r = CliRunner().invoke(cli, ["explain", "--db", str(db), SEED_MESSAGE])
    assert r.exit_code == 0
    cache = Path(str(db) + ".cache")
    r = CliRunner().invoke(cli, ["search", "--db", str(db), "allreduce"])
    assert r.exit_code == 0
    (index,) = [p for p in cache.rglob("*.idx") if p.name == "matcher.idx"]
    assert index.parent.name.startswith("kb-v")


def test_a_record_with_megabytes_of_code_and_prose_is_explained_in_linear_time(tmp_path, seed_record):
    """Folding a long field for the terminal sliced off the rest of it for every 76
    characters: a record with a 3 MB exampleFix took 5.7 s to explain (ingest takes it)."""
    import time

    huge = {**seed_record, "exampleFix": "x" * 10_000_000, "documentation": "word " * 600_000 + "y" * 2_000_000}
    db = tmp_path / "s.duckdb"
    with Store.open(db) as store:
        store.ingest([write_jsonl(tmp_path / "r.jsonl", [huge])])
    started = time.monotonic()
    r = run([SEED_MESSAGE], db)
    took = time.monotonic() - started
    assert r.exit_code == 0, r.output
    lines = r.stdout.splitlines()
    folded = [line for line in lines if "xxxx" in line or "yyyy" in line]
    assert max(map(len, folded)) <= 80
    assert sum(line.count("x") for line in folded) == 10_000_000
    assert took < 15, f"explain took {took:.1f} s"  # linear: about 1 s; quadratic: over a minute
