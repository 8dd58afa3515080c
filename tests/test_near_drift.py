"""Near matches on real pastes: drifted wordings and truncated titles find their record
first; span scoring and the kind of closeness; no text becomes a match it is not.

The pastes were collected from public issues, each with its source URL:
tests/fixtures/pastes.jsonl while near matching was built, pastes_heldout.jsonl
afterwards, by other searches, as a check of it (its misses, messages cut before their
final period, led to ``normalize.period_completed``). ``python -m bench.bench_near``
prints the same figures.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from errkb.explain.explainer import explain
from errkb.kb import KnowledgeBase
from errkb.match.near import SimilarIndex
from errkb.records.read import read_records
from errkb.store.db import Store

REPO = Path(__file__).resolve().parent.parent


def _pastes(name: str) -> list[dict]:
    text = (REPO / "tests" / "fixtures" / f"{name}.jsonl").read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines() if line.strip()]


SETS = {"pastes": _pastes("pastes"), "pastes_heldout": _pastes("pastes_heldout")}
KINDS = {"pastes": {"exact": 25, "drifted": 15, "truncated": 18, "negative": 15},
         "pastes_heldout": {"exact": 48, "drifted": 4, "truncated": 13, "negative": 12}}


@pytest.fixture(scope="module")
def kb(tmp_path_factory) -> KnowledgeBase:
    folder = tmp_path_factory.mktemp("near_drift")
    records = [item.record for item in read_records([REPO / "data"]) if item.ok]
    data = folder / "records.jsonl"
    data.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    with Store.open(folder / "store.duckdb") as store:
        store.ingest([data])
    return KnowledgeBase.open(folder / "store.duckdb")


@pytest.fixture(scope="module", params=sorted(SETS))
def outcomes(kb, request) -> list[tuple[dict, list[str], list[str]]]:
    """Per paste of one set: the ids explain matched, and the ids of its near matches."""
    out = []
    for p in SETS[request.param]:
        e = explain(kb, p["text"])
        out.append((p, [f.record_id for f in e.found], [n.record_id for n in e.near]))
    return out


@pytest.mark.parametrize("name", sorted(SETS))
def test_the_set_is_real_pastes_of_every_kind(name):
    pastes = SETS[name]
    kinds = {k: sum(1 for p in pastes if p["kind"] == k) for k in ("exact", "drifted", "truncated", "negative")}
    assert kinds == KINDS[name]
    assert all(p["source"].startswith("https://github.com/") for p in pastes)
    assert all((p["expected"] is None) == (p["kind"] == "negative") for p in pastes)


def test_the_held_out_pastes_are_not_the_first_set():
    assert not {p["text"] for p in SETS["pastes"]} & {p["text"] for p in SETS["pastes_heldout"]}


def test_drifted_and_truncated_pastes_get_their_record_first(outcomes):
    served = [p for p, found, near in outcomes if p["kind"] in ("drifted", "truncated")
              and (found[:1] == [p["expected"]] or (not found and near[:1] == [p["expected"]]))]
    total = sum(1 for p, _f, _n in outcomes if p["kind"] in ("drifted", "truncated"))
    assert len(served) / total >= 0.80, [p["text"][:60] for p, _f, _n in outcomes if p not in served][:10]


def test_exact_pastes_still_match_first(outcomes):
    exact = [(p, found) for p, found, _near in outcomes if p["kind"] == "exact"]
    assert sum(1 for p, found in exact if found[:1] == [p["expected"]]) / len(exact) >= 0.97


def test_no_false_exact_matches(outcomes):
    """A paste is only ever matched as its own record; a negative is never matched."""
    wrong = [(p["text"][:60], found) for p, found, _near in outcomes if found and found[0] != p["expected"]]
    assert wrong == []
    assert [p["text"][:60] for p, found, _near in outcomes if p["kind"] == "negative" and found] == []


# -- span scoring and the kind of closeness, on three hand records ---------------------

RECORDS = [
    {"id": "r1", "slug": "s1", "repo": "o/p", "errorClass": "ValueError",
     "errorMessage": "Bfloat16 is only supported on GPUs with compute capability of at least 8.0. Your Tesla T4 GPU "
                     "has compute capability 7.5. You can use float16 instead.",
     "messagePattern": r"Bfloat16 is only supported on GPUs with compute capability of at least 8\.0\. Your (.+?) GPU "
                       r"has compute capability (.+?)\. You can use float16 instead\."},
    {"id": "r2", "slug": "s2", "repo": "o/p", "errorClass": "RuntimeError",
     "errorMessage": "Engine core initialization failed. See root cause above.",
     "messagePattern": r"Engine core initialization failed\. See root cause above\."},
    {"id": "r3", "slug": "s3", "repo": "o/p", "errorClass": "ValueError",
     "errorMessage": "LoRA is not supported with quantized models yet.",
     "messagePattern": r"LoRA is not supported with quantized models yet\."},
]


@pytest.fixture(scope="module")
def index() -> SimilarIndex:
    return SimilarIndex.from_records(RECORDS)


@pytest.mark.parametrize("text, expected", [
    # an older release without the hint sentence: the text stops inside the record's message
    ("Bfloat16 is only supported on GPUs with compute capability of at least 8.0. Your Tesla V100 GPU has compute capability 7.0.",
     ("r1", 0.9354, ["truncated"], [{"op": "missing", "record": "You can use float16 instead", "text": ""}])),
    # an issue title cut mid-sentence
    ("Engine core initialization failed. See root",
     ("r2", 0.925, ["truncated"], [{"op": "missing", "record": "cause above", "text": ""}])),
    # the message inside prose: scored on the span it shares, capped below a whole message
    ("I keep getting Engine core initialization failed. See root cause above. when I start the server",
     ("r2", 0.95, ["extra text"], [{"op": "extra", "record": "", "text": "I keep getting"},
                                   {"op": "extra", "record": "", "text": "when I start the server"}])),
    # a word changed inside the message counts as before
    ("Engine core init failed. See root cause above.",
     ("r2", 0.7223, ["reworded"], [{"op": "changed", "record": "initialization", "text": "init"}])),
    # cut and reworded: both kinds are named
    ("LoRA adapters are not supported with quantized models",
     ("r3", 0.5293, ["truncated", "reworded"], [{"op": "changed", "record": "is", "text": "adapters are"},
                                                {"op": "missing", "record": "yet", "text": ""}])),
])
def test_span_score_and_closeness(index, text, expected):
    near = index.near(text)
    n = near[0]
    assert (n.record_id, round(n.similarity, 4), n.closeness, [d.as_dict() for d in n.differences]) == expected
    assert n.as_dict()["closeness"] == expected[2]


def test_whole_message_ranks_above_its_first_clause(index):
    whole = index.near("Engine core initialization failed. See root cause above")[0]
    first_clause = index.near("Engine core initialization failed. See")[0]
    assert whole.similarity > first_clause.similarity
    assert first_clause.closeness == ["truncated"]


def test_a_few_shared_words_in_a_long_text_are_not_a_span(index):
    """"is not supported with" inside another message is not r3's message: no span forgiveness,
    and with neither r3's opening words nor a long run of them, no suggestion at all."""
    text = "Pipeline parallelism is not supported with this model on the given hardware yet, sorry."
    # scored on the whole text (0.19), where forgiving the words around the span would give 0.95
    assert [(n.record_id, round(n.similarity, 4), n.evidence) for n in index.near(text, min_similarity=0.0)
            if n.evidence] == []
    assert index.near(text) == []


