"""Near matches: drifted messages find their record as "similar, not exact"."""

from __future__ import annotations

import gzip
import json
from itertools import islice

import pytest

from errkb.match.near import CANDIDATES, SimilarIndex, pattern_words
from errkb.records.read import read_records
from tests.support import BENCH_CORPUS, REPO, SEED_ID, SEED_MESSAGE


@pytest.fixture(scope="module")
def records() -> list[dict]:
    return [item.record for item in read_records([REPO / "data"]) if item.ok]


@pytest.fixture(scope="module")
def index(records) -> SimilarIndex:
    return SimilarIndex.from_records(records)


def test_pattern_words_keep_literals_and_mark_wildcards():
    assert pattern_words(r"The model's max seq len \((.+?)\) is larger than (\d+) tokens\.") == [
        "The", "model's", "max", "seq", "len", None, "is", "larger", "than", None, "tokens"]
    assert pattern_words(r"^(?:Bad) value$") == ["Bad", "value"]
    # an unreadable pattern falls back to the message's words; nothing is compiled or run
    assert pattern_words("broken (unclosed", fallback="broken value here") == ["broken", "value", "here"]
    assert pattern_words(r"(a+)+$") == [None]


@pytest.mark.parametrize("drifted, changed", [
    (SEED_MESSAGE.replace("trtllm", "nccl"), {"op": "changed", "record": "trtllm", "text": "nccl"}),
    (SEED_MESSAGE.replace("is not supported", "is unsupported"), {"op": "changed", "record": "not supported", "text": "unsupported"}),
    (SEED_MESSAGE.replace(" Please use 'mnnvl' backend instead.", ""), {"op": "missing", "record": "Please use mnnvl backend instead", "text": ""}),
    ("ValueError: " + SEED_MESSAGE.replace("multi-node", "multi-host"), {"op": "changed", "record": "node", "text": "host"}),
])
def test_drifted_seed_message_finds_the_seed_first(index, drifted, changed):
    near = index.near(drifted)
    assert near and near[0].record_id == SEED_ID
    assert 0.6 <= near[0].similarity < 1.0
    assert [d.as_dict() for d in near[0].differences] == [changed]


def test_seed_ranks_above_its_sibling(index):
    """The non-quant sibling lacks 'quantization fusion': the text's extra words count against it."""
    near = index.near(SEED_MESSAGE.replace("trtllm", "nccl"))
    assert [n.slug for n in near[:2]] == [
        "flashinfer-allreduce-quantization-fusion-is-not-su", "flashinfer-allreduce-is-not-supported-for-multi-no"]
    assert near[0].similarity > near[1].similarity
    sibling_diff = [d.as_dict() for d in near[1].differences]
    assert {"op": "extra", "record": "", "text": "quantization fusion"} in sibling_diff


def test_values_in_wildcards_are_not_differences(index):
    text = ("The model's max seq len (131072) is larger than the maximum number of tokens that can be stored "
            "in KV cache (52000). Try increasing `gpu_memory_utilization` or lowering `max_model_len` when "
            "initializing the engine.")
    near = index.near(text)
    assert near[0].slug.startswith("the-model-s-max-seq-len")
    diffs = [d.as_dict() for d in near[0].differences]
    assert diffs == [{"op": "changed", "record": "decreasing", "text": "lowering"}]
    assert {"op": "value", "record": "…", "text": "131072"} in [d.as_dict() for d in near[0].diff]


def test_unrelated_or_empty_text_has_no_near_match(index):
    assert index.near("INFO: Uvicorn running on http://0.0.0.0:8000 (Press CTRL+C to quit)") == []
    assert index.near("") == [] and index.near("   ") == [] and index.near("!!! ???") == []
    # a few shared words are not enough
    assert index.near("please use the backend") == []


def test_save_load_roundtrip_gives_the_same_answers(index, tmp_path):
    path = tmp_path / "similar.json"
    index.save(path)
    loaded = SimilarIndex.load(path)
    text = SEED_MESSAGE.replace("trtllm", "nccl")
    assert [n.as_dict() for n in loaded.near(text)] == [n.as_dict() for n in index.near(text)]
    path.write_text('{"format": 99}')
    with pytest.raises(ValueError, match="not a similar-records index of format 5"):
        SimilarIndex.load(path)


def _corpus_records(n: int) -> list[dict]:
    out = []
    with gzip.open(BENCH_CORPUS / "patterns.jsonl.gz", "rt") as f:
        for row in map(json.loads, islice(f, n)):
            message = row["pattern"].replace("(.+?)", "X").replace("\\", "")
            out.append({"id": f"c{row['id']}", "slug": f"c{row['id']}", "repo": "corpus/x", "errorClass": row["error_class"],
                        "errorMessage": message, "messagePattern": row["pattern"]})
    return out


@pytest.mark.skipif(not (BENCH_CORPUS / "patterns.jsonl.gz").is_file(), reason="needs the bench corpus")
def test_ten_thousand_real_patterns_align_only_a_few_candidates(records, monkeypatch):
    """At 10k records the inverted index nominates at most CANDIDATES records to align."""
    corpus = _corpus_records(10_000)
    index = SimilarIndex.from_records(corpus + records)
    aligned = []
    original = SimilarIndex._compare
    monkeypatch.setattr(SimilarIndex, "_compare", lambda self, i, *a: aligned.append(i) or original(self, i, *a))
    target = next(r for r in corpus if len(r["errorMessage"].split()) >= 8 and "X" in r["errorMessage"])
    words = target["errorMessage"].split()
    words[len(words) // 2] = "zzdrifted"
    near = index.near(" ".join(words).replace("X", "some_value"))
    assert near[0].record_id == target["id"]
    assert 0 < len(aligned) <= CANDIDATES
    aligned.clear()
    assert index.near(SEED_MESSAGE.replace("trtllm", "nccl"))[0].record_id == SEED_ID
    assert len(aligned) <= CANDIDATES


def test_records_without_words_are_left_out():
    rec = {"id": "x", "messagePattern": "(.+?)", "errorMessage": ""}
    assert SimilarIndex.from_records([rec, "not a record", None]).items == []
    assert SimilarIndex().near("anything") == []


def test_hostile_pattern_is_never_run(index):
    """A catastrophic pattern costs nothing here: patterns are parsed, not executed."""
    rec = {"id": "evil", "slug": "evil", "repo": "o/n", "errorClass": "E",
           "messagePattern": r"(a+)+$ catastrophic backtracking here", "errorMessage": "x"}
    evil = SimilarIndex.from_records([rec])
    near = evil.near("a" * 50_000 + "! catastrophic backtracking here")
    assert [n.record_id for n in near] == ["evil"]
