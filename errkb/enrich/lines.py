"""Enrich log lines with the known error they show: a streaming filter and a Python API.

Every line that matches a record gains an ``errkb`` object (id, slug, repo,
errorClass, severity, score, the first solution, the fix-page URL, the tier); every other line
passes through. A filter inside a log pipeline must never drop, reorder or stall a
line, and must not die on one bad byte, so the rules are:

- One output line per input line, in input order (``only_matched`` drops unmatched
  lines, nothing else does). A line is whatever ends in ``\\n``; a final line without
  one is still a line. A ``\\r`` right before the ``\\n`` is part of the line ending
  (CRLF logs) and is not kept; a ``\\r`` anywhere else is kept.
- A line that is a JSON object keeps every field, byte for byte: when it matches,
  the ``errkb`` object is spliced in before its closing brace; when it does not, the
  line is written unchanged. Its message is read from the first present ``fields``
  entry (dotted paths reach into nested objects; a literal key with dots wins).
- Any other line (plain text, broken JSON, a JSON array or scalar) becomes
  ``{"message": <line>}``. When the line is not valid UTF-8, ``message`` holds it
  with U+FFFD for the bad bytes and ``message_b64`` holds the original bytes, so the
  line round-trips exactly.
- Output is never held back waiting for more input: the lines of each read are
  matched as one batch (at most ``batch`` lines) and written at once, so a slow
  producer (``tail -F``) sees each line written as soon as it arrives.

Matching is :meth:`errkb.match.matcher.Matcher.match_lines`, the matcher's batch API; this
module only frames lines, reads fields and writes JSON.
"""

from __future__ import annotations

import base64
import errno
import gc
import json
import os
import re
import select
import signal
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from itertools import compress
from typing import IO, Any

from errkb.enrich.value import Hit, RecordValues, SiteValues, errkb_object, tier_text  # noqa: F401 - errkb_object: the API's name
from errkb.errors import ErrkbError
from errkb.match.matcher import MAX_TEXT_CHARS, TAIL_CHARS
from errkb.signals import install, restore

DEFAULT_FIELDS = ("message",)
DEFAULT_BATCH = 16384
# A pipe hands over at most its buffer (64 KiB) per read; a file gives the whole chunk.
READ_SIZE = 1 << 20

_escape = json.encoder.encode_basestring  # C-accelerated; keeps non-ASCII as UTF-8
# Bytes JSON string escaping leaves as they are: everything from 0x20 up but '"' and
# '\\' (UTF-8 sequences pass through whole, as with ensure_ascii=False).
_PLAIN_BYTES = bytes(b for b in range(0x20, 256) if b not in b'"\\')


def _wrap_block(block: bytes) -> bytes | None:
    """``{"message": "<line>"}\\n`` for every line of a valid UTF-8 block, escaped
    with a few whole-block byte replaces (the same output as json's encoder), or None
    when the block holds control characters other than tab (then lines are escaped
    one by one)."""
    inner = _wrap_inner(block)
    return None if inner is None else b'{"message": "' + inner + b'"}\n'


def _wrap_inner(block: bytes) -> bytes | None:
    """:func:`_wrap_block` without the first line's ``{"message": "`` and the last
    line's ``"}\\n`` (a caller that splits the result adds them to its pieces, saving
    two copies of the block)."""
    special = block.translate(None, _PLAIN_BYTES)
    if special.translate(None, b'"\\\n\t'):
        return None
    if b"\\" in special:
        block = block.replace(b"\\", b"\\\\")
    if b'"' in special:
        block = block.replace(b'"', b'\\"')
    if b"\t" in special:
        block = block.replace(b"\t", b"\\t")
    return block.replace(b"\n", b'"}\n{"message": "')


def _object_starts(lines: list[str]) -> list[int]:
    """Indices of the ``lines`` that start with "{" (candidate JSON objects). A
    comprehension with a slice compare: ~80 ms per 1M lines, against ~220 ms for
    str.find/str.count between the "\n{" of the block (12% JSON lines) and ~120 ms for
    compress over map(str.startswith)."""
    return [i for i, line in enumerate(lines) if line[:1] == "{"]


