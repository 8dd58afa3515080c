"""Read schema-v2 records from every form the dataset comes in.

One reader, :func:`read_records`, accepts the dataset's wrapper
``{"record": {...}, "datasetVersion": "..."}``, a bare record, a JSON array of
either, JSON Lines of either (or any whitespace-separated sequence of JSON values,
so a single pretty-printed document works too), and folders of such files,
whatever their extension (the seed file ends in ``.txt``). A gzip-compressed file
(``records.jsonl.gz``, known by its magic bytes, not its name) is read as what it
holds, streamed like any other.

Files are streamed in chunks, so a 100 MB file is never held whole in memory. The
reader never raises on bad content: every value it cannot turn into a record comes
out as a :class:`SourcedRecord` with ``record=None``, the raw bytes verbatim and a
one-line ``error`` naming the line, column and reason, so ingest can keep it in the
rejects table. Only an unusable path (missing, unreadable) raises
:class:`InputError`.
"""

from __future__ import annotations

import codecs
import hashlib
import itertools
import json
import os
import re
import stat
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from errkb.errors import ErrkbError
from errkb.terminal import one_line

CHUNK_SIZE = 1 << 20
# One JSON value larger than this is refused rather than buffered without bound.
MAX_VALUE_BYTES = 64 << 20
# A gzip stream is read while it has expanded to at most this many times the compressed
# bytes read so far (past its first MAX_GUNZIP_FREE_BYTES): records compress about ten
# times, a bomb a thousand. Its memory is bounded anyway; this bounds its time.
MAX_GUNZIP_RATIO = 100
MAX_GUNZIP_FREE_BYTES = 64 << 20
# Limits on one record (docs/records.md): larger or deeper ones are rejects with the
# reason, so one of them cannot exhaust the store's memory (DuckDB) or Python's stack.
MAX_RECORD_BYTES = 16 << 20
MAX_DEPTH = 64
# A reject is kept verbatim up to this size; of a larger one, its head (and the reason
# says so): a reject's bytes go into the store within the same memory budget.
MAX_REJECT_RAW_BYTES = 1 << 20

_WS = " \t\r\n\ufeff"
_NOT_WS = re.compile("[^ \t\r\n\ufeff]")
# What str.isspace() holds beyond JSON's whitespace (tests/test_hostile_bounds.py checks it).
_OTHER_SPACE = "\x0b\x0c\x1c\x1d\x1e\x1f\x85\xa0\u1680" + "".join(map(chr, range(0x2000, 0x200b))) + "\u2028\u2029\u202f\u205f\u3000"
_SURROGATE = re.compile("[\udc80-\udcff]")
# A JSON \u escape of a UTF-16 surrogate without its pair: valid JSON syntax, but no
# character; UTF-8 (the store, the site, a terminal) cannot hold it.
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
_LONE_SURROGATE_ESCAPE = re.compile(
    r"\\u[dD][89abAB][0-9a-fA-F]{2}(?!\\u[dD][c-fC-F])|(?<![0-9a-fA-F]{2})\\u[dD][c-fC-F][0-9a-fA-F]{2}"
)


class _ParseError(Exception):
    """One value that cannot be parsed: ``args`` are (reason, position in the buffer)."""


class _Refused(ValueError):
    """Raised from inside the JSON decoder: valid-looking text that is not a JSON value
    errkb takes (``args``: the reason, and a regex finding where it is)."""


def _refuse_constant(name: str):
    # NaN and Infinity are Python's extension, not JSON; taken, NaN became "null" in
    # the schema's error message and "NaN" in the stored text no other reader parses.
    raise _Refused(f"{name} is not JSON (write a number or null)", re.compile(r"[:,\[]\s*(-?" + name + r")\b"))


def _object_without_duplicates(pairs: list) -> dict:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set = set()
        key = next(k for k, _ in pairs if k in seen or seen.add(k))
        # JSON readers disagree on which of the two values wins: the record is ambiguous.
        raise _Refused(f"duplicate key {json.dumps(key, ensure_ascii=False)} in one object "
                       "(which value counts is not defined)", re.compile(re.escape(json.dumps(key)) + r"\s*:"), 2)
    return obj


class InputError(ErrkbError):
    """A path that cannot be read at all (missing, a device, no permission)."""


