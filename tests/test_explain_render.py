"""errkb.explain.render, the one renderer of explain's terminal text.

The page of every shape explain prints is pinned byte for byte in
tests/fixtures/explain/ (a match, --all, a pasted traceback, a log and its summary, near
matches, no match, a draft record; plain at 80 columns and coloured at narrow widths).
They were written by the Jinja templates this module replaced and are read here as they
are: a change of wording or layout shows up as a diff of those files. After a deliberate
change (or a re-proof of the seed, whose proof line is on the page), check the diff and
rewrite them with ``ERRKB_UPDATE_GOLDEN=1``.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from errkb.explain.explainer import explain
from errkb.explain.render import LOG_EXPLAINED, render_text
from errkb.kb import KnowledgeBase
from tests.support import REPO, SEED_FILE, SEED_MESSAGE, draft_record, make_store

GOLDEN = REPO / "tests" / "fixtures" / "explain"
LINE = f"(EngineCore_DP0 pid=1234) ERROR 08-14 21:17:39 [core.py:700] ValueError: {SEED_MESSAGE}"
TRACEBACK = (
    "Traceback (most recent call last):\n"
    '  File "/x/site-packages/vllm/distributed/device_communicators/flashinfer_all_reduce.py", line 221, in f\n'
    "    raise ValueError(\n"
    f"ValueError: {SEED_MESSAGE}\n"
)
LOG = "\n".join([f"2026-08-14 12:00:0{i} INFO step {i}" for i in range(3)]
                + [LINE, f"ValueError: {SEED_MESSAGE} (variant 1)", LINE] + ["INFO done"] * 60)
DRIFTED = LINE.replace("trtllm", "nccl")
TWO = f"ValueError: {SEED_MESSAGE} (variant 1)"  # the seed's pattern and its variant's both match
NEAR_LOG = "\n".join([LINE, "ValueError: " + DRIFTED.split("ValueError: ", 1)[1]] + ["INFO done"] * 60)

# name: (text, render options); all_matches follows show_all, as the CLI's --all does
CASES = {
    "match": (LINE, {}),
    "match-others": (TWO, {}),
    "match-all": (TWO, {"show_all": True}),
    "traceback": (TRACEBACK, {}),
    "log": (LOG, {}),
    "log-all": (LOG, {"show_all": True}),
    "log-near": (NEAR_LOG, {}),
    "near": (DRIFTED, {}),
    "no-match": ("nothing to see here", {}),
    "match-color-60": (LINE, {"color": True, "width": 60}),
    "log-all-color-60": (LOG, {"show_all": True, "color": True, "width": 60}),
    "near-color-40": (DRIFTED, {"color": True, "width": 40}),
}
ANSI = re.compile(r"\x1b\[[0-9;]*m")


@pytest.fixture(scope="module")
def draft_kb(tmp_path_factory):
    import json

    seed = json.loads(SEED_FILE.read_text())["record"]
    draft = draft_record(seed)
    db = make_store(tmp_path_factory.mktemp("draft") / "store.duckdb", [draft])
    return KnowledgeBase.open(db), draft["errorMessage"]


def _page(kb, text: str, options: dict) -> str:
    return render_text(explain(kb, text, all_matches=options.get("show_all", False)), **options)


def _check(name: str, page: str) -> None:
    path = GOLDEN / f"{name}.txt"
    if os.environ.get("ERRKB_UPDATE_GOLDEN"):
        path.write_bytes(page.encode("utf-8"))
    assert page == path.read_bytes().decode("utf-8"), f"{name}: the page changed (see the module docstring)"


@pytest.mark.parametrize("name", sorted(CASES))
def test_each_shape_renders_as_pinned(kb, name):
    text, options = CASES[name]
    _check(name, _page(kb, text, options))


def test_a_draft_record_renders_as_pinned(draft_kb):
    kb, message = draft_kb
    page = _page(kb, message, {})
    assert "Draft record: mined from the source" in page and "How to fix" not in page
    _check("draft", page)


def test_the_pinned_cases_reach_every_part_of_the_page(kb):
    pages = {name: _page(kb, text, options) for name, (text, options) in CASES.items()}
    assert len(explain(kb, TWO, all_matches=True).found) > 1 and "-- match 2/" in pages["match-all"]
    assert "1 other record also matched" in pages["match-others"]
    assert explain(kb, LOG).mode == "log" and re.search(r"known errors? in \d+ lines", pages["log"])
    assert "Also in this log, similar to known errors but not exact" in pages["log-near"]
    near = explain(kb, DRIFTED)
    assert not near.found and near.near[0].differences and "differs: " in pages["near"]
    assert "No known error matches this text." in pages["no-match"]
    for heading in ("What it is", "Where it is raised", "Why it happens", "How to fix", "Example fix", "Validate the fix",
                    "Prevention"):
        assert f"\n{heading}\n" in pages["match"], heading


@pytest.mark.parametrize("width", [80, 60, 40])
@pytest.mark.parametrize("name", sorted(CASES))
def test_every_line_fits_the_width_but_a_lone_url(kb, name, width):
    text, options = CASES[name]
    page = ANSI.sub("", _page(kb, text, dict(options, width=width)))
    for line in page.splitlines():
        assert len(line) <= width or line.strip().startswith("https://"), (width, line)


def test_colour_styles_headings_and_nothing_without_it(kb):
    coloured = _page(kb, LINE, {"color": True})
    # every heading, constant or not, is bold: the compiled templates folded constant
    # lines at compile time (uncoloured, at 80 columns) and showed them plain
    for heading in ("What it is", "Where it is raised", "How to fix", "Example fix", "Prevention"):
        assert f"\n\x1b[1m{heading}\x1b[0m\n" in coloured, heading
    assert "\x1b[31m\x1b[1mValueError  flashinfer-allreduce" in coloured
    assert ANSI.sub("", coloured) == _page(kb, LINE, {})
    assert "\x1b" not in _page(kb, LINE, {}) and "\x1b" not in _page(kb, DRIFTED, {"width": 40})


def test_a_log_explains_each_known_error_up_to_the_limit(kb):
    found = explain(kb, LOG).found
    assert 1 < len(found) <= LOG_EXPLAINED  # (test_explain_log has a log with more)
    assert _page(kb, LOG, {}).count("\n-- ") == len(found)


@pytest.mark.parametrize("text", [LINE, TRACEBACK, DRIFTED], ids=["match", "traceback", "near"])
def test_a_warm_cli_call_imports_no_template_engine_click_or_duckdb(store_db, text):
    env = {**os.environ, "NO_COLOR": "1"}
    args = [sys.executable, "-X", "importtime", "-m", "errkb", "explain", "--db", str(store_db), text]
    subprocess.run(args, cwd=REPO, env=env, capture_output=True, check=False)  # makes the cache fresh
    result = subprocess.run(args, cwd=REPO, env=env, capture_output=True, text=True)
    assert result.returncode == (1 if text == DRIFTED else 0), result.stderr[-2000:]
    imported = {line.rsplit("|", 1)[-1].strip() for line in result.stderr.splitlines() if line.startswith("import time:")}
    assert {"errkb.explain.render", "errkb.explain.command"} <= imported
    assert not {m for m in imported if m.split(".")[0] in ("jinja2", "markupsafe", "click", "duckdb")}
