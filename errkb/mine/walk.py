"""Which files of a tree the miner reads: a folder walk that never enters git-ignored
folders or virtual environments, never recurses (a folder 1,100 levels deep is a
count, not a RecursionError), and the rule that leaves vendored third-party trees and
test-internal modules out of a library's sites.

Every file or folder left out is returned with the reason, so a scan's summary says
what it did not read.
"""

from __future__ import annotations

import fnmatch
import os
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

# Folders nobody's source lives in (caches, tool state); skipped without reading .gitignore.
SKIP_DIRS = frozenset({"__pycache__", ".git", ".hg", ".tox", ".nox", ".venv", "venv", "node_modules",
                       ".mypy_cache", ".pytest_cache", ".ruff_cache", ".errkb-cache", "site-packages"})

# Deeper than this no real package goes; a tree that does is hostile or a loop.
MAX_DEPTH = 64

# A source file over this size is generated (tables, bundled data), not code with messages.
MAX_FILE_BYTES = 2_000_000

# Vendored third-party code: its messages belong to another project.
_VENDORED = frozenset({"third_party", "third-party", "3rdparty", "_vendor", "vendor", "vendored", "cutlass", "cccl",
                       "externals"})
# Test-internal modules: messages a user of the library never sees.
_TESTS = frozenset({"tests", "test", "testing", "_testing", "benchmarks"})


def excluded_reason(rel: str) -> str | None:
    """Why the file ``rel`` (POSIX, relative to the tree) holds no message of the library itself, or None."""
    parts = PurePosixPath(rel).parts
    for part in parts[:-1]:
        low = part.lower()
        if low in _VENDORED:
            return f"vendored third-party tree ({part}/)"
        if low in _TESTS:
            return f"test-internal module ({part}/)"
    name = parts[-1] if parts else rel
    if name.startswith("test_") or name.endswith("_test.py") or name == "conftest.py":
        return "test-internal module (test file)"
    return None


@dataclass
class _Ignore:
    """The patterns of one .gitignore, relative to its folder (negations are not honoured:
    re-including a file inside an ignored folder is rare and git itself cannot do it)."""

    base: str  # POSIX folder of the .gitignore, relative to the walk root ("" at the root)
    patterns: list[tuple[str, bool, bool]] = field(default_factory=list)  # (glob, dir_only, anchored)

    @classmethod
    def read(cls, path: Path, base: str) -> _Ignore:
        ignore = cls(base)
        try:
            text = path.read_text(errors="replace")
        except OSError:
            return ignore
        for line in text.splitlines()[:10_000]:
            line = line.strip()
            if not line or line.startswith(("#", "!")):
                continue
            dir_only = line.endswith("/")
            line = line.rstrip("/")
            anchored = "/" in line
            ignore.patterns.append((line.lstrip("/"), dir_only, anchored))
        return ignore

    def ignores(self, rel: str, is_dir: bool) -> bool:
        if self.base:
            if not rel.startswith(self.base + "/"):
                return False
            rel = rel[len(self.base) + 1 :]
        name = rel.rsplit("/", 1)[-1]
        for glob, dir_only, anchored in self.patterns:
            if dir_only and not is_dir:
                continue
            if fnmatch.fnmatchcase(rel if anchored else name, glob):
                return True
        return False


def walk_files(top: Path, suffixes: tuple[str, ...] = (".py",)) -> tuple[list[Path], list[tuple[str, str]]]:
    """Files under ``top`` ending in ``suffixes``, sorted, and (path, reason) for each
    folder or file left out. Iterative: the depth of the tree costs no stack."""
    files: list[Path] = []
    skipped: list[tuple[str, str]] = []
    stack: list[tuple[Path, str, int, tuple[_Ignore, ...]]] = [(top, "", 0, ())]
    while stack:
        folder, rel, depth, ignores = stack.pop()
        if (folder / ".gitignore").is_file():
            ignores = (*ignores, _Ignore.read(folder / ".gitignore", rel))
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError as e:
            skipped.append((rel or ".", f"unreadable folder: {e.strerror}"))
            continue
        for entry in entries:
            child = f"{rel}/{entry.name}" if rel else entry.name
            try:
                is_dir = entry.is_dir(follow_symlinks=False)
                is_file = entry.is_file(follow_symlinks=False)
            except OSError:
                continue
            if is_dir:
                if entry.name in SKIP_DIRS:
                    continue
                if any(ig.ignores(child, True) for ig in ignores):
                    skipped.append((child, "git-ignored folder"))
                    continue
                if os.path.exists(os.path.join(entry.path, "pyvenv.cfg")):
                    skipped.append((child, "virtual environment (pyvenv.cfg)"))
                    continue
                if depth + 1 > MAX_DEPTH:
                    skipped.append((child, f"folder more than {MAX_DEPTH} levels deep"))
                    continue
                stack.append((Path(entry.path), child, depth + 1, ignores))
            elif is_file and entry.name.endswith(suffixes):
                if any(ig.ignores(child, False) for ig in ignores):
                    continue
                try:
                    size = entry.stat().st_size
                except OSError:
                    continue
                if size > MAX_FILE_BYTES:
                    skipped.append((child, f"file over {MAX_FILE_BYTES} bytes"))
                    continue
                files.append(Path(entry.path))
    files.sort()
    return files, skipped
