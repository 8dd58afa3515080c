"""errkb.text.patterns.analyze: what a dataset pattern needs, from Python's own parse tree."""

from __future__ import annotations

import re

import pytest

from errkb.text.patterns import analyze

re2 = pytest.importorskip("re2")

SEED_PATTERN = (
    "Flashinfer allreduce quantization fusion is not supported for multi-node allreduce "
    "with 'trtllm' backend\\. Please use 'mnnvl' backend instead\\."
)


def test_seed_pattern_is_specific_linear_and_prefilterable():
    a = analyze(SEED_PATTERN)
    assert a.compile_error is None
    assert not a.needs_backtracking
    assert a.linear_safe
    assert not a.too_generic and not a.matches_empty
    assert a.literal_chars == len(
        "Flashinfer allreduce quantization fusion is not supported for multi-node allreduce "
        "with 'trtllm' backend. Please use 'mnnvl' backend instead."
    )
    assert a.prefilter_literal.startswith("Flashinfer allreduce quantization")


@pytest.mark.parametrize(
    "pattern, reason",
    [
        (r"(\w+) \1", "backreference"),
        (r"foo(?=bar)", "lookahead"),
        (r"foo(?!bar)", "negative lookahead"),
        (r"(?<=x)foo", "lookbehind"),
        (r"(?<!x)foo", "negative lookbehind"),
        (r"(?P<x>a)?(?(x)b|c)", "conditional group"),
        (r"a++b", "possessive quantifier"),
        (r"(?>ab)c", "atomic group"),
    ],
)
def test_backtracking_features_are_named(pattern, reason):
    a = analyze(pattern)
    assert a.needs_backtracking
    assert reason in a.backtracking_reasons
    assert not a.linear_safe
    assert a.re2_issue.startswith("needs backtracking")


def test_compile_error_is_reported_not_raised():
    a = analyze("unterminated [class")
    assert a.compile_error == "unterminated character set at position 13"
    assert not a.linear_safe
    assert analyze(None).compile_error == "pattern is NoneType, not a string"


@pytest.mark.parametrize("pattern", ["", "a*", "(?:x|)", ".*"])
def test_empty_matching_patterns_are_too_generic(pattern):
    a = analyze(pattern)
    assert a.matches_empty and a.too_generic


@pytest.mark.parametrize("pattern", [".+", r"(.+?): (.+?)", r"\w+ \d+", "(?i)error"])
def test_patterns_pinning_few_literals_are_too_generic(pattern):
    a = analyze(pattern)
    assert not a.matches_empty
    assert a.too_generic


def test_required_literals_are_the_factors_every_match_contains():
    a = analyze(r"Expected (.+?) but got (.+?) for (.+?) at index (\d+)!")
    assert a.required_literals == ["Expected ", " but got ", " for ", " at index ", "!"]
    assert a.prefilter_literal == " at index "
    # alternatives pin nothing; an exact group and a counted literal extend the run
    assert analyze(r"(?:foo|bar)baz").required_literals == ["baz"]
    assert analyze(r"ab(cd)e{3}f").required_literals == ["abcdeeef"]
    # zero-width assertions do not split a run
    assert analyze(r"^No module named\b").required_literals == ["No module named"]


def test_ignorecase_letters_are_not_required_literals():
    a = analyze(r"(?i)cuda error: out of memory")
    assert a.ignore_case
    assert all(not any(c.isalpha() for c in lit) for lit in a.required_literals)


def test_anchors():
    a = analyze(r"^Traceback \(most recent call last\):$")
    assert a.anchored_start and a.anchored_end
    b = analyze(r"middle")
    assert not b.anchored_start and not b.anchored_end


@pytest.mark.parametrize("pattern", [r"(a+)+$", r"(.*a){25}", r"(x|x)*y"])
def test_nested_quantifiers_are_flagged_but_run_linearly_in_re2(pattern):
    a = analyze(pattern)
    # exponential_in_re is about `re`; (x|x)* has no nested unbounded repeat, so only
    # the first two carry the flag
    if pattern != r"(x|x)*y":
        assert a.exponential_in_re
    assert a.linear_safe
    re2.compile(a.re2_pattern)


