"""A symbolic link inside --out never makes `errkb site build` write or delete outside it."""

from __future__ import annotations

import os

import pytest

from errkb.site.build import build_site
from errkb.site.output import SiteError
from errkb.store.db import Store
from tests.support import SEED_FILE


@pytest.mark.parametrize("linked", ["errors", "errors/vllm-project"])
def test_a_linked_folder_inside_out_is_refused_and_nothing_outside_changes(tmp_path, linked):
    db = tmp_path / "s.duckdb"
    with Store.open(db) as store:
        store.ingest([SEED_FILE])
        out = tmp_path / "site"
        build_site(store, out)
        outside = tmp_path / "outside"
        outside.mkdir()
        (outside / "keep.txt").write_text("mine")
        real = out / linked
        for p in sorted(real.rglob("*"), reverse=True):
            p.unlink() if p.is_file() else p.rmdir()
        real.rmdir()
        os.symlink(outside, real)
        with pytest.raises(SiteError, match="a symbolic link inside the site folder"):
            build_site(store, out)
    assert sorted(p.name for p in outside.iterdir()) == ["keep.txt"]
    assert (outside / "keep.txt").read_text() == "mine"
