"""What a user meets first (issue 18): the headline of a pasted traceback, search order,
``errkb list``'s table, near-match words and log prefixes."""

from __future__ import annotations

import json
import os

import pytest
from click.testing import CliRunner

from errkb.cli import cli
from tests.support import REPO, SEED_ID, SEED_MESSAGE, on_terminal

TRACEBACK = f"""Traceback (most recent call last):
  File "/usr/lib/python3/dist-packages/vllm/v1/engine/core.py", line 701, in run_engine_core
    engine_core = EngineCoreProc(*args, **kwargs)
  File "/usr/lib/python3/dist-packages/vllm/distributed/device_communicators/flashinfer_all_reduce.py", line 221, in get
    raise ValueError(
ValueError: {SEED_MESSAGE}
"""


def test_pasted_traceback_headline_is_the_exception_message(seed_db):
    result = CliRunner().invoke(cli, ["explain", "--json", "--db", str(seed_db), TRACEBACK])
    assert result.exit_code == 0, result.output
    [match] = json.loads(result.stdout)["matches"]
    assert match["id"] == SEED_ID
    assert match["message"] == SEED_MESSAGE
    assert match["span"] == [0, len(SEED_MESSAGE)]

    text = CliRunner().invoke(cli, ["explain", "--db", str(seed_db), TRACEBACK])
    assert text.exit_code == 0
    assert "Traceback" not in text.stdout and "run_engine_core" not in text.stdout
    assert "  Flashinfer allreduce quantization fusion is not supported for multi-node\n" in text.stdout


def test_message_wrapped_over_lines_is_still_found_joined(seed_db):
    wrapped = "ValueError: Flashinfer allreduce quantization fusion is not supported for\n" \
              "multi-node allreduce with 'trtllm' backend. Please use 'mnnvl' backend instead."
    result = CliRunner().invoke(cli, ["explain", "--json", "--db", str(seed_db), wrapped])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["matches"][0]["message"] == SEED_MESSAGE


@pytest.fixture(scope="module")
def records_folders_db(tmp_path_factory) -> str:
    """data/ ingested through the CLI, as a user would; the path as a str. The reader leaves
    out errkb's own folders there (proofs/, findings/, variants/: records.read.SIDECAR_DIRS)."""
    db = tmp_path_factory.mktemp("data") / "store.duckdb"
    result = CliRunner().invoke(cli, ["ingest", "--db", str(db), str(REPO / "data")])
    assert result.exit_code == 0, result.output
    return str(db)


def test_list_on_a_tty_has_a_header_and_aligned_columns(records_folders_db):
    shown = on_terminal(["list", "--db", records_folders_db])[0].replace("\r\n", "\n")
    lines = shown.rstrip("\n").split("\n")
    records = json.loads(CliRunner().invoke(cli, ["list", "--json", "--db", records_folders_db]).stdout)
    assert lines[-1] == f"{len(records)} record(s)"
    header, rows = lines[0], lines[1:-1]
    assert header.split() == ["ID", "REPO", "CLASS", "SEVERITY", "SLUG"]
    assert len(rows) == len(records) >= 20
    # every column starts where its header does
    starts = [header.index(name) for name in ("REPO", "CLASS", "SEVERITY", "SLUG")]
    for row, record in zip(rows, records):
        assert [row[s - 1] for s in starts] == [" "] * 4 and " " not in [row[s] for s in starts]
        assert row.split() == [record["id"], record["repo"], record["errorClass"], record["severity"], record["slug"]]


def test_list_piped_is_one_record_a_line_and_json_unchanged(records_folders_db):
    result = CliRunner().invoke(cli, ["list", "--db", records_folders_db, "--repo", "vllm-project/vllm"])
    assert result.exit_code == 0
    assert f"{SEED_ID}  vllm-project/vllm  ValueError  flashinfer-allreduce-quantization-fusion-is-not-su" \
        in result.stdout.splitlines()
    assert not result.stdout.startswith("ID")
    records = json.loads(CliRunner().invoke(cli, ["list", "--json", "--db", records_folders_db]).stdout)
    assert SEED_ID in [r["id"] for r in records] and "errorMessage" in records[0]


def test_near_match_diff_keeps_contractions_whole(tmp_path, seed_record):
    record = {**seed_record, "id": "00000000000000c1", "slug": "the-cache-isn-t-ready",
              "errorMessage": "The KV cache isn't ready for rank 3: call initialize_cache() first",
              "messagePattern": r"The KV cache isn't ready for rank (.+?): call initialize_cache\(\) first",
              "sourceCode": "x", "sourceCodeStart": 1, "sourceCodeEnd": 1, "lineNumber": 1}
    from errkb.match.near import SimilarIndex

    [near] = SimilarIndex.from_records([record]).near(
        "The KV cache wasn't ready for rank 3: call initialize_cache() first")
    assert {"op": "changed", "record": "isn't", "text": "wasn't"} in [d.as_dict() for d in near.diff]


@pytest.mark.parametrize("line, message", [
    ("2025-08-02T18:07:14.645Z ERROR worker-3 ValueError: bad block size", "ValueError: bad block size"),
    ("2025-08-02 18:07:14,645 ERROR vllm.engine.core: Engine core failed", "Engine core failed"),
    ("2025-08-02T18:07:14Z [ERROR] [gpu:1] CUDA error: misaligned address", "CUDA error: misaligned address"),
    ("2025-08-02T18:07:14Z ERROR rank_0 RuntimeError: NCCL error", "RuntimeError: NCCL error"),
    # the message itself is never eaten: prose words, exception classes, no level
    ("2025-08-02T18:07:14Z ERROR non-zero exit status 1", "non-zero exit status 1"),
    ("2025-08-02T18:07:14Z ERROR torch.cuda.OutOfMemoryError: CUDA out of memory",
     "torch.cuda.OutOfMemoryError: CUDA out of memory"),
    ("2025-08-02T18:07:14Z worker-3 started", "worker-3 started"),
])
def test_generic_log_prefix_timestamp_level_logger_is_stripped(line, message):
    from errkb.text.normalize import strip_prefixes

    assert strip_prefixes(line) == message


def test_explain_headline_drops_the_worker_name(seed_db):
    line = f"2025-08-02T18:07:14.645Z ERROR worker-3 ValueError: {SEED_MESSAGE}"
    result = CliRunner().invoke(cli, ["explain", "--json", "--db", str(seed_db), line])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["matches"][0]["message"] == SEED_MESSAGE


def test_a_large_json_answer_on_a_pipe_beside_a_terminal_stderr(tmp_path):
    # `errkb list --json | jq` from a terminal: 150 KiB on stdout, more than a pipe holds,
    # arrives whole and is valid JSON (stderr on the terminal stays free of it).
    env = {**os.environ, "ERRKB_CACHE_DIR": str(tmp_path / "cache")}
    shown, stdout = on_terminal(["list", "--json"], env=env, stdout_on_terminal=False)
    assert len(stdout) > 64 * 1024
    assert len(json.loads(stdout)) == 33
    assert "{" not in shown
