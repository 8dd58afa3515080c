"""`errkb verify` and `errkb runs`: language detection, syntax, fix states, validation
runs in the sandbox, stored runs, exit codes and error text."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from errkb.cli import cli
from errkb.verify import identity, judge, sandbox, shell
from errkb.verify import language as lang
from errkb.verify import runs as verify
from tests.support import SEED_FILE, SEED_ID, variant, write_jsonl

needs_ns = pytest.mark.skipif(not sandbox.capabilities().namespaces, reason="needs root and util-linux unshare (namespaces)")


def run(*args):
    result = CliRunner().invoke(cli, [str(a) for a in args])
    return result


@pytest.fixture
def fresh_seed_db(db_path):
    """A store of the seed for this test alone (verify stores its runs there)."""
    assert run("ingest", "--db", db_path, SEED_FILE).exit_code == 0
    return db_path


def store_with(db_path, tmp_path, records):
    path = write_jsonl(tmp_path / "records.jsonl", records)
    result = run("ingest", "--db", db_path, path)
    assert result.exit_code == 0, result.output
    return db_path


@pytest.fixture
def fast_limits(monkeypatch):
    monkeypatch.setattr(verify, "SANDBOX_LIMITS", sandbox.Limits(wall_seconds=3, cpu_seconds=2, memory_bytes=1 << 30))


# -- language and syntax ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("code", "language"),
    [
        ("# before\nexport A=1\n\n# after\nexport A=2", "shell"),
        ("import os\nassert os.environ['A'] == '2'", "python"),
        ("pip install -U vllm\nnvidia-smi", "shell"),
        ("x = compute()\nprint(x)", "python"),
        ("#!/usr/bin/env python3\nmain()", "python"),
    ],
)
def test_detect_language(code, language):
    assert lang.detect_language(code)[0] == language


def test_other_languages_are_named_and_not_run():
    assert lang.detect_language("const x = require('fs');\nconsole.log(x)") == (None, "looks like javascript, not Python or shell")
    assert lang.detect_language("Set the flag to true before starting.")[0] is None


def test_syntax_errors_name_the_position():
    assert lang.syntax_error("def f(:\n  pass", "python") == "line 1, column 7: invalid syntax"
    err = lang.syntax_error("if [ -f x ]; then\n  echo hi\n", "shell")
    assert err is not None and "<snippet>" in err and "syntax error" in err
    assert lang.syntax_error("export A=1", "shell") is None


def test_split_states_of_the_seed_fix(seed_record):
    assert shell.split_states(seed_record["exampleFix"]) == {
        "before": "export VLLM_FLASHINFER_ALLREDUCE_BACKEND=trtllm  # breaks when TP spans nodes",
        "after": "export VLLM_FLASHINFER_ALLREDUCE_BACKEND=mnnvl",
    }
    assert shell.split_states("export A=1") is None


def test_record_drift_names_the_function_the_traceback_shows(seed_record):
    site = {"file": "vllm/distributed/device_communicators/flashinfer_all_reduce.py", "file_name": "flashinfer_all_reduce.py",
            "line": 221, "function": "get_fi_ar_quant_workspace"}
    assert judge.record_drift(seed_record, site) == []  # the seed, corrected, names the function it raises in
    # the seed as first ingested named a function its release does not have
    old = dict(seed_record, documentation=seed_record["documentation"].replace(
        "get_fi_ar_quant_workspace is", "get_flashinfer_allreduce_quant_workspace is"))
    assert judge.record_drift(old, site) == [
        "record's documentation names get_flashinfer_allreduce_quant_workspace; the traceback raises in get_fi_ar_quant_workspace"
    ]
    assert judge.record_drift(seed_record, {**site, "line": 230})[0] == (
        "record's lineNumber is 221; raised at line 230 (inside the record's window)")
    assert judge.record_drift(seed_record, {**site, "line": 400})[0] == "record's lineNumber is 221; raised at line 400"


# -- the CLI --------------------------------------------------------------------------------


def test_verify_seed_captures_both_states_and_skips_missing_vllm(fresh_seed_db):
    result = run("verify", "--db", fresh_seed_db, SEED_ID, "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    by_check = {r["check"]: r for r in report["results"]}
    assert by_check["exampleFix:syntax"]["outcome"] == "pass"
    assert by_check["validationCode:syntax"]["outcome"] == "pass"
    assert by_check["exampleFix:state:before"]["details"]["state_env"] == {"VLLM_FLASHINFER_ALLREDUCE_BACKEND": "trtllm"}
    assert by_check["exampleFix:state:after"]["details"]["state_env"] == {"VLLM_FLASHINFER_ALLREDUCE_BACKEND": "mnnvl"}
    # errkb's own environment has no torch (nor vLLM): skipped with the first package the validation imports named,
    # not "fail" (it asks torch.distributed whether it runs inside a rank before it imports vLLM).
    for state in ("before", "after"):
        assert by_check[f"validationCode:{state}"]["outcome"] == "skipped"
        assert by_check[f"validationCode:{state}"]["reason"] == "needs torch"
    assert report["ok"] is True

    runs = run("runs", "--db", fresh_seed_db, "flashinfer-allreduce-quantization-fusion-is-not-su", "--json")
    assert runs.exit_code == 0
    stored = json.loads(runs.output)
    assert [r["check"] for r in stored] == [r["check"] for r in report["results"]]
    first = stored[0]
    assert first["record_id"] == SEED_ID and len(first["record_hash"]) == 64
    assert set(first["runner"]) >= {"hostname", "os", "python", "packages", "gpus"}
    assert first["runner"]["gpus"] == identity.gpu_identity()


def test_tier_syntax_runs_nothing(fresh_seed_db):
    result = run("verify", "--db", fresh_seed_db, SEED_ID, "--tier", "syntax", "--json")
    assert result.exit_code == 0
    assert {r["check"] for r in json.loads(result.output)["results"]} == {"exampleFix:syntax", "validationCode:syntax"}


def test_gpu_tier_is_skipped_with_needs_cuda_without_a_gpu(fresh_seed_db):
    if identity.gpu_identity():
        pytest.skip("a GPU is present here")
    result = run("verify", "--db", fresh_seed_db, SEED_ID, "--tier", "gpu", "--json")
    assert result.exit_code == 0
    gpu = [r for r in json.loads(result.output)["results"] if r["tier"] == "gpu"]
    assert [(r["check"], r["outcome"], r["reason"]) for r in gpu] == [("reproducer:fused-workspace-nccl", "skipped", "needs CUDA")]


@needs_ns
def test_validation_must_fail_before_and_pass_after(db_path, tmp_path, make_variant):
    good = make_variant(1)
    good["exampleFix"] = "# before\nexport VLLM_TEST_MODE=broken\n\n# after\nexport VLLM_TEST_MODE=fixed\n"
    good["validationCode"] = "import os\nassert os.environ.get('VLLM_TEST_MODE') == 'fixed', 'VLLM_TEST_MODE must be fixed'\n"
    blind = make_variant(2)
    blind["exampleFix"] = good["exampleFix"]
    blind["validationCode"] = "import os\nprint('looks fine to me')\n"
    store_with(db_path, tmp_path, [good, blind])

    ok = run("verify", "--db", db_path, good["id"], "--json")
    assert ok.exit_code == 0, ok.output
    checks = {r["check"]: r for r in json.loads(ok.output)["results"]}
    assert checks["validationCode:before"]["outcome"] == "pass"
    assert checks["validationCode:before"]["reason"] == "rejects the 'before' state, as it must (AssertionError: VLLM_TEST_MODE must be fixed)"
    assert checks["validationCode:after"]["outcome"] == "pass"

    bad = run("verify", "--db", db_path, blind["id"])
    assert bad.exit_code == 1
    assert "passed in the 'before' state: the validation does not detect the broken state" in bad.output
    assert bad.output.splitlines()[-2:] == ["6 checks: 5 pass, 1 fail",
                                            f"{blind['id']}  unproven: passing checks are not proof (errkb prove)"]


@pytest.mark.parametrize(("section", "flags"), [
    ("python -m vllm.entrypoints.openai.api_server --model m --tensor-parallel-size 8",
     ["--model", "m", "--tensor-parallel-size", "8"]),
    ("export A=1\nCUDA_VISIBLE_DEVICES=0 python3 -m pkg.mod --a 1 \\\n  --b 'x y'  # why\n", ["--a", "1", "--b", "x y"]),
    ("vllm serve m --max-model-len 4096 2>&1 | tee serve.log", ["m", "--max-model-len", "4096"]),
    ("torchrun --nproc-per-node 2 train.py --lr 1", ["--nproc-per-node", "2", "train.py", "--lr", "1"]),
    ("pip install vllm", None),
    ("# only a comment", None),
    ("python -m x --a 'unbalanced", None),
    # the last command of a line, not the first: `pip install -U vllm && vllm serve ...`
    ("pip install -U vllm && vllm serve m --max-model-len 2048", ["m", "--max-model-len", "2048"]),
    ("cd /srv && vllm serve m --x 1 || true", ["m", "--x", "1"]),
    ("vllm serve m --x 1 && echo started", ["m", "--x", "1"]),
    # wrappers run the command itself; python's own options are not the program's
    ("sudo -E python -m vllm.entrypoints.openai.api_server --model m", ["--model", "m"]),
    ("env CUDA_VISIBLE_DEVICES=0,1 nohup vllm serve m --tp 2 &", ["m", "--tp", "2"]),
    ("python -u -m pkg.mod --a 1", ["--a", "1"]),
    ("python3 -X dev validate.py --a 1", ["--a", "1"]),
    # a here-document's body is not a command
    ("vllm serve m --x 1\ncat > c.yaml <<'EOF'\nmax-num-seqs: 8\nEOF", ["m", "--x", "1"]),
    ("vllm serve m --config c.yaml --y 2 <<-END\n\t--not a flag\n\tEND", ["m", "--config", "c.yaml", "--y", "2"]),
    # separators and redirections glued to a word; quoted ones are the value's
    ("echo start; vllm serve m --x 1; echo done", ["m", "--x", "1"]),
    ("vllm serve m --x 1|tee log", ["m", "--x", "1"]),
    ("vllm serve m --x 1 >serve.log 2>&1", ["m", "--x", "1"]),
    ("vllm serve m --x 1 &>>serve.log", ["m", "--x", "1"]),
    ("python run.py --sep ';' --pipe 'a|b' --cmp '2>1'", ["--sep", ";", "--pipe", "a|b", "--cmp", "2>1"]),
    # a container's command, never the container tool's own options
    ("docker run --gpus all -p 8000:8000 --ipc=host --rm vllm/vllm-openai:latest --model m --tp 2",
     ["--model", "m", "--tp", "2"]),
    ("docker run --runtime nvidia -e HF_TOKEN=x -v ~/.cache:/root/.cache img vllm serve m --max-model-len 8192",
     ["m", "--max-model-len", "8192"]),
    ("sudo docker run -it --shm-size 16g img python3 -m vllm.entrypoints.openai.api_server --model m",
     ["--model", "m"]),
    ("docker exec -it vllm-server python -u check.py --a 1", ["--a", "1"]),
    ("docker run --rm img", None),
    # vllm serve's model is a positional: the validation needs it as much as the flags
    ("vllm serve Qwen/Qwen3-8B 2>&1 | tail -n 3", ["Qwen/Qwen3-8B"]),
    # a redirection in the middle: the shell passes the words after its target too
    ("vllm serve m --port 8000 2>/dev/null --tp 2", ["m", "--port", "8000", "--tp", "2"]),
    ("nohup torchrun train.py >serve.log 2>&1 --lr 1 &", ["--lr", "1"]),
    ('python run.py --tensor-parallel-size "2">serve.log', ["--tensor-parallel-size", "2"]),
    # subshells and groups
    ("(cd /w && python run.py --tp 2)", ["--tp", "2"]),
    ("{ python run.py --x 1; }", ["--x", "1"]),
    ("cd /w && (python run.py --tp 2 &)", ["--tp", "2"]),
    # more of docker's own options, `docker container run`, a command given to bash -c
    ("docker run --cpu-shares 512 --link db --gpus all vllm/vllm-openai --model m", ["--model", "m"]),
    ("docker container run -a stdout img python run.py --x 1", ["--x", "1"]),
    ("docker run img bash -c 'vllm serve m --x 1'", ["m", "--x", "1"]),
])
def test_command_flags_are_what_the_state_runs_with(section, flags):
    assert shell.command_flags(section) == flags


READS_WORKERS = """import argparse
p = argparse.ArgumentParser()
p.add_argument('--workers', type=int, default=1)
a, _ = p.parse_known_args()
assert a.workers <= 16, f'--workers {a.workers} > 16'
"""
# Asserts only when a flag the broken command leaves out is given: passes 'before' too.
BLIND_TO_DEFAULTS = """import argparse
p = argparse.ArgumentParser()
p.add_argument('--workers', type=int)
p.add_argument('--limit', type=int)
a, _ = p.parse_known_args()
if a.limit is not None:
    assert a.workers <= a.limit
