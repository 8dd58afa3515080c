"""site.js decides literal-and-gap patterns with indexOf (gapSpan), never a RegExp:
its answers and spans must be re.search's. Generated texts (hypothesis), run in node."""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from errkb.match.js_regex import js_pattern
from tests.support import REPO

NODE = shutil.which("node")
pytestmark = pytest.mark.skipif(NODE is None, reason="needs node to run site.js's gapSpan")

PATTERNS = [r"Expected (.+?) but got (.+?) items", r"^got (.+?) items$", r"(.+?)ends here(.+?)", r"^abc", r"abc$",
            r"^(.+?)x$", r"a(.+?)b(.*?)c", r"Please use 'mnnvl' backend\."]


def gap_span_source() -> str:
    src = (REPO / "templates/site/static/site.js").read_text()
    return src[src.index("  // k code points on from"):src.index("  window.errkbGapSpan")]


@settings(max_examples=20, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(PATTERNS),
                          st.lists(st.one_of(st.sampled_from(["Expected ", " but got ", " items", "got ", "ends here", "abc",
                                                              "x", "a", "b", "c", "Please use 'mnnvl' backend."]),
                                             st.text(alphabet="ab x😀é\u0301", max_size=3)), max_size=7).map("".join)),
                min_size=50, max_size=50))
def test_gap_span_is_re_search(cases):
    payload = []
    for pattern, text in cases:
        js = js_pattern(pattern)
        assert js.plan is not None and js.source is None, pattern
        m = re.search(pattern, text)
        def utf16(i: int, text: str = text) -> int:
            return len(text[:i].encode("utf-16-le")) // 2

        payload.append([pattern, js.plan, text, m and [utf16(m.start()), utf16(m.end())]])
    script = gap_span_source() + "\nconst cases = " + json.dumps(payload) + ";\n" + \
        "const bad = cases.filter(([p, plan, t, want]) => { const s = gapSpan(t, plan); " \
        "return JSON.stringify(s && [s.start, s.end]) !== JSON.stringify(want); });\n" \
        "console.log(JSON.stringify(bad.slice(0, 3)));"
    done = subprocess.run([NODE, "-e", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == []


def test_gap_span_is_linear_on_a_hostile_line():
    js = js_pattern(r"Boom: (.+?)a(.+?)a(.+?)a(.+?)!$")
    script = gap_span_source() + f"\nconst t0 = Date.now(); const s = gapSpan('Boom: ' + 'a'.repeat(200000), {json.dumps(js.plan)});" \
        "\nconsole.log(JSON.stringify([s, Date.now() - t0]));"
    done = subprocess.run([NODE, "-e", script], capture_output=True, text=True, timeout=60)
    span, ms = json.loads(done.stdout)
    assert span is None and ms < 2000
