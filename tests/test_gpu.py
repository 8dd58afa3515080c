"""Tier gpu: the fused allreduce+RMSNorm+FP8 kernel against its unfused reference, and
the seed's reproducer with NCCL. Skipped with "needs CUDA" where there is no GPU."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.support import SEED_FILE, SEED_ID

REPO = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.gpu


def _cuda_gpus() -> int:
    if importlib.util.find_spec("torch") is None:
        return 0
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


needs_cuda = pytest.mark.skipif(_cuda_gpus() == 0, reason="needs CUDA")


@pytest.fixture(scope="module")
def gpu_check():
    sys.path.insert(0, str(REPO / "scripts"))
    try:
        import gpu_check

        yield gpu_check
    finally:
        sys.path.remove(str(REPO / "scripts"))


@needs_cuda
def test_fused_kernel_matches_the_unfused_reference_within_one_fp8_ulp(gpu_check):
    result = gpu_check.check_fused_op()
    if result["outcome"] == "skipped":
        pytest.skip(result["reason"])
    assert result["outcome"] == "pass", result
    assert (result["conversions"]["bf16_mismatches"], result["conversions"]["fp8_mismatches"]) == (0, 0)
    for case in result["cases"]:
        assert case["residual_exact"]
        assert case["fp8_max_ulp"] <= 1
        assert case["fused_us"] > 0 and case["unfused_us"] > 0


@needs_cuda
def test_gpu_check_script_writes_its_report(tmp_path):
    report = tmp_path / "report.json"
    proc = subprocess.run(["bash", str(REPO / "scripts" / "gpu-check.sh"), str(report)], capture_output=True, text=True, timeout=330)
    data = json.loads(report.read_text())
    assert set(data["checks"]) == {"fused-allreduce-rmsnorm-fp8", "fused-workspace-nccl", "gpu-proofs"}
    assert proc.returncode == (1 if any(c["outcome"] in ("fail", "error", "timeout") for c in data["checks"].values()) else 0)


@pytest.mark.skipif(_cuda_gpus() < 2, reason="needs CUDA" if _cuda_gpus() == 0 else "needs 2 GPUs")
def test_reproducer_with_nccl(tmp_path):
    from errkb.cli import cli

    pytest.importorskip("vllm", reason="needs vllm")
    pytest.importorskip("flashinfer", reason="needs flashinfer")
    db = tmp_path / "store.duckdb"
    runner = CliRunner()
    assert runner.invoke(cli, ["ingest", "--db", str(db), str(SEED_FILE)]).exit_code == 0
    result = runner.invoke(cli, ["verify", "--db", str(db), SEED_ID, "--tier", "gpu", "--json"])
    checks = {r["check"]: r for r in json.loads(result.output)["results"]}
    a = checks["reproducer:fused-workspace-nccl:a-before"]
    assert a["outcome"] == "pass" and a["message_matched"] is True, a["reason"]
    assert checks["reproducer:fused-workspace-nccl:b-after"]["outcome"] == "pass"
    assert checks["reproducer:fused-workspace-nccl:c-control"]["outcome"] == "pass"


def test_gpu_proofs_check_reads_the_bundled_records_without_a_gpu(gpu_check):
    """The GPU proofs check must get as far as judging each GPU case on any machine: here
    (no CUDA) each is skipped with its reason, never an error reading the dataset (data/
    holds site indexes and tag maps beside the records)."""
    result = gpu_check.check_gpu_proofs(None)
    assert set(result["proofs"]) == {"0d976de03616c8f3", "97a67fede3271408"}
    if _cuda_gpus() == 0:
        assert result["outcome"] == "skipped", result["reason"]
        assert all("needs CUDA" in p["reason"] for p in result["proofs"].values())
