"""The site where several records of a repo share a slug (one message raised at several
sites, lint W402): the (repo, slug) address lists them, each has its own page one level
down, and every page, list and index of the site links each record to its own page."""

from __future__ import annotations

import json
import re
from pathlib import Path
from posixpath import dirname, normpath
from urllib.parse import unquote

import pytest
from click.testing import CliRunner

from errkb.cli import cli
from errkb.records.urls import fix_page_path, record_page_path
from errkb.site.build import root_of
from tests.support import HOSTILE, SEED_ID, SEED_PAGE, hostile_record, make_store, raised_elsewhere


@pytest.fixture
def shared(seed_record, make_variant) -> dict:
    hostile = hostile_record(seed_record)
    return {
        "seed": [seed_record, raised_elsewhere(seed_record, "vllm/z.py"), raised_elsewhere(seed_record, "vllm/a.py")],
        "hostile": [hostile, raised_elsewhere(hostile, "vllm/b.py")],
        "alone": make_variant(1),
    }


@pytest.fixture
def site(tmp_path, shared) -> Path:
    records = shared["seed"] + shared["hostile"] + [shared["alone"]]
    db = make_store(tmp_path / "s.duckdb", records)
    out = tmp_path / "site"
    result = CliRunner().invoke(cli, ["site", "build", "--db", str(db), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "(6 fix pages)" in result.output  # the two list pages are not fix pages
    return out


def own_page(record: dict) -> str:
    return record_page_path(record["repo"], record["slug"], record["id"])


def test_the_slug_address_lists_the_records_each_with_its_own_page(site, shared):
    seed, z, a = shared["seed"]
    assert not (site / SEED_PAGE).read_text().count('data-record-id="')  # a list, not a fix page
    listing = (site / SEED_PAGE).read_text()
    root = root_of(SEED_PAGE)
    # in raise-site order (file, line, id), each with an anchor and a link to its page
    items = re.findall(r'<li class="record" id="([0-9a-f]{16})">\s*<a class="record-link" href="([^"]+)"', listing)
    assert items == [(r["id"], root + own_page(r)) for r in (a, seed, z)]
    for r in (a, seed, z):
        assert f'<code class="path">{r["filePath"]}:{r["lineNumber"]}</code>' in listing
    assert "<code class=\"cls\">ValueError</code>" in listing
    assert '<span class="badge">proven on CPU</span>' in listing and '<span class="badge">unproven</span>' in listing
    assert f'<link rel="stylesheet" href="{root}static/style.css">' in listing  # the site's layout
    for r in (seed, z, a):
        page = (site / own_page(r)).read_text()
        assert f'data-record-id="{r["id"]}"' in page
        # one folder deeper than a fix page: its links still reach the site's root
        assert '<link rel="stylesheet" href="../../../../static/style.css">' in page
        assert f'<a href="../../../../{SEED_PAGE}#{r["id"]}">3 sites of this message</a>' in page


def test_a_record_alone_on_its_slug_keeps_its_page_and_gets_no_list(site, shared):
    alone = shared["alone"]
    page = (site / fix_page_path(alone["repo"], alone["slug"])).read_text()
    assert f'data-record-id="{alone["id"]}"' in page
    assert "sites of this message" not in page
    assert not (site / fix_page_path(alone["repo"], alone["slug"])[:-5]).exists()


def test_a_hostile_message_is_escaped_on_the_list_page(site, shared):
    hostile = shared["hostile"][0]
    listing = (site / fix_page_path(hostile["repo"], hostile["slug"])).read_text()
    assert "<script>window.__pwned" not in listing and "<img" not in listing
    assert "&lt;script&gt;window.__pwned=1&lt;/script&gt;" in listing
    assert HOSTILE not in listing


def test_every_list_and_index_links_each_record_to_its_own_page(site, shared):
    records = shared["seed"] + shared["hostile"] + [shared["alone"]]
    own = {r["id"]: own_page(r) for r in records[:5]} | {records[5]["id"]: fix_page_path(records[5]["repo"], records[5]["slug"])}
    tagged = {r["id"] for r in records if "distributed" in r["tags"]}
    assert len(tagged) == 4
    for page, ids in (("index.html", own), ("repos/vllm-project/vllm.html", own), ("tags/distributed.html", tagged)):
        html = (site / page).read_text()
        for rid in ids:
            assert f'href="{root_of(page)}{own[rid]}"' in html, (page, rid)
    chunks = [json.loads(re.search(r"errkbSearchChunk\(\d+,(.*)\);\n", p.read_text()).group(1))
              for p in sorted((site / "search").glob("*.js"))]
    assert {r["id"]: r["u"] for c in chunks for r in c["records"]} == own
    sitemap = (site / "sitemap.xml").read_text()
    for path in [*own.values(), SEED_PAGE, fix_page_path(records[3]["repo"], records[3]["slug"])]:
        assert f"<loc>{path}</loc>" in sitemap
    assert sorted(r["id"] for r in json.loads((site / "records.json").read_text())) == sorted(own)


def test_every_relative_link_of_every_page_reaches_a_file(site):
    checked = 0
    for page in site.rglob("*.html"):
        rel = page.relative_to(site).as_posix()
        # links of real tags (record text, escaped, holds no "<a ")
        for link in re.findall(r'<(?:a|link|script)\s[^>]*?\b(?:href|src)="([^"#]+)(?:#[^"]*)?"', page.read_text()):
            if "://" in link or link.startswith(("mailto:", "data:")):
                continue
            target = normpath(unquote(f"{dirname(rel)}/{link}" if dirname(rel) else link))
            assert (site / target).is_file(), (rel, link)
            checked += 1
    assert checked > 200


def test_the_seed_record_page_moves_only_when_its_slug_is_shared(tmp_path, seed_record):
    alone = make_store(tmp_path / "one.duckdb", [seed_record])
    out = tmp_path / "one"
    assert CliRunner().invoke(cli, ["site", "build", "--db", str(alone), "--out", str(out)]).exit_code == 0
    assert f'data-record-id="{SEED_ID}"' in (out / SEED_PAGE).read_text()
    assert not (out / SEED_PAGE[:-5]).exists()
