"""errkb explain on a whole log: distinct errors with counts and line ranges, streamed
in bounded memory (real subprocesses, peak RSS measured), giant lines."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner

from errkb.cli import cli
from errkb.explain.explainer import (
    LINE_TAIL_BYTES,
    MAX_LINE_BYTES,
    InputStats,
    read_lines,
)
from errkb.store.db import Store
from tests.support import REPO, SEED_ID, SEED_MESSAGE, write_jsonl

REAL_LOGS = REPO / "tests" / "fixtures" / "real_logs"
NOISE = [
    '2026-08-05 15:26:02,985 DEBUG [gpu_worker.py:337] sending heartbeat to 10.145.197.228:6685 seq=23659',
    'INFO:     10.24.37.211:36143 - "GET /api/v1/items HTTP/1.1" 404 Not Found',
    '{"ts": "2026-08-02T18:07:14.645Z", "level": "debug", "msg": "connection established", "status": 204}',
    "Aug 16 03:07:54 node-3 kubelet[2120]: I0816 prober.go:107] Readiness probe succeeded",
]


def explain_json(db, args=(), input=None):
    db_args = ["--db", str(db)] if db is not None else []
    r = CliRunner().invoke(cli, ["explain", *db_args, "--json", *args], input=input)
    return r.exit_code, (json.loads(r.stdout) if r.stdout.strip() else None), r


def _log(total: int, at: dict[int, str]) -> str:
    """``total`` lines of noise with the given lines (1-based) replaced."""
    return "".join((at.get(n) or NOISE[n % len(NOISE)]) + "\n" for n in range(1, total + 1))


def test_log_reports_each_distinct_error_with_count_and_line_range(sibling_db):
    bf16 = "ValueError: Bfloat16 is only supported on GPUs with compute capability of at least 8.0. Your Tesla T4 GPU has compute capability 7.5. You can use float16 instead by explicitly setting the`dtype` flag in CLI, for example: --dtype=half."
    traceback = (
        "Traceback (most recent call last):\n"
        '  File "/usr/lib/python3.12/site-packages/vllm/engine.py", line 12, in start\n'
        "    raise ValueError(\n"
        f"ValueError: {SEED_MESSAGE}"
    )
    log = _log(120, {
        10: f"(EngineCore_DP0 pid=1234) ERROR 08-14 21:17:39 [core.py:700] ValueError: {SEED_MESSAGE}",
        30: bf16,
        55: traceback,  # 4 lines: 55-58
        99: f"\x1b[31m[rank0]: ValueError: {SEED_MESSAGE}\x1b[0m",
    })
    code, data, _ = explain_json(sibling_db, input=log)
    assert code == 0
    assert data["mode"] == "log" and data["lines"] == 123
    got = {m["id"]: m["occurrences"] for m in data["matches"]}
    assert got[SEED_ID] == {"count": 3, "firstLine": 10, "lastLine": 102}
    assert [m["occurrences"]["firstLine"] for m in data["matches"]] == [10, 30]  # in order of appearance
    assert "0123456789abcdef" not in got  # only the best record of each message is counted
    # --all counts every record each message matches
    code, data, _ = explain_json(sibling_db, ["--all"], input=log)
    assert {m["id"]: m["occurrences"]["count"] for m in data["matches"]}["0123456789abcdef"] == 3

    r = CliRunner().invoke(cli, ["explain", "--db", str(sibling_db)], input=log)
    assert r.exit_code == 0
    lines = r.stdout.split("\n")
    assert lines[0] == "2 known errors in 123 lines"
    # each row wrapped to 80 columns, its continuation indented
    assert lines[1:5] == [
        "     3 x  lines 10-102  ValueError",
        "            flashinfer-allreduce-quantization-fusion-is-not-su",
        "     1 x  lines 30-30  ValueError",
        "            bfloat16-is-only-supported-on-gpus-with-compute-ca",
    ]
    assert "-- 1/2 " in r.stdout and "-- 2/2 " in r.stdout and "How to fix" in r.stdout
    assert [ln for ln in r.stdout.split("\n") if len(ln) > 80 and not ln.lstrip().startswith("https://")] == []


def test_log_without_known_errors_exits_1_and_offers_near_matches_for_error_lines(sibling_db):
    drifted = SEED_MESSAGE.replace("trtllm", "nccl").replace("Please use 'mnnvl'", "Please use 'nvls'")
    code, data, _ = explain_json(sibling_db, input=_log(80, {40: f"ValueError: {drifted}"}))
    assert code == 1
    assert data["mode"] == "log" and data["matches"] == [] and data["lines"] == 80
    assert data["nearMatches"][0]["id"] == SEED_ID
    code, data, r = explain_json(sibling_db, input=_log(80, {}))
    assert (code, data["nearMatches"]) == (1, [])
    r = CliRunner().invoke(cli, ["explain", "--db", str(sibling_db)], input=_log(80, {}))
    assert (r.exit_code, r.stdout) == (1, "No known error matches this log (80 lines).\n")


@pytest.mark.parametrize("name, slug, occurrences", [
    ("xinference_1715_user_max_model_len.txt", "user-specified-max-model-len", {"count": 2, "firstLine": 3, "lastLine": 4}),
    ("vllm_10517_max_seq_len_kv_cache.txt", "the-model-s-max-seq-len", {"count": 1, "firstLine": 7, "lastLine": 7}),
    # one message wrapped over several lines: no line matches alone, the whole text does
    ("vllm_40023_flashinfer_workspace_overflow_wrapped.txt", "buffer-overflow-when-allocating", None),
])
def test_real_logs(name, slug, occurrences):
    """Logs from public issues, against the bundled dataset (the default store)."""
    code, data, _ = explain_json(None, ["--file", str(REAL_LOGS / name)])
    assert code == 0
    assert data["matches"][0]["slug"].startswith(slug)
    assert data["matches"][0]["occurrences"] == occurrences


def test_read_lines_bounds_every_line():
    data = b"short\r\n" + b"a" * (3 * MAX_LINE_BYTES) + b"END\n" + b"\n" + b"last"
    stats = InputStats()
    lines = list(read_lines(io.BytesIO(data), stats))
    assert lines[0] == b"short\r" and lines[2] == b"" and lines[3] == b"last"
    long = lines[1]
    assert len(long) == MAX_LINE_BYTES + len(" … ".encode())
    assert long.endswith(b"a" * (LINE_TAIL_BYTES - 3) + b"END") and long.startswith(b"a" * 1000)
    assert (stats.lines, stats.long_lines, stats.long_line_count) == (4, [2], 1)
    # a line exactly at the limit is kept whole
    exact = list(read_lines(io.BytesIO(b"b" * MAX_LINE_BYTES)))
    assert exact == [b"b" * MAX_LINE_BYTES]


def _run_measured(db: Path, feed, args=("--json",)) -> tuple[int, str, str, int]:
    """Run `python -m errkb explain` as a real process fed by ``feed(stdin)``; return
    (exit code, stdout, stderr, peak RSS of the errkb process in KiB)."""
    wrapper = (
        "import resource, subprocess, sys\n"
        "rc = subprocess.call([sys.executable, '-m', 'errkb', *sys.argv[1:]])\n"
        "print('MAXRSS', resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr)\n"
        "sys.exit(rc)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", wrapper, "explain", "--db", str(db), *args],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO)
    out: dict[str, bytes] = {}
    readers = [threading.Thread(target=lambda k=k, s=s: out.__setitem__(k, s.read()))
               for k, s in (("stdout", proc.stdout), ("stderr", proc.stderr))]
    for t in readers:
        t.start()
    try:
        feed(proc.stdin)
    finally:
        proc.stdin.close()
    rc = proc.wait(timeout=300)
    for t in readers:
        t.join()
    stderr = out["stderr"].decode()
    rss = int(stderr.rsplit("MAXRSS ", 1)[1].split()[0])
    return rc, out["stdout"].decode(), stderr, rss


def test_large_log_streams_in_constant_memory(sibling_db):
    """240 MB of log through a pipe: peak RSS is that of a 24 MB log (it does not grow with the input)."""
    # a warm-up call builds the cached bundle, so both measured runs load it alike
    assert subprocess.run([sys.executable, "-m", "errkb", "explain", "--db", str(sibling_db), SEED_MESSAGE],
                          capture_output=True, cwd=REPO).returncode == 0
    noise = (" ".join(NOISE) + " ") * 24  # ~8 KB of ordinary log text per line
    hit = f"2026-08-14 21:17:39 ERROR ValueError: {SEED_MESSAGE}\n".encode()

    def feed(lines: int):
        def write(stdin):
            block = b"".join((f"{i} ".encode() + noise.encode() + b"\n") for i in range(99)) + hit
            for _ in range(lines // 100):
                stdin.write(block)
        return write

    rc, out, err, small = _run_measured(sibling_db, feed(3_000))
    assert rc == 0, err
    assert json.loads(out)["matches"][0]["occurrences"]["count"] == 30
    rc, out, err, large = _run_measured(sibling_db, feed(30_000))
    assert rc == 0, err
    data = json.loads(out)
    assert data["lines"] == 30_000
    assert data["matches"][0]["occurrences"] == {"count": 300, "firstLine": 100, "lastLine": 30_000}
    assert large - small < 16 * 1024, f"peak RSS grew from {small} KiB (24 MB log) to {large} KiB (240 MB log)"
    assert large < 200 * 1024
    print(f"peak RSS: {small} KiB for 24 MB, {large} KiB for 240 MB")


def test_100_mb_single_line(sibling_db):
    """A 100 MB line is read as its head and tail: the message ending it is found, memory stays bounded."""
    def feed(stdin):
        chunk = b"x" * (1 << 20)
        for _ in range(100):
            stdin.write(chunk)
        stdin.write(f" ValueError: {SEED_MESSAGE}\n".encode())

    rc, out, err, rss = _run_measured(sibling_db, feed, args=())
    assert rc == 0, err
    assert "ValueError  flashinfer-allreduce-quantization-fusion-is-not-su" in out
    assert ("note: stdin: 1 line(s) longer than 1 MiB (line 1): only their first 960 KiB and last 64 KiB were read"
            in err)
    assert rss < 200 * 1024, f"peak RSS {rss} KiB for a 100 MB line"


def test_read_lines_matches_split_for_any_bytes(monkeypatch):
    """Property: read_lines is bytes.split(b"\\n") with long lines cut to head + tail,
    whatever the chunk boundaries (tiny limits make every case reachable)."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    import errkb.explain.explainer as ex

    monkeypatch.setattr(ex, "MAX_LINE_BYTES", 12)
    monkeypatch.setattr(ex, "LINE_TAIL_BYTES", 4)
    monkeypatch.setattr(ex, "READ_CHUNK", 5)
    mark = " … ".encode()

    @settings(max_examples=300, deadline=None)
    @given(st.binary(max_size=120) | st.lists(st.sampled_from([b"a", b"b\n", b"\n", b"\x00", b"xyz" * 5])).map(b"".join))
    def check(data):
        want = data.split(b"\n")
        if want[-1] == b"":
            want.pop()
        want = [w if len(w) <= 12 else w[:8] + mark + w[-4:] for w in want]
        stats = InputStats()
        assert list(read_lines(io.BytesIO(data), stats)) == want
        assert stats.lines == len(want)
        assert stats.long_line_count == sum(1 for w in want if mark in w and len(w) == 12 + len(mark))

    check()


