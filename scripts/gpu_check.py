"""Every GPU check of errkb, on a fresh GPU machine, writing one JSON report.

Run through ``scripts/gpu-check.sh``. Needs no network: torch and Triton are expected
to be installed; vLLM and flashinfer only for check (a).

(a) ``fused-workspace-nccl``: the seed record's reproducer with NCCL on 2 GPUs — vLLM
    itself raises the record's ValueError with VLLM_FLASHINFER_ALLREDUCE_BACKEND=trtllm
    on a 2-"node" topology (rank 1 behind a private /dev/shm), the fix (mnnvl) either
    creates the workspace or reports the multicast failure vLLM logs, and the control
    (shared /dev/shm) is one node and does not fire.
(b) ``fused-allreduce-rmsnorm-fp8``: on any single CUDA GPU, the operation the
    workspace exists for — allreduce over 2-4 rank buffers + residual add + RMSNorm +
    static per-tensor FP8 (e4m3) quantisation — in one Triton kernel (``fused_kernel.py``),
    checked against the unfused torch reference (exact, or within one FP8 ulp) and timed
    against it.

``--only fused-op-interpreted`` runs (b) with no GPU: the same kernel source in Triton's
CPU interpreter, untimed; ``--only fused-op-compile`` compiles it for sm_90 (H100/H200)
with Triton's own ptxas, also with no GPU. The reference, input generation and ulp comparison need only
torch, so they run (and are tested) on CPU too.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import platform
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SEED = REPO / "data" / "vllm-project" / "vllm" / "000_82135fca3cf8df92.txt"
FP8_MAX = 448.0  # largest finite float8_e4m3fn


# -- (b) the fused operation: inputs, reference, comparison (torch only) ------------------


def make_inputs(num_ranks: int, tokens: int, hidden: int, *, seed: int = 0, device: str = "cpu"):
    """Rank buffers, residual and RMSNorm weight (bf16) plus a static per-tensor FP8 scale."""
    import torch

    gen = torch.Generator(device="cpu").manual_seed(seed)
    xs = [torch.randn(tokens, hidden, generator=gen).to(torch.bfloat16).to(device) for _ in range(num_ranks)]
    residual = torch.randn(tokens, hidden, generator=gen).to(torch.bfloat16).to(device)
    weight = (1.0 + 0.1 * torch.randn(hidden, generator=gen)).to(torch.bfloat16).to(device)
    # |y| above 2.5 saturates at 448: the clamp is exercised on a few percent of values.
    scale = torch.tensor([2.5 / FP8_MAX], dtype=torch.float32, device=device)
    return xs, residual, weight, scale


def reference(xs, residual, weight, scale, eps: float = 1e-6):
    """The unfused path, rounding where vLLM's separate kernels round: allreduce output
    in bf16, residual add in bf16, RMSNorm in fp32 cast back to bf16, times the weight
    in bf16, then ``x / scale`` clamped and cast to float8_e4m3fn."""
    import torch

    acc = xs[0].float()
    for x in xs[1:]:
        acc = acc + x.float()
    reduced = acc.to(torch.bfloat16)
    h = (reduced.float() + residual.float()).to(torch.bfloat16)
    hf = h.float()
    variance = hf.pow(2).mean(dim=-1, keepdim=True)
    normed = (hf * torch.rsqrt(variance + eps)).to(torch.bfloat16)
    y = (normed.float() * weight.float()).to(torch.bfloat16)
    q = (y.float() / scale).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)
    return h, q


def fp8_ordinal(q):
    """Map float8_e4m3fn values to integers whose differences count ulps (sign-magnitude
    bits folded onto one monotonic line; +0 and -0 are the same point)."""
    import torch

    bits = q.view(torch.uint8).to(torch.int16)
    magnitude = bits & 0x7F
    return torch.where(bits >= 0x80, -magnitude, magnitude)


def fp8_ulp_distance(a, b):
    return (fp8_ordinal(a) - fp8_ordinal(b)).abs()


def compare(ref_h, ref_q, h, q) -> dict:
    dist = fp8_ulp_distance(ref_q.cpu(), q.cpu())
    return {
        "residual_exact": bool((ref_h.cpu() == h.cpu()).all()),
        "fp8_max_ulp": int(dist.max()),
        "fp8_exact_fraction": float((dist == 0).float().mean()),
        "fp8_elements_off_by_one_ulp": int((dist == 1).sum()),
        "ok": bool((ref_h.cpu() == h.cpu()).all()) and int(dist.max()) <= 1,
    }


def _time_cuda(fn, *args, iters: int = 50, warmup: int = 10) -> float:
    """Median microseconds of ``fn(*args)`` over ``iters`` CUDA-event-timed calls."""
    import torch

    for _ in range(warmup):
        fn(*args)
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn(*args)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1000.0)
    times.sort()
    return times[len(times) // 2]


GPU_SHAPES = [(2, 16, 8192), (2, 512, 8192), (4, 16, 8192), (4, 512, 8192), (4, 4096, 8192), (2, 128, 5120)]
# Small, since the interpreter runs the kernel in numpy; hidden sizes that are not a power
# of two exercise the masks, and 2, 3 and 4 ranks each branch of the allreduce.
INTERPRETER_SHAPES = [(2, 4, 64), (3, 5, 320), (4, 8, 256), (2, 16, 1024), (4, 3, 5120), (3, 2, 8192)]


def conversion_points(device: str = "cpu"):
    """fp32 values that decide a rounding: every finite float8_e4m3fn value, the midpoints
    between neighbours (the ties) and the fp32 values just either side of each, both
    signs, subnormals included; plus random values across the range."""
    import torch

    values = torch.arange(0, 0x7F, dtype=torch.uint8).view(torch.float8_e4m3fn).float()
    mids = (values[:-1] + values[1:]) / 2
    up, down = torch.full_like(mids, FP8_MAX), torch.zeros_like(mids)
    points = torch.cat([values, mids, torch.nextafter(mids, up), torch.nextafter(mids, down)])
    gen = torch.Generator(device="cpu").manual_seed(0)
    spread = torch.cat([torch.randn(8192, generator=gen) * 30, torch.randn(8192, generator=gen) * 0.01])
    spread = spread.clamp(-FP8_MAX / 2, FP8_MAX / 2)
    # bf16 decisions: the fp32 values exactly halfway between two bf16 neighbours (the
    # ties) and one fp32 ulp either side of them.
    high = spread.view(torch.int32) & ~0xFFFF
    bf16_ties = torch.cat([(high | low).view(torch.float32) for low in (0x7FFF, 0x8000, 0x8001)])
    return torch.cat([points, -points, spread, bf16_ties]).to(device)


def check_conversions(device: str) -> dict:
    """The kernel's bit-level roundings against torch's own casts: must be bit-exact."""
    import torch
    from fused_kernel import conversions

    x = conversion_points(device)
    bf16, fp8 = conversions(x)
    bf16_off = int((bf16 != x.to(torch.bfloat16)).sum())
    fp8_off = int((fp8.view(torch.uint8) != x.to(torch.float8_e4m3fn).view(torch.uint8)).sum())
    return {"points": x.numel(), "bf16_mismatches": bf16_off, "fp8_mismatches": fp8_off, "ok": bf16_off == fp8_off == 0}


def _check_kernel(shapes, device: str, *, timed: bool) -> dict:
    import torch
    from fused_kernel import fused

    conv = check_conversions(device)
    cases = []
    for num_ranks, tokens, hidden in shapes:
        xs, residual, weight, scale = make_inputs(num_ranks, tokens, hidden, seed=tokens + hidden + num_ranks, device=device)
        ref_h, ref_q = reference(xs, residual, weight, scale)
        h, q = fused(xs, residual, weight, scale)
        if timed:
            torch.cuda.synchronize()
        case = {"ranks": num_ranks, "tokens": tokens, "hidden": hidden, **compare(ref_h, ref_q, h, q)}
        if timed:
            case["unfused_us"] = round(_time_cuda(reference, xs, residual, weight, scale), 2)
            case["fused_us"] = round(_time_cuda(fused, xs, residual, weight, scale), 2)
            case["speedup"] = round(case["unfused_us"] / case["fused_us"], 2) if case["fused_us"] else None
        cases.append(case)
    ok = conv["ok"] and all(c["ok"] for c in cases)
    worst = max(c["fp8_max_ulp"] for c in cases)
    if ok:
        reason = (f"fused Triton kernel matches the unfused reference within {worst} FP8 ulp on {len(cases)} shapes; "
                  f"its roundings are bit-exact with torch's casts on {conv['points']} points")
    elif not conv["ok"]:
        reason = (f"the kernel's roundings differ from torch's casts: {conv['bf16_mismatches']} bf16 and "
                  f"{conv['fp8_mismatches']} FP8 of {conv['points']} points")
    else:
        reason = "fused kernel differs from the reference by more than one FP8 ulp (or residual differs)"
    return {"outcome": "pass" if ok else "fail", "reason": reason, "conversions": conv, "cases": cases}


def check_fused_op() -> dict:
    """(b) compiled for the GPU, checked and timed."""
    try:
        import torch
    except ImportError:
        return {"outcome": "skipped", "reason": "needs torch"}
    if not torch.cuda.is_available():
        return {"outcome": "skipped", "reason": "needs CUDA"}
    try:
        import triton  # noqa: F401
    except ImportError:
        return {"outcome": "skipped", "reason": "needs triton"}
    if torch.cuda.get_device_capability() < (8, 9):
        return {"outcome": "skipped", "reason": "needs an FP8-capable GPU (compute capability 8.9 or newer)"}
    result = _check_kernel(GPU_SHAPES, "cuda", timed=True)
    result["timing"] = "median of 50 CUDA-event-timed calls after 10 warm-up calls; unfused = the torch reference path (several kernels)"
    return result


def check_fused_op_interpreted() -> dict:
    """(b) without a GPU: the same kernel source run by Triton's CPU interpreter on CPU
    tensors, checked the same way (not timed: the interpreter says nothing of speed)."""
    try:
        import torch  # noqa: F401
        import triton  # noqa: F401
    except ImportError as e:
        return {"outcome": "skipped", "reason": f"needs {e.name}"}
    if os.environ.get("TRITON_INTERPRET") != "1":
        # Triton picks interpreter or compiler when a kernel is defined, at import.
        why = "TRITON_INTERPRET=1 must be set before fused_kernel is imported (use --only fused-op-interpreted)"
        return {"outcome": "error", "reason": why}
    return _check_kernel(INTERPRETER_SHAPES, "cpu", timed=False)


def check_fused_op_compiles(arch: int = 90) -> dict:
    """(b) compiled ahead of time for an H100/H200 (sm_90) by Triton's own compiler and
    ptxas, with no GPU: every (ranks, BLOCK) variant the GPU check launches must lower to
    a cubin. Says which PTX the roundings and divisions became."""
    try:
        import triton
        from triton.backends.compiler import GPUTarget
        from triton.compiler import ASTSource
    except ImportError as e:
        return {"outcome": "skipped", "reason": f"needs {e.name}"}
    if os.environ.get("TRITON_INTERPRET") == "1":
        return {"outcome": "error", "reason": "TRITON_INTERPRET=1 is set: nothing would be compiled"}
    import fused_kernel

    target = GPUTarget("cuda", arch, 32)
    variants = sorted({(ranks, triton.next_power_of_2(hidden)) for ranks, _tokens, hidden in GPU_SHAPES})
    compiled = []
    for ranks, block in variants:
        source = ASTSource(fused_kernel.fused_allreduce_add_rmsnorm_fp8, signature=fused_kernel.SIGNATURE,
                           constexprs={"NUM_RANKS": ranks, "BLOCK": block})
        kernel = triton.compile(source, target=target, options={"num_warps": fused_kernel.num_warps(block)})
        ptx = kernel.asm["ptx"]
        compiled.append({
            "kernel": "fused", "ranks": ranks, "block": block, "cubin_bytes": len(kernel.asm["cubin"]),
            "ptx_ops": sorted(set(re.findall(r"\b(?:div|rsqrt|cvt|st\.global)\.[\w.]+", ptx))),
        })
    conversions = triton.compile(
        ASTSource(fused_kernel.conversions_kernel, signature=fused_kernel.CONVERSIONS_SIGNATURE,
                  constexprs={"BLOCK": fused_kernel.CONVERSIONS_BLOCK}),
        target=target, options={"num_warps": 4},
    )
    compiled.append({"kernel": "conversions", "block": fused_kernel.CONVERSIONS_BLOCK, "cubin_bytes": len(conversions.asm["cubin"])})
    ok = all(c["cubin_bytes"] > 0 for c in compiled)
    return {
        "outcome": "pass" if ok else "fail",
        "reason": f"{len(compiled)} kernels compiled to sm_{arch} cubins" if ok else "a kernel produced no cubin",
        "target": f"cuda sm_{arch}",
        "variants": compiled,
    }


# -- (a) the seed's reproducer with NCCL ---------------------------------------------------


def check_reproducer_nccl(timeout_per_run: float = 75.0) -> dict:
    try:
        import torch
    except ImportError:
        return {"outcome": "skipped", "reason": "needs torch"}
    if torch.cuda.device_count() < 2:
        return {"outcome": "skipped", "reason": f"needs 2 GPUs (found {torch.cuda.device_count()})"}
    for module in ("vllm", "flashinfer"):
        try:
            __import__(module)
        except Exception as e:
            return {"outcome": "skipped", "reason": f"needs {module} ({type(e).__name__}: {e})"}
    if not shutil.which("unshare") or os.geteuid() != 0:
        return {"outcome": "skipped", "reason": "needs mount namespace (root and util-linux unshare)"}
    sys.path.insert(0, str(REPO))
    from errkb.verify.reproducers.fused_workspace import drive

    record = json.loads(SEED.read_text())["record"]
    pattern = re.compile(record["messagePattern"])
    scenarios = [
        ("a-before", {"split_shm": True}, "trtllm", 2, True),
        ("b-after", {"split_shm": True}, "mnnvl", 2, False),
        ("c-control", {"split_shm": False}, "trtllm", 1, False),
    ]
    runs = []
    for name, config, backend, want_nodes, want_raise in scenarios:
        started = time.monotonic()
        with tempfile.TemporaryDirectory(prefix=f"errkb-gpu-{name}-") as work:
            cwd = os.getcwd()
            os.chdir(work)
            try:
                # NCCL's shared-memory transport cannot cross the private /dev/shm.
                env = {"VLLM_FLASHINFER_ALLREDUCE_BACKEND": backend, "NCCL_SHM_DISABLE": "1"}
                observed = drive({**config, "dist_backend": "nccl", "env": env, "timeout_s": timeout_per_run})
            finally:
                os.chdir(cwd)
        ranks = observed["ranks"]
        counts = sorted({r.get("node_count") for r in ranks}, key=str)
        raiser = next((r for r in ranks if r.get("raised")), None)
        matched = bool(raiser and pattern.search(raiser.get("exception_message") or ""))
        if observed["timed_out"]:
            outcome, reason = "timeout", f"ranks did not finish within {timeout_per_run:g}s"
        elif any("setup_error" in r for r in ranks):
            outcome, reason = "error", next(r["setup_error"] for r in ranks if "setup_error" in r)
        elif counts != [want_nodes]:
            outcome, reason = "error", f"precondition failed: get_node_count() gave {counts}, expected {want_nodes}"
        elif want_raise:
            outcome = "pass" if matched else "fail"
            reason = f"raised {raiser.get('exception_class')} matching messagePattern" if matched else "the record's error was not raised"
        else:
            outcome = "fail" if matched else "pass"
            workspace = ranks[0].get("workspace")
            multicast = [line for r in ranks for line in r.get("log_tail", "").splitlines() if "multicast" in line.lower()]
            reason = ("the record's error is still raised" if matched else
                      f"no exception matching messagePattern; workspace={workspace}"
                      + (f"; then {raiser['exception_class']}: {raiser['exception_message']}" if raiser else "")
                      + (f"; vLLM logged: {multicast[0].strip()[:300]}" if multicast else ""))
        frames = (raiser or {}).get("frames") or []
        runs.append({
            "scenario": name, "outcome": outcome, "reason": reason, "duration_s": round(time.monotonic() - started, 2),
            "node_counts": [r.get("node_count") for r in ranks],
            "exception_class": (raiser or {}).get("exception_class"),
            "exception_message": (raiser or {}).get("exception_message"),
            "raise_site": frames[-1] if frames else None,
            "workspace": [r.get("workspace") for r in ranks],
            "rank_log_tails": [r.get("log_tail", "")[-1500:] for r in ranks],
        })
    bad = [r for r in runs if r["outcome"] != "pass"]
    return {
        "outcome": "pass" if not bad else bad[0]["outcome"],
        "reason": "all three NCCL runs as expected" if not bad else f"{bad[0]['scenario']}: {bad[0]['reason']}",
        "runs": runs,
    }


# -- the report -----------------------------------------------------------------------------


def check_gpu_proofs(write_dir: Path | None = None) -> dict:
    """(c) The GPU-tier single-process reproducers (CUDA OOM, CUDA in a forked child), judged
    like the CPU proofs: raised before, gone after, validation rejects before and accepts after,
    and a proven record's mutants caught.
    A proven one is written to ``write_dir`` (data/proofs/<id>.json's form) when given."""
    from errkb.records.read import read_records
    from errkb.resources import data_dir
    from errkb.store.db import bundled_record_paths
    from errkb.verify.proofs import prove_records
    from errkb.verify.reproducers import REGISTRY

    records = {item.record["id"]: item.record for item in read_records(bundled_record_paths(data_dir())) if item.record}
    proofs = {}
    for rep in REGISTRY:
        if rep.tier == "gpu" and rep.protocol == "single" and rep.record_id in records:
            # as `errkb prove --tier gpu --write DIR` does: a proven record's mutants are judged too
            proof, _ = next(prove_records([records[rep.record_id]], "gpu", write_dir))
            proofs[rep.record_id] = proof.to_dict()
    statuses = sorted({p["status"] for p in proofs.values()})
    if statuses == ["proven"]:
        outcome = "pass"
    elif statuses == ["skipped"]:
        outcome = "skipped"
    else:
        outcome = "fail"
    reason = "; ".join(f"{rid}: {p['status']} ({p['reason']})" for rid, p in proofs.items())
    return {"outcome": outcome, "reason": reason, "proofs": proofs}


def environment() -> dict:
    info: dict = {"hostname": socket.gethostname(), "os": platform.platform(), "python": platform.python_version()}
    for module in ("torch", "triton", "vllm", "flashinfer"):
        try:
            info[module] = getattr(__import__(module), "__version__", "?")
        except Exception as e:
            info[module] = f"unavailable ({type(e).__name__})"
    try:
        import torch

        info["cuda"] = torch.version.cuda
        info["gpu_count"] = torch.cuda.device_count() if torch.cuda.is_available() else 0
    except ImportError:
        pass
    if shutil.which("nvidia-smi"):
        out = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30)
        info["gpus"] = [line.strip() for line in out.stdout.splitlines() if line.strip()]
    return info


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="gpu-check-report.json", help="where to write the JSON report")
    parser.add_argument("--only", choices=["fused-op", "fused-op-interpreted", "fused-op-compile", "reproducer", "proofs"], default=None,
                        help="one check; fused-op-interpreted runs the kernel in Triton's CPU interpreter and "
                             "fused-op-compile compiles it for sm_90 (neither needs a GPU)")
    parser.add_argument("--proofs-out", type=Path, default=None,
                        help="write each proven GPU proof here (data/proofs/<id>.json's form) to commit it")
    args = parser.parse_args(argv)
    proofs_check = functools.partial(check_gpu_proofs, args.proofs_out)
    checks = {"fused-allreduce-rmsnorm-fp8": check_fused_op, "fused-workspace-nccl": check_reproducer_nccl,
              "gpu-proofs": proofs_check}
    if args.only == "fused-op":
        checks.pop("fused-workspace-nccl")
    elif args.only == "reproducer":
        checks.pop("fused-allreduce-rmsnorm-fp8")
    elif args.only == "proofs":
        checks = {"gpu-proofs": proofs_check}
    elif args.only == "fused-op-interpreted":
        # Before anything imports triton: it reads the setting once.
        os.environ["TRITON_INTERPRET"] = "1"
        checks = {"fused-allreduce-rmsnorm-fp8-interpreted": check_fused_op_interpreted}
    elif args.only == "fused-op-compile":
        checks = {"fused-allreduce-rmsnorm-fp8-compile": check_fused_op_compiles}
    started = time.monotonic()
    report = {"started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "environment": environment(), "checks": {}}
    for name, fn in checks.items():
        t0 = time.monotonic()
        try:
            result = fn()
        except Exception as e:
            result = {"outcome": "error", "reason": f"{type(e).__name__}: {e}", "traceback": traceback.format_exc()}
        result["duration_s"] = round(time.monotonic() - t0, 2)
        report["checks"][name] = result
        print(f"{result['outcome'].upper():8} {name}: {result['reason']} ({result['duration_s']}s)", flush=True)
        # Written after every check so a run cut short still leaves what it found.
        report["duration_s"] = round(time.monotonic() - started, 2)
        Path(args.out).write_text(json.dumps(report, indent=2, default=str))
    failed = [n for n, r in report["checks"].items() if r["outcome"] in ("fail", "error", "timeout")]
    print(f"report: {args.out}; {len(report['checks']) - len(failed)} ok/skipped, {len(failed)} failed", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
