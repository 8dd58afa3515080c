"""c8018983 (too large swap space): a check relative to the host's RAM, proven on vllm 0.3.3 (the release
nearest the analysed commit) with states scaled to the runner, and a validation code that reads the user's flags."""

from __future__ import annotations

import json
import os

from errkb.records import proofs as D
from errkb.verify.fixstates import map_states, parse_fix
from errkb.verify.reproducers import VLLM_033, for_record, load_case
from tests.support import REPO

RECORD = "c80189833ce236ed"


def _flag(argv: list[str], name: str) -> str:
    return argv[argv.index(name) + 1]


def _swap_gib(argv: list[str]) -> int:
    return int(_flag(argv, "--swap-space")) * int(_flag(argv, "--tensor-parallel-size"))


def test_the_states_straddle_vllms_70_percent_line_on_this_host_whatever_its_ram():
    (repro,) = for_record(RECORD, "cpu-real")
    module = load_case(repro)
    assert repro.requirements == VLLM_033 and "vllm 0.3.3" in repro.release_note
    ram_gib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    record = next(
        json.loads(p.read_text(encoding="utf-8"))["record"] for p in (REPO / "data").glob("*/*/*.json")
        if json.loads(p.read_text(encoding="utf-8"))["record"]["id"] == RECORD)
    states = map_states(parse_fix(record["exampleFix"]), module.MAPPING).states  # the record's own, mapped
    before, after = states["before"]["argv"], states["after"]["argv"]
    assert _flag(before, "--tensor-parallel-size") == _flag(after, "--tensor-parallel-size") == "8"  # the record's
    assert _swap_gib(before) > 0.7 * ram_gib  # vLLM raises
    assert _swap_gib(after) <= 0.4 * ram_gib  # not even its warning
    if ram_gib >= 40:  # a host like the record's own: the record's exampleFix, 2 GiB per GPU
        assert _flag(after, "--swap-space") == "2"


def test_the_committed_proof_saw_vllms_own_message_and_the_validation_reject_the_broken_flags():
    proof = D.load_proof(RECORD)
    assert proof["status"] == "proven" and proof["library"] == {"name": "vllm", "version": "0.3.3"}
    assert proof["observed"]["exception_message"].startswith("Too large swap space. ")
    assert proof["observed"]["raise_site"]["function"] == "verify_with_parallel_config"
    outcomes = {c["check"]: (c["outcome"], c["exception_class"]) for c in proof["checks"]}
    assert outcomes["validationCode:before:in-reproducer"] == ("pass", "AssertionError")
    assert outcomes["validationCode:after:in-reproducer"] == ("pass", None)
