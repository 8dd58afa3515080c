"""Mutants (issue 25 item 5): each kind derived from a proven record really changes what it
claims; the prove machinery kills them (a fake widget case in the sandbox, and a real torch
record in its reproducer venv); a survivor of a kind not awaiting other work fails
`errkb prove --check`, naming the record and the kind."""

from __future__ import annotations

import json
import shutil
import sys

import pytest
from click.testing import CliRunner

from errkb.cli import cli
from errkb.kb import KnowledgeBase
from errkb.records import proofs as D
from errkb.verify import mutants as M
from errkb.verify import proofs as P
from errkb.verify import sandbox
from errkb.verify.fixstates import parse_fix
from errkb.verify.judge import message_matches
from errkb.verify.reproducers import Requirements, case
from errkb.verify.shell import split_states

needs_ns = pytest.mark.skipif(not sandbox.capabilities().namespaces, reason="needs namespaces (root and util-linux unshare)")


def _committed():
    kb = KnowledgeBase.open()
    return [(kb.get(rid), proof) for rid, proof in D.all_proofs().items() if proof.get("status") == "proven"]


def _mutant(kind: str, record: dict, proof: dict | None = None) -> M.Mutant:
    return next(m for m in M.derive(record, proof) if m.kind == kind)


def test_every_kind_is_registered_with_the_runs_that_can_kill_it():
    assert set(M.KINDS) == {"non-fixing-fix", "wrong-message", "wrong-class", "always-true-validation",
                            "always-false-validation", "crashing-validation"}
    assert M.KINDS["wrong-message"].steps == M.KINDS["wrong-class"].steps == ()  # re-judged, nothing re-run
    assert M.KINDS["always-true-validation"].steps == (frozenset({("before", "validate")}),)
    assert M.KINDS["always-false-validation"].steps == (frozenset({("after", "validate")}),)
    assert M.KINDS["non-fixing-fix"].steps == (frozenset({("after", "trigger")}),)


def test_the_message_mutant_of_every_committed_proof_is_a_different_message_its_pattern_matches():
    for record, proof in _committed():
        m = _mutant("wrong-message", record, proof)
        assert m.record is not None, (record["id"], m.change)
        new = m.record
        assert new["errorMessage"] != record["errorMessage"] and new["messagePattern"] != record["messagePattern"]
        assert message_matches(new, new["errorMessage"])[0], record["id"]
        assert not message_matches(new, record["errorMessage"])[0], record["id"]
        assert not message_matches(new, proof["observed"]["exception_message"])[0], record["id"]
        assert {k: v for k, v in new.items() if k not in ("errorMessage", "messagePattern")} == \
            {k: v for k, v in record.items() if k not in ("errorMessage", "messagePattern")}


def test_the_class_mutant_is_neither_the_records_class_nor_the_observed_one():
    for record, proof in _committed():
        new = _mutant("wrong-class", record, proof).record
        assert new["errorClass"] not in (record["errorClass"], proof["observed"]["exception_class"])
    # a documented wrapper's inner class is no wrong class either
    new = _mutant("wrong-class", {"errorClass": "TypeError"},
                  {"observed": {"exception_class": "ValidationError"}}).record
    assert new["errorClass"] not in ("TypeError", "ValidationError", "ValueError")


def test_the_validation_mutants_accept_everything_reject_everything_or_crash_first():
    record = {"id": "x", "validationCode": "assert True\n", "exampleFix": None}
    always_true = _mutant("always-true-validation", record).record["validationCode"]
    exec(compile(always_true, "<validationCode>", "exec"), {})  # accepts: nothing raised
    with pytest.raises(AssertionError):
        exec(compile(_mutant("always-false-validation", record).record["validationCode"], "<validationCode>", "exec"), {})
    crashing = _mutant("crashing-validation", record).record["validationCode"]
    assert crashing.endswith("assert True\n")
    with pytest.raises(ValueError, match="invalid literal for int"):
        exec(compile(crashing, "<validationCode>", "exec"), {})
    for kind in ("always-true-validation", "always-false-validation", "crashing-validation"):
        m = _mutant(kind, {"id": "x", "validationCode": "  \n"})
        assert (m.record, m.change) == (None, "the record has no validationCode")


