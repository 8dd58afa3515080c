"""Enrichment on Spark (local[2]) against single-process `errkb enrich`, same data, same run.

    python -m bench.bench_spark [--rows 1000000,10000000] [--patterns 10000] [--master local[2]]

Data: the first ``--patterns`` message patterns of the bench corpus, each wrapped as a
record (id, slug, repo, class, pattern, one solution) and compiled into one index
file; the corpus's 200,000 real-shaped log lines repeated to each row count and written
as Parquet (``n``, ``message``). Then, each in a fresh subprocess:

* ``errkb enrich (1 process)``: the archive path ``errkb enrich --input x.parquet
  --output y.parquet`` runs (:func:`errkb.enrich.archive.enrich_archive`, ``workers=1``), with
  the same index loaded from the file: the baseline every ratio is against;
* ``errkb enrich (2 workers)``: the same with two matcher processes (both cores);
* ``spark local[2]``: :func:`errkb.enrich.spark.enrich` over ``spark.read.parquet``, written
  back with ``.write.parquet``. Session start-up is timed apart from the job.

For Spark the time split comes from the executors' own counters: index loads (count
and seconds, summed over Python workers) and time inside the enrichment function
(matching plus Arrow conversion, summed over workers); the rest of the wall time is
Spark's (JVM scan, Arrow transfer to Python workers, Parquet write). The pure matcher
rate (``match_lines`` on the lines in memory, one core) is the floor below everything.

Prints a table and writes ``bench/results/spark.json``.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CORPUS = Path(os.environ.get("ERRKB_BENCH_CORPUS", ROOT / ".." / "shared" / "bench-corpus"))

ARCHIVE = """
import json, sys, time
t0 = time.perf_counter()
from errkb.match.matcher import Matcher
from errkb.enrich.archive import enrich_archive
t1 = time.perf_counter()
m = Matcher.load(sys.argv[1])
t2 = time.perf_counter()
s = enrich_archive([sys.argv[2]], sys.argv[3], m, workers=int(sys.argv[4]))
t3 = time.perf_counter()
print(json.dumps({"seconds": t3 - t0, "import_s": t1 - t0, "load_s": t2 - t1, "job_s": t3 - t2,
                  "rows": s.rows, "matched": s.matched}))
"""

SPARK = """
import json, os, sys, time
t0 = time.perf_counter()
os.environ["PYSPARK_PYTHON"] = sys.executable
from pyspark.sql import SparkSession
from errkb.enrich.spark import enrich_with_stats, index_file
spark = (SparkSession.builder.master(sys.argv[4]).appName("errkb-bench")
         .config("spark.ui.enabled", "false").config("spark.driver.memory", "4g")
         .config("spark.sql.execution.arrow.maxRecordsPerBatch", sys.argv[5])
         .config("spark.sql.files.maxPartitionBytes", sys.argv[6]).getOrCreate())
spark.sparkContext.setLogLevel("ERROR")
t1 = time.perf_counter()
runs = []
for attempt in ("cold", "warm"):
    started = time.perf_counter()
    index = index_file(sys.argv[1])
    df = spark.read.parquet(sys.argv[2])
    out, stats = enrich_with_stats(df, index=index)
    out.write.mode("overwrite").parquet(sys.argv[3])
    runs.append({"run": attempt, "seconds": time.perf_counter() - started, "executors": stats.as_dict()})
matched = spark.read.parquet(sys.argv[3]).selectExpr("count(errkb)").collect()[0][0]
print(json.dumps({"seconds": runs[0]["seconds"], "warm_seconds": runs[1]["seconds"], "startup_s": t1 - t0,
                  "rows": runs[0]["executors"]["rows"], "matched": matched, "partitions": df.rdd.getNumPartitions(),
                  "executors": runs[0]["executors"], "warm_executors": runs[1]["executors"]}))
