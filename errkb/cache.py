"""errkb's one cache module: where caches live and how a cache file is written.

Caches (the compiled matcher, the records file, the near-match and search indexes,
Spark's shipped index, the bundled store) are read by concurrent CLI calls and log
filters, may sit in a folder that is shared, restored from a CI cache or read-only,
and may be damaged (a disk that filled up, a copy cut short, a hand edit) or written
by someone else. The indexes themselves only give and take bytes; this module is the
one place that puts bytes on disk. So every cache file is

* written atomically and durably (:func:`replacing`, :func:`write_atomic`): to a
  temporary file in the same folder, flushed and fsync'ed, then renamed into place, so
  a reader sees the old file or the whole new one, never a part;
* checked on load (:class:`KeyedFolder`): each file has a sidecar ``<name>.sum``
  holding its size and CRC-32, and a file that does not match is treated as absent
  (rebuilt). CRC-32 is for damage (a cut copy, a full disk, a hand edit): whoever can
  write the folder can rewrite the sidecar too. It is what zip and gzip use for the same
  job, and it costs a cold CLI call 2 ms on the 7 MB matcher index;
* authenticated where native code reads it: bytes handed to Hyperscan's deserialiser
  (which trusts its input and crashes on a crafted one) must have been written by errkb
  for this user. Their sidecar also carries a MAC of those bytes (keyed BLAKE2b) under a
  per-user key kept outside every cache folder (:func:`key_path`, mode 0600); bytes whose
  MAC does not verify are rebuilt, and without a usable key they are rebuilt by every
  process (the matcher recompiles its literal prefilter: about 0.3 s at 10,000 records);
* data, never code: the formats are JSON and flat arrays read by errkb's own loaders;
  nothing is unpickled or imported;
* keyed by the dataset hash (and the format version), so an old file is never loaded
  for a new dataset, and old keys are dropped when a new one is written;
* optional: an unwritable folder costs speed, not correctness (callers keep what they
  built in memory).

This module sits at the base of the house beside ``errkb.errors``: it imports nothing
of errkb, so every layer (and the sandbox, which keeps to the standard library) can use it.
"""

from __future__ import annotations

import contextlib
import os
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path

# The first word of a sidecar: how the rest of the line was computed. A sidecar of
# another kind (an older errkb's SHA-256) does not match, so its file is rebuilt once.
_CRC = "crc32"
_MAC = "blake2b-mac"
_KEY_BYTES = 32


# -- where caches live ---------------------------------------------------------------

def cache_root() -> Path:
    """errkb's cache folder: ``$ERRKB_CACHE_DIR``, else ``$XDG_CACHE_HOME/errkb``, else ``~/.cache/errkb``.

    Made absolute here, once: sandboxed runs start in their own working folder, so a
    relative ``ERRKB_CACHE_DIR=.cache`` would otherwise name a different place there.
    """
    if os.environ.get("ERRKB_CACHE_DIR"):
        return Path(os.environ["ERRKB_CACHE_DIR"]).expanduser().absolute()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base).absolute() / "errkb"


def default_db_path() -> Path:
    """The per-user store built from the bundled data/ (``errkb.store.paths``)."""
    return cache_root() / "errkb.duckdb"


def view_root(db_path: Path) -> Path:
    """The folder of a store's derived files (its ``KnowledgeBase`` view): ``<db>.cache``."""
    return db_path.with_name(db_path.name + ".cache")


def key_path() -> Path:
    """The per-user key that authenticates native-code caches: ``$ERRKB_CACHE_KEY``, else
    ``$XDG_CONFIG_HOME/errkb/cache.key``, else ``~/.config/errkb/cache.key``.

    Not under :func:`cache_root`: a cache folder may be shared, restored from a CI cache
    or written by another user, and a key beside the files it vouches for proves nothing.
    """
    if os.environ.get("ERRKB_CACHE_KEY"):
        return Path(os.environ["ERRKB_CACHE_KEY"]).expanduser().absolute()
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(base).absolute() / "errkb" / "cache.key"


# -- how a cache file is written -----------------------------------------------------

