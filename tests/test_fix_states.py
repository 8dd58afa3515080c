"""A proof's states come from the record (issue 25 item 1): the pure parse of an exampleFix into
its two states (errkb.verify.fixstates), a case's mapping of them and its check, `errkb verify`
no longer judging an 'after' state it skipped, and a record whose own fix does not fix anything
left unproven by a real reproducer run."""

from __future__ import annotations

import json
import sys

import pytest
from click.testing import CliRunner

from errkb.cli import cli
from errkb.verify import sandbox
from errkb.verify.fixstates import MappingError, NotExecutable, map_states, parse_fix
from errkb.verify.reproducers import REGISTRY, VLLM_033, ensure_venv, load_case
from tests.support import REPO, write_jsonl

VLLM_033_FAMILY = ("7c0d9ebbb94b23eb", "960c65f499751dfc", "4b92d3583fd8206a", "c1f5104f3e8bbca3", "c80189833ce236ed",
                   "7bf6c84e4a15af89", "777101fc2a08844b", "47b1bbca35b61896", "c7fb8f7d322e416f")


def bundled() -> dict[str, dict]:
    out = {}
    for path in (REPO / "data").glob("*/*/*.json"):
        record = json.loads(path.read_text(encoding="utf-8")).get("record") or {}
        out[record["id"]] = record
    return out


# -- the parse ---------------------------------------------------------------------------


def test_a_shell_fix_gives_each_states_command_flags_variables_and_wrappers():
    fix = ("# before\nexport VLLM_A=1\nsudo -E python -m vllm.entrypoints.openai.api_server --model m --tp 2 2>&1 | tee log\n"
           "\n# after\nNCCL_SOCKET_IFNAME=eth0 env VLLM_B=2 torchrun --nproc_per_node 2 train.py --backend nccl\n")
    states = parse_fix(fix)
    assert states.language == "shell"
    assert states.before.flags == ("--model", "m", "--tp", "2") and states.before.env == {"VLLM_A": "1"}
    assert states.before.wrappers == ("sudo", "| tee")
    assert states.after.program == ("python", "train.py", "--backend", "nccl")  # torchrun runs the script
    assert states.after.env == {"NCCL_SOCKET_IFNAME": "eth0", "VLLM_B": "2"}
    assert states.after.wrappers == ("env", "torchrun --nproc_per_node 2")


def test_docker_runs_variables_and_image_are_the_states():
    fix = ("# before\ndocker run --gpus all -e VLLM_X=1 vllm/vllm-openai --model m\n"
           "# after\ndocker run --gpus all -e VLLM_X=2 vllm/vllm-openai --model m\n")
    states = parse_fix(fix)
    assert states.before.env == {"VLLM_X": "1"} and states.after.env == {"VLLM_X": "2"}
    assert states.before.wrappers == ("docker run vllm/vllm-openai",)


@pytest.mark.parametrize(("fix", "reason"), [
    ("Set the flag to a lower value and restart the server.", "prose, not code"),
    ("vllm serve m --max-model-len 4096\n", "a shell fix without '# before' and '# after' sections"),
    ("# before\n\n# after\nexport VLLM_A=1\n", "the 'before' section has no command and sets no variable"),
    ("# before\nvllm serve 'm\n# after\nvllm serve m\n", "the 'before' section has an unbalanced quote"),
    ("import torch\n# before: the model on the GPU\nx = 1  # after\n", "the '# before:' line is not code"),
    ("import torch\n# before\n# model = (\n# after\nx = 1\n", "the commented-out '# before' block is not code"),
    ("import torch\nx = torch.zeros(1)\n", "no '# before' marker"),
])
def test_a_fix_that_cannot_be_split_into_two_runnable_states_is_not_executable_with_the_reason(fix, reason):
    parsed = parse_fix(fix)
    assert isinstance(parsed, NotExecutable)
    assert reason in str(parsed) and str(parsed).startswith("exampleFix not executable (")


