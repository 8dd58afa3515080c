"""The slim known-site index: every templated site of every scanned release of the
covered libraries, one row per (library, pattern, file, function, kind, class,
condition), with the releases it was seen in. Not records: no prose, no source window.

On disk (``data/sites/sites.jsonl.gz``) it is gzip'd JSON lines, written so the same
parts always give the same bytes (rows sorted, keys sorted, gzip without a name or a
time stamp):

- line 1, the header: ``{"format": "errkb-sites/1", "libraries": {"vllm": {"repo": ...,
  "releases": [[version, commit or null], ...]}}}`` (releases oldest first);
- then one row per site: ``{"l": library, "p": pattern, "f": file, "n": line, "fn": function,
  "c": condition or null, "k": kind, "e": error class, "r": "0.2.7-0.4.0,0.5.1"}``. ``r`` lists
  runs of consecutive scanned releases (by the header's order); ``n`` is the line in the
  newest release that has the site, and that release's commit (header) is the row's commit.
  Generated copies (one message of one function and condition raised in more than
  ``errkb.match.sites.COPIES_MOST`` files of a release) are one row, keyed without its file:
  ``f`` and ``n`` are the first file's in the newest release that has them, ``"x"`` how many
  files raise it there.
"""

from __future__ import annotations

import gzip
import io
import json
from dataclasses import dataclass, field
from pathlib import Path

from packaging.version import InvalidVersion, Version

from errkb.mine.releases import LIBRARIES, Part

FORMAT = "errkb-sites/1"
_KEY = ("p", "f", "fn", "k", "e", "c")


def _row_key(library: str, row: dict) -> tuple:
    """A row's identity: its site; generated copies (``"x"``) without their file, so that the
    first file may differ between releases and the row still spans them all."""
    return (library, *("" if k == "f" and "x" in row else row[k] or "" for k in _KEY))


class SiteIndexFileError(ValueError):
    """A site index file that cannot be read (names the file, line and reason)."""


def version_key(v: str):
    try:
        return (0, Version(v), v)
    except InvalidVersion:
        return (1, Version("0"), v)


