"""The known-site tier's reader: where vLLM, PyTorch and FlashInfer raise a message, from
the slim index that ships in ``data/sites/`` (built by ``errkb sites``), and the small
curated table of CUDA runtime error strings.

A site pattern is literal text and ``(.+?)`` wildcards only (the miner builds nothing
else), so a match is found the way :meth:`errkb.mine.templates.Template.matches` finds
one: leftmost placement of each literal chunk, linear in the line, with each run of
whitespace taken as one space on both sides (a paste's whitespace is not the program's). Which patterns are
tried on a line is decided by an anchor token per pattern (its rarest whole word), so
one call costs the text's length plus the candidates whose anchor the text holds.

**The trust rule.** A mined pattern is served only when it is specific enough that
another library's message will not match it: at least ``MIN_LITERAL_ALNUM`` literal
letters/digits, and either a *rare token* (an identifier-like word: ``max_tokens``,
``SupportsPP``, ``fp8``, ``torch.cuda``), or at least ``MIN_SENTENCE_ALNUM`` literal
letters/digits (a long sentence of prose: C++ messages such as c10d's "Failed to recv, got
0 bytes. Connection was likely closed. ..." are pasted behind a long log prefix), or literal
text covering at least half the line it matched (then at least ``MIN_PROSE_ALNUM``
letters/digits, and not beginning with a wildcard). Patterns that match one of Python's own messages are never served.
The rule's measure on foreign messages is in docs/mining.md.

The shipped file is gzip'd JSON lines (reproducible bytes, see errkb.mine.site_index);
the first call that needs it writes a matching cache under errkb's cache folder (a
second or two, once, said on a terminal's stderr), later calls read only the cache's small
part and the rows of the patterns that matched.
"""

from __future__ import annotations

import json
import mmap
import os
import re
import sys
import zlib
from array import array
from collections import Counter
from pathlib import Path
from typing import Any

from errkb.match.chunks import MAX_CUT_TEXT, chunks_of, cut_chunks, fold_marked, fold_space, folded_chunks, unfolded_span
from errkb.match.chunks import chunks_match as _chunks_match
from errkb.match.chunks import chunks_span as _chunks_span
from errkb.match.chunks import message_span as _message_span

MIN_LITERAL_ALNUM = 20
# A pattern naming a rare token (an identifier: ``top_p``, ``max_num_seqs``) is specific with
# less text ("top_p must be in (0, 1], got 0."): measured on the same foreign messages. Not a
# dtype or a dimension: "alpha must be float32" or "x must be 2D" any kernel library says.
MIN_RARE_ALNUM = 15
_GENERIC_TOKEN = re.compile(r"(?:b?float\d*\w*|u?int\d+|fp\d+\w*|bf\d+|tf32|complex\d+|\d+d)", re.I)
# Without a rare token a pattern is prose ("(.+?) must be a positive integer" is scipy's
# message as much as vLLM's): it needs more literal text, and a literal subject (not a
# leading wildcard), besides covering half the line. Measured on numpy/scipy/transformers.
MIN_PROSE_ALNUM = 30
# Prose this long is one message's own sentence wherever it appears: served on any line
# (measured on the same foreign messages: see docs/mining.md).
MIN_SENTENCE_ALNUM = 60
_CACHE_FORMAT = "sites-cache-v10"  # in the cache files' names: bump when the layout or the trust rule changes
# On one line, at most this many candidate patterns are verified (most specific first):
# the bound that keeps a hostile line of anchor words linear.
MAX_CANDIDATES_PER_LINE = 256
# The batch scan's key of a pattern: its longest literal that at most this many patterns
# share (prefilter.choose_key; measured on the bench log: see docs/matching.md)
SHARED_KEY_OK = 8
# A text cut short: at most this many patterns looked up by their opening's first characters
# (a key such as "Expect" opens 1,991 patterns; a line's words look up a few hundred), of which
# at most MAX_CANDIDATES_PER_LINE have their opening literal where the key is and are read on.
MAX_CUT_LOOKUPS = 4096
# A text cut short may begin several releases' wordings of one message: at most this many listed.
MAX_CUT_MATCHES = 5
# A text cut short is looked up by the first characters of each pattern's opening literal
# (a title stops before the anchor word a whole match is found by: "Model architectures
# ['X'] are not supported for now" lost ". Supported architectures: ...").
OPENING_KEY_CHARS = 6

_WORD = re.compile(r"[A-Za-z0-9_]+(?:\.[A-Za-z_][A-Za-z0-9_]*)*")
# Where a message may begin inside a line: the line's start, after a space, and a word's start;
# for a text cut short, only after what ends a prefix: an error class's or a wrapper's colon,
# a bracketed field ("[address=..., pid=...] The decoder prompt ..."), a quote, a pipe, a
# logging format's " - ", a sentence's end ("Failed to load. Model architectures ...").
_MESSAGE_AFTER = set(":]>)|\"'(-.")
_WORD_START = re.compile(r"^|(?<= )|(?<![A-Za-z0-9_])(?=[A-Za-z0-9_])")


class SiteIndexError(ValueError):
    """The shipped index or its cache cannot be read (names the file and reason)."""


# ---------------------------------------------------------------- the trust rule


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


def is_rare_token(word: str, _known: dict[str, bool] = {}) -> bool:  # noqa: B006 - a memo, on purpose
    """An identifier-like word no prose uses: snake_case, CamelCase, a letter-digit mix, a dotted name."""
    known = _known.get(word)
    if known is None:
        known = _known[word] = _is_rare_token(word)
    return known


def _is_rare_token(word: str) -> bool:
    if len(word) < 4 and not (len(word) >= 3 and any(c.isdigit() for c in word) and any(c.isalpha() for c in word)):
        return False
    if "_" in word.strip("_") or "." in word:
        return True
    if any(c.isdigit() for c in word) and any(c.isalpha() for c in word):
        return True
    return any(c.isupper() for c in word[1:]) and any(c.islower() for c in word)


# Python's own messages, which a library re-raises in its own words as often as not
# (``raise AttributeError(f"module {name!r} has no attribute {attr!r}")``): a site pattern
# that matches one of these says nothing about where the error came from.
_PYTHON_MESSAGES = (
    "module 'x' has no attribute 'y'", "'x' object has no attribute 'y'", "Module x has no attribute y",
    "x object has no attribute y", "'x' object is not callable", "'x' object is not subscriptable",
    "'x' object is not iterable", "x() takes 2 positional arguments but 3 were given",
    "x() got an unexpected keyword argument 'y'", "x() missing 1 required positional argument: 'y'",
    "No module named 'x'", "list index out of range", "unsupported operand type(s) for +: 'x' and 'y'",
    "can't multiply sequence by non-int of type 'x'", "invalid literal for int() with base 10: 'x'",
    "maximum recursion depth exceeded", "division by zero", "not enough values to unpack (expected 2, got 1)",
    "too many values to unpack (expected 2)", "cannot import name 'x' from 'y'",
    "Expected x but got y", "Unsupported x: y", "Unknown x: y", "Invalid x: y", "x is not supported",
    "x must be a y", "x is not implemented", "x not implemented for y",
)

