"""errkb's one cache module: files derived from a dataset, kept by dataset hash.

Caches (the compiled matcher, the records file, the near-match and search indexes)
are read by concurrent CLI calls and log filters, may sit in a folder that is shared,
restored from a CI cache or read-only, and may be damaged (a disk that filled up, a
copy cut short, a hand edit). So every cache file is

* written atomically and durably: to a temporary file, flushed and fsync'ed, then
  renamed into place, so a reader sees the old file or the whole new one, never a part;
* checked on load: each file has a sidecar ``<name>.sum`` holding its size and
  CRC-32, and a file that does not match is treated as absent (rebuilt). The check is
  for damage (a cut copy, a full disk, a hand edit), not for an attacker, who could
  rewrite the sidecar too; CRC-32 is what zip and gzip use for the same job, and it
  costs a cold CLI call 2 ms on the 7 MB matcher index where SHA-256 cost 4 ms plus
  2 ms to load OpenSSL;
* data, never code: the formats are JSON and flat arrays read by errkb's own loaders;
  nothing is unpickled or imported;
* keyed by the dataset hash (and the format version), so an old file is never loaded
  for a new dataset, and old keys are dropped when a new one is written;
* optional: an unwritable folder costs speed, not correctness (callers keep what they
  built in memory).
"""

from __future__ import annotations

import contextlib
import os
import zlib
from pathlib import Path

# Written by seal() before the size and checksum; a sidecar without it (an older
# errkb's SHA-256) does not match, so its file is rebuilt once.
_SUM_KIND = "crc32"


@contextlib.contextmanager
def atomic_write(path: str | os.PathLike, mode: str = "wb", encoding: str | None = None):
    """Write ``path`` so that readers see the old file or the whole new one."""
    import tempfile  # writers only: a reading CLI call never pays for it

    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    try:
        with os.fdopen(fd, mode, encoding=encoding) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())  # durable before it is renamed into place
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _digest(path: Path) -> str:
    crc = 0
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            crc = zlib.crc32(block, crc)
    return f"{crc:08x}"


def _read_sum(path: Path) -> tuple[int, str]:
    """(size, checksum) from ``path``'s sidecar; ValueError when it is not one of ours."""
    kind, size, digest = _sum_path(path).read_text(encoding="ascii").split()
    if kind != _SUM_KIND:
        raise ValueError(f"checksum kind {kind!r}")
    return int(size), digest


def _sum_path(path: Path) -> Path:
    return path.with_name(path.name + ".sum")


def seal(path: str | os.PathLike) -> None:
    """Record ``path``'s size and CRC-32 beside it (after it is complete)."""
    path = Path(path)
    with atomic_write(_sum_path(path), "w", encoding="ascii") as f:
        f.write(f"{_SUM_KIND} {path.stat().st_size} {_digest(path)}\n")


def read_intact(path: str | os.PathLike) -> bytes | None:
    """The bytes of ``path`` when it is exactly the file that was sealed, else None: one
    read serves both the check and the caller (a cold CLI call reads its index once)."""
    path = Path(path)
    try:
        size, digest = _read_sum(path)
        data = path.read_bytes()
    except (OSError, ValueError):
        return None
    if len(data) != size or f"{zlib.crc32(data):08x}" != digest:
        return None
    return data


def is_intact(path: str | os.PathLike) -> bool:
    """True when ``path`` exists and is exactly the file that was sealed."""
    path = Path(path)
    try:
        size, digest = _read_sum(path)
        return path.stat().st_size == size and _digest(path) == digest
    except (OSError, ValueError):
        return False


class KeyedFolder:
    """A folder of cache files for one key (``<prefix><key>`` under ``root``).

    ``writable`` turns False after the first failed write: the caller then keeps what
    it built in memory for this process.
    """

    def __init__(self, root: Path, prefix: str, key: str) -> None:
        self.root = Path(root)
        self.prefix = prefix
        self.path = self.root / f"{prefix}{key}"
        self.writable = True

    def file(self, name: str) -> Path:
        return self.path / name

    def intact(self, name: str) -> Path | None:
        """The cache file ``name`` if it is present and undamaged, else None."""
        path = self.file(name)
        return path if is_intact(path) else None

    def read(self, name: str) -> bytes | None:
        """The content of the cache file ``name`` if it is present and undamaged, else None."""
        return read_intact(self.file(name))

    def put(self, name: str, write) -> Path | None:
        """Write a cache file with ``write(tmp_path)`` and seal it; None where the folder
        cannot be written. Other keys' folders are dropped on the first write."""
        if not self.writable:
            return None
        import tempfile

        try:
            fresh = not self.path.is_dir()
            self.path.mkdir(parents=True, exist_ok=True)
            if fresh:
                self.drop_others()
            target = self.file(name)
            fd, tmp = tempfile.mkstemp(dir=self.path, prefix=f".{name}.", suffix=".tmp")
            os.close(fd)
            try:
                write(Path(tmp))
                with open(tmp, "rb+") as f:
                    os.fsync(f.fileno())
                os.replace(tmp, target)
            finally:
                Path(tmp).unlink(missing_ok=True)
            seal(target)
            return target
        except OSError:
            self.writable = False
            return None

    def drop_others(self) -> None:
        """Remove the folders of other keys (older dataset versions or formats)."""
        import shutil

        for old in self.root.glob(f"{self.prefix.split('-v')[0]}-v*"):
            if old != self.path and old.is_dir():
                shutil.rmtree(old, ignore_errors=True)
