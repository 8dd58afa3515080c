"""The README and docs/ are part of the product: their commands must stay true, every
command and option is described by hand somewhere, and generated pages are fresh."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import click
import pytest

from errkb.cli import cli
from errkb.records.lint import RULES

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text(encoding="utf-8")
CI = (REPO / ".ci" / "run").read_text(encoding="utf-8")
DOCS = sorted((REPO / "docs").glob("*.md"))
# What people wrote: the README and every page of docs/ except the generated CLI reference.
HAND_WRITTEN = README + "".join(p.read_text(encoding="utf-8") for p in DOCS if p.name != "cli.md")

sys.path.insert(0, str(REPO / "scripts"))
from update_docs import command_at, command_paths  # noqa: E402


def code_blocks(text: str) -> list[str]:
    return [b.strip() for b in re.findall(r"```sh\n(.*?)```", text, re.S)]


def test_readme_opens_with_the_main_job_then_the_test_command():
    first, second = code_blocks(README)[:2]
    # Their own virtual environment: a stock Debian/Ubuntu Python refuses `pip install .`
    # (PEP 668) and may lack ensurepip (python3-venv), so pip installs into a venv made without it.
    venv = "python3 -m venv --without-pip .venv && python3 -m pip --python .venv/bin/python install pip "
    assert first.startswith(venv + ". && .venv/bin/errkb explain ")
    assert second == venv + "'.[test]' && .venv/bin/python -m pytest"


def test_ci_runs_the_readme_commands():
    first, second = code_blocks(README)[:2]
    # verbatim but for the venv's place, a folder nobody (the sandbox's user) can reach
    assert second.replace(".venv", '"$venv"') in CI.splitlines()
    install = first.split(" && .venv/bin/errkb explain ", 1)[0]
    assert install.replace(".venv", '"$venv"') in CI.splitlines()
    explained = first.split("errkb explain ", 1)[1]
    assert f"errkb explain {explained}" in CI


def test_readme_is_a_readme_not_a_manual():
    assert len(README.splitlines()) <= 250


COMMANDS = [" ".join(p) for p in command_paths(cli)]


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_is_documented_by_hand(command):
    assert f"errkb {command}" in HAND_WRITTEN, f"`errkb {command}` is not described in README.md or docs/"


OPTIONS = [(" ".join(path), name) for path in command_paths(cli) for param in command_at(path).params
           if isinstance(param, click.Option) for name in param.opts[:1] if name.startswith("--") and name != "--help"]


@pytest.mark.parametrize(("command", "option"), OPTIONS)
def test_every_option_is_documented_by_hand(command, option):
    long_names = [n for p in command_at(tuple(command.split())).params if option in p.opts for n in p.opts
                  if n.startswith("--")]
    assert any(n in HAND_WRITTEN for n in long_names), f"`errkb {command} {option}` is not described in README.md or docs/"


def test_every_docs_page_is_reachable_from_the_readme():
    linked = set(re.findall(r"\]\(docs/([^)#]+)", README))
    assert {p.name for p in DOCS} <= linked


@pytest.mark.parametrize("page", [REPO / "README.md", *DOCS], ids=lambda p: p.name)
def test_relative_links_resolve(page):
    text = page.read_text(encoding="utf-8")
    for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text):
        if re.match(r"[a-z]+:", target):
            continue
        assert (page.parent / target).exists(), f"{page.name}: link to {target} does not resolve"


@pytest.mark.parametrize("code", sorted(RULES))
def test_every_lint_rule_is_in_the_records_page(code):
    assert f"| {code} |" in (REPO / "docs" / "records.md").read_text(encoding="utf-8")


def test_cli_reference_is_fresh():
    result = subprocess.run([sys.executable, "scripts/update_docs.py", "--check"], cwd=REPO, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
