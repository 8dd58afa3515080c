"""Where is each record's message raised now? (``errkb drift``)

A record pins an error to a file, a line and a commit; the code moves on. For every
current record of one repo, drift looks for the raise sites of a checkout, an
installed package, a wheel or an sdist whose message template produces the record's
``errorMessage``, and reports:

- ``same``: raised from the recorded file and line (and function, when the record
  names one);
- ``moved``: raised from another file, line or function (the new location is given);
- ``reworded``: not raised any more, but the recorded file has a raise site with a
  close message (a word diff is given);
- ``gone``: not found.

``fix`` writes the moved records again with their new location as new versions
through ingest; the store keeps every earlier version.
"""

from __future__ import annotations

import copy
import difflib
import json
import re
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from errkb.errors import ErrkbError
from errkb.mine.drafts import dataset_timestamp, github_url
from errkb.mine.raise_sites import CONTEXT_LINES, RaiseSite, Scan, scan
from errkb.mine.sources import Provenance, SourceTree

# Word similarity (difflib ratio) above which a message at the recorded site counts
# as a rewording of the record's message rather than a different error.
REWORD_MIN_SIMILARITY = 0.6

_IDENT = re.compile(r"\b[a-z_][a-z0-9]*(?:_[a-z0-9]+)+\b")
_DEF = re.compile(r"^(\s*)(?:async\s+)?def\s+([A-Za-z_][A-Za-z0-9_]*)")
_WORD = re.compile(r"[A-Za-z0-9]{4,}")
_SHA = re.compile(r"^[0-9a-f]{40}$")


class DriftError(ErrkbError):
    """Drift cannot run: unreadable path, no records, --fix without a commit."""

    def __init__(self, message: str, where: str | None = "errkb drift"):
        super().__init__(message, where)


@dataclass
class RecordedFunction:
    name: str
    source: str  # "sourceCode" (a def in the record's window) or "documentation"


@dataclass
class DriftEntry:
    record_id: str
    slug: str
    status: str  # same | moved | reworded | gone
    recorded: dict  # file, line, function, function_source
    current: dict | None = None  # file, line, end_line, function, message, pattern
    changes: list[str] = field(default_factory=list)  # file / line / function
    similarity: float | None = None
    diff: list[dict] | None = None  # reworded: [{"op": "equal|delete|insert", "text": ...}]
    also_raised_at: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    closest: dict | None = None  # gone: the most similar message raised elsewhere
    site: RaiseSite | None = field(default=None, repr=False)

    def as_dict(self) -> dict:
        return {
            "record_id": self.record_id,
            "slug": self.slug,
            "status": self.status,
            "recorded": self.recorded,
            "current": self.current,
            "changes": self.changes,
            "similarity": self.similarity,
            "diff": self.diff,
            "word_diff": word_diff_text(self.diff) if self.diff else None,
            "also_raised_at": self.also_raised_at,
            "closest_elsewhere": self.closest,
            "notes": self.notes,
        }


@dataclass
class DriftReport:
    path: str
    repo: str
    provenance: Provenance
    sha: str | None  # commit the current locations belong to, when known
    entries: list[DriftEntry]
    scan: Scan
    fixed: dict | None = None  # the ingest report of --fix
    notes: list[str] = field(default_factory=list)

    def counts(self) -> dict:
        c = Counter(e.status for e in self.entries)
        return {status: c.get(status, 0) for status in ("same", "moved", "reworded", "gone")}

    @property
    def drifted(self) -> bool:
        return any(e.status != "same" for e in self.entries)

    def as_dict(self) -> dict:
        return {
            "path": self.path,
            "repo": self.repo,
            "source": self.provenance.describe(),
            "version": self.provenance.version,
            "distribution": self.provenance.distribution,
            "sha": self.sha,
            "sha_note": None if self.sha else self.provenance.note,
            "counts": self.counts(),
            "scan": self.scan.summary(),
            "records": [e.as_dict() for e in self.entries],
            "fixed": self.fixed,
            "notes": self.notes,
        }


