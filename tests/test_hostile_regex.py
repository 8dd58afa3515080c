"""Generated hostile patterns over generated hostile texts, on every path that runs a
record's regex (lint's self-match, the matcher's engines, the one-off search):
each call ends within the time bound, and what the bound cut short is reported.

Hypothesis draws the cases; each batch runs in a fresh interpreter under a hard
timeout, so a path that backtracks without bound fails the test instead of hanging
the suite. The per-call limit (5 s) is a stall detector, not a benchmark: the bounds
are 50 ms per text for the matcher and 1 s for lint.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support import REPO, SEED_FILE, SEED_ID, force_stored_record

PER_CALL_LIMIT_S = 5.0
BATCH_TIMEOUT_S = 240

# Pieces that overlap with each other and with the texts below: under a star, in a
# nest or in a sequence they are what makes a backtracking engine exponential.
ATOMS = ["a", "aa", "a?", "\\w", "\\w+", "\\s?", ".", ".*", "[aé]", "é", "\\d", "[^!]", "\\S", "(?:a|\\w)"]
FILL = ["a", "é", "aé", "a ", "1", "_", "\u0301", "a\u00a0"]
END = ["!", "", "\n", "\u0301", " é", "\x1c"]


@st.composite
def hostile_pattern(draw) -> str:
    a, b = draw(st.sampled_from(ATOMS)), draw(st.sampled_from(ATOMS))
    shape = draw(st.sampled_from(["alt_star", "nest", "sequence", "bounded_backref", "counted", "lookahead"]))
    if shape == "alt_star":  # overlapping branches under one star (lint's old E202 hang)
        body = f"(?:{a}|{b})*"
    elif shape == "nest":
        body = f"(?:{a}{draw(st.sampled_from('+*'))}){draw(st.sampled_from(['+', '*', '{2,}']))}"
    elif shape == "sequence":
        body = "".join(f"{draw(st.sampled_from(ATOMS))}*" for _ in range(draw(st.integers(3, 6))))
    elif shape == "bounded_backref":
        body = f"({a}+)+\\1"
    elif shape == "counted":
        body = f"(?:{a}){{1,{draw(st.integers(20, 900))}}}(?:{b})*"
    else:
        body = f"(?=(?:{a})+$)(?:{b})+"
    # \b (Unicode in re, ASCII-only in RE2) sent such patterns to plain `re` on
    # non-ASCII text; anchors force a failing end so every split is tried.
    left = draw(st.sampled_from(["", "\\b", "^"]))
    right = draw(st.sampled_from(["$", "\\b!", "!", "\\b"]))
    return f"Boom: {left}{body}{right}"


@st.composite
def hostile_text(draw) -> str:
    fill = draw(st.sampled_from(FILL))
    n = draw(st.integers(1_000, 4_000)) // len(fill)
    return "Boom: " + fill * n + draw(st.sampled_from(END))


WORKER = textwrap.dedent(r"""
    import json, sys, time
    from errkb.text import bounded
    from errkb.match.matcher import Matcher
    from errkb.records.lint import lint_record

    cases = json.load(sys.stdin)
    worst = {}
    def timed(path, fn):
        started = time.perf_counter()
        fn()
        worst[path] = max(worst.get(path, 0.0), time.perf_counter() - started)

    cut = {"timeouts": 0, "skipped": 0}
    for pattern, text in cases:
        record = {"id": "h", "slug": "h", "repo": "x/y", "errorClass": "E", "messagePattern": pattern, "errorMessage": text}
        timed("lint E202", lambda: lint_record(record))
        timed("bounded.search", lambda: bounded.search(pattern, text, 0.05))
        for confirm in ("re2", "re"):
            m = Matcher.from_records([record], confirm=confirm)
            timed(f"match ({confirm})", lambda: m.match(text))
            timed(f"match_lines ({confirm})", lambda: m.match_lines([text] * 3))
            timed(f"match_lines raw ({confirm})", lambda: m.match_lines([text], raw=True))
            for k, v in m.bounded_report().items():
                if k != "disabled":
                    cut[k] += v
    print(json.dumps({"worst": worst, "cut": cut}))
