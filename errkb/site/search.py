"""The site's search data: each record as site.js searches it (its text, its pattern
in the browser's dialect, its filters, its variants), in chunks of scripts that
``index.html`` loads with ``<script src>`` (``fetch()`` does not work from ``file://``).
"""

from __future__ import annotations

import hashlib
import json
import re

from errkb.match.js_regex import js_pattern
from errkb.match.near import record_words
from errkb.match.prefix import KEY_CHARS, opening_literal
from errkb.records.proofs import strength as proof_strength
from errkb.records.view import RecordView
from errkb.site.text import excerpt, script_json

# Character classes longer than this are stored once in the search index and
# referenced from each pattern (Python's Unicode \w alone is ~12 kB).
SHARED_CLASS_MIN = 256
# The search data lives in chunks of about this many bytes (search/<k>-<hash>.js), not
# in index.html: a chunk is a script that hands its records to site.js, and <script
# src> works from file://, where fetch() and XMLHttpRequest of local files do not.
SEARCH_CHUNK_BYTES = 1 << 20


_CLASS_RE = re.compile(r"\[\^?(?:\\u\{[0-9a-f]+\}|[^\]\\])*\]")


class SharedClasses:
    """Long character classes stored once in the search index, referenced as ``\\p{Xn}``
    (no emitted source contains ``\\p`` otherwise, so the placeholder is unambiguous)."""

    def __init__(self) -> None:
        self.classes: list[str] = []
        self._index: dict[str, int] = {}

    def compress(self, source: str) -> str:
        def sub(m: re.Match) -> str:
            body = m.group(0)
            if len(body) < SHARED_CLASS_MIN:
                return body
            if body not in self._index:
                self._index[body] = len(self.classes)
                self.classes.append(body)
            return "\\p{X%d}" % self._index[body]

        return _CLASS_RE.sub(sub, source)


def search_entry(e, classes: SharedClasses) -> dict:
    """One record as the search sees it (site.js): its text, its pattern, its filters and
    what a result line shows."""
    r = RecordView.of(e.record)
    text = "\n".join([r.error_message, r.error_class, r.slug, r.documentation, r.trigger_scenarios,
                      r.common_situations, *r.solutions, *r.tags])
    item = {
        "id": r.id,
        "sl": r.slug,
        "u": e.path,
        "m": r.error_message,
        "t": text.lower(),
        "p": classes.compress(e.js.source) if e.js.source is not None else None,
        "gp": e.js.plan,
        "l": e.js.literals if e.js.ok else [],
        "a": 1 if e.js.ascii_only else 0,
        "r": r.repo,
        "c": r.error_class,
        "s": r.severity,
        "g": sorted(r.tags),
        "st": e.status,
        "pr": e.proof_status,
    }
    if e.proof_status.startswith("proven"):
        how, label = proof_strength(e.proof)
        if how:
            item["ps"] = how  # "strong" | "labelled": what the proof exercised
        if label:
            item["pl"] = label
    opening = opening_literal(e.record["messagePattern"]) if isinstance(e.record.get("messagePattern"), str) else ""
    if len(opening) >= KEY_CHARS:
        item["o"] = opening  # a paste that truly begins the message is this record (errkb.match.prefix)
    shown = excerpt(e.record["errorMessage"])
    if shown != r.error_message:
        item["x"] = shown  # the result line's text, when it is not the message itself
    joined = record_words(e.record)
    if joined is not None:
        item["w"] = joined  # its literal words for near matches (errkb.match.near), NUL for a slot
    found = []
    for v in e.matched_variants or []:
        js = js_pattern(v["messagePattern"])
        if js.ok:
            found.append({"p": classes.compress(js.source) if js.source is not None else None, "gp": js.plan,
                          "l": js.literals, "a": 1 if js.ascii_only else 0, "label": variant_label(v["_variant"], r.slug)})
    if found:
        item["v"] = found  # other releases' wordings, matched exactly like the record's own pattern
    return item


def variant_label(variant: dict, slug: str) -> str:
    """What `errkb explain` says of a variant match (templates/_explain_record.txt.j2):
    ``older wording (vllm 0.2.0–0.5.4) of <slug>``."""
    first, last = variant.get("first"), variant.get("last")
    span = first if first == last else f"{first}–{last}"
    return f"{variant.get('relation') or 'other'} wording ({variant.get('project')} {span}) of {slug}"


def search_chunks(entries: list, chunk_bytes: int = SEARCH_CHUNK_BYTES) -> list[tuple[str, bytes, int]]:
    """The search data as ``(path, script, record count)`` chunks of about ``chunk_bytes``,
    in record order. Each chunk carries its own shared character classes, so it stands
    alone; its name holds a hash of its content, so a browser never mixes a cached chunk
    with a newer index."""
    groups: list[tuple[list[dict], SharedClasses]] = []
    size = chunk_bytes
    for e in entries:
        if size >= chunk_bytes:
            groups.append(([], SharedClasses()))
            size = 0
        items, classes = groups[-1]
        before = sum(len(c) for c in classes.classes)
        item = search_entry(e, classes)
        items.append(item)
        size += len(json.dumps(item, ensure_ascii=False)) + sum(len(c) for c in classes.classes) - before
    out = []
    for k, (items, classes) in enumerate(groups):
        body = f"errkbSearchChunk({k},{script_json({'records': items, 'classes': classes.classes})});\n"
        content = (f"/* errkb search data {k + 1}/{len(groups)}: {len(items)} records. "
                   "Generated by `errkb site build`; loaded by static/site.js. */\n" + body).encode()
        digest = hashlib.sha256(content).hexdigest()[:10]
        out.append((f"search/{k}-{digest}.js", content, len(items)))
    return out