"""


def test_validation_is_given_each_states_flags(db_path, tmp_path, make_variant):
    """`python validate.py <your flags>`: the flags of the fix's before/after commands."""
    fix = "# before\npython -m widget.serve --model m --workers 64\n\n# after\npython -m widget.serve --model m --workers 8\n"
    good, blind = make_variant(4), make_variant(5)
    good.update(exampleFix=fix, validationCode=READS_WORKERS)
    blind.update(exampleFix=fix, validationCode=BLIND_TO_DEFAULTS)
    store_with(db_path, tmp_path, [good, blind])

    ok = run("verify", "--db", db_path, good["id"], "--json")
    checks = {r["check"]: r for r in json.loads(ok.output)["results"]}
    assert checks["validationCode:before"]["outcome"] == "pass"
    assert checks["validationCode:before"]["reason"] == (
        "rejects the 'before' state, as it must (AssertionError: --workers 64 > 16) (given: --model m --workers 64)")
    assert checks["validationCode:after"]["reason"] == "passes in the 'after' state (given: --model m --workers 8)"

    bad = run("verify", "--db", db_path, blind["id"])
    assert bad.exit_code == 1
    assert ("passed in the 'before' state (given: --model m --workers 64): the validation does not detect the broken state"
            in bad.output)


def test_validation_needing_flags_no_state_gives_is_skipped_naming_them(db_path, tmp_path, make_variant):
    rec = make_variant(6)
    rec["exampleFix"] = "# before\nexport VLLM_TEST_MODE=a\n\n# after\nexport VLLM_TEST_MODE=b\n"
    rec["validationCode"] = "import argparse\np = argparse.ArgumentParser()\np.add_argument('--model', required=True)\np.parse_args()\n"
    store_with(db_path, tmp_path, [rec])
    result = run("verify", "--db", db_path, rec["id"], "--json")
    assert result.exit_code == 0, result.output
    checks = {r["check"]: r for r in json.loads(result.output)["results"]}
    for state in ("before", "after"):
        assert checks[f"validationCode:{state}"]["outcome"] == "skipped"
        assert checks[f"validationCode:{state}"]["reason"] == (
            "needs the user's --model; errkb prove runs it on its reproducer's states")