@dataclass
class SiteIndexData:
    """The index in memory while it is built: per library its releases and commits, per
    site key its row and the set of releases that have it."""

    releases: dict[str, dict[str, str | None]] = field(default_factory=dict)  # library -> version -> commit
    rows: dict[tuple, dict] = field(default_factory=dict)  # (library, *key) -> row without "r"
    seen: dict[tuple, set[str]] = field(default_factory=dict)  # same key -> versions
    # Keys whose line (and copy count) came from a release part since replaced, and which
    # that release's new part lacks: their newest release now is an older one, whose line the
    # index does not hold. ``stale_releases`` names what to read again.
    stale: set[tuple] = field(default_factory=set)

    def add(self, part: Part) -> None:
        """Put one release's part in (replacing that release's earlier part, if any)."""
        lib = part.library
        versions = self.releases.setdefault(lib, {})
        if part.version in versions:
            self.remove(lib, part.version)
        versions[part.version] = part.commit
        order = sorted(versions, key=version_key)
        for row in part.rows:
            key = _row_key(lib, row)
            have = self.seen.setdefault(key, set())
            newest_before = max(have, key=version_key) if have else None
            have.add(part.version)
            # The line (and so the commit) of the newest release that has the site.
            if newest_before is None or order.index(part.version) > order.index(newest_before):
                self.rows[key] = {"l": lib, **row}
                self.stale.discard(key)

    def remove(self, library: str, version: str) -> None:
        for key in [k for k, v in self.seen.items() if k[0] == library and version in v]:
            have = self.seen[key]
            newest = max(have, key=version_key)
            have.discard(version)
            if not have:
                del self.seen[key], self.rows[key]
                self.stale.discard(key)
            elif newest == version:
                self.stale.add(key)
        self.releases.get(library, {}).pop(version, None)

    def stale_releases(self) -> list[tuple[str, str]]:
        """(library, version) of each stale row's newest release, oldest first: reading them
        again gives those rows the line of a release that has them."""
        found = {(key[0], max(self.seen[key], key=version_key)) for key in self.stale}
        return sorted(found, key=lambda lv: (lv[0], version_key(lv[1])))

    def release_rows(self, library: str, version: str) -> list[dict]:
        """The rows (without "l" and "r") that hold for one release: what its part had,
        lines exact where the release is the row's newest."""
        return [{k: v for k, v in self.rows[key].items() if k != "l"} for key, have in sorted(self.seen.items())
                if key[0] == library and version in have]

    # -- bytes

    def dumps(self) -> bytes:
        header = {"format": FORMAT, "libraries": {
            lib: {"repo": LIBRARIES[lib].repo if lib in LIBRARIES else None,
                  "releases": [[v, versions[v]] for v in sorted(versions, key=version_key)]}
            for lib, versions in sorted(self.releases.items())}}
        lines = [json.dumps(header, sort_keys=True, separators=(",", ":"), ensure_ascii=False)]
        order = {lib: sorted(vs, key=version_key) for lib, vs in self.releases.items()}
        for key in sorted(self.rows):
            row = dict(self.rows[key])
            row["r"] = _ranges(order[key[0]], self.seen[key])
            lines.append(json.dumps(row, sort_keys=True, separators=(",", ":"), ensure_ascii=False))
        raw = ("\n".join(lines) + "\n").encode("utf-8")
        buf = io.BytesIO()
        # No file name and mtime 0 in the gzip header: same rows, same bytes.
        with gzip.GzipFile(filename="", mode="wb", fileobj=buf, mtime=0, compresslevel=9) as gz:
            gz.write(raw)
        return buf.getvalue()

    def write(self, path: Path) -> int:
        data = self.dumps()
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_bytes(data)
        tmp.replace(path)
        return len(data)

    @classmethod
    def load(cls, path: Path) -> SiteIndexData:
        index = cls()
        if not path.exists():
            return index
        header, rows = read_lines(path)
        for lib, info in header["libraries"].items():
            index.releases[lib] = {v: c for v, c in info["releases"]}
        for row in rows:
            lib = row["l"]
            order = [v for v, _ in header["libraries"][lib]["releases"]]
            key = _row_key(lib, row)
            index.seen[key] = _expand(order, row.pop("r"))
            index.rows[key] = row
        return index


def read_lines(path: Path) -> tuple[dict, list[dict]]:
    """(header, rows) of an index file; SiteIndexFileError naming the file and line when broken."""
    try:
        with gzip.open(path, "rt", encoding="utf-8") as f:
            text = f.read()
    except (OSError, EOFError, UnicodeDecodeError) as e:
        raise SiteIndexFileError(f"{path}: not a gzip'd site index ({e})") from None
    lines = text.splitlines()
    out: list[dict] = []
    for n, line in enumerate(lines, 1):
        try:
            out.append(json.loads(line))
        except ValueError as e:
            raise SiteIndexFileError(f"{path}:{n}: not JSON ({e})") from None
    if not out or out[0].get("format") != FORMAT:
        raise SiteIndexFileError(f"{path}:1: not an {FORMAT} header")
    return out[0], out[1:]


def _ranges(order: list[str], have: set[str]) -> str:
    """Runs of consecutive releases (in ``order``) as "a-b,c"."""
    runs: list[str] = []
    start = prev = None
    for v in order:
        if v in have:
            start = start or v
            prev = v
        elif start is not None:
            runs.append(start if start == prev else f"{start}-{prev}")
            start = None
    if start is not None:
        runs.append(start if start == prev else f"{start}-{prev}")
    return ",".join(runs)


def _expand(order: list[str], ranges: str) -> set[str]:
    position = {v: i for i, v in enumerate(order)}
    have: set[str] = set()
    for run in ranges.split(","):
        if not run:
            continue
        first, _, last = run.partition("-")  # PEP 440 versions hold no "-"
        last = last or first
        have.update(order[position[first] : position[last] + 1])
    return have
