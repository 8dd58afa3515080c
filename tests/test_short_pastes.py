"""Short and partial pastes: a true beginning of a record's message is that record, marked
truncated; a paste nothing matches shows what `errkb search` finds for its words."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from errkb.explain.explainer import explain
from errkb.match.prefix import MIN_OPENING_CHARS, MIN_PREFIX_CHARS, MIN_PREFIX_WORDS, opening_literal
from errkb.records.read import read_records
from tests.support import REPO, SEED_ID

OOM = "0d976de03616c8f3"


@pytest.fixture(scope="module")
def records():
    return [item.record for item in read_records([REPO / "data"]) if item.ok]


def explain_json(db, text: str) -> tuple[int, dict]:
    result = subprocess.run([sys.executable, "-m", "errkb", "explain", "--json", "--db", str(db), text],
                            capture_output=True, text=True, timeout=120, cwd=REPO)
    return result.returncode, json.loads(result.stdout)


@pytest.mark.parametrize("text", [
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
    "CUDA out of memory",
    "OutOfMemoryError: CUDA out of memory. Tried to allocate 512.00 MiB. GPU 0 has a total capacity of 79.15 GiB",
    "CUDA out of memory. Tried to allocate 2.00 GiB...",
])
def test_the_beginning_of_a_message_is_its_record_marked_truncated(data_db, text):
    code, data = explain_json(data_db, text)
    assert code == 0
    assert [(m["id"], m["truncated"]) for m in data["matches"]] == [(OOM, True)]


@pytest.mark.parametrize("text", [
    "ValueError: CUDA out of memory. Tried to allocate 2.00 GiB",  # another class: not this record
    "CUDA out",  # too short to say which message
    "CUDA out of memory. Tried to free 2.00 GiB",  # goes on differently
])
def test_what_is_not_a_true_beginning_is_not_served(data_db, text):
    _code, data = explain_json(data_db, text)
    assert OOM not in [m["id"] for m in data["matches"]]


def test_a_short_opening_does_not_take_what_its_wildcards_accept(tmp_path, seed_record):
    """A record "Invalid value (.+): expected ..." does not "begin" every "Invalid value ..."
    of every library: past a short opening literal, wildcards would accept anything."""
    from errkb.kb import KnowledgeBase
    from tests.support import make_store

    generic = dict(seed_record, id="0123456789abcdef", slug="invalid-value", errorMessage="Invalid value x: expected y",
                   messagePattern=r"Invalid value (.+?): expected (.+)")
    kb = KnowledgeBase.open(make_store(tmp_path / "s.duckdb", [generic]))
    assert explain(kb, "Invalid value for --tensor-parallel-size in config").found == []
    # its own words, cut inside the opening, are still its beginning
    assert [f.record_id for f in explain(kb, "ValueError: Invalid value").found] in ([], ["0123456789abcdef"])


def test_a_whole_message_is_an_exact_match_not_a_truncated_one(kb, seed_record):
    e = explain(kb, seed_record["errorMessage"])
    assert e.found and not e.found[0].truncated


def test_every_bundled_message_cut_at_a_word_is_its_record(data_db, records):
    """Each record's own message, cut after its opening literal at every later word, is served
    as that record (exact or truncated)."""
    from errkb.kb import KnowledgeBase

    kb = KnowledgeBase.open(data_db)
    tried = 0
    for record in records:
        message = record["errorMessage"].strip()
        opening = opening_literal(record["messagePattern"])
        if len(opening) < 6 or "\n" in message:
            continue
        words = message.split(" ")
        for n in range(MIN_PREFIX_WORDS, len(words)):
            cut = " ".join(words[:n])
            if sum(c.isalnum() for c in cut) < MIN_PREFIX_CHARS:
                continue  # too short to say which message
            if len(cut) > len(opening) and sum(c.isalnum() for c in opening) < MIN_OPENING_CHARS:
                continue  # past a short opening its wildcards would take anything: no evidence
            e = explain(kb, cut)
            if e.found and not any(f.truncated for f in e.found):
                continue  # the cut is another record's whole message (cf6947ec's inside b71de351's)
            tried += 1
            # a cut both messages share ("max_num_batched_tokens (128) must") lists both
            assert record["id"] in [f.record_id for f in e.found], (record["id"], cut)
    assert tried >= 50


def test_no_match_shows_what_keyword_search_finds_and_the_command(data_db):
    text = "multi-node allreduce fusion fails with trtllm"  # words, not a message
    code, data = explain_json(data_db, text)
    assert code == 1
    assert data["matches"] == [] and data["nearMatches"] == [] and data["sites"] == []
    assert data["search"]["command"] == "errkb search multi-node allreduce fusion fails trtllm"  # no stop words
    assert data["search"]["hits"][0]["id"] == SEED_ID
    # the command is one a shell runs as shown, and it finds the same first record
    argv = data["search"]["command"].split()
    found = subprocess.run([sys.executable, "-m", "errkb", *argv[1:], "--json", "--db", str(data_db)],
                           capture_output=True, text=True, timeout=120, cwd=REPO)
    assert json.loads(found.stdout)[0]["id"] == SEED_ID


def test_a_message_of_another_class_gets_its_known_site_not_keyword_hits(data_db):
    # older torch raised the OOM as RuntimeError: not the record's class, so not the record;
    # the CUDA runtime table says what the message means
    code, data = explain_json(data_db, "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB")
    assert code == 1 and data["matches"] == []
    assert data["sites"] and data["search"] is None


def test_a_search_hit_needs_two_of_the_words(data_db):
    _code, data = explain_json(data_db, "zebra quagga memory")
    assert all(len(h["matched"]) >= 2 for h in (data["search"] or {"hits": []})["hits"])


def test_opening_literal_stops_at_pattern_syntax():
    assert opening_literal(r"CUDA out of memory\. Tried to allocate (.+?)\.") == "CUDA out of memory. Tried to allocate "
    assert opening_literal(r"^Found no NVIDIA driver") == "Found no NVIDIA driver"
    assert opening_literal(r"(.+?) is not fitted") == ""
    assert opening_literal(r"errors?: x") == "error"  # the quantifier takes the last letter
    assert opening_literal(r"\d+ GPUs") == ""
    assert re.escape("a.b") == r"a\.b" and opening_literal(re.escape("a.b") + "$") == "a.b"
