"""The static documentation site: one fix page per record, a searchable index,
tag and repo pages, a 404 page, sitemap.xml and records.json, built from the store.

A record's page is at ``errors/<owner>/<name>/<slug>.html``; where several records of
a repo share a slug (lint W402), that address lists them (``shared_slug.html``) and each
has its own page at ``errors/<owner>/<name>/<slug>/<id>.html``.

Everything is rendered from ``templates/site/`` with Jinja2 autoescaping on, so
record text (untrusted) is inert. Output is deterministic: no timestamps, every list
sorted, so a rebuild is byte-identical and ``--check`` can compare against disk.

Pages are produced by a generator of ``(relative path, bytes)`` so a 10k-record
build never holds the whole site in memory. All links are relative (the site can be
hosted under any path, or opened from ``file://``); the search data is split into
``search/*.js`` chunks that ``index.html`` loads with ``<script src>``, because
``fetch()`` does not work from ``file://`` and one inline index grew 2.5 kB a record.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote

from errkb.match.js_regex import JsPattern, js_pattern
from errkb.match.near import site_constants
from errkb.match.prefix import prefix_constants
from errkb.records.urls import fix_page_path, record_page_path, shared_slug_order
from errkb.resources import templates_dir
from errkb.site.code import Highlighter, language_of, split_example_fix
from errkb.site.output import MARKER, MARKER_TEXT, BuildReport, CheckReport, compare_site, write_site
from errkb.site.runs import run_rows
from errkb.site.search import search_chunks
from errkb.site.sites import site_files
from errkb.site.snippets import snippet_filename, snippet_text
from errkb.site.text import excerpt, script_json, visible_value

# The browser runs dataset regexes with a backtracking engine; these caps bound
# the text it is given (see static/site.js, which reads them from the page).
MAX_TEST_INPUT = 8000
MAX_TEST_LINE = 2000
# index.html lists this many records in its HTML (the first screen, and readers without
# scripts, who reach the rest through the repository and tag pages); site.js shows
# search results this many at a time.
INDEX_PAGE = 200

SEVERITY_ORDER = ("fatal", "critical", "error", "warning", "info")

# Fix pages (Pygments, Jinja2, pattern analysis: ~8 ms each) are rendered by a process
# pool from this many records on; below it, starting the pool costs more than it saves.
PARALLEL_MIN_RECORDS = 1000
PARALLEL_CHUNK = 100


# -- paths ------------------------------------------------------------------------


def _safe_relpath(path: str) -> str | None:
    """The on-disk relative path of a URL path, or None when it would leave the site
    (a repo named ``..`` is schema-valid)."""
    parts = unquote(path).split("/")
    if any(p in ("", ".", "..") or "\\" in p for p in parts):
        return None
    return "/".join(parts)


def tag_page_path(tag: str) -> str:
    """``tags/<tag>.html``; tags are free text, so anything but a plain lowercase word
    gets a slug plus a hash of the exact tag (distinct tags never share a page)."""
    # A plain tag never ends like a hashed one ("-" + 10 hex digits), so the two kinds
    # of names cannot collide.
    if re.fullmatch(r"[a-z0-9][a-z0-9._-]{0,79}", tag) and not tag.endswith(".") and not re.search(r"-[0-9a-f]{10}$", tag):
        return f"tags/{tag}.html"
    slug = re.sub(r"[^a-z0-9]+", "-", tag.lower()).strip("-")[:60] or "tag"
    return f"tags/{slug}-{hashlib.sha256(tag.encode('utf-8', 'surrogatepass')).hexdigest()[:10]}.html"


def repo_page_path(repo: str) -> str:
    owner, name = repo.split("/", 1)
    return f"repos/{owner}/{name}.html"


def root_of(path: str) -> str:
    """The relative prefix from a page back to the site root ("" or "../..")."""
    return "../" * path.count("/")


def _env():
    from jinja2 import Environment, FileSystemLoader, StrictUndefined

    env = Environment(
        loader=FileSystemLoader(str(templates_dir() / "site")),
        autoescape=True,  # every template, .xml included: record text is untrusted
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        finalize=visible_value,
    )
    env.filters["script_json"] = script_json
    env.filters["tag_path"] = tag_page_path
    env.filters["repo_path"] = repo_page_path
    env.globals["excerpt"] = excerpt
    return env


def _static_files() -> Iterator[tuple[str, bytes]]:
    static = templates_dir() / "site" / "static"
    for f in sorted(static.rglob("*")):
        if f.is_file():
            yield "static/" + f.relative_to(static).as_posix(), f.read_bytes()
    yield "static/pygments.css", Highlighter.css().encode()


@dataclass
class _Entry:
    """What the index, tag and repo pages need of one record."""

    record: dict
    path: str
    status: str  # "curated" | "draft" | "findings"
    findings: list[dict]
    snippet: str | None
    js: JsPattern | None = None  # set when its page is rendered
    proof: dict | None = None  # the committed proof (data/proofs/<id>.json), if any
    proof_status: str = "unproven"  # proven on CPU | proven on GPU | out of date | GPU-only | unproven
    proof_findings: tuple = ()  # where the proof's observed error is not the record's (records.proofs)
    errkb_findings: dict | None = None  # data/findings/<id>.json: errkb's own findings on a kept-as-ingested record
    variants: list | None = None  # data/variants/<id>.json: other releases' wordings of its raise site (errkb.mine.variants)
    # the variants the matcher indexes (errkb.records.variants.variant_entries: linted again), for the paste box
    matched_variants: list | None = None
    # where several records share its (repo, slug): the path of the page listing them, and how many
    shared: str | None = None
    shared_count: int = 0


def _status(record: dict, findings: list[dict]) -> str:
    if "draft" in record["tags"]:
        return "draft"
    return "findings" if findings else "curated"


class _FixPages:
    """Renders one record's fix page and snippet; one per process (Jinja2 and Pygments
    objects are reused across records)."""

    def __init__(self) -> None:
        self.env = _env()
        self.hl = Highlighter()
        self.template = self.env.get_template("fix.html")

    def render(self, e: _Entry, runs: list[dict], common: dict) -> tuple[bytes, bytes | None, JsPattern]:
        rec, hl = e.record, self.hl
        e.js = js_pattern(rec["messagePattern"])
        fix_blocks = []
        if rec.get("exampleFix"):
            for label, code in split_example_fix(rec["exampleFix"]):
                fix_blocks.append(hl.block(code, language_of(code), label))
        extra_code = [
            (title, hl.block(rec[key], language_of(rec[key])))
            for key, title in (("typeGuard", "Type guard"), ("tryCatchPattern", "Handling it in code"))
            if rec.get(key)
        ]
        page = self.template.render(
            root=root_of(e.path), e=e, r=rec,
            source=hl.source(rec["sourceCode"], rec["sourceCodeStart"], rec["lineNumber"], rec["filePath"]),
            fix_blocks=fix_blocks,
            fix_paired=any(b.label.startswith("Before") for b in fix_blocks) and any(b.label.startswith("After") for b in fix_blocks),
            validation=hl.block(rec["validationCode"], "python") if rec.get("validationCode") else None,
            extra_code=extra_code,
            runs=run_rows(runs),
            tester={"source": e.js.source, "plan": e.js.plan, "literals": e.js.literals, "ascii_only": e.js.ascii_only,
                    "max_input": MAX_TEST_INPUT, "max_line": MAX_TEST_LINE},
            **common,
        ).encode()
        snippet = snippet_text(rec).encode() if e.snippet else None
        return page, snippet, e.js


_WORKER_PAGES: _FixPages | None = None


def _render_chunk(chunk: list[tuple[_Entry, list[dict], dict]]) -> list[tuple[bytes, bytes | None, JsPattern]]:
    global _WORKER_PAGES
    if _WORKER_PAGES is None:
        _WORKER_PAGES = _FixPages()
    return [_WORKER_PAGES.render(e, runs, common) for e, runs, common in chunk]


def default_workers(total: int) -> int:
    if total < PARALLEL_MIN_RECORDS:
        return 1
    return max(1, min(os.cpu_count() or 1, 8))


def _rendered_fix_pages(entries, runs_by_id, common, workers: int) -> Iterator[tuple[bytes, bytes | None, JsPattern]]:
    """Each entry's (page, snippet, JsPattern), in entry order, from ``workers`` processes."""
    jobs = [(e, runs_by_id.get(e.record["id"], []), common) for e in entries]
    if workers <= 1:
        yield from _render_chunk(jobs)
        return
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    chunks = [jobs[i:i + PARALLEL_CHUNK] for i in range(0, len(jobs), PARALLEL_CHUNK)]
    # spawn, not fork: the parent holds a DuckDB connection and its threads.
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        for results in pool.map(_render_chunk, chunks):
            yield from results


