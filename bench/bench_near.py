"""How often a real paste gets its record: exact match or first near match, by kind.

    python -m bench.bench_near [--runs 20] [--size 10000] [--pastes FILE] [--no-timing]

Reads ``tests/fixtures/pastes.jsonl`` (or ``--pastes``) (real pastes from public issues, each with its
source URL; kinds exact, drifted, truncated, negative) and explains each against a
store of the bundled records (``data/``). Prints, per kind: pastes, right record as
an exact match, right record as the first near match (when nothing matched), and
false exact matches (a match that is not the expected record). Then the explain
time per call (in process, the knowledge base already open, median of ``--runs``)
for the drifted and truncated pastes against a store of ``--size`` records built the
way ``bench.bench_explain`` builds them (bundled records plus corpus records).
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from collections import Counter
from pathlib import Path

from bench.bench_explain import build_store, corpus_records
from errkb.explain.explainer import explain
from errkb.kb import KnowledgeBase
from errkb.records.read import read_records

ROOT = Path(__file__).resolve().parent.parent
PASTES = ROOT / "tests" / "fixtures" / "pastes.jsonl"


def load_pastes(path: Path = PASTES) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def score(kb: KnowledgeBase, pastes: list[dict]) -> dict[str, Counter]:
    by_kind: dict[str, Counter] = {}
    for p in pastes:
        c = by_kind.setdefault(p["kind"], Counter())
        c["pastes"] += 1
        e = explain(kb, p["text"])
        ids = [f.record_id for f in e.found]
        if e.found:
            if p["expected"] and p["expected"] in ids[:1]:
                c["exact"] += 1
            else:
                c["false exact"] += 1
        elif e.near and p["expected"] and e.near[0].record_id == p["expected"]:
            c["first near"] += 1
        elif e.near and not p["expected"]:
            c["near (negative)"] += 1
    return by_kind


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--size", type=int, default=10000)
    ap.add_argument("--pastes", type=Path, default=PASTES,
                    help="a pastes file (tests/fixtures/pastes_heldout.jsonl: the held-out set)")
    ap.add_argument("--no-timing", action="store_true", help="only the outcomes per kind")
    args = ap.parse_args(argv)
    pastes = load_pastes(args.pastes)
    bundled = [item.record for item in read_records([ROOT / "data"]) if item.ok]
    with tempfile.TemporaryDirectory() as tmp:
        db, _ = build_store(Path(tmp), bundled)
        kb = KnowledgeBase.open(db)
        print(f"{'kind':10} {'pastes':>6} {'exact':>6} {'1st near':>8} {'right':>7} {'false exact':>11} {'near on neg':>11}")
        for kind, c in sorted(score(kb, pastes).items()):
            right = c["exact"] + c["first near"]
            print(f"{kind:10} {c['pastes']:6} {c['exact']:6} {c['first near']:8} {right / c['pastes']:7.0%} "
                  f"{c['false exact']:11} {c['near (negative)']:11}")
    if args.no_timing:
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        records = bundled + corpus_records(bundled[0], args.size - len(bundled) + 1)[1:]
        db, n = build_store(Path(tmp), records)
        kb = KnowledgeBase.open(db)
        texts = [p["text"] for p in pastes if p["kind"] in ("drifted", "truncated")]
        explain(kb, texts[0])  # builds the cached bundle
        times = []
        for _ in range(args.runs):
            for t in texts:
                start = time.perf_counter()
                explain(kb, t)
                times.append(time.perf_counter() - start)
        print(f"explain per call at {n} records (in process, drifted+truncated pastes): "
              f"median {statistics.median(times) * 1000:.2f} ms, p90 {statistics.quantiles(times, n=10)[-1] * 1000:.2f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
