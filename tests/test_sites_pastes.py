"""Real pastes from public issues (tests/fixtures/pastes_sites.jsonl, each with its source
URL) through the real `errkb explain --json` with the shipped index: none is pinned to a
wrong site, every NCCL and CUDA error string gets its table's meaning, the C++ message the
wheels' headers hold gets its site, and a curated record still answers first.

`python -m bench.bench_sites pastes` gives the counts (before: run it with main's errkb)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.support import REPO


def _load(name: str) -> list[dict]:
    path = REPO / "tests" / "fixtures" / name
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


PASTES = _load("pastes_sites.jsonl")
# Collected on 2026-12-05 by a helper that had not seen errkb's answers, each labelled from
# the upstream source first (one label widened after review: its note says why). Held out
# until then; in the suite now: "found" marks a site errkb found then, which must stay found.
FRESH_PASTES = _load("pastes_sites_fresh.jsonl")
# A second held-out set, collected on 2026-12-05 (later) the same way from issues none of
# the sets above use, and measured before anything was tuned on it (closing note of stop 35:
# curated 8, right 11, wrong 0, nothing 1 of its 20 site pastes; tables 5/5; none 5/5).
FRESH2_PASTES = _load("pastes_sites_fresh2.jsonl")
# A third, collected on 2026-12-05 by a helper from issues none of the sets above use (vLLM,
# PyTorch and FlashInfer C++ messages, CUDA and NCCL strings, other libraries' errors), measured
# before anything was tuned on it: sites 8 right, 0 wrong, 12 nothing of 20; tables 1/5 (5/5
# after the tables learned codes and CUDA's own sentences); none 5/5.
FRESH3_PASTES = _load("pastes_sites_fresh3.jsonl")
# A fourth, collected on 2026-12-05 (stop 38) by a helper from issues none of the site sets above
# use (5 of its 30 are issues the curated paste sets use: a record answers them), measured on main before anything this stop changed (curated 10, right 10, wrong 0, nothing
# 10 of 30; one table label corrected to "elastic" first). Two later changes were informed by it
# (the message's end lets a wrapper's "(parameter=..., value=...)" follow: lmms-eval#1265; a rare
# token needs 15 letters/digits, not 20), so it is no longer held out: right 12, nothing 8.
FRESH4_PASTES = _load("pastes_sites_fresh4.jsonl")
# A fifth, collected on 2026-12-05 (stop 39) by a helper that never ran errkb, from issues none
# of the sets above use, and measured on main before anything was changed for it (curated 4;
# sites: right 9, wrong 0, nothing 7 of 16; tables 5/5; none 5/5; two of the 7 were answered by
# the PyTorch table, whose meaning names the file: bench_sites counts those right since).
FRESH5_PASTES = _load("pastes_sites_fresh5.jsonl")
# A sixth, of one family: 24 torch.compile graph breaks in the 2.7+ format ("<type>\n  Explanation:
# ...\n  Hint: ...\n\n  Developer debug context: ..."), collected on 2026-12-06 (stop 41) by a
# helper that never ran errkb, from issues none of the sets above use, each checked against
# torch 2.9.0's source. Measured on main before the miner read helpers that format their
# message: nothing 24 of 24; after: right 15, wrong 0, nothing 9 ("found" marks the 15). Sites
# only, so it is not one of the varied SETS below.
FRESH6_PASTES = _load("pastes_sites_fresh6.jsonl")
# A seventh, collected on 2026-12-06 (stop 42) by a helper that never ran errkb, from issues none of
# the sets above use (vLLM, PyTorch and FlashInfer sites, CUDA and NCCL strings, other libraries'
# errors; titles, prefixed log lines, tracebacks, a Jupyter quote), measured on main after the
# quoted-paste reading and before anything was changed for it (python -m bench.bench_sites pastes):
# curated 4; sites right 11, wrong 0,
# nothing 7 of 18; tables 4/4; none 4/4. Three later changes were informed by it (a wrapped paste's
# lines joined for its site, pydantic's "Value error, " before a cut message, a local format
# template in the miner): right 14 (2 of them by a curated table whose meaning names the file),
# nothing 4 ("found" marks the 12 found at a code site).
FRESH7_PASTES = _load("pastes_sites_fresh7.jsonl")
# An eighth and a ninth, collected on 2026-12-06 (stop 43) by helpers that never ran errkb, from
# issues none of the sets above use, each measured on main before anything was changed for it
# (python -m bench.bench_sites pastes). Eighth: curated 6; sites right 15, wrong 2, nothing 7
# (6 of them another library's: right). One "wrong" was the fixture's: ATen's
# common_device_check_failure is in aten/src/ATen/core/adaption.cpp in torch 2.6.0's source, and
# in core/op_registration/ in other revisions (both listed now); the other named vLLM's older
# LoRA rank site for a 0.8.5 paste whose message PEFTHelper.validate_legal collects in a list
# (the miner reads such lists now): right 17, wrong 0. Ninth: curated 2; right 17 (3 of them
# tables), wrong 0, nothing 11 (5 another library's). The changes it informed (exception classes
# that build their message, a "half" pattern's values between its literals, fmt::format in C++):
# right 21, nothing 7; its two site misses are FlashInfer 0.1 checks, of releases the index does
# not read (0.2 on). "found" marks the pastes found at a code site.
FRESH8_PASTES = _load("pastes_sites_fresh8.jsonl")
FRESH9_PASTES = _load("pastes_sites_fresh9.jsonl")
# A tenth, collected on 2026-12-06 (stop 44) by a helper that never ran errkb, from issues none of
# the sets above use, each site checked against a released wheel or the upstream source, and
# measured on main (1595b4c) before anything was changed for it: curated 2; sites right 10, wrong
# 1, nothing 7 of 18 (the bench's judge missed one table answer whose meaning says "raised by
# TORCH_CUDABLAS_CHECK in aten/src/ATen/cuda/Exceptions.h": 11 right); tables 4/4; none 6/6. The
# changes it informed (a message a wrapper carries read alone: pydantic's, an API client's error
# body; another library's longer message listed beside a whole match; torch 2.7's
# GPUTooOldForTriton, whose base is imported): right 14 of 18 sites, wrong 0, nothing 4.
FRESH10_PASTES = _load("pastes_sites_fresh10.jsonl")
# An eleventh, collected on 2026-12-06 (stop 44) the same way, measured once at the end of that
# stop with nothing changed for it: curated 2; sites right 12, wrong 0, nothing 6 of 18; tables
# 4/4; none 6/6. "found" marks the 12.
FRESH11_PASTES = _load("pastes_sites_fresh11.jsonl")
ALL_PASTES = (PASTES + FRESH_PASTES + FRESH2_PASTES + FRESH3_PASTES + FRESH4_PASTES + FRESH5_PASTES + FRESH6_PASTES
              + FRESH7_PASTES + FRESH8_PASTES + FRESH9_PASTES + FRESH10_PASTES + FRESH11_PASTES)


def _explain(text: str) -> dict:
    run = subprocess.run([sys.executable, "-m", "errkb", "explain", "--json", text], capture_output=True,
                         text=True, env=dict(os.environ), cwd=REPO, check=False)
    assert run.returncode in (0, 1), run.stderr
    return json.loads(run.stdout)


# Each set in the order collected: real, varied, and none of its issues in an earlier set.
SETS = [PASTES, FRESH_PASTES, FRESH2_PASTES, FRESH3_PASTES, FRESH4_PASTES, FRESH5_PASTES, FRESH7_PASTES, FRESH8_PASTES,
        FRESH9_PASTES, FRESH10_PASTES, FRESH11_PASTES]


@pytest.mark.parametrize("k", range(len(SETS)), ids=["tuned", "fresh", "fresh2", "fresh3", "fresh4", "fresh5", "fresh7",
                                                       "fresh8", "fresh9", "fresh10", "fresh11"])
def test_each_fixture_is_real_varied_and_new(k):
    pastes = SETS[k]
    assert len(pastes) >= (30 if k == 0 else 25)
    assert all(p["source"].startswith("https://github.com/") for p in pastes)
    assert {p["expect"] for p in pastes} == {"site", "table", "none"}
    earlier = {p["source"] for s in SETS[:k] for p in s}
    assert not {p["source"] for p in pastes} & earlier


@pytest.mark.parametrize("paste", ALL_PASTES, ids=[p["source"].split("github.com/")[1] for p in ALL_PASTES])
def test_paste(paste):
    answer = _explain(paste["text"])
    curated = [m for m in answer["matches"] if m["tier"] in ("curated", "variant")]
    code_files = [s["file"] for m in answer["sites"] if not m["meaning"] for s in m["sites"]]
    tables = {m["trust"] for m in answer["sites"] if m["meaning"]}
    if curated:
        assert answer["matches"][0]["tier"] in ("curated", "variant")  # a record answers first, sites after
        return
    if paste["expect"] == "table":
        assert paste["table"] in tables
        if paste.get("entry"):  # which entry of the table, where the fixture says
            assert (paste["table"], paste["entry"]) in {(m["trust"], m["pattern"]) for m in answer["sites"] if m["meaning"]}
    if paste["expect"] == "none":
        assert code_files == []  # not covered: nothing is better than a wrong site
    if paste["expect"] == "site" and paste.get("found"):  # its site was found once: it stays found
        assert code_files, "its site is no longer found"
    if paste["expect"] == "site" and code_files:
        assert any(f.startswith(tuple(paste["files"])) for f in code_files), code_files


def test_c10d_header_message_gets_its_site():
    (paste,) = [p for p in PASTES if p["source"] == "https://github.com/pytorch/pytorch/pull/153586"]
    answer = _explain(paste["text"])
    sites = [s for m in answer["sites"] for s in m["sites"]]
    assert [s["file"] for s in sites][:1] == ["torch/csrc/distributed/c10d/Utils.hpp"]
    assert sites[0]["library"] == "torch" and sites[0]["errorClass"] == "DistNetworkError"
    assert sites[0]["url"].startswith("https://github.com/pytorch/pytorch/blob/")


def test_a_message_whose_tab_the_issue_shows_as_spaces_gets_its_site():
    """torch's "Error(s) in loading state_dict for X:\\n\\t..." as an issue shows it (the tab
    became spaces): its site, though the pattern holds a tab (errkb.match.chunks.fold_space)."""
    (paste,) = [p for p in FRESH_PASTES if p["source"] == "https://github.com/malllabiisc/InteractE/issues/5"]
    assert "\t" not in paste["text"] and "\n        " in paste["text"]
    sites = [s for m in _explain(paste["text"])["sites"] for s in m["sites"]]
    assert [(s["file"], s["function"]) for s in sites][:1] == [("torch/nn/modules/module.py", "Module.load_state_dict")]
