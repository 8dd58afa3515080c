"""The records file of a KnowledgeBase holds no handle (issue 24, item 7).

``RecordFile`` used to open ``records.jsonl`` and never close it; at 48k records the
ResourceWarning its handle raised when collected fired inside a lazy import on
``errkb explain --json``'s output path, and the call exited 2 with ``internal error:
RuntimeError: dictionary changed size during iteration``. The tests run explain for
real, in a subprocess, with every ResourceWarning an error.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from errkb.kb import KnowledgeBase, RecordFile
from tests.support import REPO, SEED_FILE, SEED_ID, SEED_MESSAGE, build_store, variant

# Python's own strictest reporting: dev mode shows every ResourceWarning, -W error makes it an error.
STRICT = [sys.executable, "-X", "dev", "-W", "error::ResourceWarning", "-m", "errkb"]


def explain_json(db: Path, tmp_path: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO), "ERRKB_CACHE_DIR": str(tmp_path / "cache"), "NO_COLOR": "1"}
    env.pop("ERRKB_DB", None)
    line = f"ERROR 12-04 10:00:01 [core.py:123] {SEED_MESSAGE}"
    return subprocess.run([*STRICT, "explain", "--json", "--db", str(db), f"INFO starting\n{line}"],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=600)


def assert_clean_answer(run: subprocess.CompletedProcess) -> None:
    assert "ResourceWarning" not in run.stderr and "Exception ignored" not in run.stderr, run.stderr[-2000:]
    assert run.returncode == 0, run.stderr[-2000:]
    out = json.loads(run.stdout)
    assert out["matched"] and out["matches"][0]["id"] == SEED_ID


def test_explain_json_leaves_no_file_open(tmp_path):
    db = build_store(tmp_path / "store.duckdb")
    assert_clean_answer(explain_json(db, tmp_path))  # builds the view
    assert_clean_answer(explain_json(db, tmp_path))  # served from it


def test_a_record_file_holds_no_handle_between_reads(tmp_path):
    records = [{"id": f"r{i}", "n": i} for i in range(5)]
    path = tmp_path / "records.jsonl"
    table = RecordFile.write(records, path)
    fds = set(os.listdir("/proc/self/fd"))
    rf = RecordFile(path, table)
    assert rf.get("r3") == {"id": "r3", "n": 3}
    assert list(rf.all()) == records
    assert set(os.listdir("/proc/self/fd")) == fds
    del rf


@pytest.mark.slow
def test_explain_json_at_twenty_thousand_records(tmp_path):
    seed = json.loads(SEED_FILE.read_text())["record"]
    db = build_store(tmp_path / "store.duckdb", [seed] + [variant(seed, i) for i in range(1, 20_000)])
    assert len(KnowledgeBase.open(db)) == 20_000
    assert_clean_answer(explain_json(db, tmp_path))
    assert_clean_answer(explain_json(db, tmp_path))
