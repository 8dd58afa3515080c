"""Records that crash a parser or exhaust the store become rejects with a reason,
and the rest of the batch is stored (limits: docs/records.md).

Hypothesis generates nesting depths and shapes (arrays, objects, inside a record
field or as the whole line) and oversized fields; each batch is ingested by the real
CLI in a subprocess under a hard timeout.
"""

from __future__ import annotations

import json
import subprocess
import sys

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from errkb.records.read import MAX_DEPTH, MAX_RECORD_BYTES
from errkb.store.db import Store
from tests.support import REPO, SEED_FILE


def seed() -> dict:
    return json.loads(SEED_FILE.read_text())["record"]


def nested(depth: int, kinds: str) -> str:
    opens = "".join("[" if kinds[i % len(kinds)] == "a" else '{"k":' for i in range(depth))
    closes = "".join("]" if kinds[i % len(kinds)] == "a" else "}" for i in reversed(range(depth)))
    return opens + "1" + closes


def ingest(tmp_path, lines: list[str]):
    src = tmp_path / "batch.jsonl"
    src.write_text("".join(line + "\n" for line in lines))
    db = tmp_path / "s.duckdb"
    done = subprocess.run([sys.executable, "-m", "errkb", "ingest", "--db", str(db), "--json", str(src)],
                          capture_output=True, text=True, cwd=REPO, timeout=300)
    return done, db


@settings(max_examples=4, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(st.integers(MAX_DEPTH + 1, 200_000), st.sampled_from(["a", "o", "ao"]), st.booleans())
def test_deep_nesting_is_a_reject_and_the_rest_is_stored(tmp_path_factory, depth, kinds, as_field):
    tmp_path = tmp_path_factory.mktemp("deep")
    good = dict(seed(), id="00000000000000c1", slug="good-one")
    value = nested(depth, kinds)
    hostile = json.dumps(seed())[:-1] + ', "extra": ' + value + "}" if as_field else value
    done, db = ingest(tmp_path, [json.dumps(good), hostile])  # good first: a JSON Lines file
    assert done.returncode == 1, done.stderr  # 1: something was rejected
    assert "Traceback" not in done.stderr
    report = json.loads(done.stdout)
    assert report["rejected"] == 1 and report["new"] == 1
    with Store.open(db, read_only=True) as store:
        assert store.get("00000000000000c1") is not None
        [reject] = store.rejects()
        assert "nested" in " ".join(reject["reasons"])


def test_an_oversized_record_is_a_reject_with_its_size_and_the_rest_is_stored(tmp_path):
    good = dict(seed(), id="00000000000000c2", slug="good-two")
    big = dict(seed(), documentation="x" * (MAX_RECORD_BYTES + 1))
    done, db = ingest(tmp_path, [json.dumps(big), json.dumps(good)])
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    with Store.open(db, read_only=True) as store:
        assert store.get("00000000000000c2") is not None
        [reject] = store.rejects()
        assert f"over the {MAX_RECORD_BYTES >> 20} MiB limit" in " ".join(reject["reasons"])
