"""Released wheels and sdists of the libraries the known-site index covers: fetched with
``pip download --no-deps`` (PyPI only, into a cache outside any checkout) and read in
place, only the members that hold messages (``.py``; for FlashInfer also the C++/CUDA
sources under its include/csrc), into the sites of one release (a *part*).

Nothing is extracted, imported or run. An archive that is not one, a zip bomb's member,
a huge, deep or unparsable file and C++ the scan cannot follow are counted with their
reason in the part's summary; the read never stops on them.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import zipfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from errkb.match.sites import COPIES_MOST  # the rule for generated copies: one home, beside its reader
from errkb.mine.cpp_sites import cpp_sites
from errkb.mine.raise_sites import (
    ALL_KINDS,
    HelperCall,
    RaiseSite,
    RaisingHelper,
    ReleaseClasses,
    helper_call_templates,
    sites_in_source,
)
from errkb.mine.sources import BadArchive, archive_members, archive_provenance, decode_source
from errkb.mine.templates import NoTemplate
from errkb.mine.walk import excluded_reason

_CPP_SUFFIXES = (".h", ".cuh", ".cu", ".cpp", ".hpp", ".cc")


@dataclass(frozen=True)
class Library:
    name: str  # the library's name in the index ("vllm")
    distribution: str  # its name on PyPI ("flashinfer-python")
    repo: str  # owner/name on GitHub
    pip_args: tuple[str, ...]  # how to ask pip for a small archive whose messages are the library's
    cpp: bool = False  # read C++/CUDA members under include/ and csrc/ too
    # C++ headers the wheel ships from the library's own source: (prefix in the wheel,
    # the same folder in the repository). PyTorch's wheels hold no .cpp, but its headers
    # (c10, ATen, torch/csrc: TORCH_CHECK, C10_THROW_ERROR, c10d's NCCL checks) are there.
    headers: tuple[tuple[str, str], ...] = ()
    skip_headers: tuple[str, ...] = ()  # prefixes in the wheel left out (generated code)
    # Folders of the library's C++ source read from a release's source archive where one is
    # listed (data/sites/cpp_sources.json): PyTorch's .cpp, which no wheel ships.
    cpp_source_roots: tuple[str, ...] = ()
    cpp_source_vendored: tuple[str, ...] = ()  # folders under those roots that are another project's code
    # Python versions whose wheel to ask for, in turn (old releases stop before new Pythons,
    # new ones drop old Pythons).
    pythons: tuple[str, ...] = ("3.11", "3.10", "3.12", "3.13", "3.9")


# torch: the macOS arm64 wheel is the smallest, and its Python files are every
# platform's. vLLM: the Linux wheel (its sdist needs torch to prepare metadata).
LIBRARIES = {
    "vllm": Library("vllm", "vllm", "vllm-project/vllm",
                    # pip does not widen one --platform to older manylinux tags: name each.
                    ("--only-binary=:all:", "--platform", "manylinux_2_35_x86_64", "--platform", "manylinux_2_31_x86_64",
                     "--platform", "manylinux_2_28_x86_64", "--platform", "manylinux2014_x86_64",
                     "--platform", "manylinux1_x86_64")),
    "torch": Library("torch", "torch", "pytorch/pytorch",
                     ("--only-binary=:all:", "--platform", "macosx_11_0_arm64", "--platform", "macosx_12_0_arm64",
                      "--platform", "macosx_13_0_arm64", "--platform", "macosx_14_0_arm64"),
                     pythons=("3.10", "3.11", "3.12", "3.13", "3.14"),
                     headers=(("torch/include/c10/", "c10/"), ("torch/include/ATen/", "aten/src/ATen/"),
                              ("torch/include/torch/csrc/", "torch/csrc/"),
                              ("torch/include/torch/headeronly/", "torch/headeronly/")),
                     skip_headers=("torch/include/ATen/ops/",),
                     cpp_source_roots=("aten/src/ATen/", "c10/", "torch/csrc/"),
                     # FlashAttention's and xformers' kernels, QNNPACK: vendored ("FlashAttention only
                     # supports Ampere GPUs" pasted from the flash-attn package is not PyTorch's error)
                     cpp_source_vendored=("aten/src/ATen/native/transformers/cuda/flash_attn/",
                                          "aten/src/ATen/native/transformers/hip/flash_attn/",
                                          "aten/src/ATen/native/transformers/cuda/mem_eff_attention/",
                                          "aten/src/ATen/native/quantized/cpu/qnnpack/")),
    "flashinfer": Library("flashinfer", "flashinfer-python", "flashinfer-ai/flashinfer", ("--only-binary=:all:",),
                          cpp=True),
}
_SPEC = re.compile(r"^([A-Za-z0-9_.-]+)==([A-Za-z0-9_.+!-]+)$")
# vLLM versions of dev wheels carry the commit: 0.6.4.dev12+g1a2b3c4.
_VERSION_COMMIT = re.compile(r"\+g([0-9a-f]{7,40})\b")


class ReleaseError(ValueError):
    """A release that cannot be fetched or read at all (one line, names it)."""


def parse_spec(spec: str) -> tuple[Library, str]:
    """``vllm==0.6.3`` -> (the library, "0.6.3")."""
    m = _SPEC.match(spec.strip())
    if not m:
        raise ReleaseError(f"{spec!r}: expected LIBRARY==VERSION, e.g. vllm==0.6.3")
    name = m.group(1).lower()
    for library in LIBRARIES.values():
        if name in (library.name, library.distribution):
            return library, m.group(2)
    raise ReleaseError(f"{spec!r}: unknown library {name!r} (known: {', '.join(sorted(LIBRARIES))})")


def cache_dir() -> Path:
    """Where archives are downloaded: ``$ERRKB_RELEASES_DIR``, else errkb's cache's ``releases/``."""
    base = os.environ.get("ERRKB_RELEASES_DIR")
    if base:
        return Path(base).expanduser().absolute()
    from errkb.cache import cache_root

    return cache_root() / "releases"


def tag_commits(library: str) -> dict[str, str]:
    """version -> commit from the committed tag-to-commit map (data/sites/tags.json)."""
    from errkb.resources import data_dir

    try:
        data = json.loads((data_dir() / "sites" / "tags.json").read_text())
    except (OSError, ValueError, FileNotFoundError):
        return {}
    return data.get(library, {})


_SOURCE_SUFFIXES = (".cpp", ".cu", ".cc")  # the headers come from the wheel (Library.headers)


def cpp_sources(library: str) -> dict[str, dict]:
    """version -> {url, sha256, size, from}: the releases whose C++ source errkb reads besides
    their wheel (data/sites/cpp_sources.json)."""
    from errkb.resources import data_dir

    try:
        data = json.loads((data_dir() / "sites" / "cpp_sources.json").read_text())
    except (OSError, ValueError):
        return {}
    return data.get(library, {})


def fetch_cpp_source(library: Library, version: str, into: Path | None = None) -> Path | None:
    """The release's C++ source archive (None when none is listed), from the releases folder
    or downloaded from its listed address into a temporary file of its own (two workers may
    fetch the same release), hashed while it is written and put in place only when its size and
    sha256 are the listed ones."""
    import hashlib
    import http.client
    import tempfile
    import urllib.parse
    import urllib.request

    entry = cpp_sources(library.name).get(version)
    if entry is None:
        return None
    into = into or cache_dir()
    into.mkdir(parents=True, exist_ok=True)
    path = into / urllib.parse.unquote(entry["url"].rsplit("/", 1)[-1])
    if path.is_file():
        digest = hashlib.sha256()
        with path.open("rb") as f:
            while chunk := f.read(1 << 20):
                digest.update(chunk)
        if digest.hexdigest() == entry["sha256"]:
            return path
        path.unlink(missing_ok=True)  # not the listed archive: fetched again below
    fd, tmp_name = tempfile.mkstemp(prefix=path.name + ".", suffix=".part", dir=into)
    tmp = Path(tmp_name)
    umask = os.umask(0)
    os.umask(umask)
    os.fchmod(fd, 0o666 & ~umask)  # as any download in the folder (mkstemp's is private)
    digest, size = hashlib.sha256(), 0
    deadline = time.monotonic() + _SOURCE_FETCH_S
    try:
        with os.fdopen(fd, "wb") as out, urllib.request.urlopen(entry["url"], timeout=120) as response:
            # read1: what has arrived, so the deadline is checked as bytes come, however slowly
            read = getattr(response, "read1", response.read)
            while chunk := read(1 << 16):
                size += len(chunk)
                if size > entry["size"]:
                    raise ReleaseError(f"{library.name}=={version}: its C++ source {entry['url']} is larger than "
                                       f"the listed {entry['size']} bytes")
                if time.monotonic() > deadline:
                    raise ReleaseError(f"{library.name}=={version}: its C++ source {entry['url']} took over "
                                       f"{_SOURCE_FETCH_S} s to download")
                digest.update(chunk)
                out.write(chunk)
        if size != entry["size"] or digest.hexdigest() != entry["sha256"]:
            raise ReleaseError(f"{library.name}=={version}: its C++ source {entry['url']} is not the listed one "
                               f"({size} bytes, sha256 {digest.hexdigest()[:16]}...; listed {entry['size']} bytes, "
                               f"{entry['sha256'][:16]}...)")
        tmp.replace(path)
    except ReleaseError:
        raise
    except (OSError, ValueError, http.client.HTTPException) as e:
        raise ReleaseError(f"{library.name}=={version}: its C++ source {entry['url']} could not be "
                           f"downloaded ({type(e).__name__}: {e})") from None
    finally:
        tmp.unlink(missing_ok=True)
    return path


_SOURCE_FETCH_S = 900


def fetch(library: Library, version: str, into: Path | None = None) -> Path:
    """The release's archive, from the cache or downloaded by pip (``--no-deps``)."""
    into = into or cache_dir()
    into.mkdir(parents=True, exist_ok=True)
    found = _cached(into, library, version)
    if found is not None:
        return found
    base = [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "--disable-pip-version-check",
            "-d", str(into)]
    target = f"{library.distribution}=={version}"
    run = None
    for python in library.pythons:
        run = subprocess.run([*base, *library.pip_args, "--python-version", python, target],
                             capture_output=True, text=True, timeout=900, check=False)
        found = _cached(into, library, version)
        if found is not None:
            return found
    if found is None:
        # No wheel for that platform (old FlashInfer ships an sdist only): its sdist.
        run = subprocess.run([*base, "--no-binary=:all:", "--no-build-isolation", target],
                             capture_output=True, text=True, timeout=900, check=False)
        found = _cached(into, library, version)
    if found is None:
        # Its sdist's metadata step fails here (vLLM's and old FlashInfer's need torch): the
        # source pip unpacked before that step is read instead, nothing built or run.
        found = _unpacked_sdist(library, version, into, base)
    if found is None:
        lines = (run.stderr or run.stdout).strip().splitlines() if run is not None else []
        said = [line.strip() for line in lines if "error" in line.lower() and "hint" not in line.lower()] or lines or ["no output"]
        raise ReleaseError(f"{library.distribution}=={version}: pip download found no wheel or sdist it could fetch ({said[-1][:200]})")
    return found