def render_site(store, base_url: str | None = None, progress: Callable[[int, int], None] | None = None,
                warnings: list[str] | None = None, workers: int | None = 1) -> Iterator[tuple[str, bytes]]:
    """Yield every file of the site as ``(relative path, content)``, in a fixed order.

    Fix pages are rendered by ``workers`` processes; ``None`` means one per core for
    large datasets (the CLI's choice). The output does not depend on how many. Worker
    processes are spawned, so a calling script needs the usual
    ``if __name__ == "__main__":`` guard, as with any spawn-based multiprocessing."""
    from errkb.kb import KnowledgeBase
    from errkb.records.variants import VariantsError

    warnings = warnings if warnings is not None else []
    env = _env()
    # The records and the variants the search matches come from the compiled view, as
    # explain's do; findings, runs and the dataset version are the store's own tables.
    kb = KnowledgeBase.from_store(store)
    records = list(kb.records())
    findings_by_id: dict[str, list[dict]] = {}
    for f in store.findings():
        findings_by_id.setdefault(f["record_id"], []).append(
            {"code": f["code"], "name": f["name"], "level": f["level"], "message": f["message"]}
        )
    runs_by_id: dict[str, list[dict]] = {}
    for r in store.runs():
        runs_by_id.setdefault(r["record_id"], []).append(r)
    base = base_url.rstrip("/") + "/" if base_url else None
    dataset_version = store.dataset_version()

    from errkb.records.proofs import all_proofs, coverage, load_findings, mutation_score, observed_findings, status_of

    proofs = all_proofs()
    from errkb.records.variants import bundled_folder, read_folder

    variants_folder = bundled_folder()
    variants = read_folder(variants_folder) if variants_folder is not None else {}
    try:
        # the same pseudo-records `errkb explain` matches (and the same folder: $ERRKB_VARIANTS_DIR or bundled)
        indexed_variants = kb.variant_entries()
    except VariantsError as e:
        warnings.append(f"variants left out of the paste box: {e}")
        indexed_variants = []
    variants_by_id: dict[str, list[dict]] = {}
    for v in indexed_variants:
        variants_by_id.setdefault(str(v["id"]), []).append(v)
    entries: list[_Entry] = []
    sharing: dict[tuple[str, str], int] = {}
    for rec in records:
        sharing[(rec["repo"], rec["slug"])] = sharing.get((rec["repo"], rec["slug"]), 0) + 1
    for rec in records:
        path = _safe_relpath(fix_page_path(rec["repo"], rec["slug"]))
        if path is None or _safe_relpath(repo_page_path(rec["repo"])) is None:
            warnings.append(f"record {rec['id']}: repo {rec['repo']!r} does not make a path inside the site; left out")
            continue
        shared, count = None, sharing[(rec["repo"], rec["slug"])]
        if count > 1:
            # one message raised at several sites: the (repo, slug) page lists them
            shared, path = path, _safe_relpath(record_page_path(rec["repo"], rec["slug"], rec["id"]))
            if path is None:
                warnings.append(f"record {rec['id']}: its id does not make a path inside the site; left out")
                continue
        found = sorted(findings_by_id.get(rec["id"], []), key=lambda f: (f["code"], f["message"]))
        entries.append(_Entry(
            record=rec, path=path, status=_status(rec, found), findings=found,
            snippet=f"snippets/{snippet_filename(rec)}" if rec.get("validationCode") else None,
            proof=proofs.get(rec["id"]), proof_status=status_of(rec, proofs.get(rec["id"])),
            proof_findings=tuple(observed_findings(proofs.get(rec["id"]), rec)),
            errkb_findings=load_findings(rec["id"]),
            variants=(variants.get(rec["id"]) or {}).get("variants") or [],
            matched_variants=variants_by_id.get(str(rec["id"]), []),
            shared=shared, shared_count=count if shared else 0,
        ))

    yield MARKER, MARKER_TEXT.encode()
    yield from _static_files()

    tags: dict[str, list[_Entry]] = {}
    repos: dict[str, list[_Entry]] = {}
    for e in entries:
        for t in e.record["tags"]:
            tags.setdefault(t, []).append(e)
        repos.setdefault(e.record["repo"], []).append(e)
    tag_names = sorted(tags)
    repo_names = sorted(repos)
    common = {"dataset_version": dataset_version, "record_count": len(entries),
              "proof_coverage": coverage([e.record for e in entries]),
              "mutation_score": mutation_score([e.record for e in entries])}

    total = len(entries)
    workers = default_workers(total) if workers is None else workers
    for n, (e, (page, snippet, js)) in enumerate(zip(entries, _rendered_fix_pages(entries, runs_by_id, common, workers)), 1):
        e.js = js
        yield e.path, page
        if snippet is not None:
            yield e.snippet, snippet
        if progress is not None:
            progress(n, total)

    shared_pages = _shared_slug_groups(entries)
    shared_tpl = env.get_template("shared_slug.html")
    for path, group in shared_pages:
        first = group[0].record
        yield path, shared_tpl.render(root=root_of(path), repo=first["repo"], slug=first["slug"], entries=group,
                                      **common).encode()

    tag_tpl = env.get_template("tag.html")
    for t in tag_names:
        path = tag_page_path(t)
        yield path, tag_tpl.render(root=root_of(path), tag=t, entries=tags[t], **common).encode()
    repo_tpl = env.get_template("repo.html")
    for repo in repo_names:
        path = repo_page_path(repo)
        yield path, repo_tpl.render(root=root_of(path), repo=repo, entries=repos[repo], **common).encode()

    yield from _render_index(env, entries, tag_names, repo_names, common)
    yield "404.html", env.get_template("404.html").render(root="", base=base, **common).encode()

    pages = ["index.html"] + [e.path for e in entries] + [p for p, _ in shared_pages] + [
        tag_page_path(t) for t in tag_names] + [repo_page_path(r) for r in repo_names]
    yield "sitemap.xml", env.get_template("sitemap.xml").render(base=base or "", pages=pages).encode()
    yield "records.json", (json.dumps([e.record for e in entries], ensure_ascii=False, indent=1) + "\n").encode()


