"""One cache folder for every part of errkb, absolute even when the variable is relative:
sandboxed runs start in a folder of their own, where a relative path names something else."""

from __future__ import annotations

from errkb.cache import cache_root
from errkb.store.db import default_db_path


def test_a_relative_errkb_cache_dir_is_made_absolute(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ERRKB_CACHE_DIR", ".cache-here")
    assert cache_root() == tmp_path / ".cache-here"
    assert default_db_path() == tmp_path / ".cache-here" / "errkb.duckdb"


def test_xdg_cache_home_then_home(monkeypatch, tmp_path):
    monkeypatch.delenv("ERRKB_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_root() == tmp_path / "xdg" / "errkb"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache_root() == tmp_path / "home" / ".cache" / "errkb"