@dataclass(frozen=True)
class Origin:
    """Where a value came from: file, 1-based line and column, index in an array."""

    file: str
    line: int
    column: int = 1
    index: int | None = None

    def __str__(self) -> str:
        where = f"{one_line(self.file)}:{self.line}:{self.column}"
        return where if self.index is None else f"{where} (array item {self.index})"


@dataclass
class SourcedRecord:
    """A record (or a value that failed to become one) with its provenance."""

    record: dict | None
    raw: bytes
    origin: Origin
    dataset_version: str | None = None
    error: str | None = None  # the reason, without position
    error_at: Origin | None = None  # where exactly the error is (may be past origin)
    warnings: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.error is None and self.record is not None

    @property
    def error_line(self) -> str | None:
        """The error as one line: ``file:line:column: reason``."""
        if self.error is None:
            return None
        at = self.error_at or self.origin
        return f"{one_line(at.file)}:{at.line}:{at.column}: {self.error}"


def content_hash(record: dict) -> str:
    """Hash of a record's content, independent of key order and formatting."""
    canonical = json.dumps(record, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()


def canonical_json(record: dict) -> str:
    """The record as stored: its own key order, no insignificant whitespace."""
    return json.dumps(record, ensure_ascii=False, separators=(",", ":"))


# errkb's own files kept next to a dataset's records (proof runs, findings on records kept
# as ingested): folders of these names right under a walked folder hold no records.
SIDECAR_DIRS = ("proofs", "findings", "variants", "sites")


def _walk(paths: Iterable[str | os.PathLike]) -> Iterator[tuple[Path, str | None]]:
    """Each file under ``paths`` with None, or with why it is not read: inside a walked
    folder, only regular files are (a symlink to /dev/zero or a FIFO there would be read
    forever; a dangling symlink cannot be opened) and each other entry is named, not
    fatal. A path given by itself may also be a pipe or ``-``."""
    for p in paths:
        path = Path(p)
        if path.is_dir():
            for root, dirs, files in os.walk(path):
                dirs[:] = sorted(d for d in dirs if not d.startswith(".")
                                 and not (root == str(path) and d in SIDECAR_DIRS))
                for name in sorted(files):
                    if not name.startswith("."):
                        entry = Path(root) / name
                        yield entry, _not_regular(entry)
        elif str(p) == "-" or path.is_file() or path.is_fifo():
            yield path, None
        elif path.exists():
            raise InputError(f"{one_line(file_name(path))}: not a regular file, pipe or folder")
        else:
            raise InputError(f"{one_line(file_name(path))}: no such file or folder")


def _not_regular(path: Path) -> str | None:
    try:
        mode = path.stat().st_mode
    except OSError as e:
        what = "a dangling symlink" if path.is_symlink() else "cannot be read"
        return f"{what} ({e.strerror or e}): not read"
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISFIFO(mode):
        return "a FIFO inside a folder: not read (name it by itself to read a pipe)"
    kind = "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "a socket" if stat.S_ISSOCK(mode) else "not a regular file"
    return f"{kind} inside a folder: not read"


def file_name(path: str | os.PathLike) -> str:
    """A path as text that UTF-8 holds: a name with bytes that are not UTF-8 (Python
    keeps them as lone surrogates) gets them as ``\\xff`` escapes. That is how the store
    records the file (DuckDB refused the surrogate and rolled the whole ingest back)."""
    name = str(path)
    try:
        name.encode("utf-8")
        return name
    except UnicodeEncodeError:
        return os.fsencode(name).decode("utf-8", "backslashreplace")


def iter_files(paths: Iterable[str | os.PathLike]) -> Iterator[Path]:
    """Expand paths to the files read: folders recursively, sorted, hidden entries skipped,
    a walked folder's own ``proofs/`` and ``findings/`` (errkb's sidecars) left out, and
    entries that are not regular files (see _walk) left out."""
    for path, problem in _walk(paths):
        if problem is None:
            yield path


def read_records(paths: Iterable[str | os.PathLike]) -> Iterator[SourcedRecord]:
    """Yield every value found under ``paths`` as a :class:`SourcedRecord`."""
    for path, problem in _walk(paths):
        if problem is not None:
            yield SourcedRecord(None, b"", Origin(file_name(path), 1, 1), error=problem)
            continue
        yield from read_file(path)


def read_file(path: Path) -> Iterator[SourcedRecord]:
    """Every value in one file (``-`` is standard input), gzip-compressed or not."""
    if str(path) == "-":
        yield from _values(sys.stdin.buffer, "<stdin>")
        return
    try:
        handle = open(path, "rb")
    except OSError as e:
        raise InputError(f"{one_line(file_name(path))}: cannot open: {e.strerror or e}") from e
    with handle:
        yield from _values(handle, file_name(path))


GZIP_MAGIC = b"\x1f\x8b"


def _values(handle, name: str) -> Iterator[SourcedRecord]:
    peek = getattr(handle, "peek", None)
    if peek is not None:
        head = peek(2)[:2]
    else:  # a stream that cannot peek (a pipe-like wrapper): its first bytes go back in front
        head = handle.read(2)
        handle = _Prefixed(head, handle)
    if head != GZIP_MAGIC:
        yield from _ValueStream(handle, name).values()
        return
    data = _Gunzipped(handle)
    stream = _ValueStream(data, name)
    yield from stream.values()
    if data.error:
        # What came before the damage is read; the damage itself is one reject where it starts.
        yield SourcedRecord(None, b"", stream.end_origin(), error=data.error)


class _Prefixed:
    """A stream with bytes already read from it put back in front."""

    def __init__(self, prefix: bytes, handle):
        self._prefix, self._handle = prefix, handle

    def read(self, size: int = -1) -> bytes:
        if self._prefix:
            out, self._prefix = self._prefix, b""
            return out
        return self._handle.read(size)

    def readinto(self, buffer) -> int:  # GzipFile reads through this
        data = self.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)


