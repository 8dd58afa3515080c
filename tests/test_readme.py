"""The README is part of the product: its commands must stay true."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from tests.conftest import REPO

README = (REPO / "README.md").read_text(encoding="utf-8")
CI = (REPO / ".ci" / "run").read_text(encoding="utf-8")
HAND_WRITTEN = README.split("<!-- cli-reference")[0]


def code_blocks(text: str) -> list[str]:
    return [b.strip() for b in re.findall(r"```sh\n(.*?)```", text, re.S)]


def test_readme_opens_with_the_main_job_then_the_test_command():
    first, second = code_blocks(README)[:2]
    assert first.startswith("pip install . && errkb explain ")
    assert second == "pip install '.[test]' && python -m pytest"


def test_ci_runs_the_readme_commands():
    first, second = code_blocks(README)[:2]
    assert second in CI.splitlines()
    explained = first.split("errkb explain ", 1)[1]
    assert f"errkb explain {explained}" in CI


def _command_paths():
    sys.path.insert(0, str(REPO / "scripts"))
    from update_readme import command_paths

    from errkb.cli import cli

    return [" ".join(p) for p in command_paths(cli)]


@pytest.mark.parametrize("command", _command_paths())
def test_every_command_is_documented_by_hand(command):
    assert f"errkb {command}" in HAND_WRITTEN, f"`errkb {command}` is not described in README.md"


def test_cli_reference_in_readme_is_fresh():
    result = subprocess.run([sys.executable, "scripts/update_readme.py", "--check"], cwd=REPO, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