@needs_ns
def test_missing_package_is_skipped_not_failed(db_path, tmp_path, make_variant):
    rec = make_variant(3)
    rec["exampleFix"] = None
    rec["validationCode"] = "import errkb_no_such_package_xyz\nerrkb_no_such_package_xyz.check()\n"
    store_with(db_path, tmp_path, [rec])
    result = run("verify", "--db", db_path, rec["id"], "--json")
    assert result.exit_code == 0
    checks = {r["check"]: r for r in json.loads(result.output)["results"]}
    assert checks["validationCode:run"]["outcome"] == "skipped"
    assert checks["validationCode:run"]["reason"] == "needs errkb_no_such_package_xyz"
    assert checks["exampleFix:language"]["reason"] == "no exampleFix"


@needs_ns
def test_hostile_validation_code_times_out_and_is_stored(db_path, tmp_path, make_variant, fast_limits):
    rec = make_variant(4)
    rec["exampleFix"] = "export VLLM_TEST_MODE=fixed"
    rec["validationCode"] = "import os\nwhile True:\n    os.getpid()\n"
    store_with(db_path, tmp_path, [rec])
    result = run("verify", "--db", db_path, rec["id"], "--json")
    assert result.exit_code == 1
    checks = {r["check"]: r for r in json.loads(result.output)["results"]}
    assert checks["validationCode:after"]["outcome"] == "timeout"
    stored = json.loads(run("runs", "--db", db_path, rec["id"], "--json").output)
    assert [r["outcome"] for r in stored if r["check"] == "validationCode:after"] == ["timeout"]