def _unpacked_sdist(library: Library, version: str, into: Path, base: list[str]) -> Path | None:
    """The release's sdist as pip unpacked it before its metadata step failed (``--no-clean``
    keeps the tree), packed again as ``<dist>-<version>.tar.gz`` in ``into``: its members
    sorted, with fixed owner and time (the same sdist gives the same bytes), without the
    ``*.egg-info`` a failed step may have left. The name and version are the tree's PKG-INFO's."""
    import shutil
    import tempfile

    scratch = Path(tempfile.mkdtemp(prefix="errkb-sdist-", dir=into))
    try:
        env = dict(os.environ, TMPDIR=str(scratch))
        subprocess.run([*base[:-2], "-d", str(scratch / "out"), "--no-binary=:all:", "--no-build-isolation",
                        "--no-clean", f"{library.distribution}=={version}"],
                       capture_output=True, text=True, timeout=900, check=False, env=env)
        for info in sorted(scratch.glob("pip-*/*/PKG-INFO")):
            meta = info.read_text(encoding="utf-8", errors="replace")
            name = re.search(r"^Name: *(.+)$", meta, re.M)
            ver = re.search(r"^Version: *(.+)$", meta, re.M)
            if name and ver and (_norm(name.group(1)), _norm(ver.group(1))) == (_norm(library.distribution),
                                                                                 _norm(version)):
                return _pack_tree(info.parent, into / f"{library.distribution}-{version}.tar.gz",
                                  f"{library.distribution}-{version}")
        return None
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _pack_tree(tree: Path, out: Path, top: str) -> Path:
    """``tree``'s files (no ``*.egg-info``) as a reproducible tar.gz under ``top/``."""
    import gzip
    import io
    import tarfile

    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for path in sorted(p for p in tree.rglob("*") if p.is_file() and not p.is_symlink()):
            rel = path.relative_to(tree).as_posix()
            if rel.split("/", 1)[0].endswith(".egg-info"):
                continue
            data = path.read_bytes()
            member = tarfile.TarInfo(f"{top}/{rel}")
            member.size, member.mode, member.mtime = len(data), 0o644, 0
            tar.addfile(member, io.BytesIO(data))
    partial = out.with_name(out.name + ".part")
    with open(partial, "wb") as f, gzip.GzipFile(fileobj=f, mode="wb", filename="", mtime=0) as gz:
        gz.write(buffer.getvalue())
    partial.replace(out)
    return out


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


