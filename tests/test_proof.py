"""Proofs: the single-process reproducer protocol judged for real (sandbox, subprocesses),
validation that passes in the broken state reported as a failure, proofs as data, and the
coverage figure. The cases here use only the standard library, so they run with errkb's own
interpreter; the real torch/vLLM reproducers are in test_reproducers_cpu.py.
"""

from __future__ import annotations

import json
import sys

import pytest
from click.testing import CliRunner

from errkb.cli import cli
from errkb.records import proofs as D
from errkb.records.read import SIDECAR_DIRS
from errkb.resources import data_dir
from errkb.store.db import bundled_record_paths
from errkb.verify import proofs as P
from errkb.verify import sandbox
from errkb.verify.judge import message_matches
from errkb.verify.reproducers import REGISTRY, Requirements, case

needs_ns = pytest.mark.skipif(not sandbox.capabilities().namespaces, reason="needs namespaces (root and util-linux unshare)")

CASE = '''
STATES = {"before": {"argv": ["--limit", "2"], "env": {}}, "after": {"argv": ["--limit", "5"], "env": {"WIDGET_MODE": "ok"}}}


def trigger(state):
    limit = int(state["argv"][1])
    if 3 > limit:
        raise ValueError(f"Widget count 3 exceeds limit {limit}")
    return "3 widgets fit"
'''

REAL_VALIDATION = '''import sys
limit = int(sys.argv[sys.argv.index("--limit") + 1])
assert limit >= 3, f"limit {limit} is below the 3 widgets"
'''


def _record(seed_record, validation: str) -> dict:
    rec = dict(seed_record)
    lines = CASE.splitlines()
    raise_line = next(n for n, text in enumerate(lines, 1) if "raise ValueError" in text)
    rec.update(id="feedfacefeedface", slug="widget-count-exceeds-limit", errorMessage="Widget count 3 exceeds limit 2",
               messagePattern=r"Widget count (.+?) exceeds limit (.+?)", errorClass="ValueError", validationCode=validation,
               # the record's raise site is the case's own: widgets.py, in trigger()
               filePath="widgets.py", sourceCode="\n".join(lines), sourceCodeStart=1, sourceCodeEnd=len(lines),
               lineNumber=raise_line)
    return rec


@pytest.fixture
def widget_case(tmp_path, monkeypatch):
    folder = tmp_path / "cases"
    folder.mkdir()
    folder.chmod(0o755)
    tmp_path.chmod(0o755)
    (folder / "widgets.py").write_text(CASE)
    # errkb's own interpreter stands in for a reproducer venv: the case needs nothing else.
    monkeypatch.setenv("ERRKB_GPU_PYTHON", sys.executable)
    rep = case("feedfacefeedface", "widgets.py", Requirements(system_python=True))
    return rep.__class__(**{**rep.__dict__, "case": folder / "widgets.py"})


@needs_ns
def test_a_real_validation_proves_the_record(seed_record, widget_case):
    proof = _prove(_record(seed_record, REAL_VALIDATION), widget_case)
    checks = {c.check: c for c in proof.checks}
    assert proof.status == "proven", proof.reason
    before = checks["reproducer:widgets:before"]
    assert (before.outcome, before.exception_class, before.exception_message) == ("pass", "ValueError", "Widget count 3 exceeds limit 2")
    assert before.message_matched is True
    assert checks["reproducer:widgets:after"].reason == "no exception matching messagePattern; 3 widgets fit"
    assert checks["validationCode:before:in-reproducer"].reason.startswith("rejects the 'before' state, as it must (AssertionError: limit 2")
    assert checks["validationCode:after:in-reproducer"].outcome == "pass"


@needs_ns
def test_validation_that_passes_in_the_broken_state_is_a_failure(seed_record, widget_case):
    proof = _prove(_record(seed_record, "assert 1 + 1 == 2\n"), widget_case)
    checks = {c.check: c for c in proof.checks}
    assert checks["validationCode:before:in-reproducer"].outcome == "fail"
    assert checks["validationCode:before:in-reproducer"].reason == "validation does not reject the broken state (it passed in 'before')"
    assert proof.status == "failed"


@needs_ns
def test_a_message_that_does_not_match_the_records_pattern_fails(seed_record, widget_case):
    rec = _record(seed_record, REAL_VALIDATION)
    rec["messagePattern"] = r"Gadget count (.+?) exceeds limit (.+?)"
    proof = _prove(rec, widget_case)
    before = {c.check: c for c in proof.checks}["reproducer:widgets:before"]
    assert before.outcome == "fail"
    assert before.reason == "expected the record's error; saw ValueError: Widget count 3 exceeds limit 2"


