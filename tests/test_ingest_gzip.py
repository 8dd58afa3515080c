"""Ingest and lint read a gzip-compressed file as what it holds (upstream dumps come as
records.jsonl.gz): streamed, in bounded memory, damage kept as a reject."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys

from click.testing import CliRunner

from errkb.cli import cli
from errkb.store.db import Store
from tests.support import variant

FIX = " (fix: make the file valid UTF-8 JSON: a record object, a wrapper, an array or JSON Lines)"


def run(*args, **kw):
    return CliRunner().invoke(cli, [str(a) for a in args], **kw)


def _lines(records) -> bytes:
    return b"".join(json.dumps({"record": r, "datasetVersion": "v"}).encode() + b"\n" for r in records)


def test_a_gzip_file_of_records_is_ingested_whatever_its_name(db_path, tmp_path, seed_record):
    records = [seed_record, variant(seed_record, 1), variant(seed_record, 2)]
    path = tmp_path / "dump.bin"  # known by its magic bytes, not its name
    path.write_bytes(gzip.compress(_lines(records), mtime=0))
    result = run("ingest", "--db", db_path, path)
    assert result.exit_code == 0, result.output
    assert result.stdout == "3 new, 0 updated, 0 unchanged, 0 rejected\n"
    with Store.open(db_path) as store:
        assert {r["id"] for r in store.records()} == {r["id"] for r in records}


def test_gzip_on_stdin_is_read_too(db_path, seed_record):
    result = run("ingest", "--db", db_path, "-", input=gzip.compress(_lines([seed_record])))
    assert result.exit_code == 0, result.output
    assert result.stdout == "1 new, 0 updated, 0 unchanged, 0 rejected\n"


def test_a_gzip_file_cut_short_keeps_the_records_before_the_cut_and_rejects_the_rest(db_path, tmp_path, seed_record):
    records = [variant(seed_record, i) for i in range(40)]
    whole = gzip.compress(_lines(records), mtime=0)
    path = tmp_path / "cut.jsonl.gz"
    path.write_bytes(whole[: len(whole) * 3 // 4])
    result = run("ingest", "--db", db_path, path)
    assert result.exit_code == 1
    new = int(result.stdout.split(" new")[0])
    assert 0 < new < 40, result.stdout
    reasons = [r["reasons"][0] for r in json.loads(run("rejects", "--db", db_path, "--json").stdout)]
    cut = [r for r in reasons if "the gzip data is corrupt or cut short after" in r]
    assert len(cut) == 1 and cut[0].startswith(f"{path}:{new + 1}:"), reasons
    assert cut[0].endswith("(Compressed file ended before the end-of-stream marker was reached): "
                           "the rest of the file is not read" + FIX)


def test_a_gzip_bomb_is_one_reject_in_bounded_memory(tmp_path):
    bomb = tmp_path / "bomb.jsonl.gz"
    with gzip.open(bomb, "wb", compresslevel=9) as f:  # 512 MiB of NULs in ~0.5 MB, written in pieces
        for _ in range(512):
            f.write(bytes(1 << 20))
    # VmHWM: this process's own peak (getrusage's maxrss survives exec, so it would count pytest's).
    code = ("import sys\nfrom errkb.cli import cli\n"
            "try:\n    cli(['lint', sys.argv[1]])\nexcept SystemExit:\n"
            "    print(next(l for l in open('/proc/self/status') if l.startswith('VmHWM')), file=sys.stderr)\n"
            "    raise\n")
    proc = subprocess.run([sys.executable, "-c", code, str(bomb)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1, proc.stderr
    # read while it expands at most MAX_GUNZIP_RATIO times (past its first 64 MiB), so the
    # time stays bounded by the file's size too: the rest is a second reject saying so
    binary, expands = proc.stdout.splitlines()
    assert binary == (f"{bomb}:1:1: E100 unreadable invalid JSON: binary data (NUL bytes), not JSON text "
                      "(the reject keeps the first 1 MiB of 65 MiB)" + FIX)
    assert expands.startswith(f"{bomb}:1:") and "E100 unreadable the gzip data expands over 100 times its size" in expands
    assert "2 error(s), 0 warning(s)" in proc.stderr
    peak_kib = int(proc.stderr.split("VmHWM:", 1)[1].split()[0])
    assert peak_kib < 256 * 1024, f"peak RSS {peak_kib} KiB: the file was held whole"
