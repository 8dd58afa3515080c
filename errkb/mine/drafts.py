"""Draft records from a codebase's raise sites (``errkb mine``).

A draft is a schema-v2 record whose machine-derivable fields come from the code
(message, pattern, class, file, line, source window, GitHub link, commit) and whose
prose fields (documentation, solutions, ...) are left empty for a person to write.
Its ``tags`` contain ``"draft"``: the schema, lint, the site and explain tell drafts
from curated records by that tag.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TextIO

from errkb.errors import ErrkbError
from errkb.mine.raise_sites import RaiseSite, Scan, scan
from errkb.mine.sources import Provenance, SourceTree, package_path

DRAFT_TAG = "draft"
SLUG_LENGTH = 50  # the seed's slug is its message cut at 50 characters

_REPO = re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$")
_SHA = re.compile(r"^[0-9a-f]{40}$")

# A first guess at errorType from the class, for a person to confirm. The seed's
# ValueError on a bad configuration is "validation".
_ERROR_TYPES = {
    "ValueError": "validation",
    "TypeError": "validation",
    "AssertionError": "validation",
    "NotImplementedError": "unsupported",
    "ImportError": "dependency",
    "ModuleNotFoundError": "dependency",
    "FileNotFoundError": "io",
    "FileExistsError": "io",
    "IsADirectoryError": "io",
    "NotADirectoryError": "io",
    "PermissionError": "io",
    "OSError": "io",
    "IOError": "io",
    "KeyError": "lookup",
    "IndexError": "lookup",
    "LookupError": "lookup",
    "AttributeError": "lookup",
    "TimeoutError": "timeout",
    "ConnectionError": "network",
    "MemoryError": "resource",
}


class MineError(ErrkbError):
    """Mining cannot start: unknown repo or commit, bad flag, missing path."""

    def __init__(self, message: str, where: str | None = "errkb mine"):
        super().__init__(message, where)


@dataclass
class MineResult:
    records: list[dict]
    scan: Scan
    provenance: Provenance
    repo: str
    sha: str
    dataset_version: str
    # raise sites with a template whose draft lint refused, by lint code
    refused: Counter = field(default_factory=Counter)
    root: str = ""  # the folder (or archive) filePath is relative to

    def summary(self) -> dict:
        summary = self.scan.summary()
        summary.update(
            {
                "repo": self.repo,
                "analyzedSha": self.sha,
                "source": self.provenance.describe(),
                "records": len(self.records),
                "refused_by_lint": dict(self.refused.most_common()),
                "datasetVersion": self.dataset_version,
            }
        )
        return summary

    def write_jsonl(self, out: TextIO) -> None:
        """The dataset's wrapper form, one record a line."""
        for record in self.records:
            out.write(json.dumps({"record": record, "datasetVersion": self.dataset_version}, ensure_ascii=False))
            out.write("\n")


def mine(
    path: str | Path | None = None,
    *,
    package: str | None = None,
    repo: str | None = None,
    sha: str | None = None,
    path_prefix: str = "",
    now: datetime | None = None,
    lint: bool = True,
    progress=None,
) -> MineResult:
    """Draft records for every templatable raise site under ``path`` (or ``package``)."""
    if (path is None) == (package is None):
        raise MineError("give either a PATH or --package NAME")
    if package is not None:
        try:
            path = package_path(package)
        except LookupError as e:
            raise MineError(str(e)) from None
    try:
        tree = SourceTree.open(path)
    except FileNotFoundError as e:
        raise MineError(str(e)) from None
    provenance = tree.provenance()
    repo = repo or provenance.repo
    if repo is None:
        raise MineError(f"{path}: no GitHub repository named in its git remote or package metadata: pass --repo owner/name")
    if not _REPO.match(repo):
        raise MineError(f"--repo {repo!r}: expected owner/name as on GitHub")
    if sha is not None and provenance.sha is None:
        provenance.note = "commit given by --sha"
    elif sha is not None and sha != provenance.sha:
        provenance.note = f"commit given by --sha (the tree itself says {provenance.sha})"
    sha = sha or provenance.sha
    if sha is None:
        raise MineError(f"{path}: {provenance.describe()}")
    if not _SHA.match(sha):
        raise MineError(f"--sha {sha!r}: expected the full 40-hex-digit lowercase commit id")
    prefix = path_prefix.strip("/")
    prefix = prefix + "/" if prefix else ""

    stamp = dataset_timestamp(now)
    found = scan(tree, progress=progress)
    records = draft_records(found.templated, repo=repo, sha=sha, analyzed_at=stamp, path_prefix=prefix)
    refused: Counter = Counter()
    if lint:
        records, refused = _keep_lint_clean(records)
    root = str(tree.root if tree.root is not None else tree.path)
    return MineResult(records, found, provenance, repo, sha, stamp, refused, root)