def _reject_constant(name: str):
    raise ValueError(f"{name} is not JSON")


# Strict: NaN/Infinity are not JSON, so such a line is plain text, and every line
# written is JSON any consumer can parse.
_decode_json = json.JSONDecoder(parse_constant=_reject_constant).decode
_scan_json = json.JSONDecoder(parse_constant=_reject_constant).scan_once


def _decode_object_line(line: str):
    """``_decode_json(line)`` for a line that starts with "{", without the decoder's two
    Python frames and whitespace regex per call (a JSON log calls this per line)."""
    try:
        obj, end = _scan_json(line, 0)
    except StopIteration:
        raise ValueError("not JSON") from None
    if end != len(line) and line[end:].strip(" \t\n\r"):
        raise ValueError("extra data after the JSON value")
    return obj


# A JSON string or a bracket: enough to find a line's top-level members (linear: the
# string's two alternatives never overlap).
_JSON_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[{}\[\]]')
_NULL_VALUE = re.compile(r"[ \t\r\n]*:[ \t\r\n]*null[ \t\r\n]*")


def has_null_errkb(obj: dict) -> bool:
    """An ``errkb`` member that is null (a schema's empty default) counts as absent."""
    return "errkb" in obj and obj["errkb"] is None


def without_null_errkb(line: str) -> tuple[str, bool]:
    """(``line``, a JSON object, less its top-level ``"errkb": null`` members, as text so
    every other member keeps its bytes; whether no member is left)."""
    depth = 0
    cuts = []
    for m in _JSON_TOKEN.finditer(line):
        tok = m.group()
        if tok in "{[":
            depth += 1
        elif tok in "}]":
            depth -= 1
        elif depth == 1 and (tok == '"errkb"' or ("\\" in tok and json.loads(tok) == "errkb")):
            value = _NULL_VALUE.match(line, m.end())
            if value is not None and line[value.end():value.end() + 1] in (",", "}"):
                cuts.append((m.start(), value.end()))
    for start, end in reversed(cuts):
        if line[end] == ",":  # a member follows: the comma and the space after it go
            end += 1
            while end < len(line) and line[end] in " \t\r\n":
                end += 1
        else:  # the last member: the comma before it goes
            before = line[:start].rstrip(" \t\r\n")
            if before.endswith(","):
                start = len(before) - 1
        line = line[:start] + line[end:]
    rest = line.strip(" \t\r\n")
    return line, rest[1:-1].strip(" \t\r\n") == ""


class EnrichError(ErrkbError):
    """Bad usage or input of ``errkb enrich``; the message is one line for the user."""


# -- what a match adds to a line: errkb.enrich.value (one value for every path) ----


# -- reading a field -----------------------------------------------------------


def _field_paths(fields: str | Sequence[str]) -> list[tuple[str, tuple[str, ...]]]:
    if isinstance(fields, str):
        fields = [fields]
    return [(f, tuple(f.split("."))) for f in fields]


def field_value(obj: dict, paths: list[tuple[str, tuple[str, ...]]]) -> str | None:
    """The first string found at one of ``paths`` (a literal key with dots first,
    then the dotted path into nested objects); None when none holds a string."""
    for name, parts in paths:
        value = obj.get(name)
        if value is None and len(parts) > 1:
            value = obj
            for part in parts:
                if not isinstance(value, dict):
                    value = None
                    break
                value = value.get(part)
        if isinstance(value, str):
            return value
    return None


def cut_long(messages: list) -> list:
    """``messages`` with each one longer than the matcher's bound for a pasted text cut to
    its head and tail, as ``Matcher.match`` cuts a paste (explain): a 150 MB line costs
    matching time and memory of a 1 MiB one (docs/enrich.md, "Bounds")."""
    if not messages or max(map(len, messages)) <= MAX_TEXT_CHARS:
        return messages
    return [m[:MAX_TEXT_CHARS] + (b"\n" if isinstance(m, bytes) else "\n") + m[-TAIL_CHARS:]
            if len(m) > MAX_TEXT_CHARS else m for m in messages]