def test_python_syntax_error_fails_with_position(db_path, tmp_path, make_variant):
    rec = make_variant(5)
    rec["validationCode"] = "import os\nif os.environ.get('A') ==:\n    pass\n"
    store_with(db_path, tmp_path, [rec])
    result = run("verify", "--db", db_path, rec["id"], "--tier", "syntax")
    assert result.exit_code == 1
    assert "python syntax error: line 2, column 26: invalid syntax" in result.output


def test_usage_errors_exit_2_with_one_line(fresh_seed_db):
    none = run("verify", "--db", fresh_seed_db)
    assert none.exit_code == 2
    assert none.output.strip() == "Error: name at least one record (id or slug), or use --all"
    both = run("verify", "--db", fresh_seed_db, SEED_ID, "--all")
    assert both.exit_code == 2
    assert both.output.strip() == "Error: give record ids/slugs or --all, not both"
    unknown = run("verify", "--db", fresh_seed_db, "no-such-record")
    assert unknown.exit_code == 2
    assert unknown.output.strip() == f"Error: no record with id or slug 'no-such-record' in {fresh_seed_db}"
    tier = run("verify", "--db", fresh_seed_db, SEED_ID, "--tier", "quantum")
    assert tier.exit_code == 2


def test_runs_without_runs_exits_1(fresh_seed_db):
    result = run("runs", "--db", fresh_seed_db, SEED_ID)
    assert result.exit_code == 1
    assert "no runs for 2e3fedf4ee50f84a (run `errkb verify`)" in result.output
    assert json.loads(run("runs", "--db", fresh_seed_db, "--json").output) == []


