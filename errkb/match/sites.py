"""The known-site tier's reader: where vLLM, PyTorch and FlashInfer raise a message, from
the slim index that ships in ``data/sites/`` (built by ``errkb sites``), and the small
curated table of CUDA runtime error strings.

A site pattern is literal text and ``(.+?)`` wildcards only (the miner builds nothing
else), so a match is found the way :meth:`errkb.mine.templates.Template.matches` finds
one: leftmost placement of each literal chunk, linear in the line. Which patterns are
tried on a line is decided by an anchor token per pattern (its rarest whole word), so
one call costs the text's length plus the candidates whose anchor the text holds.

**The trust rule.** A mined pattern is served only when it is specific enough that
another library's message will not match it: at least ``MIN_LITERAL_ALNUM`` literal
letters/digits, and either a *rare token* (an identifier-like word: ``max_tokens``,
``SupportsPP``, ``fp8``, ``torch.cuda``) or literal text covering at least half the
line it matched. The rule's measure on foreign messages is in docs/mining.md.

The shipped file is gzip'd JSON lines (reproducible bytes, see errkb.mine.site_index);
the first call that needs it writes a matching cache under errkb's cache folder (a
second or two, once, with a line on stderr), later calls read only the cache's small
part and the rows of the patterns that matched.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import re
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

MIN_LITERAL_ALNUM = 20
_CACHE_FORMAT = "errkb-sites-cache/1"
# On one line, at most this many candidate patterns are verified (most specific first):
# the bound that keeps a hostile line of anchor words linear.
MAX_CANDIDATES_PER_LINE = 256

_WORD = re.compile(r"[A-Za-z0-9_]+(?:\.[A-Za-z_][A-Za-z0-9_]*)*")
_CONTROL = {"n": "\n", "t": "\t", "r": "\r", "f": "\f", "v": "\v"}
_WILDCARDS = ("(.+?)", "([\\s\\S]+?)")


class SiteIndexError(ValueError):
    """The shipped index or its cache cannot be read (names the file and reason)."""


# ---------------------------------------------------------------- the trust rule


def chunks_of(pattern: str) -> list[str | None]:
    """A miner-built pattern as literal chunks and wildcards (None); ValueError if it is not one."""
    out: list[str | None] = []
    buf: list[str] = []
    i = 0
    while i < len(pattern):
        if pattern.startswith(_WILDCARDS[0], i) or pattern.startswith(_WILDCARDS[1], i):
            if buf:
                out.append("".join(buf))
                buf = []
            out.append(None)
            i += len(_WILDCARDS[0]) if pattern.startswith(_WILDCARDS[0], i) else len(_WILDCARDS[1])
            continue
        ch = pattern[i]
        if ch == "\\":
            if i + 1 >= len(pattern):
                raise ValueError(f"pattern ends in a backslash: {pattern!r}")
            nxt = pattern[i + 1]
            if nxt == "x":
                buf.append(chr(int(pattern[i + 2 : i + 4], 16)))
                i += 4
                continue
            buf.append(_CONTROL.get(nxt, nxt))
            i += 2
            continue
        if ch in ".^$*+?{}[]|()":
            raise ValueError(f"not a miner-built pattern (unescaped {ch!r} at {i}): {pattern!r}")
        buf.append(ch)
        i += 1
    if buf:
        out.append("".join(buf))
    return out


def _whole_words(chunk: str, first: bool, last: bool) -> list[str]:
    """Words of a literal chunk that a match holds whole: a word touching a wildcard may be
    part of a longer word (``{name}_size`` gives ``hidden_size``), so it is left out; one
    at the pattern's own start or end is kept (a message's first word follows ``Error: ``)."""
    words = []
    for m in _WORD.finditer(chunk):
        if (m.start() == 0 and not first) or (m.end() == len(chunk) and not last):
            continue
        words.append(m.group())
    return words


def _words_of(chunks: list[str | None]) -> list[str]:
    words: list[str] = []
    for n, c in enumerate(chunks):
        if c is not None:
            words.extend(_whole_words(c, n == 0, n == len(chunks) - 1))
    return words


def is_rare_token(word: str) -> bool:
    """An identifier-like word no prose uses: snake_case, CamelCase, a letter-digit mix, a dotted name."""
    if len(word) < 4 and not (len(word) >= 3 and any(c.isdigit() for c in word) and any(c.isalpha() for c in word)):
        return False
    if "_" in word.strip("_") or "." in word:
        return True
    if any(c.isdigit() for c in word) and any(c.isalpha() for c in word):
        return True
    return any(c.isupper() for c in word[1:]) and any(c.islower() for c in word)


def trust(pattern: str) -> tuple[str | None, str | None, int]:
    """(level, anchor, literal length): level "strong" (served on any line), "half" (served
    only where its literal text covers half the line) or None (never served)."""
    try:
        chunks = chunks_of(pattern)
    except ValueError:
        return None, None, 0
    literals = [c for c in chunks if c is not None]
    literal = "".join(literals)
    if sum(ch.isalnum() for ch in literal) < MIN_LITERAL_ALNUM:
        return None, None, len(literal)
    words = _words_of(chunks)
    if not words:
        return None, None, len(literal)
    rare = [w for w in words if is_rare_token(w)]
    anchor = max(rare or words, key=len)
    return ("strong" if rare else "half"), anchor, len(literal)


# ---------------------------------------------------------------- results


@dataclass(frozen=True)
class Site:
    """One place a message is raised, with the releases it was seen in."""

    library: str
    file: str
    line: int
    function: str
    condition: str | None
    kind: str  # raise, assert, warn, log, factory, C++
    error_class: str | None
    releases: str  # "0.2.7-0.4.0,0.5.1" (runs of the scanned releases)
    release: str  # the newest release seen: file, line and commit are its
    commit: str | None
    repo: str | None

    def source_url(self) -> str | None:
        """The line on GitHub at the release's commit (None when the commit is not known)."""
        if not (self.repo and self.commit and len(self.commit) == 40):
            return None
        return f"https://github.com/{self.repo}/blob/{self.commit}/{self.file}#L{self.line}"

    def describe(self) -> str:
        where = f"{self.file}:{self.line}" + (f" in {self.function}" if self.function and self.function != "<module>" else "")
        when = f" when {self.condition}" if self.condition else ""
        verb = {"log": "logged", "warn": "warned", "assert": "asserted", "factory": "built"}.get(self.kind, "raised")
        return f"{verb} at {where}{when}; seen in {self.library} {self.releases}"

    def as_dict(self) -> dict:
        return {"library": self.library, "file": self.file, "line": self.line, "function": self.function,
                "condition": self.condition, "kind": self.kind, "errorClass": self.error_class,
                "releases": self.releases, "release": self.release, "commit": self.commit,
                "url": self.source_url()}


