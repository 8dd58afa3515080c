"""The tokenising fast path of patterns.analyze agrees with the full parse-tree analysis."""

from __future__ import annotations

import dataclasses
import gzip
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from errkb.text import patterns
from tests.support import BENCH_CORPUS

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


# -- the fast path's gap plan decides matches like re.search ----------------------


_pieces = st.lists(
    st.one_of(
        st.sampled_from(["(.+?)", "(.*?)"]),
        st.text(alphabet="ab. '()$^\\", min_size=1, max_size=3).map(lambda t: "".join("\\" + c if c in ".()$^\\" else c for c in t)),
    ),
    max_size=5,
)


@settings(max_examples=400, deadline=None)
@given(pieces=_pieces, start=st.booleans(), end=st.booleans(), text=st.text(alphabet="ab. '()$^\\x", max_size=12))
def test_fast_path_gap_plan_agrees_with_re_search(pieces, start, end, text):
    import re

    pattern = ("^" if start else "") + "".join(pieces) + ("$" if end else "")
    analysis = patterns._analyze_simple(pattern)
    assert analysis is not None, pattern
    assert analysis.gap_plan == patterns.analyze(pattern).gap_plan
    assert patterns.gap_match(text, analysis.gap_plan) == (re.search(pattern, text) is not None), (pattern, text)


def test_escaped_anchor_characters_are_literals_in_the_gap_plan():
    import re

    for pattern, text in [(r"^a\$", "a"), (r"^a\$", "a$"), (r"x\^y", "x^y"), (r"\\$", "\\")]:
        for analysis in (patterns.analyze(pattern), patterns._analyze_simple(pattern)):
            assert patterns.gap_match(text, analysis.gap_plan) == (re.search(pattern, text) is not None), (pattern, text)


# -- optional groups and branches: one gap plan per alternative (the site's path) ----------

_optional = st.lists(
    st.one_of(
        st.sampled_from(["(.+?)", "(.*?)", "(?:ab)?", "(?:a(.+?)b\\. )?", "(?:xa|b'y)", "(?:\\. |a)?"]),
        st.text(alphabet="ab. '", min_size=1, max_size=3).map(lambda t: t.replace(".", "\\.")),
    ),
    max_size=4,
)


@settings(max_examples=400, deadline=None)
@given(pieces=_optional, start=st.booleans(), end=st.booleans(), text=st.text(alphabet="ab. 'xy", max_size=14))
def test_expanded_gap_plans_decide_matches_like_re_search(pieces, start, end, text):
    import re

    pattern = ("^" if start else "") + "".join(pieces) + ("$" if end else "")
    plans = patterns.expanded_gap_plans(pattern)
    if plans is None:  # too many alternatives, or no literal in one of them
        return
    assert len(plans) <= patterns.MAX_GAP_ALTERNATIVES
    assert any(patterns.gap_match(text, p) for p in plans) == (re.search(pattern, text) is not None), (pattern, text)


def test_expanded_gap_plans_refuse_what_they_cannot_mean_exactly():
    for pattern in [r"a(b|c)+d", r"(?i)a(?:b)?c", r"a\d(?:b)?", r"a(?:b)?" * 4]:
        assert patterns.expanded_gap_plans(pattern) is None, pattern