@needs_ns
def test_fix_needing_the_network_or_a_missing_command_is_skipped(db_path, tmp_path, make_variant):
    rec = make_variant(6)
    rec["exampleFix"] = ("# before\nerrkb-no-such-tool --version\n\n"
                         "# after\npython3 -c \"import urllib.request as u; u.urlopen('http://127.0.0.1:9', timeout=2)\"\n")
    rec["validationCode"] = None
    store_with(db_path, tmp_path, [rec])
    result = run("verify", "--db", db_path, rec["id"], "--json")
    assert result.exit_code == 0, result.output
    checks = {r["check"]: r for r in json.loads(result.output)["results"]}
    assert (checks["exampleFix:state:before"]["outcome"], checks["exampleFix:state:before"]["reason"]) == ("skipped", "needs errkb-no-such-tool")
    assert (checks["exampleFix:state:after"]["outcome"], checks["exampleFix:state:after"]["reason"]) == ("skipped", "needs network")


@needs_ns
def test_python_dash_m_of_a_missing_package_is_skipped_naming_it(db_path, tmp_path, make_variant):
    rec = make_variant(7)
    rec["exampleFix"] = "# before\npython -m errkb_absent_pkg.serve --util 90\n\n# after\npython -m errkb_absent_pkg.serve --util 0.9\n"
    rec["validationCode"] = ("import argparse\np = argparse.ArgumentParser()\np.add_argument('--util', type=float)\n"
                             "assert 0 < p.parse_known_args()[0].util <= 1.0\n")
    store_with(db_path, tmp_path, [rec])
    result = run("verify", "--db", db_path, rec["id"], "--json")
    assert result.exit_code == 0, result.output
    checks = {r["check"]: r for r in json.loads(result.output)["results"]}
    for state in ("before", "after"):
        assert (checks[f"exampleFix:state:{state}"]["outcome"], checks[f"exampleFix:state:{state}"]["reason"]) == ("skipped", "needs errkb_absent_pkg")
    # No environment could be captured, but the commands' flags are the states the
    # validation judges: it must reject the broken one and accept the fixed one.
    assert checks["validationCode:before"]["outcome"] == "pass"
    assert checks["validationCode:after"]["outcome"] == "pass"
    # An always-true validation is caught the same way.
    rec["validationCode"] = "util = 0.9\nassert 0 < util <= 1.0\n"
    rec["id"] = rec["id"][:-1] + ("0" if rec["id"][-1] != "0" else "1")
    rec["slug"] += "-blind"
    store_with(db_path, tmp_path, [rec])
    blind = run("verify", "--db", db_path, rec["id"], "--json")
    assert blind.exit_code == 1
    checks = {r["check"]: r for r in json.loads(blind.output)["results"]}
    assert checks["validationCode:before"]["outcome"] == "fail"


