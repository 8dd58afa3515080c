"""Hostile input, round 3 (issue 26): nothing a record supplies reaches a process that holds
root or capabilities. A record's exampleFix "before" section put a folder holding a
``mount`` script first on PATH (or exported a ``mount`` function) and the multi-rank
driver ran it as root with CAP_SYS_ADMIN. The states and planted folders here are
generated (seeded); every run is a real sandbox process under its wall-time limit."""

from __future__ import annotations

import random
import shutil
import sys
import uuid
from pathlib import Path

import pytest

from errkb.verify import runs, sandbox
from errkb.verify.reproducers import HERE, Reproducer, Requirements, Scenario

CAPS = sandbox.capabilities()
needs_ns = pytest.mark.skipif(not CAPS.namespaces, reason="needs root and util-linux unshare (namespaces)")

ALLOWED = {"VLLM_FLASHINFER_ALLREDUCE_BACKEND": "trtllm", "NCCL_DEBUG": "INFO", "MASTER_PORT": "29511",
           "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True", "TORCH_DIST_INIT_BARRIER": "1"}
# exported by a hostile section: (shell line, the name that must be dropped)
HOSTILE = [
    ("export PATH={planted}:$PATH", "PATH"),
    ("export PATH=.:$PATH", "PATH"),
    ("mount() {{ /usr/bin/id -u > /dev/stderr; }}; export -f mount", "BASH_FUNC_mount%%"),
    ("sh() {{ :; }}; export -f sh", "BASH_FUNC_sh%%"),
    ("export LD_PRELOAD={planted}/evil.so", "LD_PRELOAD"),
    ("export LD_LIBRARY_PATH={planted}", "LD_LIBRARY_PATH"),
    ("export PYTHONPATH={planted}", "PYTHONPATH"),
    ("export PYTHONSTARTUP={planted}/start.py", "PYTHONSTARTUP"),
    ("export BASH_ENV={planted}/env.sh", "BASH_ENV"),
    ("export CUDA_INJECTION64_PATH={planted}/inject.so", "CUDA_INJECTION64_PATH"),
    ("export NCCL_NET_PLUGIN={planted}/net.so", "NCCL_NET_PLUGIN"),
    ("export VLLM_PLUGINS=evil", "VLLM_PLUGINS"),
    ("export IFS=/", "IFS"),
    ("export ERRKB_SANDBOX_RUN_AS=0:0", "ERRKB_SANDBOX_RUN_AS"),
]
PLANTED_NAMES = ("mount", "umount", "unshare", "sh", "bash", "env", "python", "python3", "nsenter", "setpriv")


@pytest.fixture
def planted():
    """A folder of scripts named like the commands a privileged helper would look up, each
    writing who ran it (uid, effective capabilities) to stderr, which ends up in the
    run's output or a rank's log, then running the real command. In a system folder the
    sandbox shows (a planted folder must be visible there to be a threat at all)."""
    folder = Path(f"/usr/local/lib/errkb-test-planted-{uuid.uuid4().hex[:8]}")
    folder.mkdir(parents=True)
    try:
        for name in PLANTED_NAMES:
            real = shutil.which(name, path="/usr/bin:/bin:/usr/sbin:/sbin") or "/bin/true"
            script = folder / name
            script.write_text(
                "#!/bin/sh\n"
                f"echo \"PLANTED {name} uid=$(/usr/bin/id -u) $(/bin/grep CapEff /proc/self/status)\" >&2\n"
                f"exec {real} \"$@\"\n")
            script.chmod(0o755)
        (folder / "start.py").write_text("import os, sys; print('PLANTED python-startup uid=%d' % os.getuid(), file=sys.stderr)\n")
        (folder / "sitecustomize.py").write_text((folder / "start.py").read_text())
        (folder / "env.sh").write_text("echo \"PLANTED bash-env uid=$(/usr/bin/id -u)\" >&2\n")
        folder.chmod(0o755)
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def hostile_section(rng: random.Random, planted: Path) -> tuple[str, set[str], dict[str, str]]:
    picks = rng.sample(HOSTILE, k=rng.randint(3, len(HOSTILE)))
    allowed = dict(rng.sample(sorted(ALLOWED.items()), k=rng.randint(1, len(ALLOWED))))
    lines = [line.format(planted=planted) for line, _ in picks] + [f"export {k}={v}" for k, v in allowed.items()]
    rng.shuffle(lines)
    return "\n".join(lines), {name for _, name in picks}, allowed


@needs_ns
@pytest.mark.parametrize("seed", range(4))
def test_a_state_keeps_only_allow_listed_variables_and_says_which_it_dropped(seed, planted):
    section, hostile, allowed = hostile_section(random.Random(seed), planted)
    env, res = runs.capture_state(section)
    assert res.outcome == "pass", res
    assert env == allowed
    note = next(n for n in res.notes if n.startswith("dropped from the state"))
    named = set(note.split(": ", 1)[1].split(", "))
    assert named <= hostile
    # a function can be lost on the way already: the planted `env` is a dash script, and
    # dash passes no variable whose name is not a shell name
    assert {n for n in hostile - named if not n.startswith("BASH_FUNC_")} == set(), note