def _cached(folder: Path, library: Library, version: str) -> Path | None:
    """The wheel or sdist of exactly this release in ``folder`` (0.6.3 is not 0.6.3.post1)."""
    want = (_norm(library.distribution), _norm(version))
    for p in sorted(folder.iterdir()):
        name = p.name
        if name.endswith(".whl"):
            fields = name[:-4].split("-")
            got = (_norm(fields[0]), _norm(fields[1])) if len(fields) >= 5 else None
        elif name.endswith((".tar.gz", ".zip")):
            stem = name[: -len(".tar.gz")] if name.endswith(".tar.gz") else name[:-4]
            dist, _, ver = stem.rpartition("-")
            got = (_norm(dist), _norm(ver))
        else:
            continue
        if got == want:
            return p
    return None


@dataclass
class Part:
    """The sites of one release, and what was left unread and why."""

    library: str
    version: str
    commit: str | None
    rows: list[dict] = field(default_factory=list)
    files: int = 0
    skipped: Counter = field(default_factory=Counter)  # reason -> count
    untemplated: Counter = field(default_factory=Counter)
    copies: int = 0  # sites of generated copies folded into their first (errkb.match.sites.COPIES_MOST)

    def summary(self) -> dict:
        return {"library": self.library, "version": self.version, "commit": self.commit, "files": self.files,
                "sites": len(self.rows), "untemplated": sum(self.untemplated.values()), "copies_left_out": self.copies,
                "skipped": sum(self.skipped.values()), "skipped_reasons": dict(sorted(self.skipped.items()))}

    def keep_copies(self, most: int = COPIES_MOST) -> None:
        """Generated copies, one row each: the rows of one message raised by the same function
        under the same condition (kind and class too) in more than ``most`` files become the
        row of the first of them (by file, then line), marked with the number of files
        (``x``). A message hand-written in many files has other functions or conditions, so
        it keeps every site. Linear in the rows (one pass, then a pass per group)."""
        groups: dict[tuple, list[dict]] = {}
        for row in self.rows:
            groups.setdefault(_copy_key(row), []).append(row)
        out = []
        for rows in groups.values():
            files = {row["f"] for row in rows}
            if len(files) <= most:
                out.extend(rows)
                continue
            first = min(rows, key=lambda row: (row["f"], row["n"]))
            out.append({**first, "x": len(files)})
            self.copies += len(rows) - 1
        self.rows = out


