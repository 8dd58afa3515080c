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


def test_release_downloads_live_under_the_cache_root(monkeypatch, tmp_path):
    """`errkb sites add` without $ERRKB_RELEASES_DIR downloads under errkb's cache folder."""
    from errkb.mine.releases import cache_dir

    monkeypatch.delenv("ERRKB_RELEASES_DIR", raising=False)
    monkeypatch.setenv("ERRKB_CACHE_DIR", str(tmp_path / "c"))
    assert cache_dir() == tmp_path / "c" / "releases"
    monkeypatch.setenv("ERRKB_RELEASES_DIR", str(tmp_path / "r"))
    assert cache_dir() == tmp_path / "r"
