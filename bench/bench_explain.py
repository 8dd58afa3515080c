"""Wall time of one `errkb explain "<line>"` call, a new process each time.

    python -m bench.bench_explain [--runs 15] [--sizes 10,10000]

For each size N a store is built from N schema-valid, lint-clean full records: the
seed record plus N-1 records made from the real message patterns of
``shared/bench-corpus/patterns.jsonl.gz`` with the seed's whole text (37-line source
excerpt, solutions, fix, validation: ``bench/full_records.py``). Then, in the same run
and interleaved so machine noise hits all alike:

* ``python -c pass``: the interpreter's own start (issue 18's goal: explain <= 8x this);
* ``python -c "import errkb"``: the floor every errkb command pays (interpreter + package);
* ``errkb explain "<line>"``: the seed's message behind a vLLM log prefix (a match);
* ``errkb explain --json "<line>"``;
* ``errkb explain "<traceback>"``: a pasted vLLM traceback ending in the seed's error;
* ``errkb explain "<drifted line>"``: no pattern matches, near matches are computed;
* ``errkb explain --json --file lines.txt``: the corpus's 200,000-line log as a whole
  log (lines/s), against ``python -c`` reading the same file line by line.

``--against DIR`` also times the explain calls of another checkout of errkb (e.g. ``git
worktree add /tmp/before main``), interleaved with this one's on the same stores, each
tree imported through ``PYTHONPATH``: a before/after comparison in one run.

Python runs as an installed errkb does, with bytecode written once (to a private
``PYTHONPYCACHEPREFIX``; ``--no-bytecode`` keeps a shell's PYTHONDONTWRITEBYTECODE=1,
under which every call compiles errkb's modules from source). Every explain call runs
after one warm-up call that builds the cached bundle (the compiled matcher, records and
near-match index next to the store), which is what a user's second and later calls pay;
the warm-up (first call after an ingest) is timed too. Prints a table (median and p90
seconds, ratios to the import floor and to ``python -c pass``) and writes
``bench/results/explain.json``.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench import full_records

ROOT = Path(__file__).resolve().parents[1]
CORPUS = Path(os.environ.get("ERRKB_BENCH_CORPUS") or ROOT / ".." / "shared" / "bench-corpus")
SEED_FILE = ROOT / "data" / "vllm-project" / "vllm" / "000_82135fca3cf8df92.txt"


def corpus_records(seed: dict, n: int) -> list[dict]:
    """n full records (bench/full_records.py: the seed's whole text, a 37-line excerpt)."""
    return list(full_records.corpus_records(CORPUS, n, seed))


TRACEBACK = """Traceback (most recent call last):
  File "/usr/lib/python3.12/site-packages/vllm/v1/engine/core.py", line 691, in run_engine_core
    engine_core = EngineCoreProc(*args, **kwargs)
  File "/usr/lib/python3.12/site-packages/vllm/v1/engine/core.py", line 492, in __init__
    super().__init__(vllm_config, executor_class, log_stats, executor_fail_callback)
  File "/usr/lib/python3.12/site-packages/vllm/distributed/device_communicators/flashinfer_all_reduce.py", line 221, in get_flashinfer_allreduce_quant_workspace
    raise ValueError(
ValueError: {message}
"""


def build_store(folder: Path, records: list[dict]) -> tuple[Path, int]:
    from errkb.store.db import Store

    data = folder / "records.jsonl"
    data.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    db = folder / "store.duckdb"
    with Store.open(db) as store:
        store.ingest([data])
        return db, store.count()


def timed(cmd: list[str], env: dict, expect: int | None = None) -> float:
    t = time.perf_counter()
    proc = subprocess.run(cmd, env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    took = time.perf_counter() - t
    if proc.returncode != expect and not (expect is None and proc.returncode in (0, 1)):
        raise SystemExit(f"{' '.join(cmd[:3])}...: exit {proc.returncode}, expected {expect}: {proc.stderr.decode()[-500:]}")
    return took


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--sizes", default="10,10000")
    ap.add_argument("--no-bytecode", action="store_true",
                    help="keep the shell's PYTHONDONTWRITEBYTECODE (every call compiles errkb from source)")
    ap.add_argument("--against", type=Path, default=None,
                    help="another checkout of errkb whose explain calls are timed too, interleaved with this one's")
    args = ap.parse_args(argv)
    if args.against is not None and not (args.against / "errkb" / "console.py").is_file():
        ap.error(f"--against {args.against}: not a checkout of errkb (no errkb/console.py there)")
    sizes = [int(s) for s in args.sizes.split(",")]

    seed = json.loads(SEED_FILE.read_text())["record"]
    line = f"(EngineCore_DP0 pid=1234) ERROR 08-14 21:17:39 [core.py:700] ValueError: {seed['errorMessage']}"
    drifted = line.replace("trtllm", "nccl")
    traceback = TRACEBACK.format(message=seed["errorMessage"])
    errkb = str(Path(sys.executable).with_name("errkb"))
    work = Path(tempfile.mkdtemp(prefix="bench-explain-"))
    env = {**os.environ, "ERRKB_CACHE_DIR": str(work / "cache"), "NO_COLOR": "1"}
    env.pop("ERRKB_DB", None)
    if not args.no_bytecode:
        # As installed (pip writes every module's bytecode at install time): a development
        # shell's PYTHONDONTWRITEBYTECODE=1 would have every call compile errkb from source.
        # The bytecode goes to a private folder; the warm-up calls write it.
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(work / "pycache")
    try:
        stores = {}
        for n in sizes:
            folder = work / f"n{n}"
            folder.mkdir()
            t = time.perf_counter()
            db, count = build_store(folder, [seed] + corpus_records(seed, n - 1))
            ingest_s = time.perf_counter() - t
            t = time.perf_counter()
            timed([errkb, "explain", "--db", str(db), line], env, expect=0)
            first_s = time.perf_counter() - t
            stores[n] = {"db": db, "records": count, "ingest_s": ingest_s, "first_call_s": first_s}
            if args.against is not None:
                # its own copy: a tree's cache key holds its data/variants files' times, so two
                # trees sharing one store would rebuild each other's cached view on every call
                (folder / "against").mkdir()
                stores[n]["against_db"] = Path(shutil.copy(db, folder / "against" / db.name))
            print(f"store of {count} records: ingest {ingest_s:.1f} s, first explain (builds the bundle) {first_s:.2f} s",
                  file=sys.stderr)

        log = work / "lines.txt"
        with gzip.open(CORPUS / "lines.txt.gz", "rb") as src, open(log, "wb") as dst:
            shutil.copyfileobj(src, dst)
        n_lines = sum(1 for _ in open(log, "rb"))
        # Each tree's errkb through PYTHONPATH when comparing (else the installed one, as before).
        trees = {"": ("db", env)} if args.against is None else {
            "": ("db", {**env, "PYTHONPATH": str(ROOT)}),
            " [against]": ("against_db", {**env, "PYTHONPATH": str(args.against.resolve())}),
        }
        cases: dict[str, tuple[list[str], int, dict]] = {
            "python -c pass": ([sys.executable, "-c", "pass"], 0, env),
            "python -c 'import errkb'": ([sys.executable, "-c", "import errkb"], 0, env),
        }
        for n in sizes:
            for tag, (db_key, tree_env) in trees.items():
                db = str(stores[n][db_key])
                cases[f"explain, {stores[n]['records']} records{tag}"] = ([errkb, "explain", "--db", db, line], 0, tree_env)
                cases[f"explain --json, {stores[n]['records']} records{tag}"] = (
                    [errkb, "explain", "--json", "--db", db, line], 0, tree_env)
                cases[f"explain <pasted traceback>, {stores[n]['records']} records{tag}"] = (
                    [errkb, "explain", "--db", db, traceback], 0, tree_env)
                cases[f"explain no match (near), {stores[n]['records']} records{tag}"] = (
                    [errkb, "explain", "--db", db, drifted], 1, tree_env)
        for cmd, expect, case_env in cases.values():  # warm-up: bytecode written, caches fresh
            timed(cmd, case_env, expect)
        times: dict[str, list[float]] = {k: [] for k in cases}
        for _ in range(args.runs):
            for name, (cmd, expect, case_env) in cases.items():
                times[name].append(timed(cmd, case_env, expect))

        # A whole log: fewer runs, it takes seconds.
        log_cases = {"python reads the log line by line": ([sys.executable, "-c", "import sys\nfor _ in open(sys.argv[1], 'rb'): pass", str(log)], 0)}
        for n in sizes:
            log_cases[f"explain --file <log>, {stores[n]['records']} records"] = (
                [errkb, "explain", "--json", "--db", str(stores[n]["db"]), "--file", str(log)], None)
        log_times = {k: [timed(cmd, trees[""][1], expect) for _ in range(max(1, args.runs // 5))]
                     for k, (cmd, expect) in log_cases.items()}

        floor = statistics.median(times["python -c 'import errkb'"])
        python = statistics.median(times["python -c pass"])
        rows = []
        for name, samples in times.items():
            s = sorted(samples)
            med = statistics.median(s)
            p90 = s[min(len(s) - 1, int(round(0.9 * (len(s) - 1))))]
            rows.append({"case": name, "median_s": med, "p90_s": p90, "min_s": s[0], "ratio_to_import": med / floor,
                         "ratio_to_python": med / python, "runs": len(s)})
        width = max(len(r["case"]) for r in rows)
        print(f"{'case':<{width}}  {'median':>8}  {'p90':>8}  {'min':>8}  {'x import':>8}  {'x python':>8}")
        for r in rows:
            print(f"{r['case']:<{width}}  {r['median_s'] * 1000:6.0f}ms  {r['p90_s'] * 1000:6.0f}ms  "
                  f"{r['min_s'] * 1000:6.0f}ms  {r['ratio_to_import']:8.2f}  {r['ratio_to_python']:8.2f}")
        for n in sizes:
            st = stores[n]
            print(f"first call after ingest ({st['records']} records, builds the bundle): {st['first_call_s']:.2f} s")
        log_rows = []
        base = statistics.median(log_times["python reads the log line by line"])
        print(f"\nwhole log: {n_lines} lines ({log.stat().st_size / 1e6:.0f} MB), one process each")
        for name, samples in log_times.items():
            med = statistics.median(samples)
            log_rows.append({"case": name, "median_s": med, "lines_per_s": n_lines / med, "ratio_to_read": med / base, "runs": len(samples)})
            print(f"{name:<{width}}  {med:6.2f} s  {n_lines / med:10,.0f} lines/s  {med / base:6.1f}x reading")
        out = ROOT / "bench" / "results" / "explain.json"
        out.parent.mkdir(parents=True, exist_ok=True)
        result = {
            "command": "python -m bench.bench_explain " + " ".join(argv if argv is not None else sys.argv[1:]),
            "line": line,
            "traceback": traceback,
            "rows": rows,
            "log": {"lines": n_lines, "rows": log_rows},
            "stores": {str(n): {k: v for k, v in st.items() if k not in ("db", "against_db")} for n, st in stores.items()},
            "python": sys.version.split()[0],
            "bytecode": not args.no_bytecode,
            "against": str(args.against) if args.against is not None else None,
            "cpus": os.cpu_count(),
        }
        out.write_text(json.dumps(result, indent=1), encoding="utf-8")
        print(f"wrote {out.relative_to(ROOT)}", file=sys.stderr)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
