"""Where the store is, without DuckDB or the ingest machinery: ``$ERRKB_DB``, an explicit
path, or the per-user cache store, and the small JSON stamp kept next to it.

A cold ``errkb explain --db PATH`` needs only this to find its cached view
(``errkb.kb``); ``errkb.store.db`` re-exports these names (``default_db_path`` is ``errkb.cache``'s).
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

from errkb.cache import default_db_path
from errkb.resources import data_dir

# Bump when the table layout changes; a cache store of another layout is rebuilt.
LAYOUT_VERSION = "2"


def stamp_path(db_path: Path) -> Path:
    return db_path.with_name(db_path.name + ".stamp.json")


def read_stamp(db_path: Path) -> dict | None:
    """The stamp written after each ingest: ``{"dataset_hash": ..., ...}``; no DuckDB needed."""
    try:
        return json.loads(stamp_path(db_path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def resolve_db_path(path: str | os.PathLike | None) -> tuple[Path, bool]:
    """(path, is_default_cache) for an explicit path, ``$ERRKB_DB`` or the cache."""
    if path is None and os.environ.get("ERRKB_DB"):
        path = os.environ["ERRKB_DB"]
    if path is None:
        return default_db_path(), True
    return Path(path), False


# errkb.records.read.SIDECAR_DIRS (tests/test_store_paths.py keeps them equal): folders
# of errkb's own files next to the bundled records, not records.
_SIDECAR_DIRS = ("proofs", "findings", "variants", "sites")


def bundled_store_fresh(db_path: Path) -> bool:
    """True when the cache store was built from the bundled data/ as it is now (its stamp
    lists every bundled record file with the size and mtime it has): the quick check of
    ``errkb.store.db.ensure_bundled_store``, without importing the store module.

    The walk mirrors ``records.read.iter_files`` for an ordinary tree; where it does not
    (a file that is not regular, a folder errkb cannot read) the answer is False and the
    store module checks as it always did. False costs time, never a stale answer."""
    stamp = read_stamp(db_path) or {}
    if stamp.get("layout") != LAYOUT_VERSION or not db_path.exists():
        return False
    root = data_dir()
    manifest = []
    try:
        tops = sorted(p for p in root.iterdir() if not p.name.startswith(".") and p.name not in _SIDECAR_DIRS)
        for top in tops:
            if not top.is_dir():
                files = [top]
            else:
                files = []
                for folder, dirs, names in os.walk(top):
                    dirs[:] = sorted(d for d in dirs if not d.startswith(".") and not (folder == str(top) and d in _SIDECAR_DIRS))
                    files += [Path(folder) / name for name in sorted(names) if not name.startswith(".")]
            for f in files:
                st = f.stat()
                if not stat.S_ISREG(st.st_mode):
                    return False
                manifest.append([str(f.relative_to(root)), st.st_size, st.st_mtime_ns])
    except OSError:
        return False
    return stamp.get("bundled_manifest") == manifest
