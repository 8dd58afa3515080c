"""The two GPU-tier cases cannot pass vacuously (issue 25 item 7).

Before: 0d976de0's broken state passed ``--mib total*2``, so its validation died in ``int()``
before touching CUDA (a crash then counted as a rejection); 97a67fed's spawn child could not
start (the case's worker lived in a module the child cannot import), so the fixed state
"passed" on a crash. These run without a GPU: the states as the validation reads them, the
driver reporting a child's own frames, and a real forked child's traceback read back.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

from errkb.records.read import read_records
from errkb.verify.reproducers import for_record, load_case
from errkb.verify.reproducers import single as driver
from tests.support import REPO

OOM = "0d976de03616c8f3"
FORK = "97a67fede3271408"


def _record(record_id: str) -> dict:
    return next(r for r in read_records([REPO / "data" / "pytorch"]) if r.record["id"] == record_id).record


def _case(record_id: str):
    (repro,) = for_record(record_id, "gpu")
    return load_case(repro)


def test_the_oom_states_are_sizes_the_record_s_validation_reads_and_the_broken_one_does_not_fit():
    case = _case(OOM)
    sizes = {}
    for name, state in case.STATES.items():
        argv = state["argv"]
        sizes[name] = int(argv[argv.index("--mib") + 1])  # what the validation's own int() does
    # The record's exampleFix: torch.empty(64, 4096, 4096) before, (32, ...) after, float32.
    assert sizes == {"before": 64 * case.BATCH_MIB, "after": 32 * case.BATCH_MIB}
    # The GPU is filled to leave FREE_MIB: only the broken batch exceeds it.
    assert sizes["after"] <= case.FREE_MIB < sizes["before"]
    assert case.STATES["after"]["env"] == {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}
    assert "expandable_segments:True" in _record(OOM)["exampleFix"]


def test_the_fork_states_are_the_record_s_own_program_run_as_a_script_with_the_start_method_it_names():
    """97a67fed's states come from its record (issue 25 item 1): the exampleFix as written is
    "after", its ``# before:`` line gives "before"; the mapping only adds the parent's CUDA use
    and the child's exit status, each on a line of its own place, and the validation is given
    the start method each program names."""
    from errkb.verify.fixstates import map_states, parse_fix
    from errkb.verify.mutants import non_fixing_fix

    case = _case(FORK)
    fix = _record(FORK)["exampleFix"]
    mapped = map_states(parse_fix(fix), case.MAPPING)
    assert {name: s["argv"] for name, s in mapped.states.items()} == {"before": ["fork"], "after": ["spawn"]}
    for state in mapped.states.values():
        program = state["program"]
        compile(program, "prog.py", "exec")
        assert 'if __name__ == "__main__":' in program  # a spawn child re-imports the script by path
        lines = program.splitlines()
        touch = next(n for n, line in enumerate(lines) if 'torch.zeros(1, device="cuda")' in line and "p.start()" in line)
        assert touch > next(n for n, line in enumerate(lines) if "ctx.Process(" in line)  # the parent, before the child
    assert 'get_context("fork")' in mapped.states["before"]["program"]
    assert 'get_context("spawn")' in mapped.states["after"]["program"]
    assert len(mapped.changes) == 1  # the one line the fix changes: the start method
    # a record whose fix changes nothing runs the broken start method in both states: on a
    # GPU its "after" raises and its validation rejects it, so the mutant dies there
    mutant, _ = non_fixing_fix(fix)
    assert map_states(parse_fix(mutant), case.MAPPING).states["after"]["argv"] == ["fork"]


def test_a_forked_child_s_real_traceback_is_raised_with_the_child_s_own_frames(tmp_path):
    """The child prints its error and the parent exits 0: the case must read it back."""
    program = textwrap.dedent('''
        import multiprocessing as mp

        def check_driver():
            raise RuntimeError("Cannot re-initialize CUDA in forked subprocess. To use CUDA with multiprocessing, "
                               "you must use the 'spawn' start method")

        def work(rank):
            check_driver()

        if __name__ == "__main__":
            p = mp.get_context("fork").Process(target=work, args=(0,))
            p.start()
            p.join()
    ''')
    (tmp_path / "prog.py").write_text(program)
    res = subprocess.run([sys.executable, "prog.py"], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert res.returncode == 0  # the parent never sees the child's error
    error = _case(FORK)._child_error(res.stderr)
    assert isinstance(error, RuntimeError) and type(error).__name__ == "RuntimeError"
    assert str(error).startswith("Cannot re-initialize CUDA in forked subprocess.")
    assert [f["function"] for f in error.errkb_frames][-2:] == ["work", "check_driver"]


def test_the_driver_reports_a_child_s_frames_as_the_raise_site(tmp_path):
    case_file = tmp_path / "case.py"
    case_file.write_text(textwrap.dedent('''
        STATES = {"before": {"argv": [], "env": {}}, "after": {"argv": [], "env": {}}}

        def trigger(state):
            error = RuntimeError("from the child")
            error.errkb_frames = [{"file": "/lib/torch/cuda/__init__.py", "line": 372, "function": "_lazy_init"}]
            raise error
    '''))
    result = driver.main({"case": str(case_file), "state": "before", "mode": "trigger"})
    assert result["raised"] and result["exception_message"] == "from the child"
    assert result["frames"] == [{"file": "/lib/torch/cuda/__init__.py", "line": 372, "function": "_lazy_init"}]
    json.dumps(result)  # the line the driver prints