# -- counters ------------------------------------------------------------------


@dataclass
class Counters:
    """What a run has seen; printed to stderr at the end and on SIGUSR1."""

    lines: int = 0
    matched: int = 0
    sites: int = 0  # lines no record matched but a known site does (tagged "tier": "site")
    bytes_in: int = 0
    invalid_utf8: int = 0
    json_lines: int = 0
    matcher_errors: int = 0
    site_errors: int = 0  # batches whose known-site lookup failed (their lines got no site)
    already_enriched: int = 0  # JSON lines that had an "errkb" member: written unchanged
    # what the matcher's time bound cut short (Matcher.bounded_report): lines given up
    # on, lines not run, records no longer run
    bounded: dict = field(default_factory=lambda: {"timeouts": 0, "skipped": 0, "disabled": []})
    by_record: Counter = field(default_factory=Counter)
    labels: dict[str, str] = field(default_factory=dict)
    started: float = field(default_factory=time.perf_counter)

    def elapsed(self) -> float:
        return time.perf_counter() - self.started

    def as_dict(self) -> dict:
        elapsed = self.elapsed()
        return {
            "lines": self.lines,
            "matched": self.matched,
            "sites": self.sites,
            "json_lines": self.json_lines,
            "invalid_utf8": self.invalid_utf8,
            "matcher_errors": self.matcher_errors,
            "site_errors": self.site_errors,
            "already_enriched": self.already_enriched,
            "bounded": self.bounded,
            "bytes": self.bytes_in,
            "seconds": round(elapsed, 3),
            "lines_per_s": round(self.lines / elapsed) if elapsed > 0 else None,
            "top": [
                {"id": rid, "record": self.labels.get(rid, rid), "lines": n} for rid, n in self.by_record.most_common(10)
            ],
        }

    def summary(self) -> str:
        d = self.as_dict()
        share = f" ({100 * self.matched / self.lines:.1f}%)" if self.lines else ""
        rate = f"{d['lines_per_s']:,} lines/s" if d["lines_per_s"] is not None else "-"
        out = [f"errkb enrich: {self.lines:,} lines, {self.matched:,} matched{share}, {d['seconds']:.2f} s, {rate}"]
        if self.sites:
            out.append(f"  {self.sites:,} more lines are raised at a known site (tier site: where, not a fix)")
        if self.invalid_utf8:
            out.append(f"  {self.invalid_utf8:,} lines were not valid UTF-8 (passed through with message_b64)")
        if self.matcher_errors:
            out.append(f"  {self.matcher_errors:,} lines could not be matched (matcher error; passed through unmatched)")
        if self.site_errors:
            out.append(f"  {self.site_errors:,} batches' known-site lookups failed (their lines got no site)")
        if self.already_enriched:
            out.append(f"  {self.already_enriched:,} matched JSON lines already had an errkb member (written unchanged)")
        cut = self.bounded
        if cut["timeouts"] or cut["skipped"]:
            out.append(f"  {cut['timeouts']:,} pattern runs hit the time bound and {cut['skipped']:,} were not run "
                       f"(counted as no match); records no longer run: {', '.join(cut['disabled']) or 'none'}")
        for top in d["top"]:
            out.append(f"  {top['lines']:>10,}  {top['id']}  {top['record']}")
        return "\n".join(out)


# -- the line enricher -----------------------------------------------------------


