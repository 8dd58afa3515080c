"""The built site in a real headless Chromium: search, fix pages, the pattern tester,
no console errors, every internal link and asset resolving, file:// loading, and no
script from record text ever running.

Needs Debian's `chromium` and `chromium-driver` (`apt-get install -y chromium
chromium-driver`) and selenium (test extra). Screenshots go to the test's tmp dir and
to /tmp/errkb-shots/.
"""

from __future__ import annotations

import functools
import http.server
import json
import re
import socketserver
import threading
import time
import urllib.error
import urllib.request
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urldefrag, urljoin, urlsplit

import pytest

from errkb.match.js_regex import js_pattern
from errkb.resources import data_dir
from errkb.site.build import build_site
from errkb.store.db import Store
from tests.support import SEED_ID, SEED_MESSAGE, SEED_PAGE, draft_record, hostile_record, lookahead_record, variant

# The browser fixture (tests/conftest.py) first: where Chromium is missing, it skips
# before the site is built.
pytestmark = [pytest.mark.browser, pytest.mark.usefixtures("browser")]

pytest.importorskip("selenium.webdriver", reason="needs selenium (pip install -e '.[test]')")
from selenium.common.exceptions import NoAlertPresentException  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

SHOTS = Path("/tmp/errkb-shots")
# The seed's message as vLLM logs it from a worker: prefix, level, file:line, class.
LOG_LINE = f"(VllmWorker rank=1 pid=40312) ERROR 08-15 22:17:37 [multiproc_executor.py:527] ValueError: {SEED_MESSAGE}"


@pytest.fixture(scope="module")
def site(tmp_path_factory, request) -> Path:
    """The bundled data plus hostile, draft and lint-warned records, built into a site."""
    tmp = tmp_path_factory.mktemp("browser-site")
    seed = json.loads((data_dir() / "vllm-project" / "vllm" / "000_82135fca3cf8df92.txt").read_text())["record"]
    extra = tmp / "extra.jsonl"
    records = [hostile_record(seed), draft_record(seed), lookahead_record(seed), variant(seed, 1)]
    extra.write_text("".join(json.dumps(r) + "\n" for r in records))
    with Store.open(tmp / "store.duckdb") as store:
        report = store.ingest([data_dir(), extra])
        assert report.rejected == 0, [r.reasons for r in report.rejects]
        build_site(store, tmp / "site")
    return tmp / "site"


