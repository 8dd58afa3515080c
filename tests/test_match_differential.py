"""Differential: for linear-safe patterns, the matcher finds exactly what re.search finds.

Two sources of patterns: hypothesis-generated ones over the regex features where `re`
and RE2 disagree (Unicode classes, `$` before a final newline, case folding, inline
flags, word boundaries), and a few thousand real patterns from the bench corpus
(mined from `raise` statements of real packages) over real log lines plus messages
rendered from the patterns. Every engine combination is checked, including the
pure-Python path.
"""

from __future__ import annotations

import gzip
import json
import random
import re
from itertools import islice

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from errkb.match.matcher import Matcher
from errkb.text.patterns import analyze
from tests.support import BENCH_CORPUS

ENGINES = [("hyperscan", "re2"), ("ahocorasick", "re2"), ("python", "re")]

# ---------------------------------------------------------------------------------
# hypothesis: generated patterns and texts

ALPHABET = "abcAB K\u212a s\u017f\u00e9\u00c9_1\u0663 \t\n\x1c\xa0.-:'"

atoms = st.sampled_from([
    "a", "b", "A", "k", "s", "é", "1", " ", r"\.", ":", "'", "-",
    r"\d", r"\D", r"\w", r"\W", r"\s", r"\S", ".", "[a-c]", "[^a]", r"[\w.]", r"[^\W\d]", "[Kk]", r"\n",
])
anchors = st.sampled_from(["^", "$", r"\A", r"\Z", r"\b", r"\B"])
flags = st.sampled_from(["", "(?i)", "(?m)", "(?s)", "(?a)", "(?ia)", "(?ms)"])


@st.composite
def patterns(draw):
    def piece(depth):
        kind = draw(st.integers(0, 9 if depth < 2 else 5))
        if kind <= 4:
            return draw(atoms)
        if kind == 5:
            return draw(anchors)
        inner = "".join(piece(depth + 1) for _ in range(draw(st.integers(1, 3))))
        if kind == 6:
            return f"(?:{inner})" + draw(st.sampled_from(["", "*", "+", "?", "{2}", "{1,3}", "*?", "+?"]))
        if kind == 7:
            other = "".join(piece(depth + 1) for _ in range(draw(st.integers(1, 2))))
            return f"(?:{inner}|{other})"
        if kind == 8:
            return f"({inner})"
        return f"(?i:{inner})"

    body = "".join(piece(0) for _ in range(draw(st.integers(1, 5))))
    return draw(flags) + body


texts = st.text(alphabet=ALPHABET, max_size=24)


def exact_in(confirm: str, analysis) -> bool:
    """Patterns the engine claims exactness for: every linear-safe one with RE2; the
    pure-Python path sends shapes exponential in `re` to the bounded path instead."""
    return analysis.linear_safe and (confirm == "re2" or not analysis.exponential_in_re)


_compiled: dict[str, re.Pattern] = {}


def re_search_ids(pattern_list: list[str], text: str) -> list[int]:
    """The reference: a plain loop of re.search (compiled once: re's own cache holds 512)."""
    out = []
    for i, p in enumerate(pattern_list):
        compiled = _compiled.get(p)
        if compiled is None:
            compiled = _compiled[p] = re.compile(p)
        if compiled.search(text) is not None:
            out.append(i)
    return out


def matcher_ids(matcher: Matcher, text: str) -> list[int]:
    [found] = matcher.match_lines([text], raw=True)
    return sorted(int(m.record_id) for m in found)


def records_for(pattern_list: list[str]) -> list[dict]:
    return [{"id": str(i), "slug": f"p{i}", "repo": "x/y", "messagePattern": p, "errorClass": "E"}
            for i, p in enumerate(pattern_list)]


@pytest.mark.parametrize("prefilter, confirm", ENGINES)
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(pattern_list=st.lists(patterns(), min_size=1, max_size=4), sample=st.lists(texts, min_size=1, max_size=6))
@example(pattern_list=["(?a)\\B"], sample=[""])  # RE2 matches \B on no text, re does not
def test_generated_patterns_match_exactly_like_re(prefilter, confirm, pattern_list, sample):
    safe = [p for p in pattern_list if exact_in(confirm, analyze(p))]
    if not safe:
        return
    matcher = Matcher.from_records(records_for(safe), prefilter=prefilter, confirm=confirm)
    assert matcher.skipped == []
    for text in sample:
        assert matcher_ids(matcher, text) == re_search_ids(safe, text), (safe, text)


