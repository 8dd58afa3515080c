"""The bundled dataset: every record is lint-clean, self-consistent, and finds real logs.

Real fixtures live in tests/fixtures/real_logs/: text copied verbatim from public issues
(first line ``# source: <issue URL>``, second ``# expect: <record id>``). Each must be
explained by its own record. Confusable pairs are records whose messages share a long
prefix (or whose patterns overlap); each pair's lines must go to their own record.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from errkb.cli import cli
from errkb.records.read import SIDECAR_DIRS

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "data"
REAL_LOGS = Path(__file__).parent / "fixtures" / "real_logs"
SEED_FILE = DATA / "vllm-project" / "vllm" / "000_82135fca3cf8df92.txt"
SEED_ID = "2e3fedf4ee50f84a"
SEED_KEYS = list(json.loads(SEED_FILE.read_text())["record"])

# Records whose messages are easy to confuse: (record id, sibling id, why).
CONFUSABLE_PAIRS = [
    ("03ff8298c5833134", SEED_ID,
     "flashinfer_all_reduce.py: non-quant vs quant-fusion workspace, same multi-node 'trtllm' check"),
    ("b71de35158803692", "cf6947ec4f1f5925",
     "V1 kv_cache_utils.py vs V0 worker.py 'No available memory for the cache blocks': the V0 pattern also "
     "matches the longer V1 message"),
    ("777101fc2a08844b", "7bf6c84e4a15af89",
     "vllm/config.py SchedulerConfig: both open with 'max_num_batched_tokens (N)' (vs max_model_len / max_num_seqs)"),
    ("c7098e296070ec95", "eda8b73d9a02a8c9",
     "flashinfer/utils.py _check_cached_qkv_data_type: 'The dtype of q ...' vs 'The dtype of k ...'"),
    ("e6731f41df64fe83", "0da69f8814de0754",
     "distributed_c10d.py: 'Distributed package doesn't have NCCL built in' vs '... MPI built in. ...'"),
]


def _wrapped_files() -> list[Path]:
    # data/proofs and data/findings are errkb's own files next to the records, not records.
    return sorted(p for p in DATA.rglob("*.json") if p.relative_to(DATA).parts[0] not in SIDECAR_DIRS)


def _records() -> list[dict]:
    records = [json.loads(SEED_FILE.read_text())["record"]]
    records += [json.loads(p.read_text())["record"] for p in _wrapped_files()]
    return records


RECORDS = _records()
BY_ID = {r["id"]: r for r in RECORDS}


def _fixtures() -> list[tuple[str, str, str, str]]:
    out = []
    for path in sorted(REAL_LOGS.glob("*.txt")):
        lines = path.read_text().split("\n")
        source = re.fullmatch(r"# source: (https://github\.com/\S+/(issues|pull)/\d+\S*)", lines[0])
        expect = re.fullmatch(r"# expect: ([0-9a-f]{16})", lines[1])
        assert source and expect, f"{path.name}: first two lines must be '# source: <issue URL>' and '# expect: <id>'"
        out.append((path.name, source.group(1), expect.group(1), "\n".join(lines[2:]).strip("\n")))
    return out


FIXTURES = _fixtures()


def test_dataset_has_at_least_25_new_records_in_wrapper_form():
    files = _wrapped_files()
    assert len(files) >= 25
    for path in files:
        doc = json.loads(path.read_text())
        assert set(doc) == {"record", "datasetVersion"}, path
        rec = doc["record"]
        assert list(rec) == SEED_KEYS, f"{path}: keys differ from the seed's (same keys, same order)"
        assert path == DATA / rec["repo"] / f"{rec['slug']}.json", f"{path}: must live at data/<repo>/<slug>.json"


def test_every_file_in_data_lints_clean():
    # The four validations that started an engine of a model and flags written into the code (W501)
    # now start it from the user's own `vllm serve` arguments.
    result = CliRunner().invoke(cli, ["lint", str(DATA), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output) == []


def test_ids_and_slugs_are_unique():
    ids = [r["id"] for r in RECORDS]
    assert len(ids) == len(set(ids))
    slugs = [(r["repo"], r["slug"]) for r in RECORDS]
    assert len(slugs) == len(set(slugs))


@pytest.mark.parametrize("record", RECORDS[1:], ids=lambda r: r["slug"])
def test_record_is_derived_the_dataset_way(record):
    # Each pattern finds its own message, and id/slug/url follow the dataset's construction.
    assert re.search(record["messagePattern"], record["errorMessage"])
    key = f"{record['repo']}\n{record['filePath']}\n{record['messagePattern']}"
    assert record["id"] == hashlib.sha256(key.encode()).hexdigest()[:16]
    slug = re.sub(r"[^a-z0-9]+", "-", record["errorMessage"].lower()).strip("-")[:50].strip("-")
    # Two messages sharing their first 50 characters: the later record keeps the rule's prefix plus a short tag.
    assert record["slug"] == slug or (len(record["slug"]) <= 50 and slug.startswith(record["slug"].rsplit("-", 1)[0]))
    start, end = record["sourceCodeStart"], record["sourceCodeEnd"]
    assert len(record["sourceCode"].split("\n")) == end - start + 1
    raise_line = record["sourceCode"].split("\n")[record["lineNumber"] - start]
    # Python raises; C++ sources report through throw or an error macro (FLASHINFER_ERROR, TORCH_CHECK).
    assert any(marker in raise_line for marker in ("raise", "throw", "_ERROR(", "TORCH_CHECK")), raise_line


def test_verify_syntax_tier_parses_every_fix_and_validation_snippet(tmp_path):
    db = tmp_path / "store.duckdb"
    runner = CliRunner()
    ingest = runner.invoke(cli, ["ingest", "--db", str(db), str(DATA)])
    assert ingest.exit_code == 0, ingest.output
    result = runner.invoke(cli, ["verify", "--all", "--tier", "syntax", "--db", str(db), "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    checked = {(r["record_id"], r["check"].split(":")[0]) for r in report["results"] if r["outcome"] == "pass"}
    for rec in RECORDS:
        for field in ("exampleFix", "validationCode"):
            if rec[field] is not None:
                assert (rec["id"], field) in checked, f"{rec['slug']}: {field} was not syntax-checked"


def _first_match_id(text: str) -> str | None:
    """The record `errkb explain --json` ranks first for ``text`` (the store built from the bundled data/)."""
    result = CliRunner().invoke(cli, ["explain", "--json", text])
    assert result.exit_code in (0, 1), result.output
    doc = json.loads(result.output)
    if result.exit_code == 1:
        assert doc["matched"] is False
        return None
    return doc["matches"][0]["id"]


def test_there_are_at_least_15_real_fixtures_and_each_expects_a_real_record():
    assert len(FIXTURES) >= 15
    for name, _source, expect, text in FIXTURES:
        assert expect in BY_ID, f"{name}: expects unknown record {expect}"
        # Messages wrapped over several lines count once the line breaks are joined.
        flat = re.sub(r"[ \t]*\n[ \t]*", " ", text)
        assert re.search(BY_ID[expect]["messagePattern"], flat), f"{name}: the record's pattern is not in the text"


@pytest.mark.parametrize("fixture", FIXTURES, ids=lambda f: f[0])
def test_real_log_is_explained_by_its_record(fixture):
    name, source, expect, text = fixture
    assert _first_match_id(text) == expect, f"{name} ({source})"


def _confusable_lines():
    for a, b, _why in CONFUSABLE_PAIRS:
        yield pytest.param(a, b, id=f"{BY_ID[a]['slug'][:30]}-vs-{BY_ID[b]['slug'][:30]}")
        yield pytest.param(b, a, id=f"{BY_ID[b]['slug'][:30]}-vs-{BY_ID[a]['slug'][:30]}")


def test_confusable_pairs_really_are_confusable():
    for a, b, why in CONFUSABLE_PAIRS:
        ma, mb = BY_ID[a]["errorMessage"], BY_ID[b]["errorMessage"]
        shared = len(next((ma[:i] for i in range(min(len(ma), len(mb)), 0, -1) if ma[:i] == mb[:i]), ""))
        overlapping = re.search(BY_ID[a]["messagePattern"], mb) or re.search(BY_ID[b]["messagePattern"], ma)
        common_words = set(re.findall(r"\w{4,}", ma)) & set(re.findall(r"\w{4,}", mb))
        assert shared >= 20 or overlapping or len(common_words) >= 8, why


@pytest.mark.parametrize("own,sibling", list(_confusable_lines()))
def test_confusable_line_goes_to_its_own_record(own, sibling):
    rec = BY_ID[own]
    line = f"(EngineCore_DP0 pid=4242) ERROR 12-02 10:00:00 [core.py:700] {rec['errorClass']}: {rec['errorMessage']}"
    first = _first_match_id(line)
    assert first == own, f"{rec['slug']} went to {first} (sibling {sibling})"
