"""errkb explain renders its precompiled templates on errkb's own small runtime
(errkb.explain.runtime), without importing Jinja2: the text must be exactly what Jinja2
renders, in every shape explain prints, and a cold call must load neither Jinja2 nor
DuckDB once the knowledge base's cache is fresh (issue 18's start-up goal)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from errkb.explain import compiled, explainer, runtime
from errkb.explain.explainer import explain
from errkb.resources import templates_dir
from tests.support import REPO, SEED_MESSAGE

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


def _both(explanation, **options) -> tuple[str, str]:
    explainer._templates.cache_clear()
    lite = explainer.render_text(explanation, **options)
    assert isinstance(explainer._templates(options.get("color", False), options.get("width", 80)), runtime.Environment)
    env = explainer._environment(options.get("color", False), options.get("width", 80))
    jinja = env.get_template("explain.txt.j2")
    explainer._templates.cache_clear()
    return lite, _render_with(explanation, jinja, **options)


def _render_with(explanation, template, show_all=False, color=False, width=80) -> str:
    # render_text's own arguments, through the Jinja2 template
    found = explanation.found
    limit = len(found) if show_all else (explainer.LOG_EXPLAINED if explanation.mode == "log" else 1)
    shown = found[:limit]
    return template.render(explanation=explanation, listed=[{"f": f} for f in found], shown=[explainer._view(f) for f in shown],
                           others=len(found) - len(shown), near=[explainer._near_view(n) for n in explanation.near],
                           show_all=show_all)


@pytest.mark.parametrize("text", [LINE, TRACEBACK, LOG, DRIFTED], ids=["match", "traceback", "log", "near"])
@pytest.mark.parametrize("options", [{}, {"show_all": True}, {"color": True, "width": 60}], ids=["plain", "all", "color-60"])
def test_the_runtime_renders_what_jinja_renders(kb, text, options):
    explanation = explain(kb, text, all_matches=options.get("show_all", False))
    lite, jinja = _both(explanation, **options)
    assert lite == jinja
    assert lite.strip()


def test_the_shapes_are_all_exercised(kb):
    # the cases above reach every branch that differs: several matches, a log summary, near matches
    assert len(explain(kb, LINE, all_matches=True).found) >= 1
    assert explain(kb, LOG).mode == "log" and explain(kb, LOG).found
    near = explain(kb, DRIFTED)
    assert not near.found and near.near and near.near[0].differences


def test_jinja_renders_when_the_copies_cannot_be_loaded(kb, monkeypatch):
    explanation = explain(kb, LINE)
    explainer._templates.cache_clear()
    expected = explainer.render_text(explanation)
    monkeypatch.setattr(compiled, "lite_modules", lambda: None)
    explainer._templates.cache_clear()
    try:
        assert not isinstance(explainer._templates(False, 80), runtime.Environment)
        assert explainer.render_text(explanation) == expected
    finally:
        explainer._templates.cache_clear()


def test_copies_of_other_templates_are_not_used(tmp_path):
    for name in compiled.TEMPLATES:
        (tmp_path / name).write_text((templates_dir() / name).read_text() + "\n{# edited #}\n")
    assert compiled.lite_usable(templates_dir())
    assert not compiled.lite_usable(tmp_path)


def test_a_strict_undefined_still_fails():
    with pytest.raises(runtime.UndefinedError, match="'nothing' is undefined"):
        str(runtime.Undefined(name="nothing"))


@pytest.mark.parametrize("text", [LINE, TRACEBACK, DRIFTED], ids=["match", "traceback", "near"])
def test_a_warm_cli_call_imports_neither_jinja2_nor_duckdb(store_db, tmp_path, text):
    env = {**os.environ, "NO_COLOR": "1"}
    args = [sys.executable, "-X", "importtime", "-m", "errkb", "explain", "--db", str(store_db), text]
    subprocess.run(args, cwd=REPO, env=env, capture_output=True, check=False)  # makes the cache fresh
    result = subprocess.run(args, cwd=REPO, env=env, capture_output=True, text=True)
    assert result.returncode == (1 if text == DRIFTED else 0), result.stderr[-2000:]
    imported = {line.rsplit("|", 1)[-1].strip() for line in result.stderr.splitlines() if line.startswith("import time:")}
    assert "errkb.explain.runtime" in imported
    assert not {m for m in imported if m.split(".")[0] in ("jinja2", "duckdb")}