@needs_ns
@pytest.mark.parametrize("change, why", [
    ({"errorClass": "KeyError"}, "the record's errorClass is KeyError; the run raised ValueError"),
    ({"filePath": "gadgets.py"}, "the record's filePath is gadgets.py; the run raised in "),
    ({"sourceCode": "def check_widgets(state):\n" * 12}, "the record's raise line is in check_widgets(); the run raised in trigger()"),
])
def test_the_records_message_raised_with_another_class_or_function_fails_the_proof(seed_record, widget_case, change, why):
    proof = _prove(dict(_record(seed_record, REAL_VALIDATION), **change), widget_case)
    before = {c.check: c for c in proof.checks}["reproducer:widgets:before"]
    assert before.message_matched is True  # the message is the record's; the class or the raise site is not
    assert before.outcome == "fail" and why in before.reason, before.reason
    assert proof.status == "failed" and why in proof.reason


@needs_ns
def test_a_raise_line_elsewhere_in_the_records_function_is_drift_with_the_observed_line(seed_record, widget_case):
    rec = _record(seed_record, REAL_VALIDATION)
    proof = _prove(dict(rec, lineNumber=rec["lineNumber"] - 1), widget_case)
    before = {c.check: c for c in proof.checks}["reproducer:widgets:before"]
    assert proof.status == "proven", proof.reason
    assert (f"record's lineNumber is {rec['lineNumber'] - 1}; raised at line {rec['lineNumber']} (inside the record's window)"
            in before.details["drift"])


@needs_ns
def test_a_hanging_case_ends_as_timeout(seed_record, widget_case):
    widget_case.case.write_text(CASE.replace("    limit = int", "    import time\n    time.sleep(600)\n    limit = int"))
    rep = widget_case.__class__(**{**widget_case.__dict__, "timeout_s": 5.0})
    proof = _prove(_record(seed_record, REAL_VALIDATION), rep)
    before = {c.check: c for c in proof.checks}["reproducer:widgets:before"]
    assert before.outcome == "timeout"
    assert proof.status == "failed"


def _prove(record: dict, rep) -> P.Proof:
    from errkb.verify.runs import run_reproducer

    checks = []
    run_reproducer(record, rep, None, checks.append)
    status, reason = P.judge(record, rep.tier, checks)
    return P.Proof(record["id"], record["slug"], rep.tier, status, reason, checks)


def test_a_record_without_reproducer_is_unproven_never_pass(seed_record):
    assert P.judge(seed_record, "cpu-real", []) == ("unproven", "no cpu-real reproducer registered")
    assert D.proof_line(None) == "Not reproduced yet"
    assert D.status_of("0000000000000000", None) == "unproven"


def test_gpu_only_records_are_counted_apart():
    gpu_only = {r.record_id for r in REGISTRY if r.tier == "gpu"} - {r.record_id for r in REGISTRY if r.tier == "cpu-real"}
    assert gpu_only, "the registry has GPU-tier reproducers"
    assert all(D.status_of(rid, None) == "GPU-only" for rid in gpu_only)


def test_the_committed_reproducer_index_is_the_registry():
    # explain and the site read "GPU-only" from this file, not from the registry
    committed = (data_dir() / "proofs" / "reproducers.json").read_text(encoding="utf-8")
    assert committed == P.reproducer_index_text(), (
        "data/proofs/reproducers.json is stale: run "
        "python -c 'from errkb.verify.proofs import write_reproducer_index; write_reproducer_index()'")
    assert set(D.reproducer_tiers()) == {r.record_id for r in REGISTRY}


def test_the_bundled_reader_leaves_proofs_and_findings_out():
    names = {p.name for p in bundled_record_paths(data_dir())}
    assert "proofs" not in names and "findings" not in names
    assert (data_dir() / "proofs").is_dir()


def test_every_committed_proof_is_a_proven_run_of_a_registered_reproducer_whose_message_matches():
    records = {}
    for path in data_dir().rglob("*"):
        if path.is_file() and path.relative_to(data_dir()).parts[0] not in SIDECAR_DIRS and path.suffix in (".json", ".txt"):
            rec = json.loads(path.read_text())["record"]
            records[rec["id"]] = rec
    proofs = D.all_proofs()
    assert len(proofs) >= 13
    for rid, proof in proofs.items():
        assert proof["status"] == "proven", rid
        assert any(r.record_id == rid and r.tier == proof["tier"] for r in REGISTRY), rid
        matched, why = message_matches(records[rid], proof["observed"]["exception_message"])
        assert matched, f"{rid}: {why}"
        outcomes = {c["check"]: c["outcome"] for c in proof["checks"]}
        assert outcomes["validationCode:before:in-reproducer"] == "pass", rid
        assert D.proof_line(proof).startswith(f"Reproduced with {proof['library']['name']} ")