_PYTHON_JOINED = "\n".join(_PYTHON_MESSAGES)  # one C-speed search rules out most patterns


def _trusted_on(entry: dict, folded_line: str, span: tuple[int, int] | None = None,
                folded: str | None = None) -> bool:
    """Whether a served pattern that matched ``folded_line`` (at ``span`` of ``folded``, the
    folded text it was matched in: the line itself by default) is trusted there: a "half" one
    only where its text covers half the line's message (the rule's one home at match time).
    A log line's header (timestamp, level, process, rank, file:line: what
    errkb.text.normalize.prefix_length strips, names aside) is not foreign text the pattern
    could be lost in: it does not count. A logger's name does: it may be another library's.
    Its text is its literal text and the values it encloses in a pair of its own brackets or
    quotes (vLLM's "invalid tool call parser: openai (chose from { ...nineteen parsers... })"):
    those are its own; a value it does not enclose ("... configuration from (.+?)\\.") may be
    any text, and does not count."""
    if entry["t"] != "half":
        return True
    length = entry["L"]
    if span is not None:
        length += _enclosed_length(entry["fchunks"], folded_line if folded is None else folded, span)
    return _covers_half(length, folded_line)


# A value a pattern encloses: its literal before ends in an opener, its literal after begins
# with the closer (a space between allowed).
_CLOSERS = {"(": ")", "[": "]", "{": "}", "<": ">", "'": "'", '"': '"', "`": "`"}


def _enclosed_length(chunks: list[str | None], text: str, span: tuple[int, int]) -> int:
    """How many characters of ``text`` the values ``chunks`` (folded) encloses in its own
    brackets or quotes take, where it matched at ``span``: its literals placed as
    errkb.match.chunks.message_span places them (leftmost, the last where the span ends)."""
    last = max((k for k, c in enumerate(chunks) if c is not None), default=-1)
    placed: list[tuple[int, int, int]] = []  # (chunk index, start, end) of each literal
    pos, gap = span[0], 0
    for k, chunk in enumerate(chunks):
        if chunk is None:
            gap += 1
            continue
        at = span[1] - len(chunk) if k == last else text.find(chunk, pos + gap)
        if at < pos + gap:
            return 0
        placed.append((k, at, at + len(chunk)))
        pos, gap = at + len(chunk), 0
    total = 0
    for (k1, _, end), (k2, start, _) in zip(placed, placed[1:]):
        before, after = chunks[k1].rstrip(" "), chunks[k2].lstrip(" ")
        if k2 - k1 == 2 and before and after and _CLOSERS.get(before[-1]) == after[0]:
            total += start - end
    return total


def _covers_half(length: int, folded_line: str) -> bool:
    from errkb.text.normalize import prefix_length

    return length * 2 >= len(folded_line[prefix_length(folded_line, names=False):].strip())


def trust(pattern: str, chunks: list[str | None] | None = None) -> tuple[str | None, str | None, int]:
    """(level, anchor, literal length): level "strong" (served on any line), "half" (served
    only where its literal text covers half the line) or None (never served)."""
    try:
        chunks = chunks if chunks is not None else chunks_of(pattern)
    except ValueError:
        return None, None, 0
    longest = max((c for c in chunks if c is not None), key=len, default="")
    if longest in _PYTHON_JOINED and any(_chunks_match(chunks, m) for m in _PYTHON_MESSAGES):
        return None, None, 0
    literals = [c for c in chunks if c is not None]
    literal = "".join(literals)
    alnum = sum(ch.isalnum() for ch in literal)
    if alnum < MIN_RARE_ALNUM:
        return None, None, len(literal)
    words = _words_of(chunks)
    if not words:
        return None, None, len(literal)
    rare = [w for w in words if is_rare_token(w)]
    if alnum < MIN_LITERAL_ALNUM and not any(_GENERIC_TOKEN.fullmatch(w) is None for w in rare):
        return None, None, len(literal)
    anchor = max(rare or words, key=len)
    if rare or alnum >= MIN_SENTENCE_ALNUM:
        return "strong", anchor, len(literal)
    if alnum < MIN_PROSE_ALNUM or chunks[0] is None:
        return None, None, len(literal)
    return "half", anchor, len(literal)


# ---------------------------------------------------------------- results


class _Plain:
    """A small value class without dataclasses (whose import, through inspect, costs a
    CLI call more than the whole site lookup)."""

    __slots__ = ()

    def __init__(self, *values):
        for name, value in zip(self.__slots__, values, strict=True):
            object.__setattr__(self, name, value)

    def __setattr__(self, name, value):
        raise AttributeError(f"{type(self).__name__} is read-only")

    def __eq__(self, other):
        return type(other) is type(self) and all(getattr(self, n) == getattr(other, n) for n in self.__slots__)

    def __hash__(self):
        return hash(tuple(getattr(self, n) for n in self.__slots__))

    def __repr__(self):
        return f"{type(self).__name__}(" + ", ".join(f"{n}={getattr(self, n)!r}" for n in self.__slots__) + ")"


_COMMIT = re.compile(r"[0-9a-f]{7,40}")


# Files a library's wheels do not ship, read from its source for some releases only
# (data/sites/cpp_sources.json: PyTorch's .cpp): "seen in" lists those it was read for, not all.
_SOURCE_READ_PARTLY = {"torch": (".cpp", ".cu", ".cc")}

# How a site gives its message, as explain says it (a "response" is an HTTP error a server
# returns: vLLM's OpenAI server's create_error_response).
_VERBS = {"log": "logged", "warn": "warned", "assert": "asserted", "factory": "built",
          "response": "returned as an HTTP error"}


class Site(_Plain):
    """One place a message is raised, with the releases it was seen in: library, file,
    line, function, condition, kind (raise, assert, warn, log, factory, response, C++), error_class,
    releases ("0.2.7-0.4.0,0.5.1": runs of the scanned releases), release (the newest seen:
    file, line and commit are its), commit, repo, copies (None, or for a message raised in more
    files of that release (generated copies, COPIES_MOST), the number of files: the site is the first's)."""

    __slots__ = ("library", "file", "line", "function", "condition", "kind", "error_class", "releases", "release",
                 "commit", "repo", "copies")

    def source_url(self) -> str | None:
        """The line on GitHub at the release's commit, else at its tag (None without either)."""
        if not self.repo:
            return None
        if self.commit and _COMMIT.fullmatch(self.commit):  # a short hash (vLLM's sdists give 9) resolves too
            return f"https://github.com/{self.repo}/blob/{self.commit}/{self.file}#L{self.line}"
        if self.release and re.fullmatch(r"\d+(?:\.\d+)*(?:\.post\d+)?", self.release):
            # no commit recorded: the release's tag (vLLM, PyTorch and FlashInfer tag releases vX.Y.Z)
            return f"https://github.com/{self.repo}/blob/v{self.release}/{self.file}#L{self.line}"
        return None

    def describe(self) -> str:
        where = f"{self.file}:{self.line}" + (f" in {self.function}" if self.function and self.function != "<module>" else "")
        when = f" when {self.condition}" if self.condition else ""
        verb = _VERBS.get(self.kind, "raised")
        if self.kind == "log" and self.error_class == "INFO":  # the miner reads info lines that report a failure
            verb = "logged at info level"
        partly = " (the releases whose C++ source errkb read)" if self.file.endswith(_SOURCE_READ_PARTLY.get(
            self.library, ())) else ""
        return f"{verb} at {where}{when}; seen in {self.library} {self.releases}{partly}"

    def as_dict(self) -> dict:
        return {"library": self.library, "file": self.file, "line": self.line, "function": self.function,
                "condition": self.condition, "kind": self.kind, "errorClass": self.error_class,
                "releases": self.releases, "release": self.release, "commit": self.commit,
                "url": self.source_url(), "copies": self.copies}


