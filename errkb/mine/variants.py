"""Other wordings of a record's raise site across releases (``errkb variants build``).

For one record and a list of releases of its project (checkouts, folders, wheels or
sdists), the drift machinery (``errkb.mine.drift``) finds the record's raise site in
each release. Where the site is there but raises a different message (``reworded``),
that wording is a *variant* of the record: its pattern is built the way ``mine``
builds patterns (``Template.pattern()``), with the releases it holds for (first to
last release seen with that exact wording) and its source location.

Variants are errkb's own data, next to the bundled records in ``data/variants/`` (one
``<record-id>.json`` per record); the records themselves stay as ingested. Every
variant is linted like a record's pattern (E201 compile, E202 matches its own
template example, E203 not too generic) and one that also matches the record's
current message is dropped: a variant must never match text that is not the
record's error.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import date
from pathlib import Path

from errkb.cache import cache_root
from errkb.records.variants import (
    VariantsError,
    lint_variant,
    version_key,
)

MIN_VARIANT_SIMILARITY = 0.8
MIN_VARIANT_SIMILARITY_ELSEWHERE = 0.9  # when the site is in another function than the recorded one
_VERSION = re.compile(r"-(\d+(?:\.\d+)*(?:[a-z]+\d*)?(?:\.post\d+)?(?:\+[A-Za-z0-9.]+)?)(?:-|\.tar\.gz$|\.zip$)")


@dataclass
class Release:
    version: str
    path: Path


def version_of(path: Path) -> str:
    """The release a wheel or sdist file name names (``vllm-0.6.3.tar.gz`` -> ``0.6.3``)."""
    m = _VERSION.search(path.name)
    if not m:
        raise VariantsError(f"cannot read a version from the file name {path.name!r}", str(path))
    return m.group(1)


def build(record: dict, releases: list[Release]) -> dict:
    """The variants of ``record`` across ``releases``: the file ``data/variants/<id>.json`` holds."""
    return build_many([record], releases)[0]


def build_many(records: list[dict], releases: list[Release]) -> list[dict]:
    """The variants of each record (of one project) across ``releases``, each release scanned once."""
    from errkb.mine.drift import ChunkIndex, check_record_site, mentions_any, record_path_prefix
    from errkb.mine.raise_sites import scan
    from errkb.mine.sources import SourceTree

    found: list[dict[str, dict]] = [{} for _ in records]
    dropped: list[list[dict]] = [[] for _ in records]
    holds: list[list[str]] = [[] for _ in records]  # releases that raise the record's own wording
    scanned: list[str] = []
    for release in sorted(releases, key=lambda r: version_key(r.version)):
        try:
            tree = SourceTree.open(release.path)
        except (FileNotFoundError, OSError, ValueError) as e:
            raise VariantsError(f"cannot read release {release.version}: {e}", str(release.path)) from None
        result = scan(tree, include=mentions_any(records))
        templated = result.templated
        files = {s.file for s in result.sites} | {f for f, _ in result.unparsable}
        index = ChunkIndex(templated)
        texts: dict[str, str | None] = {}

        def file_text(rel: str, tree=tree, texts=texts) -> str | None:
            if rel not in texts:
                texts[rel] = tree.read_text(rel)
            return texts[rel]

        scanned.append(release.version)
        names = tree.file_names()
        for k, record in enumerate(records):
            prefix = record_path_prefix([record], names)
            entry = check_record_site(record, prefix, index, templated, files, file_text)
            if entry.status in ("same", "moved"):
                holds[k].append(release.version)
            if entry.status != "reworded" or entry.site is None:
                continue
            close = _literal_similarity(record["messagePattern"], entry.site.template.pattern())
            moved_function = "function" in entry.changes
            if close < MIN_VARIANT_SIMILARITY or (moved_function and close < MIN_VARIANT_SIMILARITY_ELSEWHERE):
                dropped[k].append({"pattern": entry.site.template.pattern(), "release": release.version,
                                   "reason": f"not the same raise site: literal text similarity {close:.2f}"
                                             + (" in another function" if moved_function else "")})
                continue
            template = entry.site.template
            pattern = template.pattern()
            if pattern == record["messagePattern"]:
                continue
            variant = found[k].get(pattern)
            if variant is None:
                reason = lint_variant(pattern, template.render(), record["errorMessage"].strip())
                if reason is None:
                    others = [r["id"] for r in records if r is not record and _matches(pattern, r["errorMessage"].strip())]
                    reason = f"matches the message of record {others[0]}" if others else None
                if reason is not None:
                    dropped[k].append({"pattern": pattern, "release": release.version, "reason": reason})
                    continue
                variant = found[k][pattern] = {
                    "pattern": pattern,
                    "message_template": template.display(),
                    "example": template.render(),
                    "releases": [],
                }
            variant["releases"].append(release.version)
            variant["file"], variant["line"] = prefix + entry.site.file, entry.site.line  # the latest release's location
    out = []
    for k, record in enumerate(records):
        variants = [{**v, "first": v["releases"][0], "last": v["releases"][-1]} for v in found[k].values()]
        out.append({"record_id": record["id"], "variants": variants, "scanned": list(scanned),
                    "record_releases": holds[k], "dropped": dropped[k],
                    "date": date.today().isoformat()})
    return out


def _matches(pattern: str, message: str) -> bool:
    from errkb.records.lint import self_match_normalised
    from errkb.text import patterns

    return self_match_normalised(patterns.analyze(pattern, translate=False), message) is not False


def _literal_similarity(pattern_a: str, pattern_b: str) -> float:
    """Word similarity of two patterns' literal text (values left out: a record's message
    holds real values, a template none)."""
    from errkb.mine.drift import similarity
    from errkb.text.patterns import analyze

    return similarity(" ".join(analyze(pattern_a).required_literals), " ".join(analyze(pattern_b).required_literals))


def build_for(store, ids: tuple[str, ...] | list[str], releases: str | None = None, package: str | None = None,
              last_n: int | None = None, write_dir: Path | None = None,
              note: Callable[[str], None] | None = None) -> Iterator[tuple[dict, dict, Path | None]]:
    """``errkb variants build``: the records ``ids`` are read from ``store`` now (an unknown
    id is an error before anything is fetched); the returned iterator then scans, per
    package (``package``, else each record's repo name), the ``releases`` given (comma-
    separated paths of wheels, sdists or folders, or versions to download) or the last
    ``last_n`` releases, and yields (record, its variants file's content, the file written
    into ``write_dir`` or None), package by package."""
    records = [store.get(i) for i in ids]
    missing = [i for i, r in zip(ids, records) if r is None]
    if missing:
        raise VariantsError(f"no record {', '.join(missing)} in the store", "ID")
    given = [x.strip() for x in (releases or "").split(",") if x.strip()]
    return _build_by_package(records, given, package, last_n, write_dir, note)


def _build_by_package(records: list[dict], given: list[str], package: str | None, last_n: int | None,
                      write_dir: Path | None, note: Callable[[str], None] | None) -> Iterator[tuple[dict, dict, Path | None]]:
    by_package: dict[str, list[dict]] = {}
    for record in records:
        by_package.setdefault(package or (record.get("repo") or "").rsplit("/", 1)[-1], []).append(record)
    for name, group in by_package.items():
        versions = latest_versions(name, last_n) if last_n else [g for g in given if not Path(g).exists()]
        found = [Release(version_of(Path(g)) if Path(g).is_file() else Path(g).name, Path(g)) for g in given if Path(g).exists()]
        for version in versions:
            if note is not None:
                note(f"fetching {name}=={version}")
            found.append(fetch_release(name, version))
        for record, result in zip(group, build_many(group, found)):
            yield record, result, write(result, write_dir) if write_dir is not None else None


def write(result: dict, folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{result['record_id']}.json"
    path.write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return path


# ---------------------------------------------------------------- releases from PyPI


def cache_dir() -> Path:
    return cache_root() / "releases"


def latest_versions(package: str, n: int) -> list[str]:
    """The last ``n`` released versions of ``package`` (``pip index versions``)."""
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "pip", "index", "versions", package], capture_output=True, text=True)
    m = re.search(r"Available versions:\s*(.+)", out.stdout)
    if out.returncode != 0 or not m:
        raise VariantsError(f"cannot list the releases of {package}: {(out.stderr or out.stdout).strip()[-200:]}", "--package")
    versions = [v.strip() for v in m.group(1).split(",") if re.fullmatch(r"[0-9.]+", v.strip())]
    return sorted(versions, key=version_key)[-n:]


def fetch_release(package: str, version: str, folder: Path | None = None) -> Release:
    """The sdist of ``package==version`` (a wheel when there is no sdist), cached."""
    import subprocess
    import sys

    folder = (folder or cache_dir()) / package.lower()
    folder.mkdir(parents=True, exist_ok=True)
    norm = re.sub(r"[-_.]+", "_", package.lower())
    vnorm = re.sub(r"[-_.]+", "_", version.lower())

    def cached() -> Path | None:
        unpacked = folder / f"{package}-{version}.unpacked"
        if unpacked.is_dir():
            return unpacked
        for p in sorted(folder.iterdir()):
            name = re.sub(r"[-_.]+", "_", p.name.lower())
            if name.startswith(f"{norm}_{vnorm}") and (name.endswith("tar_gz") or name.endswith("whl") or name.endswith("zip")):
                rest = name[len(norm) + 1 + len(vnorm):]
                if rest[:1] == "_" and not re.match(r"_(post|dev|rc|\d)", rest):
                    return p
        return None

    have = cached()
    if have is None:
        base = [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "-d", str(folder), f"{package}=={version}"]
        out = subprocess.run([*base, "--no-binary", ":all:", "--no-build-isolation"], capture_output=True, text=True)
        have = cached()
        if have is None:
            out = subprocess.run([*base, "--only-binary", ":all:"], capture_output=True, text=True)
            have = cached()
        if have is None:
            have = _unpacked_sdist(base, folder, package, version)
        if have is None:
            raise VariantsError(f"cannot download {package}=={version}: {(out.stderr or out.stdout).strip()[-300:]}", "--releases")
    return Release(version, have)


def _unpacked_sdist(base: list[str], folder: Path, package: str, version: str) -> Path | None:
    """An sdist whose metadata cannot be built here (it imports torch in setup.py): pip
    deletes it, but with ``--no-clean`` leaves its unpacked tree, which holds the .py files."""
    import shutil
    import subprocess
    import tempfile

    with tempfile.TemporaryDirectory(dir=folder) as tmp:
        env = {**os.environ, "TMPDIR": tmp}
        subprocess.run([*base, "--no-binary", ":all:", "--no-build-isolation", "--no-clean"], capture_output=True, text=True, env=env)
        trees = [p for p in Path(tmp).glob("pip-download-*/*") if p.is_dir() and any(p.rglob("*.py"))]
        if not trees:
            return None
        target = folder / f"{package}-{version}.unpacked"
        shutil.rmtree(target, ignore_errors=True)
        shutil.move(str(trees[0]), target)
        return target
