"""errkb mine: draft records from real packages, and the command's contract."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest
from click.testing import CliRunner

from errkb.cli import cli
from errkb.mine.drafts import MineError, mine, slugify
from errkb.mine.sources import SourceTree, package_path
from errkb.records.lint import lint_record
from errkb.records.schema import validate

SHA = "5d3a0d3cbd8d0a5c0b3e4c2b4f7d8b6f1e2a3c4d"  # a commit id given by the user, as --sha
NOW = datetime(2026, 8, 15, 12, 0, tzinfo=UTC)


def _pyenv_site_package(name: str) -> Path | None:
    """botocore and numpy live in the base interpreter, not in the test venv."""
    out = subprocess.run(
        [sys.base_prefix + "/bin/python3", "-c", f"import importlib.util as u; s = u.find_spec({name!r}); print(s.submodule_search_locations[0] if s else '')"],
        capture_output=True, text=True, check=False,
    )
    path = out.stdout.strip()
    return Path(path) if out.returncode == 0 and path else None


def _packages():
    params = [pytest.param(str(package_path("click")), "pallets/click", id="click"),
              pytest.param(str(package_path("jsonschema")), "python-jsonschema/jsonschema", id="jsonschema")]
    botocore = _pyenv_site_package("botocore")
    params.append(pytest.param(str(botocore) if botocore else None, "boto/botocore", id="botocore",
                               marks=pytest.mark.skipif(botocore is None, reason="botocore is not installed in the base Python")))
    return params


@pytest.mark.parametrize("path, repo", _packages())
def test_every_mined_pattern_matches_its_own_message_over_a_real_package(path, repo):
    result = mine(path, repo=repo, sha=SHA, now=NOW, lint=False)
    records = result.records
    assert len(records) > 5
    problems = []
    for r in records:
        if not re.search(r["messagePattern"], r["errorMessage"]):
            problems.append(f"{r['filePath']}:{r['lineNumber']}: {r['messagePattern']!r} does not match {r['errorMessage']!r}")
        errors = [str(f) for f in lint_record(r) if f.level == "error"]
        if errors:
            problems.append(f"{r['filePath']}:{r['lineNumber']}: {errors}")
    assert problems == []
    # Every raise site is accounted for: templated or counted with a reason.
    summary = result.summary()
    assert summary["templated"] + sum(summary["untemplated_reasons"].values()) == summary["sites"]
    assert summary["records"] == len(records) == summary["templated"]


def test_drafts_are_schema_valid_marked_and_stable():
    first = mine(package="click", repo="pallets/click", sha=SHA, path_prefix="src", now=NOW)
    second = mine(package="click", repo="pallets/click", sha=SHA, path_prefix="src", now=NOW)
    assert [r["id"] for r in first.records] == [r["id"] for r in second.records]
    ids = [r["id"] for r in first.records]
    slugs = [r["slug"] for r in first.records]
    assert len(set(ids)) == len(ids) and len(set(slugs)) == len(slugs)
    for r in first.records:
        assert validate(r) == []
        assert r["tags"] == ["draft"]
        assert r["documentation"] == "" and r["solutions"] == [] and r["preventionTips"] == []
        assert r["filePath"].startswith("src/click/")
        assert r["githubUrl"] == (
            f"https://github.com/pallets/click/blob/{SHA}/{r['filePath']}#L{r['sourceCodeStart']}-L{r['sourceCodeEnd']}"
        )
        assert len(r["sourceCode"].split("\n")) == r["sourceCodeEnd"] - r["sourceCodeStart"] + 1
        assert r["sourceCodeStart"] <= r["lineNumber"] <= r["sourceCodeEnd"]
        assert r["analyzedAt"] == "2026-08-15T12:00:00.000Z"


def test_slugs_follow_the_seed():
    message = "Flashinfer allreduce quantization fusion is not supported for multi-node allreduce"
    assert slugify(message) == "flashinfer-allreduce-quantization-fusion-is-not-su"
    assert slugify("  --- ") == "error"


def _checkout(tmp_path: Path) -> tuple[Path, str]:
    repo = tmp_path / "proj"
    (repo / "proj").mkdir(parents=True)
    (repo / "proj" / "__init__.py").write_text("")
    (repo / "proj" / "core.py").write_text(
        "def load(path):\n"
        "    if not path:\n"
        '        raise ValueError(f"cannot load {path!r}: the file is empty")\n'
        "    if path.endswith('.tmp'):\n"
        '        raise ValueError(f"cannot load {path!r}: the file is empty")\n'
        "\n"
        "def save(path):\n"
        '    raise ValueError(f"cannot load {path!r}: the file is empty")\n'
        '    raise RuntimeError(msg)\n'
    )

    def git(*args):
        return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True).stdout.strip()

    git("init", "-q")
    git("remote", "add", "origin", "https://github.com/proj-org/proj.git")
    git("add", ".")
    git("-c", "user.email=t@example.com", "-c", "user.name=t", "commit", "-q", "-m", "init")
    return repo, git("rev-parse", "HEAD")


def test_cli_mines_a_checkout_into_ingestable_jsonl(tmp_path):
    repo, head = _checkout(tmp_path)
    out = tmp_path / "drafts.jsonl"
    runner = CliRunner()
    result = runner.invoke(cli, ["mine", str(repo), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert f"git checkout; commit {head}" in result.stderr
    assert "4 raise sites, 3 templated (75%), 3 drafts written" in result.stderr
    assert "1  not templated: message is a variable" in result.stderr
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(lines) == 3
    assert all(set(w) == {"record", "datasetVersion"} for w in lines)
    records = [w["record"] for w in lines]
    assert {r["repo"] for r in records} == {"proj-org/proj"}
    assert {r["analyzedSha"] for r in records} == {head}
    assert [r["lineNumber"] for r in records] == [3, 5, 8]
    # The same message three times: ids and slugs still unique.
    assert len({r["id"] for r in records}) == 3
    assert [r["slug"] for r in records] == [
        "cannot-load-tmp-example-the-file-is-empty",
        "cannot-load-tmp-example-the-file-is-empty-2",
        "cannot-load-tmp-example-the-file-is-empty-3",
    ]

    db = tmp_path / "store.duckdb"
    ingest = runner.invoke(cli, ["ingest", "--db", str(db), str(out)])
    assert ingest.exit_code == 0, ingest.output
    assert "3 new, 0 updated, 0 unchanged, 0 rejected" in ingest.output


def test_cli_json_report(tmp_path):
    repo, _ = _checkout(tmp_path)
    out = tmp_path / "d.jsonl"
    result = CliRunner().invoke(cli, ["mine", str(repo / "proj"), "--out", str(out), "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["sites"] == 4 and report["templated"] == 3 and report["records"] == 3
    assert report["untemplated_reasons"] == {"message is a variable": 1}


def test_cli_errors_are_one_line_with_exit_2(tmp_path):
    runner = CliRunner()
    no_sha = runner.invoke(cli, ["mine", "--package", "click"])
    assert no_sha.exit_code == 2
    assert no_sha.stderr.strip().splitlines()[-1] == (
        f"Error: errkb mine: {package_path('click')}: installed package; click {_version('click')}; "
        f"version of click {_version('click')} is known but no commit sha: pass --sha with the release's commit "
        "(errkb's release map knows vLLM, PyTorch and FlashInfer releases, not this one; on a machine that reaches "
        "GitHub, `git ls-remote --tags https://github.com/pallets/click` lists each tag's commit)"
    )
    bad_sha = runner.invoke(cli, ["mine", "--package", "click", "--sha", "abc123"])
    assert bad_sha.exit_code == 2
    assert "Error: errkb mine: --sha 'abc123': expected the full 40-hex-digit lowercase commit id" in bad_sha.stderr
    json_no_out = runner.invoke(cli, ["mine", "--package", "click", "--json"])
    assert json_no_out.exit_code == 2
    assert "Error: --json prints the report on stdout: give --out FILE for the records" in json_no_out.stderr
    missing = runner.invoke(cli, ["mine", str(tmp_path / "nope")])
    assert missing.exit_code == 2
    assert f"Error: errkb mine: {tmp_path / 'nope'}: no such file or folder" in missing.stderr
    both = runner.invoke(cli, ["mine", str(tmp_path), "--package", "click"])
    assert both.exit_code == 2 and "give either a PATH or --package NAME" in both.stderr
    not_installed = runner.invoke(cli, ["mine", "--package", "no_such_package_here"])
    assert not_installed.exit_code == 2
    assert "package 'no_such_package_here' is not installed in this Python" in not_installed.stderr


def test_plain_folder_without_metadata_needs_repo_and_sha(tmp_path):
    (tmp_path / "lib.py").write_text('raise RuntimeError("the library failed to start")\n')
    with pytest.raises(MineError, match="pass --repo owner/name"):
        mine(tmp_path)
    result = mine(tmp_path, repo="o/n", sha=SHA, now=NOW)
    [record] = result.records
    assert record["filePath"] == "lib.py" and record["errorClass"] == "RuntimeError"


def test_nothing_templated_exits_1(tmp_path):
    (tmp_path / "lib.py").write_text("def f(e):\n    raise e\n")
    result = CliRunner().invoke(cli, ["mine", str(tmp_path), "--repo", "o/n", "--sha", SHA, "--out", str(tmp_path / "o.jsonl")])
    assert result.exit_code == 1
    assert "1 raise sites, 0 templated (0%), 0 drafts written" in result.stderr


def _version(dist: str) -> str:
    from importlib.metadata import version

    return version(dist)


def _fake_install(site, name: str, version_module: tuple[str, str]) -> None:
    """An installed distribution as pip lays it out: the package and its dist-info."""
    pkg = site / name
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "core.py").write_text('def f():\n    raise ValueError("the engine could not be started")\n')
    (pkg / version_module[0]).write_text(version_module[1])
    info = site / f"{name}-1.2.3.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.2.3\nProject-URL: Source, https://github.com/org/{name}\n")
    (info / "top_level.txt").write_text(name + "\n")


@pytest.mark.parametrize("module", [
    # vLLM sdists (setuptools-scm / vcs-versioning) and PyTorch's torch/version.py
    ("_version.py", f"__version__ = version = '1.2.3'\n__commit_id__ = commit_id = 'g{SHA}'\n"),
    ("version.py", f"__version__ = '1.2.3'\ngit_version = '{SHA}'\n"),
    # FlashInfer's wheels: flashinfer/_build_meta.py
    ("_build_meta.py", f'__version__ = "1.2.3"\n__git_commit__ = "{SHA}"\n'),
    ("_build_meta.py", f'__version__ = "1.2.3"\n__git_version__ = "{SHA}"\n'),
])
def test_package_without_sha_takes_the_commit_its_version_module_records(tmp_path, monkeypatch, module):
    _fake_install(tmp_path / "site", "enginepkg", module)
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    out = tmp_path / "d.jsonl"
    result = CliRunner().invoke(cli, ["mine", "--package", "enginepkg", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert result.stderr.splitlines()[0] == (
        f"installed package; enginepkg 1.2.3; commit {SHA}; commit from enginepkg's version module; "
        f"filePath relative to {tmp_path / 'site'} (use --path-prefix for a src/ layout)"
    )
    [wrapper] = [json.loads(line) for line in out.read_text().splitlines()]
    assert wrapper["record"]["analyzedSha"] == SHA
    assert wrapper["record"]["githubUrl"].startswith(f"https://github.com/org/enginepkg/blob/{SHA}/enginepkg/core.py#L")


def test_a_short_commit_in_the_version_module_is_named_in_the_error(tmp_path, monkeypatch):
    _fake_install(tmp_path / "site", "shortpkg", ("_version.py", "__commit_id__ = commit_id = 'g5d3a0d3c'\n"))
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    result = CliRunner().invoke(cli, ["mine", "--package", "shortpkg"])
    assert result.exit_code == 2
    assert result.stderr.strip() == (
        f"Error: errkb mine: {tmp_path / 'site' / 'shortpkg'}: installed package; shortpkg 1.2.3; version of shortpkg 1.2.3 "
        "is known but no commit sha: pass --sha with the release's commit (shortpkg/_version.py names only the short "
        "commit 5d3a0d3c) (errkb's release map knows vLLM, PyTorch and FlashInfer releases, not this one; on a machine "
        "that reaches GitHub, `git ls-remote --tags https://github.com/org/shortpkg` lists each tag's commit)"
    )


@pytest.mark.cpu_real
def test_installed_torch_names_its_commit(heavy_cache, monkeypatch):
    # the CPU torch venv of errkb prove (built here when this test runs first)
    import sys

    from errkb.verify.reproducers import TORCH_CPU, ensure_venv

    monkeypatch.setenv("ERRKB_CACHE_DIR", str(heavy_cache))
    venv = ensure_venv(TORCH_CPU, log=lambda line: print(line, file=sys.stderr))
    (torch,) = venv.path.glob("lib/python3*/site-packages/torch")
    version = (torch / "version.py").read_text()
    sha = re.search(r"git_version = '([0-9a-f]{40})'", version).group(1)
    assert SourceTree.open(torch).provenance().sha == sha


def test_path_prefix_hint_only_when_no_prefix_was_given(tmp_path):
    repo, _ = _checkout(tmp_path)
    with_prefix = CliRunner().invoke(cli, ["mine", str(repo), "--path-prefix", "src", "--out", str(tmp_path / "a.jsonl")])
    assert with_prefix.exit_code == 0, with_prefix.output
    assert "--path-prefix" not in with_prefix.stderr
    without = CliRunner().invoke(cli, ["mine", str(repo), "--out", str(tmp_path / "b.jsonl")])
    assert "(use --path-prefix for a src/ layout)" in without.stderr.splitlines()[0]


def test_an_installed_release_whose_wheel_names_no_commit_gets_it_from_errkbs_release_map(tmp_path):
    """`mine`, `new` and `drift --fix` needed --sha for every installed torch, and the hint
    (`git ls-remote`) needs GitHub: the release map that ships with errkb answers offline."""
    import gzip
    import json

    from errkb.mine.sources import SourceTree, known_release_commit
    from errkb.resources import data_dir

    header = json.loads(gzip.open(data_dir() / "sites" / "sites.jsonl.gz", "rt").readline())
    version, sha = next((v, c) for v, c in header["libraries"]["torch"]["releases"] if c)
    assert known_release_commit("torch", f"{version}+cpu") == sha
    assert known_release_commit("numpy", "2.0.0") is None and known_release_commit("torch", "0.0.1") is None
    site = tmp_path / "site-packages"
    (site / "torch").mkdir(parents=True)
    (site / "torch" / "__init__.py").write_text("")
    (site / "torch" / "version.py").write_text("__version__ = 'x'\n")  # no git_version
    info = site / f"torch-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: torch\nVersion: {version}+cpu\n"
                                   "Project-URL: Source, https://github.com/pytorch/pytorch\n")
    (info / "top_level.txt").write_text("torch\n")
    prov = SourceTree.open(site / "torch").provenance()
    assert prov.sha == sha and "release map" in prov.note
