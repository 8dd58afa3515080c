"""The GPU tier's fused allreduce+residual+RMSNorm+FP8 Triton kernel, checked without a
GPU: the same kernel source runs in Triton's CPU interpreter against the unfused torch
reference, and its bit-level roundings against torch's own casts; and it is compiled
ahead of time for an H100/H200 (sm_90) by Triton's own compiler and ptxas.

Builds (or reuses) a virtual environment with torch 2.13.0 (CPU) and Triton under the
user cache (~2 GB once), so this is tier ``kernel``.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from errkb.verify.reproducers import Requirements, ensure_venv
from tests.support import say

REPO = Path(__file__).resolve().parents[1]
TRITON_CPU = Requirements(pip_steps=(("torch==2.13.0",), ("triton==3.9.0", "numpy")), imports=("torch", "triton"))

pytestmark = [pytest.mark.kernel, pytest.mark.slow]


@pytest.fixture(scope="module")
def triton_python(heavy_cache):
    # Like the reproducer venvs: the suite's heavy cache, so a second run is warm.
    venv_cache = str(heavy_cache)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ERRKB_CACHE_DIR", venv_cache)
        return ensure_venv(TRITON_CPU, log=say).python


def gpu_check(python, only: str, out: Path) -> dict:
    proc = subprocess.run(
        [str(python), str(REPO / "scripts" / "gpu_check.py"), "--only", only, "--out", str(out)],
        capture_output=True, text=True, timeout=600,
    )
    return {"returncode": proc.returncode, "stdout": proc.stdout, "data": json.loads(out.read_text())}


@pytest.fixture(scope="module")
def report(triton_python, tmp_path_factory):
    return gpu_check(triton_python, "fused-op-interpreted", tmp_path_factory.mktemp("kernel") / "report.json")


@pytest.fixture(scope="module")
def compiled(triton_python, tmp_path_factory):
    return gpu_check(triton_python, "fused-op-compile", tmp_path_factory.mktemp("kernel") / "compiled.json")


def check(report) -> dict:
    return report["data"]["checks"]["fused-allreduce-rmsnorm-fp8-interpreted"]


def test_interpreted_kernel_matches_the_unfused_reference(report):
    result = check(report)
    assert result["outcome"] == "pass", result.get("traceback") or result["reason"]
    assert report["returncode"] == 0
    assert report["stdout"].startswith("PASS     fused-allreduce-rmsnorm-fp8-interpreted: fused Triton kernel matches")
    # Every allreduce branch (2, 3, 4 ranks) and hidden sizes that need the mask.
    assert {c["ranks"] for c in result["cases"]} == {2, 3, 4}
    assert any(c["hidden"] & (c["hidden"] - 1) for c in result["cases"])
    for case in result["cases"]:
        assert case["residual_exact"], case
        assert case["fp8_max_ulp"] <= 1, case


def test_kernel_roundings_are_bit_exact_with_torch_casts(report):
    """Every FP8 value, tie and neighbour of a tie, both signs, subnormals included, and
    the bf16 ties: the kernel rounds to nearest even exactly as torch does."""
    conv = check(report)["conversions"]
    assert conv["points"] > 2 * 4 * 126
    assert (conv["bf16_mismatches"], conv["fp8_mismatches"]) == (0, 0)


def test_the_report_names_the_interpreter_environment(report):
    env = report["data"]["environment"]
    assert env["torch"].startswith("2.13.0") and env["triton"] == "3.9.0"
    assert env["gpu_count"] == 0


def test_kernel_compiles_for_h100_h200_without_a_gpu(compiled):
    result = compiled["data"]["checks"]["fused-allreduce-rmsnorm-fp8-compile"]
    assert result["outcome"] == "pass", result.get("traceback") or result["reason"]
    assert compiled["returncode"] == 0
    assert result["target"] == "cuda sm_90"
    fused = [v for v in result["variants"] if v["kernel"] == "fused"]
    # Every (ranks, BLOCK) the GPU check launches: 2 and 4 ranks at hidden 5120/8192.
    assert {(v["ranks"], v["block"]) for v in fused} == {(2, 8192), (4, 8192)}
    assert all(v["cubin_bytes"] > 0 for v in result["variants"])
    assert [v["kernel"] for v in result["variants"]].count("conversions") == 1
    for v in fused:
        # The exact division asked for (a plain / would be div.full, approximate), and
        # FP8 stored as the bytes the kernel rounded itself.
        assert "div.rn.f32" in v["ptx_ops"] and "div.full.f32" not in v["ptx_ops"]
        assert "st.global.b8" in v["ptx_ops"]
