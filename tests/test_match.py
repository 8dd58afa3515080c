"""errkb.match.matcher.Matcher: the seed in the forms real logs take, ranking, cache, bad input."""

from __future__ import annotations

import copy
import json

import pytest

from errkb.match.matcher import Matcher, MatcherError
from errkb.store.db import Store
from tests.support import SEED_FILE, SEED_ID, SEED_MESSAGE

ENGINES = [
    ("hyperscan", "re2"),
    ("ahocorasick", "re2"),
    ("python", "re2"),
    ("python", "re"),  # the pure-Python path: no optional engine at all
]


def record(rid: str, pattern: str, error_class: str = "ValueError", repo: str = "acme/widget", file_path: str = "widget/core.py") -> dict:
    return {"id": rid, "slug": f"slug-{rid}", "repo": repo, "messagePattern": pattern, "errorClass": error_class,
            "severity": "error", "filePath": file_path}


SEED_FORMS = {
    "bare": SEED_MESSAGE,
    "vllm-prefix": f"(EngineCore_DP0 pid=1234) ERROR 08-14 21:17:39 [core.py:710] ValueError: {SEED_MESSAGE}",
    "rank": f"[rank0]: ValueError: {SEED_MESSAGE}",
    "traceback": (
        "Traceback (most recent call last):\n"
        '  File "/opt/venv/lib/python3.12/site-packages/vllm/distributed/device_communicators/flashinfer_all_reduce.py", line 221, in get_flashinfer_allreduce_quant_workspace\n'
        "    raise ValueError(\n"
        f"ValueError: {SEED_MESSAGE}\n"
    ),
    "json": json.dumps({"ts": "2026-08-14T21:17:39Z", "level": "error", "message": f"ValueError: {SEED_MESSAGE}"}),
    "json-escaped": json.dumps({"level": "error", "msg": f"ValueError: {SEED_MESSAGE}"}, ensure_ascii=True).replace("'", "\\u0027"),
    "ansi": f"\x1b[1;31mERROR\x1b[0m 08-14 21:17:39 [core.py:710] \x1b[33mValueError: {SEED_MESSAGE[:30]}\x1b[0m{SEED_MESSAGE[30:]}",
    "crlf": f"ValueError: {SEED_MESSAGE}\r\n",
    "wrapped": "ValueError: " + SEED_MESSAGE.replace(" with 'trtllm'", "\nwith 'trtllm'"),
    "syslog": f"Aug 16 03:07:54 gpu-node-7 python[61178]: ValueError: {SEED_MESSAGE}",
}


@pytest.fixture(scope="module")
def seed():
    return json.loads(SEED_FILE.read_text())["record"]


@pytest.mark.parametrize("prefilter, confirm", ENGINES)
@pytest.mark.parametrize("form", sorted(SEED_FORMS))
def test_seed_message_matches_in_every_real_form(seed, form, prefilter, confirm):
    m = Matcher.from_records([seed], prefilter=prefilter, confirm=confirm)
    [match] = m.match(SEED_FORMS[form])
    assert match.record_id == SEED_ID
    assert match.slug == seed["slug"] and match.repo == "vllm-project/vllm"
    assert match.record["messagePattern"] == seed["messagePattern"]
    # the span is located in the normalised message, which holds the seed message
    start, end = match.span
    assert match.message[start:end].replace("\n", " ") == SEED_MESSAGE
    assert not match.bounded and match.engine == confirm


@pytest.mark.parametrize("prefilter, confirm", ENGINES)
def test_match_lines_agrees_with_match(seed, prefilter, confirm):
    m = Matcher.from_records([seed], prefilter=prefilter, confirm=confirm)
    lines = [SEED_FORMS[f] for f in ("vllm-prefix", "rank", "json", "json-escaped", "ansi", "syslog")] + [
        "2026-08-05 15:26:02,985 INFO [a.py:1] request served", "", "Flashinfer allreduce"]
    results = m.match_lines(lines)
    assert [[x.record_id for x in r] for r in results] == [[SEED_ID]] * 6 + [[], [], []]
    assert [[x.record_id for x in m.match(line)] for line in lines] == [[SEED_ID]] * 6 + [[], [], []]