class LineEnricher:
    """Turns batches of raw lines (bytes, without their ``\\n``) into NDJSON text.

    ``matcher`` needs ``match_lines(list[str]) -> list[list[Match]]``.
    """

    def __init__(
        self,
        matcher: Any,
        fields: str | Sequence[str] = DEFAULT_FIELDS,
        site_url: str | None = None,
        only_matched: bool = False,
        counters: Counters | None = None,
        resolve_many: Callable[[list[str]], dict[str, dict]] | None = None,
        sites: Any = None,
    ):
        self.matcher = matcher
        # errkb.match.sites.SiteIndex (None: no known-site tier): a line no record matches
        # is tagged with its known site
        self.sites = sites
        self.site_values = SiteValues()
        self.paths = _field_paths(fields)
        self.only_matched = only_matched
        self.values = RecordValues(site_url, resolve_many)
        # None: matched lines get their errkb text. A list (an archive worker, which has
        # the matcher but not the records): a matched line gets a NUL where its errkb
        # text goes (no line written here holds a NUL: JSON escapes it) and its Hit is
        # appended; the parent puts the texts in.
        self.found: list[Hit] | None = None
        self.counters = counters or Counters()

    def _match(self, messages: list[str]) -> list[list]:
        """The matcher's batch call; a failure there costs only the lines it failed on."""
        try:
            return self.matcher.match_lines(cut_long(messages))
        except Exception:
            out = []
            for m in messages:
                try:
                    out.append(self.matcher.match_lines([m])[0])
                except Exception:
                    self.counters.matcher_errors += 1
                    out.append([])
            return out
        finally:
            report = getattr(self.matcher, "bounded_report", None)
            if report is not None:
                self.counters.bounded = report()

    def enrich(self, raw_lines: list[bytes]) -> bytes:
        """NDJSON for ``raw_lines`` (one output line each, unless only_matched), each
        ending in ``\\n``; empty when nothing is to be written."""
        if not raw_lines:
            return b""
        return self.enrich_block(b"\n".join(raw_lines))

    def enrich_block(self, block: bytes, final: bool = False) -> bytes:
        """Like :meth:`enrich` for lines already joined by ``\\n`` (as read: no copy
        per line). An empty block is one empty line. ``final``: the block's last line
        ended the input without a newline (so a "\\r" ending it is its own)."""
        # A block allocates a few objects per line (decoded JSON lines, matches, output
        # pieces), none of them in a cycle: the cyclic collector would walk them all again
        # and again for nothing (a sixth of a 1M-line run).
        if not gc.isenabled():
            return self._enrich_block(block, final)
        gc.disable()
        try:
            return self._enrich_block(block, final)
        finally:
            gc.enable()

    def _enrich_block(self, block: bytes, final: bool) -> bytes:
        counters = self.counters
        counters.bytes_in += len(block) + 1
        # Whole-block operations (CRLF fold, decode, split, find, escape) run in C;
        # Python-level work per line is kept to the few lines that need it.
        if b"\r" in block:  # CRLF line endings: the "\r" is not part of the line
            block = block.replace(b"\r\n", b"\n")
            if block.endswith(b"\r") and not final:
                block = block[:-1]
        b64: dict[int, bytes] = {}
        try:
            text: str | None = block.decode("utf-8")
        except UnicodeDecodeError:
            text = None
        if text is not None:
            lines = text.split("\n")
            starts = _object_starts(lines)
        else:
            lines = []
            for i, raw in enumerate(block.split(b"\n")):
                try:
                    lines.append(raw.decode("utf-8"))
                except UnicodeDecodeError:
                    lines.append(raw.decode("utf-8", "replace"))
                    b64[i] = base64.b64encode(raw)
            counters.invalid_utf8 += len(b64)
            starts = [i for i in _object_starts(lines) if i not in b64]
        n = len(lines)
        counters.lines += n

        messages = lines
        objects: dict[int, dict] = {}
        if starts:
            messages = list(lines)
            paths = self.paths
            for i in starts:
                try:
                    obj = _decode_object_line(lines[i])
                except (ValueError, RecursionError):
                    continue
                if isinstance(obj, dict):
                    objects[i] = obj
                    messages[i] = field_value(obj, paths) or ""
            counters.json_lines += len(objects)

        results = self._match(messages)
        if self.sites is not None:
            results = self.add_sites(messages, results)
        matched = list(compress(range(n), results))
        if self.only_matched:
            if not matched:
                return b""
            out = self._matched_lines(matched, results, lines, objects, b64)
            out.append("")
            return "\n".join(out).encode("utf-8")
        # Every line as {"message": ...}, then the few other lines (JSON objects,
        # matches, invalid UTF-8) patched in by index.
        inner = _wrap_inner(block) if text is not None else None
        if inner is None:
            wrapped = ('{"message": ' + '}\n{"message": '.join(map(_escape, lines)) + "}\n").encode("utf-8")
            if not (matched or objects or b64):
                return wrapped
            out = wrapped.split(b"\n")
        else:
            if not (matched or objects or b64):
                return b'{"message": "' + inner + b'"}\n'
            out = inner.split(b"\n")
            out[0] = b'{"message": "' + out[0]
            out[-1] += b'"}'
            out.append(b"")
        for i in objects:
            out[i] = lines[i].encode("utf-8")
        for i, code in b64.items():
            out[i] = out[i][:-1] + b', "message_b64": "' + code + b'"}'
        if matched:
            texts = self._matched_lines(matched, results, lines, objects, b64)
            if texts:
                joined = "\n".join(texts)
                encoded = joined.encode("ascii").split(b"\n") if joined.isascii() else [t.encode("utf-8") for t in texts]
                for i, data in zip(matched, encoded):
                    out[i] = data
        return b"\n".join(out)

    def add_sites(self, messages: list[str], results: list) -> list:
        """``results`` with each line no record matched but a known site does given that
        site's match (curated always wins: a matched line is left as it is)."""
        try:
            found = self.sites.match_lines(cut_long(messages))
        except Exception:  # a broken site index costs the tier, never the records' matches
            self.counters.site_errors += 1
            return results
        if not any(found):
            return results
        results = list(results)
        for i, site in enumerate(found):
            if site is not None and not results[i]:
                results[i] = [site]
        return results

    def _matched_lines(self, matched: list[int], results: list, lines: list[str], objects: dict[int, dict],
                       b64: dict[int, bytes]) -> list[str]:
        """The output line of each matched line ``matched[k]``, in order (a JSON line
        that already has an ``errkb`` member as read). One loop over a batch's matches,
        the counters updated once per batch."""
        counters = self.counters
        labels = counters.labels
        values = self.values
        found = self.found
        text_parts = values._text  # read directly: this loop runs per matched line
        escape = _escape
        bests = [results[i][0] for i in matched]
        if found is None:
            values.fetch([best.record_id for best in bests if not hasattr(best, "sites")])
        rids = []
        out = []
        for i, best in zip(matched, bests):
            line = lines[i]
            obj = objects.get(i)
            if obj is not None and "errkb" in obj and not has_null_errkb(obj):
                counters.already_enriched += 1  # written as read (docs/enrich.md)
                out.append(line)
                continue
            if hasattr(best, "sites"):  # a known site (errkb.match.sites.SiteMatch), not a record
                counters.sites += 1
                text = self.site_values.text(best)
            else:
                rid = best.record_id
                rids.append(rid)
                if found is None:
                    parts = text_parts.get(rid) or values.parts(best)
                    # the tier last (value.tier_text): the record's fields keep their place
                    text = f"{parts[0]}{round(float(best.score), 3)!r}{parts[1][:-1]}{tier_text(best)}"
                else:
                    found.append(Hit.of(best))
                    text = "\x00"
            if obj is not None:
                # The input's members byte for byte, errkb's spliced in as text: re-encoding
                # would turn 1e999 into Infinity, escape non-ASCII, drop duplicate keys.
                empty = not obj
                if "errkb" in obj:  # null: enriched as if absent, the null member taken out
                    line, empty = without_null_errkb(line)
                body = line.rstrip()
                out.append(f'{body[:-1]}"errkb": {text}}}' if empty else f'{body[:-1]}, "errkb": {text}}}')
                continue
            code = b64.get(i)
            if code is not None:
                out.append(f'{{"message": {escape(line)}, "message_b64": "{code.decode("ascii")}", "errkb": {text}}}')
            else:
                out.append(f'{{"message": {escape(line)}, "errkb": {text}}}')
        if rids:
            counters.matched += len(rids)
            counters.by_record.update(rids)
            if found is None:
                for rid in set(rids).difference(labels):
                    labels[rid] = values.labels[rid]
        return out