# -- passing checks are not proof ------------------------------------------------------------


def test_a_record_without_a_proof_is_reported_unproven_never_proven(db_path, seed_record):
    unproven = variant(seed_record, 1)  # the seed's text under a new id: no reproducer, no proof
    src = write_jsonl(db_path.parent / "records.jsonl", [seed_record, unproven])
    assert CliRunner().invoke(cli, ["ingest", "--db", str(db_path), str(src)]).exit_code == 0
    result = CliRunner().invoke(cli, ["verify", "--db", str(db_path), "--tier", "syntax", SEED_ID, unproven["id"]])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert f"{unproven['id']}  unproven: passing checks are not proof (errkb prove)" in lines
    assert any(line.startswith(f"{SEED_ID}  proven on CPU: Reproduced with ") for line in lines)
    as_json = json.loads(CliRunner().invoke(cli, ["verify", "--db", str(db_path), "--tier", "syntax", "--json",
                                                  unproven["id"]]).output)
    assert as_json["proofs"] == {unproven["id"]: {"status": "unproven", "line": "Not reproduced yet", "library": None,
                                                  "date": None, "strength": None, "label": None}}


def test_a_state_whose_environment_was_not_captured_is_not_judged_on_its_flags_alone(db_path, tmp_path, make_variant):
    # The section exports VLLM_TEST_MODE and then runs a command that is not installed: its
    # environment is unknown, so its flags alone are not that state.
    rec = make_variant(8)
    rec["exampleFix"] = ("# before\nexport VLLM_TEST_MODE=bad\npython -m errkb_absent_pkg.serve --workers 64\n\n"
                         "# after\nexport VLLM_TEST_MODE=good\npython -m errkb_absent_pkg.serve --workers 8\n")
    rec["validationCode"] = READS_WORKERS
    store_with(db_path, tmp_path, [rec])
    checks = {r["check"]: r for r in json.loads(run("verify", "--db", db_path, rec["id"], "--json").output)["results"]}
    assert "validationCode:before" not in checks and "validationCode:after" not in checks
    assert checks["validationCode:run"]["outcome"] == "pass"
    assert shell.fix_flags({"exampleFix": ("shell", rec["exampleFix"])}) == {}
    # with the environment captured the flags go with it
    assert shell.fix_flags({"exampleFix": ("shell", rec["exampleFix"])}, {"before": {"VLLM_TEST_MODE": "bad"}}) == {
        "before": ["--workers", "64"]}


def test_command_flags_stays_linear_and_bounded_on_hostile_lines():
    # thousands of nested `docker run` used to recurse past Python's limit (RecursionError out of
    # `errkb verify`), and thousands of VAR=1 prefixes were sliced off one by one (quadratic)
    assert shell.command_flags("docker run i " * 5000 + "python run.py --x 1") == ["--x", "1"]
    assert shell.command_flags("A=1 " * 200_000 + "python run.py --x 1") == ["--x", "1"]
    assert shell.command_flags("python run.py \\\n" * 100_000 + "  --x 1") == ["--x", "1"]


def test_a_snippet_too_deep_for_pythons_parser_is_a_finding_not_a_crash():
    assert lang.python_syntax_error("a b " * 2000 + "\n") is not None
    assert lang.python_syntax_error("(" * 5000 + ")" * 5000) is not None
