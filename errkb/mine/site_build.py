"""``errkb sites add`` / ``errkb sites build --from-lock``: fetch releases, read their
parts, merge them into the shipped index, and keep the lock (the list of releases the
index was built from: ``data/sites/releases.lock``, one ``library==version`` a line).

The full backfill is this command run over the lock; CI rebuilds one release's part
from a committed fixture instead (tests/test_sites_index.py).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from errkb.mine.releases import (
    Part,
    ReleaseError,
    cache_dir,
    fetch,
    fetch_cpp_source,
    parse_spec,
    read_release,
    tag_commits,
)
from errkb.mine.site_index import SiteIndexData, version_key


def default_index_path() -> Path:
    from errkb.resources import data_dir

    return data_dir() / "sites" / "sites.jsonl.gz"


def lock_path(index_path: Path) -> Path:
    return index_path.with_name("releases.lock")


@dataclass
class BuildReport:
    parts: list[dict] = field(default_factory=list)  # each release's part summary, with seconds
    failed: list[tuple[str, str]] = field(default_factory=list)  # (spec, reason)
    index_bytes: int = 0
    rows: int = 0
    read_again: list[str] = field(default_factory=list)  # releases read again for rows a replaced part left
    stale: int = 0  # rows that still keep a replaced part's line (a release to read again failed)
    stale_releases: list[str] = field(default_factory=list)  # the releases that would give them their line

    def as_dict(self) -> dict:
        return {"releases": self.parts, "failed": [{"release": s, "reason": r} for s, r in self.failed],
                "index_bytes": self.index_bytes, "sites": self.rows, "read_again": self.read_again,
                "stale_lines": self.stale, "stale_releases": self.stale_releases}


def read_lock(path: Path) -> list[str]:
    if not path.exists():
        return []
    specs = []
    for n, line in enumerate(path.read_text().splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        try:
            parse_spec(line)
        except ReleaseError as e:
            raise ReleaseError(f"{path}:{n}: {e}") from None
        specs.append(line)
    return specs


def write_lock(path: Path, specs: list[str]) -> None:
    def key(spec: str):
        library, version = parse_spec(spec)
        return (library.name, version_key(version))

    unique = sorted({s.strip() for s in specs}, key=key)
    path.write_text("".join(s + "\n" for s in unique))


def build(specs: list[str], index_path: Path, fresh: bool = False, releases_dir: Path | None = None,
          say: Callable[[str], None] = lambda _: None, keep_archives: bool = True, jobs: int = 1) -> BuildReport:
    """Add each release of ``specs`` to the index at ``index_path`` (rebuilt from nothing
    when ``fresh``); a release that cannot be fetched or read is reported, not fatal.
    ``keep_archives=False`` deletes each archive this call downloaded once it is read (a
    vLLM wheel is 200-400 MB; a backfill of every release would fill a disk). ``jobs``
    releases are fetched and read at once, in worker processes (a download waits on the
    network, a read on a core); the index is the same whatever the order they finish in."""
    index = SiteIndexData() if fresh else SiteIndexData.load(index_path)
    report = BuildReport()
    done: list[str] = []
    folder = releases_dir or cache_dir()

    def finished(spec: str, outcome: Part | str, seconds: float) -> None:
        if isinstance(outcome, str):
            report.failed.append((spec, outcome))
            say(f"{spec}: skipped ({outcome})")
            return
        index.add(outcome)
        done.append(spec)
        summary = outcome.summary()
        summary["seconds"] = round(seconds, 1)
        report.parts.append(summary)
        say(f"{spec}: {summary['sites']} sites from {summary['files']} files in {summary['seconds']} s"
                 + (f"; {summary['copies_left_out']} generated copies left out" if summary["copies_left_out"] else "")
                 + (f"; {summary['skipped']} skipped" if summary["skipped"] else ""))

    def read_all(todo: list[str]) -> None:
        if jobs <= 1 or len(todo) <= 1:
            for spec in todo:
                finished(*_read_spec(spec, folder, keep_archives, say))
            return
        from concurrent.futures import ProcessPoolExecutor

        say(f"reading {len(todo)} releases, {jobs} at a time")
        with ProcessPoolExecutor(max_workers=jobs) as pool:
            futures = [pool.submit(_read_spec, spec, folder, keep_archives) for spec in todo]
            for future in futures:  # in the lock's order: the same report whatever finishes first
                finished(*future.result())

    # A replaced part that lacks a site older releases still have leaves that row with the
    # replaced part's line. Adding a library's releases newest first gives such a row the line of
    # an older release this call reads (it is added after); one it does not read is read again
    # after (each at most once: reading it resolves every row it is the newest of).
    once: dict[tuple[str, str], str] = {}
    for spec in specs:  # each release once, in the order first named
        once.setdefault(_release_of(spec), spec)
    specs = list(once.values())
    if not fresh:  # newest first (the order of libraries does not matter: each keeps its own rows)
        specs = sorted(specs, key=lambda spec: (_release_of(spec)[0], version_key(_release_of(spec)[1])),
                       reverse=True)
    read_all(specs)
    tried = {_release_of(spec) for spec in specs}
    while todo := [f"{lib}=={version}" for lib, version in index.stale_releases() if (lib, version) not in tried]:
        say(f"reading {', '.join(todo)} again: {len(index.stale)} sites had their line from a replaced part")
        tried.update(_release_of(spec) for spec in todo)
        report.read_again.extend(todo)
        read_all(todo)
    report.stale = len(index.stale)
    if report.stale:
        unread = [f"{lib}=={version}" for lib, version in index.stale_releases()]
        report.stale_releases = unread
        say(f"{report.stale} sites keep the line of a replaced part: {', '.join(unread)} could not be read; "
            f"`errkb sites add {' '.join(unread)}` gives them their line")
    _stamp_commits(index)
    report.index_bytes = index.write(index_path)
    report.rows = len(index.rows)
    lock = lock_path(index_path)
    write_lock(lock, ([] if fresh else read_lock(lock)) + done)
    return report


def _release_of(spec: str) -> tuple[str, str]:
    """(library, version) of a spec, whatever its spelling (flashinfer-python==X is flashinfer==X)."""
    try:
        library, version = parse_spec(spec)
    except ReleaseError:
        return ("", spec)
    return (library.name, version)


def _read_spec(spec: str, folder: Path, keep_archives: bool,
               say: Callable[[str], None] = lambda _: None) -> tuple[str, Part | str, float]:
    """(spec, its part or why it could not be read, seconds): one release, fetched and read;
    with ``keep_archives`` false, what this call downloaded is deleted, also when it fails."""
    started = time.monotonic()
    fetched: list[Path] = []
    had: set[str] = set()
    try:
        had = {p.name for p in folder.iterdir()} if folder.is_dir() else set()
        library, version = parse_spec(spec)
        say(f"{spec}: fetching")
        archive = fetch(library, version, folder)
        fetched.append(archive)
        source = fetch_cpp_source(library, version, folder)  # PyTorch's .cpp, where listed
        if source is not None:
            fetched.append(source)
        say(f"{spec}: reading {archive.name}" + (f" and {source.name}" if source else ""))
        part: Part = read_release(archive, library, version, cpp_source=source)
    except (ReleaseError, OSError) as e:
        return spec, str(e), time.monotonic() - started
    finally:
        if not keep_archives:
            for path in fetched:
                if path.name not in had:
                    path.unlink(missing_ok=True)
    return spec, part, time.monotonic() - started


def _stamp_commits(index: SiteIndexData) -> None:
    """A release read before its commit was known (vLLM's wheels name none) gets it from
    the committed tag-to-commit map (data/sites/tags.json) when that has it now: what a
    fresh read of the release would record, without reading it again."""
    for library, versions in index.releases.items():
        tags = tag_commits(library)
        for version, commit in versions.items():
            if commit is None and tags.get(version):
                versions[version] = tags[version]
