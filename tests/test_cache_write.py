"""errkb.cache's one atomic write: readers see the old file or the whole new one."""

from __future__ import annotations

import os

import pytest

from errkb import cache


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path):
    target = tmp_path / "out.parquet"
    target.write_bytes(b"old")
    with pytest.raises(RuntimeError), cache.replacing(target, suffix=".tmp.parquet") as tmp:
        assert tmp.parent == tmp_path and tmp.name.endswith(".tmp.parquet")
        tmp.write_bytes(b"half")
        raise RuntimeError("writer failed")
    assert target.read_bytes() == b"old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.parquet"]


def test_cache_files_are_private_and_outputs_are_made_as_open_makes_them(tmp_path):
    umask = os.umask(0o022)
    try:
        cache.write_atomic(tmp_path / "c.idx", b"x")
        with cache.replacing(tmp_path / "out.csv", mode=0o666) as tmp:
            tmp.write_bytes(b"a,b\n")
    finally:
        os.umask(umask)
    assert (tmp_path / "c.idx").stat().st_mode & 0o777 == 0o600
    assert (tmp_path / "out.csv").stat().st_mode & 0o777 == 0o644
    assert (tmp_path / "out.csv").read_bytes() == b"a,b\n"


def test_a_keyed_folder_reads_back_what_it_sealed_and_nothing_else(tmp_path):
    folder = cache.KeyedFolder(tmp_path, "kb-v1-", "abc")
    old = cache.KeyedFolder(tmp_path, "kb-v1-", "old")
    old.put("a", b"stale")
    assert folder.put("a", b"fresh") == folder.file("a")
    assert not old.path.exists()  # other keys' folders are dropped on the first write
    assert folder.read("a") == b"fresh"
    folder.file("a").write_bytes(b"frosh")  # same size, other bytes
    assert folder.read("a") is None
    folder.put("a", b"fresh")
    folder.discard("a")
    assert folder.read("a") is None