def test_a_python_fixs_before_is_derived_from_its_own_markers():
    one_line = parse_fix("import os\n# before: os.getcwd(1)\nos.getcwd()  # after\nprint('ok')\n")
    assert one_line.before.program == "import os\n# before: os.getcwd(1)\nos.getcwd(1)\nprint('ok')\n"
    assert one_line.after.program == "import os\n# before: os.getcwd(1)\nos.getcwd()  # after\nprint('ok')\n"
    block = parse_fix("import torch\n\n# before\n# model = model.cuda()\n\n# after\nmodel = torch.nn.Linear(4, 4)\n")
    assert block.before.program == "import torch\n\nmodel = model.cuda()\n\n"
    # c7098e29's shape: `# before: <code>` over an `# after: <prose>` header, the code under it replaced
    header = parse_fix("import os\n# before: os.getcwd(1)\n# after: no argument\nos.getcwd(\n)\n\nprint('ok')\n")
    assert header.before.program == "import os\n# before: os.getcwd(1)\n# after: no argument\nos.getcwd(1)\n\nprint('ok')\n"
    # 2a399d68's and b2078d67's shape: `# before: <prose>` over commented-out code; as many statements of the
    # after block as the before block has are replaced, the rest kept
    prose = parse_fix("import os\n# before: a prose reason\n# x = os.getcwd(1)\n# after: fixed\nx = os.getcwd()\nprint(x)\n")
    assert prose.before.program == "import os\nx = os.getcwd(1)\n\nprint(x)\n"


@pytest.mark.parametrize("after_line", ["if ok: w.plan(1, q=2)  # after", "w = make(); w.plan(1, q=2)  # after"])
def test_a_marked_statement_that_shares_its_line_with_other_code_is_not_replaced(after_line):
    # replacing the whole line would drop the guard or the assignment beside the marked call
    fix = parse_fix(f"import os\n# before: w.plan(1)\n{after_line}\n")
    assert str(fix) == "exampleFix not executable (line 3 marked '# after' is not a statement of its own line)"


def test_a_python_fix_whose_before_line_is_prose_says_why_it_cannot_be_derived():
    # eda8b73d's shape until 2026-12-05: `# before: <prose>` over the statement marked `# after`
    fix = parse_fix("import os\n# before: kv_data_type=bfloat16 while the cache is stored in fp8\n"
                    "os.getcwd()  # after\n")
    assert "the '# before:' line is not code and no commented-out code follows it" in str(fix)


def test_a_before_line_of_code_over_an_after_header_replaces_the_whole_after_block():
    # 012b1dcb: `# before: rank = dist.get_rank()` over a commented `# after: ...` header whose
    # block sets up and initialises the group: the broken program calls get_rank() alone.
    fix = parse_fix(bundled()["012b1dcb44c97448"]["exampleFix"])
    before = [line for line in fix.before.program.splitlines() if line.strip() and not line.startswith("#")]
    assert before == ["import os", "import torch.distributed as dist", "rank = dist.get_rank()"]
    assert "dist.init_process_group(\"gloo\", rank=0, world_size=1)" in fix.after.program


def test_bundled_python_fixes_derive_the_broken_program_the_fix_names():
    records = bundled()
    assert 'init_method="localhost:29500"' in parse_fix(records["dd0a15082d9b0a12"]["exampleFix"]).before.program
    assert "wrapper.plan(kv_indptr, kv_indices, kv_last_page_len, 32, 8, 128, 16)\n" in parse_fix(
        records["c7098e296070ec95"]["exampleFix"]).before.program
    barrier = parse_fix(records["2a399d687e225c92"]["exampleFix"]).before.program
    assert "if dist.get_rank() == 0:\n    dist.new_group(ranks=[0]" in barrier


def test_every_bundled_fix_parses_to_two_states_or_says_why_not():
    for record_id, record in bundled().items():
        parsed = parse_fix(record["exampleFix"])
        if isinstance(parsed, NotExecutable):
            assert parsed.reason, record_id
        else:
            assert parsed.before != parsed.after, record_id


def test_the_parse_stays_linear_on_a_hostile_line():
    # 200k prefixes once took `verify` 166 s; a single pass over them is all the parse may make.
    fix = "# before\n" + "VLLM_A=1 " * 200_000 + "vllm serve m\n# after\nvllm serve m --x 1\n"
    parsed = parse_fix(fix)
    assert parsed.before.env == {"VLLM_A": "1"} and parsed.after.flags == ("m", "--x", "1")


# -- the mapping and its check -------------------------------------------------------------


MAPPING = {"values": {"org/model": "./model"}, "append": ["--device", "cuda"]}


def test_the_mapping_replaces_values_appends_flags_and_keeps_what_the_fix_changes():
    fix = parse_fix("# before\nvllm serve org/model --max-num-seqs 512\n# after\nvllm serve org/model --max-num-seqs 64\n")
    mapped = map_states(fix, MAPPING)
    assert mapped.states["before"]["argv"] == ["./model", "--max-num-seqs", "512", "--device", "cuda"]
    assert mapped.changes == ["--max-num-seqs"]
    assert "'org/model' -> './model'" in mapped.shown


