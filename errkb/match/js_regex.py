"""The browser's regex dialect: a record's messagePattern as a JavaScript RegExp (flag
``u``), a gap plan site.js decides with ``indexOf``, or why the browser must not run it.

Built on errkb.text.patterns' exact RE2 translation (which already expands case folding
and Python's Unicode \\d \\w \\s into explicit code-point classes), so the site's paste box
decides the same texts as Python ``re.search``; the backtracking check walks the pattern
with ``re._parser`` because the browser's engine backtracks where RE2 does not.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache

from errkb.text.patterns import analyze, expanded_gap_plans


@dataclass
class JsPattern:
    """A record's messagePattern as a JavaScript RegExp source (flag ``u``), or why not.

    Built from ``errkb.text.patterns``' exact RE2 translation (which already expands
    case folding and Python's Unicode \\d \\w \\s into explicit code-point classes),
    so the browser decides the same texts as Python ``re.search``.
    """

    source: str | None
    literals: list[str]
    ascii_only: bool = False
    reason: str | None = None
    # Literals and (.+?) gaps only: the browser decides these with str.indexOf (site.js
    # gapSpan, linear), never a RegExp: k gaps cost O(n**k) in a backtracking engine.
    # {"any": [plan, ...]}: a pattern with optional groups or branches, one plan each.
    plan: list | dict | None = None

    @property
    def ok(self) -> bool:
        return self.source is not None or self.plan is not None


_RE2_TOKEN = re.compile(
    r"\\x\{(?P<hex>[0-9a-f]+)\}"
    r"|(?P<fixed>\\A|\\z|\\b|\\B|\(\?s:\.\)|\(\?m:\^\)|\(\?m:\$\)|\(\?:|\[\^|[\[\]\-)|*+?])"
    r"|(?P<count>\{\d+(?:,\d*)?\})"
    # Characters errkb.text.patterns writes bare because they are never special in RE2;
    # none is special in a JavaScript `u` regex either, in or out of a class.
    r"|(?P<plain>[A-Za-z0-9 _'\"!#%&,/:;<=>@`~])"
)
_FIXED_JS = {
    "\\A": "^",
    "\\z": "$",
    "\\b": "\\b",
    "\\B": "\\B",
    "(?s:.)": "[\\s\\S]",
    "(?m:^)": "(?:^|(?<=\\n))",
    "(?m:$)": "(?:$|(?=\\n))",
}


def re2_to_js(re2: str) -> str:
    """Map the RE2 syntax that ``errkb.text.patterns`` emits onto JavaScript (``u`` flag).

    That emitter uses a small alphabet (code-point escapes, non-capturing groups,
    classes, quantifiers, a few assertions); anything else raises ValueError rather
    than being guessed at."""
    out: list[str] = []
    pos = 0
    while pos < len(re2):
        m = _RE2_TOKEN.match(re2, pos)
        if m is None:
            raise ValueError(f"unexpected RE2 syntax at offset {pos}: {re2[pos:pos + 12]!r}")
        if m.group("hex") is not None:
            out.append("\\u{%s}" % m.group("hex"))
        elif m.group("fixed") is not None:
            tok = m.group("fixed")
            out.append(_FIXED_JS.get(tok, tok))
        else:
            out.append(m.group(0))
        pos = m.end()
    return "".join(out)


@cache
def js_pattern(pattern: str) -> JsPattern:
    a = analyze(pattern)
    literals = sorted(set(a.required_literals))
    if a.unusable:
        return JsPattern(None, literals, reason=a.unusable)
    if a.exponential_in_re:
        return JsPattern(None, literals, reason="nested repetition could backtrack catastrophically in the browser")
    if not a.linear_safe:
        return JsPattern(None, literals, reason=a.re2_issue or "no exact translation")
    if not literals:
        # Without a required literal there is no prefilter to keep the browser safe.
        return JsPattern(None, literals, reason="no required literal text to prefilter on")
    if a.gap_plan is not None:
        anchored_start, anchored_end, lead, plan_literals, gaps, tail = a.gap_plan
        return JsPattern(None, literals, plan=[anchored_start, anchored_end, lead, list(plan_literals), list(gaps), tail])
    hazard = backtracking_hazard(pattern)
    if hazard:
        plans = expanded_gap_plans(pattern)
        if plans is not None:
            # optional groups or branches around (.+?) gaps: one gap plan per alternative
            return JsPattern(None, literals, plan={"any": [[s, e, lead, list(lits), list(gaps), tail]
                                                          for s, e, lead, lits, gaps, tail in plans]})
        return JsPattern(None, literals, reason=f"{hazard}: could backtrack for a long time in the browser")
    try:
        source = re2_to_js(a.re2_pattern)
    except ValueError as e:
        return JsPattern(None, literals, reason=str(e))
    return JsPattern(source, literals, ascii_only=a.re2_ascii_only)


# The longest line the site gives a RegExp (errkb.site.build.MAX_TEST_LINE; the site
# sits above this module, tests/test_hostile_bounds.py checks the two agree), and how
# many ways a pattern's repeats may split one between them: one unbounded repeat and a
# few short counted ones.
JS_MAX_LINE = 2000
MAX_JS_REPEAT_CHOICES = 8 * JS_MAX_LINE


def backtracking_hazard(pattern: str) -> str | None:
    """Why a backtracking engine (the browser's) could take more than O(n**2) on this
    pattern, or None: it runs as a RegExp only with at most one unbounded repeat, no
    repeat inside a repeat and no alternation inside a repeat. Lines are capped at
    errkb.site.build.MAX_TEST_LINE characters, so the worst case stays a few million steps.

    Counted repeats backtrack too: k consecutive ``a{1,30}`` try 30**k splits of a
    failing text at every start (they kept a tab busy past 30 s). The choices of all
    repeats together (an unbounded one counts a whole line) are bounded by
    MAX_JS_REPEAT_CHOICES."""
    import re._constants as C

    from errkb.text.patterns import parse

    unbounded = 0
    choices = 1
    stack = [(list(parse(pattern)), False)]
    while stack:
        items, in_repeat = stack.pop()
        for op, av in items:
            if op in (C.MAX_REPEAT, C.MIN_REPEAT, C.POSSESSIVE_REPEAT):
                lo, hi, sub = av
                if in_repeat:
                    return "a repeat inside a repeat"
                if hi is C.MAXREPEAT:
                    unbounded += 1
                    if unbounded > 1:
                        return "more than one unbounded repeat"
                choices *= JS_MAX_LINE if hi is C.MAXREPEAT else hi - lo + 1
                if choices > MAX_JS_REPEAT_CHOICES:
                    return f"its repeats can split a line over {MAX_JS_REPEAT_CHOICES:,} ways"
                stack.append((list(sub), hi is C.MAXREPEAT or hi > 1))
            elif op is C.BRANCH:
                if in_repeat:
                    return "an alternation inside a repeat"
                stack.extend((list(alt), in_repeat) for alt in av[1])
            elif op is C.SUBPATTERN:
                stack.append((list(av[3]), in_repeat))
            elif op in (C.ASSERT, C.ASSERT_NOT):
                stack.append((list(av[1]), in_repeat))
    return None