# -- the streaming filter --------------------------------------------------------


class _Stop(Exception):
    """Raised inside the read loop when a stop signal arrived (the batch in hand is
    still written)."""


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        try:
            n = os.write(fd, view)
        except BlockingIOError:
            select.select([], [fd], [])
            continue
        view = view[n:]


class _Output:
    """Writes to a file descriptor with one ``write`` per batch (nothing buffered in
    between), or to a file object when there is no descriptor (tests, embedding)."""

    def __init__(self, stream: IO):
        self.stream = stream
        buffer = getattr(stream, "buffer", stream)
        try:
            self.fd: int | None = buffer.fileno()
        except (AttributeError, OSError, ValueError):
            self.fd = None
        self.buffer = buffer
        if self.fd is not None:
            try:
                stream.flush()
            except (OSError, ValueError):
                pass

    def write(self, data: bytes) -> None:
        try:
            if self.fd is not None:
                _write_all(self.fd, data)
            else:
                self.buffer.write(data)
                self.buffer.flush()
        except BrokenPipeError:
            raise
        except OSError as e:  # a full disk, a vanished mount: say so in one line
            raise EnrichError(f"{_name_of(self.stream)}: cannot write: {e.strerror}") from e


def _name_of(stream: Any) -> str:
    name = getattr(stream, "name", None)
    if name in (0, "<stdin>") or stream is sys.stdin:
        return "stdin"
    if name in (1, "<stdout>") or stream is sys.stdout:
        return "stdout"
    return str(name) if name is not None else "stream"