@pytest.fixture(scope="module")
def server(site):
    handler = functools.partial(_QuietHandler, directory=str(site))
    httpd = socketserver.ThreadingTCPServer(("127.0.0.1", 0), handler)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/"
    httpd.shutdown()
    httpd.server_close()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def console_errors(driver) -> list[str]:
    return [e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE"]


def assert_inert(driver) -> None:
    """No script from record text ran: the payloads would set window.__pwned or alert."""
    assert driver.execute_script("return typeof window.__pwned") == "undefined"
    with pytest.raises(NoAlertPresentException):
        driver.switch_to.alert.text  # noqa: B018


def wait(driver, condition, timeout: float = 10):
    return WebDriverWait(driver, timeout).until(lambda d: condition(d))


def type_query(driver, text: str) -> None:
    box = driver.find_element(By.ID, "q")
    box.clear()
    # Pasting sets the value at once; send_keys of a long line would take seconds.
    driver.execute_script("arguments[0].value = arguments[1]; arguments[0].dispatchEvent(new Event('input'));", box, text)


def visible_results(driver) -> list[str]:
    """Fix-page links of the record items on screen, in order (search results are shown
    in #results, the unfiltered index in #all-records)."""
    return driver.execute_script(
        "return Array.from(document.querySelectorAll('#results > li, #all-records > li'))"
        ".filter(li => li.offsetParent !== null).map(li => li.querySelector('a').getAttribute('href'));")


def screenshot(driver, tmp_path: Path, name: str, full_page: bool = True) -> None:
    if full_page:
        height = driver.execute_script("return document.documentElement.scrollHeight")
        width = driver.execute_script("return window.innerWidth")
        driver.set_window_size(max(width, 390), min(max(height + 120, 600), 8000))
    SHOTS.mkdir(parents=True, exist_ok=True)
    for folder in (tmp_path, SHOTS):
        driver.save_screenshot(str(folder / f"{name}.png"))


def test_search_by_word_and_by_pasted_log_line_finds_the_seed(browser, server, tmp_path):
    browser.get(server + "index.html")
    total = len(visible_results(browser))
    assert total >= 9
    type_query(browser, "trtllm mnnvl")
    wait(browser, lambda d: len(visible_results(d)) < total)
    assert SEED_PAGE in visible_results(browser)
    assert "records" in browser.find_element(By.ID, "count").text
    type_query(browser, "no-such-word-anywhere")
    wait(browser, lambda d: visible_results(d) == [])
    # A whole log line: no record contains its prefix words, the seed's pattern matches it.
    type_query(browser, LOG_LINE)
    wait(browser, lambda d: visible_results(d)[:1] == [SEED_PAGE])
    hits = browser.execute_script(
        "return Array.from(document.querySelectorAll('#results .pattern-hit')).filter(b => !b.hidden)"
        ".map(b => b.closest('li').querySelector('a').getAttribute('href'));")
    assert hits == [SEED_PAGE]
    assert "1 matched by pattern" in browser.find_element(By.ID, "count").text
    screenshot(browser, tmp_path, "index-log-line-search")
    assert console_errors(browser) == []
    assert_inert(browser)


def test_filters_narrow_the_index(browser, server):
    browser.get(server + "index.html")
    browser.execute_script("var s=document.getElementById('f-status'); s.value='draft'; s.dispatchEvent(new Event('change'));")
    shown = visible_results(browser)
    assert shown == ["errors/vllm-project/vllm/draft-flashinfer-allreduce-quantization-fusion-is-not-su.html"]
    browser.execute_script("var s=document.getElementById('f-status'); s.value=''; s.dispatchEvent(new Event('change'));"
                           "var r=document.getElementById('f-repo'); r.value='pytorch/pytorch'; r.dispatchEvent(new Event('change'));")
    shown = visible_results(browser)
    assert shown and all(h.startswith("errors/pytorch/pytorch/") for h in shown)


def test_seed_page_from_the_index(browser, server, tmp_path):
    browser.set_window_size(1280, 900)
    browser.get(server + "index.html")
    total = len(visible_results(browser))
    type_query(browser, "quantization fusion")
    wait(browser, lambda d: len(visible_results(d)) < total)
    assert SEED_PAGE in visible_results(browser)
    browser.find_element(By.CSS_SELECTOR, f'#results a[href="{SEED_PAGE}"]').click()
    wait(browser, lambda d: d.current_url.endswith(SEED_PAGE))
    assert browser.find_element(By.ID, "message").text == SEED_MESSAGE
    raise_line = browser.find_element(By.CSS_SELECTOR, ".hll")
    assert raise_line.text.strip().startswith("221")
    assert "raise ValueError(" in raise_line.text
    before = browser.find_element(By.CSS_SELECTOR, ".fix-part.before")
    after = browser.find_element(By.CSS_SELECTOR, ".fix-part.after")
    assert "VLLM_FLASHINFER_ALLREDUCE_BACKEND=trtllm" in before.text
    assert "VLLM_FLASHINFER_ALLREDUCE_BACKEND=mnnvl" in after.text
    assert before.is_displayed() and after.is_displayed()
    download = browser.find_element(By.CSS_SELECTOR, "a.download")
    href = download.get_attribute("href")
    assert href.endswith(f"/snippets/{SEED_ID}.py") and download.get_attribute("download") is not None
    snippet = urllib.request.urlopen(href, timeout=10).read().decode()
    compile(snippet, "snippet.py", "exec")
    assert len(browser.find_elements(By.CSS_SELECTOR, ".code .copy")) == 5
    screenshot(browser, tmp_path, "seed-page")
    assert console_errors(browser) == []


def test_copy_button_copies_the_code_without_line_numbers(browser, server):
    browser.get(server + SEED_PAGE)
    # Record what goes to the clipboard (headless Chromium grants no clipboard permission):
    # the Clipboard API on secure origins such as 127.0.0.1, execCommand elsewhere.
    browser.execute_script(
        "window.__copied = null;"
        "if (navigator.clipboard) { navigator.clipboard.writeText = function(t) { window.__copied = t; return Promise.resolve(); }; }"
        "document.execCommand = function(c) { window.__copied = document.activeElement.value; return true; };")
    source_copy = browser.find_element(By.CSS_SELECTOR, 'section[aria-labelledby="where-h"] .code .copy')
    source_copy.click()
    copied = wait(browser, lambda d: d.execute_script("return window.__copied"))
    assert copied.startswith("    hidden_dim: int,\n")
    assert "203" not in copied.split("\n")[0]
    assert source_copy.text == "Copied"


def test_pattern_tester_on_the_fix_page(browser, server):
    browser.get(server + SEED_PAGE)
    box = browser.find_element(By.ID, "tester-input")
    browser.execute_script("arguments[0].value = arguments[1]; arguments[0].dispatchEvent(new Event('input'));", box, LOG_LINE)
    result = browser.find_element(By.CSS_SELECTOR, ".tester-result")
    wait(browser, lambda d: result.text.startswith("Matches:"))
    assert result.find_element(By.TAG_NAME, "mark").text == SEED_MESSAGE
    browser.execute_script("arguments[0].value = 'ValueError: something else'; arguments[0].dispatchEvent(new Event('input'));", box)
    wait(browser, lambda d: result.text == "No match.")
    assert console_errors(browser) == []


def test_pattern_that_cannot_run_exactly_in_the_browser_says_so(browser, server):
    browser.get(server + "errors/vllm-project/vllm/lookahead-flashinfer-allreduce-quantization-fusion-is-not-su.html")
    result = browser.find_element(By.CSS_SELECTOR, ".tester-result")
    assert "cannot be run exactly in the browser (needs backtracking: lookahead)" in result.text
    assert not browser.find_element(By.ID, "tester-input").is_enabled()
    assert "Lint findings." in browser.find_element(By.CSS_SELECTOR, ".notice-findings").text


# Python `re.search` and the generated JS RegExp must agree on every text.
EXACTNESS = [
    (r"Expected x but got (\d+) items", ["Expected x but got 12 items", "Expected x but got ١٢ items", "Expected x but got  items"]),
    # literals and (.+?) gaps: decided by site.js gapSpan (indexOf), never a RegExp
    (r"Expected (.+?) but got (.+?) items", ["Expected x but got 12 items", "Expected  but got 1 items", "Expected 😀 but got 😀 items"]),
    (r"^got (.+?) items$", ["got 3 items", "got  items", "xgot 3 items", "got 3 items!", "got 😀 items"]),
    (r"(.+?)ends here(.+?)", ["it ends here.", "ends here.", "it ends here", "😀ends here😀"]),
    (r"^Bad value: \w+$", ["Bad value: héllo", "Bad value: héllo\n", "Bad value: a b", "x Bad value: a", "Bad value: a\n\n"]),
    (r"(?i)cuda error: out of memory", ["CUDA ERROR: Out Of Memory", "cuda error: out of memory", "CUDA error: out of memorY!"]),
    (r"tensor\s+size", ["tensor\u00a0size", "tensor\u2028size", "tensor\x1csize", "tensor\ufeffsize", "tensorsize"]),
    (r"\bgpu\b failed", ["gpu failed", "agpu failed", "the gpu failed"]),
    (r"(?m)^worker died$", ["a\nworker died\nb", "worker died now"]),
    (r"K[a-c]{2,3}\.done", ["Kab.done", "Ka.done", "Kabcd.done", "K\u212aab.done"]),
    (r"(?i)kelvin k", ["KELVIN \u212a", "kelvin K", "kelvin x"]),
]


def test_js_translation_agrees_with_python_re(browser, server):
    browser.get(server + "index.html")
    for pattern, texts in EXACTNESS:
        js = js_pattern(pattern)
        assert js.ok, (pattern, js.reason)
        for text in texts:
            if js.ascii_only and not text.isascii():
                continue
            if js.plan is not None:
                got = browser.execute_script("var s = window.errkbGapSpan(arguments[1], arguments[0]); "
                                             "return s && [s.start, s.end]", js.plan, text)
                m = re.search(pattern, text)
                # spans in UTF-16 units there, code points here
                want = m and [len(text[:m.start()].encode("utf-16-le")) // 2, len(text[:m.end()].encode("utf-16-le")) // 2]
                assert got == want, (pattern, text, got, want)
                continue
            got = browser.execute_script("return new RegExp(arguments[0], 'u').test(arguments[1])", js.source, text)
            assert got == bool(re.search(pattern, text)), (pattern, text)


# Shapes that backtrack for minutes in a browser's RegExp engine: none reaches one.
# Nested or overlapping repetition: exponential in a backtracking engine.
FREEZERS = [r"Boom: (?:a|aa)*$", r"Boom: (?:\w|\w\w)*!", r"Boom: \w*\w*\w*!", r"Boom: (?:a{1,9}){1,9}!",
            r"Boom: (.+?)a(.+?)a(.+?)a(.+?)!$"]
# Look hostile but are one class under a repeat once translated (an alternation of single
# characters is a class), so they may run as a RegExp: it must answer on the worst text.
SAFE_LOOKALIKES = [r"Boom: (?:\w|é)*!", r"Boom: (?:é|[a-z])*!"]
WORST_TEXTS = ["Boom: " + "a" * 1999, "Boom: " + "é" * 1999]


def test_patterns_that_could_freeze_a_tab_never_become_regexps(browser, server):
    browser.get(server + "index.html")
    for pattern in FREEZERS:
        js = js_pattern(pattern)
        assert js.source is None, pattern
        if js.plan is not None:  # decided by indexOf: linear on the worst text
            started = time.monotonic()
            got = browser.execute_script("return window.errkbGapSpan(arguments[1], arguments[0])", js.plan, WORST_TEXTS[0])
            assert got is None and time.monotonic() - started < 5
    for pattern in SAFE_LOOKALIKES:
        js = js_pattern(pattern)
        assert js.source is not None, pattern
        for text in WORST_TEXTS:
            started = time.monotonic()
            got = browser.execute_script("return new RegExp(arguments[0], 'u').test(arguments[1])", js.source, text)
            assert got is False and time.monotonic() - started < 5, (pattern, text[:10])


def test_hostile_record_text_never_runs(browser, server, site, tmp_path):
    hostile = next(p for p in (site / "errors").rglob("hostile-*.html")).relative_to(site).as_posix()
    pages = ["index.html", hostile] + sorted(p.relative_to(site).as_posix() for p in (site / "tags").iterdir())
    for page in pages:
        browser.get(server + page)
        time.sleep(0.05)
        assert_inert(browser)
    browser.get(server + hostile)
    assert browser.find_element(By.ID, "message").text.startswith("Hostile <script>window.__pwned=1</script>\"><img src=x onerror=")
    # Search results and the tester render record text too.
    browser.get(server + "index.html")
    type_query(browser, "hostile")
    wait(browser, lambda d: hostile in visible_results(d))
    browser.get(server + hostile)
    box = browser.find_element(By.ID, "tester-input")
    message = browser.find_element(By.ID, "message").text
    browser.execute_script("arguments[0].value = arguments[1]; arguments[0].dispatchEvent(new Event('input'));", box, message)
    wait(browser, lambda d: d.find_element(By.CSS_SELECTOR, ".tester-result").text.startswith("Matches:"))
    assert_inert(browser)
    screenshot(browser, tmp_path, "hostile-page", full_page=False)
    assert console_errors(browser) == []


class _Links(HTMLParser):
    def __init__(self):
        super().__init__()
        self.links: list[str] = []
        self.ids: set[str] = set()

    def handle_starttag(self, tag, attrs):
        for name, value in attrs:
            if name in ("href", "src") and value:
                self.links.append(value)
            if name == "id" and value:
                self.ids.add(value)


def test_every_internal_link_and_asset_resolves_and_no_page_logs_errors(browser, server, site):
    pages = sorted(p.relative_to(site).as_posix() for p in site.rglob("*.html"))
    parsed: dict[str, _Links] = {}

    def parse(url: str) -> _Links:
        if url not in parsed:
            p = _Links()
            p.feed(urllib.request.urlopen(url, timeout=10).read().decode())
            parsed[url] = p
        return parsed[url]

    broken, checked = [], set()
    for page in pages:
        url = server + page
        for link in parse(url).links:
            if link == "data:,":  # the 404 page's empty favicon
                continue
            target = urljoin(url, link)
            if urlsplit(target).netloc != urlsplit(server).netloc:
                assert urlsplit(target).scheme == "https", (page, link)  # only outbound GitHub links
                continue
            base, fragment = urldefrag(target)
            if (base, fragment) in checked:
                continue
            checked.add((base, fragment))
            try:
                urllib.request.urlopen(base, timeout=10).read()
            except urllib.error.HTTPError as e:
                broken.append(f"{page}: {link} -> {e.code}")
                continue
            if fragment and base.endswith(".html") and fragment not in parse(base).ids:
                broken.append(f"{page}: {link} -> no id {fragment!r}")
    assert broken == []
    assert len(checked) > len(pages)
    # Every fix page is reachable from the index.
    index_links = {urljoin(server + "index.html", h) for h in parse(server + "index.html").links}
    for page in pages:
        if page.startswith("errors/"):
            assert server + page in index_links, page
    # And every page loads in the browser without a console error or a running payload.
    for page in pages:
        browser.get(server + page)
        assert console_errors(browser) == [], page
        assert_inert(browser)


def test_site_works_from_file_urls(browser, site, tmp_path):
    browser.get((site / "index.html").as_uri())
    type_query(browser, LOG_LINE)
    wait(browser, lambda d: visible_results(d)[:1] == [SEED_PAGE])
    browser.find_element(By.CSS_SELECTOR, f'#results a[href="{SEED_PAGE}"]').click()
    wait(browser, lambda d: d.current_url.endswith(SEED_PAGE))
    assert browser.find_element(By.ID, "message").text == SEED_MESSAGE
    # The stylesheet loaded (relative link from three folders down).
    assert browser.execute_script("return getComputedStyle(document.querySelector('.copy')).position") == "absolute"
    box = browser.find_element(By.ID, "tester-input")
    browser.execute_script("arguments[0].value = arguments[1]; arguments[0].dispatchEvent(new Event('input'));", box, LOG_LINE)
    wait(browser, lambda d: d.find_element(By.CSS_SELECTOR, ".tester-result").text.startswith("Matches:"))
    assert console_errors(browser) == []


def test_phone_and_dark_mode_screenshots(browser, server, tmp_path):
    browser.set_window_size(390, 844)
    browser.get(server + SEED_PAGE)
    wait(browser, lambda d: d.execute_script("return window.innerWidth") <= 400)
    # Nothing wider than the phone screen except inside scrollable code blocks.
    overflow = wait(browser, lambda d: d.execute_script(
        "return document.readyState === 'complete' && "
        "[document.documentElement.scrollWidth - document.documentElement.clientWidth]"))[0]
    assert overflow <= 0
    screenshot(browser, tmp_path, "seed-page-phone")
    browser.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": [{"name": "prefers-color-scheme", "value": "dark"}]})
    browser.set_window_size(1280, 900)
    browser.get(server + "index.html")
    wait(browser, lambda d: d.execute_script("return getComputedStyle(document.body).backgroundColor") == "rgb(20, 23, 26)")
    screenshot(browser, tmp_path, "index-dark", full_page=False)
    browser.get(server + SEED_PAGE)
    screenshot(browser, tmp_path, "seed-page-dark")
    browser.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": []})
    browser.set_window_size(1280, 900)


# WCAG 2 contrast ratio of an element's text against the first opaque background behind it.
CONTRAST_JS = """
function rgb(c) { var m = c.match(/[\\d.]+/g).map(Number); return {r: m[0], g: m[1], b: m[2], a: m.length > 3 ? m[3] : 1}; }
function lum(c) { return [c.r, c.g, c.b].map(function (v) { v /= 255; return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); })
                  .reduce(function (s, v, i) { return s + v * [0.2126, 0.7152, 0.0722][i]; }, 0); }
function bg(el) { for (; el; el = el.parentElement) { var c = rgb(getComputedStyle(el).backgroundColor); if (c.a > 0.5) { return c; } }
                  return {r: 255, g: 255, b: 255, a: 1}; }
return Array.from(document.querySelectorAll(arguments[0])).filter(function (el) { return el.offsetParent !== null; }).map(function (el) {
  var a = lum(rgb(getComputedStyle(el).color)), b = lum(bg(el));
  return [el.tagName + '.' + el.className, (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05)];
});
"""
TEXT_SELECTORS = "p, li, h1, h2, h3, a, label, code, .badge, .meta, .caption, .count, figcaption, .notice, button, .linenos"


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_accessible_landmarks_labels_and_contrast(browser, server, scheme):
    browser.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": [{"name": "prefers-color-scheme", "value": scheme}]})
    try:
        for page in ("index.html", SEED_PAGE, "errors/vllm-project/vllm/draft-flashinfer-allreduce-quantization-fusion-is-not-su.html"):
            browser.get(server + page)
            assert browser.execute_script("return document.documentElement.lang") == "en"
            for landmark in ("header", "nav", "main", "footer"):
                assert len(browser.find_elements(By.TAG_NAME, landmark)) >= 1, (page, landmark)
            assert len(browser.find_elements(By.TAG_NAME, "h1")) == 1, page
            unlabelled = browser.execute_script(
                "return Array.from(document.querySelectorAll('textarea, select, input'))"
                ".filter(e => e.labels.length === 0 && !e.getAttribute('aria-label')).map(e => e.id)")
            assert unlabelled == [], page
            nameless = browser.execute_script(
                "return Array.from(document.querySelectorAll('button')).filter(b => !(b.getAttribute('aria-label') || b.textContent.trim())).length")
            assert nameless == 0, page
            low = [(what, round(ratio, 2)) for what, ratio in browser.execute_script(CONTRAST_JS, TEXT_SELECTORS) if ratio < 4.5]
            assert low == [], (page, scheme, low[:10])
    finally:
        browser.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": []})


def test_large_result_sets_are_shown_a_page_at_a_time(browser, tmp_path_factory, seed_record):
    """250 records: a search lists the first 200 and a button adds the rest."""
    tmp = tmp_path_factory.mktemp("paged-site")
    src = tmp / "records.jsonl"
    src.write_text("".join(json.dumps(variant(seed_record, i)) + "\n" for i in range(250)))
    with Store.open(tmp / "store.duckdb") as store:
        assert store.ingest([src]).rejected == 0
        build_site(store, tmp / "site")
    browser.get((tmp / "site" / "index.html").as_uri())
    assert len(visible_results(browser)) == 200
    assert browser.find_element(By.ID, "count").text == "250 records · showing the first 200"
    type_query(browser, variant(seed_record, 249)["slug"])
    wait(browser, lambda d: d.find_element(By.ID, "count").text == "1 of 250 records")
    assert browser.find_element(By.ID, "more").is_displayed() is False
    type_query(browser, "allreduce")
    wait(browser, lambda d: d.find_element(By.ID, "count").text == "250 records · showing the first 200")
    assert len(visible_results(browser)) == 200
    more = browser.find_element(By.ID, "more")
    assert more.text == "Show 50 more of 50"
    more.click()
    wait(browser, lambda d: len(visible_results(d)) == 250)
    assert not more.is_displayed()
    assert console_errors(browser) == []