def _copy_key(row: dict) -> tuple:
    """What generated copies share: the whole site but its file and line."""
    return (row["p"], row["fn"], row["k"], row["e"] or "", row["c"] or "")


def _wanted(library: Library):
    def wanted(name: str) -> bool:
        if name.endswith(".py"):
            return True
        if library.headers and name.endswith(_CPP_SUFFIXES):
            return _repo_path(library, name) is not None
        if library.cpp and name.endswith(_CPP_SUFFIXES):
            parts = name.split("/")
            return "include" in parts or "csrc" in parts
        return False
    return wanted


def _repo_path(library: Library, name: str) -> str | None:
    """Where the wheel's header ``name`` lives in the library's repository (None: not one of its own)."""
    if name.startswith(library.skip_headers):
        return None
    for prefix, repo in library.headers:
        if name.startswith(prefix):
            return repo + name[len(prefix) :]
    return None


def read_release(archive: Path, library: Library, version: str, commit: str | None = None,
                 cpp_source: Path | None = None) -> Part:
    """The sites of one release archive (a wheel, an sdist, or a tarball of its members as
    the reproducibility fixture is), read member by member; with ``cpp_source`` (the
    release's source tarball, :func:`fetch_cpp_source`), also its C++ files under the
    library's ``cpp_source_roots``, at their repository paths."""
    if commit is None:
        commit = commit_of(archive, library.name, version)
    part = Part(library.name, version, commit)
    seen: set[tuple] = set()
    helpers = _Helpers()
    _read_members(part, archive, library, _wanted(library), seen, helpers)
    if cpp_source is not None:
        roots, vendored = library.cpp_source_roots, library.cpp_source_vendored
        _read_members(part, cpp_source, library, lambda name: name.endswith(_SOURCE_SUFFIXES)
                      and name.startswith(roots) and not name.startswith(vendored), seen, helpers, source=True)
    # calls of names imported from another module of the release, kept where that module's
    # function is a raising helper (errkb.mine.raise_sites.raising_helper): read the whole release first
    for call in helpers.calls:
        helper = helpers.found.get(call.target)
        if helper is None:
            continue
        try:
            templates = helper_call_templates(helper, call)
        except NoTemplate as e:
            part.untemplated[str(e)] += 1
            continue
        for template in templates:
            _add(part, seen, template.pattern(), call.file, call.line, call.function, call.condition, "raise",
                 helper.error_class)
    # messages built by classes whose base is another module's exception class (torch._inductor's
    # GPUTooOldForTriton(ShortenTraceback)): known only now
    _add_sites(part, seen, helpers.classes.resolved_sites())
    part.keep_copies()
    part.rows.sort(key=_row_key)
    return part


