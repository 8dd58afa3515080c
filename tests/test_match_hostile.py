"""Hostile patterns and hostile text must never stall matching.

Each case runs in a real subprocess with a timeout, so a regression that backtracks
catastrophically fails the test instead of hanging the suite. The bound (10 s) is
generous on purpose: it is a stall detector, not a benchmark.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time

import pytest

from errkb.match.matcher import Matcher
from errkb.text.patterns import analyze
from tests.support import SEED_FILE, force_stored_record

STALL_BOUND_S = 10.0

HOSTILE = [
    # (pattern, adversarial text): each takes effectively forever in Python's `re`
    (r"(a+)+$", "a" * 50_000 + "!"),
    (r"(.*a){25}", "a" * 50_000),
    (r"(x+x+)+y", "x" * 50_000),
    (r"^(\w+\s?)*$", "word " * 10_000 + "!"),
    (r"Expected (.+?) but got (.+?) for (.+?) at index (.+?)!", "Expected " + "a but got b for c at index d " * 2_000),
]
# Patterns that need backtracking (no linear engine runs them): bounded path.
HOSTILE_BACKTRACKING = [
    (r"(a+)+\1$", "a" * 50_000 + "!"),
    (r"(?=(a+)+$)b", "a" * 50_000 + "!"),
    (r"(\w+)(?<=a)+\1z", "a" * 50_000),
]


def run_isolated(code: str) -> tuple[float, str]:
    """Run `code` in a fresh interpreter; return (seconds, stdout). Fails on a stall."""
    started = time.perf_counter()
    try:
        done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                              timeout=STALL_BOUND_S * 3)
    except subprocess.TimeoutExpired:
        pytest.fail(f"matching stalled for more than {STALL_BOUND_S * 3:.0f} s")
    elapsed = time.perf_counter() - started
    assert done.returncode == 0, done.stderr
    return elapsed, done.stdout


@pytest.mark.parametrize("pattern, text", HOSTILE, ids=[p for p, _ in HOSTILE])
def test_catastrophic_patterns_are_linear_safe(pattern, text):
    a = analyze(pattern)
    assert a.linear_safe, a.re2_issue
    if pattern.startswith("(a+)") or pattern.startswith("(.*a)"):
        assert a.exponential_in_re


@pytest.mark.parametrize("pattern, text", HOSTILE + HOSTILE_BACKTRACKING, ids=[p for p, _ in HOSTILE + HOSTILE_BACKTRACKING])
def test_hostile_pattern_on_adversarial_line_does_not_stall(pattern, text):
    code = f"""
        import json, time
        from errkb.match.matcher import Matcher
        from errkb.text import normalize
        pattern, text = json.loads({json.dumps(json.dumps([pattern, text]))})
        m = Matcher.from_records([{{"id": "evil", "slug": "evil", "repo": "x/y", "messagePattern": pattern,
                                    "errorClass": "ValueError", "severity": "error"}}])
        t = time.perf_counter()
        one = m.match(text)
        batch = m.match_lines([text, "ordinary line!", text])
        log = [found for _msg, found in m.match_log([text, "ERROR boom!", text])]
        print(json.dumps({{"seconds": time.perf_counter() - t, "one": len(one),
                          "batch": [len(r) for r in batch], "log": [len(r) for r in log],
                          "timeouts": m.bounded_timeouts}}))
    """
    elapsed, out = run_isolated(code)
    result = json.loads(out)
    assert result["seconds"] < STALL_BOUND_S, result
    assert elapsed < STALL_BOUND_S * 2
    assert result["batch"][1] == 0 and result["log"][1] == 0


def test_hostile_patterns_among_real_ones_in_the_pure_python_path():
    # without RE2, `re` confirms; exponential shapes must still go to the bounded path
    code = """
        import json, time
        from errkb.match.matcher import Matcher
        recs = [{"id": "evil", "slug": "evil", "repo": "x/y", "messagePattern": r"(a+)+$", "errorClass": "E"},
                {"id": "evil2", "slug": "evil2", "repo": "x/y", "messagePattern": r"(.*a){25}", "errorClass": "E"},
                {"id": "ok", "slug": "ok", "repo": "x/y", "messagePattern": r"disk (.+?) full", "errorClass": "E"}]
        m = Matcher.from_records(recs, prefilter="python", confirm="re")
        t = time.perf_counter()
        found = [[x.record_id for x in r] for r in m.match_lines(["a" * 50_000 + "!", "disk sda full"])]
        print(json.dumps({"seconds": time.perf_counter() - t, "found": found}))
    """
    _elapsed, out = run_isolated(code)
    result = json.loads(out)
    assert result["seconds"] < STALL_BOUND_S
    # (a+)+$ cannot match a line ending in "!"; (.*a){25} can and may be found
    assert "evil" not in result["found"][0] and result["found"][1] == ["ok"]


def test_bounded_path_matches_what_it_can_and_reports_timeouts():
    m = Matcher.from_records([{"id": "bt", "slug": "bt", "repo": "x/y", "messagePattern": r"(a+)+\1$", "errorClass": "E"}])
    assert [x.record_id for x in m.match("aaaa")] == ["bt"]  # small input: decided exactly
    assert m.match_lines(["a" * 30_000 + "!"]) == [()]
    assert m.bounded_timeouts >= 1
    assert m.match_lines(["a" * 1_000_001]) == [()]
    assert m.bounded_skipped == 1


def test_pattern_that_became_invalid_in_the_store_is_skipped(db_path, seed_record):
    from errkb.store.db import Store

    store = Store.open(db_path)
    store.ingest([SEED_FILE])
    # lint rejects a bad pattern at ingest; simulate a stored record going bad later
    # (an older errkb, a hand-edited file) by corrupting the stored JSON itself
    bad = dict(seed_record, messagePattern=seed_record["messagePattern"].replace("\\. Please use", "(?P<x>unterminated"))
    force_stored_record(store.con, bad, like_id=seed_record["id"])
    [stored] = store.records()
    assert stored["messagePattern"].endswith("(?P<x>unterminated 'mnnvl' backend instead\\.")
    from errkb.kb import KnowledgeBase

    m = KnowledgeBase.from_store(store).matcher
    store.close()
    assert [s["id"] for s in m.skipped] == [seed_record["id"]]
    assert m.skipped[0]["reason"].startswith("does not compile: ")
    assert m.match(seed_record["errorMessage"]) == []
