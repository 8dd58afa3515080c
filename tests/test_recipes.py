"""The pipeline recipes of docs/pipelines.md: each errkb command exactly as written there, run in a
real shell on the format the tool (tail, Vector, Fluent Bit, Logstash) sends, checked
for what the next stage expects (one JSON object per line, every field kept)."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support import REPO, SEED_ID, SEED_MESSAGE

README = (REPO / "docs" / "pipelines.md").read_text(encoding="utf-8")  # where the recipes live
BIN = str(Path(sys.executable).parent)
SITE = "https://errkb.example.org"

TAIL = "tail -n0 -F /var/log/app.log | errkb enrich"
TAIL_TO_FILE = f"tail -n0 -F /var/log/app.log | errkb enrich --site-url {SITE} >> /var/log/app.enriched.ndjson"
SYSTEMD = f"ExecStart=/bin/sh -c '{TAIL_TO_FILE}'"
VECTOR_EXEC = f'command = ["sh", "-c", "{TAIL}"]'
VECTOR_SIDECAR = "vector --config collect.toml | errkb enrich | vector --config ship.toml"
FLUENT_EXEC = f"    Command  {TAIL}"
FLUENT_CHAIN = "fluent-bit -q -c collect.conf | errkb enrich --field log | fluent-bit -q -c ship.conf"
LOGSTASH_IN = f'input  {{ pipe {{ command => "{TAIL}" codec => json }} }}'
LOGSTASH_OUT = 'output { pipe { command => "errkb enrich --only-matched >> /var/log/app.known-errors.ndjson" codec => json_lines } }'


@pytest.fixture(scope="module")
def env(store_db) -> dict:
    return {**os.environ, "ERRKB_DB": str(store_db), "PATH": BIN + os.pathsep + os.environ["PATH"]}


@pytest.mark.parametrize("text", [TAIL_TO_FILE, SYSTEMD, VECTOR_EXEC, VECTOR_SIDECAR, FLUENT_EXEC, FLUENT_CHAIN, LOGSTASH_IN, LOGSTASH_OUT])
def test_readme_holds_the_recipe_verbatim(text):
    assert text in README


def errkb_side(pipeline: str) -> str:
    """The errkb stage of a README pipeline, as written there."""
    (stage,) = [s.strip() for s in pipeline.split("|") if s.strip().startswith("errkb ")]
    return stage


def run_stage(stage: str, lines: list[str], env: dict, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(["sh", "-c", stage], input="".join(x + "\n" for x in lines).encode(), env=env,
                          cwd=cwd, capture_output=True, timeout=60, check=True)


def _read_lines(fd: int, n: int, timeout: float = 30.0) -> list[bytes]:
    buf = b""
    deadline = time.monotonic() + timeout
    while buf.count(b"\n") < n:
        ready, _, _ = select.select([fd], [], [], max(deadline - time.monotonic(), 0))
        assert ready, f"fewer than {n} lines within {timeout}s: {buf!r}"
        chunk = os.read(fd, 65536)
        assert chunk, f"stream closed after {buf!r}"
        buf += chunk
    return buf.split(b"\n")[:n]


def _wait_for_lines(path: Path, n: int, timeout: float = 30.0) -> list[str]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists():
            lines = path.read_text().split("\n")[:-1]
            if len(lines) >= n:
                return lines
        time.sleep(0.05)
    raise AssertionError(f"{path} did not reach {n} lines within {timeout}s")


def _append(path: Path, lines: list[str]) -> None:
    with open(path, "a") as f:
        for x in lines:
            f.write(x + "\n")
            f.flush()


APP_LINES = [
    "2026-12-02 10:00:00,001 INFO [server.py:12] request served path=/v1/completions status=200",
    f"2026-12-02 10:00:01,002 ERROR [engine.py:99] ValueError: {SEED_MESSAGE}",
    "2026-12-02 10:00:02,003 DEBUG [server.py:14] heartbeat",
]


def test_tail_follow_streams_each_line_live(env, tmp_path):
    """Vector's exec source, Fluent Bit's exec input and Logstash's pipe input all run this."""
    log = tmp_path / "app.log"
    log.write_text("an old line, before tail started\n")
    cmd = TAIL.replace("/var/log/app.log", str(log))
    proc = subprocess.Popen(["sh", "-c", cmd], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, start_new_session=True)
    try:
        time.sleep(1.0)  # tail -n0 -F only shows what is appended after it started
        events = []
        for line in APP_LINES:
            _append(log, [line])
            events += [json.loads(x) for x in _read_lines(proc.stdout.fileno(), 1)]  # out before the next line is in
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
    assert [e["message"] for e in events] == APP_LINES  # what a json decoder (codec) gets: one object per line
    assert [e.get("errkb", {}).get("id") for e in events] == [None, SEED_ID, None]
    assert b"Traceback" not in proc.stderr.read()


