"""What a user meets first (issue 18): the headline of a pasted traceback, search order,
``errkb list``'s table, near-match words and log prefixes."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from errkb.cli import cli
from tests.conftest import SEED_FILE, SEED_ID, SEED_MESSAGE

TRACEBACK = f"""Traceback (most recent call last):
  File "/usr/lib/python3/dist-packages/vllm/v1/engine/core.py", line 701, in run_engine_core
    engine_core = EngineCoreProc(*args, **kwargs)
  File "/usr/lib/python3/dist-packages/vllm/distributed/device_communicators/flashinfer_all_reduce.py", line 221, in get
    raise ValueError(
ValueError: {SEED_MESSAGE}
"""


@pytest.fixture(scope="module")
def seed_db(tmp_path_factory):
    db = tmp_path_factory.mktemp("seed") / "store.duckdb"
    result = CliRunner().invoke(cli, ["ingest", "--db", str(db), str(SEED_FILE)])
    assert result.exit_code == 0, result.output
    return str(db)


def test_pasted_traceback_headline_is_the_exception_message(seed_db):
    result = CliRunner().invoke(cli, ["explain", "--json", "--db", seed_db, TRACEBACK])
    assert result.exit_code == 0, result.output
    [match] = json.loads(result.stdout)["matches"]
    assert match["id"] == SEED_ID
    assert match["message"] == SEED_MESSAGE
    assert match["span"] == [0, len(SEED_MESSAGE)]

    text = CliRunner().invoke(cli, ["explain", "--db", seed_db, TRACEBACK])
    assert text.exit_code == 0
    assert "Traceback" not in text.stdout and "run_engine_core" not in text.stdout
    assert "  Flashinfer allreduce quantization fusion is not supported for multi-node\n" in text.stdout


def test_message_wrapped_over_lines_is_still_found_joined(seed_db):
    wrapped = "ValueError: Flashinfer allreduce quantization fusion is not supported for\n" \
              "multi-node allreduce with 'trtllm' backend. Please use 'mnnvl' backend instead."
    result = CliRunner().invoke(cli, ["explain", "--json", "--db", seed_db, wrapped])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["matches"][0]["message"] == SEED_MESSAGE