def test_the_allow_list_itself():
    kept, dropped = sandbox.allowed_state_env({**ALLOWED, "PATH": "/x", "BASH_FUNC_mount%%": "() { :; }",
                                               "LD_AUDIT": "x", "PYTHONHOME": "/x", "HOME": "/x", "A B": "1",
                                               "VLLM_X": "a\0b", "TORCH_LIBRARY_PATH": "/x", "HF_TOKEN_PATH": "/x"})
    assert kept == ALLOWED
    assert dropped == sorted(["PATH", "BASH_FUNC_mount%%", "LD_AUDIT", "PYTHONHOME", "HOME", "A B", "VLLM_X",
                              "TORCH_LIBRARY_PATH", "HF_TOKEN_PATH"])


def driver_reproducer() -> Reproducer:
    """The real multi-rank driver (fused_workspace.py) on this interpreter: its ranks stop
    at `import torch`, after everything privileged in the driver has happened."""
    scenarios = (
        Scenario(name="a-before", description="hostile before state, rank 1 on its own /dev/shm", state="before",
                 config={"split_shm": True}, expect_raise=True, expect_node_count=2),
        Scenario(name="c-control", description="shared /dev/shm", state="before", config={"split_shm": False}),
    )
    return Reproducer(record_id="2e3fedf4ee50f84a", tier="cpu-real", name="hostile-driver", driver=HERE / "fused_workspace.py",
                      requirements=Requirements(linux_features=("mount namespace",), system_python=True),
                      scenarios=scenarios, timeout_s=90.0)


@needs_ns
@pytest.mark.parametrize("seed", range(2))
def test_planted_commands_never_run_as_root_or_with_capabilities(seed, planted, seed_record, monkeypatch):
    """The state goes straight to the driver here, as if the allow-list let everything
    through: the driver itself must not run what the state points at while privileged."""
    monkeypatch.setenv("ERRKB_GPU_PYTHON", sys.executable)
    rng = random.Random(seed)
    functions = {f"BASH_FUNC_{n}%%": f"() {{ echo \"PLANTED function {n} uid=$(/usr/bin/id -u)\" >&2; }}"
                 for n in rng.sample(PLANTED_NAMES, k=4)}
    state = {"PATH": f"{planted}:.:/usr/local/bin:/usr/bin:/bin", "BASH_ENV": str(planted / "env.sh"),
             "ENV": str(planted / "env.sh"), "PYTHONSTARTUP": str(planted / "start.py"), "PYTHONPATH": str(planted),
             "LD_PRELOAD": str(planted / "missing.so"), "ERRKB_SANDBOX_RUN_AS": "0:0", **functions,
             "VLLM_FLASHINFER_ALLREDUCE_BACKEND": "trtllm"}
    emitted = []
    runs.run_reproducer(seed_record, driver_reproducer(), {"before": state}, emitted.append)
    assert [r.check for r in emitted] == ["reproducer:hostile-driver:a-before", "reproducer:hostile-driver:c-control"]
    for result in emitted:
        ranks = result.details["ranks"]
        assert [r["rank"] for r in ranks] == [0, 1], result
        assert {r.get("uid") for r in ranks} == {sandbox.UNPRIVILEGED[0]}, result.details
        assert {r.get("cap_eff") for r in ranks} == {"0000000000000000"}, result.details
        logs = "\n".join(result.details["rank_logs"]) + result.details.get("stdout_tail", "") + \
            result.details.get("stderr_tail", "")
        for line in (ln for ln in logs.splitlines() if "PLANTED" in ln):
            assert "uid=0" not in line, line
            assert "CapEff:\t0000000000000000" in line or "CapEff" not in line, line


@needs_ns
def test_rank_one_still_gets_a_node_of_its_own(tmp_path):
    """The holder made with system calls gives rank 1 a private /dev/shm, as unshare did."""
    import json

    code = (
        "import json, os, subprocess, sys\n"
        f"sys.argv = [{str(HERE / 'fused_workspace.py')!r}]\n"
        "import importlib.util\n"
        f"spec = importlib.util.spec_from_file_location('fw', {str(HERE / 'fused_workspace.py')!r})\n"
        "fw = importlib.util.module_from_spec(spec); spec.loader.exec_module(fw)\n"
        "sys.argv = [fw.__file__]\n"
        "node = fw._start_shm_node()\n"
        "fw._drop_capabilities()\n"
        "open('/dev/shm/shared-marker', 'w').write('x')\n"
        "cmd = ['/bin/sh', '-c', 'ls /dev/shm; /usr/bin/id -u; /bin/grep CapEff /proc/self/status']\n"
        "proc, log = node\n"
        "proc.stdin.write(json.dumps({'argv': cmd, 'env': {}}).encode()); proc.stdin.close(); proc.wait()\n"
        "log.seek(0); print(log.read().decode())\n"
    )
    res = sandbox.run([sys.executable, "-I", "-c", code], keep_capabilities=True, readable=[HERE],
                      limits=sandbox.Limits(wall_seconds=30))
    assert res.outcome == "pass", res
    lines = [ln for ln in res.stdout.splitlines() if ln.strip()]
    assert "shared-marker" not in lines  # its own /dev/shm, empty
    assert lines[-2:] == [str(sandbox.UNPRIVILEGED[0]), "CapEff:\t0000000000000000"]
    assert json  # used above