@pytest.mark.parametrize(
    "pattern, text",
    [
        (r"abc$", "abc\n"), (r"abc$", "abc\n\n"), (r"abc\Z", "abc\n"), (r"(?m)c$", "abc\nd"),
        (r"\d", "\u0663"), (r"(?a)\d", "\u0663"), (r"\w", "\u00e9"), (r"\s", "\x1c"), (r"\s", "\xa0"),
        (r"(?i)k", "\u212a"), (r"(?i)s", "\u017f"), (r"(?i)\u00e9", "\u00c9"), (r"\bé", "é"), (r"a\b", "aé"),
        (r"a.b", "a\nb"), (r"(?s)a.b", "a\nb"), (r"^b", "a\nb"), (r"(?m)^b", "a\nb"), (r"[^\W\d]", "_"),
        (r"x*", ""), (r"(?:a|)$", ""), (r"[\w.]+@", "é.x@"),
        (r"cost (.+?)\$", "cost 5$ total"), (r"cost (.+?)\$", "cost 5"), (r"\^up (.+?)", "x ^up y"), (r"\^up", "up"),
    ],
)
@pytest.mark.parametrize("prefilter, confirm", ENGINES)
def test_known_re_re2_disagreements_are_translated(pattern, text, prefilter, confirm):
    assert analyze(pattern).linear_safe
    matcher = Matcher.from_records(records_for([pattern]), prefilter=prefilter, confirm=confirm)
    assert matcher_ids(matcher, text) == re_search_ids([pattern], text)


# ---------------------------------------------------------------------------------
# real patterns from the bench corpus

N_PATTERNS = 3000
N_LOG_LINES = 150


def render(pattern: str, rng: random.Random) -> str:
    """A message a pattern was written for: literal text kept, each group filled."""
    text = re.sub(r"\(\.\+\?\)", lambda _m: rng.choice(["x", "'fp8'", "42", "cuda:0", "foo bar"]), pattern)
    return re.sub(r"\\(.)", r"\1", text)


@pytest.fixture(scope="module")
def corpus():
    patterns_file = BENCH_CORPUS / "patterns.jsonl.gz"
    lines_file = BENCH_CORPUS / "lines.txt.gz"
    if not patterns_file.is_file() or not lines_file.is_file():
        pytest.skip(f"bench corpus not found at {BENCH_CORPUS} (set ERRKB_BENCH_CORPUS)")
    with gzip.open(patterns_file, "rt", encoding="utf-8") as f:
        pattern_list = [json.loads(line)["pattern"] for line in islice(f, N_PATTERNS)]
    with gzip.open(lines_file, "rt", encoding="utf-8") as f:
        log_lines = [line.rstrip("\n") for line in islice(f, N_LOG_LINES)]
    rng = random.Random(7)
    rendered = [render(p, rng) for p in rng.sample(pattern_list, 200)]
    prefixes = ["", "[rank0]: ValueError: ", "2026-08-05 15:26:02,985 ERROR [a.py:1] ", "\x1b[31m"]
    texts_ = log_lines + [rng.choice(prefixes) + r for r in rendered] + [r[: len(r) // 2] for r in rendered[:50]]
    safe = [p for p in pattern_list if analyze(p).linear_safe]
    expected = [re_search_ids(safe, t) for t in texts_]
    return safe, texts_, expected


@pytest.mark.parametrize("prefilter, confirm", ENGINES + [("hyperscan+full", "re2")])
def test_real_corpus_patterns_match_exactly_like_re(corpus, prefilter, confirm):
    safe, texts_, expected = corpus
    assert len(safe) >= N_PATTERNS * 0.99
    full = prefilter.endswith("+full")
    matcher = Matcher.from_records(records_for(safe), prefilter=prefilter.removesuffix("+full"), confirm=confirm)
    if full:
        matcher.build_full_db()
        assert matcher.full_db
    results = matcher.match_lines(texts_, raw=True)
    got = [sorted(int(m.record_id) for m in found) for found in results]
    mismatches = [(t, g, e) for t, g, e in zip(texts_, got, expected) if g != e]
    assert mismatches == []
    # the corpus really exercises matching: many texts match, some several patterns
    assert sum(1 for e in expected if e) >= 180
    assert sum(1 for e in expected if len(e) > 1) >= 3