def test_a_mapping_that_changes_something_else_fails_with_the_reason():
    fix = parse_fix("# before\nvllm serve org/model --max-num-seqs 512\n# after\nvllm serve other/model --max-num-seqs 64\n")
    with pytest.raises(MappingError, match=r"the record.s fix changes --max-num-seqs, arg 0; the case's mapped states change --max-num-seqs"):
        map_states(fix, {"values": {"org/model": "./model", "other/model": "./model"}})


FLAG_ENV = {**MAPPING, "flag_env": {"--gpu-memory-utilization": ("VLLM_CPU_KVCACHE_SPACE", {"0.3": "0", "0.9": "1"})}}


def test_a_flag_the_runner_expresses_as_a_variable_sets_it_per_state_and_stands_for_the_flag():
    fix = parse_fix("# before\nvllm serve org/model --gpu-memory-utilization 0.3\n"
                    "# after\nvllm serve org/model --gpu-memory-utilization=0.9\n")
    mapped = map_states(fix, FLAG_ENV)
    assert [mapped.states[s]["env"]["VLLM_CPU_KVCACHE_SPACE"] for s in ("before", "after")] == ["0", "1"]
    assert mapped.changes == ["--gpu-memory-utilization"]  # the variable's change is the flag's
    assert "--gpu-memory-utilization expressed as $VLLM_CPU_KVCACHE_SPACE (0.3 -> 0, 0.9 -> 1)" in mapped.shown
    # a value the case has no counterpart for is not run on half a state
    other = parse_fix("# before\nvllm serve org/model --gpu-memory-utilization 0.3\n"
                      "# after\nvllm serve org/model --gpu-memory-utilization 0.95\n")
    assert "'after' state's --gpu-memory-utilization 0.95 has no counterpart" in str(map_states(other, FLAG_ENV))
    # a non-fixing fix (the same flag in both states) sets the same variable: the fix changes nothing
    same = parse_fix("# before\nvllm serve org/model --gpu-memory-utilization 0.3\n"
                     "# after\nvllm serve org/model --gpu-memory-utilization 0.3\n")
    with pytest.raises(MappingError, match="the fix changes nothing"):
        map_states(same, FLAG_ENV)


def test_a_record_whose_after_is_its_before_fails_with_the_reason():
    fix = parse_fix("# before\nvllm serve org/model --max-num-seqs 512\n# after\nvllm serve org/model --max-num-seqs 512\n")
    with pytest.raises(MappingError, match="the fix changes nothing"):
        map_states(fix, MAPPING)


def test_a_variable_off_the_allow_list_never_reaches_a_run_and_so_the_fix_is_not_mapped():
    fix = parse_fix("# before\nexport LD_PRELOAD=/tmp/x.so\nvllm serve org/model\n# after\nvllm serve org/model\n")
    with pytest.raises(MappingError, match=r"changes \$LD_PRELOAD"):
        map_states(fix, MAPPING)


PLAN = {"python": True, "call_keywords": {"call": "plan", "keywords": {"q_data_type": "--q-data-type",
                                                                     "kv_data_type": "--kv-data-type"}},
        "append": ["--q-dtype", "bfloat16"]}
GPU_PROGRAM = ("import torch\nw = make(torch.empty(8, device='cuda'))\n# before: w.plan(1, 2)\n"
               "w.plan(1, 2, q_data_type=torch.bfloat16)  # after\n")


def test_a_program_that_cannot_run_here_gives_the_keywords_of_its_call_as_flags():
    mapped = map_states(parse_fix(GPU_PROGRAM), PLAN)
    assert mapped.states["before"]["argv"] == ["--q-dtype", "bfloat16"]  # plan()'s own default: no flag
    assert mapped.states["after"]["argv"] == ["--q-data-type=bfloat16", "--q-dtype", "bfloat16"]
    assert "the program's last plan() call read as flags (q_data_type= -> --q-data-type" in mapped.shown
    # a fix that does not change the call: both states give the same flags (the case's run then raises in both)
    same = parse_fix(GPU_PROGRAM.replace("q_data_type=torch.bfloat16", "kv_data_type='float16'"))
    assert map_states(same, PLAN).states["after"]["argv"][:1] == ["--kv-data-type=float16"]
    # None is the callee's own default: no flag; a value that begins with a dash stays the flag's value
    assert map_states(parse_fix(GPU_PROGRAM.replace("torch.bfloat16", "None")), PLAN).states["after"]["argv"] == [
        "--q-dtype", "bfloat16"]
    dash = parse_fix(GPU_PROGRAM.replace("torch.bfloat16", "'--kv-data-type'"))
    assert map_states(dash, PLAN).states["after"]["argv"][0] == "--q-data-type=--kv-data-type"


