"""Mining throughput over large real packages, against a parse-only baseline.

    python -m bench.bench_mine [--packages numpy,sympy,botocore] [--repeat 2] [PATH ...]

For each package (found in this interpreter or the base one) or PATH, one core:

* ``baseline``: read every .py file and ``ast.parse`` it, nothing else: the floor
  any ast-based miner pays;
* ``scan``: ``errkb.mine.raise_sites.scan``: parse, find every raise site, template its
  message, cut the source window;
* ``mine``: ``errkb.mine.drafts.mine``: scan, then build a draft record per templated site
  and lint each one (schema + pattern rules) as ingest would.

Prints files/s for each, the ratios scan/baseline and mine/baseline (time), sites
found and the share templated, and writes ``bench/results/mine.json``. Best of
``--repeat`` runs.
"""

from __future__ import annotations

import argparse
import ast
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from errkb.mine.drafts import mine  # noqa: E402
from errkb.mine.raise_sites import scan  # noqa: E402
from errkb.mine.sources import SourceTree  # noqa: E402

SHA = "0" * 40  # mine needs a commit id; the benchmark's records are thrown away


def locate(name: str) -> Path | None:
    for python in (sys.executable, str(Path(sys.base_prefix) / "bin" / "python3")):
        out = subprocess.run(
            [python, "-c", f"import importlib.util as u; s = u.find_spec({name!r}); print(list(s.submodule_search_locations)[0] if s and s.submodule_search_locations else '')"],
            capture_output=True, text=True, check=False,
        )
        if out.returncode == 0 and out.stdout.strip():
            return Path(out.stdout.strip())
    return None


def baseline(path: Path) -> tuple[float, int]:
    t = time.perf_counter()
    n = 0
    for file, text in SourceTree.open(path).python_files():
        try:
            ast.parse(text, filename=file)
        except (SyntaxError, ValueError):
            pass
        n += 1
    return time.perf_counter() - t, n


def best(fn, repeat: int):
    runs = [fn() for _ in range(repeat)]
    return min(runs, key=lambda r: r[0])


def measure(path: Path, repeat: int) -> dict:
    base_s, files = best(lambda: baseline(path), repeat)

    def run_scan():
        t = time.perf_counter()
        result = scan(path)
        return time.perf_counter() - t, result

    scan_s, result = best(run_scan, repeat)

    def run_mine():
        t = time.perf_counter()
        mined = mine(path, repo="bench/bench", sha=SHA)
        return time.perf_counter() - t, mined

    mine_s, mined = best(run_mine, repeat)
    summary = result.summary()
    return {
        "path": str(path),
        "files": files,
        "baseline_s": round(base_s, 3),
        "scan_s": round(scan_s, 3),
        "mine_s": round(mine_s, 3),
        "baseline_files_per_s": round(files / base_s, 1),
        "scan_files_per_s": round(files / scan_s, 1),
        "mine_files_per_s": round(files / mine_s, 1),
        "scan_over_baseline": round(scan_s / base_s, 2),
        "mine_over_baseline": round(mine_s / base_s, 2),
        "sites": summary["sites"],
        "templated": summary["templated"],
        "templated_share": summary["templated_share"],
        "drafts": len(mined.records),
        "refused_by_lint": dict(mined.refused),
        "untemplated_reasons": summary["untemplated_reasons"],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("paths", nargs="*", type=Path)
    parser.add_argument("--packages", default="numpy,sympy,botocore")
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args(argv)
    targets: list[tuple[str, Path]] = [(str(p), p) for p in args.paths]
    if not targets:
        for name in args.packages.split(","):
            where = locate(name)
            if where is None:
                print(f"skipping {name}: not installed here or in the base Python")
                continue
            targets.append((name, where))
    rows = []
    for name, path in targets:
        row = measure(path, args.repeat)
        row["name"] = name
        rows.append(row)

    head = f"{'package':10s} {'files':>6s} {'parse f/s':>10s} {'scan f/s':>9s} {'mine f/s':>9s} {'scan/base':>9s} {'mine/base':>9s} {'sites':>7s} {'templ.':>7s} {'share':>6s} {'drafts':>7s}"
    print(head)
    for r in rows:
        print(f"{r['name'][:10]:10s} {r['files']:6d} {r['baseline_files_per_s']:10.1f} {r['scan_files_per_s']:9.1f} {r['mine_files_per_s']:9.1f} "
              f"{r['scan_over_baseline']:9.2f} {r['mine_over_baseline']:9.2f} {r['sites']:7d} {r['templated']:7d} {r['templated_share']:6.1%} {r['drafts']:7d}")
    results = ROOT / "bench" / "results"
    results.mkdir(parents=True, exist_ok=True)
    (results / "mine.json").write_text(json.dumps({"python": sys.version.split()[0], "repeat": args.repeat, "rows": rows}, indent=2))
    print(f"wrote {results / 'mine.json'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