def test_error_class_in_text_raises_the_score(seed):
    m = Matcher.from_records([seed])
    with_class = m.match(f"ValueError: {SEED_MESSAGE}")[0].score
    other_class = m.match(f"RuntimeError: {SEED_MESSAGE}")[0].score
    without = m.match(SEED_MESSAGE)[0].score
    assert with_class > without == other_class


def test_ranking_class_then_specificity_then_repo_hints():
    records = [
        record("generic", r"backend (.+?) is not supported", error_class="RuntimeError", repo="other/thing", file_path="thing/x.py"),
        record("specific", r"backend (.+?) is not supported for multi-node allreduce", error_class="RuntimeError",
               repo="other/thing", file_path="thing/x.py"),
        record("classed", r"backend (.+?) is not supported", error_class="ValueError", repo="other/thing", file_path="thing/x.py"),
        record("hinted", r"backend (.+?) is not supported", error_class="RuntimeError", repo="vllm-project/vllm",
               file_path="vllm/distributed/parallel_state.py"),
    ]
    m = Matcher.from_records(records)
    text = ("Traceback (most recent call last):\n"
            '  File "/venv/lib/python3.12/site-packages/vllm/distributed/parallel_state.py", line 9, in init\n'
            "ValueError: backend 'trtllm' is not supported for multi-node allreduce")
    found = m.match(text)
    assert [x.record_id for x in found] == ["classed", "specific", "hinted", "generic"]
    scores = [x.score for x in found]
    assert scores == sorted(scores, reverse=True) and all(isinstance(s, float) for s in scores)
    assert len(set(scores)) == 4


def test_anchored_patterns_match_at_the_message_not_the_line():
    m = Matcher.from_records([record("anch", r"^CUDA out of memory\. Tried to allocate (\d+) MiB$", error_class="OutOfMemoryError")])
    line = "[rank3]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20 MiB"
    [found] = m.match(line)
    assert found.record_id == "anch" and found.message == "CUDA out of memory. Tried to allocate 20 MiB"
    assert [[x.record_id for x in r] for r in m.match_lines([line, line + " (extra)"])] == [["anch"], []]
    # raw mode is plain re.search on the line: the anchor does not hold there
    assert m.match_lines([line], raw=True) == [()]


def test_chained_exceptions_each_match():
    m = Matcher.from_records([record("cause", r"backend '(.+?)' unknown", "KeyError"), record("effect", r"workspace init failed", "RuntimeError")])
    text = ("Traceback (most recent call last):\n  File \"a.py\", line 1, in f\nKeyError: \"backend 'x' unknown\"\n\n"
            "The above exception was the direct cause of the following exception:\n\n"
            "Traceback (most recent call last):\n  File \"b.py\", line 2, in g\nRuntimeError: workspace init failed\n")
    assert {x.record_id for x in m.match(text)} == {"cause", "effect"}


def test_match_log_reports_messages_with_line_numbers(seed):
    m = Matcher.from_records([seed])
    lines = ["2026-08-05 15:26:02,985 INFO [a.py:1] starting",
             *SEED_FORMS["traceback"].rstrip("\n").split("\n"),
             "2026-08-05 15:26:03,000 INFO [a.py:2] retrying",
             SEED_FORMS["rank"]]
    out = [(msg.first_line, msg.last_line, [x.record_id for x in found]) for msg, found in m.match_log(lines, batch=2)]
    assert out == [(1, 1, []), (2, 5, [SEED_ID]), (6, 6, []), (7, 7, [SEED_ID])]


def test_backtracking_pattern_runs_on_the_bounded_path():
    m = Matcher.from_records([record("backref", r"duplicate key '(\w+)' and '\1'"), record("look", r"device (?!cpu)(\w+) lost")])
    [found] = m.match("ValueError: duplicate key 'rank' and 'rank'")
    assert found.record_id == "backref" and found.bounded and found.engine == "regex-bounded"
    assert m.match("duplicate key 'rank' and 'size'") == []
    assert [x.record_id for x in m.match("device cuda lost")] == ["look"]
    assert m.match("device cpu lost") == []


