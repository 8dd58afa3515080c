"""The fused operation the seed's workspace exists for, as one Triton kernel:
allreduce over 2-4 rank buffers + residual add + RMSNorm + static per-tensor FP8
(e4m3) quantisation.

Its own module because Triton resolves the helpers a kernel calls through the module's
globals, and ``gpu_check`` must import on machines without Triton.
"""

import torch
import triton
import triton.language as tl


# Rounding to bf16 and FP8 is done on the bits, not by the backend's conversions: those
# roundings are then the same compiled for a GPU and in Triton's CPU interpreter, which
# truncates fp32 -> bf16 and drops the carry of fp32 -> fp8 rounding (both seen with
# Triton 3.9), so the kernel's numerics are checked on every CI run and not only on a
# GPU. (rsqrt and the reduction order still differ between the two: within one FP8 ulp.)
@triton.jit
def round_to_bf16(x):
    """fp32 -> the nearest bf16 (ties to even), still in fp32; a later cast is exact."""
    bits = x.to(tl.uint32, bitcast=True)
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return bits.to(tl.float32, bitcast=True)


@triton.jit
def fp8_e4m3_bits(x):
    """fp32 in [-448, 448] -> float8_e4m3fn bits, nearest with ties to even."""
    bits = x.to(tl.uint32, bitcast=True)
    sign = (bits >> 24) & 0x80
    magnitude = bits & 0x7FFFFFFF
    # Normal (|x| >= 2**-6, fp32 exponent 121): rebias the exponent 127 -> 7 and round
    # 23 mantissa bits to 3; a carry out of the mantissa bumps the exponent.
    normal = ((magnitude - (120 << 23)) + 0x7FFFF + ((magnitude >> 20) & 1)) >> 20
    # Subnormal: multiples of 2**-9, rounded to even by adding and taking away 1.5 * 2**23.
    subnormal = ((tl.abs(x) * 512.0 + 12582912.0) - 12582912.0).to(tl.uint32)
    return (tl.where(magnitude >= (121 << 23), normal, subnormal) | sign).to(tl.uint8)


@triton.jit
def fused_allreduce_add_rmsnorm_fp8(
    x0, x1, x2, x3, residual_ptr, weight_ptr, scale_ptr, residual_out_ptr, q_out_ptr,
    hidden, eps, NUM_RANKS: tl.constexpr, BLOCK: tl.constexpr,
):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < hidden
    base = row.to(tl.int64) * hidden
    # Allreduce: the rank buffers summed in fp32 in rank order, rounded to bf16 as the
    # communication result would be.
    acc = tl.load(x0 + base + offs, mask=mask, other=0.0).to(tl.float32)
    if NUM_RANKS > 1:
        acc += tl.load(x1 + base + offs, mask=mask, other=0.0).to(tl.float32)
    if NUM_RANKS > 2:
        acc += tl.load(x2 + base + offs, mask=mask, other=0.0).to(tl.float32)
    if NUM_RANKS > 3:
        acc += tl.load(x3 + base + offs, mask=mask, other=0.0).to(tl.float32)
    reduced = round_to_bf16(acc)
    res = tl.load(residual_ptr + base + offs, mask=mask, other=0.0).to(tl.float32)
    h = round_to_bf16(reduced + res)
    tl.store(residual_out_ptr + base + offs, h.to(tl.bfloat16), mask=mask)
    # div_rn: a plain / compiles to an approximate division on NVIDIA GPUs; torch's mean divides exactly.
    variance = tl.div_rn(tl.sum(h * h, axis=0), hidden.to(tl.float32))
    normed = round_to_bf16(h * tl.math.rsqrt(variance + eps))
    w = tl.load(weight_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    y = round_to_bf16(normed * w)
    scale = tl.load(scale_ptr)
    q = tl.minimum(tl.maximum(tl.div_rn(y, scale), -448.0), 448.0)
    tl.store(q_out_ptr + base + offs, fp8_e4m3_bits(q), mask=mask)


# The kernel's argument types, for compiling it ahead of time (no GPU, no tensors).
SIGNATURE = {
    **{f"x{i}": "*bf16" for i in range(4)},
    "residual_ptr": "*bf16", "weight_ptr": "*bf16", "scale_ptr": "*fp32", "residual_out_ptr": "*bf16",
    "q_out_ptr": "*u8", "hidden": "i32", "eps": "fp32", "NUM_RANKS": "constexpr", "BLOCK": "constexpr",
}


def num_warps(block: int) -> int:
    return 8 if block >= 4096 else 4


def fused(xs, residual, weight, scale, eps: float = 1e-6):
    """The fused operation in one launch: returns (new residual in bf16, FP8 output)."""
    tokens, hidden = residual.shape
    residual_out = torch.empty_like(residual)
    q = torch.empty(tokens, hidden, dtype=torch.float8_e4m3fn, device=residual.device)
    ptrs = list(xs) + [xs[0]] * (4 - len(xs))  # unused slots: never read (NUM_RANKS is constexpr)
    block = triton.next_power_of_2(hidden)
    fused_allreduce_add_rmsnorm_fp8[(tokens,)](
        *ptrs, residual, weight, scale, residual_out, q.view(torch.uint8), hidden, eps,
        NUM_RANKS=len(xs), BLOCK=block, num_warps=num_warps(block),
    )
    return residual_out, q


CONVERSIONS_BLOCK = 1024
CONVERSIONS_SIGNATURE = {"x_ptr": "*fp32", "bf16_ptr": "*bf16", "fp8_ptr": "*u8", "n": "i32", "BLOCK": "constexpr"}


@triton.jit
def conversions_kernel(x_ptr, bf16_ptr, fp8_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    tl.store(bf16_ptr + offs, round_to_bf16(x).to(tl.bfloat16), mask=mask)
    tl.store(fp8_ptr + offs, fp8_e4m3_bits(x), mask=mask)


def conversions(x):
    """The kernel's two roundings applied to fp32 ``x`` (in [-448, 448]): (bf16, float8_e4m3fn)."""
    bf16 = torch.empty(x.shape, dtype=torch.bfloat16, device=x.device)
    fp8 = torch.empty(x.shape, dtype=torch.float8_e4m3fn, device=x.device)
    conversions_kernel[(triton.cdiv(x.numel(), CONVERSIONS_BLOCK),)](
        x, bf16, fp8.view(torch.uint8), x.numel(), BLOCK=CONVERSIONS_BLOCK,
    )
    return bf16, fp8