# In text, a message raised in more places than this shows this many, newest first, and how many
# more (a vLLM message moved between files over the releases; FlashInfer's generated kernels, one
# check in 435 files, printed 2,825 lines of explain before they were folded: COPIES_MOST); --json
# lists every site the index holds.
SITES_SHOWN = 5
# Generated copies: one message raised by the same function under the same condition in more
# files of one release than this is code generated per kernel (FlashInfer 0.7's experimental
# backends: one host check in up to 2,230 generated files, two thirds of the release's rows;
# no message of PyTorch's or vLLM's). The miner (errkb.mine.releases) keeps one row for them,
# the first file's, with how many files raise it ("x"); explain and the site say so.
COPIES_MOST = 10


class SiteMatch(_Plain):
    """A message of the text that known sites raise: pattern, line_number (1-based line of
    the text where it matched; the first line of a multi-line one), trust ("strong" or
    "half", see the trust rule; "cuda", "nccl", "elastic" or "torch" for the curated tables of CUDA
    runtime, NCCL, torchrun worker failures and PyTorch's C++ errors),
    sites (every site that raises it), meaning (the table's explanation, else None), truncated
    (the text stops inside the message: :meth:`SiteIndex.match_cut`). Never a fix."""

    __slots__ = ("pattern", "line_number", "trust", "sites", "meaning", "truncated")

    def __init__(self, pattern: str, line_number: int, trust: str, sites: tuple[Site, ...], meaning: str | None = None,
                 truncated: bool = False):
        super().__init__(pattern, line_number, trust, sites, meaning, truncated)

    @property
    def table_name(self) -> str:
        """What a curated table's match is called ("CUDA runtime error", "NCCL error", ...)."""
        return ERROR_TABLES.get(self.trust, ("", "known site"))[1]

    def as_dict(self) -> dict:
        out = {"tier": "site", "pattern": self.pattern, "line": self.line_number, "trust": self.trust,
               "meaning": self.meaning, "sites": [s.as_dict() for s in self.sites]}
        if self.truncated:  # the text stops inside the message (SiteIndex.match_cut): said only where so
            out["truncated"] = True
        return out

    def shown(self) -> tuple[tuple[Site, ...], int]:
        """The sites a text answer lists (the first SITES_SHOWN, newest first) and how many
        places it leaves out: the other sites, a site of generated copies counting each file
        that raises it (its ``copies``)."""
        shown = self.sites[:SITES_SHOWN]
        return shown, sum(s.copies or 1 for s in self.sites) - len(shown)

    def more(self, json_hint: str) -> str:
        """What a text answer says of the places ``shown`` leaves out ("" when none)."""
        _, more = self.shown()
        copied = max(self.sites, key=lambda s: s.copies or 0) if self.sites else None
        if copied is None or not copied.copies:
            return f"… and {more:,} more sites ({json_hint} lists every one)" if more else ""
        copies = (f"generated copies: {copied.copies:,} files of {copied.library} {copied.release} raise it, "
                  f"the index keeps the first ({json_hint} lists the sites it keeps)")
        return f"… and {more:,} more sites; {copies}" if more else f"… {copies}"

    def describe(self) -> list[str]:
        if self.meaning is not None:
            return [f"{self.table_name} (line {self.line_number}): {self.meaning}"]
        cut = ", the text stops inside its message" if self.truncated else ""
        lines = [f"known site (line {self.line_number}){cut}, no fix: {self.pattern}"]
        sites, more = self.shown()
        for s in sites:
            lines.append("  " + s.describe())
            url = s.source_url()
            if url:
                lines.append("    " + url)
        if more:
            lines.append("  " + self.more("--json").replace("…", "..."))
        return lines


# ---------------------------------------------------------------- the index


class UnavailableSites:
    """A site index that could not be opened (or prepared) where it is needed: every
    lookup raises the reason, so a caller that counts failed lookups (enrich) counts it
    and goes on with the records' matches, never dies of it."""

    def __init__(self, reason: str):
        self.reason = reason

    def prepare_batch(self) -> UnavailableSites:
        return self

    def match_lines(self, lines: list[str]) -> list:
        raise SiteIndexError(self.reason)

    def match(self, text: str) -> list:
        raise SiteIndexError(self.reason)

    def match_cut(self, text: str) -> list:
        raise SiteIndexError(self.reason)


def reopen(path: str | None, cache: str | None) -> SiteIndex | UnavailableSites:
    """The site index at ``path`` (None: the shipped one) in this process, as a pickled
    SiteIndex is rebuilt in a worker; one that cannot be opened there is an
    :class:`UnavailableSites` carrying the reason (a worker that died while unpickling
    its setup would be reported as "a worker process died", not as the site index)."""
    try:
        return SiteIndex.load(path, cache)
    except Exception as e:  # any failure to open: the tier is off, the reason kept
        return UnavailableSites(f"known-site index: {e}")


def prepared(sites: Any) -> Any:
    """``sites`` with its batch scan built (SiteIndex.prepare_batch, where it has one), or
    an :class:`UnavailableSites` saying why it could not be."""
    prepare = getattr(sites, "prepare_batch", None)
    if prepare is None:
        return sites
    try:
        return prepare()
    except Exception as e:  # an unwritable cache, a refused compile: the tier is off
        return UnavailableSites(f"known-site index: {e}")


def default_path() -> Path:
    from errkb.resources import data_dir

    return data_dir() / "sites" / "sites.jsonl.gz"