def test_invalid_pattern_is_skipped_and_reported(seed):
    broken = copy.deepcopy(seed)
    broken["id"] = "broken0000000000"
    broken["messagePattern"] = "unterminated (group"
    m = Matcher.from_records([broken, seed, {"id": "nopattern", "messagePattern": None}])
    assert [s["id"] for s in m.skipped] == ["broken0000000000", "nopattern"]
    assert m.skipped[0]["reason"] == "does not compile: missing ), unterminated subpattern at position 13"
    assert [x.record_id for x in m.match(SEED_MESSAGE)] == [SEED_ID]


@pytest.mark.parametrize("text", ["", "\n\n", b"", b"\x00\xff\xfe\x80" * 1000, "\x00" * 100])
def test_empty_and_binary_input_match_nothing(seed, text):
    m = Matcher.from_records([seed])
    assert m.match(text) == []
    assert m.match_lines([text]) == [()]


def test_binary_with_an_embedded_message_still_matches(seed):
    m = Matcher.from_records([seed])
    data = b"\x00\xff garbage \x80\x81 ValueError: " + SEED_MESSAGE.encode() + b" \xfe\n"
    assert [x.record_id for x in m.match(data)] == [SEED_ID]
    assert [[x.record_id for x in r] for r in m.match_lines([data, "lone \udcff surrogate"])] == [[SEED_ID], []]


@pytest.mark.slow
def test_100_mb_single_line(seed):
    m = Matcher.from_records([seed])
    line = "x" * (100 * 1024 * 1024) + " ValueError: " + SEED_MESSAGE
    # the tail of a huge text is kept (a traceback ends there), the middle is not read
    assert [x.record_id for x in m.match(line)] == [SEED_ID]
    assert [[x.record_id for x in r] for r in m.match_lines([line, "y"])] == [[SEED_ID], []]


def test_save_and_load_roundtrip(tmp_path, seed):
    m = Matcher.from_records([seed, record("other", r"disk (.+?) is full")])
    path = tmp_path / "index.errkb"
    m.save(path)
    loaded = Matcher.load(path)
    assert [x.record_id for x in loaded.match(f"[rank0]: ValueError: {SEED_MESSAGE}")] == [SEED_ID]
    assert loaded.match("disk /dev/sda1 is full")[0].record["id"] == "other"
    path.write_bytes(b"not an index")
    with pytest.raises(MatcherError, match="not an errkb matcher index"):
        Matcher.load(path)


def test_knowledge_base_builds_once_then_loads_from_the_cache(db_path):
    from errkb.kb import KnowledgeBase

    store = Store.open(db_path)
    store.ingest([SEED_FILE])
    built = KnowledgeBase.from_store(store).matcher
    assert built.build_seconds is not None
    cached = list(store.cache_dir.glob("kb-v*/matcher.idx"))
    assert len(cached) == 1 and store.dataset_hash() in cached[0].parent.name
    loaded = KnowledgeBase.from_store(store).matcher
    assert loaded.build_seconds is None  # came from the cache file, nothing compiled
    [found] = loaded.match(SEED_FORMS["vllm-prefix"])
    assert found.record_id == SEED_ID and found.record["slug"] == "flashinfer-allreduce-quantization-fusion-is-not-su"
    store.close()


def test_full_db_confirm_stage_agrees_and_is_cached(db_path, seed):
    pytest.importorskip("hyperscan")
    m = Matcher.from_records([seed, record("other", r"disk (.+?) is full"), record("anch", r"^boom$")])
    lines = [SEED_FORMS["rank"], "disk sda is full", "boom", "x boom", "nothing"]
    before = [[x.record_id for x in r] for r in m.match_lines(lines)]
    m.build_full_db()
    assert m.full_db and m.stats()["full_db_patterns"] == 3
    assert [[x.record_id for x in r] for r in m.match_lines(lines)] == before == [[SEED_ID], ["other"], ["anch"], [], []]
    path = db_path.with_name("full.idx")
    m.save(path)
    assert Matcher.load(path).full_db  # a saved index carries the compiled stage


def test_unknown_engine_is_a_clear_error():
    with pytest.raises(MatcherError, match="unknown prefilter 'grep'"):
        Matcher.from_records([], prefilter="grep")