def _input_fd(source: Any) -> int | None:
    buffer = getattr(source, "buffer", source)
    try:
        return buffer.fileno()
    except (AttributeError, OSError, ValueError):
        return None


@dataclass
class StreamResult:
    counters: Counters
    stopped_by: str | None = None  # "SIGTERM" | "SIGINT" | "broken pipe" | None


class _Signals:
    """SIGTERM/SIGINT ask the loop to stop after writing what it has read; SIGUSR1
    asks for the counters. Handlers only set flags: the loop wakes through a pipe
    (``signal.set_wakeup_fd``) and acts between batches, so no line read is lost."""

    def __init__(self, enabled: bool):
        self.enabled = enabled and threading.current_thread() is threading.main_thread()
        self.stop: str | None = None
        self.report = False
        self.wake_r: int | None = None
        self._old: dict = {}
        self._old_wakeup = -1

    def __enter__(self):
        if not self.enabled:
            return self
        self.wake_r, wake_w = os.pipe()
        self._wake_w = wake_w
        os.set_blocking(self.wake_r, False)
        os.set_blocking(wake_w, False)
        self._old_wakeup = signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False)
        self._old = install({signal.SIGTERM: self._on_stop, signal.SIGINT: self._on_stop,
                             signal.SIGUSR1: self._on_report})
        return self

    def _on_stop(self, signum, frame):
        self.stop = signal.Signals(signum).name

    def _on_report(self, signum, frame):
        self.report = True

    def drain(self) -> None:
        if self.wake_r is not None:
            try:
                while os.read(self.wake_r, 512):
                    pass
            except BlockingIOError:
                pass

    def __exit__(self, *exc):
        if not self.enabled:
            return False
        restore(self._old)
        signal.set_wakeup_fd(self._old_wakeup)
        os.close(self.wake_r)
        os.close(self._wake_w)
        return False


