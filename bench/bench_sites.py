"""The known-site tier: cold CLI cost and the trust rule's false matches.

    python -m bench.bench_sites cold [--runs 7]
        Wall time of a fresh interpreter that loads the shipped index and answers one
        site-tier match (the site cache already built), against `python -c pass`.
    python -m bench.bench_sites foreign WHEEL...
        Mine the wheels of other libraries (transformers, numpy, ...) as the index's miner
        does, render each message with plausible values, and count how many a served
        site pattern matches (false matches: another library's message pinned to a
        vLLM/PyTorch/FlashInfer site), with and without the trust rule. Also the share of
        the index's own messages that still match (the rule's cost).
    python -m bench.bench_sites batch [--lines 200000] [--runs 3]
        The batch scan enrich uses (SiteIndex.match_lines) over the bench corpus's log:
        the share of lines with a candidate and lines/s, with the shipped key rule
        (SHARED_KEY_OK) and with the rarest-shared key (the baseline, SHARED_KEY_OK=1),
        each index in its own fresh cache, in this run; the matches must be the same.
    python -m bench.bench_sites pastes [FIXTURE] [--json]
        Real pastes from public issues (tests/fixtures/pastes_sites.jsonl: text, source,
        what must answer) through `errkb explain --json` of the errkb on PYTHONPATH: per
        paste curated / right site / wrong site / nothing. Run it with PYTHONPATH at
        another checkout (main) for the before figure.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

_PASTE = "ValueError: max_tokens must be at least 1, got 0."
_ONE_CALL = ("import sys; from errkb.match.sites import SiteIndex; "
             f"m = SiteIndex.load().match({_PASTE!r}); sys.exit(0 if m else 1)")


def _wall(cmd: list[str], runs: int) -> tuple[list[float], list[float]]:
    """Wall and CPU (user + system) seconds of each run: on a shared machine the CPU time
    is the figure that says what the call costs, the wall time what it took today."""
    import resource

    walls, cpus = [], []
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        subprocess.run(cmd, check=False, capture_output=True)
        walls.append(time.perf_counter() - started)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return walls, cpus


def cold(runs: int) -> None:
    subprocess.run([sys.executable, "-c", _ONE_CALL], check=False)  # builds the cache once, if needed
    base, base_cpu = _wall([sys.executable, "-c", "pass"], runs)
    site, site_cpu = _wall([sys.executable, "-c", _ONE_CALL], runs)
    ok = subprocess.run([sys.executable, "-c", _ONE_CALL], check=False).returncode == 0
    print(f"python -c pass: wall median {statistics.median(base) * 1000:.0f} ms, "
          f"CPU median {statistics.median(base_cpu) * 1000:.0f} ms")
    print(f"load index + one site match: wall median {statistics.median(site) * 1000:.0f} ms "
          f"(min {min(site) * 1000:.0f}, max {max(site) * 1000:.0f}), CPU median {statistics.median(site_cpu) * 1000:.0f} ms "
          f"(min {min(site_cpu) * 1000:.0f}); matched: {ok}")


def _messages(wheel: Path) -> list[str]:
    from errkb.mine.releases import Library, read_release

    part = read_release(wheel, Library("foreign", wheel.name.split("-")[0], "", ()), "0")
    out = []
    from errkb.match.sites import chunks_of

    for row in part.rows:
        try:
            chunks = chunks_of(row["p"])
        except ValueError:
            continue
        # the same plausible value for every placeholder the miner's renderer would give
        out.append("".join(c if c is not None else "3" for c in chunks))
    return out


def _begins_wording(message: str, pattern: str) -> bool:
    """Whether the foreign message, rendered from its template, is the beginning of
    ``pattern`` rendered the same way (whitespace folded): a copied message the site's library
    goes on from ("You have to specify pixel_values" and vLLM's "... or pixel_embeds")."""
    from errkb.match.chunks import fold_space
    from errkb.match.sites import chunks_of

    rendered = fold_space("".join(c if c is not None else "3" for c in chunks_of(pattern))).strip()
    return rendered.startswith(fold_space(message).strip().rstrip("."))


def _literal(message: str, pattern: str) -> str:
    """The literal text of ``pattern`` when the foreign message was rendered from the same
    template (placeholders became "3"), else "": compares wordings, not values."""
    from errkb.match.sites import chunks_of

    chunks = chunks_of(pattern)
    rendered = "".join(c if c is not None else "3" for c in chunks)
    # a copy that ends its sentence differently ("... heads (3)" and "... heads (3).")
    # is still the same wording
    return "".join(c for c in chunks if c) if rendered.rstrip(" .") == message.rstrip(" .") else ""


def foreign(wheels: list[Path]) -> None:
    from errkb.match.sites import SiteIndex, chunks_of, trust
    from errkb.mine.templates import _chunks_match

    index = SiteIndex.load()
    for wheel in wheels:
        messages = _messages(wheel)
        served = same = cut = cut_same = beside = beside_same = 0
        cut_examples = []
        for m in messages:
            hits = [x for x in index.match(m) if x.meaning is None]
            if hits:
                # explain's listing beside a whole match: another library's longer message the
                # text may be cut short inside (errkb.explain.explainer._longer_elsewhere)
                libraries = {s.library for x in hits for s in x.sites}
                longer = [x for x in index.match_cut(m)
                          if x.meaning is None and x.sites and not {s.library for s in x.sites} & libraries]
                if any(_begins_wording(m, x.pattern) for x in longer):
                    beside_same += 1
                elif longer:
                    beside += 1
                    cut_examples.append((m, longer[0].pattern))
            if not hits:
                # explain's next try: a whole foreign message read as one of ours cut short
                cuts = index.match_cut(m)
                if any(_begins_wording(m, x.pattern) for x in cuts):
                    cut_same += 1
                elif cuts:
                    cut += 1
                    cut_examples.append((m, cuts[0].pattern))
                continue
            # The very wording (code copied between libraries: vLLM's copies of transformers'
            # models, torch._numpy's of numpy) is a shared message, not a false match.
            # A form after a class's or a value's name ("AxisError: axis 3 is out of bounds ..."
            # from a class that builds its message) is the same wording as the message itself.
            forms = [m]
            for _ in range(2):  # "AxisError: 3: axis 3 is out of bounds ..." (a class, then a value)
                head, colon, rest = forms[-1].partition(": ")
                if colon and " " not in head:
                    forms.append(rest)
            if any("".join(c for c in chunks_of(x.pattern) if c) == _literal(f, x.pattern) for x in hits for f in forms):
                same += 1
            else:
                served += 1
        print(f"{wheel.name}: {len(messages)} messages; a served site pattern matches {served + same}: "
              f"{same} the same wording (shared code), {served} another message "
              f"(false: {served / max(1, len(messages)):.2%}); read as one cut short: {cut_same + cut}: "
              f"{cut_same} the beginning of the same wording, {cut} another message "
              f"(false: {cut / max(1, len(messages)):.2%}); another library's longer message beside a whole "
              f"match: {beside_same + beside}: {beside_same} the same wording, {beside} another message")
        for m, pattern in cut_examples[:10]:
            print(f"  cut: {m[:100]!r} -> {pattern[:100]!r}")
    # Without the rule: every index pattern, on a sample (all patterns x all messages is slow).
    from errkb.match.sites import default_path
    from errkb.mine.site_index import read_lines

    _, rows = read_lines(default_path())
    patterns = sorted({r["p"] for r in rows})
    every = [chunks_of(p) for p in patterns]
    sample = [m for w in wheels for m in _messages(w)][::20]
    loose = sum(1 for m in sample if any(_chunks_match(c, m) for c in every))
    print(f"without the trust rule (every pattern, 1 in 20 foreign messages): {loose}/{len(sample)} "
          f"({loose / max(1, len(sample)):.2%})")
    own = [r for r in rows][::25]
    kept = sum(1 for r in own if trust(r["p"])[0] is not None)
    found = sum(1 for r in own if index.match("".join(c if c is not None else "3" for c in chunks_of(r["p"]))))
    print(f"index's own messages (1 in 25): trusted {kept}/{len(own)} ({kept / max(1, len(own)):.1%}), "
          f"matched when pasted alone {found}/{len(own)} ({found / max(1, len(own)):.1%})")


_FIXTURE = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "pastes_sites.jsonl"


def judge(paste: dict, answer: dict) -> str:
    """What ``errkb explain --json`` gave one paste of the fixture: "curated" (a record
    answered), else "right", "wrong" or "nothing" against the paste's ``expect``:
    ``site`` (a code site in one of ``files``), ``table`` (the CUDA or NCCL table named
    ``table``) or ``none`` (the message's site is not covered: any code site is wrong). A
    curated table's answer to a ``site`` paste is right when its meaning says the message is
    raised (or logged) in one of ``files`` (the PyTorch table names the file each of its C++ errors is
    raised in: "raised in aten/src/ATen/native/Convolution.cpp, ...", "raised by TORCH_CUDABLAS_CHECK in
    aten/src/ATen/cuda/Exceptions.h")."""
    if any(m.get("tier") in ("curated", "variant") for m in answer.get("matches", [])):
        return "curated"
    matches = answer.get("sites") or []
    tables = {m["trust"] for m in matches if m.get("meaning")}
    files = [s["file"] for m in matches if not m.get("meaning") for s in m["sites"]]
    expect = paste["expect"]
    if expect == "table":
        return "right" if paste["table"] in tables else ("wrong" if files or tables else "nothing")
    if expect == "site":
        named = [f for m in matches if m.get("meaning") for f in re.findall(r"(?:raised|logged)(?: by \w+)? in ([\w./-]+\w)",
                                                                           m["meaning"])]
        if any(f.startswith(tuple(paste["files"])) for f in files + named):
            return "right"
        return "wrong" if files else "nothing"
    return "wrong" if files else "nothing"


def pastes(fixture: Path, as_json: bool) -> None:
    rows = [json.loads(line) for line in fixture.read_text(encoding="utf-8").splitlines() if line.strip()]
    counts: dict[str, int] = {}
    out = []
    for paste in rows:
        run = subprocess.run([sys.executable, "-m", "errkb", "explain", "--json", paste["text"]],
                             capture_output=True, text=True, env=dict(os.environ), check=False)
        verdict = judge(paste, json.loads(run.stdout)) if run.stdout.strip() else f"error (exit {run.returncode})"
        counts[verdict] = counts.get(verdict, 0) + 1
        out.append({"source": paste["source"], "expect": paste["expect"], "verdict": verdict})
    if as_json:
        print(json.dumps({"pastes": len(rows), "counts": counts, "each": out}, indent=1))
        return
    for row in out:
        print(f"{row['verdict']:8} {row['expect']:6} {row['source']}")
    print(f"{len(rows)} pastes: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))


_BATCH_ONE = """
import gzip, json, sys, time
from errkb.match import prefilter, sites
sites.SHARED_KEY_OK = int(sys.argv[1])
n, runs = int(sys.argv[2]), int(sys.argv[3])
with gzip.open(sys.argv[4], "rt", encoding="utf-8", errors="replace") as f:
    lines = f.read().split("\\n")[:n]  # lines as enrich splits them
index = sites.SiteIndex.load().preload().prepare_batch()
scan, members = index._prefilter()
clean, buf = prefilter.clean_lines(lines)
if isinstance(scan, tuple):
    candidates = sum(1 for line in clean if next(scan[0].iter(line), None) is not None)
else:
    candidates = len(prefilter.scan_hyperscan_lines(scan, members, set(), buf, [], [], len(clean)))
best = float("inf")
for _ in range(runs):
    t = time.perf_counter()
    found = [m for i in range(0, len(lines), 16384) for m in index.match_lines(lines[i:i + 16384])]
    best = min(best, time.perf_counter() - t)
print(json.dumps({"candidates": candidates, "lines_per_s": round(len(lines) / best),
                  "matches": [m.pattern if m else None for m in found]}))
"""


def batch(lines: int, runs: int) -> None:
    import tempfile

    from errkb.match import sites

    corpus = Path(os.environ.get("ERRKB_BENCH_CORPUS", Path(__file__).resolve().parents[2] / "shared" / "bench-corpus"))
    log = corpus / "lines.txt.gz"
    got = {}
    for rule in (1, sites.SHARED_KEY_OK):  # the baseline first: the rarest-shared key
        env = dict(os.environ, ERRKB_CACHE_DIR=tempfile.mkdtemp(prefix="errkb-bench-keys-"))
        out = subprocess.run([sys.executable, "-c", _BATCH_ONE, str(rule), str(lines), str(runs), str(log)],
                             env=env, capture_output=True, text=True, check=True)
        got[rule] = json.loads(out.stdout)
        g = got[rule]
        n = len(g["matches"])
        print(f"SHARED_KEY_OK={rule:<3} candidates {g['candidates']:,}/{n:,} lines ({100 * g['candidates'] / n:.1f}%), "
              f"{g['lines_per_s']:,} lines/s, {sum(m is not None for m in g['matches']):,} matched", flush=True)
    base, ship = got[1], got[sites.SHARED_KEY_OK]
    same = base["matches"] == ship["matches"]
    print(f"speed-up {ship['lines_per_s'] / base['lines_per_s']:.2f}x; the same matches: {same}")
    if not same:
        raise SystemExit("bench: the key rule changed what matches")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="what", required=True)
    c = sub.add_parser("cold")
    c.add_argument("--runs", type=int, default=7)
    f = sub.add_parser("foreign")
    f.add_argument("wheels", nargs="+", type=Path)
    b = sub.add_parser("batch")
    b.add_argument("--lines", type=int, default=200_000)
    b.add_argument("--runs", type=int, default=3)
    p = sub.add_parser("pastes")
    p.add_argument("fixture", nargs="?", type=Path, default=_FIXTURE)
    p.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.what == "cold":
        cold(args.runs)
    elif args.what == "batch":
        batch(args.lines, args.runs)
    elif args.what == "pastes":
        pastes(args.fixture, args.json)
    else:
        foreign(args.wheels)


if __name__ == "__main__":
    main()
