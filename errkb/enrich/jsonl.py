"""JSON Lines archives read as raw lines (never DuckDB's ``read_json``): blocks of
complete lines, and a block as an Arrow table of its lines.

``read_json`` aborts on one bad line, turns integers beyond 2**64 into floats,
stringifies mixed arrays and renames ``host`` to ``host_1`` next to ``Host``
(docs/enrich.md, "Archives"); so the archive path frames lines itself, as the streaming
filter frames them, and hands DuckDB one line per row.
"""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Iterator, Sequence

from errkb.enrich.duck import ArchiveError, archive_files

RAW_READ = 16 << 20  # a block: up to batch_rows lines
_CODECS = {".gz": "gzip", ".zst": "zstd", ".zstd": "zstd"}
RAW_TABLE = "__errkb_raw"


def reason(e: BaseException) -> str:
    return (getattr(e, "strerror", None) or str(e)).strip().splitlines()[0] if str(e).strip() else type(e).__name__


def json_files(inputs: Sequence[str]) -> list[str]:
    """The files of ``inputs``, a glob's matches and a folder's data files in sorted order."""
    return archive_files(inputs)


def _split_lines(block: bytes, limit: int) -> list[bytes]:
    """``block`` (lines joined by "\n") cut into pieces of at most ``limit`` lines."""
    if block.count(b"\n") < limit:
        return [block]
    import numpy as np

    pieces, start = [], 0
    for cut in np.flatnonzero(np.frombuffer(block, dtype=np.uint8) == 10)[limit - 1::limit].tolist():
        pieces.append(block[start:cut])
        start = cut + 1
    pieces.append(block[start:])
    return pieces


def raw_blocks(files: Sequence[str], max_lines: int) -> Iterator[tuple[str, bytes, bool]]:
    """(file, block, final) for each file in turn: a block is at most ``max_lines``
    complete lines joined by "\n" (framed as the streaming filter frames them: a last
    line without "\n" is a line, and ``final`` says so). .gz and .zst are decompressed."""
    import gzip
    import zlib

    import pyarrow as pa

    for path in files:
        codec = _CODECS.get(os.path.splitext(path.lower())[1])
        pending: list[bytes] = []
        try:
            # gzip's own reader checks the stream's end and CRC (pyarrow's stops quietly at a cut)
            opened = gzip.open(path, "rb") if codec == "gzip" else pa.input_stream(path, compression=codec)
            with opened as stream:
                while True:
                    chunk = stream.read(RAW_READ)
                    if not chunk:
                        break
                    last = chunk.rfind(b"\n")
                    if last < 0:
                        pending.append(chunk)
                        continue
                    block = b"".join([*pending, chunk[:last]]) if pending else chunk[:last]
                    pending = [chunk[last + 1:]] if last + 1 < len(chunk) else []
                    for piece in _split_lines(block, max_lines):
                        yield path, piece, False
        except (OSError, EOFError, zlib.error, pa.ArrowException) as e:
            raise ArchiveError(f"{path}: cannot read: {reason(e)}") from e
        if pending:  # no "\n" in it: one line
            yield path, b"".join(pending), True


def _not_json(name: str):
    raise ValueError(f"{name} is not JSON")


# The streaming filter's strictness: NaN/Infinity are not JSON, so such a line is text.
STRICT_JSON = json.JSONDecoder(parse_constant=_not_json)


def raw_batch(block: bytes, final: bool):
    """One block's lines as an Arrow table: the text (U+FFFD for bytes that are not
    UTF-8), those bytes in base64, and whether the line may be a JSON object."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    if b"\r" in block:  # CRLF: the "\r" is not part of the line (as the streaming filter)
        block = block.replace(b"\r\n", b"\n")
        if block.endswith(b"\r") and not final:
            block = block[:-1]
    # The lines as one Arrow string array over the block's bytes (no Python string per
    # line): the newlines are taken out and the offsets say where each line starts.
    newlines = np.flatnonzero(np.frombuffer(block, dtype=np.uint8) == 10)
    offsets = np.empty(len(newlines) + 2, dtype=np.int64)
    offsets[0] = 0
    offsets[1:-1] = newlines - np.arange(len(newlines))
    offsets[-1] = len(block) - len(newlines)
    text = pa.LargeStringArray.from_buffers(len(newlines) + 1, pa.py_buffer(offsets), pa.py_buffer(block.replace(b"\n", b"")))
    b64 = None
    try:
        text.validate(full=True)  # UTF-8
    except pa.ArrowInvalid:
        lines, b64 = [], []
        for raw in block.split(b"\n"):
            try:
                lines.append(raw.decode("utf-8"))
                b64.append(None)
            except UnicodeDecodeError:
                lines.append(raw.decode("utf-8", "replace"))
                b64.append(base64.b64encode(raw).decode("ascii"))
        text = pa.array(lines, pa.large_string())
    obj = pc.starts_with(text, "{")
    if b"NaN" in block or b"Infinity" in block:
        obj = _strict_objects(block, newlines, obj)
    if b64 is None:
        b64_arr = pa.nulls(len(text), pa.string())
    else:
        b64_arr = pa.array(b64, pa.string())
        obj = pc.and_(obj, pc.is_null(b64_arr))
    return pa.table({"__text": text, "__b64": b64_arr, "__obj": obj})


def _strict_objects(block: bytes, newlines, obj):
    """``obj`` without the lines DuckDB takes for objects but JSON does not: NaN and
    Infinity are no JSON values (the streaming filter makes such a line text too). Only
    the lines holding either word are parsed here."""
    import numpy as np
    import pyarrow as pa

    flags = obj.to_numpy(zero_copy_only=False).copy()
    suspects = set()
    for word in (b"NaN", b"Infinity"):
        i = block.find(word)
        while i >= 0:
            suspects.add(int(np.searchsorted(newlines, i)))  # the line: newlines before it
            i = block.find(word, i + 1)
    for n in suspects:
        if not flags[n]:
            continue
        start = int(newlines[n - 1]) + 1 if n else 0
        end = int(newlines[n]) if n < len(newlines) else len(block)
        try:
            STRICT_JSON.decode(block[start:end].decode("utf-8"))
        except ValueError:  # (UnicodeDecodeError too: such a line is no object here anyway)
            flags[n] = False
        except RecursionError:
            pass
    return pa.array(flags, pa.bool_())