def drift(store, path: str | Path, repo: str, *, sha: str | None = None, fix: bool = False, now: datetime | None = None,
          progress=None) -> DriftReport:
    """Check every current record of ``repo`` in ``store`` against the code at ``path``."""
    if sha is not None and not _SHA.match(sha):
        raise DriftError(f"--sha {sha!r}: expected the full 40-hex-digit lowercase commit id")
    try:
        tree = SourceTree.open(path)
    except FileNotFoundError as e:
        raise DriftError(str(e)) from None
    provenance = tree.provenance()
    if sha is not None and sha != provenance.sha:
        provenance.note = "commit given by --sha" + (f" (the tree itself says {provenance.sha})" if provenance.sha else "")
    sha = sha or provenance.sha
    if fix and sha is None:
        # Without the commit the new lines belong to, a rewritten githubUrl would
        # point the old commit at new line numbers: refuse rather than write that.
        raise DriftError(f"--fix needs the commit of {path}: {provenance.describe()}")
    records = store.records(repo=repo)
    if not records:
        raise DriftError(f"no records of {repo} in the store {store.path}")

    found = scan(tree, include=mentions_any(records), progress=progress)
    templated = found.templated
    files = {s.file for s in found.sites} | {f for f, _ in found.unparsable}
    prefix = record_path_prefix(records, tree.file_names())
    by_chunk = ChunkIndex(templated)
    texts: dict[str, str | None] = {}

    def file_text(rel: str) -> str | None:
        if rel not in texts:
            texts[rel] = tree.read_text(rel)
        return texts[rel]

    entries = []
    for record in sorted(records, key=lambda r: (r.get("filePath", ""), r.get("lineNumber", 0), r["id"])):
        entries.append(check_record_site(record, prefix, by_chunk, templated, files, file_text))
    report = DriftReport(str(path), repo, provenance, sha, entries, found)
    if provenance.repo and provenance.repo.lower() != repo.lower():
        report.notes.append(f"{path} names {provenance.repo} as its repository, not {repo}")
    if fix:
        report.fixed = _fix(store, report, prefix, file_text, now)
    return report


# ---------------------------------------------------------------- matching


class ChunkIndex:
    """Sites by the longest literal chunk of their template, so a record's message
    is tested only against sites whose literal text it contains."""

    def __init__(self, sites: list[RaiseSite]):
        self.by_key: dict[str, list[RaiseSite]] = {}
        for site in sites:
            chunks = [p for p in site.template.parts if isinstance(p, str)]
            key = max(chunks, key=len)
            self.by_key.setdefault(key, []).append(site)
        self.automaton = None
        try:
            import ahocorasick
        except ImportError:
            return
        automaton = ahocorasick.Automaton()
        for key in self.by_key:
            automaton.add_word(key, key)
        if self.by_key:
            automaton.make_automaton()
            self.automaton = automaton

    def candidates(self, message: str) -> list[RaiseSite]:
        if self.automaton is not None:
            keys = {key for _, key in self.automaton.iter(message)}
        else:
            keys = {key for key in self.by_key if key in message}
        return [site for key in keys for site in self.by_key[key]]


def check_record_site(record: dict, prefix: str, index: ChunkIndex, templated: list[RaiseSite], files: set[str], file_text) -> DriftEntry:
    rec_file = record["filePath"]
    scan_file = rec_file[len(prefix):] if prefix and rec_file.startswith(prefix) else rec_file
    recorded_fn = recorded_function(record)
    entry = DriftEntry(
        record_id=record["id"],
        slug=record["slug"],
        status="gone",
        recorded={
            "file": rec_file,
            "line": record["lineNumber"],
            "function": recorded_fn.name if recorded_fn else None,
            "function_source": recorded_fn.source if recorded_fn else None,
            "message": record["errorMessage"],
        },
    )
    message = record["errorMessage"].strip()
    pattern = record["messagePattern"]
    # Some records keep the traceback's "ValueError: " in front of the message.
    prefix_class = f"{record.get('errorClass', '')}: "
    if message.startswith(prefix_class) and len(message) > len(prefix_class):
        message = message[len(prefix_class):]
    # The template must produce the whole message: a short generic message that
    # merely occurs inside the record's ("... is not supported") is another error.
    hits = [s for s in index.candidates(message) if s.template.pattern() == pattern or s.template.fullmatches(message)]
    if hits:
        def rank(s: RaiseSite):
            return (
                s.file != scan_file,
                s.template.pattern() != pattern,
                not (recorded_fn and s.function_name == recorded_fn.name),
                abs(s.line - record["lineNumber"]),
                s.file,
                s.line,
            )

        hits.sort(key=rank)
        best = hits[0]
        entry.site = best
        entry.current = _location(best, prefix)
        entry.also_raised_at = [f"{prefix}{s.file}:{s.line} ({s.function})" for s in hits[1:]]
        if best.file != scan_file:
            entry.changes.append("file")
        if best.line != record["lineNumber"]:
            entry.changes.append("line")
        function_note = _function_change(recorded_fn, best, file_text)
        if function_note:
            entry.changes.append("function")
            entry.notes.append(function_note)
        entry.status = "moved" if entry.changes else "same"
        return entry

    if scan_file not in files and file_text(scan_file) is None:
        entry.notes.append(f"{rec_file} does not exist in the scanned tree")
    near = [s for s in templated if s.file == scan_file]
    best_site, best_key = None, None
    for site in near:
        ratio = similarity(message, site.template.render())
        same_function = recorded_fn is not None and site.function_name == recorded_fn.name
        key = (ratio, same_function, -abs(site.line - record["lineNumber"]))
        if best_key is None or key > best_key:
            best_site, best_key = site, key
    best_ratio = best_key[0] if best_key else 0.0
    if best_site is not None and best_ratio >= REWORD_MIN_SIMILARITY:
        entry.status = "reworded"
        entry.site = best_site
        entry.current = _location(best_site, prefix)
        entry.similarity = round(best_ratio, 3)
        entry.diff = word_diff(message, best_site.template.display())
        if best_site.line != record["lineNumber"]:
            entry.changes.append("line")
        function_note = _function_change(recorded_fn, best_site, file_text)
        if function_note:
            entry.changes.append("function")
            entry.notes.append(function_note)
        entry.changes.append("message")
        return entry
    elsewhere = _closest(message, templated)
    if elsewhere is not None and elsewhere[1] >= REWORD_MIN_SIMILARITY:
        site, ratio = elsewhere
        # Not the same site, so not "reworded"; but a person fixing the record wants it.
        entry.closest = {
            **_location(site, prefix),
            "similarity": round(ratio, 3),
            "word_diff": word_diff_text(word_diff(message, site.template.display())),
        }
    elif best_site is not None:
        entry.notes.append(
            f"closest message in {rec_file}: line {best_site.line} {best_site.template.display()!r} "
            f"(similarity {best_ratio:.2f}, below {REWORD_MIN_SIMILARITY})"
        )
    return entry


