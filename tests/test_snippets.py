"""Validation snippets: every one compiles whatever the record holds, runs standalone
(in the sandbox: dataset code is untrusted) and says by its exit status how it went."""

from __future__ import annotations

import copy
import json
import sys

import pytest
from click.testing import CliRunner

from errkb.cli import cli
from errkb.site.snippets import indent_code, snippet_text
from errkb.store.db import Store
from errkb.verify import sandbox
from tests.support import HOSTILE, SEED_ID, draft_record, hostile_record, make_store


def run_snippet(text: str) -> sandbox.SandboxResult:
    return sandbox.run([sys.executable, "snippet.py"], files={"snippet.py": text},
                       limits=sandbox.Limits(wall_seconds=30))


def with_code(record: dict, code: str | None) -> dict:
    rec = copy.deepcopy(record)
    rec["validationCode"] = code
    return rec


def test_seed_snippet_names_its_record_and_compiles(seed_record):
    text = snippet_text(seed_record)
    compile(text, "seed.py", "exec")
    assert "# Validation snippet for errkb record 2e3fedf4ee50f84a" in text
    assert f"#   source:    {seed_record['githubUrl']}" in text
    assert "#   commit:    c794754062d49a8fdb63ab3c5215b488b865030c (analysed 2026-08-14T21:17:39.825Z)" in text
    assert "def validate() -> None:\n    import argparse\n    import os\n" in text
    assert 'if __name__ == "__main__":\n    sys.exit(main())' in text


def test_seed_snippet_without_its_library_cannot_run_and_says_so(seed_record):
    result = run_snippet(snippet_text(seed_record))
    assert result.returncode == 2
    # its first import that this interpreter lacks is torch (vLLM is imported only inside a running rank)
    assert "2e3fedf4ee50f84a: could not run, ModuleNotFoundError: No module named 'torch'" in result.stderr


@pytest.mark.parametrize("code, status, said", [
    ("assert 1 + 1 == 2\n", 0, "validated"),
    ("import os\nassert os.environ.get('NOT_SET_HERE') == 'x', 'NOT_SET_HERE must be x'\n", 1, "validation failed: NOT_SET_HERE must be x"),
    ("raise ValueError('still broken')\n", 1, "validation failed, ValueError: still broken"),
    ("import sys\nsys.exit(3)\n", 3, ""),
])
def test_exit_status_says_how_validation_went(seed_record, code, status, said):
    result = run_snippet(snippet_text(with_code(seed_record, code)))
    assert result.returncode == status, result.stderr
    assert said in (result.stdout + result.stderr)


def test_multiline_strings_keep_their_content_when_indented():
    code = 'text = """first\n  second\nthird"""\nassert text == "first\\n  second\\nthird", repr(text)\n'
    body = indent_code(code)
    namespace: dict = {}
    exec(compile("def validate():\n" + body + "\n", "t", "exec"), namespace)
    namespace["validate"]()  # the assertion inside holds: the string was not re-indented


def test_code_that_is_not_python_still_gives_a_compiling_snippet_that_exits_2(seed_record):
    rec = with_code(seed_record, "export A=1\nif [ -z \"$B\" ]; then exit 1; fi\n")
    text = snippet_text(rec)
    compile(text, "s.py", "exec")
    assert "#     export A=1" in text
    result = run_snippet(text)
    assert result.returncode == 2
    assert "could not run: validationCode is not valid Python: SyntaxError" in result.stderr


def test_future_import_cannot_be_wrapped_and_is_reported(seed_record):
    text = snippet_text(with_code(seed_record, "from __future__ import annotations\nassert True\n"))
    compile(text, "s.py", "exec")
    assert "validationCode is not valid Python" in text


@pytest.mark.parametrize("evil", [
    HOSTILE,
    "line one\nimport os; os.system('touch /tmp/pwned')  # newline breaks out of a comment",
    'a """ b \'\'\' c \\',
    "carriage\rreturn and \u2028 line separator and \x0c form feed and \x00 nul",
    "lone surrogate \ud800 and emoji \U0001f600",
])
def test_hostile_header_text_cannot_break_out(seed_record, evil):
    rec = copy.deepcopy(seed_record)
    rec["errorMessage"] = evil
    rec["errorClass"] = "ValueError"
    rec["filePath"] = evil
    rec["slug"] = "x"
    rec["validationCode"] = "assert True\n"
    text = snippet_text(rec)
    code = compile(text, "s.py", "exec")
    namespace = {"__name__": "not_main"}
    exec(code, namespace)
    assert namespace["ERROR_MESSAGE"] == evil  # the constant holds the exact text
    header = text.split("import sys", 1)[0]
    assert all(line.startswith("#") or not line for line in header.split("\n"))


def test_hostile_record_snippet_from_the_store_compiles_and_runs(seed_record):
    result = run_snippet(snippet_text(hostile_record(seed_record)))
    assert result.returncode == 0, result.stderr
    assert "validated" in result.stdout


def test_cli_writes_one_snippet_per_record_with_validation_code(tmp_path, seed_record, make_variant):
    db = make_store(tmp_path / "s.duckdb", [seed_record, make_variant(1), draft_record(seed_record)])
    out = tmp_path / "snips"
    result = CliRunner().invoke(cli, ["snippets", "--db", str(db), "--out", str(out), "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert sorted(report["written"]) == sorted([f"{SEED_ID}.py", f"{make_variant(1)['id']}.py"])
    assert report["skipped"] == [f"{draft_record(seed_record)['id']}: no validationCode"]
    for f in out.iterdir():
        compile(f.read_text(), str(f), "exec")
    again = CliRunner().invoke(cli, ["snippets", "--db", str(db), "--out", str(out), "--json"])
    assert json.loads(again.output)["written"] == []


def test_cli_one_record_by_slug_and_unknown_id(tmp_path, seed_record):
    db = make_store(tmp_path / "s.duckdb", [seed_record])
    out = tmp_path / "snips"
    ok = CliRunner().invoke(cli, ["snippets", "--db", str(db), "--out", str(out), seed_record["slug"]])
    assert ok.exit_code == 0
    assert [p.name for p in out.iterdir()] == [f"{SEED_ID}.py"]
    bad = CliRunner().invoke(cli, ["snippets", "--db", str(db), "--out", str(out), "nosuchid"])
    assert bad.exit_code == 2
    assert bad.output.strip() == "Error: no record with id or slug 'nosuchid' (try `errkb list`)"


def test_every_bundled_record_snippet_compiles():
    with Store.open(None, read_only=True) as store:
        records = [r for r in store.records() if r.get("validationCode")]
    assert records
    for rec in records:
        compile(snippet_text(rec), rec["id"], "exec")
