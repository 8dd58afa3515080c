"""The bytes of a saved Matcher index: our own plain format, never a pickle.

Layout: a magic line, two little-endian lengths, a JSON header, then the blobs the
header lists by size: Hyperscan's serialised literal database, the entries (one JSON
line each, decoded on first use: a CLI call touches a handful of 10,000), the literals
(JSON, decoded on use), and the confirm stage's Hyperscan databases.
"""

from __future__ import annotations

import json
import struct

from errkb.match.engines import MatcherError
from errkb.match.result import Entry

INDEX_FORMAT = 7  # 7: literals a blob of their own, decoded on use; 6: entry line ends in the header
MAGIC = b"ERRKB-MATCHER\n"


class LazyEntries:
    """The entries of a loaded index, each decoded from its JSON text on first access."""

    def __init__(self, blob: bytes, ends: list[int], path="matcher index", on_damage=None) -> None:
        # one JSON line per entry; ``ends[i]`` is where entry i's line ends in ``blob``
        # (the lines are cut on access: a CLI call touches a handful of 10,000)
        self._blob = blob
        self._ends = ends
        self._decoded: list[Entry | None] = [None] * len(ends)
        self._path = path
        self._on_damage = on_damage  # told when a line does not decode (the cache then rebuilds it)

    def __len__(self) -> int:
        return len(self._ends)

    def __getitem__(self, i: int) -> Entry:
        entry = self._decoded[i]
        if entry is None:
            if i < 0:
                i += len(self._ends)
            try:
                start = self._ends[i - 1] + 1 if i > 0 else 0
                row = json.loads(bytes(self._blob[start:self._ends[i]]))  # the blob may be a memoryview
                entry = self._decoded[i] = Entry(**dict(zip(Entry.FIELDS, row)))
            except (ValueError, TypeError, IndexError) as e:
                # Damage the file's checksum did not catch (it was rewritten with it): one
                # line, and the index is rebuilt by the next call rather than fail every time.
                if self._on_damage is not None:
                    self._on_damage()
                raise MatcherError(f"{self._path}: damaged matcher index (entry {i}: {e}); "
                                   "it is rebuilt on the next call") from None
        return entry

    def __iter__(self):
        return (self[i] for i in range(len(self._ends)))

    def materialize(self) -> list[Entry]:
        """Every entry decoded, as a plain list (indexing it costs no Python call)."""
        return [self[i] for i in range(len(self._ends))]


def encode(header: dict, entries, literals: list[str], literal_db: bytes | None, full_dbs: list[bytes]) -> bytes:
    """The index file's bytes: ``header`` (the matcher's own fields) completed with the
    format, where each entry's line ends and the blob sizes."""
    rows = [json.dumps([getattr(e, k) for k in Entry.FIELDS], ensure_ascii=False).encode("utf-8") for e in entries]
    ends, end = [], -1
    for row in rows:
        end += len(row) + 1
        ends.append(end)
    blobs = [literal_db or b"", b"\n".join(rows), json.dumps(literals, ensure_ascii=False).encode("utf-8"), *full_dbs]
    header = {"format": INDEX_FORMAT, **header, "entry_ends": ends, "blobs": [len(b) for b in blobs]}
    head = json.dumps(header, ensure_ascii=False).encode("utf-8")
    body = b"".join(blobs)
    return MAGIC + struct.pack("<QQ", len(head), len(body)) + head + body


def decode(data: bytes, path, on_damage=None) -> tuple[dict, LazyEntries, list]:
    """(header, entries, blobs) of an index file's bytes; the blobs are views into
    ``data``, not copies. Raises MatcherError naming ``path`` for anything else."""
    try:
        if not data.startswith(MAGIC):
            raise MatcherError(f"{path}: not an errkb matcher index")
        n_head, n_body = struct.unpack_from("<QQ", data, len(MAGIC))
        start = len(MAGIC) + 16
        header = json.loads(data[start:start + n_head])
        offset = start + n_head
        view = memoryview(data)
        blobs = []
        for size in header.get("blobs") or [n_body]:
            blobs.append(view[offset:offset + size])
            offset += size
    except (OSError, ValueError, struct.error) as e:
        raise MatcherError(f"{path}: cannot read matcher index: {e}") from e
    if header.get("format") != INDEX_FORMAT:
        raise MatcherError(f"{path}: index format {header.get('format')} is not {INDEX_FORMAT}")
    entries = LazyEntries(blobs[1], header["entry_ends"] if header["entries"] else [], path, on_damage)
    return header, entries, blobs