def _chunks(source: Any, signals: _Signals, on_idle: Callable[[], None]) -> Iterator[bytes]:
    """Raw chunks of one input as they arrive. Between chunks it honours signals;
    while waiting for input it wakes on any signal."""
    fd = _input_fd(source)
    if fd is None:
        buffer = getattr(source, "buffer", source)
        read = getattr(buffer, "read1", buffer.read)
        while True:
            chunk = read(READ_SIZE)
            if not chunk:
                return
            yield chunk
            if signals.stop:
                raise _Stop
    wake = [signals.wake_r] if signals.wake_r is not None else []
    while True:
        if signals.stop:
            raise _Stop
        if signals.report:
            on_idle()
        if wake:
            try:
                ready, _, _ = select.select([fd, *wake], [], [])
            except InterruptedError:  # pragma: no cover - PEP 475 retries select
                continue
            if wake[0] in ready:
                signals.drain()
                if fd not in ready:
                    continue
        try:
            chunk = os.read(fd, READ_SIZE)
        except BlockingIOError:
            select.select([fd], [], [])
            continue
        except OSError as e:
            if e.errno == errno.EIO:  # a closed terminal
                return
            raise EnrichError(f"{_name_of(source)}: cannot read: {e.strerror}") from e
        if not chunk:
            return
        yield chunk


def stream(
    inputs: Iterable[Any],
    output: IO,
    enricher: LineEnricher,
    batch: int = DEFAULT_BATCH,
    flush_each_line: bool = False,
    report: Callable[[Counters], None] | None = None,
    handle_signals: bool = True,
) -> StreamResult:
    """Enrich every line of ``inputs`` (binary file objects, read in turn) to ``output``.

    Each read's complete lines are enriched as one batch (split at ``batch`` lines)
    and written with one write; ``flush_each_line`` writes each line on its own.
    SIGTERM/SIGINT stop the run after everything already read is written; SIGUSR1
    calls ``report``; a closed output (EPIPE) stops it quietly.
    """
    batch = 1 if flush_each_line else max(1, batch)
    out = _Output(output)
    counters = enricher.counters
    result = StreamResult(counters)
    on_report = report or (lambda c: None)

    def emit(block: bytes, final: bool = False) -> None:
        """Enrich and write complete lines joined by "\\n" (at most ``batch`` per write)."""
        if block.count(b"\n") < batch:
            data = enricher.enrich_block(block, final)
            if data:
                out.write(data)
            return
        lines = block.split(b"\n")
        for start in range(0, len(lines), batch):
            data = enricher.enrich(lines[start:start + batch])
            if data:
                out.write(data)

    with _Signals(handle_signals) as signals:

        def idle_report() -> None:
            signals.report = False
            on_report(counters)

        try:
            for source in inputs:
                pending: list[bytes] = []  # pieces of a line longer than one read
                try:
                    for chunk in _chunks(source, signals, idle_report):
                        last = chunk.rfind(b"\n")
                        if last < 0:
                            pending.append(chunk)
                            continue
                        if pending:
                            pending.append(chunk[:last])
                            block = b"".join(pending)
                            pending = []
                        else:
                            block = chunk[:last]
                        if last + 1 < len(chunk):
                            pending.append(chunk[last + 1:])
                        emit(block)
                        if signals.report:
                            idle_report()
                except _Stop:
                    result.stopped_by = signals.stop
                finally:
                    if pending:  # a final line without "\n" is still a line
                        emit(b"".join(pending), final=True)
                if result.stopped_by:
                    break
            if signals.stop and not result.stopped_by:
                result.stopped_by = signals.stop
        except BrokenPipeError:
            result.stopped_by = "broken pipe"
    return result


# -- the Python API --------------------------------------------------------------