def draft_records(sites: list[RaiseSite], *, repo: str, sha: str, analyzed_at: str, path_prefix: str = "") -> list[dict]:
    """One draft per templated site, with ids and slugs unique and stable."""
    sites = sorted(sites, key=lambda s: (s.file, s.line))
    keys = [(path_prefix + s.file, s.template.pattern()) for s in sites]
    per_key = Counter(keys)
    per_key_function = Counter((k, s.function) for k, s in zip(keys, sites))
    ordinal: Counter = Counter()
    used_slugs: set[str] = set()
    records = []
    for site, key in zip(sites, keys):
        # The id names the site, not its line: it survives edits elsewhere in the file.
        # Only a message raised more than once in a file needs the function (and then
        # its order) to tell the sites apart.
        identity = [repo, *key]
        if per_key[key] > 1:
            identity.append(site.function)
            if per_key_function[(key, site.function)] > 1:
                ordinal[(key, site.function)] += 1
                identity.append(str(ordinal[(key, site.function)]))
        rid = hashlib.sha256("\n".join(identity).encode("utf-8")).hexdigest()[:16]
        slug = unique_slug(slugify(site.template.render()), used_slugs)
        records.append(draft_record(site, rid=rid, slug=slug, repo=repo, sha=sha, analyzed_at=analyzed_at, path_prefix=path_prefix))
    return records


def draft_record(site: RaiseSite, *, rid: str, slug: str, repo: str, sha: str, analyzed_at: str, path_prefix: str = "") -> dict:
    assert site.template is not None and site.error_class is not None
    file_path = path_prefix + site.file
    return {
        "id": rid,
        "repo": repo,
        "slug": slug,
        "errorCode": None,
        "errorMessage": site.template.render(),
        "messagePattern": site.template.pattern(),
        "errorType": _ERROR_TYPES.get(site.error_class, "runtime"),
        "errorClass": site.error_class,
        "httpStatus": None,
        "severity": "error",
        "filePath": file_path,
        "lineNumber": site.line,
        "sourceCode": site.source_code,
        "sourceCodeStart": site.source_start,
        "sourceCodeEnd": site.source_end,
        "githubUrl": github_url(repo, sha, file_path, site.source_start, site.source_end),
        "documentation": "",
        "triggerScenarios": "",
        "commonSituations": "",
        "solutions": [],
        "exampleFix": None,
        "handlingStrategy": "",
        "validationCode": None,
        "typeGuard": None,
        "tryCatchPattern": None,
        "preventionTips": [],
        "tags": [DRAFT_TAG],
        "backgroundTag": None,
        "analyzedSha": sha,
        "analyzedAt": analyzed_at,
        "schemaVersion": 2,
    }


def github_url(repo: str, sha: str, file_path: str, start: int, end: int) -> str:
    return f"https://github.com/{repo}/blob/{sha}/{file_path}#L{start}-L{end}"


def slugify(message: str) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", message.lower()).strip("-")
    return slug[:SLUG_LENGTH].strip("-") or "error"


def unique_slug(slug: str, used: set[str]) -> str:
    candidate, n = slug, 1
    while candidate in used:
        n += 1
        candidate = f"{slug}-{n}"
    used.add(candidate)
    return candidate


def is_draft(record: dict) -> bool:
    return DRAFT_TAG in (record.get("tags") or [])


def dataset_timestamp(now: datetime | None) -> str:
    now = (now or datetime.now(UTC)).astimezone(UTC)
    return now.strftime("%Y-%m-%dT%H:%M:%S.") + f"{now.microsecond // 1000:03d}Z"


def _keep_lint_clean(records: list[dict]) -> tuple[list[dict], Counter]:
    """Drop drafts that ingest would reject, counting why (e.g. E202: the pattern
    does not match the rendered message)."""
    from errkb.records.lint import lint_record

    kept, refused = [], Counter()
    for record in records:
        errors = sorted({f.code for f in lint_record(record) if f.level == "error"})
        if errors:
            refused["lint " + "+".join(errors)] += 1
        else:
            kept.append(record)
    return kept, refused
