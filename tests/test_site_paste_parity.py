"""The site's paste box gives the answer `errkb explain --json` gives for the same text.

For every paste of tests/fixtures/pastes.jsonl, pastes_heldout.jsonl and pastes_more.jsonl (real pastes:
exact wordings, drifted, truncated, negatives) and for each variant's own wording (data/variants), the real CLI
and the real built site in headless Chromium (one browser, from file://) must agree on
the outcome: the same matched record; or a variant of the same record with the same
label; or the same first near match with the same kinds of closeness and score; or
nothing. Text that is no record's error never becomes a match on the site either.

Needs Debian's `chromium` and `chromium-driver` and selenium (test extra).
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from click.testing import CliRunner

from errkb.cli import cli
from errkb.resources import data_dir
from errkb.site.build import build_site
from errkb.store.db import Store

# The browser fixture (tests/conftest.py) first: where Chromium is missing, it skips
# before the site is built.
pytestmark = [pytest.mark.browser, pytest.mark.usefixtures("browser")]

pytest.importorskip("selenium.webdriver", reason="needs selenium (pip install -e '.[test]')")
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

PASTES = [Path(__file__).parent / "fixtures" / name for name in ("pastes.jsonl", "pastes_heldout.jsonl", "pastes_more.jsonl")]
# Real messages of the same projects that are not any record's error (no record, no variant).
NOT_A_RECORD = [
    "RuntimeError: CUDA error: an illegal memory access was encountered",
    "ValueError: The model's max seq len (4096) is larger than the maximum number of tokens that can be stored in KV cache",
    "ValueError: Engine core initialization succeeded. See root cause above.",
]


def pastes() -> list[dict]:
    return [json.loads(line) for path in PASTES for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def variant_texts() -> list[str]:
    """Each bundled variant's own wording (the example its template produces)."""
    out = []
    for path in sorted((data_dir() / "variants").glob("*.json")):
        for v in json.loads(path.read_text(encoding="utf-8")).get("variants", []):
            if v.get("example"):
                out.append(v["example"])
    return out


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> tuple[Path, Path]:
    tmp = tmp_path_factory.mktemp("paste-parity")
    db = tmp / "store.duckdb"
    with Store.open(db) as store:
        report = store.ingest([data_dir()])
        assert report.rejected == 0
        build_site(store, tmp / "site")
    return db, tmp / "site"


@pytest.fixture(scope="module")
def index_page(browser, built):
    _db, site = built
    browser.get((site / "index.html").as_uri())
    # every search chunk has run (near matches need all records)
    WebDriverWait(browser, 20).until(lambda d: "so far" not in d.find_element(By.ID, "count").text)
    return browser


def cli_outcome(db: Path, text: str) -> dict:
    result = CliRunner().invoke(cli, ["explain", "--db", str(db), "--json", text])
    assert result.exit_code in (0, 1), result.output
    data = json.loads(result.output)
    assert (result.exit_code == 0) == data["matched"]
    if data["matches"]:
        m = data["matches"][0]
        if m["variant"]:
            v = m["variant"]
            span = v["first"] if v["first"] == v["last"] else f"{v['first']}–{v['last']}"
            project = m["repo"].rsplit("/", 1)[-1]
            return {"kind": "variant", "id": m["id"], "label": f"{v['relation'] or 'other'} wording ({project} {span}) of {m['slug']}"}
        return {"kind": "match", "id": m["id"]}
    if data["nearMatches"]:
        n = data["nearMatches"][0]
        return {"kind": "near", "id": n["id"], "closeness": ", ".join(n["closeness"]), "similarity": n["similarity"],
                "all": [x["id"] for x in data["nearMatches"]]}
    return {"kind": "none"}


PASTE_JS = """
document.getElementById('paste-answer').removeAttribute('data-q');
const box = document.getElementById('q');
box.value = arguments[0];
box.dispatchEvent(new Event('input'));
"""
READ_JS = """
const a = document.getElementById('paste-answer');
const kind = a.getAttribute('data-kind');
const out = {kind: kind};
if (kind === 'match' || kind === 'variant') { out.id = a.getAttribute('data-id'); }
if (kind === 'variant') { out.label = a.getAttribute('data-label'); }
if (kind === 'near') {
  const items = Array.from(a.querySelectorAll('li.near'));
  out.id = items[0].getAttribute('data-id');
  out.closeness = items[0].getAttribute('data-closeness');
  out.similarity = Math.round(Number(items[0].getAttribute('data-similarity')) * 1e4) / 1e4;
  out.all = items.map(li => li.getAttribute('data-id'));
}
out.shown = !a.hidden;
out.text = a.textContent;
return out;
"""


def site_outcome(driver, text: str) -> dict:
    driver.execute_script(PASTE_JS, text)
    # the search runs 120 ms after typing; the answer is redrawn with it
    WebDriverWait(driver, 10).until(lambda d: d.find_element(By.ID, "paste-answer").get_attribute("data-q") == str(len(text)))
    out = driver.execute_script(READ_JS)
    assert out["shown"] == (out["kind"] != "none"), out
    out.pop("shown")
    out.pop("text")
    return out


def test_paste_box_agrees_with_explain_on_every_paste(built, index_page):
    db, _site = built
    rows = pastes() + [{"text": t, "kind": "variant wording", "expected": None} for t in variant_texts()]
    agree: Counter = Counter()
    total: Counter = Counter()
    disagree = []
    kinds_seen: Counter = Counter()
    for row in rows:
        want = cli_outcome(db, row["text"])
        got = site_outcome(index_page, row["text"])
        total[row["kind"]] += 1
        kinds_seen[want["kind"]] += 1
        if got == want:
            agree[row["kind"]] += 1
        else:
            disagree.append((row["kind"], row["text"][:100], want, got))
    print("paste parity:", {k: f"{agree[k]}/{total[k]}" for k in total}, "CLI outcomes:", dict(kinds_seen))
    assert disagree == []
    # the set exercises every outcome the paste box can give
    assert {"match", "variant", "near", "none"} <= set(kinds_seen), kinds_seen


def test_text_that_is_no_record_never_becomes_a_match_on_the_site(built, index_page):
    db, _site = built
    for text in NOT_A_RECORD + [row["text"] for row in pastes() if row["kind"] == "negative"]:
        want = cli_outcome(db, text)
        got = site_outcome(index_page, text)
        assert want["kind"] not in ("match", "variant"), (text, want)
        assert got["kind"] not in ("match", "variant"), (text, got)
        assert got == want


def test_near_answer_escapes_record_text_and_links_the_fix_page(built, index_page):
    """A near answer links the record's fix page; its text is text, never markup."""
    db, site = built
    # reworded, not cut short (a true beginning of the message would be the record itself)
    text = "Bfloat16 is only supported on GPUs having compute capability 8.0 or newer."
    want = cli_outcome(db, text)
    got = site_outcome(index_page, text)
    assert got == want and got["kind"] == "near"
    links = index_page.find_elements(By.CSS_SELECTOR, "#paste-answer li.near a.record-link")
    href = links[0].get_attribute("href")
    assert href.startswith(site.as_uri()) and Path(href.removeprefix("file://")).is_file()
    assert index_page.execute_script("return document.querySelectorAll('#paste-answer script, #paste-answer img').length") == 0
    assert "Similar, not exact" in index_page.find_element(By.ID, "paste-answer").text