def test_the_non_fixing_fix_makes_the_after_section_the_before_one():
    fix = "# before\nvllm serve m --max-model-len 131072\n\n# after (fits)\nvllm serve m --max-model-len 16384\n"
    new, change = M.non_fixing_fix(fix)
    states = split_states(new)
    assert states["after"] == states["before"] == "vllm serve m --max-model-len 131072"
    assert "# after (fits)" in new and "replaced" in change
    # a Python fix: the statement marked '# after' becomes the '# before:' code
    py = ('import torch.distributed as dist\n# before: dist.init_process_group("mpi")\n'
          'if dist.is_mpi_available():  # after\n    dist.init_process_group("mpi")\nelse:\n    dist.init_process_group("gloo")\n')
    new, _ = M.non_fixing_fix(py)
    assert new == ('import torch.distributed as dist\n# before: dist.init_process_group("mpi")\n'
                   'dist.init_process_group("mpi")  # after\n')
    # the mark on the last line of a statement that spans lines (eda8b73d's plan() call): the whole statement
    multi = "import os\n# before: os.getcwd(1)\nos.getcwd(\n    )  # after\nprint('ok')\n"
    new, _ = M.non_fixing_fix(multi)
    assert new == "import os\n# before: os.getcwd(1)\nos.getcwd(1)  # after\nprint('ok')\n"
    assert parse_fix(new).after.program.replace("  # after", "") == parse_fix(new).before.program
    assert M.non_fixing_fix("# before: the rank is read first\n# after: init first\ninit()\n")[0] is None
    assert M.non_fixing_fix(None) == (None, "the record has no exampleFix")


def test_a_commented_out_before_block_is_the_before_code_of_the_non_fixing_fix():
    # 35ef3efc's form: the broken code commented out under `# before`, the fix under `# after`
    fix = "import torch\n\n# before\n# model = torch.nn.Linear(4, 4).cuda()\n\n# after\ndevice = 'cpu'\nmodel = torch.nn.Linear(4, 4).to(device)\n"
    new, _ = M.non_fixing_fix(fix)
    after = new.split("# after\n", 1)[1]
    assert after.strip() == "model = torch.nn.Linear(4, 4).cuda()"
    # a commented block that is prose (or a lone word) is no code to make the 'after' equal to
    for prose in ("# before\n# the model is moved to CUDA unconditionally\n\n# after\nx = 1\n",
                  "# before\n# model\n\n# after\nx = 1\n"):
        assert M.non_fixing_fix(prose)[0] is None


def test_the_non_fixing_fix_is_derived_from_most_committed_records_and_says_why_not_for_the_rest():
    derived = [r["id"] for r, p in _committed() if _mutant("non-fixing-fix", r, p).record is not None]
    assert len(derived) >= 20
    for record, proof in _committed():
        m = _mutant("non-fixing-fix", record, proof)
        if m.record is None:
            assert "prose" in m.change or "neither" in m.change, (record["id"], m.change)
        else:
            assert m.record["exampleFix"] != record["exampleFix"]


def test_the_score_counts_killed_over_tried_and_only_unexpected_survivors_fail():
    kinds = {"wrong-message": {"verdict": "killed"}, "wrong-class": {"verdict": "survived", "awaits": "a reason"},
             "always-true-validation": {"verdict": "survived"}, "non-fixing-fix": {"verdict": "not derived"}}
    assert M.score(kinds) == {"killed": 1, "tried": 3}  # an awaited survivor still counts as a survivor
    assert [k for k, _ in M.unexpected_survivors({"kinds": kinds})] == ["always-true-validation"]


def test_stats_prints_the_mutation_score_and_json_gives_it_by_kind(tmp_path, monkeypatch):
    folder = tmp_path / "proofs"
    folder.mkdir()  # one committed proof, its mutants section replaced
    proof = json.loads((D.proofs_dir() / "0da69f8814de0754.json").read_text())
    proof["mutants"] = {"kinds": {"wrong-message": {"verdict": "killed"}, "wrong-class": {"verdict": "survived"}}}
    (folder / "0da69f8814de0754.json").write_text(json.dumps(proof))
    score = D.mutation_score(list(KnowledgeBase.open().records()), folder)
    assert (score["killed"], score["tried"], score["judged"]) == (1, 2, 1)
    assert D.mutation_line(score).startswith("mutation score: 1/2 killed (survived: wrong-class 1)")
    result = CliRunner().invoke(cli, ["stats"])
    assert "mutation score: " in result.output
    data = json.loads(CliRunner().invoke(cli, ["stats", "--json"]).output)
    assert set(data["mutation_score"]) == {"killed", "tried", "proven", "judged", "by_kind"}


# -- judged by the real prove machinery ------------------------------------------------