def _closest(message: str, sites: list[RaiseSite]) -> tuple[RaiseSite, float] | None:
    words = set(message.split())
    best: tuple[RaiseSite, float] | None = None
    for site in sites:
        rendered = site.template.render()
        # Cheap bound first: the share of the message's words present at all.
        if len(words & set(rendered.split())) < REWORD_MIN_SIMILARITY * min(len(words), len(set(rendered.split()))):
            continue
        ratio = similarity(message, rendered)
        if best is None or ratio > best[1]:
            best = (site, ratio)
    return best


def _location(site: RaiseSite, prefix: str) -> dict:
    return {
        "file": prefix + site.file,
        "line": site.line,
        "end_line": site.end_line,
        "function": site.function,
        "message": site.template.display(),
        "pattern": site.template.pattern(),
    }


def recorded_function(record: dict) -> RecordedFunction | None:
    """The function a record says raises it: the innermost ``def`` above the raise
    line in its source window, else the first snake_case name its documentation
    uses that does not occur in the window (a window that starts inside the
    function hides its ``def``, while the prose names it)."""
    lines = record.get("sourceCode", "").split("\n")
    at = record.get("lineNumber", 0) - record.get("sourceCodeStart", 0)
    if 0 <= at < len(lines):
        indent = len(lines[at]) - len(lines[at].lstrip())
        for line in reversed(lines[:at]):
            m = _DEF.match(line)
            if m and len(m.group(1)) < indent:
                return RecordedFunction(m.group(2), "sourceCode")
    window = record.get("sourceCode", "")
    for name in _IDENT.findall(record.get("documentation") or ""):
        if not re.search(rf"\b{re.escape(name)}\b", window):
            return RecordedFunction(name, "documentation")
    return None


def _function_change(recorded: RecordedFunction | None, site: RaiseSite, file_text) -> str | None:
    """A note when the raising function is not the one the record names, or None."""
    if recorded is None or site.function_name == recorded.name:
        return None
    if recorded.source == "documentation":
        # Prose names other things too (callers, helpers): claim a rename only when
        # the name is gone from the file that raises the message.
        text = file_text(site.file) or ""
        if re.search(rf"\b{re.escape(recorded.name)}\b", text):
            return None
        return (
            f"the record's documentation names {recorded.name}, which no longer appears in {site.file}; "
            f"the message is raised from {site.function}"
        )
    return f"recorded in {recorded.name} (per its sourceCode), raised now from {site.function}"


# A message that only gained words ("... when initializing the engine (this flag
# also ...)") is still the same error: for messages this long, the share of the old
# words kept in order counts as much as the symmetric ratio.
COVERAGE_MIN_WORDS = 5


def similarity(old: str, new: str) -> float:
    a, b = old.split(), new.split()
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    ratio = matcher.ratio()
    if len(a) >= COVERAGE_MIN_WORDS:
        kept = sum(block.size for block in matcher.get_matching_blocks())
        ratio = max(ratio, kept / len(a))
    return ratio


