"""Native code only loads caches errkb wrote (issue 26, "Caches").

(Before errkb authenticated what it hands to Hyperscan, seeds 0, 7 and 25 of
``forge_native`` each made every later ``errkb explain`` miss the record it should find,
and byte changes like them crash a scan with SIGSEGV.)

Hyperscan's deserialiser trusts its input: crafted bytes in ``matcher.idx`` with the
CRC sidecar recomputed crashed every ``errkb explain`` with SIGSEGV, and damage whose
sidecar was recomputed was never rebuilt. The tests damage the cache as whoever can
write its folder would (random bytes, sidecar recomputed, the old MAC kept or dropped)
and run ``errkb explain`` for real, in a subprocess under a hard timeout: the answer is
the right one, nothing crashes, and the cache is sound again afterwards.
"""

from __future__ import annotations

import json
import os
import random
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

from errkb import cache
from tests.support import REPO, SEED_ID, SEED_MESSAGE, build_store

hyperscan = pytest.importorskip("hyperscan", reason="the native prefilter needs hyperscan")


def explain(db: Path, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "errkb", "explain", "--json", "--db", str(db), SEED_MESSAGE],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=120)


@pytest.fixture
def built(tmp_path):
    db = build_store(tmp_path / "store.duckdb")
    env = {**os.environ, "PYTHONPATH": str(REPO), "ERRKB_CACHE_DIR": str(tmp_path / "cache"),
           "ERRKB_CACHE_KEY": str(tmp_path / "config" / "cache.key"), "NO_COLOR": "1"}
    env.pop("ERRKB_DB", None)
    first = explain(db, env)
    assert first.returncode == 0, first.stderr
    [index] = (tmp_path / "store.duckdb.cache").glob("kb-v*/matcher.idx")
    return db, env, index


def _header(data: bytes) -> dict:
    from errkb.match.index_file import MAGIC

    n_blob, _ = struct.unpack_from("<QQ", data, len(MAGIC))
    start = len(MAGIC) + 16
    return {**json.loads(data[start:start + n_blob]), "_end": start + n_blob}


def native_span(data: bytes) -> tuple[int, int]:
    """Where the literal prefilter's Hyperscan database lies in an index file."""
    header = _header(data)
    assert header["prefilter"] == "hyperscan" and header["blobs"][0] > 0
    return header["_end"], header["_end"] + header["blobs"][0]


def recompute_crc(index: Path, keep_mac: bool) -> None:
    """What an attacker who can write the folder can do: a CRC that matches."""
    data = index.read_bytes()
    fields = (index.parent / (index.name + ".sum")).read_text().split()
    line = f"crc32 {len(data)} {zlib.crc32(data):08x}" + (f" {fields[3]} {fields[4]}" if keep_mac and len(fields) == 5 else "")
    (index.parent / (index.name + ".sum")).write_text(line + "\n")


def answered_right(run: subprocess.CompletedProcess) -> None:
    assert run.returncode == 0, (run.returncode, run.stderr[-2000:])
    out = json.loads(run.stdout)
    assert out["matched"] and out["matches"][0]["id"] == SEED_ID
    assert "internal error" not in run.stderr and "Traceback" not in run.stderr


def damage(index: Path, where: str, rng: random.Random) -> None:
    data = bytearray(index.read_bytes())
    if where == "native":  # a well-formed file whose Hyperscan bytes are garbage
        a, b = native_span(bytes(data))
        data[a:b] = rng.randbytes(b - a)
    elif where.startswith("forged"):  # Hyperscan's own checksum recomputed too
        forge_native(data, random.Random(int(where.split("-")[1])))
    elif where == "entries":  # the JSON rows the matcher decodes lazily, on first use
        _, b = native_span(bytes(data))
        size = _header(bytes(data))["blobs"][1]
        data[b:b + size] = bytes(rng.choice(b'{}[]",:0aZ\\') for _ in range(size))
    elif where == "whole":
        data = bytearray(rng.randbytes(len(data)))
    elif where == "tail":
        a, _ = native_span(bytes(data))
        data[a:] = rng.randbytes(len(data) - a)
    index.write_bytes(bytes(data))


@pytest.mark.parametrize("keep_mac", [True, False], ids=["old-mac-kept", "mac-dropped"])
@pytest.mark.parametrize("where", ["native", "forged-0", "forged-7", "forged-25", "entries", "whole", "tail"])
def test_garbage_in_the_index_with_recomputed_checksums_is_rebuilt_not_run(built, where, keep_mac, monkeypatch):
    db, env, index = built
    rng = random.Random(f"{where}{keep_mac}")
    damage(index, where, rng)
    recompute_crc(index, keep_mac)
    run = explain(db, env)
    if where == "entries" and run.returncode == 2:
        # Rows decoded on first use cannot be checked at load (a cold call reads a handful
        # of 10,000): the call that finds one says so in one line, and the next rebuilds.
        assert "damaged matcher index" in run.stderr and "internal error" not in run.stderr, run.stderr
        assert len(run.stderr.strip().splitlines()) == 1
        run = explain(db, env)
    answered_right(run)
    # Rebuilt and sealed again under the user's key: the next call trusts it and answers the same.
    monkeypatch.setenv("ERRKB_CACHE_KEY", env["ERRKB_CACHE_KEY"])
    monkeypatch.setattr(cache, "_key_cache", [])
    data = index.read_bytes()
    a, b = native_span(data)
    assert cache.vouched(index, [data[a:b]])
    answered_right(explain(db, env))


def test_a_key_others_can_read_vouches_for_nothing(tmp_path, monkeypatch):
    key = tmp_path / "cache.key"
    monkeypatch.setenv("ERRKB_CACHE_KEY", str(key))
    monkeypatch.setattr(cache, "_key_cache", [])
    target = tmp_path / "f.idx"
    target.write_bytes(b"native bytes")
    cache.seal(target, native=[b"native bytes"])
    assert key.stat().st_mode & 0o777 == 0o600
    assert cache.vouched(target, [b"native bytes"])
    assert not cache.vouched(target, [b"native bytez"])
    key.chmod(0o644)
    monkeypatch.setattr(cache, "_key_cache", [])
    assert not cache.vouched(target, [b"native bytes"])


def _hs_crc(data: bytes) -> int:
    """Hyperscan's checksum over a serialised database's bytecode: CRC-32C (Castagnoli),
    seeded with 0 and without the usual final inversion."""
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    crc = 0
    for byte in data:
        crc = table[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc


# hs_serialize_database's header: magic, version, length, platform (u64), crc, two reserved
_HS_HEADER = struct.Struct("<IIIQIII")


def forge_native(data: bytearray, rng: random.Random) -> None:
    """A few bytes of the bytecode changed and Hyperscan's own checksum recomputed:
    Hyperscan's deserialiser accepts it, and scanning with such bytes crashed the
    process with SIGSEGV (found by fuzzing: about one seed in ten)."""
    a, _ = native_span(bytes(data))
    magic, version, length, platform, crc, r0, r1 = _HS_HEADER.unpack_from(data, a)
    body = a + _HS_HEADER.size
    assert _hs_crc(bytes(data[body:body + length])) == crc  # the format is the one this test knows
    for _ in range(rng.choice([1, 2, 4, 8])):
        data[body + rng.randrange(min(length, 1024))] = rng.randrange(256)
    _HS_HEADER.pack_into(data, a, magic, version, length, platform, _hs_crc(bytes(data[body:body + length])), r0, r1)
