"""The static site: build from the store, determinism, --check, fix-page content,
untrusted text, drafts and findings, records.json, sitemap, JS pattern translation.

The hostile, draft and lookahead records come from tests/support.py (shared with
test_snippets.py and test_site_browser.py): every one is schema-valid and passes the
error-level lint rules, so it really reaches the store (only such records reach the site).
"""


from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from markupsafe import escape

from errkb.cli import cli
from errkb.match.js_regex import js_pattern, re2_to_js
from errkb.site.build import _safe_relpath, tag_page_path
from errkb.site.code import split_example_fix
from errkb.site.text import script_json, visible_value
from errkb.store.db import Store
from tests.support import SEED_ID, SEED_PAGE, draft_record, hostile_record, lookahead_record, make_store


@pytest.fixture
def site_store(tmp_path, seed_record, make_variant) -> Path:
    records = [seed_record, make_variant(1), make_variant(2), hostile_record(seed_record),
               draft_record(seed_record), lookahead_record(seed_record)]
    return make_store(tmp_path / "site.duckdb", records)


def build(db: Path, out: Path, *args: str):
    return CliRunner().invoke(cli, ["site", "build", "--db", str(db), "--out", str(out), *args])


def files_of(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_build_writes_every_page_and_is_byte_identical(site_store, tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    result = build(site_store, a)
    assert result.exit_code == 0, result.output
    assert "6 fix pages" in result.output
    assert build(site_store, b).exit_code == 0
    fa, fb = files_of(a), files_of(b)
    assert fa == fb
    for name in ("index.html", "404.html", "sitemap.xml", "records.json", "static/style.css", "static/site.js",
                 "static/pygments.css", SEED_PAGE, f"snippets/{SEED_ID}.py", "repos/vllm-project/vllm.html",
                 "tags/distributed.html", "tags/hostile.html"):
        assert name in fa, name
    # A rebuild into the same folder rewrites nothing.
    again = build(site_store, a, "--json")
    assert json.loads(again.output)["written"] == []
    # Nothing machine-dependent leaks into the output.
    for name, content in fa.items():
        assert str(tmp_path).encode() not in content, name


def test_check_names_stale_missing_and_extra_files(site_store, tmp_path):
    out = tmp_path / "site"
    assert build(site_store, out).exit_code == 0
    fresh = build(site_store, out, "--check")
    assert fresh.exit_code == 0
    assert "up to date" in fresh.output
    (out / "index.html").write_text("old")
    (out / "sitemap.xml").unlink()
    (out / "errors" / "left-over.html").write_text("x")
    stale = build(site_store, out, "--check")
    assert stale.exit_code == 1
    lines = stale.output.splitlines()
    assert f"stale: {out / 'index.html'}" in lines
    assert f"missing: {out / 'sitemap.xml'}" in lines
    assert f"extra: {out / 'errors' / 'left-over.html'}" in lines
    # A build repairs all three.
    assert build(site_store, out).exit_code == 0
    assert not (out / "errors" / "left-over.html").exists()
    assert build(site_store, out, "--check").exit_code == 0


def test_build_refuses_a_folder_that_is_not_a_site(site_store, tmp_path):
    out = tmp_path / "home"
    out.mkdir()
    (out / "precious.txt").write_text("keep me")
    result = build(site_store, out)
    assert result.exit_code == 2
    assert result.output.strip() == (
        f"Error: {out}: folder is not empty and is not an errkb site (no .errkb-site file); choose another --out"
    )
    assert (out / "precious.txt").read_text() == "keep me"


def test_build_of_a_missing_store_is_a_usage_error(tmp_path):
    result = build(tmp_path / "nope.duckdb", tmp_path / "site")
    assert result.exit_code == 2
    assert "no such store" in result.output


def test_fix_page_shows_the_whole_record(site_store, tmp_path, seed_record):
    out = tmp_path / "site"
    build(site_store, out)
    page = (out / SEED_PAGE).read_text()
    assert '<h1 class="message" id="message">Flashinfer allreduce quantization fusion is not supported' in page
    assert "<code class=\"path\">vllm/distributed/device_communicators/flashinfer_all_reduce.py:221</code>" in page
    # The raise line is the highlighted one, with its real line number.
    hll = re.findall(r'<span class="hll"><span class="linenos">\s*(\d+)</span>(.*?)\n', page)
    assert len(hll) == 1 and hll[0][0] == "221" and "raise" in hll[0][1]
    assert f'href="{seed_record["githubUrl"]}"' in page
    assert "c794754062d4" in page
    for text in (seed_record["documentation"], seed_record["triggerScenarios"], seed_record["commonSituations"]):
        assert str(escape(text)) in page
    for s in seed_record["solutions"] + seed_record["preventionTips"]:
        assert f"<li>{escape(s)}</li>" in page
    # Before/after shown as two labelled parts.
    assert '<figure class="fix-part before">' in page and '<figure class="fix-part after">' in page
    assert "<figcaption>Before</figcaption>" in page and "<figcaption>After</figcaption>" in page
    assert f'href="../../../snippets/{SEED_ID}.py" download' in page
    assert page.count('class="copy"') == 5  # source, before, after, validation, pattern
    assert 'href="../../../tags/multi-node.html"' in page
    assert 'href="../../../static/style.css"' in page
    assert 'Test a log line against this pattern' in page
    assert "Verification" not in page  # no runs stored yet


def test_fix_page_shows_verification_runs_from_the_store(site_store, tmp_path):
    with Store.open(site_store) as store:
        store.add_run({"record_id": SEED_ID, "record_hash": "h", "tier": "sandbox", "check": "validation",
                       "runner": {"host": "ci-runner-1", "python": "3.11.7", "gpu": None},
                       "started_at": "2026-12-01T10:00:00+00:00", "duration_s": 1.25, "outcome": "skipped",
                       "reason": "needs vllm"})
    out = tmp_path / "site"
    build(site_store, out)
    page = (out / SEED_PAGE).read_text()
    assert '<h2 id="verify-h">Verification</h2>' in page
    assert '<td class="outcome"><span class="badge outcome-skipped">skipped</span></td>' in page
    assert '<td class="reason">needs vllm</td>' in page
    assert '<time datetime="2026-12-01T10:00:00+00:00">2026-12-01 10:00 UTC</time>' in page
    assert "<summary>Python 3.11.7 · CPU</summary>" in page
    assert "host: ci-runner-1" in page and "1.2 s" in page


def test_untrusted_text_is_escaped_everywhere(site_store, tmp_path):
    out = tmp_path / "site"
    build(site_store, out)
    for name, content in files_of(out).items():
        if not name.endswith((".html", ".xml")):
            continue
        text = content.decode()
        # No tag from record text survives as markup.
        assert "<script>window" not in text, name
        assert "<img src=x" not in text, name
        assert '<a href="javascript:' not in text, name
    hostile = next(n for n in files_of(out) if n.startswith("errors/") and "hostile" in n)
    page = (out / hostile).read_text()
    assert "&lt;script&gt;window.__pwned=1&lt;/script&gt;" in page
    assert "{{ 7*7 }}{% raw %}" in page
    # Inline JSON cannot close its <script> element.
    for block in re.findall(r'<script type="application/json"[^>]*>(.*?)</script>', page + (out / "index.html").read_text(), re.S):
        assert "<" not in block and "\u2028" not in block
        json.loads(block)


CONTROLS = "nul\x00 esc\x1b[2J bell\x07 del\x7f c1\x85 rlo\u202e evil\u202c"


def test_control_characters_in_record_text_are_shown_not_emitted(tmp_path, seed_record):
    """HTML escaping leaves control characters: a NUL and an ESC went into the page as
    they were, and U+202E could reorder a line of code. They are shown as escapes, as in
    the terminal; the tester's inline JSON still parses to the record's own text."""
    rec = {**seed_record, "errorMessage": seed_record["errorMessage"] + " " + CONTROLS,
           "messagePattern": seed_record["messagePattern"] + " .*",
           "documentation": "Doc " + CONTROLS, "solutions": ["Fix " + CONTROLS],
           "exampleFix": "x = 1\r\ny = '" + CONTROLS + "'\r\n", "sourceCode": seed_record["sourceCode"] + "  # " + CONTROLS}
    db = make_store(tmp_path / "s.duckdb", [rec])
    out = tmp_path / "site"
    assert build(db, out).exit_code == 0
    unsafe = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e]")
    for name, content in files_of(out).items():
        if name.endswith((".html", ".xml")):
            assert not unsafe.search(content.decode()), (name, unsafe.search(content.decode()))
    page = (out / SEED_PAGE).read_text()
    assert "Doc nul\\x00 esc\\x1b[2J bell\\x07 del\\x7f c1\\x85 rlo\\u202e evil\\u202c" in page
    [block] = re.findall(r'<script type="application/json" class="tester-data">(.*?)</script>', page, re.S)
    json.loads(block)
    # inline JSON holds such characters as JSON escapes: the same text, nothing to rewrite
    inline = script_json({"text": CONTROLS})
    assert not unsafe.search(inline) and json.loads(inline) == {"text": CONTROLS}
    assert visible_value(inline) == inline


def test_hostile_tags_get_their_own_safe_pages(site_store, tmp_path):
    out = tmp_path / "site"
    build(site_store, out)
    tags = sorted(p.name for p in (out / "tags").iterdir())
    assert all(re.fullmatch(r"[a-z0-9._-]+\.html", t) for t in tags), tags
    page = (out / tag_page_path("<script>window.__pwned=7</script>")).read_text()
    assert "Errors tagged <span class=\"tag\">&lt;script&gt;window.__pwned=7&lt;/script&gt;</span>" in page
    assert tag_page_path("Draft") != tag_page_path("draft")
    hashed = tag_page_path("<b>")
    assert hashed.startswith("tags/b-") and tag_page_path(hashed[len("tags/"):-len(".html")]) != hashed


def test_drafts_and_findings_are_flagged_not_shown_as_curated(site_store, tmp_path):
    out = tmp_path / "site"
    build(site_store, out)
    draft = (out / "errors/vllm-project/vllm/draft-flashinfer-allreduce-quantization-fusion-is-not-su.html").read_text()
    assert "<strong>Draft.</strong> This record was mined from the source code and has not been curated" in draft
    assert "How to fix it" not in draft and "Download the snippet" not in draft
    warned = (out / "errors/vllm-project/vllm/lookahead-flashinfer-allreduce-quantization-fusion-is-not-su.html").read_text()
    assert "<strong>Lint findings.</strong>" in warned
    assert "<code>W204</code> pattern-needs-backtracking (warning): messagePattern needs a backtracking engine (lookahead)" in warned
    assert "This pattern cannot be run exactly in the browser (needs backtracking: lookahead)" in warned
    seed = (out / SEED_PAGE).read_text()
    assert "notice-draft" not in seed and "notice-findings" not in seed
    index = (out / "index.html").read_text()
    assert index.count('<span class="badge status-draft">draft, not curated</span>') == 1
    # The lookahead record (W204) and the hostile one, whose validation asserts a string it wrote itself (W501).
    assert index.count('<span class="badge status-findings">lint findings</span>') == 2


def test_records_json_round_trips_through_ingest(site_store, tmp_path):
    out = tmp_path / "site"
    build(site_store, out)
    exported = json.loads((out / "records.json").read_text())
    assert [r["id"] for r in exported] == [r["id"] for r in Store.open(site_store, read_only=True).records()]
    with Store.open(tmp_path / "copy.duckdb") as copy_store:
        report = copy_store.ingest([out / "records.json"])
        assert (report.new, report.rejected) == (6, 0)
        with Store.open(site_store, read_only=True) as original:
            assert copy_store.dataset_hash() == original.dataset_hash()


def test_sitemap_is_relative_without_base_url_and_absolute_with_it(site_store, tmp_path):
    build(site_store, tmp_path / "rel")
    rel = (tmp_path / "rel" / "sitemap.xml").read_text()
    assert f"<loc>{SEED_PAGE}</loc>" in rel and "<loc>index.html</loc>" in rel
    build(site_store, tmp_path / "abs", "--base-url", "https://errkb.example/docs")
    absolute = (tmp_path / "abs" / "sitemap.xml").read_text()
    assert f"<loc>https://errkb.example/docs/{SEED_PAGE}</loc>" in absolute
    assert '<a href="https://errkb.example/docs/index.html">' in (tmp_path / "abs" / "404.html").read_text()
    # --check must be given the same base URL.
    assert build(site_store, tmp_path / "abs", "--check", "--base-url", "https://errkb.example/docs").exit_code == 0
    assert build(site_store, tmp_path / "abs", "--check").exit_code == 1


def test_links_are_relative(site_store, tmp_path):
    out = tmp_path / "site"
    build(site_store, out)
    for name, content in files_of(out).items():
        if name.endswith(".html"):
            for link in re.findall(r'(?:href|src)="([^"]+)"', content.decode()):
                assert not link.startswith("/"), (name, link)
                if not link.startswith("https://github.com/"):
                    assert "://" not in link, (name, link)


def test_default_build_uses_the_bundled_data(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(cli, ["site", "build"])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "site" / SEED_PAGE).is_file()
    assert CliRunner().invoke(cli, ["site", "build", "--check"]).exit_code == 0


def test_path_that_would_leave_the_site_is_refused():
    assert _safe_relpath("errors/a/b/c.html") == "errors/a/b/c.html"
    assert _safe_relpath("errors/../../c.html") is None
    assert _safe_relpath("errors/./x/c.html") is None


def test_example_fix_split_into_before_and_after():
    assert split_example_fix("# before\nexport A=1\n\n# after\nexport A=2") == [("Before", "export A=1"), ("After", "export A=2")]
    assert split_example_fix("# Before:\nf(1)\n// after\ng(1)\n") == [("Before", "f(1)"), ("After", "g(1)")]
    assert split_example_fix("just code()") == [("", "just code()")]
    # One program with inline before/after notes stays one block.
    program = 'import os\n# before: dist.init_process_group("mpi")\nbackend = "gloo"  # after\nif x:\n    # before\n    y()\n'
    assert split_example_fix(program) == [("", program.strip("\n"))]
    assert split_example_fix("# before\nonly the old code\n") == [("", "# before\nonly the old code")]


def test_literal_and_gap_patterns_are_decided_by_index_of_not_a_regexp():
    assert js_pattern(r"Please use 'mnnvl' backend\.").plan == [False, False, None, ["Please use 'mnnvl' backend."], [], None]
    plan = js_pattern(r"^got (.+?) items$")
    assert plan.source is None and plan.plan == [True, True, None, ["got ", " items"], [1], None]


@pytest.mark.parametrize("pattern, reason", [
    (r"Boom (?:a|aa)*!", "an alternation inside a repeat"),
    (r"Boom \w*\w*!", "more than one unbounded repeat"),
    (r"Boom (?:a{1,9}){1,9}!", "a repeat inside a repeat"),
])
def test_patterns_that_could_backtrack_long_are_not_run_in_the_browser(pattern, reason):
    result = js_pattern(pattern)
    assert not result.ok and result.reason == f"{reason}: could backtrack for a long time in the browser"


@pytest.mark.parametrize("pattern, fragment", [
    (r"Please use 'mnnvl' backend\.(\d+)", "backend"),
    (r"^got (\d+) items$", "(?:\\u{a}?$)"),  # re's $ also matches before a final newline
    (r"(?s)begin.end", "[\\s\\S]"),
    (r"(?m)^worker", "(?:^|(?<=\\n))"),
    (r"caf\u00e9 \d", "\\u{"),
])
def test_patterns_become_js_regex_sources(pattern, fragment):
    """The sources' meaning is checked against Python re in Chromium (test_site_browser)."""
    result = js_pattern(pattern)
    assert result.ok, result.reason
    assert fragment in result.source
    assert "\\x{" not in result.source and "\\A" not in result.source and "\\z" not in result.source


@pytest.mark.parametrize("pattern, reason", [
    (r"abc(?=def)", "needs backtracking: lookahead"),
    (r"(a+)+ boom", "nested repetition could backtrack catastrophically in the browser"),
    (r"abc$ and more", "'$' before more pattern"),
])
def test_patterns_without_an_exact_safe_js_form_are_skipped(pattern, reason):
    result = js_pattern(pattern)
    assert not result.ok and reason in result.reason


def test_re2_to_js_rejects_syntax_it_does_not_know():
    with pytest.raises(ValueError, match="unexpected RE2 syntax at offset 1"):
        re2_to_js(r"a\pN")


def test_parallel_build_gives_the_same_bytes_as_serial(site_store):
    from errkb.site.build import render_site

    with Store.open(site_store, read_only=True) as store:
        serial = list(render_site(store, workers=1))
        parallel = list(render_site(store, workers=2))
    assert [p for p, _ in serial] == [p for p, _ in parallel]
    assert serial == parallel


def test_an_unreadable_variants_file_is_a_warning_and_the_paste_box_has_no_variants(site_store, tmp_path, monkeypatch):
    # The search data's variants come from KnowledgeBase.variant_entries, which raises
    # where the matcher's own build leaves them out.
    folder = tmp_path / "variants"
    folder.mkdir()
    (folder / "bad.json").write_text("{not json")
    monkeypatch.setenv("ERRKB_VARIANTS_DIR", str(folder))
    result = build(site_store, tmp_path / "out")
    assert result.exit_code == 0, result.output
    assert "warning: variants left out of the paste box: " in result.output
    assert "bad.json" in result.output
    chunk = next((tmp_path / "out" / "search").glob("0-*.js")).read_text()
    assert '"v":' not in chunk


def test_bundled_patterns_run_in_the_browser_unless_they_need_backtracking():
    """Guards the RE2-to-JS mapping against changes in what errkb.text.patterns emits."""
    with Store.open(None, read_only=True) as store:
        records = store.records()
    for rec in records:
        js = js_pattern(rec["messagePattern"])
        assert js.ok or js.reason.startswith("needs backtracking") or js.reason.endswith(
            "could backtrack for a long time in the browser"), (rec["id"], js.reason)


def test_committed_site_is_the_build_of_the_bundled_data(tmp_path):
    # The same check .ci/run makes, here so that a change to site.js, a template or
    # the bundled data without `errkb site build` fails the suite, not only CI.
    repo = Path(__file__).resolve().parents[1]
    env = {**os.environ, "ERRKB_CACHE_DIR": str(tmp_path / "cache")}
    result = subprocess.run([sys.executable, "-m", "errkb", "site", "build", "--check"], cwd=repo, env=env,
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr + "\nrebuild with: errkb site build --out site"


def test_a_build_into_a_folder_another_build_holds_waits_for_it(tmp_path, seed_db):
    """Two `errkb site build`s into one folder crashed with an internal error (each removed
    or renamed the other's temporary files); a build now waits while another holds the
    folder, then succeeds."""
    import fcntl
    import time

    out = tmp_path / "site"
    env = {**os.environ, "ERRKB_CACHE_DIR": str(tmp_path / "cache")}
    cmd = [sys.executable, "-m", "errkb", "site", "build", "--db", str(seed_db), "--out", str(out)]
    assert subprocess.run(cmd, env=env, capture_output=True, timeout=300).returncode == 0
    with open(out / ".errkb-site") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # as a build in progress holds it
        second = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(3)
        assert second.poll() is None, second.communicate()  # waiting, not writing
    out_text, err = second.communicate(timeout=300)
    assert second.returncode == 0, out_text + err
    check = subprocess.run(cmd + ["--check"], env=env, capture_output=True, text=True, timeout=300)
    assert check.returncode == 0, check.stdout + check.stderr
    assert not list(out.rglob("*.tmp"))


def test_a_plain_build_in_a_checkout_never_rewrites_the_committed_site(tmp_path):
    repo = Path(__file__).resolve().parents[1]
    before = {p: p.read_bytes() for p in (repo / "site").rglob("*") if p.is_file()}
    env = {**os.environ, "ERRKB_CACHE_DIR": str(tmp_path / "cache")}
    result = subprocess.run([sys.executable, "-m", "errkb", "site", "build"], cwd=repo, env=env,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 2
    assert result.stderr.splitlines() == ["Error: site: this is errkb's committed site (the build of the bundled data/ "
                                          "alone); write yours elsewhere with --out DIR, or rebuild the committed one "
                                          "with --out site"]
    assert {p: p.read_bytes() for p in (repo / "site").rglob("*") if p.is_file()} == before


def test_site_ships_every_served_site_pattern_once_in_its_anchors_shard():
    """The known-site data (errkb.site.sites) holds exactly the patterns the CLI's tier
    serves, each in the shard its anchor word hashes to, with every site of it in
    explain's order; the head names the shards by content hash."""
    from errkb.match.sites import served_patterns, sites_of
    from errkb.site.sites import SITE_SHARDS, site_files, word_shard

    header, served = served_patterns()
    head_path, files = site_files()
    scripts = dict(files)
    head = json.loads(re.search(rb"errkbSitesHead\((.*)\);\n$", scripts[head_path], re.S).group(1))
    assert len(head["shards"]) == SITE_SHARDS and set(head["shards"]) | {head_path} == set(scripts)
    seen = {}
    for k, path in enumerate(head["shards"]):
        assert path.startswith(f"sites/{k}-")
        bucket = json.loads(re.search(rb"errkbSitesShard\(%d,(.*)\);\n$" % k, scripts[path], re.S).group(1))
        for anchor, entries in bucket.items():
            assert word_shard(anchor) == k
            for e in entries:
                seen[e[0]] = (anchor, e)
    assert len(seen) == len(served) == head["patterns"]
    libs = [lib[0] for lib in head["libraries"]]
    for s in served[::97]:
        anchor, (number, pattern, strong, length, rows) = seen[s.number]
        assert (anchor, pattern, strong, length) == (s.anchor, s.pattern, int(s.level == "strong"), s.length)
        want = sites_of(s.rows, header["libraries"])
        assert [(libs[r[0]], head["files"][r[1]], r[2], r[3], r[4], head["kinds"][r[5]], r[7]) for r in rows] == [
            (x.library, x.file, x.line, x.function, x.condition, x.kind, x.releases) for x in want]