# A widget "library" in errkb's own interpreter (as tests/test_proof.py's): fast, in the real sandbox.
CASE = '''
STATES = {"before": {"argv": ["--limit", "2"], "env": {}}, "after": {"argv": ["--limit", "5"], "env": {}}}


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


def _record(seed_record: dict, validation: str) -> dict:
    lines = CASE.strip("\n").splitlines()  # the record's raise site is the case's own: widgets.py, in trigger()
    return {**seed_record, "id": "feedfacefeedface", "slug": "widget-count-exceeds-limit",
            "errorMessage": "Widget count 3 exceeds limit 2", "messagePattern": r"Widget count (.+?) exceeds limit (.+?)",
            "errorClass": "ValueError", "validationCode": validation, "filePath": "widgets.py",
            "sourceCode": "\n".join(lines), "sourceCodeStart": 1, "sourceCodeEnd": len(lines),
            "lineNumber": next(n for n, text in enumerate(lines, 1) if "raise ValueError" in text)}


@pytest.fixture
def widget_case(tmp_path, monkeypatch):
    folder = tmp_path / "cases"
    folder.mkdir()
    folder.chmod(0o755)
    tmp_path.chmod(0o755)
    (folder / "widgets.py").write_text(CASE)
    monkeypatch.setenv("ERRKB_GPU_PYTHON", sys.executable)
    rep = case("feedfacefeedface", "widgets.py", Requirements(system_python=True))
    return rep.__class__(**{**rep.__dict__, "case": folder / "widgets.py"})


def _widget(seed_record, rep, monkeypatch):
    monkeypatch.setattr(P, "for_record", lambda rid, tier=None: [rep] if rid == "feedfacefeedface" else [])
    record = _record(seed_record, REAL_VALIDATION)
    proof = P.prove_record(record)
    assert proof.status == "proven", proof.reason
    return record, proof


@needs_ns
def test_the_prove_machinery_kills_the_message_and_validation_mutants_of_a_widget(seed_record, widget_case, monkeypatch):
    record, proof = _widget(seed_record, widget_case, monkeypatch)
    kinds = P.judge_mutants(record, proof)["kinds"]
    assert kinds["wrong-message"]["verdict"] == "killed"
    assert kinds["wrong-message"]["by"] == "reproducer:widgets:before"
    assert kinds["always-true-validation"]["by"] == "validationCode:before:in-reproducer"
    assert kinds["always-false-validation"]["by"] == "validationCode:after:in-reproducer"
    assert kinds["crashing-validation"]["by"] == "validationCode:before:in-reproducer"
    assert "crashed before any verdict" in kinds["crashing-validation"]["why"]
    # a wrong class fails the proof (the observed error is judged against the record)
    assert kinds["wrong-class"]["verdict"] == "killed"
    # the widget case hard-codes its states: a non-fixing exampleFix survives, and says what it awaits
    assert kinds["non-fixing-fix"]["verdict"] == "survived" and kinds["non-fixing-fix"]["awaits"] == M.AWAITS["non-fixing-fix"]


@needs_ns
def test_a_surviving_mutant_makes_check_fail_naming_the_record_and_kind(seed_record, widget_case, monkeypatch,
                                                                     tmp_path):
    record, proof = _widget(seed_record, widget_case, monkeypatch)
    proof.bound = D.binding(record, None)
    P.write_proof(proof, tmp_path)
    records = {record["id"]: record}
    assert P.check_committed(records, tmp_path) == []  # today's one survivor is the awaited kind
    monkeypatch.setattr(M, "awaits", lambda kind, proof: None)  # a case that takes its states from the record
    broken = P.check_committed(records, tmp_path)
    assert [(rid, why.split(" survived")[0]) for rid, why in broken] == [("feedfacefeedface", "mutant non-fixing-fix")]
    assert P.check_committed(records, tmp_path, mutants=False) == []


@pytest.mark.cpu_real
@pytest.mark.slow
@needs_ns
def test_the_mutants_of_a_real_torch_record_die_and_a_survivor_fails_check(heavy_cache, monkeypatch, tmp_path):
    monkeypatch.setenv("ERRKB_CACHE_DIR", str(heavy_cache))
    result = CliRunner().invoke(cli, ["prove", "0da69f8814de0754", "--json"])
    assert result.exit_code == 0, result.output[-3000:]
    kinds = json.loads(result.stdout)[0]["mutants"]["kinds"]
    for kind in ("wrong-message", "always-true-validation", "always-false-validation", "crashing-validation"):
        assert kinds[kind]["verdict"] == "killed", (kind, kinds[kind])
    assert "expected the record's error; saw RuntimeError: Distributed package doesn't have MPI" in kinds["wrong-message"]["why"]
    assert kinds["wrong-class"]["verdict"] == "killed", kinds["wrong-class"]
    # 0da69f88's case still hard-codes its states: its non-fixing exampleFix survives, saying so
    assert kinds["non-fixing-fix"]["verdict"] == "killed" or kinds["non-fixing-fix"]["awaits"]
    survivors = [k for k, v in kinds.items() if v["verdict"] == "survived"]
    if survivors:
        shutil.copy(D.proofs_dir() / "0da69f8814de0754.json", tmp_path)
        monkeypatch.setattr(M, "awaits", lambda kind, proof: None)
        check = CliRunner().invoke(cli, ["prove", "--check", "--proofs", str(tmp_path)])
        assert check.exit_code == 1, check.output[-3000:]
        assert f"NO LONGER HOLDS 0da69f8814de0754: mutant {survivors[0]} survived" in check.output