def test_longer_message_extending_another_goes_to_its_own_record(seed_record, make_variant):
    # Both patterns are longer than the specificity scale and both match the
    # longer message: the one pinning down more text must come first.
    longer = make_variant(1)
    m = Matcher.from_records([seed_record, longer])
    for text in (longer["errorMessage"], "ERROR 12-02 10:00:00 [x.py:1] " + longer["errorMessage"]):
        assert [x.record_id for x in m.match(text)] == [longer["id"], seed_record["id"]]
        assert [x.record_id for x in m.match_lines([text])[0]] == [longer["id"], seed_record["id"]]
    assert [x.record_id for x in m.match(seed_record["errorMessage"])] == [seed_record["id"]]


def test_a_batch_larger_than_a_chunk_gives_the_same_results_as_line_by_line(seed_record, make_variant):
    records = [seed_record] + [make_variant(i) for i in range(5)]
    m = Matcher.from_records(records)
    lines = []
    for i in range(700):
        lines.append(f"INFO {i} nothing to see")
        lines.append(f"ERROR [x.py:{i}] " + records[i % len(records)]["errorMessage"])
        lines.append("x" * (i % 7) * 1000)
    batched = [[x.record_id for x in found] for found in m.match_lines(lines, chunk_lines=97, chunk_chars=5000)]
    single = [[x.record_id for x in m.match_lines([line])[0]] for line in lines]
    assert len(batched) == len(lines)
    assert batched == single
    assert sum(1 for b in batched if b) == 700


# -- pasted text that differs from the printed message: repaired forms ----------------

REPAIRS = [
    record("period", r"Please use '(.+?)' backend instead\."),
    record("twice", r"trying to initialize the default process group twice!", "RuntimeError"),
    record("colon", r"unsupported dtype: (\w+)\."),
]


@pytest.mark.parametrize("prefilter, confirm", ENGINES)
@pytest.mark.parametrize("text, expected", [
    # an issue title cut before the final period
    ("ValueError: Please use 'mnnvl' backend instead", "period"),
    # the message in backticks or quotes: the period goes inside them
    ("fix error: `Please use 'mnnvl' backend instead`", "period"),
    ("(Please use 'mnnvl' backend instead)", "period"),
    # quoted from the source: Python joins adjacent string literals
    ('raise RuntimeError("trying to initialize the default process group " "twice!")', "twice"),
    # the end of a longer paste: its last line, log prefix or not, and a traceback's message
    ("INFO 12-01 starting\nERROR 12-01 10:00:00 [x.py:3] Please use 'mnnvl' backend instead\n\n", "period"),
    ("Traceback (most recent call last):\n  File \"x.py\", line 1, in <module>\n"
     "ValueError: Please use 'mnnvl' backend instead", "period"),
])
def test_a_paste_cut_before_its_period_or_quoted_from_source_matches(text, expected, prefilter, confirm):
    m = Matcher.from_records(REPAIRS, prefilter=prefilter, confirm=confirm)
    assert [x.record_id for x in m.match(text)] == [expected]


@pytest.mark.parametrize("text", [
    "Please use 'mnnvl' backend inst",        # cut mid-word: a different text
    "Please use 'mnnvl' backend instead:",    # other final punctuation is not a missing period
    "Please use 'mnnvl' backend instead…",      # an ellipsis: the title says it was cut
    "unsupported dtype:",
    # a paste is cut at its end: a line inside it is as the program printed it
    "ValueError: Please use 'mnnvl' backend instead\nof 'trtllm' for multi-node allreduce.",
    "WARNING 12-01 10:00:00 [x.py:3] Please use 'mnnvl' backend instead\n"
    "Traceback (most recent call last):\nRuntimeError: CUDA error: an illegal memory access was encountered",
    # a complete JSON log line: the message in it is what the program printed
    '{"level": "error", "msg": "Please use \'mnnvl\' backend instead"}',
])
def test_repairs_add_no_match_to_other_texts(text):
    assert Matcher.from_records(REPAIRS).match(text) == []


def test_repairs_are_tried_only_when_nothing_matched():
    records = [record("short", r"backend (\w+) failed"), record("long", r"backend (\w+) failed to start\.")]
    m = Matcher.from_records(records)
    # as given, the text matches "short": the repaired form's "long" is not consulted
    assert [x.record_id for x in m.match("backend x failed to start")] == ["short"]
    assert [x.record_id for x in m.match("backend x failed to start.")] == ["long", "short"]