def test_explain_prints_the_proof_line_and_carries_it_in_json():
    runner = CliRunner()
    text = runner.invoke(cli, ["explain", "trying to initialize the default process group twice!"])
    proof = D.load_proof("3e53cb195b2d7b69")
    assert f"Reproduced with torch {proof['library']['version']} on {proof['date']}" in text.output
    out = runner.invoke(cli, ["explain", "--json", "trying to initialize the default process group twice!"])
    assert json.loads(out.output)["matches"][0]["proof"]["status"] == "proven on CPU"


def test_stats_prints_the_coverage_figure():
    result = CliRunner().invoke(cli, ["stats"])
    cov = D.coverage(_bundled())
    assert D.coverage_line(cov) in result.output
    assert cov["counts"]["proven on CPU"] == len([p for p in D.all_proofs().values() if p["tier"] == "cpu-real"])


def test_prove_without_records_is_a_usage_error():
    result = CliRunner().invoke(cli, ["prove"])
    assert result.exit_code == 2
    assert "Error: name at least one record (id or slug), or use --all or --check" in result.output


def test_prove_selects_the_named_records_or_every_record_with_a_reproducer_of_the_tier():
    from errkb.store.db import Store

    with Store.open(None, read_only=True) as store:
        stored = {r["id"] for r in store.records()}
        gpu = P.records_to_prove(store, (), True, "gpu")
        assert [r["id"] for r in gpu] and {r["id"] for r in gpu} == {r.record_id for r in REGISTRY if r.tier == "gpu"} & stored
        named = P.records_to_prove(store, ("3e53cb195b2d7b69", "012b1dcb44c97448"), False, "cpu-real")
        assert [r["id"] for r in named] == ["3e53cb195b2d7b69", "012b1dcb44c97448"]
        with pytest.raises(D.ProofError, match="give record ids/slugs or --all, not both"):
            P.records_to_prove(store, ("3e53cb195b2d7b69",), True, "cpu-real")


def test_prove_of_an_unknown_record_is_a_usage_error():
    result = CliRunner().invoke(cli, ["prove", "no-such-record"])
    assert result.exit_code == 2
    assert "Error: no record with id or slug 'no-such-record' in " in result.output


def test_check_reports_a_proof_whose_record_is_gone(tmp_path):
    folder = tmp_path / "proofs"
    folder.mkdir()
    (folder / "0123456789abcdef.json").write_text(json.dumps({"record_id": "0123456789abcdef", "tier": "cpu-real", "status": "proven"}))
    result = CliRunner().invoke(cli, ["prove", "--check", "--proofs", str(folder)])
    assert result.exit_code == 1
    assert "NO LONGER HOLDS 0123456789abcdef: the proof's record is not in the store" in result.output


def test_an_unreadable_proof_file_is_one_clear_error(tmp_path):
    folder = tmp_path / "proofs"
    folder.mkdir()
    (folder / "x.json").write_text("{not json")
    with pytest.raises(D.ProofError, match=r"x\.json: not a readable proof file"):
        D.all_proofs(folder)


def test_the_site_shows_proofs_a_proven_filter_and_the_coverage_figure(tmp_path):
    out = tmp_path / "site"
    result = CliRunner().invoke(cli, ["site", "build", "--out", str(out)])
    assert result.exit_code == 0, result.output
    index = (out / "index.html").read_text()
    cov = D.coverage(_bundled())
    c = cov["counts"]
    assert (f"Proof coverage: <strong>{c['proven on CPU']}/{cov['total']}</strong> reproduced on CPU" in index)
    assert '<select id="f-proof"><option value="">all</option><option value="proven">proven</option>' in index
    proven = (out / "errors/pytorch/pytorch/trying-to-initialize-the-default-process-group-twi.html").read_text()
    proof = D.load_proof("3e53cb195b2d7b69")
    assert f"Reproduced with torch {proof['library']['version']} on {proof['date']}" in proven
    unproven = (out / "errors/flashinfer-ai/flashinfer/buffer-overflow-when-allocating-memory-for-batch-p.html").read_text()
    assert "Not reproduced yet: no run has shown this error raised" in unproven
    max_len = (out / "errors/vllm-project/vllm/user-specified-max-model-len-8192-is-greater-than.html").read_text()
    assert "<h3>errkb's findings</h3>" in max_len and "VLLM_ALLOW_LONG_MAX_MODEL_LEN" in max_len
    # the seed's findings were corrected in its text, so its page has none left
    seed = next(out.glob("errors/vllm-project/vllm/flashinfer-allreduce-quantization-fusion*.html")).read_text()
    assert "<h3>errkb's findings</h3>" not in seed and "get_fi_ar_quant_workspace is the quantization-fusion" in seed