def _shared_slug_groups(entries: list[_Entry]) -> list[tuple[str, list[_Entry]]]:
    """``(list page path, its records in site order)`` for each slug several records share,
    ordered by path."""
    groups: dict[str, list[_Entry]] = {}
    for e in entries:
        if e.shared:
            groups.setdefault(e.shared, []).append(e)
    return [(path, sorted(groups[path], key=lambda e: shared_slug_order(e.record))) for path in sorted(groups)]


def _render_index(env, entries: list[_Entry], tag_names, repo_names, common) -> Iterator[tuple[str, bytes]]:
    """The search chunks, the known-site shards, then index.html: the filters, the first
    INDEX_PAGE records and a small manifest naming the chunks and the sites' head."""
    chunks = search_chunks(entries)
    for path, content, _ in chunks:
        yield path, content
    # the known-site tier (errkb.site.sites): loaded by the paste box only when no record matched
    sites_head, sites = site_files()
    yield from sites
    manifest = {"sites": sites_head, "chunks": [{"src": path, "n": n} for path, _, n in chunks], "total": len(entries), "page": INDEX_PAGE,
                "max_input": MAX_TEST_INPUT, "max_line": MAX_TEST_LINE, "near": site_constants(),
                "prefix": prefix_constants()}
    page = env.get_template("index.html").render(
        root="", entries=entries[:INDEX_PAGE], tag_names=tag_names, repo_names=repo_names, page_size=INDEX_PAGE,
        classes=sorted({e.record["errorClass"] for e in entries}),
        severities=[s for s in SEVERITY_ORDER if any(e.record["severity"] == s for e in entries)],
        search_data=manifest, **common,
    )
    yield "index.html", page.encode()


# -- writing and checking ------------------------------------------------------------


def build_site(store, out: Path, base_url: str | None = None,
               progress: Callable[[int, int], None] | None = None, workers: int | None = 1) -> BuildReport:
    """Write the site into ``out``: changed files only, stale ones removed."""
    report = BuildReport(out=Path(out))
    return write_site(report, render_site(store, base_url, progress, report.warnings, workers))


def check_site(store, out: Path, base_url: str | None = None, workers: int | None = 1) -> CheckReport:
    """Compare ``out`` with a fresh build, file by file, without writing anything."""
    report = CheckReport(out=Path(out))
    return compare_site(report, render_site(store, base_url, None, report.warnings, workers))