class _Helpers:
    """A release's raising helpers ((module, name) -> what a call raises) and the calls that may be theirs."""

    def __init__(self) -> None:
        self.found: dict[tuple[str, str], RaisingHelper] = {}
        self.calls: list[HelperCall] = []
        self.classes = ReleaseClasses()


def _read_members(part: Part, archive: Path, library: Library, wanted, seen: set[tuple], helpers: _Helpers,
                  source: bool = False) -> None:
    """Read the ``wanted`` members of one archive into ``part`` (a source tarball's members are
    at their repository paths already)."""
    skipped: list[tuple[str, str]] = []
    if archive.name.endswith((".tar.gz", ".tgz", ".tar")) and not source:
        # An sdist also holds setup.py, examples/, benchmarks/, tools/: only what the wheel
        # would install (the package) and, for a C++ library, its include/ and csrc/.
        package = library.distribution.split("-")[0].replace("-", "_")
        roots = (package, "include", "csrc") if library.cpp else (package,)
        sdist_wanted = wanted

        def wanted(name: str) -> bool:
            return name.split("/", 1)[0] in roots and sdist_wanted(name)
    members = archive_members(archive, wanted, skipped)
    try:
        for name, data in members:
            why = excluded_reason(name)
            if why is not None:
                part.skipped[why.split(" (")[0]] += 1
                continue
            part.files += 1
            if library.headers and not name.endswith(".py") and not source:
                name = _repo_path(library, name) or name
            _read_member(part, name, decode_source(data), seen, helpers)
    except BadArchive as e:
        raise ReleaseError(str(e)) from None
    for where, reason in skipped:
        if where == str(archive) and reason.startswith("archive over"):
            # A part read only partly would tell `explain` that every message after the cut is
            # absent from this release ("seen in 0.2-0.6, 0.8"): the release is not added at all.
            raise ReleaseError(f"{archive.name}: {reason}; the release is not added (raise MAX_ARCHIVE_BYTES "
                               f"in errkb/mine/sources.py if this archive is genuine)")
        part.skipped[reason.split(" (")[0]] += 1