def test_a_release_without_a_wheel_for_this_python_is_skipped_and_check_does_not_call_its_proof_broken(
        monkeypatch, tmp_path):
    # torch 2.0.1 (2a399d68's release) has wheels up to cp311: on a newer interpreter its proof
    # cannot be re-run, which says so, and is neither a failure of the record nor of --check.
    from errkb.verify import proofs as P
    from errkb.verify import runs
    from errkb.verify.reproducers import TORCH_20, for_record

    (rep,) = for_record("2a399d687e225c92", "cpu-real")
    assert rep.requirements is TORCH_20 and TORCH_20.python_max == (3, 11)
    monkeypatch.setattr(runs.sys, "version_info", (3, 12, 0, "final", 0))
    assert runs._reproducer_missing(rep) == "needs Python <= 3.11: its release has no wheel for Python 3.12"
    notes = []
    records = {"2a399d687e225c92": next(r for r in _bundled() if r["id"] == "2a399d687e225c92")}
    (tmp_path / "2a399d687e225c92.json").write_text((data_dir() / "proofs/2a399d687e225c92.json").read_text())
    assert P.check_committed(records, folder=tmp_path, note=notes.append) == []
    assert "2a399d687e225c92: not re-run here, needs Python <= 3.11: its release has no wheel for Python 3.12" in notes
    assert notes[0] == "1/1 2a399d687e225c92: re-running on torch 2.0.1"  # a line per proof, CI logs included


def _bundled() -> list[dict]:
    from errkb.records.read import read_records
    from errkb.resources import data_dir

    return [item.record for item in read_records([data_dir()]) if item.record]


def test_each_committed_proof_says_what_it_exercised_as_its_reproducer_is_registered(tmp_path):
    """Strength and label have one home, the registry (case(..., label=...)); the committed proofs
    carry them as registered (relabel would write nothing), a labelled one names what it ran."""
    import shutil

    folder = tmp_path / "proofs"
    shutil.copytree(D.proofs_dir(), folder)
    assert P.relabel(folder) == []
    for rid, proof in D.all_proofs().items():
        assert proof["strength"] in ("strong", "labelled"), rid
        assert (proof["strength"] == "labelled") == bool(proof["label"]), rid
    # A proof that says something else is rewritten from the registry, nothing else in it touched.
    path = folder / "9ab8fc1f08d7fd42.json"
    before = json.loads(path.read_text())
    path.write_text(json.dumps({**before, "strength": "strong", "label": ""}))
    assert [w[0] for w in P.relabel(folder)] == ["9ab8fc1f08d7fd42"]
    assert json.loads(path.read_text()) == before


def test_a_labelled_reproducer_must_say_what_it_exercised():
    with pytest.raises(ValueError, match="says what it exercised"):
        case("0" * 16, "x.py", Requirements()).__class__(
            record_id="0" * 16, tier="cpu-real", name="x", driver=data_dir(), requirements=Requirements(),
            scenarios=(), strength="labelled")
    assert case("0" * 16, "x.py", Requirements(), label="through a check called directly").strength == "labelled"
    assert case("0" * 16, "x.py", Requirements()).strength == "strong"


def test_explain_and_stats_show_the_strength():
    runner = CliRunner()
    proof = D.load_proof("9ab8fc1f08d7fd42")
    out = json.loads(runner.invoke(cli, ["explain", "--json", proof["observed"]["exception_message"]]).output)
    shown = out["matches"][0]["proof"]
    assert shown["strength"] == "labelled" and "get_kv_cache_configs called directly" in shown["label"]
    assert f"(labelled: {proof['label']})" in shown["line"]
    text = runner.invoke(cli, ["explain", proof["observed"]["exception_message"]]).output
    assert "labelled: through vLLM's get_kv_cache_configs" in " ".join(text.split())
    cov = D.coverage(_bundled())
    cpu = [p for p in D.all_proofs().values() if p["tier"] == "cpu-real"]
    assert cov["strength"] == {"strong": sum(p["strength"] == "strong" for p in cpu),
                               "labelled": sum(p["strength"] == "labelled" for p in cpu)}
    st = cov["strength"]
    assert f"proven on CPU ({st['strong']} strong, {st['labelled']} labelled)" in runner.invoke(cli, ["stats"]).output
