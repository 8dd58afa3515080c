"""Pattern corpora for the matcher and enrichment benchmarks, mined from installed code.

    python -m bench.make_corpus [--sizes 1000,10000,50000] [--out bench/corpus] [PATH ...]

Runs the raise-site finder (``errkb.mine.raise_sites``) over every .py file of the
interpreter's site-packages and standard library (this venv's and the base Python's)
and of the wheels in the wheel cache (``$ERRKB_WHEEL_CACHE``, else
``~/.cache/errkb/wheels``: the vLLM wheels the drift test fetches, plus any put there
with ``pip download --no-deps NAME -d ~/.cache/errkb/wheels``), or over the PATHs
given (folders or wheels), keeps each distinct ``messagePattern`` once, shuffles them with
a fixed seed and writes ``patterns-1k.jsonl.gz``, ``patterns-10k.jsonl.gz``,
``patterns-50k.jsonl.gz`` (the first N of the same order), one JSON object a line,
in the shape of ``shared/bench-corpus/patterns.jsonl.gz``: ``id``, ``pattern``,
``error_class``, ``source`` (file:line), ``literal_len``; plus ``message``, the
example message rendered from the template (a line that must match ``pattern``),
and ``kind`` ("raise", or "warn" for a ``warnings.warn`` call).

A size larger than the number of distinct patterns found is written with what there
is and said so; nothing is padded.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import sys
import sysconfig
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from errkb.mine.raise_sites import Scan, scan  # noqa: E402

SEED = 20260815


def default_roots() -> list[Path]:
    """site-packages and stdlib of this interpreter and of the base one (deduplicated)."""
    roots: list[Path] = []
    for base in (sys.prefix, sys.base_prefix):
        paths = sysconfig.get_paths(vars={"base": base, "platbase": base, "installed_base": base, "installed_platbase": base})
        for key in ("purelib", "platlib", "stdlib"):
            p = Path(paths[key]).resolve()
            if p.is_dir() and p not in roots:
                roots.append(p)
    return roots


def wheel_cache() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(os.environ.get("ERRKB_WHEEL_CACHE") or Path(base) / "errkb" / "wheels")


def _top_level_units(root: Path) -> list[Path]:
    if root.is_file():
        return [root]  # a wheel is read in place, as one unit
    """One unit of work per top-level package or module, so two cores share the load."""
    # The stdlib folder also holds site-packages; skip it there (it is its own root).
    return sorted(p for p in root.iterdir() if (p.is_dir() and p.name not in ("site-packages", "__pycache__", "test", "tests")) or p.suffix == ".py")


def _scan_unit(path: str) -> tuple[str, list[dict], dict]:
    # warnings.warn messages are log lines too; the shared corpus includes a few.
    result: Scan = scan(path, warnings=True)
    rows = []
    for site in result.templated:
        t = site.template
        rows.append({
            "pattern": t.pattern(),
            "error_class": site.error_class,
            "source": f"{site.file}:{site.line}",
            "literal_len": len(t.literal),
            "message": t.render(),
            "kind": site.kind,
        })
    return path, rows, {"files": result.files, "sites": len(result.sites), "templated": len(result.templated)}


def collect(roots: list[Path], workers: int) -> tuple[list[dict], dict]:
    units = [str(u) for root in roots for u in _top_level_units(root)]
    seen: dict[str, dict] = {}
    totals = {"files": 0, "sites": 0, "templated": 0}
    with ProcessPoolExecutor(max_workers=workers) as pool:
        for _, rows, counts in pool.map(_scan_unit, units, chunksize=4):
            for key in totals:
                totals[key] += counts[key]
            for row in rows:
                seen.setdefault(row["pattern"], row)
    patterns = sorted(seen.values(), key=lambda r: r["pattern"])
    random.Random(SEED).shuffle(patterns)
    return patterns, totals


def write(patterns: list[dict], sizes: list[int], out: Path) -> list[dict]:
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for n in sizes:
        rows = patterns[:n]
        name = f"patterns-{n // 1000}k.jsonl.gz" if n % 1000 == 0 else f"patterns-{n}.jsonl.gz"
        path = out / name
        with gzip.open(path, "wt", encoding="utf-8") as f:
            for i, row in enumerate(rows):
                f.write(json.dumps({"id": i, **row}, ensure_ascii=False) + "\n")
        written.append({"file": str(path), "requested": n, "written": len(rows), "short": len(rows) < n})
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("paths", nargs="*", type=Path, help="folders to mine (default: site-packages and stdlib)")
    parser.add_argument("--sizes", default="1000,10000,50000")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "corpus")
    parser.add_argument("--workers", type=int, default=min(2, os.cpu_count() or 1))
    args = parser.parse_args(argv)
    roots = [p.resolve() for p in args.paths] or default_roots() + sorted(wheel_cache().glob("*.whl"))
    sizes = [int(s) for s in args.sizes.split(",")]

    started = time.perf_counter()
    patterns, totals = collect(roots, args.workers)
    seconds = time.perf_counter() - started
    written = write(patterns, sizes, args.out)

    print(f"mined {totals['files']} files under {len(roots)} roots in {seconds:.1f}s: "
          f"{totals['sites']} raise sites, {totals['templated']} templated, {len(patterns)} distinct patterns")
    for root in roots:
        print(f"  root: {root}")
    print(f"{'file':48s} {'requested':>9s} {'written':>8s}")
    for w in written:
        note = "  (fewer distinct patterns than requested)" if w["short"] else ""
        print(f"{Path(w['file']).name:48s} {w['requested']:9d} {w['written']:8d}{note}")
    summary = {"roots": [str(r) for r in roots], **totals, "distinct_patterns": len(patterns), "seconds": round(seconds, 2), "written": written}
    results = ROOT / "bench" / "results"
    results.mkdir(parents=True, exist_ok=True)
    (results / "make_corpus.json").write_text(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