class SiteIndex:
    """The trusted patterns of a site index, matched in linear time. ``load`` opens the
    cache (an anchor table and a rows file, each with an offsets array) without reading
    it: a lookup is a binary search, and only candidate patterns' rows are parsed."""

    def __init__(self, anchors: _SortedLines | None, rows: _Lines | None, header: dict, cuda: list[dict],
                 stem: Path | None = None, openings: _SortedLines | None = None):
        self._anchors = anchors
        self._openings = openings  # patterns by their opening literal's first characters (match_cut)
        self._stem = stem  # the cache files' common name: the batch prefilter is kept beside them
        self._scan = None
        self._batch_found: dict[int, SiteMatch] = {}  # pattern id -> its match on a line of a batch
        self._rows_file = rows
        self.header = header
        self.cuda = cuda
        self._entries: dict[int, dict] = {}
        self._source: tuple = (None, None)  # (index path, cache folder) as load() was given them
        self._release_order: tuple | None = None  # (release_ranks, release_commits) of the header

    def __reduce__(self):
        # pickled as where it is: a worker process reopens the same index and cache (the
        # parent built the cache files, so that costs a few file opens), never a copy of it
        return (reopen, self._source)

    # -- loading

    @classmethod
    def load(cls, path: Path | None = None, cache: Path | None = None) -> SiteIndex:
        source = (None if path is None else str(path), None if cache is None else str(cache))
        path = Path(path) if path is not None else default_path()
        cuda = load_error_tables(default_path().parent)  # curated: always the bundled tables
        if not path.exists():
            index = cls(None, None, {"libraries": {}}, cuda)
            index._source = source
            return index
        st = path.stat()
        # The cache is named by what it was built from; a rebuilt or updated index gets a new one.
        key = f"{zlib.crc32(str(path.resolve()).encode()):08x}-{st.st_size}-{st.st_mtime_ns}"
        stem = (Path(cache) if cache is not None else _cache_folder()) / f"{_CACHE_FORMAT}-{key}"
        names = [stem.with_name(stem.name + ext) for ext in (".head", ".anchors", ".aidx", ".rows", ".ridx", ".opens",
                                                             ".oidx")]
        if not all(p.exists() for p in names):
            # a few seconds, once: said on a terminal only (a pipe's reader gets no chatter,
            # and a script's stderr stays what it was)
            if sys.stderr is not None and sys.stderr.isatty():
                print("errkb: preparing the known-site index (once after install or update)...", file=sys.stderr)
            try:
                _build_cache(path, stem)
            except OSError as e:
                raise SiteIndexError(f"{stem.parent}: cannot write the site cache ({e.strerror or e}); "
                                     "set ERRKB_CACHE_DIR to a writable folder") from None
        try:
            header = json.loads(names[0].read_text(encoding="utf-8"))
            index = cls(_SortedLines(names[1], names[2]), _Lines(names[3], names[4]), header, cuda, stem,
                        _SortedLines(names[5], names[6]))
        except (OSError, ValueError) as e:
            raise SiteIndexError(f"{stem}.*: unreadable site cache ({e}); delete it to rebuild") from None
        index._source = source
        return index

    def __len__(self) -> int:
        return len(self._rows_file) if self._rows_file is not None else 0

    def preload(self) -> SiteIndex:
        """Read the whole anchor table into memory (tens of ms): for a stream of many
        lines (enrich), where a dict lookup per word beats a binary search per word."""
        if self._anchors is not None:
            self._anchors.preload()
        return self

    def prepare_batch(self) -> SiteIndex:
        """Build the batch scan (:meth:`match_lines`) now, its files kept beside the cache:
        the archive path calls it before its worker processes open the index, so they load
        it instead of each building it."""
        self._prefilter()
        return self

    # -- matching

    def match(self, text: str, whole_message: bool = True) -> list[SiteMatch]:
        """Every trusted site pattern (and CUDA runtime error) found in ``text``, by line: each
        where its whole message is (errkb.match.chunks.message_span), or with
        ``whole_message=False`` also the start of a longer text (a search query, an issue's title)."""
        found: list[tuple[int, int, int]] = []  # (line number, -literal length, pattern id)
        lines = text.split("\n")
        multiline: set[int] = set()
        looked: dict[str, tuple[int, ...]] = {}
        for number, line in enumerate(lines, 1):
            if not line or self._anchors is None:
                continue
            candidates: set[int] = set()
            for m in _WORD.finditer(line):
                word = m.group()
                # a dotted run also holds its plain words ("torch.cuda" holds "cuda")
                for piece in (word, *word.split(".")) if "." in word else (word,):
                    ids = looked.get(piece)
                    if ids is None:
                        ids = looked[piece] = self._anchors.get(piece)
                    candidates.update(ids)
            found.extend((number, neg, i) for neg, i in self._confirm(line, candidates, multiline, whole_message))
        folded = fold_space(text) if multiline else ""
        marked = fold_marked(text, folded) if multiline and whole_message else folded
        for i in sorted(multiline):
            entry = self._entry(i)
            # Its lines are matched with their whitespace folded: a paste re-indents,
            # re-wraps or joins them. A message spanning lines has no one line to cover
            # half of; a prose one is trusted on its (30+ letters/digits, literal-start)
            # text alone. Joined onto one line, it is trusted as any pattern on that line.
            span = _message_span(entry["fchunks"], folded, marked) if whole_message else _chunks_span(entry["fchunks"], folded)
            if span is None:
                continue
            start, end = unfolded_span(text, folded, *span)
            held = text[start:end]
            at = start + len(held) - len(held.lstrip(" \t\n\r\f\v"))  # its first text
            number = text.count("\n", 0, at) + 1
            # spanning lines is its own text's: a line break at its edges (before a value
            # its wildcard takes) does not count
            if "\n" not in held.strip(" \t\n\r\f\v") and not _trusted_on(entry, fold_space(lines[number - 1]), span,
                                                                           folded):
                continue
            found.append((number, -entry["L"], i))
        found.sort()
        # a line's curated table entry first: it says what the error means, the sites only where
        # it is raised (FlashInfer's check that embeds CUDA's "no kernel image" sentence)
        out = self._cuda_matches(lines) + [self._site_match(number, i) for number, _, i in found]
        out.sort(key=lambda m: m.line_number)
        return out

    def match_cut(self, text: str) -> list[SiteMatch]:
        """Trusted site patterns whose message the text stops inside: the text's end lies inside
        a message that begins at a word of it (its opening literal), on its last line or an
        earlier one (a C++ or multi-line message pasted without its last lines): a title cut at
        80 characters, a paste without the message's second sentence (chunks.cut_chunks). What
        the text gives of the pattern must pass the trust rule on its own, as a whole pattern
        would on its line. For a text :meth:`match` found nothing in; most specific first."""
        from errkb.match.prefix import cut_end

        whole = text.rstrip()
        # a message cut short begins at most MAX_CUT_TEXT characters before the text's end
        skipped = max(0, len(whole) - MAX_CUT_TEXT)
        window = whole[skipped:]
        skipped += len(window) - len(window.lstrip())  # cut_end strips the window's leading space too
        tail = cut_end(window)
        folded = fold_space(tail)
        if self._openings is None or not folded:
            return []
        marked = fold_marked(tail, folded)  # where the folded text's spaces were line breaks
        found: dict[int, tuple[int, int]] = {}  # pattern id -> (literal length the text gives, where it begins)
        looked = placed = 0
        for m in _WORD_START.finditer(folded):
            key = folded[m.start() : m.start() + OPENING_KEY_CHARS]
            if len(key) < OPENING_KEY_CHARS or looked > MAX_CUT_LOOKUPS or placed >= MAX_CANDIDATES_PER_LINE:
                break  # the text's end, or the bounds that keep a hostile text linear
            value = self._openings.value(key)
            # [[pattern id, index of its opening literal, that literal], ...]: placed without reading a row
            for i, k, opening in json.loads(value) if value is not None else ():
                looked += 1
                if looked > MAX_CUT_LOOKUPS or placed >= MAX_CANDIDATES_PER_LINE:
                    break  # the bounds that keep a hostile text linear
                start = m.start() - (len(opening) - len(opening.lstrip(" ")))
                if i in found or start < 0 or not folded.startswith(opening, start) \
                        and not opening.startswith(folded[start:]):
                    continue
                placed += 1
                entry = self._entry(i)
                chunks = entry["fchunks"]
                head = chunks[:k]  # what comes before the opening literal ("The (.+?)" of "The (.+?) prompt")
                begins = _head_start(head, folded, start)
                if begins is None or not _message_may_begin(marked, begins):
                    continue  # inside a sentence: a message that begins there begins the text's last words
                if not entry["multiline"] and "\n" in marked[begins:]:
                    continue  # a one-line message stays on its line: the lines after it are other text
                part = cut_chunks(chunks[k:], folded, start, spaced_value_after=MIN_SENTENCE_ALNUM)
                if part is None:
                    continue
                part = head + part
                if sum(ch.isalnum() for c in part if c for ch in c) < MIN_LITERAL_ALNUM:
                    continue  # a word or two of it: what many messages begin with
                level, _, length = trust("", part)
                # "half": half of the text from the line the message begins on
                if level == "strong" or (level == "half" and _covers_half(length, folded[marked.rfind("\n", 0, begins) + 1 :])):
                    found[i] = (length, begins)
        # the patterns the text gives the most of: those it gives less of are worse readings of it
        # (releases' wordings that part after the cut tie, and each is listed)
        most = max((f[0] for f in found.values()), default=0)
        best = sorted(i for i in found if found[i][0] == most)[:MAX_CUT_MATCHES]
        out = []
        for i in best:
            at = skipped + unfolded_span(tail, folded, found[i][1], found[i][1])[0]
            out.append(self._site_match(whole.count("\n", 0, at) + 1, i, truncated=True))
        return out

    def search(self, query: str, limit: int = 10) -> list[SiteMatch]:
        """Known sites for ``errkb search``: the query read as a message (every site pattern
        it matches), then patterns whose anchor word (their rarest whole word) is a word of
        the query and whose literal text holds every searchable word of the query. At most
        ``limit``, message matches first, then the most specific."""
        from errkb.match.search import tokens

        out = [m for m in self.match(query, whole_message=False) if m.meaning is None][:limit]
        if self._anchors is None or len(out) >= limit:
            return out
        wanted = set(tokens(query))
        seen = {m.pattern for m in out}
        candidates: set[int] = set()
        for m in _WORD.finditer(query):
            word = m.group()
            for piece in (word, *word.split(".")) if "." in word else (word,):
                candidates.update(self._anchors.get(piece))
        entries = sorted(((self._entry(i), i) for i in candidates), key=lambda e: (-e[0]["L"], e[1]))
        for entry, i in entries[:MAX_CANDIDATES_PER_LINE]:
            if entry["p"] in seen or not wanted <= set(tokens(" ".join(c for c in entry["chunks"] if c))):
                continue
            seen.add(entry["p"])
            out.append(self._site_match(1, i))
            if len(out) >= limit:
                break
        return out

    def _confirm(self, line: str, candidates, multiline: set[int] | None = None,
                 whole_message: bool = True) -> list[tuple[int, int]]:
        """The confirm, the one for both paths: (-literal length, pattern id) of each
        candidate pattern that matches ``line`` (whitespace folded on both sides:
        errkb.match.chunks.fold_space) and is trusted there, most specific first
        (at most MAX_CANDIDATES_PER_LINE tried). Multi-line patterns go to ``multiline``
        (the caller tries them on the whole text)."""
        out = []
        entries = sorted(((self._entry(i), i) for i in candidates), key=lambda e: (-e[0]["L"], e[1]))
        folded = fold_space(line) if entries else line
        marked = fold_marked(line, folded) if whole_message else folded
        for entry, i in entries[:MAX_CANDIDATES_PER_LINE]:
            if entry["multiline"]:
                if multiline is not None:
                    multiline.add(i)
                continue
            span = _message_span(entry["fchunks"], folded, marked) if whole_message else _chunks_span(entry["fchunks"], folded)
            if span is not None and _trusted_on(entry, folded, span):
                out.append((-entry["L"], i))
        return out

    def match_lines(self, lines: list[str]) -> list[SiteMatch | None]:
        """The best known site of each line of a batch (None where none): the batch path of
        :meth:`match` (enrich). Candidates come from one literal scan of the whole batch
        (each pattern's required literal, see :meth:`_prefilter`), then the same exact
        confirm as :meth:`match`; a pattern spanning lines never matches one line. A curated
        table's entry outranks a mined pattern on the same line, as :meth:`match` lists it first."""
        out: list[SiteMatch | None] = [None] * len(lines)
        if not lines:
            return out
        from errkb.match import prefilter

        lines, buf = prefilter.clean_lines(lines)
        if buf.count(b"\n") != len(lines) - 1:
            # a cell holding line breaks (an archive's message, a long one cut): one line of the
            # scan each, which maps a hit to its line by the newlines before it
            buf = "\n".join(line.replace("\n", " ") for line in lines).encode("utf-8")
        scan, members = self._prefilter()
        if scan is not None:
            if isinstance(scan, tuple):  # pyahocorasick (no Hyperscan here)
                found: dict[int, set[int]] = {}
                for n, line in enumerate(lines):
                    for _end, lid in scan[0].iter(line):
                        found.setdefault(n, set()).update(members[lid])
                hits = ((n, sorted(ids)) for n, ids in found.items())  # indexed below, as Hyperscan's
            else:
                hits = ((n, ids) for n, (_, ids) in prefilter.scan_hyperscan_lines(
                    scan, members, set(), buf, [], [], len(lines)).items())
            cuda = self.cuda
            for n, ids in hits:
                line = lines[n]
                if any(i < 0 for i in ids):
                    # the curated tables' messages are literals of the same scan (ids -1, -2, ...),
                    # each served on a line that names its library, as _cuda_matches serves them
                    entry = next((cuda[k] for k in sorted(-1 - i for i in ids if i < 0) if table_holds(cuda[k], line)),
                                 None)
                    if entry is not None:
                        out[n] = SiteMatch(entry["message"], 1, entry["table"], (), entry["meaning"])
                        continue
                if len(ids) == 1 and ids[0] >= 0:  # the common case: one candidate, no sorting
                    i = ids[0]
                    entry = self._entries.get(i) or self._entry(i)
                    folded = fold_space(line)  # as _confirm matches it
                    span = None if entry["multiline"] else _message_span(entry["fchunks"], folded, fold_marked(line, folded))
                    if span is None or not _trusted_on(entry, folded, span):
                        continue
                    confirmed = [(-entry["L"], i)]
                else:
                    confirmed = self._confirm(line, [i for i in ids if i >= 0])
                if confirmed:
                    i = confirmed[0][1]
                    site = self._batch_found.get(i)
                    if site is None:
                        site = self._batch_found[i] = self._site_match(1, i)
                    out[n] = site
        return out

    def _prefilter(self):
        """(scanner, members): a literal automaton over one required literal of each
        single-line trusted pattern (the one fewest patterns share), and the pattern ids of
        each literal. Hyperscan's compiled database is kept beside the cache (built once, a
        few seconds); without Hyperscan, a pyahocorasick automaton built per process."""
        if self._scan is not None:
            return self._scan
        from errkb.match import prefilter
        from errkb.match.engines import ahocorasick, hyperscan

        members: list[tuple[int, ...]] = []
        literals: list[str] = []
        # one JSON document [literals, members]: one json.loads (about 30 ms for 53k keys),
        # where a line per key parsed in Python cost 0.35 s of every enrich run's start
        keys_path = self._stem.with_name(self._stem.name + ".keys.json") if self._stem is not None else None
        if keys_path is not None and keys_path.exists():
            literals, lists = json.loads(keys_path.read_bytes())
            members = list(map(tuple, lists))
        elif self._rows_file is not None:
            if sys.stderr is not None and sys.stderr.isatty():  # as the cache build: a terminal only
                print("errkb: preparing the known-site batch scan (once after install or update)...", file=sys.stderr)
            pieces_of: list[list[str]] = []
            usage: Counter = Counter()
            for i in range(len(self._rows_file)):
                chunks = chunks_of(json.loads(self._rows_file.line(i))["p"])
                lits = [c for c in chunks if c is not None]
                pieces = [] if any("\n" in c for c in lits) else prefilter.prefilter_pieces(lits)
                pieces_of.append(pieces)
                usage.update(set(pieces))
            by_key: dict[str, list[int]] = {}
            for i, pieces in enumerate(pieces_of):
                key = prefilter.choose_key(pieces, usage, SHARED_KEY_OK)
                if key is not None:
                    by_key.setdefault(key, []).append(i)
            literals = sorted(by_key)
            members = [tuple(by_key[k]) for k in literals]
            if keys_path is not None:
                from errkb.cache import write_atomic

                write_atomic(keys_path, json.dumps([literals, members],
                                                   separators=(",", ":")).encode("utf-8"))
        # The curated tables' strings join the scan as literals of their own (ids -1, -2, ...):
        # each entry's message, and its code where lines print the code (cudaErrorAssert).
        # A literal two entries share (CUDA's and NCCL's "invalid argument") is one key with both
        # ids: pyahocorasick keeps one value per word.
        tabled = [(lit, -1 - k) for k, e in enumerate(self.cuda) for lit in table_literals(e)]
        literals, members = list(literals), list(members)
        at = {lit: n for n, lit in enumerate(literals)}
        for lit, k in tabled:
            if lit in at:
                members[at[lit]] = members[at[lit]] + (k,)
            else:
                at[lit] = len(literals)
                literals.append(lit)
                members.append((k,))
        scan = None
        if literals and hyperscan is not None:
            table = zlib.crc32("\n".join(lit for lit, _ in tabled).encode("utf-8"))
            hs_path = self._stem.with_name(f"{self._stem.name}.{table:08x}.hs") if self._stem is not None else None
            if hs_path is not None and hs_path.exists():
                scan = prefilter.load_database(hs_path.read_bytes())
            else:
                members = list(members)
                always: list[int] = []
                db = prefilter.literal_database(literals, members, always)
                # a literal Hyperscan refuses leaves its patterns unscanned: never served in a batch
                if db is not None:
                    if hs_path is not None:
                        from errkb.cache import write_atomic

                        write_atomic(hs_path, hyperscan.dumpb(db))
                    scan = prefilter.load_database(hyperscan.dumpb(db))
        elif literals and ahocorasick is not None:
            scan = (prefilter.automaton(literals),)
        self._scan = (scan, members)
        return self._scan

    def _entry(self, i: int) -> dict:
        entry = self._entries.get(i)
        if entry is None:
            entry = json.loads(self._rows_file.line(i))  # type: ignore[union-attr]
            entry["chunks"] = chunks_of(entry["p"])
            entry["fchunks"] = folded_chunks(entry["chunks"])  # what a line is confirmed with (fold_space)
            entry["multiline"] = any(c is not None and "\n" in c for c in entry["chunks"])
            self._entries[i] = entry
        return entry

    def _site_match(self, number: int, i: int, truncated: bool = False) -> SiteMatch:
        entry = self._entry(i)
        libraries = self.header.get("libraries", {})
        if self._release_order is None:  # built once: a batch of a log builds thousands of matches
            self._release_order = (release_ranks(libraries), release_commits(libraries))
        return SiteMatch(entry["p"], number, entry["t"], sites_of(entry["rows"], libraries, *self._release_order),
                         truncated=truncated)

    def _cuda_matches(self, lines: list[str]) -> list[SiteMatch]:
        """The curated tables' errors (CUDA runtime, NCCL, torchrun) each line holds (:func:`table_holds`)."""
        return [SiteMatch(entry["message"], number, entry["table"], (), entry["meaning"])
                for number, line in enumerate(lines, 1) if line for entry in self.cuda if table_holds(entry, line)]


