"""0d976de0 (GPU): an allocation larger than the GPU's free memory.

The state's argv is the size the program allocates, in MiB (what the validation reads):
before, twice the device's total memory; after, 20 MiB.
"""

STATES = {"before": {"argv": ["--mib", "total*2"], "env": {}}, "after": {"argv": ["--mib", "20"], "env": {}}}


def mib(state) -> int:
    import torch

    value = state["argv"][state["argv"].index("--mib") + 1]
    total = torch.cuda.get_device_properties(0).total_memory >> 20
    return total * 2 if value == "total*2" else int(value)


def trigger(state):
    import torch

    x = torch.empty(mib(state) << 20, dtype=torch.uint8, device="cuda")
    return f"allocated {x.numel() >> 20} MiB"