class _Gunzipped:
    """A gzip stream read as the bytes it holds, in bounded memory whatever it expands to.
    Corrupt or cut-short data ends the bytes there and says why (``error``), so the
    records before it are kept and the damage is a reject, not an internal error."""

    def __init__(self, handle):
        import gzip

        self._compressed = _Counted(handle)
        self._gzip = gzip.GzipFile(fileobj=self._compressed, mode="rb")
        self.read_bytes = 0
        self.error: str | None = None

    def read(self, size: int) -> bytes:
        import zlib

        if self.error:
            return b""
        try:
            # read1: what one step decompressed; read() drops what it had when the data breaks off.
            chunk = self._gzip.read1(size)
        except (OSError, EOFError, zlib.error) as e:
            self.error = (f"the gzip data is corrupt or cut short after {self.read_bytes} decompressed bytes "
                          f"({one_line(str(e)) or type(e).__name__}): the rest of the file is not read")
            return b""
        self.read_bytes += len(chunk)
        if self.read_bytes > max(MAX_GUNZIP_FREE_BYTES, MAX_GUNZIP_RATIO * self._compressed.bytes):
            # Reading is linear in what the data expands to, so a bomb (8.7 MB of spaces
            # is 9 GB) would take minutes: the time stays bounded by the file's own size.
            self.error = (f"the gzip data expands over {MAX_GUNZIP_RATIO} times its size ({self.read_bytes >> 20} MiB "
                          f"from {self._compressed.bytes >> 10} KiB): the rest of the file is not read "
                          "(decompress it and ingest what it holds)")
        return chunk


class _Counted:
    """A stream that counts the bytes read from it (the compressed size read so far)."""

    def __init__(self, handle):
        self._handle, self.bytes = handle, 0

    def read(self, size: int = -1) -> bytes:
        data = self._handle.read(size)
        self.bytes += len(data)
        return data


def _deeper_than(value, limit: int) -> bool:
    """Whether ``value`` nests more than ``limit`` containers deep (walked without
    recursion: the point is not to depend on Python's stack)."""
    stack = [(value, 1)]
    while stack:
        v, depth = stack.pop()
        if isinstance(v, dict):
            v = v.values()
        elif not isinstance(v, list):
            continue
        if depth > limit:
            return True
        stack.extend((c, depth + 1) for c in v if isinstance(c, (dict, list)))
    return False


def lone_surrogate_in(value) -> str | None:
    """The first string (key or value) of ``value`` holding a lone surrogate, shown as
    its JSON path, or None (walked without recursion)."""
    stack = [(value, "")]
    while stack:
        v, path = stack.pop()
        if isinstance(v, str):
            if _LONE_SURROGATE.search(v):
                return path or "the value"
        elif isinstance(v, dict):
            for k, c in v.items():
                if isinstance(k, str) and _LONE_SURROGATE.search(k):
                    return f"{path}.{ascii(k)}"
                stack.append((c, f"{path}.{k}" if path else k))
        elif isinstance(v, list):
            stack.extend((c, f"{path}[{i}]") for i, c in enumerate(v))
    return None