def test_words_in_common_alone_are_no_suggestion(index):
    # A real paste of an error no record describes: it shares "compute capability" and
    # "are not supported" with r1, at a score true drift also has; it is not shown.
    assert index.near("GPUs with compute capability below 7.0 are not supported.") == []
    # The same words behind r1's opening are: a drifted wording of r1's message.
    assert [(n.record_id, round(n.similarity, 4)) for n in index.near(
        "Bfloat16 is only supported on recent GPUs, and this T4 is not one of them (capability 7.5).")] == [("r1", 0.1793)]
    # A long run of r1's words anywhere is too (its opening reworded).
    assert [n.record_id for n in index.near(
        "BF16 works only on GPUs with compute capability of at least 8.0 here")] == ["r1"]


def test_below_the_cutoff_only_a_clear_winner_is_shown():
    # two records with the same opening, close to each other: neither clearly wins, none is shown
    tail = RECORDS[0]["messagePattern"].replace(r"You can use float16 instead\.", r"Pass --dtype half\.")
    two = SimilarIndex.from_records(RECORDS + [dict(RECORDS[0], id="r4", slug="s4", messagePattern=tail)])
    text = "Bfloat16 is only supported on recent GPUs, and this T4 is not one of them (capability 7.5)."
    assert [n.record_id for n in two.near(text, min_similarity=0.0)] == ["r1", "r4"] or \
        [n.record_id for n in two.near(text, min_similarity=0.0)] == ["r4", "r1"]
    assert two.near(text) == []


def test_near_match_is_never_a_match_and_says_its_closeness(kb):
    text = ("[Bug]: CohereForAI/c4ai-command-r-v01 : ValueError: User-specified max_model_len (131072) is greater than "
            "the derived max_model_len (None=8192 in model's config.json). This may lead to incorrect model")
    e = explain(kb, text)
    assert e.found == [] and not e.matched
    data = e.as_dict()
    assert data["matched"] is False and data["matches"] == []
    assert data["nearMatches"][0]["closeness"] == ["truncated", "extra text"]
