"""errkb.store.paths: the bundled store's quick freshness check, which a cold `errkb
explain` runs without the store module, agrees with ensure_bundled_store's own."""

from __future__ import annotations

import os

import pytest

from errkb.records.read import SIDECAR_DIRS
from errkb.store import db, paths


def test_the_sidecar_folders_are_the_readers():
    assert paths._SIDECAR_DIRS == SIDECAR_DIRS


@pytest.fixture
def bundled(tmp_path, monkeypatch):
    """A data/ folder with records, nested folders, sidecars and hidden entries."""
    root = tmp_path / "data"
    (root / "owner" / "repo" / "deep").mkdir(parents=True)
    (root / "owner" / "proofs").mkdir()  # a sidecar right under a walked folder: not records
    (root / "proofs").mkdir()
    (root / "owner" / ".hidden").mkdir()
    for rel in ("owner/repo/a.json", "owner/repo/deep/b.json", "owner/proofs/c.json", "owner/.hidden/d.json",
                "owner/repo/.e.json", "proofs/p.json", "top.json"):
        (root / rel).write_text("{}")
    monkeypatch.setattr(db, "data_dir", lambda: root)
    monkeypatch.setattr(paths, "data_dir", lambda: root)
    return root


def _stamp(db_path, manifest):
    db_path.write_bytes(b"")
    db._write_stamp(db_path, bundled_manifest=manifest, layout=db.LAYOUT_VERSION)


def test_fresh_exactly_when_the_store_module_says_so(bundled, tmp_path):
    store = tmp_path / "errkb.duckdb"
    manifest = db._bundled_manifest(bundled)
    assert [m[0] for m in manifest] == ["owner/repo/a.json", "owner/repo/deep/b.json", "top.json"]
    assert not paths.bundled_store_fresh(store)  # no store yet
    _stamp(store, manifest)
    assert paths.bundled_store_fresh(store)
    (bundled / "owner" / "repo" / "a.json").write_text('{"changed": 1}')
    assert not paths.bundled_store_fresh(store)
    _stamp(store, db._bundled_manifest(bundled))
    assert paths.bundled_store_fresh(store)
    (bundled / "owner" / "repo" / "new.json").write_text("{}")
    assert not paths.bundled_store_fresh(store)


def test_anything_unusual_is_left_to_the_store_module(bundled, tmp_path):
    store = tmp_path / "errkb.duckdb"
    os.mkfifo(bundled / "owner" / "repo" / "pipe.json")  # the reader skips it; the quick check does not judge
    _stamp(store, db._bundled_manifest(bundled))
    assert not paths.bundled_store_fresh(store)
    (bundled / "owner" / "repo" / "pipe.json").unlink()
    _stamp(store, db._bundled_manifest(bundled))
    db._write_stamp(store, layout="0")
    assert not paths.bundled_store_fresh(store)