@pytest.mark.parametrize(
    "pattern, text, expected",
    [
        (r"abc$", "xabc\n", True),  # re's $ matches before a final newline
        (r"abc$", "xabc\n\n", False),
        (r"abc\Z", "xabc\n", False),
        (r"\d+", "\u0663\u0664", True),  # Arabic-Indic digits are \d in re
        (r"\w+", "\u00e9", True),
        (r"\s", "\x1c", True),  # re's \s includes the ASCII separators
        (r"\s", "\x85", True),
        (r"(?a)\w", "\u00e9", False),
        (r"(?i)k", "\u212a", True),  # KELVIN SIGN folds to k in re
        (r"(?i)s", "\u017f", True),  # LATIN SMALL LETTER LONG S
        (r"(?i)[a-c]+x", "BCX", True),
        (r"a.c", "a\nc", False),
        (r"(?s)a.c", "a\nc", True),
        (r"(?m)^b$", "a\nb\nc", True),
        (r"^b", "a\nb", False),
        (r"[^\W\d]", "5", False),
        (r"(?i:AB)c", "abC", False),
    ],
)
def test_re2_translation_means_what_re_means(pattern, text, expected):
    a = analyze(pattern)
    assert a.linear_safe, a.re2_issue
    assert (re.search(pattern, text) is not None) == expected
    assert (re2.compile(a.re2_pattern).search(text) is not None) == expected


def test_unicode_word_boundary_translation_is_marked_ascii_only():
    a = analyze(r"\bcafé\b")
    assert a.linear_safe and a.re2_ascii_only
    assert not analyze(r"(?a)\bx\b").re2_ascii_only


def test_untranslatable_constructs_say_why():
    assert analyze(r"ab$cd").re2_issue.startswith("'$' before more pattern")
    assert "1000" in analyze(r"x{2000}").re2_issue


GAP_PATTERNS = [
    r"(.+?) is not", r"^abc", r"abc$", r"^a(.+?)b$", r"^$", r"^(.+?)$", r"a.*b.+c", r"^(.*)x(.+)$", r"x", r"",
    r"a(.+?)(.*?)b", r"^ab(.+?)", r"(.+?)ab$", r"^ab$", r"^(a)(b)$", r"aa(.+?)aa$", r"^(.+?)aa", r"\Aab\Z",
]


@pytest.mark.parametrize("pattern", GAP_PATTERNS)
def test_gap_plan_decides_exactly_like_re_on_every_short_line(pattern):
    import itertools

    from errkb.text.patterns import gap_match

    plan = analyze(pattern).gap_plan
    assert plan is not None
    for n in range(7):
        for chars in itertools.product("ab xc", repeat=n):
            text = "".join(chars)
            assert gap_match(text, plan) == (re.search(pattern, text) is not None), text


@pytest.mark.parametrize("pattern", [r"(?i)abc", r"a\d", r"a.{2,5}b", r"(?m)^a", r"a|b", r"(?s:.+)x", r"[ab]c"])
def test_gap_plan_only_for_plain_literal_and_gap_shapes(pattern):
    assert analyze(pattern).gap_plan is None


WARNINGS_PROBE = r"""
import json, pkgutil, importlib, warnings
before = list(warnings.filters)
import errkb
for info in pkgutil.walk_packages(errkb.__path__, "errkb."):
    if info.name != "errkb.__main__" and ".reproducers.cases" not in info.name:
        try:
            importlib.import_module(info.name)
        except ImportError:
            pass  # an optional dependency (pyspark, ...) this environment lacks
after = list(warnings.filters)
from errkb.text import bounded, patterns
from errkb.match.matcher import Matcher
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    nested = "Bracket [[]x] in the message"
    a = patterns.analyze(nested)
    m = Matcher.from_records([{"id": "n", "slug": "n", "repo": "x/y", "messagePattern": nested}], confirm="re")
    found = [x.record_id for x in m.match("Bracket [x] in the message")]
    bounded.search(nested, "", 0.05)
    ours = [str(w.message) for w in caught]
    warnings.warn("Possible nested set at position 1", FutureWarning)  # the host's own
    host = [str(w.message) for w in caught][len(ours):]
print(json.dumps({"same": before == after, "added": [str(f) for f in after if f not in before],
                  "ours": ours, "host": host, "found": found, "error": a.compile_error}))
"""


def test_importing_errkb_leaves_the_hosts_warning_filters_alone():
    """errkb as a library: importing every module changes no warnings filter, and
    re's set-syntax FutureWarning is silenced only around errkb's own parse of a
    dataset pattern; the same warning raised by the host still reaches it."""
    import json
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", WARNINGS_PROBE], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout)
    assert result["same"], result["added"]
    assert result["ours"] == [] and result["found"] == ["n"] and result["error"] is None
    assert result["host"] == ["Possible nested set at position 1"]