def test_systemd_unit_enriches_to_file_and_stops_cleanly(env, tmp_path):
    log, out = tmp_path / "app.log", tmp_path / "app.enriched.ndjson"
    log.touch()
    exec_start = SYSTEMD.split("=", 1)[1].replace("/var/log/app.log", str(log)).replace("/var/log/app.enriched.ndjson", str(out))
    # systemd runs ExecStart as argv (here: /bin/sh -c '...') and stops the unit by
    # sending SIGTERM to every process in its control group.
    proc = subprocess.Popen(["/bin/sh", "-c", exec_start.split("'")[1]], env=env, start_new_session=True,
                            stderr=subprocess.PIPE)
    try:
        time.sleep(1.0)
        _append(log, APP_LINES)
        written = _wait_for_lines(out, len(APP_LINES))
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
    events = [json.loads(x) for x in written]
    assert [e["message"] for e in events] == APP_LINES
    assert events[1]["errkb"]["url"].startswith(f"{SITE}/errors/vllm-project/vllm/")
    err = proc.stderr.read().decode()
    assert "Traceback" not in err
    assert "errkb enrich: 3 lines, 1 matched" in err  # counters reach the journal (stderr) at stop


def test_vector_sidecar(env, tmp_path):
    # What Vector's console sink writes with encoding.codec = "json" (file source fields).
    events = [
        {"file": "/var/log/app.log", "host": "web-1", "message": m, "source_type": "file",
         "timestamp": f"2026-12-02T10:00:0{i}.000000Z"}
        for i, m in enumerate(APP_LINES)
    ]
    result = run_stage(errkb_side(VECTOR_SIDECAR), [json.dumps(e, separators=(",", ":")) for e in events], env, tmp_path)
    out = [json.loads(x) for x in result.stdout.decode().split("\n")[:-1]]
    assert [{k: v for k, v in o.items() if k != "errkb"} for o in out] == events
    assert ["errkb" in o for o in out] == [False, True, False]


def test_fluent_bit_chain(env, tmp_path):
    # What Fluent Bit's stdout output writes with Format json_lines: the date key and the tail input's "log".
    records = [{"date": 1764669600.0 + i, "log": m} for i, m in enumerate(APP_LINES)]
    result = run_stage(errkb_side(FLUENT_CHAIN), [json.dumps(r, separators=(",", ":")) for r in records], env, tmp_path)
    out = [json.loads(x) for x in result.stdout.decode().split("\n")[:-1]]
    assert [{k: v for k, v in o.items() if k != "errkb"} for o in out] == records
    assert [o.get("errkb", {}).get("id") for o in out] == [None, SEED_ID, None]


def test_logstash_pipe_output_keeps_only_known_errors(env, tmp_path):
    # What Logstash's json_lines codec writes for an event (ECS fields, nested objects).
    events = [
        {"@timestamp": f"2026-12-02T10:00:0{i}.000Z", "@version": "1", "message": m,
         "host": {"name": "web-1"}, "log": {"file": {"path": "/var/log/app.log"}}, "event": {"original": m}}
        for i, m in enumerate(APP_LINES)
    ]
    target = tmp_path / "app.known-errors.ndjson"
    command = LOGSTASH_OUT.split('command => "', 1)[1].split('"', 1)[0]
    run_stage(command.replace("/var/log/app.known-errors.ndjson", str(target)), [json.dumps(e) for e in events], env, tmp_path)
    run_stage(command.replace("/var/log/app.known-errors.ndjson", str(target)), [json.dumps(events[1])], env, tmp_path)
    kept = [json.loads(x) for x in target.read_text().split("\n")[:-1]]  # appended, one event per line
    assert len(kept) == 2
    for k in kept:
        assert {key: v for key, v in k.items() if key != "errkb"} == events[1]
        assert k["errkb"]["id"] == SEED_ID