""")


def run_worker(cases: list[tuple[str, str]]) -> dict:
    try:
        done = subprocess.run([sys.executable, "-c", WORKER], input=json.dumps(cases), capture_output=True,
                              text=True, timeout=BATCH_TIMEOUT_S, cwd=REPO)
    except subprocess.TimeoutExpired:
        pytest.fail(f"a batch of {len(cases)} hostile cases ran past {BATCH_TIMEOUT_S} s")
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


@settings(max_examples=1, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(st.lists(st.tuples(hostile_pattern(), hostile_text()), min_size=40, max_size=40))
def test_generated_hostile_patterns_end_within_the_bound_on_every_path(cases):
    result = run_worker(cases)
    slow = {path: round(s, 2) for path, s in result["worst"].items() if s > PER_CALL_LIMIT_S}
    assert not slow, (slow, cases)
    # the generators make at least some cases the bound has to cut short, and the
    # matcher says so instead of answering "no match" silently
    assert result["cut"]["timeouts"] > 0


def test_a_timed_out_pattern_is_disabled_after_three_strikes_and_reported():
    from errkb.match.matcher import BOUNDED_STRIKES, Matcher

    record = {"id": "slow", "slug": "s", "repo": "x/y", "errorClass": "E", "messagePattern": r"Boom: (a+)+\1!"}
    m = Matcher.from_records([record])
    lines = ["Boom: " + "a" * 5000] * 10
    m.match_lines(lines, raw=True)
    report = m.bounded_report()
    assert report["timeouts"] == BOUNDED_STRIKES
    assert report["disabled"] == ["slow"]
    assert report["skipped"] == len(lines) - BOUNDED_STRIKES


def test_unicode_word_boundary_on_non_ascii_text_keeps_re_meaning():
    """The bounded path stands in for `re` on a Unicode \\b: same answers, exactly."""
    import re

    from errkb.match.matcher import Matcher

    cases = [(r"\bcafé\b", "un café noir"), (r"\bcaf\b", "un café noir"), (r"x\b", "x\u0301"),
             (r"\d\b", "\u0663 a"), (r"\Bé", "éé"), (r"(?a)\bé", " é"), (r"a$", "a\n"), (r"K\s", "K\x1c")]
    for pattern, text in cases:
        m = Matcher.from_records([{"id": "p", "slug": "p", "repo": "x/y", "messagePattern": pattern}])
        assert bool(m.match_lines([text], raw=True)[0]) == bool(re.search(pattern, text)), (pattern, text)


def test_lint_of_an_exponential_self_match_ends_and_says_why(tmp_path):
    """The issue's example: overlapping alternation under one star, which plain `re`
    ran for minutes; lint now ends within its 1 s bound and reports E202."""
    record = json.loads(SEED_FILE.read_text())["record"]
    record = dict(record, messagePattern=r"^Boom: (?:a|aa)*$", errorMessage="Boom: " + "a" * 3000 + "!")
    path = tmp_path / "r.json"
    path.write_text(json.dumps(record))
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "errkb", "lint", "--json", str(path)], capture_output=True,
                          text=True, timeout=60, cwd=REPO)
    assert time.monotonic() - started < 30
    findings = json.loads(done.stdout)
    assert any(f["code"] == "E202" for f in findings), findings


def _store_with_hostile_records(tmp_path, n: int) -> dict:
    """A store holding the seed and ``n`` records whose pattern backtracks on every
    "Boom:" line (stored past lint, as an older errkb or a hand edit would)."""
    from errkb.store.db import Store

    record = json.loads(SEED_FILE.read_text())["record"]
    db = tmp_path / "s.duckdb"
    with Store.open(db) as store:
        store.ingest([SEED_FILE])
        for i in range(n):
            hostile = dict(record, id=f"{i:016x}", slug=f"hostile-{i}", messagePattern=rf"Boom: \b(?:\w|\w\w|{i})*\b!",
                           errorMessage="Boom: aé!")
            force_stored_record(store.con, hostile, like_id=SEED_ID)
    return dict(os.environ, ERRKB_DB=str(db))


HOSTILE_LINE = ("Boom: " + "aé" * 2000 + "\n").encode()


def test_enrich_over_hostile_records_ends_and_reports_what_was_cut_short(tmp_path):
    """The issue's case: ten backtracking records over a 200-line log took 117 s and
    said nothing. Now each record runs out of time at most three times, and the
    counters say so."""
    env = _store_with_hostile_records(tmp_path, 10)
    done = subprocess.run([sys.executable, "-m", "errkb", "enrich", "--json"], input=HOSTILE_LINE * 200,
                          capture_output=True, env=env, cwd=REPO, timeout=120)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    assert len(done.stdout.splitlines()) == 200
    counters = json.loads(done.stderr.decode().strip().splitlines()[-1])
    assert counters["bounded"]["timeouts"] == 30
    assert len(counters["bounded"]["disabled"]) == 10
    human = subprocess.run([sys.executable, "-m", "errkb", "enrich"], input=HOSTILE_LINE * 5,
                           capture_output=True, env=env, cwd=REPO, timeout=120)
    assert "pattern runs hit the time bound" in human.stderr.decode()


def test_enrich_over_hostile_records_honours_sigterm_promptly(tmp_path):
    """SIGTERM while the filter works through hostile lines: it stops within seconds."""
    env = _store_with_hostile_records(tmp_path, 10)
    proc = subprocess.Popen([sys.executable, "-m", "errkb", "enrich"], stdin=subprocess.PIPE,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, cwd=REPO)
    try:
        proc.stdin.write(HOSTILE_LINE * 200)
        proc.stdin.flush()
        time.sleep(2)
        sent = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
        waited = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            proc.kill()
    assert waited < 5, f"enrich took {waited:.1f} s to stop after SIGTERM"


def test_explain_says_what_the_time_bound_cut_short(tmp_path):
    env = _store_with_hostile_records(tmp_path, 2)
    line = HOSTILE_LINE.decode().strip()
    done = subprocess.run([sys.executable, "-m", "errkb", "explain", "--json", line], capture_output=True, text=True,
                          env=env, cwd=REPO, timeout=120)
    notes = json.loads(done.stdout)["notes"]
    assert any("hit the 50 ms time bound" in n for n in notes), notes
    done = subprocess.run([sys.executable, "-m", "errkb", "explain", line], capture_output=True, text=True,
                          env=env, cwd=REPO, timeout=120)
    assert "hit the 50 ms time bound" in done.stderr, done.stderr


# Counted repeats are compiled by copying their body: this one is 10**9 copies. Before
# E207 the `regex` module of lint's self-match grew to 24 GB until the kernel killed the
# ingest. Each run gets a hard memory limit, so a regression fails instead of swapping.
EXPANDING = "Expanding: (?:(?:y{1000}){1000}){1000}"


def _limited(args, env=None, **kw):
    import resource

    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))

    return subprocess.run([sys.executable, "-m", "errkb", *args], capture_output=True, text=True, cwd=REPO,
                          timeout=120, preexec_fn=limit, env=env, **kw)


def test_a_pattern_whose_counted_repeats_expand_past_the_limit_is_a_reject_not_an_oom(tmp_path):
    record = dict(json.loads(SEED_FILE.read_text())["record"], messagePattern=EXPANDING, errorMessage="Expanding: yyy")
    path = tmp_path / "r.json"
    path.write_text(json.dumps(record))
    done = _limited(["ingest", "--db", str(tmp_path / "s.duckdb"), str(path)])
    assert done.returncode == 1, done.stderr[-2000:]
    assert done.stdout == "0 new, 0 updated, 0 unchanged, 1 rejected\n"
    assert done.stderr == (
        f"{path}:1:1: E207 pattern-too-costly [{SEED_ID}] messagePattern cannot be run: its counted repeats expand it "
        "by over 100,000 items, more than an engine can compile in bounded memory (fix: write long repeats as (.+?) or a "
        "smaller count ({n} copies of a group are compiled n times))\n"
        "1 rejected record(s) kept with their reasons; see them with `errkb rejects`\n")


def test_a_stored_pattern_too_costly_to_compile_is_skipped_by_every_engine(tmp_path):
    from errkb.match.js_regex import js_pattern
    from errkb.match.matcher import Matcher
    from errkb.store.db import Store
    from errkb.text import bounded

    assert bounded.search(EXPANDING, "Expanding: yyy", 1.0) is None
    m = Matcher.from_records([{"id": "x", "slug": "x", "repo": "x/y", "messagePattern": EXPANDING}])
    assert [s["reason"] for s in m.skipped] == [
        "its counted repeats expand it by over 100,000 items, more than an engine can compile in bounded memory"]
    assert js_pattern(EXPANDING).reason == m.skipped[0]["reason"]
    record = json.loads(SEED_FILE.read_text())["record"]
    db = tmp_path / "s.duckdb"
    with Store.open(db) as store:
        store.ingest([SEED_FILE])
        force_stored_record(store.con, dict(record, id="00000000000000e1", slug="expanding", messagePattern=EXPANDING,
                                            errorMessage="Expanding: yyy"), like_id=SEED_ID)
    env = dict(os.environ, ERRKB_DB=str(db))
    explained = _limited(["explain", "Expanding: " + "y" * 5000], env=env)
    assert explained.returncode == 1, explained.stderr[-2000:]
    assert explained.stdout.startswith("No known error matches this text.")
    enriched = _limited(["enrich", "-q"], env=env, input="Expanding: yyy\n")
    assert (enriched.returncode, enriched.stdout) == (0, '{"message": "Expanding: yyy"}\n'), enriched.stderr[-2000:]


def test_patterns_engines_refuse_or_re_warns_about_leave_stderr_clean(tmp_path):
    """RE2 logs a refused pattern through C++ (absl) and `re` warns about "[[" with a
    FutureWarning: both landed on the user's stderr between errkb's own lines."""
    seed = json.loads(SEED_FILE.read_text())["record"]
    records = [dict(seed, id="00000000000000f1", slug="nested-repeats", messagePattern="Nested (?:y{10}){200} end",
                    errorMessage="Nested " + "y" * 2000 + " end"),
               dict(seed, id="00000000000000f2", slug="nested-set", messagePattern="Bracket [[]x] in the message",
                    errorMessage="Bracket [x] in the message")]
    path = tmp_path / "r.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    done = _limited(["ingest", "--db", str(tmp_path / "s.duckdb"), str(path)])
    assert (done.returncode, done.stdout) == (0, "2 new, 0 updated, 0 unchanged, 0 rejected\n")
    # the style findings of the stored records are said; nothing else (no engine's warning)
    assert all(line.startswith("warning: ") and " W" in line for line in done.stderr.splitlines()), done.stderr
    env = dict(os.environ, ERRKB_DB=str(tmp_path / "s.duckdb"))
    explained = _limited(["explain", "--json", "Nested " + "y" * 2000 + " end"], env=env)
    assert explained.returncode == 0 and explained.stderr == "", explained.stderr[-2000:]
    assert [m["id"] for m in json.loads(explained.stdout)["matches"]] == ["00000000000000f1"]
