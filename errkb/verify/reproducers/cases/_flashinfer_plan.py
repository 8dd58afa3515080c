"""What BatchDecodeWithPagedKVCacheWrapper.plan() caches and run() checks, without a GPU.

plan() canonicalises its q_data_type / kv_data_type (kv defaults to q's) and stores them;
run() first calls flashinfer.utils._check_cached_qkv_data_type(q, k_cache, cached q, cached kv)
and only then launches CUDA kernels. Building the wrapper needs a CUDA workspace, so a case
takes plan()'s real defaults from its signature (_plan_impl's in 0.7.x), canonicalises them with flashinfer's own
function, and calls the real check with CPU tensors of the dtypes run() would get.
"""

import argparse
import inspect

# A case's MAPPING: the program's plan() keywords, as the flags parse() reads (fixstates.call_keywords).
PLAN_KEYWORDS = {"call": "plan", "keywords": {"q_data_type": "--q-data-type", "kv_data_type": "--kv-data-type"}}


def parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(allow_abbrev=False)
    p.add_argument("--q-dtype", default="bfloat16")  # dtype of the q given to run()
    p.add_argument("--kv-cache-dtype")  # dtype of the paged KV cache given to run()
    p.add_argument("--q-data-type")  # value given to plan(); plan()'s default when absent
    p.add_argument("--kv-data-type")
    a, _ = p.parse_known_args(argv)
    return a


def run_check(argv: list[str]) -> str:
    import torch
    from flashinfer import BatchDecodeWithPagedKVCacheWrapper
    from flashinfer.utils import _check_cached_qkv_data_type, canonicalize_torch_dtype

    a = parse(argv)
    # plan() forwards its keywords to _plan_impl (0.7.x), whose signature holds the defaults.
    plan = getattr(BatchDecodeWithPagedKVCacheWrapper, "_plan_impl", BatchDecodeWithPagedKVCacheWrapper.plan)
    defaults = inspect.signature(plan).parameters
    q_data_type = canonicalize_torch_dtype(a.q_data_type or defaults["q_data_type"].default)
    kv = a.kv_data_type or defaults["kv_data_type"].default
    kv_data_type = q_data_type if kv is None else canonicalize_torch_dtype(kv)
    q = torch.zeros(1, 32, 128, dtype=getattr(torch, a.q_dtype))  # batch 1, 32 q heads, head_dim 128
    k_cache = torch.zeros(1, 16, 8, 128, dtype=getattr(torch, a.kv_cache_dtype or a.q_dtype))  # NHD page of 16
    _check_cached_qkv_data_type(q, k_cache, q_data_type, kv_data_type)
    return (f"run()'s dtype check passed: q {q.dtype} == planned {q_data_type}, "
            f"KV cache {k_cache.dtype} == planned {kv_data_type}")