def _type_name(value) -> str:
    if value is None:
        return "null"
    return {bool: "a boolean", int: "a number", float: "a number", str: "a string", list: "an array"}.get(
        type(value), type(value).__name__
    )


def unwrap(value, raw: bytes, origin: Origin) -> SourcedRecord:
    """Turn one parsed JSON value into a SourcedRecord (wrapper or bare record)."""
    if not isinstance(value, dict):
        return SourcedRecord(None, raw, origin, error=f"JSON value is {_type_name(value)}, not a record object")
    if "record" in value and not isinstance(value["record"], dict):
        # A record never has a "record" key (the schema allows no extra keys): a wrapper.
        return SourcedRecord(None, raw, origin,
                             error=f'the wrapper\'s "record" is {_type_name(value["record"])}, not a record object')
    if isinstance(value.get("record"), dict):
        if "record" in value["record"] and "id" not in value["record"]:
            return SourcedRecord(None, raw, origin, error='a wrapper inside a wrapper: "record" holds another {"record": ...}')
        version = value.get("datasetVersion")
        warnings = []
        if version is not None and not isinstance(version, str):
            warnings.append(f"{origin}: datasetVersion is {_type_name(version)}, not a string; ignored")
            version = None
        extra = sorted(set(value) - {"record", "datasetVersion"})
        if extra:
            warnings.append(f"{origin}: wrapper keys {', '.join(extra)} are not part of the dataset format; ignored")
        _whole_numbers(value["record"], origin, warnings)
        return SourcedRecord(value["record"], raw, origin, dataset_version=version, warnings=warnings)
    warnings = []
    _whole_numbers(value, origin, warnings)
    return SourcedRecord(value, raw, origin, warnings=warnings)


def _integer_keys() -> tuple[str, ...]:
    from errkb.records.schema import schema

    props = schema().get("properties", {})
    return tuple(k for k, v in props.items()
                 if "integer" in (v.get("type") if isinstance(v.get("type"), list) else [v.get("type")]))


_INTEGER_KEYS: tuple[str, ...] | None = None


def _whole_numbers(record: dict, origin: Origin, warnings: list[str]) -> None:
    """``221.0`` in an integer field is the integer 221 (JSON Schema says so, and a writer
    that went through a float column, as pandas does for a column with nulls, writes it
    so); every consumer does integer arithmetic on it, so it is stored as 221. The
    rules past the schema skipped such a record's line checks, and the site showed
    "file.py:221.0"."""
    global _INTEGER_KEYS
    if _INTEGER_KEYS is None:
        _INTEGER_KEYS = _integer_keys()
    for key in _INTEGER_KEYS:
        v = record.get(key)
        if isinstance(v, float) and v.is_integer() and abs(v) < 2**53:
            record[key] = int(v)
            warnings.append(f"{origin}: {key} {v!r} read as the integer {int(v)}")