class RecordEnricher:
    """Adds ``errkb`` to dicts whose message matches a record (embedding API), or, with
    ``sites`` (an errkb.match.sites.SiteIndex, e.g. ``KnowledgeBase.sites()``), a known
    site where no record matches (tier "site", as the filter tags it)."""

    def __init__(self, matcher: Any, field: str | Sequence[str] = "message", site_url: str | None = None,
                 sites: Any = None):
        self.matcher = matcher
        self.paths = _field_paths(field)
        self.site_url = site_url
        self.sites = sites
        # One errkb value per record: a store-backed Match looks its record up per call.
        self.values = RecordValues(site_url)
        self.site_values = SiteValues()

    def enrich_batch(self, items: list[dict]) -> list[tuple[dict, bool]]:
        messages = [field_value(d, self.paths) if isinstance(d, dict) else None for d in items]
        texts = [m or "" for m in messages]
        results = self.matcher.match_lines(texts)
        found_sites: list = [None] * len(items)
        if self.sites is not None:
            left = [i for i, (m, r) in enumerate(zip(messages, results)) if m and not r]
            if left:  # curated always wins: only the lines no record matched are asked
                try:
                    sites = self.sites.match_lines(cut_long([texts[i] for i in left]))
                except Exception:  # the tier is an addition: a broken index leaves the records' answers whole
                    sites = []
                for i, site in zip(left, sites):
                    found_sites[i] = site
        out = []
        for item, message, found, site in zip(items, messages, results, found_sites):
            if message and found:
                out.append(({**item, "errkb": self.values.value(found[0])}, True))
            elif site is not None:
                out.append(({**item, "errkb": dict(self.site_values.object(site))}, True))  # the caller owns it, as a record's
            else:
                out.append((item, False))
        return out


def enrich_records(
    records: Iterable[dict],
    matcher: Any,
    field: str | Sequence[str] = "message",
    site_url: str | None = None,
    only_matched: bool = False,
    batch: int = 1,
    sites: Any = None,
) -> Iterator[dict]:
    """Yield each dict of ``records``, in order; a matched one as a new dict with an
    ``errkb`` object added (the input dict is not changed), an unmatched one as is.

    ``field`` is a key or dotted path (or several, the first present wins) holding
    the message. ``batch`` > 1 matches that many records per matcher call, which is
    faster but holds records back until the batch is full: keep 1 for live streams.
    ``sites`` (``KnowledgeBase.sites()``) tags a message no record matches with its
    known site (``"tier": "site"``: where it is raised, not a fix), as `errkb enrich` does.
    """
    enricher = RecordEnricher(matcher, field, site_url, sites)
    pending: list[dict] = []
    for item in records:
        pending.append(item)
        if len(pending) >= batch:
            for d, matched in enricher.enrich_batch(pending):
                if matched or not only_matched:
                    yield d
            pending = []
    if pending:
        for d, matched in enricher.enrich_batch(pending):
            if matched or not only_matched:
                yield d


# -- the command's entry point -------------------------------------------------------


def _open_inputs(files: Sequence[str], stdin: IO) -> Iterator[Any]:
    """Each input in turn, opened when its turn comes (``-`` or none: stdin)."""
    for name in files or ["-"]:
        if str(name) == "-":
            if stdin is None:  # started with stdin closed (`<&-`)
                raise EnrichError("stdin: closed; pipe lines in or name FILEs")
            yield stdin
            continue
        try:
            fh = open(name, "rb", buffering=0)
        except OSError as e:
            raise EnrichError(f"{name}: cannot read: {e.strerror}") from e
        with fh:
            yield fh


def run_filter(
    matcher: Any,
    files: Sequence[str] = (),
    fields: Sequence[str] = DEFAULT_FIELDS,
    site_url: str | None = None,
    only_matched: bool = False,
    batch: int = DEFAULT_BATCH,
    flush_each_line: bool = False,
    stdin: IO | None = None,
    stdout: IO | None = None,
    report: Callable[[Counters], None] | None = None,
    resolve_many: Callable[[list[str]], dict[str, dict]] | None = None,
    sites: Any = None,
) -> StreamResult:
    """``errkb enrich [FILE...]``: enrich lines from files (or stdin) to stdout.

    ``resolve_many(ids) -> {id: record}`` fetches matched records in bulk (``Store.get_many``).
    """
    for name in files:
        if str(name) != "-" and not os.path.exists(name):
            raise EnrichError(f"{name}: no such file")
    enricher = LineEnricher(matcher, fields=fields, site_url=site_url, only_matched=only_matched, resolve_many=resolve_many,
                            sites=sites)
    stdin = stdin if stdin is not None else sys.stdin
    stdout = stdout if stdout is not None else sys.stdout
    return stream(_open_inputs(files, stdin), stdout, enricher, batch=batch, flush_each_line=flush_each_line, report=report)
