"""Ingest throughput with full schema validation and lint, against a plain baseline.

    python -m bench.bench_ingest [--sizes 1000,50000]

For each size N, N distinct variants of the bundled real records (own id, message,
pattern) are written as JSON Lines; then, each in a fresh subprocess so peak memory
is its own:

* ``errkb``: ``Store.ingest`` into a new DuckDB file (schema + every lint rule +
  history, rejects, one transaction);
* ``baseline``: a plain loop of ``json.loads`` + ``jsonschema.validate`` against the
  same schema file, storing nothing. ``jsonschema.validate`` re-checks the schema on
  every call (~7 ms a record), so it runs on the first 2,000 records and its rate is
  extrapolated; ``prebuilt`` is the same loop with a validator built once, on all N.

Prints records/s, wall time and peak RSS, and the ratio errkb/baseline, and writes
``bench/results/ingest.json``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

ERRKB = """
import sys, time
from errkb.store.db import Store
t = time.perf_counter()
with Store.open(sys.argv[2]) as store:
    report = store.ingest([sys.argv[1]])
import resource
print(time.perf_counter() - t, report.new, report.rejected, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""

BASELINE = """
import json, sys, time
import jsonschema
from errkb.resources import schema_path
schema = json.loads(schema_path().read_text())
limit = int(sys.argv[2])
prebuilt = jsonschema.Draft202012Validator(schema).validate if sys.argv[3] == "prebuilt" else None
t = time.perf_counter()
n = 0
with open(sys.argv[1], encoding="utf-8") as f:
    for line in f:
        if n == limit:
            break
        record = json.loads(line)["record"]
        prebuilt(record) if prebuilt else jsonschema.validate(record, schema)
        n += 1
import resource
print(time.perf_counter() - t, n, 0, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


def measure(code: str, *args: str) -> dict:
    """Run one measurement in its own process; it reports its own time and peak RSS."""
    out = subprocess.run([sys.executable, "-c", code, *args], cwd=ROOT, check=True, capture_output=True, text=True).stdout
    seconds, accepted, rejected, peak_kb = out.split()
    return {"seconds": float(seconds), "accepted": int(accepted), "rejected": int(rejected), "peak_rss_mb": int(peak_kb) / 1024}


def main() -> None:
    from bench.synth import real_records, write_variants
    from errkb.resources import data_dir

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,50000")
    args = parser.parse_args()
    records = real_records(data_dir())
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in sorted(int(s) for s in args.sizes.split(",")):
            src = write_variants(Path(tmp) / f"records-{n}.jsonl", records, n)
            base = measure(BASELINE, str(src), str(min(n, 2000)), "validate")
            prebuilt = measure(BASELINE, str(src), str(n), "prebuilt")
            ours = measure(ERRKB, str(src), str(Path(tmp) / f"store-{n}.duckdb"))
            assert ours["accepted"] == n and ours["rejected"] == 0, ours
            results.append({"records": n, "file_mb": src.stat().st_size / 2**20, "errkb": ours,
                            "baseline_validate": base, "baseline_prebuilt": prebuilt})
    rate = lambda m: m["accepted"] / m["seconds"]  # noqa: E731
    print(f"{'records':>8} | {'errkb rec/s':>11} {'s':>6} {'peak MB':>7} | {'validate() rec/s':>16} | {'prebuilt rec/s':>14} {'peak MB':>7} | errkb vs validate(), vs prebuilt")
    for r in results:
        e, b, p = r["errkb"], r["baseline_validate"], r["baseline_prebuilt"]
        print(
            f"{r['records']:>8} | {rate(e):>11,.0f} {e['seconds']:>6.1f} {e['peak_rss_mb']:>7.0f} | {rate(b):>16,.0f} | "
            f"{rate(p):>14,.0f} {p['peak_rss_mb']:>7.0f} | {rate(e) / rate(b):.0f}x, {rate(e) / rate(p):.1f}x"
        )
    out = ROOT / "bench" / "results"
    out.mkdir(parents=True, exist_ok=True)
    (out / "ingest.json").write_text(json.dumps({"time": time.time(), "results": results}, indent=2))


if __name__ == "__main__":
    main()