def _read_member(part: Part, name: str, text: str, seen: set[tuple], helpers: _Helpers) -> None:
    if name.endswith(".py"):
        try:
            sites = sites_in_source(text, name, kinds=ALL_KINDS, helpers=helpers.found, calls=helpers.calls,
                                    classes=helpers.classes)
        except (SyntaxError, ValueError, RecursionError, MemoryError) as e:
            part.skipped[f"unparsable Python ({type(e).__name__})"] += 1
            return
        _add_sites(part, seen, sites)
        return
    for c in cpp_sites(text, name):
        if c.template is None:
            part.untemplated[f"C++: {c.reason}"] += 1
            continue
        _add(part, seen, c.template.pattern(), name, c.line, c.function, c.condition, c.kind, c.error_class)


def _add_sites(part: Part, seen: set[tuple], sites: list[RaiseSite]) -> None:
    for s in sites:
        if s.template is None:
            part.untemplated[s.reason] += 1
            continue
        _add(part, seen, s.template.pattern(), s.file, s.line, s.function, s.condition, s.kind, s.error_class)


def _add(part: Part, seen: set[tuple], pattern: str, file: str, line: int, function: str, condition: str | None,
         kind: str, error_class: str | None) -> None:
    key = (pattern, file, function, kind, error_class or "", condition or "")
    if key in seen:  # the same message raised twice in one function under one condition: one site
        return
    seen.add(key)
    part.rows.append({"p": pattern, "f": file, "n": line, "fn": function, "c": condition, "k": kind, "e": error_class})


def _row_key(row: dict) -> tuple:
    return (row["p"], row["f"], row["fn"], row["k"], row["e"] or "", row["c"] or "")


# setuptools-scm's version module in an sdist built from a git tag: __commit_id__ = commit_id = 'g9da56fd18'
_SCM_COMMIT = re.compile(r"""^__commit_id__\s*=\s*commit_id\s*=\s*['"]g?([0-9a-f]{7,40})['"]""", re.M)


def scm_commit(text: str) -> str | None:
    """The commit a setuptools-scm ``_version.py`` names (vLLM's sdists carry one; its wheels do not)."""
    m = _SCM_COMMIT.search(text)
    return m.group(1) if m else None


def commit_of(archive: Path, library: str, version: str) -> str | None:
    """The release's commit: the archive's own record of it (a full sha in its version
    module), else a short hash in the version (vLLM dev wheels), else the committed
    tag-to-commit map (data/sites/tags.json), else None."""
    m = _VERSION_COMMIT.search(version)
    if archive.is_file() and archive.suffix == ".whl":
        try:
            prov = archive_provenance(archive)
        except (OSError, ValueError, KeyError, zipfile.BadZipFile):
            prov = None  # not a zip: read_release says so, with the file's name
        if prov is not None and prov.sha:
            return prov.sha
    if m:
        return m.group(1)
    if archive.is_file() and archive.name.endswith(".tar.gz"):
        found = _sdist_scm_commit(archive)
        if found:
            return found
    return tag_commits(library).get(version)


def _sdist_scm_commit(archive: Path) -> str | None:
    """The commit an sdist's top-level package's setuptools-scm ``_version.py`` names."""
    import tarfile

    try:
        with tarfile.open(archive) as tar:
            for member in tar:
                parts = member.name.split("/")
                if len(parts) == 3 and parts[2] == "_version.py" and member.isfile() and member.size < 100_000:
                    handle = tar.extractfile(member)
                    found = scm_commit(handle.read().decode("utf-8", "replace")) if handle else None
                    if found:
                        return found
    except (tarfile.TarError, OSError, EOFError):
        return None  # not a tar: read_release says so, with the file's name
    return None