class _Lines:
    """A file of lines found by number through an offsets array (4-byte unsigned ints)."""

    def __init__(self, path: Path, index_path: Path):
        self.offsets = array("I")
        self.offsets.frombytes(index_path.read_bytes())
        # The map keeps its own descriptor: no file is left open (an unclosed file's
        # ResourceWarning can fire in the middle of another import).
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            self._map = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if size else b""

    def __len__(self) -> int:
        return len(self.offsets)

    def line(self, i: int) -> bytes:
        start = self.offsets[i]
        end = self._map.find(b"\n", start)
        return self._map[start : end if end >= 0 else len(self._map)]


class _SortedLines(_Lines):
    """``word\tid,id`` lines sorted by word (UTF-8 bytes): a lookup is a binary search,
    or a dict lookup once preloaded."""

    _all: dict[str, tuple[int, ...]] | None = None

    def preload(self) -> None:
        if self._all is None:
            table = {}
            for line in bytes(self._map).decode("utf-8").splitlines():
                word, _, ids = line.partition("\t")
                table[word] = tuple(int(x) for x in ids.split(","))
            self._all = table

    def get(self, word: str) -> tuple[int, ...]:
        if self._all is not None:
            return self._all.get(word, ())
        value = self.value(word)
        return () if value is None else tuple(int(x) for x in value.split(b","))

    def value(self, word: str) -> bytes | None:
        """What follows ``word``'s tab on its line (None when no line has it): a binary search."""
        try:
            key = word.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate (a paste's undecodable byte): no key holds one
            return None
        lo, hi = 0, len(self.offsets)
        while lo < hi:
            mid = (lo + hi) // 2
            line = self.line(mid)
            tab = line.find(b"\t")
            here = line[:tab]
            if here < key:
                lo = mid + 1
            elif here > key:
                hi = mid
            else:
                return line[tab + 1 :]
        return None


def sites_of(rows: list[dict], libraries: dict, rank: dict | None = None,
             commits: dict | None = None) -> tuple[Site, ...]:
    """A pattern's index rows as Sites, each at its newest release (and that release's
    commit), newest release first: where the message is raised today leads. ``rank``
    (release_ranks(libraries)) and ``commits`` (release_commits(libraries)) may be given
    by a caller that builds many patterns' sites (each costs a pass over every release)."""
    rank = rank if rank is not None else release_ranks(libraries)
    commits = commits if commits is not None else release_commits(libraries)
    sites = []
    for row in rows:
        info = libraries.get(row["l"], {})
        releases = info.get("releases", [])
        newest = _newest(row["r"], releases)
        commit = commits.get(row["l"], {}).get(newest)
        sites.append(Site(row["l"], row["f"], row["n"], row["fn"], row.get("c"), row["k"], row.get("e"),
                          row["r"], newest, commit, info.get("repo"), row.get("x")))
    sites.sort(key=lambda s: (-rank.get(s.library, {}).get(s.release, -1), s.library, s.file, s.line))
    return tuple(sites)


def release_ranks(libraries: dict) -> dict[str, dict[str, int]]:
    """Each library's releases by age (0: the oldest scanned)."""
    return {lib: {v: n for n, (v, _) in enumerate(info.get("releases", []))} for lib, info in libraries.items()}


def release_commits(libraries: dict) -> dict[str, dict[str, str | None]]:
    """Each library's releases' commits (None where unknown)."""
    return {lib: dict((v, c) for v, c in info.get("releases", [])) for lib, info in libraries.items()}


def _newest(ranges: str, releases: list[list]) -> str:
    last = ranges.rsplit(",", 1)[-1]
    return last.rsplit("-", 1)[-1] if last else (releases[-1][0] if releases else "")


# trust level of a curated table's match -> (the word a line must hold, what its errors are called,
# whether its codes are names a line prints); each is data/sites/<trust>_errors.json. CUDA's and
# NCCL's strings are often short and generic ("internal error"), so a line must name the library
# unless the entry is marked "alone" (CUDA's own long sentence, "no kernel image is available for
# execution on the device", inside FlashInfer's "RMSNorm failed with error code ..."); their codes
# (cudaErrorStreamCaptureUnsupported, ncclSystemError) are printed on lines of their own by PyTorch
# ("Search for `cudaError...' in ...") and NCCL. torchrun's strings ("ChildFailedError", "Signal 9
# (SIGKILL) received by PID") are torch's own and need no word, as are PyTorch's C++ errors ("Watchdog caught
# collective operation timeout", "Expected all tensors to be on the same device"): no wheel ships their
# .cpp, which the index reads only for the releases Debian serves the source of (1.13.1, 2.6.0), so
# the table says what they mean for every release (data/sites/torch_errors.json).
ERROR_TABLES = {"cuda": ("CUDA", "CUDA runtime error", True), "nccl": ("NCCL", "NCCL error", True),
                "elastic": ("", "torchrun worker failure", False), "torch": ("", "PyTorch error (C++)", False)}

_WORD_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_")


def table_literals(entry: dict) -> list[str]:
    """The strings that identify a curated table's entry on a line: its message, and its
    code where its table's codes are names (a whole word there: see :func:`table_holds`)."""
    return [entry["message"], entry["code"]] if entry.get("code") else [entry["message"]]


def table_holds(entry: dict, line: str) -> bool:
    """Whether ``line`` holds a curated table's entry: one of the entry's ``words`` (if it asks
    for any; as written or in lower case), none of its table's ``unless`` words (a HIP error is
    not CUDA's, though ROCm reuses CUDA's strings), and the entry's message, or its code as a
    whole word (cudaErrorInvalidDevice is not in cudaErrorInvalidDeviceFunction). The
    browser's copy is tableHolds in templates/site/static/site.js."""
    words = entry["words"]
    if words and not any(w in line or w.lower() in line for w in words):
        return False
    if any(w in line for w in entry["unless"]):
        return False
    if entry["message"] in line:
        return True
    code = entry.get("code")
    at = line.find(code) if code else -1
    while at >= 0:
        end = at + len(code)
        if (at == 0 or line[at - 1] not in _WORD_CHARS) and (end == len(line) or line[end] not in _WORD_CHARS):
            return True
        at = line.find(code, at + 1)
    return False


def load_error_tables(folder: Path) -> list[dict]:
    """Every curated table's entries (CUDA runtime, NCCL, torchrun), each with its ``table``, the
    ``words`` a line must hold one of (none for an entry marked "alone"; an entry's own
    "words" where the table's word is too loose for its short, generic message), the table's
    ``unless`` words and the entry's ``code`` where its table's codes are names a line prints."""
    out = []
    for table, (word, _name, named) in ERROR_TABLES.items():
        entries, unless = load_cuda_table(folder / f"{table}_errors.json")
        out.extend(dict(e, table=table, words=[] if e.get("alone") else list(e.get("words") or ([word] if word else [])),
                        unless=unless, code=e.get("code") if named and str(e.get("code", "")).isidentifier() else None)
                   for e in entries)
    return out


def load_cuda_table(path: Path) -> tuple[list[dict], list[str]]:
    """The curated error strings of one table (message, meaning, code; optional "alone" and
    "words") and the table's "unless" words: CUDA's, NCCL's, torchrun's."""
    if not path.exists():
        return [], []
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
        if not e["message"].strip():
            raise SiteIndexError(f"{path}: errors[{n}]: an empty message would match every line")
        words = e.get("words", [])
        if not (isinstance(words, list) and all(isinstance(w, str) and w.strip() for w in words)):
            raise SiteIndexError(f"{path}: errors[{n}]: words must be a list of non-empty strings")
    unless = data.get("unless", [])
    if not (isinstance(unless, list) and all(isinstance(w, str) and w.strip() for w in unless)):
        raise SiteIndexError(f"{path}: unless must be a list of non-empty strings")
    return entries, unless


# ---------------------------------------------------------------- the cache


def _cache_folder() -> Path:
    from errkb.cache import cache_root

    return cache_root() / "sites"


class Served(_Plain):
    """One trusted pattern as the tier serves it: its number (the order of the cache's rows
    and of candidates with equal literal length), pattern, trust level ("strong" or
    "half"), literal length, anchor word (the one a line must hold for the pattern to be
    tried) and its index rows (sorted by library, file, line)."""

    __slots__ = ("number", "pattern", "level", "length", "anchor", "rows")


def served_patterns(index_path: Path | None = None) -> tuple[dict, list[Served]]:
    """The index's header and every pattern the trust rule serves, in pattern order, each
    with its anchor: what the cache holds, and what the static site ships
    (errkb.site.sites), so both answer alike."""
    import gzip

    index_path = Path(index_path) if index_path is not None else default_path()
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
    kept: list[tuple[str, str, int, set[str]]] = []
    df: Counter = Counter()
    for pattern in sorted(by_pattern):
        try:
            chunks = chunks_of(pattern)
        except ValueError:
            continue
        level, _, length = trust(pattern, chunks)
        if level is None or _printed_form_not_needed(by_pattern, pattern):
            continue
        words = set(_words_of(chunks))
        kept.append((pattern, level, length, words))
        df.update(words)
    # The anchor is the pattern's rarest whole word in the index (fewest patterns hold it),
    # among its rare tokens when it has any: candidates per line stay few.
    served = []
    for i, (pattern, level, length, words) in enumerate(kept):
        # a strong pattern's rare tokens; a long sentence without one has only plain words
        pool = [w for w in words if is_rare_token(w)] or list(words)
        # A short or numeric word ("n", "512") is in every other log line: never the anchor
        # while the pattern has a longer one.
        pool = [w for w in pool if len(w) >= 4 and not w.isdigit()] or pool
        anchor = min(pool, key=lambda w: (df[w], -len(w), w))
        group = sorted(by_pattern[pattern], key=lambda r: (r["l"], r["f"], r["n"]))
        served.append(Served(i, pattern, level, length, anchor, group))
    return header, served


def _printed_form_not_needed(by_pattern: dict[str, list[dict]], pattern: str) -> bool:
    """Whether ``pattern`` is a message an exception class builds, as a traceback prints it
    ("EngineDeadError: EngineCore encountered ...": errkb.mine.raise_sites gives both forms)
    whose message alone is trusted as much (strong, or both "half"): then the message alone
    answers, once per site. A printed form stronger than its message is kept: the class's name
    makes it specific where the message alone must cover half its line."""
    rows = by_pattern[pattern]
    return all(
        row["k"] == "factory" and row["e"] and pattern.startswith(row["e"] + ": ")
        and any(other["f"] == row["f"] and other["n"] == row["n"] for other in by_pattern.get(pattern[len(row["e"]) + 2:], ()))
        for row in rows) and trust(pattern[len(rows[0]["e"]) + 2:])[0] in ("strong", trust(pattern)[0])


def _message_may_begin(marked: str, at: int) -> bool:
    """Whether a message may begin at ``at`` of a folded text (``marked``: errkb.match.chunks.
    fold_marked): at its start or a line's, or after what ends a prefix (_MESSAGE_AFTER) or
    pydantic's words before a validator's message ("Value error, "), not inside a sentence."""
    before = at - 1 - (at > 0 and marked[at - 1] == " ")  # past the one space a folded text has there
    if before < 0 or marked[at - 1] == "\n" or marked[before] in _MESSAGE_AFTER:
        return True
    if marked[before] != ",":
        return False
    from errkb.text.normalize import PYDANTIC_WRAPPERS

    for wrapper in PYDANTIC_WRAPPERS:
        if not marked.endswith(wrapper + ",", 0, before + 1):
            continue
        start = before - len(wrapper)  # where the wrapper's words begin
        # the wrapper's own words, not the end of a longer word ("DefaultValue error, ")
        if start == 0 or not (marked[start - 1].isalnum() or marked[start - 1] == "_"):
            return True
    return False


def _head_start(head: list[str | None], text: str, end: int) -> int | None:
    """Where a pattern's chunks before its opening literal (``head``, ending in a wildcard)
    begin when the opening literal is at ``end``: each literal placed rightmost, each wildcard
    given a character at least; ``end`` itself for no head, None when they do not fit or the
    pattern begins with a wildcard (a message that begins with a value begins anywhere)."""
    pos, gap = end, 0
    for chunk in reversed(head):
        if chunk is None:
            gap += 1
            continue
        at = text.rfind(chunk, 0, pos - gap)
        if at < 0:
            return None
        pos, gap = at, 0
    return None if gap else pos


def opening_key(chunks: list[str | None]) -> tuple[int, str] | None:
    """(index, key) of a pattern's (folded chunks') opening literal, the first literal with
    OPENING_KEY_CHARS characters past its leading space, and the first such characters
    (what SiteIndex.match_cut looks a text's words up by); None without one among its first
    three literals (a pattern opening with short words and values only)."""
    seen = 0
    for k, chunk in enumerate(chunks):
        if chunk is None:
            continue
        key = chunk.lstrip(" ")[:OPENING_KEY_CHARS]
        if len(key) == OPENING_KEY_CHARS:
            return k, key
        seen += 1
        if seen == 3:
            return None
    return None


def _build_cache(index_path: Path, stem: Path) -> None:
    """Write the cache of the served patterns (served_patterns): ``.head`` (the index
    header), ``.rows`` (one JSON line per pattern: pattern, trust level, literal length, its
    rows), ``.anchors`` (``word\tids`` sorted by word) and the offsets arrays
    ``.ridx``/``.aidx``, and ``.opens``/``.oidx`` (``key\t[[id, k, literal], ...]``: the first
    OPENING_KEY_CHARS characters of each pattern's opening literal, folded, and that literal
    with its index among the pattern's chunks, for SiteIndex.match_cut)."""
    header, served = served_patterns(index_path)
    anchors: dict[str, list[int]] = {}
    openings: dict[str, list[list]] = {}
    for s in served:
        anchors.setdefault(s.anchor, []).append(s.number)
        chunks = folded_chunks(chunks_of(s.pattern))
        opening = opening_key(chunks)
        if opening is not None:
            openings.setdefault(opening[1], []).append([s.number, opening[0], chunks[opening[0]]])
    from errkb.cache import write_atomic

    stem.parent.mkdir(parents=True, exist_ok=True)
    out: dict[str, bytes] = {".head": json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode("utf-8")}
    body, offsets = bytearray(), array("I")
    for s in served:
        offsets.append(len(body))
        body += json.dumps({"p": s.pattern, "t": s.level, "L": s.length, "rows": s.rows}, separators=(",", ":"),
                           ensure_ascii=False).encode("utf-8") + b"\n"
    out[".rows"], out[".ridx"] = bytes(body), offsets.tobytes()
    body, offsets = bytearray(), array("I")
    for word in sorted(anchors, key=lambda w: w.encode("utf-8")):
        offsets.append(len(body))
        body += word.encode("utf-8") + b"\t" + ",".join(map(str, anchors[word])).encode() + b"\n"
    out[".anchors"], out[".aidx"] = bytes(body), offsets.tobytes()
    body, offsets = bytearray(), array("I")
    for key in sorted(openings, key=lambda w: w.encode("utf-8")):
        offsets.append(len(body))
        # folded: a key holds no tab or line break, the table's separators (JSON escapes the value's)
        body += key.encode("utf-8") + b"\t" + json.dumps(openings[key], separators=(",", ":"),
                                                         ensure_ascii=False).encode("utf-8") + b"\n"
    out[".opens"], out[".oidx"] = bytes(body), offsets.tobytes()
    # .head last: a reader that finds every file finds whole ones.
    for ext in (".rows", ".ridx", ".anchors", ".aidx", ".opens", ".oidx", ".head"):
        write_atomic(stem.with_name(stem.name + ext), out[ext])  # errkb.cache: the one atomic write
