"""The observed error judged against the record: class (a documented wrapper aside), raise
site file and function, shown on the record (explain, the site) rather than kept as a note."""

from __future__ import annotations

import json

from click.testing import CliRunner

from errkb.cli import cli
from errkb.records import proofs as D
from errkb.records.read import read_records
from errkb.resources import data_dir


def _bundled() -> dict[str, dict]:
    return {item.record["id"]: item.record for item in read_records([data_dir()]) if item.record}


def test_the_records_function_is_the_def_above_its_raise_line_in_its_own_window():
    records = _bundled()
    assert D.record_function(records["35ef3efc5bca58bb"]) == "_check_driver"
    assert D.record_function(records["47b1bbca35b61896"]) == "_verify_quantization"
    assert D.record_function(dict(records["47b1bbca35b61896"], lineNumber=10**6)) is None


def test_what_the_committed_runs_saw_against_their_records():
    records, proofs = _bundled(), D.all_proofs()
    found = {rid: D.observed_findings(proofs[rid], records[rid]) for rid in proofs}
    assert found["3e53cb195b2d7b69"] == ["the record's errorClass is RuntimeError; the run raised ValueError"]
    assert found["35ef3efc5bca58bb"] == ["the record's raise line is in _check_driver(); the run raised in _lazy_init()"]
    assert found["2042ff2944a79d5f"] == [
        "the record's filePath is vllm/model_executor/model_loader.py; the run raised in vllm/config/vllm.py"]
    # pydantic's ValidationError around the record's ValueError is a documented wrapper, not a finding
    wrapped = [rid for rid in proofs if rid.startswith(("0e2d887a", "8ad19645"))]
    assert len(wrapped) == 2 and all(found[rid] == [] for rid in wrapped)
    assert found["47b1bbca35b61896"] == []


def test_a_wrong_class_or_function_is_shown_by_explain():
    runner = CliRunner()
    out = runner.invoke(cli, ["explain", "--json", "trying to initialize the default process group twice!"])
    proof = json.loads(out.output)["matches"][0]["proof"]
    assert proof["status"] == "proven on CPU"
    assert proof["findings"] == ["the record's errorClass is RuntimeError; the run raised ValueError"]
    text = " ".join(runner.invoke(cli, ["explain", "trying to initialize the default process group twice!"]).output.split())
    assert ("(the run differs from the record: the record's errorClass is RuntimeError; the run raised ValueError)"
            in text)


def test_the_fix_page_shows_where_the_run_differs(tmp_path):
    wrapper = json.loads((data_dir() / "pytorch/pytorch/torch-not-compiled-with-cuda-enabled.json").read_text())
    (tmp_path / "r.json").write_text(json.dumps(wrapper))
    db = tmp_path / "store.duckdb"
    assert CliRunner().invoke(cli, ["ingest", str(tmp_path / "r.json"), "--db", str(db)]).exit_code == 0
    out = tmp_path / "site"
    result = CliRunner().invoke(cli, ["site", "build", "--db", str(db), "--out", str(out)])
    assert result.exit_code == 0, result.output
    page = next(out.glob("errors/pytorch/pytorch/*.html")).read_text()
    assert "The error the run raised is not the record's in every part:" in page
    assert "<li>the record&#39;s raise line is in _check_driver(); the run raised in _lazy_init()</li>" in page
