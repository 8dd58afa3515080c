"""Variants as data: other wordings of a record's raise site across its project's releases
(``data/variants/<record-id>.json``, built by ``errkb variants build``: errkb.mine.variants).

This module reads them and turns them into entries the matcher indexes with the records;
each is linted again when read, so a hand-edited file cannot add a pattern that matches
almost anything, or the record's own message.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from errkb.errors import ErrkbError

VARIANTS_DIR = "variants"
# Variants are found by a similarity, not written by a person: they must pin down more
# literal text than a record's pattern must (lint E203's bar) to be used at all.
MIN_VARIANT_LITERALS = 16
# drift's "reworded" is the closest message in the recorded file (similarity >= 0.6): a
# sibling error of the same file ("LoRA is not supported with chunked prefill yet" for
# "... with quantized models yet") passes that. A variant must be the same raise site:
# in the recorded function (when the record names one) and much closer in wording.

class VariantsError(ErrkbError):
    """Variants cannot be built or read: unknown record, unreadable release, bad file."""

    def __init__(self, message: str, where: str | None = "errkb variants"):
        super().__init__(message, where)


def lint_variant(pattern: str, example: str, record_message: str | None) -> str | None:
    """Why the variant pattern must not be used (a lint code and reason), or None."""
    from errkb.records.lint import self_match_normalised
    from errkb.text import patterns

    analysis = patterns.analyze(pattern, translate=False)
    if analysis.compile_error:
        return f"E201 does not compile: {analysis.compile_error}"
    if analysis.too_costly:
        return f"E207 {analysis.too_costly}"
    if analysis.matches_empty:
        return "E203 matches the empty string"
    if analysis.too_generic or analysis.literal_chars < MIN_VARIANT_LITERALS:
        return f"E203 pins down only {analysis.literal_chars} literal characters (a variant needs {MIN_VARIANT_LITERALS})"
    if self_match_normalised(analysis, example) is not True:
        return "E202 does not match its own template example"
    if record_message is not None and self_match_normalised(analysis, record_message) is not False:
        return "matches the record's current message (not another wording)"
    return None


def version_key(version: str) -> tuple:
    """Orders release versions: ``0.10.1`` after ``0.9.2``."""
    return tuple(int(p) if p.isdigit() else -1 for p in re.split(r"[.+]", version))


def relation(variant: dict, record_releases: list[str]) -> str:
    """"older" or "newer" when every release of the variant's wording comes before (after)
    every scanned release that raises the record's own wording; else "other" (the two
    alternate, or no scanned release raises the record's wording)."""
    if not record_releases or not variant.get("first") or not variant.get("last"):
        return "other"
    own = sorted(map(version_key, record_releases))
    if version_key(variant["last"]) < own[0]:
        return "older"
    if version_key(variant["first"]) > own[-1]:
        return "newer"
    return "other"


def read_folder(folder: Path) -> dict[str, dict]:
    """Every ``<record-id>.json`` of a variants folder, by record id (none if absent)."""
    out: dict[str, dict] = {}
    if not folder.is_dir():
        return out
    for path in sorted(folder.glob("*.json")):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            out[str(data["record_id"])] = data
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise VariantsError(f"unreadable variants file: {e}", str(path)) from None
    return out


def bundled_folder() -> Path | None:
    from errkb.resources import data_dir

    try:
        return data_dir() / VARIANTS_DIR
    except FileNotFoundError:
        return None


def folder_for(folder: Path | None = None) -> Path | None:
    """The variants folder in use: ``folder``, else ``$ERRKB_VARIANTS_DIR``, else the bundled one."""
    if folder is None and os.environ.get("ERRKB_VARIANTS_DIR"):
        folder = Path(os.environ["ERRKB_VARIANTS_DIR"])
    return folder if folder is not None else bundled_folder()


def signature(folder: Path | None = None) -> str:
    """A short hash of the variants folder's files (names, sizes, times): part of the
    knowledge base's cache key, so a changed variants file rebuilds the view.

    CRC-32 and Adler-32 of that listing (64 bits): a key that changes with the files,
    not a defence against anyone; zlib's checksums spare every cold ``errkb explain``
    loading OpenSSL for hashlib (~2.5 ms)."""
    import zlib

    folder = folder_for(folder)
    listing = b""
    if folder is not None and folder.is_dir():
        for path in sorted(folder.glob("*.json")):
            try:
                st = path.stat()
            except OSError:
                continue
            listing += f"{path.name}\0{st.st_size}\0{st.st_mtime_ns}\n".encode()
    return f"{zlib.crc32(listing):08x}{zlib.adler32(listing):08x}"


def variant_entries(records: list[dict], folder: Path | None = None) -> list[dict]:
    """Pseudo-records the matcher indexes for the variants of ``records``: the record's
    id, slug, repo and class with the variant's pattern and a ``_variant`` field."""
    folder = folder_for(folder)
    if folder is None or not folder.is_dir():
        return []
    by_id = read_folder(folder)
    out = []
    for record in records:
        data = by_id.get(str(record.get("id")))
        if not data:
            continue
        record_releases = data.get("record_releases") or []
        for v in data.get("variants", []):
            pattern = v.get("pattern")
            # Linted again at load: a hand-edited file must not add a generic pattern.
            if not isinstance(pattern, str) or lint_variant(pattern, _example(v), record.get("errorMessage")) is not None:
                continue
            out.append({
                "id": record.get("id"), "slug": record.get("slug"), "repo": record.get("repo"),
                "errorClass": record.get("errorClass"), "severity": record.get("severity"),
                "filePath": record.get("filePath"), "messagePattern": pattern,
                "_variant": {"releases": list(v.get("releases", [])), "first": v.get("first"), "last": v.get("last"),
                             "relation": relation(v, record_releases),
                             "project": (record.get("repo") or "").rsplit("/", 1)[-1]},
            })
    return out


def _example(variant: dict) -> str:
    """A message the variant's template produces (stored when it was built)."""
    return variant.get("example") or variant.get("message_template") or ""