@contextlib.contextmanager
def replacing(path: str | os.PathLike, prefix: str | None = None, suffix: str = ".tmp",
              mode: int = 0o600) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; when the block ends without an error the
    file written there is fsync'ed and renamed onto ``path``, else it is removed.

    For writers that need a path rather than a file object (DuckDB's COPY, Parquet).
    ``mode`` is the new file's (less the umask): 0600 for caches, 0666 for a user's own
    output, which must come out as an ordinary ``open()`` would make it."""
    path = Path(path)
    for _ in range(100):
        tmp = path.with_name(f"{prefix or f'.{path.name}.'}{os.urandom(6).hex()}{suffix}")
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), mode)
            break
        except FileExistsError:
            continue
    else:
        raise FileExistsError(f"{path}: no free temporary name beside it")
    os.close(fd)
    try:
        yield tmp
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())  # durable before it is renamed into place
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


@contextlib.contextmanager
def atomic_write(path: str | os.PathLike, mode: str = "wb", encoding: str | None = None):
    """Write ``path`` through a file object so that readers see the old file or the whole new one."""
    with replacing(path) as tmp, open(tmp, mode, encoding=encoding) as f:
        yield f


def write_atomic(path: str | os.PathLike, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (see :func:`replacing`)."""
    with atomic_write(path) as f:
        f.write(data)


@contextlib.contextmanager
def shipped_file(name: str, data: bytes) -> Iterator[Path]:
    """``data`` as a file named ``name`` in a private temporary folder (mode 0700), for
    processes this one starts (archive's workers); removed when the block ends."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="errkb-ship-") as folder:
        path = Path(folder) / name
        write_atomic(path, data)
        yield path


# -- checks --------------------------------------------------------------------------

_key_cache: list[bytes | None] = []


def _load_key() -> bytes | None:
    """This user's key, made on first use; None where it cannot be kept safely (then
    native caches are rebuilt by every process, which costs time, never a crash)."""
    if _key_cache:
        return _key_cache[0]
    path = key_path()
    key = _read_key(path)
    if key is None:
        key = _make_key(path)
    _key_cache.append(key)
    return key


def have_key() -> bool:
    """Whether native caches can be authenticated here (so sealing them is worth it)."""
    return _load_key() is not None


def _read_key(path: Path) -> bytes | None:
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        # Another user's key, or one others can read or write, vouches for nothing.
        if st.st_uid != os.geteuid() or st.st_mode & 0o077 or st.st_size != _KEY_BYTES:
            return None
        key = os.read(fd, _KEY_BYTES + 1)
    finally:
        os.close(fd)
    return key if len(key) == _KEY_BYTES else None


def _make_key(path: Path) -> bytes | None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        key = os.urandom(_KEY_BYTES)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
        try:
            os.write(fd, key)
            os.fsync(fd)
        finally:
            os.close(fd)
        try:
            # link, not replace: two processes making a key at once keep the first one.
            os.link(tmp, path)
        except FileExistsError:
            pass
        finally:
            os.unlink(tmp)
    except OSError:
        return None
    # What is on disk now is the key (ours or the one a concurrent process linked first).
    return _read_key(path)


def _tag(parts, key: bytes) -> str:
    """Keyed BLAKE2b (RFC 7693's keyed mode, a MAC by design) over ``parts``, each
    length-prefixed so that moving a boundary changes the tag. BLAKE2 is built into
    Python: no OpenSSL to load on a cold call, and about 2 ms for the 1.4 MB of
    Hyperscan bytes of a 10,000-record index."""
    from _blake2 import blake2b  # hashlib's own backend, without hashlib's 3 ms import

    h = blake2b(key=key, digest_size=32)
    for part in parts:
        h.update(len(part).to_bytes(8, "little"))
        h.update(part)
    return h.hexdigest()


def _sum_path(path: Path) -> Path:
    return path.with_name(path.name + ".sum")


def _sidecar(data: bytes, native) -> str:
    line = f"{_CRC} {len(data)} {zlib.crc32(data):08x}"
    key = _load_key() if native is not None else None
    if key is not None:
        line += f" {_MAC} {_tag(native, key)}"
    return line + "\n"


def seal(path: str | os.PathLike, native=None) -> None:
    """Record ``path``'s size and CRC-32 beside it and, where ``native`` (the parts of the
    file that native code will read) is given and a key is at hand, their MAC."""
    path = Path(path)
    line = _sidecar(path.read_bytes(), native)
    with atomic_write(_sum_path(path), "w", encoding="ascii") as f:
        f.write(line)


def _read_sidecar(path: Path) -> list[str]:
    try:
        return _sum_path(path).read_text(encoding="ascii").split()
    except (OSError, ValueError):
        return []


def read_intact(path: str | os.PathLike) -> bytes | None:
    """The bytes of ``path`` when it is exactly the file that was sealed, else None: one
    read serves both the check and the caller (a cold CLI call reads its index once)."""
    path = Path(path)
    fields = _read_sidecar(path)
    try:
        data = path.read_bytes()
    except OSError:
        return None
    if len(fields) < 3 or fields[0] != _CRC or fields[1] != str(len(data)) or f"{zlib.crc32(data):08x}" != fields[2]:
        return None
    return data


def vouched(path: str | os.PathLike, parts) -> bool:
    """True when ``parts`` (what native code is about to read of ``path``) are what errkb
    sealed there for this user: the sidecar's MAC verifies under this user's key. A
    CRC is not enough: anyone who can write the folder can recompute it."""
    fields = _read_sidecar(Path(path))
    if len(fields) != 5 or fields[3] != _MAC:
        return False
    key = _load_key()
    if key is None:
        return False
    # hmac.compare_digest's own C function: the hmac module would import hashlib and OpenSSL.
    from _operator import _compare_digest

    return _compare_digest(_tag(parts, key), fields[4])


def discard(path: str | os.PathLike) -> None:
    """Mark ``path`` as not intact (its sidecar removed): the next reader rebuilds it."""
    _sum_path(Path(path)).unlink(missing_ok=True)


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

    def read(self, name: str) -> bytes | None:
        """The content of the cache file ``name`` if it is present and undamaged, else None."""
        return read_intact(self.file(name))

    def vouches(self, name: str, parts) -> bool:
        """Whether ``parts`` of the cache file ``name`` may be handed to native code (:func:`vouched`)."""
        return vouched(self.file(name), parts)

    def discard(self, name: str) -> None:
        """Have the next reader rebuild ``name`` (damage found while it was in use)."""
        try:
            discard(self.file(name))
        except OSError:
            pass

    def put(self, name: str, data: bytes | Callable[[Path], None], native=None) -> Path | None:
        """Write the cache file ``name`` (its bytes, or ``data(tmp_path)`` for a writer that
        needs a path) and seal it, with a MAC over ``native`` (the parts native code will
        read) when given; None where the folder cannot be written. Other keys' folders are
        dropped on the first write."""
        if not self.writable:
            return None
        try:
            fresh = not self.path.is_dir()
            self.path.mkdir(parents=True, exist_ok=True)
            if fresh:
                self.drop_others()
            target = self.file(name)
            with replacing(target) as tmp:
                if callable(data):
                    data(tmp)
                else:
                    tmp.write_bytes(data)
            # Sealed after the rename: a reader that sees the file before its sidecar
            # treats it as absent, which costs a rebuild, never a wrong answer.
            seal(target, native)
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
