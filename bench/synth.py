"""Schema-valid, lint-clean variants of real records, for benchmarks and tests.

A variant keeps everything of its real record (source window, raise line, prose)
and differs in id, slug, message and pattern, so N variants are N distinct records
a store, a matcher or a site must handle as such.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Iterator
from pathlib import Path

from errkb.records.read import read_records


def variant(record: dict, i: int) -> dict:
    rec = copy.deepcopy(record)
    tail = f" (variant {i})"
    pattern = rec["messagePattern"]
    anchored = pattern.endswith("$") and not pattern.endswith("\\$")
    core = pattern[:-1] if anchored else pattern
    rec["messagePattern"] = core + tail.replace("(", "\\(").replace(")", "\\)") + ("$" if anchored else "")
    rec["errorMessage"] = rec["errorMessage"] + tail
    rec["id"] = hashlib.sha256(f"{rec['repo']}\n{rec['filePath']}\n{rec['messagePattern']}".encode()).hexdigest()[:16]
    rec["slug"] = f"{rec['slug'][:40].rstrip('-')}-v{i}"
    return rec


def real_records(data: Path) -> list[dict]:
    return [item.record for item in read_records([data]) if item.ok]


def variants(records: list[dict], n: int) -> Iterator[dict]:
    for i in range(n):
        yield variant(records[i % len(records)], i)


def write_variants(path: Path, records: list[dict], n: int, version: str = "2026-12-02T00:00:00.000Z") -> Path:
    with open(path, "w", encoding="utf-8") as f:
        for rec in variants(records, n):
            f.write(json.dumps({"record": rec, "datasetVersion": version}, ensure_ascii=False) + "\n")
    return path
