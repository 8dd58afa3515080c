"""Where the bundled data/ and templates/ are, from a checkout or an installed wheel.
(Where caches live is ``errkb.cache``.)

The product card puts data/ and templates/ at the top level of the repository; the
wheel carries them as errkb/_bundled/{data,templates} (see pyproject.toml), so a
plain, non-editable `pip install .` works outside a checkout too.
"""

from __future__ import annotations

from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent


def _bundled(name: str) -> Path:
    installed = _PACKAGE / "_bundled" / name
    if installed.is_dir():
        return installed
    checkout = _PACKAGE.parent / name
    if checkout.is_dir():
        return checkout
    raise FileNotFoundError(f"errkb: bundled folder {name!r} not found (looked in {installed} and {checkout})")


def data_dir() -> Path:
    return _bundled("data")


def templates_dir() -> Path:
    return _bundled("templates")


def schema_path() -> Path:
    return _PACKAGE / "records" / "record-v2.schema.json"
