"""The sandbox hides the stores in errkb's cache folder: the folder it looks in is the one
errkb.cache.cache_root() names (the one place that says where caches live)."""

from __future__ import annotations

import pytest

from errkb.cache import cache_root
from errkb.verify import sandbox


@pytest.mark.parametrize("value", ["~/errkb-cache-here", "rel-cache", None])
def test_the_sandbox_hides_the_stores_of_the_cache_folder_errkb_uses(monkeypatch, tmp_path, value):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.delenv("ERRKB_DB", raising=False)
    if value is None:
        monkeypatch.delenv("ERRKB_CACHE_DIR", raising=False)
    else:
        monkeypatch.setenv("ERRKB_CACHE_DIR", value)
    store = cache_root() / "errkb.duckdb"
    store.parent.mkdir(parents=True)
    store.write_bytes(b"")
    assert str(store) in sandbox._store_files()
