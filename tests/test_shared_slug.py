"""One message raised at several sites of a repo: the upstream generator gives each site
its own record (id) and all of them one slug (the message cut at 50 characters). All are
accepted, with lint W402 stored next to the later ones, and a look-up by that slug names
them instead of picking one."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from errkb.cli import cli
from errkb.store.db import Store, StoreError
from tests.support import SEED_ID, SEED_SLUG, raised_elsewhere, write_jsonl

REPO_SLUG = f"vllm-project/vllm/{SEED_SLUG}"
SEED_PATH = "vllm/distributed/device_communicators/flashinfer_all_reduce.py"


def run(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


@pytest.fixture
def sites(seed_record) -> list[dict]:
    """The seed and the same message raised in two more files of vllm (ids c2fe.., 5652..)."""
    return [seed_record, raised_elsewhere(seed_record, "vllm/z.py"), raised_elsewhere(seed_record, "vllm/a.py")]


@pytest.fixture
def shared_db(tmp_path, sites):
    source = write_jsonl(tmp_path / "sites.jsonl", sites)
    result = run("ingest", "--db", tmp_path / "s.duckdb", source)
    assert result.exit_code == 0, result.output
    assert result.stdout == "3 new, 0 updated, 0 unchanged, 0 rejected\n"
    return tmp_path / "s.duckdb"


def test_records_sharing_a_slug_are_all_accepted_with_a_warning(shared_db, sites, tmp_path):
    seed, z, a = sites
    assert (z["id"], a["id"]) == ("565214fbd56d78c4", "c2fe275c7bcecb52")
    source = tmp_path / "sites.jsonl"
    with Store.open(shared_db, read_only=True) as store:
        assert store.rejects() == []
        assert sorted(r["id"] for r in store.records()) == sorted(r["id"] for r in sites)
        found = [(f["record_id"], f["code"], f["level"], f["message"]) for f in store.findings()]
    assert found == [
        (z["id"], "W402", "warning",
         f"slug '{SEED_SLUG}' of vllm-project/vllm is also record {SEED_ID} (at {source}:1:1): each has its own "
         f"fix page, errors/vllm-project/vllm/{SEED_SLUG}.html lists them"),
        (a["id"], "W402", "warning",
         f"slug '{SEED_SLUG}' of vllm-project/vllm is also records {SEED_ID} (at {source}:1:1), {z['id']} "
         f"(at {source}:2:1): each has its own fix page, errors/vllm-project/vllm/{SEED_SLUG}.html lists them"),
    ]


def test_lint_prints_the_shared_slug_warning_and_exits_0(tmp_path, sites):
    path = write_jsonl(tmp_path / "two.jsonl", sites[:2])
    result = run("lint", path)
    assert result.exit_code == 0, result.output
    assert result.stdout == (
        f"{path}:2:1: W402 shared-slug [565214fbd56d78c4] slug '{SEED_SLUG}' of vllm-project/vllm is also record "
        f"{SEED_ID} (at {path}:1:1): each has its own fix page, errors/vllm-project/vllm/{SEED_SLUG}.html lists them "
        "(fix: nothing, when the message is raised at several sites; else give the record a slug of its own)\n"
    )
    assert result.stderr == "0 error(s), 1 warning(s)\n"


def test_a_later_ingest_names_the_stored_record(shared_db, tmp_path, seed_record):
    fourth = raised_elsewhere(seed_record, "vllm/m.py")
    result = run("ingest", "--db", shared_db, write_jsonl(tmp_path / "fourth.jsonl", [fourth]))
    assert result.stdout == "1 new, 0 updated, 0 unchanged, 0 rejected\n"
    with Store.open(shared_db, read_only=True) as store:
        (finding,) = store.findings(fourth["id"])
    assert finding["message"] == (
        f"slug '{SEED_SLUG}' of vllm-project/vllm is also records {SEED_ID} (in the store), 565214fbd56d78c4 "
        f"(in the store), c2fe275c7bcecb52 (in the store): each has its own fix page, "
        f"errors/vllm-project/vllm/{SEED_SLUG}.html lists them"
    )


AMBIGUOUS = (
    f"Error: slug '{SEED_SLUG}' of vllm-project/vllm is used by 3 records (c2fe275c7bcecb52 vllm/a.py:221, "
    f"{SEED_ID} {SEED_PATH}:221, 565214fbd56d78c4 vllm/z.py:221); use the id\n"
)


@pytest.mark.parametrize("key", [REPO_SLUG, SEED_SLUG])
def test_show_by_a_shared_slug_names_the_records_and_asks_for_the_id(shared_db, key):
    result = run("show", "--db", shared_db, key)
    assert result.exit_code == 2  # a usage error, as an unknown key is
    assert result.stdout == ""
    assert result.stderr == AMBIGUOUS


def test_store_get_by_a_shared_slug_raises(shared_db):
    with Store.open(shared_db, read_only=True) as store, pytest.raises(StoreError) as e:
        store.get(REPO_SLUG)
    assert str(e.value) == AMBIGUOUS[len("Error: "):-1]


def test_show_by_id_gives_each_record_and_its_warning(shared_db, sites):
    for record in sites:
        result = run("show", "--db", shared_db, "--json", record["id"])
        assert result.exit_code == 0, result.output
        assert json.loads(result.stdout) == record
    result = run("show", "--db", shared_db, "c2fe275c7bcecb52")
    assert result.exit_code == 0
    assert "warning: W402 shared-slug slug " in result.stderr


@pytest.mark.parametrize("command", ["prove", "verify"])
def test_prove_and_verify_by_a_shared_slug_ask_for_the_id(shared_db, command):
    result = run(command, "--db", shared_db, REPO_SLUG)
    assert result.exit_code == 2
    assert result.stderr == AMBIGUOUS


def test_a_slug_in_several_repos_still_asks_for_the_repo(tmp_path, seed_record):
    other = {**raised_elsewhere(seed_record, "vllm/a.py"), "repo": "other/vllm"}
    other["githubUrl"] = other["githubUrl"].replace("vllm-project/vllm", "other/vllm")
    source = write_jsonl(tmp_path / "repos.jsonl", [seed_record, other, raised_elsewhere(seed_record, "vllm/z.py")])
    assert run("ingest", "--db", tmp_path / "s.duckdb", source).exit_code == 0
    result = run("show", "--db", tmp_path / "s.duckdb", SEED_SLUG)
    assert result.exit_code == 2
    assert result.stderr == (f"Error: slug '{SEED_SLUG}' is used in several repos (other/vllm, vllm-project/vllm); "
                             f"use OWNER/NAME/{SEED_SLUG} or the id\n")
    shown = run("show", "--db", tmp_path / "s.duckdb", "--json", f"other/vllm/{SEED_SLUG}")
    assert shown.exit_code == 0 and json.loads(shown.stdout)["id"] == other["id"]
