"""Full records for the speed benchmarks: the shape a user's store really holds.

Each record is the seed record (``data/vllm-project/vllm/000_82135fca3cf8df92.txt``)
with every text kept at its real size: the 37-line source excerpt around the raise,
documentation, trigger scenarios, solutions, example fix, validation code, prevention
tips and tags. Only what makes it a distinct record changes: id, slug, message,
pattern, error class and where it is raised, taken from one real message pattern of
``shared/bench-corpus/patterns.jsonl.gz``. The excerpt's raise line holds the record's
own message, so every lint rule passes. (Minimal records, with a one-line excerpt,
made the benchmarks look faster than what a user meets: issue 18.)
"""

from __future__ import annotations

import copy
import gzip
import hashlib
import json
import re
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SEED_FILE = ROOT / "data" / "vllm-project" / "vllm" / "000_82135fca3cf8df92.txt"
_GROUP = re.compile(r"\(\.\+\?\)")
_ESCAPE = re.compile(r"\\(.)", re.S)


def seed() -> tuple[dict, str]:
    """The seed record and its dataset version."""
    wrapper = json.loads(SEED_FILE.read_text(encoding="utf-8"))
    return wrapper["record"], wrapper["datasetVersion"]


def render(pattern: str) -> str:
    """A message the corpus pattern matches: each ``(.+?)`` becomes ``value_1``."""
    return _ESCAPE.sub(r"\1", _GROUP.sub("value_1", pattern))


def full_record(row: dict, template: dict) -> dict | None:
    """One full record for a corpus row, or None when the row's pattern cannot make one
    (it does not match its rendered message, or the message is not one line of words)."""
    pattern = row["pattern"]
    message = render(pattern)
    if "\n" in message or not re.search(r"[A-Za-z]{2,}", message):
        return None
    try:  # the message is short and rendered from the pattern, so `re` is safe here
        if re.search(pattern, message) is None:
            return None
    except re.error:
        return None
    error_class = row["error_class"] if re.fullmatch(r"[A-Za-z_][\w.]*", row.get("error_class") or "") else "RuntimeError"
    path, _, line = row["source"].rpartition(":")
    path = "corpus/" + path.lstrip("/")
    rec = copy.deepcopy(template)
    # The seed's 37-line window, its raise statement replaced by this record's.
    lines = template["sourceCode"].split("\n")
    raise_at = template["lineNumber"] - template["sourceCodeStart"]
    lines[raise_at:raise_at + 4] = [f"        raise {error_class}({json.dumps(message)})", "", "    # context", "    pass"]
    start = max(int(line or 1), raise_at + 1) - raise_at
    line_number = start + raise_at
    sha = template["analyzedSha"]
    rec.update(
        id=hashlib.sha256(f"bench\n{row['id']}\n{pattern}".encode()).hexdigest()[:16],
        repo="errkb-bench/corpus",
        slug=f"pattern-{row['id']}",
        errorMessage=message,
        messagePattern=pattern,
        errorClass=error_class,
        filePath=path,
        lineNumber=line_number,
        sourceCode="\n".join(lines),
        sourceCodeStart=start,
        sourceCodeEnd=start + len(lines) - 1,
        githubUrl=f"https://github.com/errkb-bench/corpus/blob/{sha}/{path}#L{start}-L{start + len(lines) - 1}",
    )
    return rec


def corpus_records(corpus: Path, n: int, template: dict | None = None) -> Iterator[dict]:
    """The first ``n`` full records made from the corpus's patterns, in corpus order."""
    template = template or seed()[0]
    made = 0
    with gzip.open(corpus / "patterns.jsonl.gz", "rt", encoding="utf-8") as f:
        for text in f:
            if made >= n:
                return
            rec = full_record(json.loads(text), template)
            if rec is not None:
                made += 1
                yield rec