@pytest.mark.parametrize(("program", "reason"), [
    (GPU_PROGRAM.replace("w.plan(1, 2, q_data_type", "w.run(1, 2, q_data_type"), "the program never calls plan()"),
    (GPU_PROGRAM.replace("q_data_type=torch.bfloat16", "q_data_type=pick(torch)"),
     "the program's plan() computes q_data_type= (pick(torch)), which cannot be read without running it"),
    # a variable or another object's attribute is not the dtype it names: dt = torch.float16 is not "dt"
    (GPU_PROGRAM.replace("q_data_type=torch.bfloat16", "q_data_type=dt"),
     "the program's plan() computes q_data_type= (dt), which cannot be read without running it"),
    (GPU_PROGRAM.replace("q_data_type=torch.bfloat16", "q_data_type=args.dtype"),
     "the program's plan() computes q_data_type= (args.dtype), which cannot be read without running it"),
    (GPU_PROGRAM.replace("q_data_type=torch.bfloat16", "q_data_type=True"),
     "the program's plan() computes q_data_type= (True), which cannot be read without running it"),
    (GPU_PROGRAM.replace("q_data_type=torch.bfloat16", "**opts"),
     "the program's plan() passes **kwargs or *args, which cannot be read without running it"),
    # hostile text: a value nested a thousand deep is shown cut, never unparsed (a RecursionError)
    (GPU_PROGRAM.replace("q_data_type=torch.bfloat16", "q_data_type=" + "-" * 1000 + "x"),
     "the program's plan() computes q_data_type= (" + "-" * 60 + "), which cannot be read without running it"),
])
def test_a_call_the_case_cannot_read_is_not_executable_with_the_reason(program, reason):
    assert str(map_states(parse_fix(program), PLAN)) == f"exampleFix not executable ({reason})"


def test_a_wrapper_the_case_does_not_run_is_not_executable():
    fix = parse_fix("# before\ndocker run img --model org/model --x 1\n# after\ndocker run img --model org/model --x 2\n")
    assert "runs through 'docker run img'" in str(map_states(fix, MAPPING))


@pytest.mark.parametrize("record_id", VLLM_033_FAMILY)
def test_the_vllm_0_3_3_cases_take_their_states_from_the_records_example_fix(record_id):
    (repro,) = [r for r in REGISTRY if r.record_id == record_id and r.tier == "cpu-real"]
    module = load_case(repro)
    assert repro.requirements == VLLM_033 and not hasattr(module, "STATES")
    record = bundled()[record_id]
    mapped = map_states(parse_fix(record["exampleFix"]), module.MAPPING)
    for name in ("before", "after"):
        assert mapped.states[name]["argv"][-2:] == ["--device", "cuda"]
        assert all(not word.startswith(("meta-llama/", "TheBloke/", "facebook/", "mistralai/"))
                   for word in mapped.states[name]["argv"])  # every checkpoint name is a local folder


def test_the_committed_vllm_0_3_3_proofs_show_the_mapping_they_ran():
    from errkb.records import proofs as D

    for record_id in VLLM_033_FAMILY:
        proof = D.load_proof(record_id)
        (states,) = [c for c in proof["checks"] if c["check"] == "exampleFix:states"]
        assert states["outcome"] == "pass" and "mapped by the case" in states["reason"], record_id


# -- errkb verify no longer judges half a state -----------------------------------------------


@pytest.mark.skipif(not sandbox.capabilities().namespaces, reason="needs root and util-linux unshare (namespaces)")
def test_verify_does_not_judge_an_after_state_whose_inline_variables_it_could_not_capture(db_path, tmp_path, make_variant):
    rec = make_variant(7)
    rec["exampleFix"] = ("# before\ntorchrun --nproc_per_node 2 train.py --backend nccl\n\n"
                         "# after\nNCCL_SOCKET_IFNAME=eth0 torchrun --nproc_per_node 2 train.py --backend nccl\n")
    rec["validationCode"] = "import os\nassert os.environ.get('NCCL_SOCKET_IFNAME'), 'set NCCL_SOCKET_IFNAME'\n"
    path = write_jsonl(tmp_path / "records.jsonl", [rec])
    assert CliRunner().invoke(cli, ["ingest", "--db", str(db_path), str(path)]).exit_code == 0
    result = CliRunner().invoke(cli, ["verify", "--db", str(db_path), rec["id"], "--json"])
    checks = {r["check"]: r for r in json.loads(result.output)["results"]}
    assert checks["exampleFix:state:after"]["outcome"] == "skipped"  # needs torchrun
    assert "validationCode:after" not in checks  # never judged without its NCCL_SOCKET_IFNAME
    assert result.exit_code == 0, result.output