spark.stop()
"""


def corpus_records(n: int) -> list[dict]:
    records = []
    with gzip.open(CORPUS / "patterns.jsonl.gz", "rt", encoding="utf-8") as f:
        for line in f:
            if len(records) >= n:
                break
            p = json.loads(line)
            file_path, _, _ = p["source"].rpartition(":")
            records.append({
                "id": f"{p['id']:016x}", "slug": f"corpus-{p['id']}", "repo": "bench/corpus",
                "errorClass": p["error_class"], "severity": "error", "messagePattern": p["pattern"],
                "filePath": file_path, "solutions": [f"fix for corpus pattern {p['id']}"],
            })
    return records


def corpus_lines() -> list[str]:
    with gzip.open(CORPUS / "lines.txt.gz", "rt", encoding="utf-8", errors="replace") as f:
        return f.read().splitlines()


def write_input(lines: list[str], rows: int, path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    with pq.ParquetWriter(path, pa.schema([("n", pa.int64()), ("message", pa.string())]), compression="zstd") as w:
        done = 0
        while done < rows:
            take = min(len(lines), rows - done)
            w.write_table(pa.table({"n": pa.array(range(done, done + take), pa.int64()), "message": lines[:take]}),
                          row_group_size=1 << 16)
            done += take


def run(code: str, *args: str) -> dict:
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", code, *args], cwd=ROOT, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"benchmark step failed:\n{proc.stderr[-4000:]}")
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    result["process_s"] = time.perf_counter() - started
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", default="1000000,10000000", help="comma-separated row counts")
    ap.add_argument("--patterns", type=int, default=10000)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--arrow-batch", default="10000", help="spark.sql.execution.arrow.maxRecordsPerBatch")
    ap.add_argument("--partition-bytes", default="16m",
                    help="spark.sql.files.maxPartitionBytes: smaller means more tasks, better balanced over cores")
    ap.add_argument("--skip-two-workers", action="store_true", help="skip the 2-worker archive run")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "spark.json")
    args = ap.parse_args(argv)
    sizes = [int(x) for x in args.rows.split(",")]
    work = Path(tempfile.mkdtemp(prefix="errkb-bench-spark-"))
    try:
        return _bench(args, sizes, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _bench(args, sizes: list[int], work: Path) -> int:
    from errkb.enrich.spark import index_file
    from errkb.match.matcher import Matcher

    records = corpus_records(args.patterns)
    lines = corpus_lines()
    t = time.perf_counter()
    matcher = Matcher.from_records(records)
    build_s = time.perf_counter() - t
    raw_index = work / "index.idx"
    matcher.save(raw_index, include_records=True)
    index = index_file(raw_index)
    t = time.perf_counter()
    Matcher.load(index.path)
    load_s = time.perf_counter() - t

    t = time.perf_counter()
    matched_lines = 0
    for i in range(0, len(lines), 10000):
        matched_lines += sum(1 for r in matcher.match_lines(lines[i:i + 10000]) if r)
    floor_rate = len(lines) / (time.perf_counter() - t)

    results = {
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()},
        "patterns": len(records), "index": {"build_s": build_s, "load_s": load_s, "bytes": index.path.stat().st_size,
                                            "prefilter": matcher.prefilter, "confirm": matcher.confirm},
        "matcher_lines_per_s_one_core": floor_rate, "corpus_match_share": matched_lines / len(lines),
        "master": args.master, "arrow_batch": int(args.arrow_batch), "partition_bytes": args.partition_bytes,
        "load_average_at_start": os.getloadavg(), "sizes": [],
    }
    print(f"{len(records):,} patterns; index built in {build_s:.2f} s, {index.path.stat().st_size / 1e6:.1f} MB, "
          f"loaded in {load_s:.3f} s; match_lines alone: {floor_rate:,.0f} lines/s on one core "
          f"({100 * matched_lines / len(lines):.1f}% of lines match)")

    for rows in sizes:
        data = work / f"in-{rows}.parquet"
        write_input(lines, rows, data)
        entry = {"rows": rows, "input_bytes": data.stat().st_size}
        entry["archive_1"] = run(ARCHIVE, str(index.path), str(data), str(work / f"a1-{rows}.parquet"), "1")
        if not args.skip_two_workers:
            entry["archive_2"] = run(ARCHIVE, str(index.path), str(data), str(work / f"a2-{rows}.parquet"), "2")
        entry["spark"] = run(SPARK, str(index.path), str(data), str(work / f"s-{rows}"), args.master, args.arrow_batch,
                             args.partition_bytes)
        base = entry["archive_1"]
        for key in ("archive_2", "spark"):
            if key in entry and entry[key]["matched"] != base["matched"]:
                raise SystemExit(f"{rows} rows: {key} matched {entry[key]['matched']}, errkb enrich {base['matched']}")
        results["sizes"].append(entry)
        for f in work.glob(f"*-{rows}*"):
            shutil.rmtree(f) if f.is_dir() else f.unlink()
        print(f"{rows:,} rows: errkb enrich 1 process {base['job_s']:.1f} s, spark cold {entry['spark']['seconds']:.1f} s, "
              f"warm {entry['spark']['warm_seconds']:.1f} s", flush=True)

    results["load_average_at_end"] = os.getloadavg()
    header = f"{'rows':>11} | {'method':<24} | {'wall s':>7} | {'rows/s':>10} | {'vs 1 proc':>9} | split"
    print(header)
    print("-" * len(header))
    for e in results["sizes"]:
        base_rate = e["rows"] / e["archive_1"]["job_s"]
        for key, label in (("archive_1", "errkb enrich (1 process)"), ("archive_2", "errkb enrich (2 workers)"),
                           ("spark", f"spark {args.master} cold"), ("spark_warm", f"spark {args.master} warm")):
            if key == "spark_warm":
                if "spark" not in e:
                    continue
                r, wall, x = e["spark"], e["spark"]["warm_seconds"], e["spark"]["warm_executors"]
            elif key not in e:
                continue
            else:
                r = e[key]
                wall = r["job_s"] if key.startswith("archive") else r["seconds"]
                x = r.get("executors")
            rate = e["rows"] / wall
            r["rows_per_s" if key != "spark_warm" else "warm_rows_per_s"] = rate
            r["ratio_vs_one_process" if key != "spark_warm" else "warm_ratio_vs_one_process"] = rate / base_rate
            if x is not None:
                split = (f"index loads {x['index_loads']}x {x['load_seconds']:.3f} s; "
                         f"in enrich fn {x['match_seconds']:.1f} s (sum of {len(x['batches_by_worker'])} workers); "
                         f"{r['partitions']} partitions; session start-up {r['startup_s']:.1f} s not counted")
            else:
                split = f"index load {r['load_s']:.3f} s (not counted); job {r['job_s']:.1f} s"
            print(f"{e['rows']:>11,} | {label:<24} | {wall:>7.1f} | {rate:>10,.0f} | {rate / base_rate:>8.2f}x | {split}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=1))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
