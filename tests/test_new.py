"""errkb new FILE:LINE: one draft record from one raise site, ready to fill in."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from click.testing import CliRunner

from errkb.cli import cli
from errkb.mine.sources import package_path

SHA = "5d3a0d3cbd8d0a5c0b3e4c2b4f7d8b6f1e2a3c4d"

CORE = (
    "import os\n"
    "\n"
    "\n"
    "def open_cache(path, size):\n"
    "    if size <= 0:\n"
    "        raise ValueError(\n"
    '            f"cache size must be positive, got {size} for {path!r}"\n'
    "        )\n"
    "    msg = os.environ.get('X')\n"
    "    raise RuntimeError(msg)\n"
)


def _checkout(tmp_path: Path) -> tuple[Path, str]:
    repo = tmp_path / "proj"
    (repo / "src" / "proj").mkdir(parents=True)
    (repo / "src" / "proj" / "__init__.py").write_text("")
    (repo / "src" / "proj" / "cache.py").write_text(CORE)

    def git(*args):
        return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True).stdout.strip()

    git("init", "-q")
    git("remote", "add", "origin", "git@github.com:proj-org/proj.git")
    git("add", ".")
    git("-c", "user.email=t@example.com", "-c", "user.name=t", "commit", "-q", "-m", "init")
    return repo, git("rev-parse", "HEAD")


def test_new_drafts_a_complete_record_from_a_checkout_line(tmp_path):
    repo, head = _checkout(tmp_path)
    out = tmp_path / "record.json"
    # a line inside the raise statement names that raise
    result = CliRunner().invoke(cli, ["new", f"{repo}/src/proj/cache.py:7", "--out", str(out)])
    assert result.exit_code == 0, result.output
    wrapper = json.loads(out.read_text())
    record = wrapper["record"]
    assert set(wrapper) == {"record", "datasetVersion"}
    assert record["filePath"] == "src/proj/cache.py"
    assert (record["lineNumber"], record["sourceCodeStart"], record["sourceCodeEnd"]) == (6, 1, 10)
    assert record["sourceCode"] == CORE.rstrip("\n")
    assert record["errorClass"] == "ValueError"
    assert record["errorMessage"] == "cache size must be positive, got 3 for '/tmp/example'"
    assert record["messagePattern"] == r"cache size must be positive, got (.+?) for (.+?)"
    assert record["githubUrl"] == f"https://github.com/proj-org/proj/blob/{head}/src/proj/cache.py#L1-L10"
    assert record["analyzedSha"] == head and record["tags"] == ["draft"]
    assert result.stderr.splitlines()[:2] == [
        f"drafted {record['id']} proj-org/proj/{record['slug']} from src/proj/cache.py:6 to {out}",
        "  ValueError: cache size must be positive, got 3 for '/tmp/example'",
    ]
    assert "to write: documentation, triggerScenarios, commonSituations, solutions, handlingStrategy" in result.stderr

    # lint-clean as a draft, and once the prose is written and the tag dropped
    lint = CliRunner().invoke(cli, ["lint", str(out)])
    assert (lint.exit_code, lint.stderr) == (0, "0 error(s), 0 warning(s)\n")
    record.update(documentation="Why.", triggerScenarios="When.", commonSituations="Where.", handlingStrategy="validation",
                  solutions=["Pass a positive size."], tags=["cache"])
    out.write_text(json.dumps(wrapper))
    lint = CliRunner().invoke(cli, ["lint", str(out)])
    assert (lint.exit_code, lint.stderr) == (0, "0 error(s), 0 warning(s)\n")
    ingest = CliRunner().invoke(cli, ["ingest", "--db", str(tmp_path / "s.duckdb"), str(out)])
    assert ingest.exit_code == 0 and "1 new, 0 updated, 0 unchanged, 0 rejected" in ingest.output


def test_new_from_an_installed_package_by_its_import_path():
    core = package_path("click") / "core.py"
    line = next(i for i, text in enumerate(core.read_text().splitlines(), 1) if 'raise TypeError("Callback is not a command.")' in text)
    result = CliRunner().invoke(cli, ["new", f"click/core.py:{line}", "--sha", SHA])
    assert result.exit_code == 0, result.output
    record = json.loads(result.stdout)["record"]
    assert (record["repo"], record["filePath"], record["lineNumber"]) == ("pallets/click", "click/core.py", line)
    assert (record["errorMessage"], record["messagePattern"]) == ("Callback is not a command.", r"Callback is not a command\.")
    assert record["slug"] == "callback-is-not-a-command"
    assert "  source: installed package; click " in result.stderr and "commit given by --sha" in result.stderr


def test_new_errors_say_what_and_where(tmp_path):
    repo, _ = _checkout(tmp_path)
    path = f"{repo}/src/proj/cache.py"

    def run(*args):
        result = CliRunner().invoke(cli, ["new", *args])
        assert result.exit_code == 2, result.output
        return result.stderr.strip()

    assert run("cache.py") == "Error: errkb new: 'cache.py': expected FILE:LINE (e.g. vllm/config.py:221)"
    assert run(f"{tmp_path}/nope.py:3") == f"Error: errkb new: {tmp_path}/nope.py: no such file, here or in an installed package"
    assert run(f"{path}:2") == f"Error: errkb new: {path}:2: no raise statement covers this line; raises nearby at lines 6, 10"
    assert run(f"{path}:10") == f"Error: errkb new: {path}:10: raises RuntimeError but no pattern can be derived: message is a variable"
    assert run(f"{path}:99") == f"Error: errkb new: {path}:99: the file has 10 lines"
    out = tmp_path / "taken.json"
    out.write_text("{}")
    assert run(f"{path}:6", "--out", str(out)) == f"Error: {out}: already exists: choose another --out (a record file is never overwritten)"
    assert out.read_text() == "{}"
