"""0d976de0 (GPU): an allocation larger than what is left free on the GPU.

The states are the record's exampleFix program: "before" allocates its ``# before:`` batch,
``torch.empty(64, 4096, 4096)`` (float32, 4096 MiB); "after" sets the fix's
``PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True`` before the first CUDA allocation and
allocates half the batch (2048 MiB). The state's argv is what the record's validation reads
(``python validate.py --mib N``, the size the next allocation asks for): 4096, then 2048.

Mapping, shown here and in the proof: the record's GPU (23.65 GiB, nearly all of it in use by
the process) had less free than the 4096 MiB batch; a runner's GPU is larger, so before the
program runs the process first fills the GPU until ``FREE_MIB`` (3072 MiB) stay free, the same
situation on any GPU: 4096 MiB does not fit, 2048 MiB does. The filler lives in the process
(setup runs before the trigger and before the validation), as the message's "this process has
... memory in use" says. Nothing here passes on its own: the trigger makes the real CUDA caching
allocator raise, and the validation reads the real free memory.

The record's pattern ends with its release's documentation link
(``pytorch.org/docs/stable/notes/cuda.html#environment-variables``); later PyTorch releases link
``docs.pytorch.org/...#optimizing-memory-usage-with-pytorch-cuda-alloc-conf``, so there the proof
fails on the message, truthfully. A record's id derives from its pattern, so that wording is a
variant or a new record, not an edit of this one.
"""

FREE_MIB = 3072
BATCH_MIB = 64  # one 4096 x 4096 float32 slice

STATES = {
    "before": {"argv": ["--mib", "4096"], "env": {}},
    "after": {"argv": ["--mib", "2048"], "env": {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}},
}
_held = []  # the filler, alive as long as the process


def setup(state):
    import os

    # The fix's variable must be set before the first CUDA allocation, and the filler is one.
    os.environ.update(state.get("env", {}))
    import torch

    free, _total = torch.cuda.mem_get_info()
    fill = free - (FREE_MIB << 20)
    if fill > 0:
        _held.append(torch.empty(fill, dtype=torch.uint8, device="cuda"))


def trigger(state):
    import torch

    mib = int(state["argv"][state["argv"].index("--mib") + 1])
    x = torch.empty(mib // BATCH_MIB, 4096, 4096, device="cuda")
    free, _total = torch.cuda.mem_get_info()
    return f"allocated torch.empty({mib // BATCH_MIB}, 4096, 4096) ({x.numel() * 4 >> 20} MiB); {free >> 20} MiB left free"