def test_fast_log_path_agrees_with_iter_messages(sibling_db):
    """Differential: the batched fast path gives the messages (line ranges, kinds),
    matches and near-match candidates that iter_messages + exact matching give."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    import errkb.explain.explainer as ex
    from errkb.kb import KnowledgeBase
    from errkb.match.log import match_log, match_messages
    from errkb.text.normalize import iter_messages

    bundle = KnowledgeBase.open(sibling_db)
    drifted = SEED_MESSAGE.replace("trtllm", "nccl")
    vocab = NOISE + [
        f"ValueError: {SEED_MESSAGE}", f"[rank0]: ValueError: {SEED_MESSAGE}", "Please use 'mnnvl' backend instead.",
        "Traceback (most recent call last):", "\x1b[31mTraceback (most recent call last):\x1b[0m",
        "2026-08-14 21:17:39 ERROR Traceback (most recent call last):",
        '  File "/app/x.py", line 1, in f', "    raise ValueError(", "    ^^^^^^^^", "",
        "The above exception was the direct cause of the following exception:",
        "During handling of the above exception, another exception occurred:",
        "RuntimeError: boom", "KeyError: 'x'", f"ValueError: {drifted}", "continued message text\r",
        # pytest's failure margin: a run of these is one message
        f"E       ValueError: {SEED_MESSAGE}", "E         second line of it", "E", "\x1b[31mE   RuntimeError: boom\x1b[0m",
        "E   Traceback (most recent call last):", 'E     File "/app/x.py", line 1, in f', "Error: not a margin",
    ]

    def reference(lines):
        out, unmatched = [], {}
        messages = list(iter_messages(lines))
        for message, matches in match_messages(bundle.matcher, messages):
            out.append((message.first_line, message.last_line, message.kind, [m.record_id for m in matches]))
            if not matches and len(unmatched) < ex.NEAR_CANDIDATES_FROM_LOG:
                ex._keep_unmatched(message, unmatched)
        return out, unmatched

    def fast(lines, batch):
        out, unmatched = [], {}
        for message, matches in match_log(bundle.matcher, iter(lines), max_messages=batch):
            out.append((message.first_line, message.last_line, message.kind, [m.record_id for m in matches]))
            if not matches and len(unmatched) < ex.NEAR_CANDIDATES_FROM_LOG:
                ex._keep_unmatched(message, unmatched)
        return out, unmatched

    @settings(max_examples=150, deadline=None)
    @given(st.lists(st.sampled_from(vocab), max_size=60), st.sampled_from([2, 3, 7, 4096]))
    def check(lines, batch):
        assert fast(lines, batch) == reference(lines)

    check()


def test_log_with_many_distinct_errors_explains_the_first_few(tmp_path, make_variant):
    from errkb.explain.render import LOG_EXPLAINED

    variants = [make_variant(i) for i in range(LOG_EXPLAINED + 3)]
    db = tmp_path / "s.duckdb"
    with Store.open(db) as store:
        assert store.ingest([write_jsonl(tmp_path / "v.jsonl", variants)]).rejected == 0
    log = _log(60, {10 + i: f"ValueError: {v['errorMessage']}" for i, v in enumerate(variants)})
    r = CliRunner().invoke(cli, ["explain", "--db", str(db)], input=log)
    assert r.exit_code == 0
    n = len(variants)
    assert r.stdout.startswith(f"{n} known errors in 60 lines\n")
    assert r.stdout.count("\nHow to fix\n") == LOG_EXPLAINED
    assert f"-- {LOG_EXPLAINED}/{n} " in r.stdout and f"-- {LOG_EXPLAINED + 1}/{n} " not in r.stdout
    assert r.stdout.endswith("\n3 more known errors listed above; `errkb explain --all` explains every one,\n"
                             "`errkb show ID` one record.\n")
    r = CliRunner().invoke(cli, ["explain", "--db", str(db), "--all"], input=log)
    assert r.stdout.count("\nHow to fix\n") == n and "more known error" not in r.stdout


# A vLLM start-up log as the API server prints it: the EngineCore's own error (here in the
# wording of a release before the record's, which added a docs link), then the front-end's wrapper.
ENGINE_STARTUP_LOG = """\
(EngineCore_DP0 pid=2046) ERROR 08-14 13:42:40 [core.py:700] EngineCore failed to start.
(EngineCore_DP0 pid=2046) ERROR 08-14 13:42:40 [core.py:700] Traceback (most recent call last):
(EngineCore_DP0 pid=2046) ERROR 08-14 13:42:40 [core.py:700]   File "/usr/lib/python3.12/site-packages/vllm/v1/core/kv_cache_utils.py", line 700, in check_enough_kv_cache_memory
(EngineCore_DP0 pid=2046) ERROR 08-14 13:42:40 [core.py:700]     raise ValueError(
(EngineCore_DP0 pid=2046) ERROR 08-14 13:42:40 [core.py:700] ValueError: To serve at least one request with the models's max seq len (131072), (16.00 GiB KV cache is needed, which is larger than the available KV cache memory (4.50 GiB). Based on the available memory, the estimated maximum model length is 36864. Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine.
(APIServer pid=1969) Traceback (most recent call last):
(APIServer pid=1969)   File "/usr/lib/python3.12/site-packages/vllm/v1/engine/utils.py", line 750, in wait_for_engine_startup
(APIServer pid=1969)     raise RuntimeError("Engine core initialization failed. "
(APIServer pid=1969) RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {'EngineCore_DP0': 1}
"""


def test_a_matched_wrapper_does_not_hide_a_near_match_of_the_cause_above_it(data_db):
    code, data, _ = explain_json(data_db, args=[ENGINE_STARTUP_LOG])
    assert code == 0
    assert [m["id"] for m in data["matches"]] == ["94bf72f3aeb21542"]  # the wrapper, matched exactly
    assert data["nearMatches"][0]["id"] == "9ab8fc1f08d7fd42"  # its cause, in an older release's wording
    assert "94bf72f3aeb21542" not in [n["id"] for n in data["nearMatches"]]
    human = CliRunner().invoke(cli, ["explain", "--db", str(data_db), ENGINE_STARTUP_LOG])
    assert human.exit_code == 0
    assert ("Also in this log, similar to known errors but not exact (the message may have\n"
            "changed between versions):\n") in human.stdout
    assert "see it:  errkb show 9ab8fc1f08d7fd42" in human.stdout


def test_an_unrelated_error_beside_a_match_gets_no_near_match(data_db):
    log = ("Traceback (most recent call last):\n  File \"x.py\", line 3, in <module>\n"
           "ValueError: invalid literal for int() with base 10: 'abc'\n" + ENGINE_STARTUP_LOG.split("\n", 5)[5])
    code, data, _ = explain_json(data_db, args=[log])
    assert code == 0 and [m["id"] for m in data["matches"]] == ["94bf72f3aeb21542"]
    assert data["nearMatches"] == []


def test_a_gzip_log_is_read_as_what_it_holds_and_a_cut_one_is_one_line(tmp_path, seed_db):
    """`explain --file app.log.1.gz` said the input looks binary; a rotated log is read as
    its text, and a gzip cut short is one line naming the file (exit 2)."""
    import gzip
    import subprocess
    import sys

    from tests.support import REPO, SEED_ID, SEED_MESSAGE

    log = ("INFO starting\n" * 50 + f"ValueError: {SEED_MESSAGE}\n").encode()
    whole = tmp_path / "app.log.1.gz"
    whole.write_bytes(gzip.compress(log))
    run = [sys.executable, "-m", "errkb", "explain", "--db", str(seed_db), "--json", "--file"]
    done = subprocess.run(run + [str(whole)], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert done.returncode == 0, done.stderr
    import json

    data = json.loads(done.stdout)
    assert [m["id"] for m in data["matches"]] == [SEED_ID] and data["lines"] == 51 and data["notes"] == []
    cut = tmp_path / "cut.log.gz"
    cut.write_bytes(gzip.compress(log)[:40])
    failed = subprocess.run(run + [str(cut)], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert failed.returncode == 2
    assert failed.stderr.splitlines() == [f"Error: {cut}: not a complete gzip stream "
                                          "(Compressed file ended before the end-of-stream marker was reached)"]
