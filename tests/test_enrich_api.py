"""The embedding API: ``enrich_records(iterable_of_dicts, matcher, field=...)``."""

from __future__ import annotations

import copy
import itertools
import json

from errkb.enrich.lines import enrich_records
from errkb.kb import KnowledgeBase
from errkb.store.db import Store
from tests.support import SEED_ID, SEED_MESSAGE, SEED_SLUG, SEED_SOLUTION, build_store, seed_records

SITE = "https://errkb.example.org/"


def test_yields_every_dict_in_order_matched_ones_with_errkb(matcher):
    events = [
        {"message": "GET /health 200", "host": "a"},
        {"message": f"ValueError: {SEED_MESSAGE}", "host": "b", "n": 1.5},
        {"host": "c"},
        {"message": None},
    ]
    original = copy.deepcopy(events)
    out = list(enrich_records(events, matcher, site_url=SITE))
    assert len(out) == 4
    assert out[0] is events[0] and out[2] is events[2] and out[3] is events[3]  # unmatched: as they came
    assert {k: v for k, v in out[1].items() if k != "errkb"} == events[1]
    assert out[1]["errkb"] == {
        "id": SEED_ID,
        "slug": SEED_SLUG,
        "repo": "vllm-project/vllm",
        "errorClass": "ValueError",
        "severity": "error",
        "score": out[1]["errkb"]["score"],
        "solution": SEED_SOLUTION,
        "url": f"https://errkb.example.org/errors/vllm-project/vllm/{SEED_SLUG}.html",
        "tier": "curated",
    }
    assert events == original  # the caller's dicts are not modified


def test_dotted_field_and_several_fields(matcher):
    events = [{"log": {"msg": SEED_MESSAGE}}, {"message": SEED_MESSAGE}, {"log": "plain"}]
    out = list(enrich_records(events, matcher, field="log.msg"))
    assert ["errkb" in e for e in out] == [True, False, False]
    out = list(enrich_records(events, matcher, field=["log.msg", "message"]))
    assert ["errkb" in e for e in out] == [True, True, False]


def test_only_matched(matcher):
    events = [{"message": "x"}, {"message": SEED_MESSAGE}, {"message": "y"}]
    out = list(enrich_records(events, matcher, only_matched=True))
    assert [e["message"] for e in out] == [SEED_MESSAGE]


def test_batching_gives_the_same_result(matcher):
    events = [{"message": SEED_MESSAGE if i % 5 == 0 else f"line {i}", "i": i} for i in range(103)]
    one = list(enrich_records(events, matcher))
    batched = list(enrich_records(events, matcher, batch=16))
    assert one == batched
    assert [e["i"] for e in batched] == list(range(103))
    assert sum("errkb" in e for e in batched) == 21


def test_lazy_with_batch_one_on_an_endless_stream(matcher):
    # A live pipeline stage: each result must come out before the next input exists.
    endless = ({"message": SEED_MESSAGE if i == 2 else f"tick {i}"} for i in itertools.count())
    first = list(itertools.islice(enrich_records(endless, matcher), 4))
    assert ["errkb" in e for e in first] == [False, False, True, False]


def test_non_dict_items_pass_through(matcher):
    items = ["a string", 42, None, {"message": SEED_MESSAGE}]
    out = list(enrich_records(items, matcher))
    assert out[:3] == items[:3]
    assert out[3]["errkb"]["id"] == SEED_ID


def test_with_the_matcher_of_a_store(tmp_path):
    db = build_store(tmp_path / "s.duckdb")
    with Store.open(db, read_only=True) as store:
        matcher = KnowledgeBase.from_store(store).matcher
        (out,) = enrich_records([{"message": f"ValueError: {SEED_MESSAGE}"}], matcher)
    assert out["errkb"]["solution"] == SEED_SOLUTION
    assert json.loads(json.dumps(out)) == out  # plain JSON-able dicts


def test_store_get_many_resolves_a_batch_of_ids(tmp_path):
    records = seed_records()
    db = build_store(tmp_path / "m.duckdb", records)
    with Store.open(db, read_only=True) as store:
        got = store.get_many([records[2]["id"], "0000000000000000", records[0]["id"], records[0]["id"]])
        assert got == {records[2]["id"]: records[2], records[0]["id"]: records[0]}
        assert store.get_many([]) == {}


def test_knowledge_base_resolves_what_errkb_objects_need(store_db, kb):
    records = seed_records()  # what store_db holds
    with Store.open(store_db, read_only=True) as store:
        fields = store.record_fields("$.slug", "$.solutions[0]")
        assert fields[records[1]["id"]] == (records[1]["slug"], records[1]["solutions"][0])
    got = kb.get_many([records[0]["id"], "0000000000000000"])
    assert got == {records[0]["id"]: records[0]}
    assert got[records[0]["id"]]["solutions"][0] == SEED_SOLUTION


def test_sites_tag_a_message_no_record_matches_and_curated_still_wins(matcher):
    """With ``sites=KnowledgeBase.sites()`` (the shipped index), a vLLM message without a
    record gets the same tier-site object `errkb enrich` writes; the seed's message, also
    raised at a known site, stays curated; another library's message and a plain line get nothing."""
    from errkb.enrich.value import site_object
    from errkb.match.sites import SiteIndex

    sites = SiteIndex.load()
    events = [{"message": "ValueError: max_tokens must be at least 1, got 0."},
              {"message": f"ValueError: {SEED_MESSAGE}"},
              {"message": "numpy.linalg.LinAlgError: Singular matrix"},
              {"message": "GET /health 200"}]
    out = list(enrich_records(events, matcher, sites=sites, batch=4))
    site = out[0]["errkb"]
    assert site == site_object(sites.match_lines([events[0]["message"]])[0])
    assert (site["tier"], site["library"], site["file"], site["function"]) == (
        "site", "vllm", "vllm/sampling_params.py", "SamplingParams._verify_args")
    assert not {"solution", "id", "slug", "score"} & set(site), "a known site is never a fix"
    assert (out[1]["errkb"]["tier"], out[1]["errkb"]["id"]) == ("curated", SEED_ID)
    assert out[2] is events[2] and out[3] is events[3]
    assert list(enrich_records(events, matcher, sites=sites)) == out  # one at a time: the same
    twice = list(enrich_records(events[:1] * 2, matcher, sites=sites, batch=2))
    twice[0]["errkb"]["note"] = "mine"  # each event owns its value, as a record's match does
    assert "note" not in twice[1]["errkb"]
    assert "errkb" not in next(enrich_records(events[:1], matcher))  # without sites: no tier site
