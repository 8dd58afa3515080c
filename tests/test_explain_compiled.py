"""The explain templates ship precompiled (errkb.explain.compiled): same output as compiling
them in process, used only when they match the templates and the Jinja release."""

from __future__ import annotations

import json
import subprocess
import sys

from click.testing import CliRunner

from errkb.cli import cli
from errkb.explain import compiled, explainer
from errkb.resources import templates_dir
from tests.support import REPO, SEED_MESSAGE


def test_committed_compiled_templates_are_fresh():
    result = subprocess.run([sys.executable, "scripts/compile_templates.py", "--check"], cwd=REPO,
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert compiled.usable(templates_dir())


def test_compiled_and_in_process_templates_render_the_same(seed_db, monkeypatch):
    args = ["explain", "--db", str(seed_db), f"ValueError: {SEED_MESSAGE}"]
    explainer._environment.cache_clear()
    with_compiled = CliRunner().invoke(cli, args)
    monkeypatch.setattr(compiled, "usable", lambda templates: False)
    explainer._environment.cache_clear()
    in_process = CliRunner().invoke(cli, args)
    explainer._environment.cache_clear()
    assert with_compiled.exit_code == in_process.exit_code == 0
    assert with_compiled.output == in_process.output


def test_a_manifest_from_other_templates_is_not_used(tmp_path, monkeypatch):
    for name in compiled.TEMPLATES:
        (tmp_path / name).write_text((templates_dir() / name).read_text() + "\n{# edited #}\n")
    assert not compiled.usable(tmp_path)
    stale = json.loads(compiled.MANIFEST.read_text())
    stale["jinja2"] = "0.0"
    monkeypatch.setattr(compiled, "MANIFEST", tmp_path / "manifest.json")
    compiled.MANIFEST.write_text(json.dumps(stale))
    assert not compiled.usable(templates_dir())