# -- a record whose own fix does not fix anything is not proven --------------------------------


@pytest.mark.cpu_real
@pytest.mark.slow
@pytest.mark.skipif(not sandbox.capabilities().namespaces, reason="needs namespaces (root and util-linux unshare)")
def test_a_record_whose_example_fix_does_not_remove_the_error_is_not_proven(heavy_cache, monkeypatch, db_path, tmp_path):
    # The audit's mutant: 7bf6c84e "fixed" with --max-num-seqs 512, which still exceeds --max-num-batched-tokens 128.
    monkeypatch.setenv("ERRKB_CACHE_DIR", str(heavy_cache))
    ensure_venv(VLLM_033, log=lambda line: print(line, file=sys.stderr))
    record = dict(bundled()["7bf6c84e4a15af89"])
    assert "--max-num-seqs 64" in record["exampleFix"]
    record["exampleFix"] = record["exampleFix"].replace("--max-num-seqs 64", "--max-num-seqs 512")
    path = write_jsonl(tmp_path / "records.jsonl", [record])
    assert CliRunner().invoke(cli, ["ingest", "--db", str(db_path), str(path)]).exit_code == 0
    result = CliRunner().invoke(cli, ["prove", "--db", str(db_path), record["id"], "--json"])
    assert result.exit_code == 1, result.output[-3000:]
    proof = json.loads(result.stdout)[0]
    assert proof["status"] == "failed"
    assert "reproducer:7bf6c84e_batched_lt_seqs:after: fail: the record's error is still raised" in proof["reason"]


@pytest.mark.parametrize(("fix", "status", "reason"), [
    ("# before\npython -m vllm.entrypoints.openai.api_server --model facebook/opt-125m --max-num-batched-tokens 128\n"
     "# after\npython -m vllm.entrypoints.openai.api_server --model facebook/opt-125m --max-num-batched-tokens 128\n",
     "failed", "exampleFix:states: fail: the exampleFix's states cannot be proven by this case: the record's exampleFix "
               "'after' state is its 'before' state: the fix changes nothing"),
    ("Lower --max-num-seqs below --max-num-batched-tokens and restart the server.",
     "unproven", "exampleFix not executable (prose, not code"),
])
def test_prove_on_a_scratch_store_does_not_prove_a_record_whose_fix_changes_nothing_or_is_prose(
        db_path, tmp_path, fix, status, reason):
    # Judged before any venv is built or anything runs: the record's states are the first check.
    record = dict(bundled()["7bf6c84e4a15af89"], exampleFix=fix)
    path = write_jsonl(tmp_path / "records.jsonl", [record])
    assert CliRunner().invoke(cli, ["ingest", "--db", str(db_path), str(path)]).exit_code == 0
    result = CliRunner().invoke(cli, ["prove", "--db", str(db_path), record["id"], "--json"])
    assert result.exit_code == 1, result.output[-3000:]
    proof = json.loads(result.stdout)[0]
    assert proof["status"] == status and proof["reason"].startswith(reason), proof["reason"]
    assert [c["check"] for c in proof["checks"]] == ["exampleFix:states"]


def test_the_rendezvous_case_runs_the_records_own_program_and_gives_the_validation_its_init_method():
    (repro,) = [r for r in REGISTRY if r.record_id == "dd0a15082d9b0a12" and r.tier == "cpu-real"]
    module = load_case(repro)
    assert not hasattr(module, "STATES")
    mapped = map_states(parse_fix(bundled()["dd0a15082d9b0a12"]["exampleFix"]), module.MAPPING)
    assert mapped.states["before"]["argv"] == ["localhost:29500"]  # what the user passes, as written
    assert mapped.states["after"]["argv"] == ["tcp://127.0.0.1:29500"]
    assert 'init_method="localhost:{port}"' in mapped.states["before"]["program"]  # the port: a free one when run
    assert mapped.changes == ["line 4"]


@pytest.mark.parametrize("line", [" " * 200_000, "# before: x" + " " * 200_000 + "y", "x = 1" + " " * 200_000 + "# afte",
                                  "x" + "#" + " " * 200_000 + "after_all"])
def test_a_hostile_line_is_read_in_linear_time(line):
    # the old line patterns ran a lazy group before a trailing \s*: 20,000 spaces took 3 s, 200,000 minutes
    import time

    from errkb.verify.mutants import non_fixing_fix

    fix = "import os\n" + line + "\nos.getcwd()  # after\n"
    started = time.perf_counter()
    parse_fix(fix)
    non_fixing_fix(fix)
    assert time.perf_counter() - started < 2.0
