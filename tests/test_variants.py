"""errkb variants: other wordings of a record's raise site across releases, matched by explain."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from errkb.cli import cli
from errkb.mine.variants import Release, build, version_of
from errkb.records.variants import lint_variant, read_folder
from errkb.resources import data_dir
from errkb.store.db import Store

CURRENT = '''def load(path):
    raise ValueError(f"cannot load the model config from {path}: the file is empty or truncated")


def stable():
    raise KeyError("this stable message never changes between the releases")
'''

OLD = '''def load(path):
    raise ValueError(f"cannot load the config from {path}: the file is empty")


def stable():
    raise KeyError("this stable message never changes between the releases")
'''



def git(root: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=root, check=True, capture_output=True)


@pytest.fixture
def project(tmp_path):
    """A checkout at the current wording, mined and ingested; older releases as folders."""
    root = tmp_path / "checkout"
    (root / "proj").mkdir(parents=True)
    (root / "proj" / "__init__.py").write_text("")
    (root / "proj" / "core.py").write_text(CURRENT)
    git(root, "init", "-q")
    git(root, "remote", "add", "origin", "https://github.com/proj-org/proj.git")
    git(root, "add", "-A", ".")
    git(root, "-c", "user.email=t@example.com", "-c", "user.name=t", "commit", "-q", "-m", "v")
    drafts = tmp_path / "drafts.jsonl"
    db = tmp_path / "store.duckdb"
    runner = CliRunner()
    assert runner.invoke(cli, ["mine", str(root), "--out", str(drafts)]).exit_code == 0
    assert runner.invoke(cli, ["ingest", "--db", str(db), str(drafts)]).exit_code == 0
    releases = {}
    for version, text in (("0.1.0", OLD), ("0.2.0", OLD), ("0.3.0", CURRENT)):
        folder = tmp_path / "releases" / version
        (folder / "proj").mkdir(parents=True)
        (folder / "proj" / "__init__.py").write_text("")
        (folder / "proj" / "core.py").write_text(text)
        releases[version] = folder
    with Store.open(db, read_only=True) as store:
        record = next(r for r in store.records() if r["errorMessage"].startswith("cannot load"))
    return db, record, releases


def test_build_finds_the_older_wording_with_its_release_range(project):
    _db, record, releases = project
    result = build(record, [Release(v, p) for v, p in releases.items()])
    assert result["scanned"] == ["0.1.0", "0.2.0", "0.3.0"]
    assert len(result["variants"]) == 1
    variant = result["variants"][0]
    assert variant["pattern"] == r"cannot load the config from (.+?): the file is empty"
    assert variant["message_template"] == "cannot load the config from {path}: the file is empty"
    assert (variant["releases"], variant["first"], variant["last"]) == (["0.1.0", "0.2.0"], "0.1.0", "0.2.0")
    assert (variant["file"], variant["line"]) == ("proj/core.py", 2)
    assert result["dropped"] == []


def test_a_too_generic_variant_is_never_indexed(project, tmp_path):
    from errkb.records.variants import variant_entries

    _db, record, _releases = project
    folder = tmp_path / "variants"
    folder.mkdir()
    good = {"pattern": "cannot load the config from (.+?): the file is empty", "example": "cannot load the config from a: the file is empty",
            "releases": ["0.1.0"], "first": "0.1.0", "last": "0.1.0"}
    generic = {"pattern": "(.+?) config (.+?)", "example": "a config b", "releases": ["0.0.9"], "first": "0.0.9", "last": "0.0.9"}
    (folder / f"{record['id']}.json").write_text(json.dumps({"record_id": record["id"], "variants": [good, generic], "scanned": []}))
    entries = variant_entries([record], folder)
    assert [e["messagePattern"] for e in entries] == [good["pattern"]]
    assert entries[0]["id"] == record["id"] and entries[0]["_variant"]["first"] == "0.1.0"


def test_lint_variant_rules():
    assert lint_variant(".*", "x", None) == "E203 matches the empty string"
    assert lint_variant("(.+?) config (.+?)", "a config b", None) == "E203 pins down only 8 literal characters (a variant needs 16)"
    assert lint_variant("failed to read the config (", "failed to read the config (", None).startswith("E201 does not compile")
    assert lint_variant("failed to read config (.+?): empty file", "something else entirely here", None) == \
        "E202 does not match its own template example"
    same = "cannot load the model config from (.+?): the file is empty or truncated"
    assert lint_variant(same, "cannot load the model config from a: the file is empty or truncated",
                        "cannot load the model config from b: the file is empty or truncated") == \
        "matches the record's current message (not another wording)"


def test_cli_writes_the_file_and_explain_matches_the_variant(project, tmp_path, monkeypatch):
    db, record, releases = project
    out = tmp_path / "variants"
    given = ",".join(str(releases[v]) for v in ("0.1.0", "0.2.0", "0.3.0"))
    runner = CliRunner()
    r = runner.invoke(cli, ["variants", "build", record["id"], "--db", str(db), "--releases", given, "--write", str(out)])
    assert r.exit_code == 0, r.output
    assert "1 variant(s), scanned 0.1.0, 0.2.0, 0.3.0" in r.output
    data = json.loads((out / f"{record['id']}.json").read_text())
    r = runner.invoke(cli, ["variants", "build", record["id"], "--db", str(db), "--releases", given, "--json"])
    assert [v["releases"] for v in json.loads(r.output)[0]["variants"]] == [["0.1.0", "0.2.0"]]
    assert data["record_id"] == record["id"] and data["scanned"] == ["0.1.0", "0.2.0", "0.3.0"]
    assert data["record_releases"] == ["0.3.0"]  # where the record's own wording is raised: the variant is older

    monkeypatch.setenv("ERRKB_VARIANTS_DIR", str(out))
    text = "ValueError: cannot load the config from /models/llama/config.json: the file is empty"
    r = runner.invoke(cli, ["explain", "--db", str(db), text])
    assert r.exit_code == 0, r.output
    assert f"older wording (proj 0.1.0–0.2.0) of {record['slug']}" in " ".join(r.output.split())  # wrapped at 80 columns
    r = runner.invoke(cli, ["explain", "--db", str(db), "--json", text])
    match = json.loads(r.output)["matches"][0]
    assert match["id"] == record["id"]
    assert match["variant"] == {"releases": ["0.1.0", "0.2.0"], "first": "0.1.0", "last": "0.2.0", "relation": "older"}
    # The record's own wording is a plain match.
    own = "ValueError: cannot load the model config from /m/c.json: the file is empty or truncated"
    r = runner.invoke(cli, ["explain", "--db", str(db), "--json", own])
    assert json.loads(r.output)["matches"][0]["variant"] is None
    # Text that is neither wording matches nothing.
    r = runner.invoke(cli, ["explain", "--db", str(db), "--json", "ValueError: failed to read the weights file"])
    assert json.loads(r.output)["matches"] == []


def test_a_wording_after_every_release_of_the_records_own_is_newer_and_one_release_is_not_a_range(
        project, tmp_path, monkeypatch):
    # The record was written from the older code: its wording holds in 0.1.0-0.2.0, the reworded one in 0.3.0.
    db, record, releases = project
    for version in ("0.1.0", "0.2.0"):
        (releases[version] / "proj" / "core.py").write_text(CURRENT)
    (releases["0.3.0"] / "proj" / "core.py").write_text(OLD)
    result = build(record, [Release(v, p) for v, p in releases.items()])
    assert result["record_releases"] == ["0.1.0", "0.2.0"]
    assert [(v["first"], v["last"]) for v in result["variants"]] == [("0.3.0", "0.3.0")]
    out = tmp_path / "variants"
    out.mkdir()
    (out / f"{record['id']}.json").write_text(json.dumps(result))
    monkeypatch.setenv("ERRKB_VARIANTS_DIR", str(out))
    text = "ValueError: cannot load the config from /models/llama/config.json: the file is empty"
    r = CliRunner().invoke(cli, ["explain", "--db", str(db), text])
    assert r.exit_code == 0, r.output
    assert f"newer wording (proj 0.3.0) of {record['slug']}" in " ".join(r.output.split())


def test_relation_of_a_variant_to_the_records_own_releases():
    from errkb.records.variants import relation

    v = {"first": "0.9.0", "last": "0.10.2"}
    assert relation(v, ["0.11.0", "0.12.1"]) == "older"  # 0.10 before 0.11, not as strings
    assert relation(v, ["0.8.5"]) == "newer"
    assert relation(v, ["0.8.5", "0.11.0"]) == "other"  # the wordings alternate
    assert relation(v, []) == "other"  # no scanned release raises the record's own wording


def test_version_of_release_files():
    assert version_of(Path("vllm-0.6.3.tar.gz")) == "0.6.3"
    assert version_of(Path("flashinfer_python-0.2.5-py3-none-any.whl")) == "0.2.5"


def test_bundled_variants_parse_and_match_only_their_own_wording():
    from errkb.records.lint import self_match_normalised
    from errkb.text import patterns

    folder = data_dir() / "variants"
    files = read_folder(folder)
    from errkb.records.read import read_records
    from errkb.store.db import bundled_record_paths

    records = {}
    for sourced in read_records(bundled_record_paths(data_dir())):
        record = getattr(sourced, "record", None)
        if isinstance(record, dict) and "id" in record:
            records[record["id"]] = record
    assert files, "no bundled variants files"
    for record_id, data in files.items():
        assert record_id in records, record_id
        assert data["scanned"], record_id
        for v in data["variants"]:
            analysis = patterns.analyze(v["pattern"], translate=False)
            assert self_match_normalised(analysis, v["example"]) is True, v
            assert self_match_normalised(analysis, records[record_id]["errorMessage"]) is False, v
            assert v["first"] == v["releases"][0] and v["last"] == v["releases"][-1]


def test_a_new_variants_file_rebuilds_the_cached_view(project, tmp_path, monkeypatch):
    db, record, releases = project
    out = tmp_path / "variants"
    out.mkdir()
    monkeypatch.setenv("ERRKB_VARIANTS_DIR", str(out))
    old_wording = "ValueError: cannot load the config from /models/llama/config.json: the file is empty"
    runner = CliRunner()
    before = runner.invoke(cli, ["explain", "--db", str(db), "--json", old_wording])
    assert before.exit_code == 1 and json.loads(before.output)["matches"] == []  # cached with no variants
    given = ",".join(str(releases[v]) for v in ("0.1.0", "0.2.0", "0.3.0"))
    r = runner.invoke(cli, ["variants", "build", record["id"], "--db", str(db), "--releases", given, "--write", str(out)])
    assert r.exit_code == 0, r.output
    after = runner.invoke(cli, ["explain", "--db", str(db), "--json", old_wording])
    assert after.exit_code == 0, after.output
    assert json.loads(after.output)["matches"][0]["variant"]["first"] == "0.1.0"
