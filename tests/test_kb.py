"""errkb.kb.KnowledgeBase: the one compiled view of a store, on real DuckDB stores.

Opening, records by id, the matcher, near matches and search, and the cache beside the
store: reused while the dataset is unchanged (a warm open imports no DuckDB), rebuilt
when the dataset changes or a cache file is damaged.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.support import REPO, SEED_FILE, SEED_ID, SEED_MESSAGE, build_store, seed_records, variant, write_jsonl

DRIFTED = SEED_MESSAGE.replace("trtllm", "nccl")  # another release's wording: no pattern matches it


@pytest.fixture
def own_store(tmp_path):
    """A store this test may change: the seed and two variants."""
    return build_store(tmp_path / "kb.duckdb")


def test_open_serves_every_record_by_id(kb):
    from errkb.store.db import Store

    records = seed_records()
    assert len(kb) == len(records)
    assert set(kb.ids()) == {r["id"] for r in records}
    assert {r["id"] for r in kb.records()} == set(kb.ids())
    assert kb.get(SEED_ID)["errorMessage"] == SEED_MESSAGE
    assert kb.get("0000000000000000") is None
    assert set(kb.get_many([SEED_ID, "0000000000000000"])) == {SEED_ID}
    with Store.open(kb.db_path, read_only=True) as store:
        assert kb.dataset_hash == store.dataset_hash()


def test_the_matcher_finds_records_and_the_knowledge_base_serves_them(kb):
    [found, *others] = kb.matcher.match(f"ValueError: {SEED_MESSAGE}")
    assert found.record_id == SEED_ID and others == []
    # the index keeps no records of its own: the match's record comes from the view
    assert found.record == kb.get(SEED_ID)
    assert kb.matcher.record(SEED_ID) == kb.get(SEED_ID)
    assert kb.skipped == []


def test_near_matches_and_search_name_the_record(kb):
    assert kb.matcher.match(f"ValueError: {DRIFTED}") == []
    near = kb.near(f"ValueError: {DRIFTED}")
    assert near and near[0].record_id == SEED_ID
    assert near[0].record == kb.get(SEED_ID)
    hits = kb.search("flashinfer allreduce mnnvl")
    assert hits and hits[0].record_id in set(kb.ids())
    assert SEED_ID in {h.record_id for h in hits}


def test_an_open_store_gives_the_same_view(own_store):
    from errkb.kb import KnowledgeBase
    from errkb.store.db import Store

    with Store.open(own_store, read_only=True) as store:
        view = KnowledgeBase.from_store(store)
    assert view.dataset_hash == KnowledgeBase.open(own_store).dataset_hash
    assert [m.record_id for m in view.matcher.match(SEED_MESSAGE)] == [SEED_ID]


WARM_OPEN = r"""
import json, sys
from errkb.kb import KnowledgeBase
kb = KnowledgeBase.open(sys.argv[1])
found = [m.record_id for m in kb.matcher.match(sys.argv[2])]
print(json.dumps({"found": found, "duckdb": "duckdb" in sys.modules, "built": kb.matcher.build_seconds}))
"""


def warm_open(db, text: str) -> dict:
    done = subprocess.run([sys.executable, "-c", WARM_OPEN, str(db), text], capture_output=True, text=True,
                          timeout=120, cwd=REPO)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def test_the_cache_is_reused_while_the_store_is_unchanged(own_store):
    from errkb.kb import KnowledgeBase

    first = KnowledgeBase.open(own_store)
    assert first.matcher.build_seconds is not None  # compiled by this call
    again = KnowledgeBase.open(own_store)
    assert again.matcher.build_seconds is None  # loaded from the cache, not compiled
    # another process loads the view without opening the store at all
    assert warm_open(own_store, SEED_MESSAGE) == {"found": [SEED_ID], "duckdb": False, "built": None}


def test_a_changed_dataset_rebuilds_the_view(own_store, tmp_path):
    from errkb.kb import KnowledgeBase
    from errkb.store.db import Store

    before = KnowledgeBase.open(own_store)
    added = variant(json.loads(SEED_FILE.read_text())["record"], 7)
    assert before.get(added["id"]) is None and before.matcher.match(added["errorMessage"])[0].record_id != added["id"]
    with Store.open(own_store) as store:
        assert store.ingest([write_jsonl(tmp_path / "more.jsonl", [added])]).rejected == 0
    after = KnowledgeBase.open(own_store)
    assert after.dataset_hash != before.dataset_hash
    assert after.get(added["id"]) == added
    assert after.matcher.match(added["errorMessage"])[0].record_id == added["id"]
    assert warm_open(own_store, added["errorMessage"])["found"][0] == added["id"]


def test_a_damaged_cache_file_is_rebuilt_not_served(own_store):
    from errkb.kb import KnowledgeBase

    KnowledgeBase.open(own_store)
    [index] = list(own_store.parent.glob("**/matcher.idx"))
    index.write_bytes(index.read_bytes()[:100])  # cut short, as by a full disk
    kb = KnowledgeBase.open(own_store)
    assert [m.record_id for m in kb.matcher.match(SEED_MESSAGE)] == [SEED_ID]
    assert warm_open(own_store, SEED_MESSAGE)["found"] == [SEED_ID]


def test_a_missing_store_is_a_one_line_error(tmp_path):
    from errkb.kb import KnowledgeBase, KnowledgeBaseError

    missing = tmp_path / "nowhere.duckdb"
    with pytest.raises(KnowledgeBaseError) as caught:
        KnowledgeBase.open(missing)
    assert str(missing) in str(caught.value) and "\n" not in str(caught.value)
