"""Draft one record from one raise site (``errkb new FILE:LINE``).

Writing a record from scratch means 31 keys, most of which the code already knows:
the message and a pattern for it, the class, the file, the line, the source window,
the GitHub link, the commit. This fills those the way ``errkb mine`` does for a whole
codebase and leaves the prose (why, when, how to fix) empty for a person, with the
"draft" tag until they have written it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from errkb.mine.drafts import DRAFT_TAG, MineError, dataset_timestamp, draft_records
from errkb.mine.raise_sites import RaiseSite, sites_in_source
from errkb.mine.sources import Provenance, SourceTree, git_toplevel, package_path

_LOCATION = re.compile(r"^(?P<file>.+?):(?P<line>[1-9][0-9]{0,8})$")
_REPO = re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$")
_SHA = re.compile(r"^[0-9a-f]{40}$")

# What a person still has to write before the record stops being a draft.
PROSE_FIELDS = ("documentation", "triggerScenarios", "commonSituations", "solutions", "handlingStrategy")
OPTIONAL_FIELDS = ("exampleFix", "validationCode", "preventionTips")


class NewError(MineError):
    def __init__(self, message: str):
        super().__init__(message, "errkb new")


@dataclass
class NewRecord:
    record: dict
    site: RaiseSite
    provenance: Provenance
    dataset_version: str
    to_write: list[str] = field(default_factory=lambda: list(PROSE_FIELDS))

    def wrapper(self) -> dict:
        return {"record": self.record, "datasetVersion": self.dataset_version}


def resolve(location: str) -> tuple[Path, int]:
    """``FILE:LINE`` -> (an existing .py file, line). FILE is a path, or a path inside an
    installed package (``vllm/config.py:221`` finds vllm's installed copy)."""
    m = _LOCATION.match(location)
    if m is None:
        raise NewError(f"{location!r}: expected FILE:LINE (e.g. vllm/config.py:221)")
    file, line = Path(m.group("file")), int(m.group("line"))
    if file.is_file():
        return file, line
    if not file.is_absolute() and file.parts:
        try:
            top = package_path(file.parts[0].removesuffix(".py"))
        except LookupError:
            top = None
        if top is not None:
            candidate = top.joinpath(*file.parts[1:]) if top.is_dir() else top
            if candidate.is_file():
                return candidate, line
    raise NewError(f"{file}: no such file, here or in an installed package")


def _tree_for(file: Path) -> SourceTree:
    """The tree a file's path is relative to: its git checkout, else its package root."""
    top = git_toplevel(file.parent)
    if top is not None:
        return SourceTree(file, top, archive=False)
    return SourceTree.open(file)


def new_record(
    location: str,
    *,
    repo: str | None = None,
    sha: str | None = None,
    path_prefix: str = "",
    now: datetime | None = None,
) -> NewRecord:
    file, line = resolve(location)
    tree = _tree_for(file)
    rel = file.resolve().relative_to(tree.root.resolve()).as_posix() if tree.root else file.name
    text = tree.read_text(rel)
    if text is None:
        raise NewError(f"{file}: cannot read")
    try:
        sites = sites_in_source(text, rel)
    except (SyntaxError, ValueError) as e:
        raise NewError(f"{file}: does not parse as Python: {e}") from None
    n_lines = len(text.splitlines())
    if line > n_lines:
        raise NewError(f"{file}:{line}: the file has {n_lines} lines")
    site = next((s for s in sites if s.line <= line <= s.end_line), None)
    if site is None:
        near = sorted(sites, key=lambda s: abs(s.line - line))[:3]
        hint = ("; raises nearby at lines " + ", ".join(str(s.line) for s in sorted(near, key=lambda s: s.line))) if near else ""
        raise NewError(f"{file}:{line}: no raise statement covers this line{hint}")
    if site.template is None:
        raise NewError(f"{file}:{line}: raises {site.error_class or 'an exception'} but no pattern can be derived: {site.reason}")

    provenance = tree.provenance()
    repo = repo or provenance.repo
    if repo is None:
        raise NewError(f"{file}: no GitHub repository named in its git remote or package metadata: pass --repo owner/name")
    if not _REPO.match(repo):
        raise NewError(f"--repo {repo!r}: expected owner/name as on GitHub")
    if sha is not None and sha != provenance.sha:
        provenance.note = "commit given by --sha" + (f" (the tree itself says {provenance.sha})" if provenance.sha else "")
    sha = sha or provenance.sha
    if sha is None:
        raise NewError(f"{file}: {provenance.describe()}")
    if not _SHA.match(sha):
        raise NewError(f"--sha {sha!r}: expected the full 40-hex-digit lowercase commit id")
    prefix = path_prefix.strip("/")
    stamp = dataset_timestamp(now)
    [record] = draft_records([site], repo=repo, sha=sha, analyzed_at=stamp, path_prefix=prefix + "/" if prefix else "")
    assert DRAFT_TAG in record["tags"]
    return NewRecord(record, site, provenance, stamp)