class _ValueStream:
    """Incremental splitter of a byte stream into top-level JSON values.

    Decodes UTF-8 with ``surrogateescape`` so that no byte is lost and invalid
    bytes can be pointed at precisely; parses with ``json.JSONDecoder.raw_decode``
    on a sliding buffer so memory stays bounded by the largest single value.
    """

    def __init__(self, handle, name: str):
        self.handle = handle
        self.name = name
        self.decoder = codecs.getincrementaldecoder("utf-8")("surrogateescape")
        self.json = json.JSONDecoder(parse_constant=_refuse_constant, object_pairs_hook=_object_without_duplicates)
        self.buf = ""
        self.base_line = 1  # line number of buf[0]
        self.base_col = 1  # column of buf[0]
        self.eof = False
        self.not_text = False  # the data is not JSON text at all (binary, gzip, UTF-16)

    def end_origin(self) -> Origin:
        """Where the data read so far ends."""
        return self._where(len(self.buf))

    # -- buffer management -------------------------------------------------
    def _fill(self, at_least: int = 1) -> bool:
        """Read at least ``at_least`` more bytes (or to the end); False when none came.
        A value that keeps growing is read in doubling steps and joined once per step:
        chunk by chunk, a 64 MiB line was copied and re-parsed 64 times (20 s)."""
        if self.eof:
            return False
        parts, got = [], 0
        while got < at_least:
            chunk = self.handle.read(CHUNK_SIZE)
            if not chunk:
                self.eof = True
                parts.append(self.decoder.decode(b"", final=True))
                break
            got += len(chunk)
            parts.append(self.decoder.decode(chunk))
        self.buf += "".join(parts)
        return got > 0

    def _grow(self, pos: int) -> bool:
        """Read about as much again as the value at ``pos`` holds so far (not past
        MAX_VALUE_BYTES, where a value is refused)."""
        held = len(self.buf) - pos
        return self._fill(max(CHUNK_SIZE, min(held, MAX_VALUE_BYTES - held)))

    def _drop(self, pos: int) -> None:
        """Forget buf[:pos], keeping line/column bookkeeping right."""
        dropped = self.buf[:pos]
        newlines = dropped.count("\n")
        if newlines:
            self.base_line += newlines
            self.base_col = pos - dropped.rfind("\n")
        else:
            self.base_col += pos
        self.buf = self.buf[pos:]

    def _where(self, pos: int, index: int | None = None) -> Origin:
        head = self.buf[:pos]
        newlines = head.count("\n")
        if newlines:
            return Origin(self.name, self.base_line + newlines, pos - head.rfind("\n"), index)
        return Origin(self.name, self.base_line, self.base_col + pos, index)

    def _skip_ws(self, pos: int) -> int:
        """The first non-whitespace position at or after ``pos`` (reading on as needed),
        or len(buf) at the end of input. Whitespace that runs to the end of the buffer is
        forgotten before more is read: a gzip of gigabytes of spaces was appended to the
        buffer whole (1.47 GB, and quadratic time); now it is read in constant memory."""
        while True:
            buf, n = self.buf, len(self.buf)
            stop = min(n, pos + 64)
            while pos < stop and buf[pos] in _WS:  # the usual case: a newline between values
                pos += 1
            if pos < stop:
                return pos
            if pos < n:
                tail = buf[pos:]
                if not tail.isspace() or any(c in tail for c in _OTHER_SPACE):
                    # JSON whitespace then something: found by the regex (linear)
                    found = _NOT_WS.search(buf, pos)
                    if found is not None:
                        return found.start()
                # else: the rest of the buffer is JSON whitespace (a file of spaces), seen
                # at C speed: str.isspace() takes every Unicode space, and none but JSON's is in it
            self._drop(n)
            pos = 0
            if not self._fill():
                return 0

    @staticmethod
    def _raw(text: str) -> bytes:
        return text.encode("utf-8", "surrogateescape")

    # -- parsing -------------------------------------------------------------
    def _decode_at(self, pos: int):
        """Parse one value at buf[pos:]; return (value, end) or raise _ParseError(reason, error_pos)."""
        while True:
            try:
                return self.json.raw_decode(self.buf, pos)
            except RecursionError:
                raise _ParseError(f"JSON nested too deeply to parse (over {MAX_DEPTH} levels is refused)", pos) from None
            except json.JSONDecodeError as e:
                # An error close to the end of the buffer may only mean the value
                # continues in the next chunk (a literal like `true` cut in two).
                truncated = len(self.buf) - e.pos < 64 or e.msg.startswith("Unterminated string")
                if truncated and not self.eof and len(self.buf) - pos < MAX_VALUE_BYTES:
                    self._grow(pos)
                    continue
                at_end = not self.buf[e.pos :].strip(_WS) or e.msg.startswith("Unterminated string")
                if self.eof and at_end:
                    raise _ParseError("unexpected end of file (truncated JSON)", len(self.buf)) from None
                if len(self.buf) - pos >= MAX_VALUE_BYTES:
                    raise _ParseError(f"JSON value larger than {MAX_VALUE_BYTES >> 20} MB", pos) from None
                raise _ParseError(self._reason(e, pos), e.pos) from None
            except _Refused as e:
                reason, where, *nth = e.args
                found = list(itertools.islice(where.finditer(self.buf, pos), nth[0] if nth else 1))
                raise _ParseError(reason, found[-1].start(found[-1].lastindex or 0) if found else pos) from None
            except ValueError as e:
                # Not a syntax error: a value Python refuses to build, such as an
                # integer of more digits than int() converts (sys.get_int_max_str_digits).
                limit = sys.get_int_max_str_digits()
                long_number = re.compile(r"[0-9]{%d,}" % (limit + 1)).search(self.buf, pos)
                if long_number:
                    raise _ParseError(f"a number of over {limit} digits", long_number.start()) from None
                raise _ParseError(f"value refused: {str(e)[:200]}", pos) from None

    def _reason(self, e: json.JSONDecodeError, start: int) -> str:
        """The decoder's complaint in words that say what is wrong with the file."""
        if e.msg.startswith("Invalid control character"):
            return "control character inside a string (unterminated string?)"
        here = self.buf[e.pos : e.pos + 1]
        if e.msg.startswith("Expecting") and here in ("]", "}") and self.buf[start : e.pos].rstrip(_WS).endswith(","):
            return f"trailing comma before '{here}'"
        if e.msg == "Expecting value" and e.pos == start:
            shown = self.buf[start : start + 40].split("\n")[0]
            head = self.buf[start : start + 2]
            at_file_start = start == 0 and self.base_line == 1 and self.base_col == 1
            if at_file_start:
                # Not text at all: no line to resume at, so the whole file is one reject.
                self.not_text = True
                if head in ("\udcff\udcfe", "\udcfe\udcff"):
                    return "the file is UTF-16 (it starts with a UTF-16 byte-order mark); records are read as UTF-8"
                if head == "\x1f\udc8b":  # read_file opens a gzip file; this one was inside one
                    return "gzip-compressed data inside gzip-compressed data; decompress the outer layer first"
                if "\x00" in self.buf[start : start + 64]:
                    return "binary data (NUL bytes), not JSON text"
                self.not_text = False
            bad = _SURROGATE.search(shown)
            if bad:
                at = self._where(start + bad.start())
                return f"invalid UTF-8 byte 0x{ord(bad.group()) - 0xDC00:02x} at {at.line}:{at.column}, not JSON text"
            return f"a JSON value cannot start with {shown!r}"
        return e.msg

    def _emit(self, value, start: int, end: int, index: int | None) -> SourcedRecord:
        text = self.buf[start:end]
        origin = self._where(start, index)
        if len(text) > MAX_RECORD_BYTES:
            return SourcedRecord(None, self._kept(text), origin,
                                 error=f"record is {len(text) / (1 << 20):.0f} MiB, over the {MAX_RECORD_BYTES >> 20} MiB limit"
                                 f" (the reject keeps its first {MAX_REJECT_RAW_BYTES >> 20} MiB)")
        if _deeper_than(value, MAX_DEPTH):
            return SourcedRecord(None, self._kept(text), origin, error=f"JSON nested deeper than {MAX_DEPTH} levels")
        bad = _SURROGATE.search(text)
        if bad:
            where = self._where(start + bad.start(), index)
            byte = ord(bad.group()) - 0xDC00
            return SourcedRecord(None, self._raw(text), origin, error=f"invalid UTF-8 byte 0x{byte:02x}", error_at=where)
        field = lone_surrogate_in(value)
        if field is not None:
            escape = _LONE_SURROGATE_ESCAPE.search(text)
            where = self._where(start + escape.start(), index) if escape else origin
            return SourcedRecord(None, self._raw(text), origin, error_at=where,
                                 error=f"{field}: a \\u escape of a lone UTF-16 surrogate is not a character")
        return unwrap(value, self._raw(text), origin)

    def _error(self, start: int, stop: int, reason: str, error_pos: int, index: int | None,
               size: int | None = None) -> SourcedRecord:
        """A reject of buf[start:stop] (``size``: its real length, when _drain cut the buffer)."""
        where = self._where(min(error_pos, len(self.buf)), index)
        text = self.buf[start:stop]
        size = len(text) if size is None else size
        if size > MAX_REJECT_RAW_BYTES:
            reason += f" (the reject keeps the first {MAX_REJECT_RAW_BYTES >> 20} MiB of {size / (1 << 20):.0f} MiB)"
        return SourcedRecord(None, self._kept(text), self._where(start, index), error=f"invalid JSON: {reason}", error_at=where)

    def _drain(self, start: int) -> tuple[int, int]:
        """Read the input to its end for a reject starting at buf[start], keeping only what
        the reject keeps (memory stays bounded, and time linear, on a 10 GB binary file);
        return the reject's (stop in buf, length in characters)."""
        keep = start + MAX_REJECT_RAW_BYTES
        size = len(self.buf) - start
        self.buf = self.buf[:keep]
        while not self.eof:
            chunk = self.handle.read(CHUNK_SIZE)
            final = not chunk
            if final:
                self.eof = True
            text = self.decoder.decode(chunk, final=final)
            size += len(text)
            if len(self.buf) < keep:
                self.buf += text[: keep - len(self.buf)]
        return len(self.buf), size

    def _kept(self, text: str) -> bytes:
        return self._raw(text[:MAX_REJECT_RAW_BYTES])

    def values(self) -> Iterator[SourcedRecord]:
        pos = self._skip_ws(0)
        if pos >= len(self.buf):
            yield SourcedRecord(None, b"", Origin(self.name, 1, 1), error="empty file, no records")
            return
        if self.buf[pos] == "[":
            yield from self._array(pos)
        else:
            yield from self._sequence(pos)

    def _sequence(self, pos: int) -> Iterator[SourcedRecord]:
        """JSON Lines, or any whitespace-separated sequence of values."""
        while True:
            pos = self._skip_ws(pos)
            if pos >= len(self.buf):
                return
            self._drop(pos)
            pos = 0
            try:
                value, end = self._decode_at(0)
            except _ParseError as e:
                reason, error_pos = e.args
                # Resynchronise at the next line that starts a value ("{" in
                # column 1), so one bad line of a JSON Lines file does not take the
                # rest with it, while a broken pretty-printed document stays whole.
                stop = None if self.not_text else self._next_value_line(error_pos)
                if stop is None:
                    # A binary, compressed or UTF-16 file has no lines to resume at, nor has
                    # garbage with no line starting a value in MAX_VALUE_BYTES: one reject.
                    if not self.not_text:
                        reason += f" (no line starts a value in the next {MAX_VALUE_BYTES >> 20} MiB: the rest of the file is this reject)"
                    where = self._where(min(error_pos, len(self.buf)))
                    stop, size = self._drain(0)
                    reject = self._error(0, stop, reason, error_pos, None, size)
                    reject.error_at = where
                    yield reject
                    pos = stop
                    continue
                text_end = stop - 1 if stop and self.buf[stop - 1] == "\n" else stop
                yield self._error(0, text_end, reason, error_pos, None)
                pos = stop
                continue
            yield self._emit(value, 0, end, None)
            pos = end

    def _next_value_line(self, pos: int) -> int | None:
        """Where the next line starting with "{" begins (or the end of input); None when
        none does within MAX_VALUE_BYTES (the buffer is not grown without bound)."""
        while True:
            found = self.buf.find("\n{", pos)
            if found >= 0:
                return found + 1
            if len(self.buf) >= MAX_VALUE_BYTES:
                return None
            pos = max(len(self.buf) - 1, pos)
            if not self._grow(0):
                return len(self.buf)

    def _array(self, pos: int) -> Iterator[SourcedRecord]:
        self._drop(pos + 1)
        pos, index = 0, 0
        while True:
            pos = self._skip_ws(pos)
            if pos < len(self.buf) and self.buf[pos] == "]" and index == 0:
                pos += 1
                break
            self._drop(pos)
            pos = 0
            if not self.buf:
                yield self._error(0, 0, "unexpected end of file (array not closed)", 0, index)
                return
            try:
                value, end = self._decode_at(0)
            except _ParseError as e:
                # Inside an array there is no safe place to resume: keep the
                # rest of the file verbatim as one reject.
                reason, error_pos = e.args
                if error_pos == 0 and self.buf.startswith("]"):
                    reason = "trailing comma before ']'"
                where = self._where(min(error_pos, len(self.buf)), index)
                stop, size = self._drain(0)
                reject = self._error(0, stop, reason, error_pos, index, size)
                reject.error_at = where
                yield reject
                return
            yield self._emit(value, 0, end, index)
            index += 1
            pos = self._skip_ws(end)
            if pos < len(self.buf) and self.buf[pos] == ",":
                pos += 1
                continue
            if pos < len(self.buf) and self.buf[pos] == "]":
                pos += 1
                break
            reason = "unexpected end of file (array not closed)" if pos >= len(self.buf) else "expected ',' or ']'"
            stop, size = self._drain(pos)
            yield self._error(pos, stop, reason, pos, index, size)
            return
        pos = self._skip_ws(pos)
        if pos < len(self.buf):
            stop, size = self._drain(pos)
            yield self._error(pos, stop, "extra data after the closing ']'", pos, None, size)
