"""Where the store is, without DuckDB or the ingest machinery: ``$ERRKB_DB``, an explicit
path, or the per-user cache store, and the small JSON stamp kept next to it.

A cold ``errkb explain --db PATH`` needs only this to find its cached view
(``errkb.kb``); ``errkb.store.db`` re-exports these names.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from errkb.resources import cache_root

# Bump when the table layout changes; a cache store of another layout is rebuilt.
LAYOUT_VERSION = "2"


def default_db_path() -> Path:
    return cache_root() / "errkb.duckdb"


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
