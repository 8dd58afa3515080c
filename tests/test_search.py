"""errkb search: keyword search over messages, documentation and fixes, ranked."""

from __future__ import annotations

import copy
import json

import pytest
from click.testing import CliRunner

from errkb.cli import cli
from errkb.match.search import SearchIndex, tokens
from errkb.store.db import Store
from tests.support import REPO, SEED_ID, write_jsonl


def search(db, *args):
    return CliRunner().invoke(cli, ["search", "--db", str(db), *args])


def test_tokens_split_identifiers_and_drop_common_words():
    assert tokens("The VLLM_FLASHINFER_ALLREDUCE_BACKEND is ValueError") == [
        "vllm_flashinfer_allreduce_backend", "vllm", "flashinfer", "allreduce", "backend", "valueerror", "value", "error"]
    assert tokens("the is of") == []


def test_message_words_rank_the_seed_first(data_db):
    r = search(data_db, "--json", "quantization", "fusion", "allreduce")
    assert r.exit_code == 0
    hits = json.loads(r.stdout)
    assert hits[0]["id"] == SEED_ID
    assert hits[0]["matched"] == ["quantization", "fusion", "allreduce"]
    assert hits[0]["fields"][0] == "errorMessage"
    assert set(hits[0]) == {"tier", "id", "slug", "repo", "errorClass", "errorMessage", "score", "matched", "fields"}
    assert hits[0]["tier"] == "curated"
    # in the order of the scores shown
    assert [h["score"] for h in hits] == sorted((h["score"] for h in hits), reverse=True)


def test_words_from_documentation_and_solutions_are_found(data_db):
    hits = json.loads(search(data_db, "--json", "multicast", "fabric").stdout)
    assert hits[0]["id"] == SEED_ID
    assert "solutions" in hits[0]["fields"]


def test_identifier_part_and_prefix(data_db):
    by_part = json.loads(search(data_db, "--json", "VLLM_FLASHINFER_ALLREDUCE_BACKEND").stdout)
    assert SEED_ID in [h["id"] for h in by_part[:2]]
    by_prefix = json.loads(search(data_db, "--json", "quantiz").stdout)
    assert SEED_ID in [h["id"] for h in by_prefix]
    assert all(h["matched"] == ["quantiz"] for h in by_prefix)


def test_human_output_and_limit(data_db):
    r = search(data_db, "-n", "1", "--no-sites", "allreduce", "backend")
    assert r.exit_code == 0
    lines = r.stdout.rstrip("\n").split("\n")
    assert len(lines) == 3
    assert lines[0].split()[1:3] == ["ValueError", f"vllm-project/vllm/{lines[0].split()[2].split('/', 2)[2]}"]
    assert lines[1].startswith("        Flashinfer allreduce")
    assert lines[2].startswith("        matched allreduce, backend in errorMessage")
    assert all(len(line) <= 80 for line in lines[1:])
    assert r.stderr == "1 record(s)\n"


def test_no_hit_exits_1_and_no_words_exits_2(data_db):
    r = search(data_db, "zzzunknownword")
    assert (r.exit_code, r.stdout, r.stderr) == (1, "", "0 record(s)\n")
    assert json.loads(search(data_db, "--json", "zzzunknownword").stdout) == []
    r = search(data_db, "the", "is")
    assert r.exit_code == 2
    assert r.output.strip() == "Error: search: no searchable words in 'the is' (common words like 'the' are ignored)"
    assert search(data_db).exit_code == 2  # WORDS is required


def test_index_is_cached_and_follows_the_store(tmp_path, seed_record):
    path = tmp_path / "s.duckdb"
    with Store.open(path) as store:
        store.ingest([REPO / "data"])
    assert search(path, "zebrafish").exit_code == 1
    cached = list((tmp_path / "s.duckdb.cache").glob("kb-v*/search.idx"))
    assert len(cached) == 1
    rec = copy.deepcopy(seed_record)
    rec.update(id="00000000000000aa", slug="zebrafish-record", documentation="Only zebrafish trigger this.")
    with Store.open(path) as store:
        assert store.ingest([write_jsonl(tmp_path / "z.jsonl", [rec])]).new == 1
    hits = json.loads(search(path, "--json", "zebrafish").stdout)
    assert [h["id"] for h in hits] == ["00000000000000aa"]
    now = list((tmp_path / "s.duckdb.cache").glob("kb-v*/search.idx"))
    assert len(now) == 1 and now != cached  # old index replaced


def test_save_load_roundtrip(tmp_path):
    from errkb.records.read import read_records

    records = [i.record for i in read_records([REPO / "data"]) if i.ok]
    index = SearchIndex.from_records(records)
    index.save(tmp_path / "i.json")
    loaded = SearchIndex.load(tmp_path / "i.json")
    assert [h.as_dict() for h in loaded.search("kv cache memory")] == [h.as_dict() for h in index.search("kv cache memory")]
    (tmp_path / "bad.json").write_text("[]")
    with pytest.raises(ValueError, match="not a search index"):
        SearchIndex.load(tmp_path / "bad.json")


def test_damaged_cache_is_rebuilt(tmp_path):
    path = tmp_path / "s.duckdb"
    with Store.open(path) as store:
        store.ingest([REPO / "data"])
    first = json.loads(search(path, "--json", "allreduce").stdout)
    (cached,) = (tmp_path / "s.duckdb.cache").glob("kb-v*/search.idx")
    cached.write_bytes(cached.read_bytes()[:-7])
    with pytest.raises(ValueError, match="damaged search index"):
        SearchIndex.load(cached)
    assert json.loads(search(path, "--json", "allreduce").stdout) == first
    SearchIndex.load(cached)  # rewritten whole


def test_results_are_in_the_order_of_their_shown_scores(data_db):
    # issue 18: `search cuda out of memory` showed 4.84, 4.62, 4.80
    r = search(data_db, "-n", "20", "cuda", "out", "of", "memory")
    assert r.exit_code == 0
    shown = [float(line.split()[0]) for line in r.stdout.splitlines() if not line.startswith(" " * 8)]
    assert len(shown) >= 5
    assert shown == sorted(shown, reverse=True)
    assert r.stdout.split()[2].startswith("pytorch/pytorch/cuda-out-of-memory")