def word_diff(old: str, new: str) -> list[dict]:
    a, b = old.split(), new.split()
    ops = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag == "equal":
            ops.append({"op": "equal", "text": " ".join(a[i1:i2])})
            continue
        if tag in ("delete", "replace"):
            ops.append({"op": "delete", "text": " ".join(a[i1:i2])})
        if tag in ("insert", "replace"):
            ops.append({"op": "insert", "text": " ".join(b[j1:j2])})
    return ops


def word_diff_text(ops: list[dict]) -> str:
    """``git diff --word-diff=plain`` style: [-removed-]{+added+}."""
    out = []
    for op in ops:
        if op["op"] == "equal":
            out.append(op["text"])
        elif op["op"] == "delete":
            out.append(f"[-{op['text']}-]")
        else:
            out.append(f"{{+{op['text']}+}}")
    return " ".join(out)


# ---------------------------------------------------------------- which files to parse


def mentions_any(records: list[dict]):
    """A cheap file filter: parse only files that contain one of a record's longer
    words (taken from the literal text of its pattern) or that a record names."""
    from errkb.text.patterns import analyze

    words: set[str] = set()
    named: set[str] = set()
    for record in records:
        named.add(record["filePath"])
        literal = " ".join(analyze(record["messagePattern"]).required_literals) or record["errorMessage"]
        longest = sorted(set(_WORD.findall(literal)), key=len, reverse=True)[:2]
        words.update(longest)
    try:
        import ahocorasick
    except ImportError:
        ahocorasick = None
    automaton = None
    if ahocorasick is not None and words:
        automaton = ahocorasick.Automaton()
        for w in words:
            automaton.add_word(w, w)
        automaton.make_automaton()

    def include(file: str, text: str) -> bool:
        if any(n == file or n.endswith("/" + file) for n in named):
            return True
        if not words:
            return True
        if automaton is not None:
            return next(automaton.iter(text), None) is not None
        return any(w in text for w in words)

    return include


def record_path_prefix(records: list[dict], files: set[str]) -> str:
    """What records put in front of the scanned tree's paths (``src/`` for a src
    layout checked against an installed package); learned from the records whose
    files exist, "" when they match as they are."""
    votes: Counter = Counter()
    for record in records:
        parts = record["filePath"].split("/")
        for k in range(len(parts)):
            if "/".join(parts[k:]) in files:
                votes["/".join(parts[:k]) + ("/" if k else "")] += 1
                break
    return votes.most_common(1)[0][0] if votes else ""


# ---------------------------------------------------------------- --fix


def _fix(store, report: DriftReport, prefix: str, file_text, now: datetime | None) -> dict:
    """Write each moved record with its new location as a new version."""
    from errkb.records.read import Origin, SourcedRecord

    stamp = dataset_timestamp(now)
    items = []
    for n, entry in enumerate(e for e in report.entries if e.status == "moved"):
        record = store.get(entry.record_id)
        text = file_text(entry.site.file)
        if record is None or text is None:
            continue
        updated = relocated(record, entry.site, text.splitlines(), prefix=prefix, repo=report.repo, sha=report.sha, analyzed_at=stamp)
        raw = json.dumps({"record": updated, "datasetVersion": stamp}, ensure_ascii=False).encode("utf-8")
        items.append(SourcedRecord(updated, raw, Origin(f"drift --fix {report.path}", n + 1), dataset_version=stamp))
    result = store.ingest_items(items, source=f"drift --fix {report.path}")
    return result.as_dict()


def relocated(record: dict, site: RaiseSite, lines: list[str], *, prefix: str, repo: str, sha: str, analyzed_at: str) -> dict:
    """A copy of ``record`` pointing at ``site``, keeping the record's window shape
    (a window cut short by the top of the file gets the usual context back)."""
    before = max(0, record["lineNumber"] - record["sourceCodeStart"])
    if record["sourceCodeStart"] == 1:
        before = max(before, CONTEXT_LINES)
    after = max(0, record["sourceCodeEnd"] - record["lineNumber"])
    start = max(1, site.line - before)
    end = min(len(lines), site.line + after)
    updated = copy.deepcopy(record)
    file_path = prefix + site.file
    updated.update(
        {
            "filePath": file_path,
            "lineNumber": site.line,
            "sourceCode": "\n".join(lines[start - 1 : end]),
            "sourceCodeStart": start,
            "sourceCodeEnd": end,
            "githubUrl": github_url(repo, sha, file_path, start, end),
            "analyzedSha": sha,
            "analyzedAt": analyzed_at,
        }
    )
    return updated
