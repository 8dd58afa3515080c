"""Site build time and peak memory for 1k and 10k records, against a plain baseline.

    python -m bench.bench_site [--sizes 1000,10000]

For each size N, N distinct variants of the bundled real records (own id, slug,
message, pattern: ``bench/synth.py``) are ingested into a temporary store; then, each
in a fresh subprocess so peak memory is its own:

* ``errkb``: ``errkb.site.build.build_site`` into an empty folder (every fix page with
  Pygments highlighting, snippets, tag/repo pages, the index with its inline search
  data and JS pattern translations, sitemap, records.json);
* ``baseline``: the floor of any static build from the same store: read the records
  and write one HTML file per record holding its escaped JSON.

Prints seconds, records/s, peak RSS and output size, the ratio errkb/baseline, and
writes ``bench/results/site.json``. Goal (issue 4): 10k records in under 60 s.
``--workers 1,auto`` measures the fix pages rendered in one process (the CLI's
default) and in a pool of one process per core (``errkb site build --workers N``). CPU seconds (all
processes) are printed next to wall time: on a shared machine the wall time stretches
with the load, the CPU time much less.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

ERRKB = """
import sys, time, resource
from pathlib import Path
from errkb.store.db import Store
from errkb.site.build import build_site
t = time.perf_counter()
with Store.open(sys.argv[1], read_only=True) as store:
    report = build_site(store, Path(sys.argv[2]), workers=int(sys.argv[3]))
me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
print(time.perf_counter() - t, me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime, report.records, report.pages,
      max(me.ru_maxrss, kids.ru_maxrss))
"""

BASELINE = """
import sys, time, resource, json, html
from pathlib import Path
from errkb.store.db import Store
t = time.perf_counter()
out = Path(sys.argv[2])
n = 0
with Store.open(sys.argv[1], read_only=True) as store:
    for rec in store.records():
        page = out / rec["repo"] / (rec["slug"] + ".html")
        page.parent.mkdir(parents=True, exist_ok=True)
        page.write_text("<!doctype html><pre>" + html.escape(json.dumps(rec, indent=1)) + "</pre>")
        n += 1
me = resource.getrusage(resource.RUSAGE_SELF)
print(time.perf_counter() - t, me.ru_utime + me.ru_stime, n, n, me.ru_maxrss)
"""


def measure(code: str, *args: str) -> dict:
    out = subprocess.run([sys.executable, "-c", code, *args], cwd=ROOT, check=True, capture_output=True, text=True).stdout
    seconds, cpu, records, files, peak_kb = out.split()
    return {"seconds": float(seconds), "cpu_seconds": float(cpu), "records": int(records), "files": int(files),
            "peak_rss_mb": int(peak_kb) / 1024}


def folder_mb(path: Path) -> float:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) / 2**20


def main() -> None:
    from bench.synth import real_records, write_variants
    from errkb.resources import data_dir
    from errkb.site.build import default_workers
    from errkb.store.db import Store

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000")
    parser.add_argument("--workers", default="1,auto", help="worker processes for the fix pages, e.g. 1,2,auto")
    args = parser.parse_args()
    records = real_records(data_dir())
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        for n in sorted(int(s) for s in args.sizes.split(",")):
            src = write_variants(tmp / f"records-{n}.jsonl", records, n)
            db = tmp / f"store-{n}.duckdb"
            with Store.open(db) as store:
                report = store.ingest([src])
            assert report.new == n and report.rejected == 0, report.summary()
            base = measure(BASELINE, str(db), str(tmp / f"baseline-{n}"))
            for w in args.workers.split(","):
                workers = default_workers(n) if w == "auto" else int(w)
                site = tmp / f"site-{n}-{w}"
                ours = measure(ERRKB, str(db), str(site), str(workers))
                assert ours["records"] == n, ours
                results.append({
                    "records": n,
                    "workers": workers,
                    "errkb": ours | {"output_mb": folder_mb(site), "index_html_mb": (site / "index.html").stat().st_size / 2**20},
                    "baseline": base | {"output_mb": folder_mb(tmp / f"baseline-{n}")},
                    "ratio_seconds": ours["seconds"] / base["seconds"],
                    "ratio_cpu": ours["cpu_seconds"] / base["cpu_seconds"],
                })
    print(f"{'records':>8} {'workers':>7} | {'errkb s':>8} {'cpu s':>7} {'rec/s':>7} {'peak MB':>8} {'out MB':>7} {'index MB':>8} | "
          f"{'base s':>7} {'cpu s':>6} {'peak MB':>8} | {'ratio':>6} {'cpu ratio':>9} | 10k < 60 s")
    for r in results:
        e, b = r["errkb"], r["baseline"]
        print(f"{r['records']:>8} {r['workers']:>7} | {e['seconds']:>8.2f} {e['cpu_seconds']:>7.2f} {r['records'] / e['seconds']:>7.0f} "
              f"{e['peak_rss_mb']:>8.0f} {e['output_mb']:>7.1f} {e['index_html_mb']:>8.2f} | {b['seconds']:>7.2f} "
              f"{b['cpu_seconds']:>6.2f} {b['peak_rss_mb']:>8.0f} | {r['ratio_seconds']:>6.1f} {r['ratio_cpu']:>9.1f} | "
              f"{'-' if r['records'] != 10000 else ('met' if e['seconds'] < 60 else 'MISSED')}")
    print(f"load average while measuring: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores (wall times stretch with it)")
    out = ROOT / "bench" / "results"
    out.mkdir(parents=True, exist_ok=True)
    (out / "site.json").write_text(json.dumps({"measured_at": time.strftime("%Y-%m-%dT%H:%M:%S"), "results": results}, indent=1))
    print(f"wrote {out / 'site.json'}")


if __name__ == "__main__":
    main()
