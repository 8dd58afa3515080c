"""End-to-end throughput and memory of `errkb enrich`, against the pipe's own cost.

    python -m bench.bench_enrich [--lines 1000000] [--records 10000] [--archive-lines 10000000]

Inputs, all built from the shared bench corpus (``$ERRKB_BENCH_CORPUS``, else
``../shared/bench-corpus``):

* records: the first N real message patterns of ``patterns.jsonl.gz``, each made a full
  record (``bench/full_records.py``: the seed's whole text, a 37-line source excerpt,
  solutions, fix, validation; the pattern, a message rendered from it, its error
  class), ingested into a temporary store with full validation and lint (rejects are
  counted);
* the log: ``lines.txt.gz`` (200k realistic lines, ~10% rendered from the corpus's
  56,804 patterns) repeated to the wanted number of lines;
* the archive: the same lines as a Parquet file (ts, host, message) of M rows.

Measured in one run, each command in a fresh process:

* streaming: ``cat LOG | cat`` (the pipe's own cost) and ``cat LOG | errkb enrich``
  with the default batch, ``--batch 64`` and ``--flush`` (--flush on a subsample),
  errkb pinned to one core with ``taskset``; wall time and errkb's own CPU time (GNU
  time; on a shared machine wall time mostly measures waiting); peak RSS and RSS
  sampled over the run (memory flat?); start-up time (store open + cached index load)
  on empty input; the steady state: the CPU cost of the log's second million lines
  (``cat LOG LOG``), after RE2 programs and matched records are loaded;
* latency to a live consumer (one line written at a time, time until its enriched
  line is read), default mode and ``--flush``;
* where the time goes, in process: the matcher alone (``match_lines``) and the framing
  alone (a matcher that matches nothing);
* a plain Python ``re.search`` loop over every pattern, on a subsample of lines
  (it runs at tens of lines per second), extrapolated to lines/s;
* batch path: DuckDB copying the Parquet archive to Parquet (the I/O cost) and
  ``errkb enrich --input A.parquet --output B.parquet`` with 1 and 2 worker processes;
  peak RSS of the whole process tree, on the full archive and on a 10x smaller one
  (constant memory means the two peaks are close).

Prints a table and writes ``bench/results/enrich.json``.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import shlex
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench import full_records  # noqa: E402

CORPUS = Path(os.environ.get("ERRKB_BENCH_CORPUS", ROOT / ".." / "shared" / "bench-corpus"))
SEED_FILE = ROOT / "data" / "vllm-project" / "vllm" / "000_82135fca3cf8df92.txt"
ERRKB = str(Path(sys.executable).parent / "errkb")
RESULTS = ROOT / "bench" / "results"


# -- inputs ---------------------------------------------------------------------------


def pattern_record(p: dict, template: dict, version: str) -> dict | None:
    """A full record for one corpus pattern (bench/full_records.py: the seed's whole text)."""
    rec = full_records.full_record(p, template)
    return None if rec is None else {"record": rec, "datasetVersion": version}


def build_store(work: Path, n_records: int) -> tuple[Path, dict]:
    from errkb.store.db import Store, StoreError

    db = work / f"store-full-{n_records}.duckdb"
    info_path = work / f"store-full-{n_records}.json"
    if db.exists() and info_path.exists():
        try:
            Store.open(db, read_only=True).close()
            return db, json.loads(info_path.read_text())
        except StoreError:  # written by another errkb (store layout changed): rebuild
            db.unlink()
    wrapper = json.loads(SEED_FILE.read_text())
    template, version = wrapper["record"], wrapper["datasetVersion"]
    src = work / f"records-full-{n_records}.jsonl"
    written = 0
    with gzip.open(CORPUS / "patterns.jsonl.gz", "rt") as f, open(src, "w") as out:
        for line in f:
            if written >= n_records:
                break
            item = pattern_record(json.loads(line), template, version)
            if item is not None:
                out.write(json.dumps(item) + "\n")
                written += 1
    t = time.perf_counter()
    with Store.open(db) as store:
        report = store.ingest([src])
    info = {"written": written, "accepted": report.new, "rejected": report.rejected,
            "ingest_s": round(time.perf_counter() - t, 1)}
    info_path.write_text(json.dumps(info))
    return db, info


def build_log(work: Path, n_lines: int) -> Path:
    path = work / f"log-{n_lines}.txt"
    if path.exists():
        return path
    with gzip.open(CORPUS / "lines.txt.gz", "rb") as f:
        lines = f.read().split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    with open(path, "wb") as out:
        left = n_lines
        while left > 0:
            part = lines[:left]
            out.write(b"\n".join(part) + b"\n")
            left -= len(part)
    return path


def build_archive(work: Path, log: Path, n_rows: int) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = work / f"archive-{n_rows}.parquet"
    if path.exists():
        return path
    lines = log.read_bytes().decode("utf-8", "replace").split("\n")[:-1]
    schema = pa.schema([("ts", pa.timestamp("ms", tz="UTC")), ("host", pa.string()), ("message", pa.string())])
    start_ms = int(time.time() * 1000) - n_rows  # one row per millisecond, ending now
    with pq.ParquetWriter(path, schema, compression="zstd") as writer:
        done = 0
        step = 500_000
        while done < n_rows:
            k = min(step, n_rows - done)
            msgs = [lines[(done + i) % len(lines)] for i in range(k)]
            writer.write_batch(pa.record_batch([
                pa.array([start_ms + done + i for i in range(k)], pa.timestamp("ms", tz="UTC")),
                pa.array([f"host-{(done + i) % 16}" for i in range(k)]),
                pa.array(msgs),
            ], schema=schema))
            done += k
    return path


# -- measuring processes ---------------------------------------------------------------------


def _tree_rss_kb(root: int) -> int:
    """Resident memory of a process and all its descendants (kB), from /proc."""
    parents: dict[int, int] = {}
    rss: dict[int, int] = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                parents[int(d)] = int(f.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{d}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        rss[int(d)] = int(line.split()[1])
                        break
        except (OSError, ValueError, IndexError):
            continue
    tree, frontier = {root}, [root]
    while frontier:
        p = frontier.pop()
        for child, parent in parents.items():
            if parent == p and child not in tree:
                tree.add(child)
                frontier.append(child)
    return sum(rss.get(p, 0) for p in tree)


TIME_FORMAT = "%e %U %S %M"


def timed(cmd: str, time_file: Path) -> str:
    """``cmd`` run under GNU time: its own CPU seconds and peak RSS (children included)."""
    return f"/usr/bin/time -o {shlex.quote(str(time_file))} -f '{TIME_FORMAT}' {cmd}"


def run_measured(cmd: str, sample_pid_of: str | None = None, interval: float = 0.2, time_file: Path | None = None) -> dict:
    """Run a shell command; wall time, and RSS samples of the process whose command
    line starts with ``sample_pid_of`` (with its descendants); with ``time_file``, the
    CPU time and peak RSS GNU time recorded for the timed part of the command."""
    samples: list[tuple[float, int]] = []
    t0 = time.perf_counter()
    proc = subprocess.Popen(["bash", "-c", "set -o pipefail; " + cmd], start_new_session=True)
    done = threading.Event()

    def sampler():
        target = None
        while not done.is_set():
            if target is None and sample_pid_of:
                target = _find_process(proc.pid, sample_pid_of)
            if target is not None:
                kb = _tree_rss_kb(target)
                if kb:
                    samples.append((time.perf_counter() - t0, kb))
            done.wait(interval)

    thread = threading.Thread(target=sampler, daemon=True)
    thread.start()
    rc = proc.wait()
    wall = time.perf_counter() - t0
    done.set()
    thread.join()
    if rc != 0:
        raise SystemExit(f"bench: command failed ({rc}): {cmd}")
    out = {"wall_s": wall}
    if time_file is not None and time_file.exists():
        e, u, s_, m = time_file.read_text().split()[-4:]
        out.update(cpu_s=round(float(u) + float(s_), 2), own_peak_rss_mb=round(int(m) / 1024, 1))
    if samples:
        kbs = [kb for _, kb in samples]
        if len(kbs) > 4 and kbs[-1] < 0.5 * max(kbs):
            kbs = kbs[:-1]  # sampled while the process was exiting
        out["peak_rss_mb"] = round(max(kbs) / 1024, 1)
        # RSS at 25/50/75/100% of the run: flat memory means these stay close.
        out["rss_quartiles_mb"] = [round(kbs[min(len(kbs) - 1, int(q * len(kbs)))] / 1024, 1) for q in (0.25, 0.5, 0.75, 0.999)]
    return out


def _find_process(session_leader: int, prefix: str) -> int | None:
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            if os.getsid(int(d)) != session_leader:
                continue
            with open(f"/proc/{d}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        text = b" ".join(argv).decode("utf-8", "replace")
        if prefix in text and not text.startswith("bash -c"):
            return int(d)
    return None


# -- the measurements --------------------------------------------------------------------------


def latency(db: Path, extra: list[str], n: int = 200) -> dict:
    """Seconds from writing one line into the filter to reading its enriched line."""
    import select

    proc = subprocess.Popen([ERRKB, "enrich", "--db", str(db), "-q", *extra], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    times = []
    try:
        for i in range(n):
            t = time.perf_counter()
            proc.stdin.write(f"2026-08-14 12:00:00 INFO request {i} served\n".encode())
            proc.stdin.flush()
            buf = b""
            while not buf.endswith(b"\n"):
                ready, _, _ = select.select([proc.stdout], [], [], 30)
                if not ready:
                    raise SystemExit("bench: the filter stalled")
                buf += os.read(proc.stdout.fileno(), 65536)
            times.append(time.perf_counter() - t)
            time.sleep(0.002)
    finally:
        proc.stdin.close()
        proc.wait()
    times.sort()
    return {"p50_ms": round(1000 * statistics.median(times), 2), "p99_ms": round(1000 * times[int(0.99 * len(times)) - 1], 2)}


def in_process(db: Path, log: Path, re_sample: int) -> dict:
    from errkb.enrich.lines import LineEnricher, stream
    from errkb.kb import KnowledgeBase
    from errkb.store.db import Store

    with Store.open(db, read_only=True) as store:
        matcher = KnowledgeBase.from_store(store).matcher
        records = store.records()
    lines = log.read_bytes().decode("utf-8", "replace").split("\n")[:-1]
    matcher.match_lines(lines[:20000])  # warm: RE2 programs compile on first use
    t = time.process_time()
    matched = 0
    for i in range(0, len(lines), 16384):
        matched += sum(1 for r in matcher.match_lines(lines[i:i + 16384]) if r)
    match_s = time.process_time() - t

    class NoMatch:
        def match_lines(self, batch):
            return [()] * len(batch)

    t = time.process_time()
    with open(log, "rb", buffering=0) as f, open(os.devnull, "w") as out:
        stream([f], out, LineEnricher(NoMatch()), handle_signals=False)
    framing_s = time.process_time() - t

    compiled = [re.compile(r["messagePattern"]) for r in records]
    sample = lines[:re_sample]
    t = time.perf_counter()
    re_matched = sum(1 for line in sample if any(p.search(line) for p in compiled))
    re_s = time.perf_counter() - t
    return {
        "lines": len(lines),
        "matched_lines": matched,
        "matched_share": round(matched / len(lines), 4),
        "matcher_only_lines_per_s_cpu": round(len(lines) / match_s),
        "framing_only_lines_per_s_cpu": round(len(lines) / framing_s),
        "re_loop": {"sample_lines": len(sample), "patterns": len(compiled), "seconds": round(re_s, 1),
                    "matched_in_sample": re_matched, "lines_per_s_extrapolated": round(len(sample) / re_s, 1)},
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lines", type=int, default=1_000_000)
    ap.add_argument("--records", type=int, default=10_000)
    ap.add_argument("--archive-lines", type=int, default=10_000_000)
    ap.add_argument("--re-sample", type=int, default=300, help="lines for the plain re.search loop")
    ap.add_argument("--flush-lines", type=int, default=100_000, help="lines for the --flush run")
    ap.add_argument("--skip-archive", action="store_true")
    ap.add_argument("--skip-stream", action="store_true", help="only the archive path")
    ap.add_argument("--workdir", type=Path, default=None, help="keep inputs here between runs")
    ap.add_argument("--sites-only", action="store_true",
                    help="only the known-site tier's cost: the pipe, enrich with the tier and with --no-sites")
    args = ap.parse_args()
    if not (CORPUS / "lines.txt.gz").exists():
        raise SystemExit(f"bench: no bench corpus at {CORPUS} (set ERRKB_BENCH_CORPUS)")
    work = args.workdir or Path(tempfile.mkdtemp(prefix="errkb-bench-enrich-"))
    work.mkdir(parents=True, exist_ok=True)
    env_db = os.environ.copy()
    results: dict = {"lines": args.lines, "records_requested": args.records, "cpus": os.cpu_count(),
                     "loadavg_at_start": os.getloadavg()}

    print(f"building a store of {args.records} records and a {args.lines}-line log in {work} ...", flush=True)
    db, info = build_store(work, args.records)
    results["store"] = info
    log = build_log(work, args.lines)
    results["log_mb"] = round(log.stat().st_size / 1e6, 1)
    q = shlex.quote
    tf = work / "time.txt"
    errkb = f"taskset -c 0 {q(ERRKB)} enrich --db {q(str(db))} -q"
    timed_errkb = timed(errkb, tf)

    # The index is compiled once per dataset and cached next to the store.
    t = time.perf_counter()
    subprocess.run(f"{errkb} < /dev/null > /dev/null", shell=True, check=True, env=env_db)
    results["first_start_s"] = round(time.perf_counter() - t, 2)
    # The known-site tier's cache and batch scan are built on the first line it sees (once
    # after install): built here, timed on their own, so the runs below measure matching
    # (before this, the first "with the tier" run carried that one-time build).
    t = time.perf_counter()
    subprocess.run(f"echo 'warm-up line' | {errkb} > /dev/null", shell=True, check=True, env=env_db)
    results["sites_first_line_s"] = round(time.perf_counter() - t, 2)
    starts = []
    for _ in range(3):
        t = time.perf_counter()
        subprocess.run(f"{errkb} < /dev/null > /dev/null", shell=True, check=True, env=env_db)
        starts.append(time.perf_counter() - t)
    results["warm_start_s"] = round(min(starts), 2)

    if args.skip_stream:
        run_archive(args, work, db, log, results)
        report(results)
        RESULTS.mkdir(parents=True, exist_ok=True)
        (RESULTS / "enrich.json").write_text(json.dumps(results, indent=2))
        return
    print("streaming runs ...", flush=True)
    n = args.lines
    flush_log = work / f"log-{args.flush_lines}.txt"
    if not flush_log.exists():
        subprocess.run(f"head -n {args.flush_lines} {q(str(log))} > {q(str(flush_log))}", shell=True, check=True)
    runs = {
        "cat | cat": (f"cat {q(str(log))} | cat > /dev/null", None, n),
        "cat | errkb enrich": (f"cat {q(str(log))} | {timed_errkb} > /dev/null", "enrich --db", n),
        # the known-site tier off: the layer's cost is the ratio of these two rows
        "cat | errkb enrich --no-sites": (f"cat {q(str(log))} | {timed_errkb} --no-sites > /dev/null", "enrich --db", n),
        "cat | errkb enrich --batch 64": (f"cat {q(str(log))} | {timed_errkb} --batch 64 > /dev/null", "enrich --db", n),
        "cat | errkb enrich --flush": (f"cat {q(str(flush_log))} | {timed_errkb} --flush > /dev/null", "enrich --db", args.flush_lines),
    }
    if args.sites_only:
        runs = {k: v for k, v in runs.items() if k in ("cat | cat", "cat | errkb enrich", "cat | errkb enrich --no-sites")}
    stream_rows = {}
    tf.unlink(missing_ok=True)
    empty = run_measured(f"{timed_errkb} < /dev/null > /dev/null", None, time_file=tf)
    results["warm_start_cpu_s"] = empty["cpu_s"]
    for name, (cmd, sample, lines) in runs.items():
        tf.unlink(missing_ok=True)
        m = run_measured(cmd, sample, time_file=tf if sample else None)
        m["lines_per_s"] = round(lines / m["wall_s"])
        m["lines_per_s_excl_start"] = round(lines / max(m["wall_s"] - results["warm_start_s"], 1e-9)) if sample else None
        if "cpu_s" in m:
            # errkb's own CPU seconds, start-up excluded: lines/s on one core, free of the
            # waiting a shared machine adds to wall time.
            m["lines_per_cpu_s"] = round(lines / max(m["cpu_s"] - results["warm_start_cpu_s"], 1e-9))
        stream_rows[name] = m
        print(f"  {name:34s} {m['lines_per_s']:>10,} lines/s  {m.get('peak_rss_mb', '-')} MB", flush=True)
    if args.sites_only:
        on, off = stream_rows["cat | errkb enrich"], stream_rows["cat | errkb enrich --no-sites"]
        results["stream"] = stream_rows
        results["sites_layer"] = {"wall_ratio_on_off": round(on["wall_s"] / off["wall_s"], 2),
                                  "cpu_ratio_on_off": round(on["cpu_s"] / off["cpu_s"], 2)}
        print(f"  known-site tier: {results['sites_layer']}; its first line (cache built once): "
              f"{results['sites_first_line_s']} s", flush=True)
        RESULTS.mkdir(parents=True, exist_ok=True)
        (RESULTS / "enrich-sites.json").write_text(json.dumps(results, indent=2))
        return
    # Steady state: the CPU cost of a second pass over the log, once every pattern's RE2
    # program is compiled and every matched record fetched (both happen once per process).
    tf.unlink(missing_ok=True)
    twice = run_measured(f"cat {q(str(log))} {q(str(log))} | {timed_errkb} > /dev/null", None, time_file=tf)
    once_cpu = stream_rows["cat | errkb enrich"]["cpu_s"]
    results["steady_state"] = {"cpu_s_2x": twice["cpu_s"], "cpu_s_1x": once_cpu,
                               "lines_per_cpu_s": round(n / max(twice["cpu_s"] - once_cpu, 1e-9))}
    results["stream"] = stream_rows
    results["latency"] = {"default": latency(db, []), "--flush": latency(db, ["--flush"])}

    print("in-process breakdown and the re.search loop ...", flush=True)
    results["in_process"] = in_process(db, log, args.re_sample)

    if not args.skip_archive:
        run_archive(args, work, db, log, results)

    report(results)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "enrich.json").write_text(json.dumps(results, indent=2))
    print(f"wrote {RESULTS / 'enrich.json'}")


def run_archive(args, work: Path, db: Path, log: Path, results: dict) -> None:
    q = shlex.quote
    tf = work / "time.txt"
    print(f"archive of {args.archive_lines} rows ...", flush=True)
    archive = build_archive(work, log, args.archive_lines)
    small = build_archive(work, log, max(args.archive_lines // 10, 1))
    results["archive_mb"] = round(archive.stat().st_size / 1e6, 1)
    copy_script = work / "duckdb_copy.py"
    copy_script.write_text(
        "import sys, duckdb\n"
        "duckdb.execute(\"COPY (SELECT * FROM read_parquet(?)) TO '\" + sys.argv[2].replace(\"'\", \"''\") + "
        "\"' (FORMAT parquet, COMPRESSION zstd)\", [sys.argv[1]])\n"
    )
    copy_cmd = f"{q(sys.executable)} {q(str(copy_script))} "
    arch = {}
    for name, cmd, rows in (
        ("duckdb copy (I/O only)", copy_cmd + f"{q(str(archive))} {q(str(work / 'copy.parquet'))}", args.archive_lines),
        ("errkb enrich --workers 1", f"{timed(q(ERRKB), tf)} enrich --db {q(str(db))} -q --workers 1 --input {q(str(archive))} --output {q(str(work / 'out1.parquet'))}", args.archive_lines),
        ("errkb enrich --workers 2", f"{timed(q(ERRKB), tf)} enrich --db {q(str(db))} -q --workers 2 --input {q(str(archive))} --output {q(str(work / 'out2.parquet'))}", args.archive_lines),
        # the known-site tier is on by default: this row is its baseline, the same run without it
        ("errkb enrich --workers 2 --no-sites", f"{timed(q(ERRKB), tf)} enrich --db {q(str(db))} -q --workers 2 --no-sites --input {q(str(archive))} --output {q(str(work / 'out2n.parquet'))}", args.archive_lines),
        ("errkb enrich --workers 2 (1/10 size)", f"{timed(q(ERRKB), tf)} enrich --db {q(str(db))} -q --workers 2 --input {q(str(small))} --output {q(str(work / 'out-small.parquet'))}", max(args.archive_lines // 10, 1)),
    ):
        tf.unlink(missing_ok=True)
        m = run_measured(cmd, "duckdb_copy.py" if name.startswith("duckdb") else "enrich --db", time_file=tf)
        m["rows_per_s"] = round(rows / m["wall_s"])
        if "cpu_s" in m:
            m["rows_per_cpu_s"] = round(rows / max(m["cpu_s"], 1e-9))
        arch[name] = m
        print(f"  {name:38s} {m['rows_per_s']:>10,} rows/s  peak {m.get('peak_rss_mb', '-')} MB", flush=True)
    results["archive"] = arch


def report(r: dict) -> None:
    print()
    print(f"records: {r['store']['accepted']} accepted of {r['store']['written']} ({r['store']['rejected']} rejected by lint); "
          f"log: {r['lines']:,} lines, {r['log_mb']} MB; start-up: first {r['first_start_s']} s (index compiled), "
          f"warm {r['warm_start_s']} s; the known-site tier's first line {r.get('sites_first_line_s', '-')} s "
          "(its cache built once)")
    if "stream" not in r:
        _report_archive(r)
        return
    base = r["stream"]["cat | cat"]["lines_per_s"]
    print(f"\n{'streaming (errkb on one core)':34s} {'lines/s':>10s} {'excl.start':>10s} {'per CPU s':>10s} {'vs cat':>7s} {'peak MB':>8s}  RSS at 25/50/75/100%")
    for name, m in r["stream"].items():
        excl = f"{m['lines_per_s_excl_start']:,}" if m.get("lines_per_s_excl_start") else "-"
        cpu = f"{m['lines_per_cpu_s']:,}" if m.get("lines_per_cpu_s") else "-"
        print(f"{name:34s} {m['lines_per_s']:>10,} {excl:>10s} {cpu:>10s} {m['lines_per_s'] / base:>7.3f} "
              f"{m.get('own_peak_rss_mb', m.get('peak_rss_mb', '-'))!s:>8s}  {m.get('rss_quartiles_mb', '')}")
    st = r["steady_state"]
    print(f"steady state (CPU of a 2nd pass over the log, warm): {st['lines_per_cpu_s']:,} lines/s per CPU second")
    ip = r["in_process"]
    re_loop = ip["re_loop"]
    print(f"\nmatched lines: {ip['matched_lines']:,} of {ip['lines']:,} ({100 * ip['matched_share']:.1f}%)")
    print(f"matcher alone (match_lines, CPU time):   {ip['matcher_only_lines_per_s_cpu']:>10,} lines/s")
    print(f"framing alone (no matches, CPU time):    {ip['framing_only_lines_per_s_cpu']:>10,} lines/s")
    print(f"plain re.search loop, {re_loop['patterns']} patterns, {re_loop['sample_lines']} lines (extrapolated): "
          f"{re_loop['lines_per_s_extrapolated']:,} lines/s")
    lat = r["latency"]
    print(f"latency to a live consumer: default p50 {lat['default']['p50_ms']} ms / p99 {lat['default']['p99_ms']} ms; "
          f"--flush p50 {lat['--flush']['p50_ms']} ms / p99 {lat['--flush']['p99_ms']} ms")
    _report_archive(r)
    print(f"\nload average at start: {r['loadavg_at_start']}")


def _report_archive(r: dict) -> None:
    if "archive" in r:
        print(f"\n{'batch path (Parquet ' + str(r['archive_mb']) + ' MB)':40s} {'rows/s':>10s} {'CPU s':>7s} {'tree peak MB':>13s}")
        for name, m in r["archive"].items():
            print(f"{name:40s} {m['rows_per_s']:>10,} {m.get('cpu_s', '-')!s:>7s} {m.get('peak_rss_mb', '-')!s:>13s}")


if __name__ == "__main__":
    main()