@dataclass(frozen=True)
class SiteMatch:
    """A message of the text that known sites raise: the pattern, where in the text, and
    every site that raises it (newest release first). Never a fix."""

    pattern: str
    line_number: int  # 1-based line of the text where it matched (the first line, multi-line)
    trust: str  # "strong" or "half" (see the trust rule); "cuda" for the CUDA table
    sites: tuple[Site, ...]
    meaning: str | None = None  # the CUDA table's explanation, for a CUDA runtime error

    def as_dict(self) -> dict:
        return {"tier": "site", "pattern": self.pattern, "line": self.line_number, "trust": self.trust,
                "meaning": self.meaning, "sites": [s.as_dict() for s in self.sites]}

    def describe(self) -> list[str]:
        if self.meaning is not None:
            return [f"CUDA runtime error (line {self.line_number}): {self.meaning}"]
        lines = [f"known site (line {self.line_number}), no fix: {self.pattern}"]
        for s in self.sites:
            lines.append("  " + s.describe())
            url = s.source_url()
            if url:
                lines.append("    " + url)
        return lines


# ---------------------------------------------------------------- the index


def default_path() -> Path:
    from errkb.resources import data_dir

    return data_dir() / "sites" / "sites.jsonl.gz"


class SiteIndex:
    """The trusted patterns of a site index, matched in linear time. ``load`` reads only
    the cache's pattern part; rows are read for the patterns that match."""

    def __init__(self, patterns: list[str], levels: list[str], literal_len: list[int], anchors: dict[str, list[int]],
                 rows_path: Path | None, offsets: list[int], header: dict, cuda: list[dict]):
        self.patterns = patterns
        self.levels = levels
        self.literal_len = literal_len
        self.anchors = anchors
        self.rows_path = rows_path
        self.offsets = offsets
        self.header = header
        self.cuda = cuda
        self._chunks: dict[int, list[str | None]] = {}

    # -- loading

    @classmethod
    def load(cls, path: Path | None = None, cache: Path | None = None) -> SiteIndex:
        path = Path(path) if path is not None else default_path()
        cuda = load_cuda_table(default_path().parent / "cuda_errors.json")  # curated: always the bundled table
        if not path.exists():
            return cls([], [], [], {}, None, [], {"libraries": {}}, cuda)
        st = path.stat()
        key = hashlib.sha256(f"{_CACHE_FORMAT}|{path.resolve()}|{st.st_size}|{st.st_mtime_ns}".encode()).hexdigest()[:16]
        folder = cache if cache is not None else _cache_folder()
        meta_path = folder / f"sites-{key}.json"
        rows_path = folder / f"sites-{key}.rows"
        if not (meta_path.exists() and rows_path.exists()):
            print("errkb: preparing the known-site index (once after install or update)...", file=sys.stderr)
            _build_cache(path, meta_path, rows_path)
        try:
            meta = json.loads(meta_path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            raise SiteIndexError(f"{meta_path}: unreadable site cache ({e}); delete it to rebuild") from None
        return cls(meta["patterns"], meta["levels"], meta["literal"], meta["anchors"], rows_path, meta["offsets"],
                   meta["header"], cuda)

    def __len__(self) -> int:
        return len(self.patterns)

    # -- matching

    def match(self, text: str) -> list[SiteMatch]:
        """Every trusted site pattern (and CUDA runtime error) found in ``text``, by line."""
        found: list[tuple[int, int, int]] = []  # (line number, -literal length, pattern id)
        lines = text.split("\n")
        multiline_candidates: set[int] = set()
        for number, line in enumerate(lines, 1):
            if not line:
                continue
            candidates: set[int] = set()
            for m in _WORD.finditer(line):
                word = m.group()
                ids = self.anchors.get(word)
                if ids:
                    candidates.update(ids)
                # a dotted run also holds its plain words ("torch.cuda" holds "cuda")
                if "." in word:
                    for piece in word.split("."):
                        ids = self.anchors.get(piece)
                        if ids:
                            candidates.update(ids)
            ordered = sorted(candidates, key=lambda i: -self.literal_len[i])
            for i in ordered[:MAX_CANDIDATES_PER_LINE]:
                chunks = self._chunks_for(i)
                if any(c is not None and "\n" in c for c in chunks):
                    multiline_candidates.add(i)
                    continue
                if not _chunks_match(chunks, line):
                    continue
                if self.levels[i] == "half" and self.literal_len[i] * 2 < len(line.strip()):
                    continue
                found.append((number, -self.literal_len[i], i))
        for i in sorted(multiline_candidates):
            chunks = self._chunks_for(i)
            if _chunks_match(chunks, text) and self.levels[i] == "strong":
                first = next(c for c in chunks if c)
                at = text.find(first.split("\n")[0]) if first.split("\n")[0] else 0
                found.append((text.count("\n", 0, max(at, 0)) + 1, -self.literal_len[i], i))
        found.sort()
        rows = self._rows([i for _, _, i in found])
        out = [SiteMatch(self.patterns[i], number, self.levels[i], rows[i]) for number, _, i in found]
        out.extend(self._cuda_matches(lines))
        out.sort(key=lambda m: m.line_number)
        return out

    def _chunks_for(self, i: int) -> list[str | None]:
        chunks = self._chunks.get(i)
        if chunks is None:
            chunks = self._chunks[i] = chunks_of(self.patterns[i])
        return chunks

    def _rows(self, ids: list[int]) -> dict[int, tuple[Site, ...]]:
        out: dict[int, tuple[Site, ...]] = {}
        if not ids or self.rows_path is None:
            return out
        libraries = self.header.get("libraries", {})
        with open(self.rows_path, "rb") as f:
            for i in sorted(set(ids)):
                f.seek(self.offsets[i])
                sites = []
                for row in json.loads(f.readline()):
                    info = libraries.get(row["l"], {})
                    releases = info.get("releases", [])
                    newest = _newest(row["r"], releases)
                    commit = dict((v, c) for v, c in releases).get(newest)
                    sites.append(Site(row["l"], row["f"], row["n"], row["fn"], row.get("c"), row["k"], row.get("e"),
                                      row["r"], newest, commit, info.get("repo")))
                out[i] = tuple(sites)
        return out

    def _cuda_matches(self, lines: list[str]) -> list[SiteMatch]:
        out = []
        for number, line in enumerate(lines, 1):
            if "CUDA" not in line and "cuda" not in line:
                continue
            for entry in self.cuda:
                if entry["message"] in line:
                    out.append(SiteMatch(entry["message"], number, "cuda", (), entry["meaning"]))
        return out


def _newest(ranges: str, releases: list[list]) -> str:
    last = ranges.rsplit(",", 1)[-1]
    return last.rsplit("-", 1)[-1] if last else (releases[-1][0] if releases else "")


def _chunks_match(chunks: list[str | None], text: str) -> bool:
    # The same leftmost-placement walk as Template.matches (errkb.mine.templates), on chunks.
    from errkb.mine.templates import _chunks_match as walk

    return walk(chunks, text)


def load_cuda_table(path: Path) -> list[dict]:
    """The curated CUDA runtime error strings (message, meaning, code)."""
    if not path.exists():
        return []
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as e:
        raise SiteIndexError(f"{path}: not JSON ({e})") from None
    entries = data.get("errors") if isinstance(data, dict) else None
    if not isinstance(entries, list):
        raise SiteIndexError(f"{path}: expected {{\"errors\": [...]}}")
    for n, e in enumerate(entries):
        if not (isinstance(e, dict) and isinstance(e.get("message"), str) and isinstance(e.get("meaning"), str)):
            raise SiteIndexError(f"{path}: errors[{n}]: needs a string message and meaning")
    return entries


# ---------------------------------------------------------------- the cache


def _cache_folder() -> Path:
    from errkb.resources import cache_root

    return cache_root() / "sites"


def _build_cache(index_path: Path, meta_path: Path, rows_path: Path) -> None:
    """Group the index's rows by pattern, keep the trusted patterns, write the anchor map
    and the rows (one JSON line per pattern, found by its byte offset)."""
    try:
        with gzip.open(index_path, "rt", encoding="utf-8") as f:
            lines = f.read().splitlines()
        header = json.loads(lines[0])
        rows = [json.loads(line) for line in lines[1:] if line]
    except (OSError, EOFError, ValueError, IndexError) as e:
        raise SiteIndexError(f"{index_path}: not a readable site index ({e})") from None
    by_pattern: dict[str, list[dict]] = {}
    for row in rows:
        by_pattern.setdefault(row["p"], []).append(row)
    patterns, levels, literal, anchors_of = [], [], [], []
    for pattern in sorted(by_pattern):
        level, anchor, length = trust(pattern)
        if level is None:
            continue
        patterns.append(pattern)
        levels.append(level)
        literal.append(length)
        anchors_of.append(anchor)
    # The anchor is the pattern's rarest whole word in the index (fewest patterns hold it),
    # among its rare tokens when it has any: candidates per line stay few.
    df: Counter = Counter()
    words_of = []
    for pattern in patterns:
        words = set(_words_of(chunks_of(pattern)))
        words_of.append(words)
        df.update(words)
    anchors: dict[str, list[int]] = {}
    for i, words in enumerate(words_of):
        rare = [w for w in words if is_rare_token(w)]
        pool = rare if levels[i] == "strong" else list(words)
        anchor = min(pool, key=lambda w: (df[w], -len(w), w))
        anchors.setdefault(anchor, []).append(i)
    meta_path.parent.mkdir(parents=True, exist_ok=True)
    offsets = []
    tmp_rows = rows_path.with_name(rows_path.name + f".{os.getpid()}.tmp")
    with open(tmp_rows, "wb") as f:
        for pattern in patterns:
            offsets.append(f.tell())
            group = sorted(by_pattern[pattern], key=lambda r: (r["l"], r["f"], r["n"]))
            f.write(json.dumps(group, separators=(",", ":"), ensure_ascii=False).encode("utf-8") + b"\n")
    meta = {"format": _CACHE_FORMAT, "header": header, "patterns": patterns, "levels": levels, "literal": literal,
            "anchors": anchors, "offsets": offsets}
    tmp_meta = meta_path.with_name(meta_path.name + f".{os.getpid()}.tmp")
    tmp_meta.write_text(json.dumps(meta, separators=(",", ":"), ensure_ascii=False), encoding="utf-8")
    os.replace(tmp_rows, rows_path)
    os.replace(tmp_meta, meta_path)
