"""The tokenising fast path of patterns.analyze agrees with the full parse-tree analysis."""

from __future__ import annotations

import dataclasses
import gzip
import json

import pytest

from errkb import patterns
from tests.conftest import BENCH_CORPUS

TRANSLATION_FIELDS = {"re2_pattern", "re2_issue", "re2_ascii_only"}


def _comparable(a: patterns.PatternAnalysis) -> dict:
    return {k: v for k, v in dataclasses.asdict(a).items() if k not in TRANSLATION_FIELDS}


def _corpus(n: int) -> list[str]:
    path = BENCH_CORPUS / "patterns.jsonl.gz"
    if not path.exists():
        pytest.skip(f"bench corpus not found at {path}")
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [json.loads(line)["pattern"] for _, line in zip(range(n), f)]


HAND_PICKED = [
    r"Flashinfer allreduce quantization fusion is not supported for multi-node allreduce with 'trtllm' backend\. Please use 'mnnvl' backend instead\.",
    r"^Expected (.+?) but got (.+?)$",
    r"(.*?)",
    r"(.+?)",
    r"ab(.*?)",
    r"^a\$",
    r"x \(y\) \[z\] \\ \. \{",
    r"ends with an escaped dollar\$",
]


@pytest.mark.parametrize("pattern", HAND_PICKED)
def test_fast_path_equals_full_analysis_on_hand_picked_patterns(pattern):
    fast = patterns._analyze_simple(pattern)
    assert fast is not None
    assert _comparable(fast) == _comparable(patterns.analyze(pattern, translate=True))


@pytest.mark.parametrize("pattern", [r"a{2}", r"(?i)abc", r"a\d", r"[ab]", r"a|b", r"(a)", r"\n", r"(.+)", "a{"])
def test_other_shapes_take_the_full_path(pattern):
    assert patterns._analyze_simple(pattern) is None


def test_fast_path_equals_full_analysis_on_real_patterns():
    checked = 0
    for pattern in _corpus(5000):
        fast = patterns._analyze_simple(pattern)
        if fast is None:
            continue
        checked += 1
        assert _comparable(fast) == _comparable(patterns.analyze(pattern, translate=True)), pattern
    assert checked > 4000
