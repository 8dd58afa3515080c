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


@pytest.fixture
def index_page(browser, built):
    """The built site's index page, loaded once and again only where a test took the shared
    browser elsewhere (test_known_site_text_is_inserted_as_text opens another site)."""
    _db, site = built
    url = (site / "index.html").as_uri()
    if browser.current_url.split("?")[0] != url:
        browser.get(url)
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
    # the known-site tier (errkb.match.sites): where a library raises it, beside or without near matches.
    # A site read from a paste cut short inside its message (SiteIndex.match_cut) is the CLI's
    # alone: the paste box does not port that reading (docs/matching.md says so), so it is left
    # out here, and the box must agree on everything else.
    sites = [m for m in data["sites"] if not m.get("truncated")]
    if data["nearMatches"]:
        n = data["nearMatches"][0]
        return {"kind": "near", "id": n["id"], "closeness": ", ".join(n["closeness"]), "similarity": n["similarity"],
                "all": [x["id"] for x in data["nearMatches"]], "sites": sites}
    if sites:
        return {"kind": "site", "sites": sites}
    return {"kind": "none", "sites": []}


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
if (kind === 'near' || kind === 'site' || kind === 'none') {
  out.sites = Array.from(a.querySelectorAll('li.site-match')).map(li => ({
    tier: 'site', pattern: li.getAttribute('data-pattern'), line: Number(li.getAttribute('data-line')),
    trust: li.getAttribute('data-trust'), meaning: li.hasAttribute('data-meaning') ? li.getAttribute('data-meaning') : null,
    sites: Array.from(li.querySelectorAll('li.site')).map(s => JSON.parse(s.getAttribute('data-site')))}));
}
out.shown = !a.hidden;
out.text = a.textContent;
return out;
"""


def site_outcome(driver, text: str) -> dict:
    driver.execute_script(PASTE_JS, text)
    # the search runs 120 ms after typing; the answer is redrawn with it, and again as the
    # known-site data it asked for arrives
    def answered(d):
        a = d.find_element(By.ID, "paste-answer")
        return (a.get_attribute("data-q") == str(len(text)) and a.get_attribute("data-kind") != "loading"
                and a.get_attribute("data-sites") != "loading")

    WebDriverWait(driver, 10).until(answered)
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


# ---- the known-site tier: a paste no record matches but a known site does (errkb.match.sites)

# Real messages of vLLM, PyTorch and CUDA that no record holds but the shipped index does.
SITE_PASTES = [
    "ValueError: max_tokens must be at least 1, got 0.",
    "RuntimeError: CUDA error: an illegal memory access was encountered",
    "ValueError: Model architectures ['FooForCausalLM'] failed to be inspected. Please check the logs for more details.",
    "ValueError: temperature must be non-negative, got -1.0.",
    # a "half" (prose) pattern behind a log header: half of the message, not of the line
    "WARNING 01-10 21:49:05 model_runner_base.py:143] Failed to pickle inputs of failed execution: CUDA error: "
    "device-side assert triggered",
    # the CUDA table by an entry's code, and by CUDA's own sentence inside FlashInfer's message
    "ERROR [multiproc_executor.py:962] Search for `cudaErrorStreamCaptureUnsupported' in https://docs.nvidia.com/",
    "RuntimeError: RMSNorm failed with error code no kernel image is available for execution on the device",
    # PyTorch's C++ errors (no wheel ships their .cpp): the curated PyTorch table, listed before a
    # mined copy's site on the same line (FlashInfer raises "mat1 and mat2 shapes ..." too)
    "[rank0]:[E ProcessGroupNCCL.cpp:563] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=5, "
    "OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600020 milliseconds before timing out.",
    "RuntimeError: mat1 and mat2 shapes cannot be multiplied (2x3 and 4x5)",
    # a wrapper's fields after the message (vLLM's VLLMValidationError, pydantic's), a TSV column after
    # a tab: still the message
    "ValueError: max_tokens must be at least 1, got 0.\tnext column",
    "vllm.exceptions.VLLMValidationError: top_p must be in (0, 1], got 0. (parameter=top_p, value=0)",
    "  Value error, max_tokens must be at least 1, got 0. [type=value_error, input_value=ArgsKwargs((), {}), "
    "input_type=ArgsKwargs]",
    # a message a wrapper carries, read alone (errkb.text.normalize.unwrapped_messages): pydantic's
    # validator message under its title, openai's client error body, vLLM's JSON error body
    "pydantic_core._pydantic_core.ValidationError: 1 validation error for VllmConfig\nValue error, Model Runner V2 "
    "does not yet support: ngram/ngram_gpu speculative decoding [type=value_error, input_value=ArgsKwargs((), "
    "{'model_co... 'shutdown_timeout': 0}), input_type=ArgsKwargs]",
    "openai.BadRequestError: Error code: 400 - {'object': 'error', 'message': 'At most 1 image(s) may be provided in "
    "one request.', 'type': 'BadRequestError', 'param': None, 'code': 400}",
    '{"object":"error","message":"At most 1 image(s) may be provided in one request.","type":"BadRequestError",'
    '"param":null,"code":400}',
    # torchrun's summary: the curated torchrun table (no library word needed on its lines)
    (TORCHRUN_PASTE := "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: \n====\n"
                       "train.py FAILED\n  exitcode  : -6 (pid: 56213)\n"
                       "  traceback : Signal 6 (SIGABRT) received by PID 56213"),
    *(WHITESPACE_PASTES := [
        # a paste's whitespace is not the program's (errkb.match.chunks.fold_space): a tab
        # shown as spaces in a multi-line message (its line is where its text begins, not
        # where its first word first appears), the message joined onto one line, a tab and
        # double spaces inside a line
        "RuntimeError: Error(s) in loading state_dict for Net:\n        size mismatch for fc.weight: copying a param",
        "Error(s) happened\nx\nRuntimeError: Error(s) in loading state_dict for Net:\n  size mismatch for fc.weight",
        "RuntimeError: Error(s) in loading state_dict for Net: size mismatch for fc.weight: copying a param",
        "ValueError: max_tokens\tmust be  at least 1,   got 0.",
        # a one-line message an issue's editor wrapped mid-sentence, under a traceback's frame:
        # its lines joined back, its site at the line it begins on (explainer._line_of)
        '  File "/app/serve.py", line 12, in generate\nValueError: The decoder prompt (length 337896) is longer '
        "than the maximum model length of 128000. Make sure that `max_model_len` is no smaller than the number of "
        "text tokens plus multimodal tokens. For image inputs, the\n number of image tokens depends on the number "
        "of images, and possibly their aspect ratios as well.",
    ]),
    # a "half" pattern whose value between two literals (a list of 19 choices) is most of the line
    "(APIServer pid=966592) KeyError: 'invalid tool call parser: openai (chose from { deepseek_v3, glm45, "
    "granite-20b-fc, granite, hermes, hunyuan_a13b, internlm, jamba, kimi_k2, llama4_pythonic, llama4_json, "
    "llama3_json, minimax, mistral, phi4_mini_json, pythonic, qwen3_coder, step3, xlam })'",
]
# Real graph-break pastes (tests/fixtures/pastes_sites_fresh6.jsonl) that quote their message:
# pytest's "E   " margin, a repr with its line breaks written "\n" (errkb.text.printed). The
# box reads the quoted forms as explain does, each site at the paste's line.
PRINTED_PASTES = [p["text"] for p in map(json.loads, (Path(__file__).parent / "fixtures" / "pastes_sites_fresh6.jsonl")
                                         .read_text(encoding="utf-8").splitlines())
                  if "\nE " in p["text"] or p["text"].startswith("E ") or "\\n" in p["text"]]
# Another library's messages (transformers, numpy): no site is theirs.
FOREIGN = [
    "ValueError: The checkpoint you are trying to load has model type `foo` but Transformers does not recognize "
    "this architecture.",
    "ValueError: operands could not be broadcast together with shapes (2,3) (4,5)",
    # a longer message that begins with one a library raises (errkb.match.chunks.message_span)
    "AssertionError: group_size must be greater than 0 or equal to -1",
    "ValueError: max_tokens must be at least 1, got 0.  Use max_new_tokens instead",
    "ValueError: embed_dim must be divisible by num_heads (got `embed_dim`: 3 and `attention_heads`: 3).",
]


def sampled_site_texts(step: int = 900) -> list[str]:
    """A text for every step-th served pattern of the shipped index (a value for each
    wildcard, an error class before it): strong, half and multi-line patterns alike."""
    from errkb.match.chunks import chunks_of
    from errkb.match.sites import served_patterns

    _header, served = served_patterns()
    out = []
    for s in served[::step]:
        body = "".join("x_value7" if c is None else c for c in chunks_of(s.pattern))
        out.append(body if "\n" in body else "RuntimeError: " + body)
    return out


def site_answer(driver) -> dict:
    return driver.execute_script("""
const a = document.getElementById('paste-answer');
return {kind: a.getAttribute('data-kind'), text: a.innerText,
        heads: Array.from(a.querySelectorAll('.answer-head')).map(h => h.textContent),
        sites: a.querySelectorAll('li.site-match').length,
        links: Array.from(a.querySelectorAll('a.site-source')).map(l => l.getAttribute('href')),
        markup: a.querySelectorAll('script, img, iframe').length};""")


def test_a_message_only_a_known_site_knows_shows_where_it_is_raised(built, index_page):
    """vLLM's max_tokens check has no record: the paste box says where vLLM raises it, in
    which releases, linked at the release's tag, labelled a known site and not a fix;
    exactly what `errkb explain --json` says of it."""
    db, _site = built
    text = "max_tokens must be at least 1, got 0."
    want = cli_outcome(db, text)
    got = site_outcome(index_page, text)
    assert want["kind"] == "site" and got == want
    answer = site_answer(index_page)
    assert answer["kind"] == "site" and answer["sites"] == 1 and answer["markup"] == 0
    assert "Where it is raised (a known site: errkb has no fix for it):" in answer["heads"]
    assert "No known error matches this text." in answer["heads"]
    assert ("raised at vllm/sampling_params.py:696 in SamplingParams._verify_args when self.max_tokens is not None "
            "and self.max_tokens < 1; seen in vllm 0.14.0-0.34.0") in answer["text"]
    # the other sites that raise it (older releases) are listed too, each linked at its release
    assert "vllm/sampling_params.py:187" in answer["text"] and "seen in vllm 0.2.0-0.2.7" in answer["text"]
    assert "https://github.com/vllm-project/vllm/blob/62d4bc3c7/vllm/sampling_params.py#L696" in answer["links"]
    assert "Matches a known error" not in answer["text"]


def test_a_message_raised_in_hundreds_of_files_shows_a_few_and_folds_the_rest(built, index_page):
    """FlashInfer's generated kernels raise one check in hundreds of files: the index keeps one
    site for them with how many files raise it; the paste box shows the newest few sites, as
    explain's text does, folds any others under "and N more", and says the count."""
    db, _site = built
    text = "RuntimeError: tile: acc overlap reverses subtiles by index, which needs a uniform drain width"
    want = cli_outcome(db, text)
    sites = want["sites"][0]["sites"]
    copied = max(sites, key=lambda s: s["copies"] or 0)
    assert want["kind"] == "site" and copied["copies"] > 10
    assert site_outcome(index_page, text) == want
    shown = index_page.execute_script("""
const li = document.querySelector('#paste-answer li.site-match');
const more = li.querySelector('details.site-more > summary') || li.querySelector('p.site-more');
return {first: li.querySelectorAll(':scope > ul.site-places > li.site').length,
        folded: li.querySelectorAll('details.site-more li.site').length,
        summary: more && more.textContent};""")
    listed = min(5, len(sites))
    places = sum(s["copies"] or 1 for s in sites)
    assert shown == {"first": listed, "folded": len(sites) - listed,
                     "summary": f"… and {places - listed:,} more sites; generated copies: {copied['copies']:,} files of "
                                f"flashinfer {copied['release']} raise it, the index keeps the first"}


def test_a_curated_message_still_answers_with_its_record_first(built, index_page):
    """A message a curated record matches is that record; no known site is shown or loaded for it."""
    db, _site = built
    text = next(row["text"] for row in pastes() if row["kind"] == "exact")
    want = cli_outcome(db, text)
    got = site_outcome(index_page, text)
    assert want["kind"] == "match" and got == want
    answer = site_answer(index_page)
    assert answer["sites"] == 0 and "Where it is raised" not in answer["text"]
    assert answer["heads"][0].startswith("Matches")


def test_another_librarys_message_gets_no_site(built, index_page):
    db, _site = built
    for text in FOREIGN:
        want = cli_outcome(db, text)
        got = site_outcome(index_page, text)
        assert want["sites"] == [] and got == want, text
        assert "Where it is raised" not in site_answer(index_page)["text"]


def test_paste_box_agrees_with_explain_on_known_sites(built, index_page):
    """The site tier's answer (every matched pattern, its line and trust, every site with
    file, line, function, condition, kind, releases, commit and link, in order) equals
    explain --json's, on real site-only messages and on texts of sampled served patterns."""
    db, _site = built
    texts = SITE_PASTES + PRINTED_PASTES + sampled_site_texts()
    disagree = []
    kinds: Counter = Counter()
    for text in texts:
        want = cli_outcome(db, text)
        got = site_outcome(index_page, text)
        kinds[want["kind"]] += 1
        if got != want:
            disagree.append((text[:100], want, got))
    print("site parity:", f"{len(texts) - len(disagree)}/{len(texts)}", dict(kinds))
    assert disagree == []
    for text in WHITESPACE_PASTES:  # agreeing on nothing would prove nothing
        assert cli_outcome(db, text)["kind"] == "site", text
    # the quoted pastes whose site is read whole (an elided repr is read cut short: the CLI's alone)
    assert sum(cli_outcome(db, text)["kind"] == "site" for text in PRINTED_PASTES) >= 2
    torchrun = cli_outcome(db, TORCHRUN_PASTE)["sites"]
    assert [(s["trust"], s["line"]) for s in torchrun] == [("elastic", 1), ("elastic", 5)], torchrun
    assert kinds["site"] >= len(texts) // 2, kinds


def test_known_site_text_is_inserted_as_text(tmp_path, browser, monkeypatch):
    """Index text is untrusted: a pattern, file, function and condition holding markup show
    as text in the paste answer and never become elements or run."""
    import gzip

    import errkb.match.sites as sites_module

    header = {"format": "errkb-sites/1",
              "libraries": {"vllm": {"releases": [["0.9.0", None]], "repo": "vllm-project/vllm"}}}
    row = {"p": "<img src=x onerror=window\\.__pwned=1> must_be_set for (.+?) now", "l": "vllm",
           "f": "vllm/<script>window.__pwned=2</script>.py", "n": 7, "fn": "f\"><svg onload=window.__pwned=3>",
           "c": "x < 1 && <b>bold</b>", "k": "raise", "e": "ValueError", "r": "0.9.0"}
    index = tmp_path / "data" / "sites" / "sites.jsonl.gz"
    index.parent.mkdir(parents=True)
    index.write_bytes(gzip.compress((json.dumps(header) + "\n" + json.dumps(row) + "\n").encode()))
    monkeypatch.setattr(sites_module, "default_path", lambda: index)
    with Store.open(tmp_path / "store.duckdb") as store:
        assert store.ingest([data_dir()]).rejected == 0
        build_site(store, tmp_path / "site")
    browser.get((tmp_path / "site" / "index.html").as_uri())
    WebDriverWait(browser, 20).until(lambda d: "so far" not in d.find_element(By.ID, "count").text)
    text = "ValueError: <img src=x onerror=window.__pwned=1> must_be_set for abc now"
    got = site_outcome(browser, text)
    assert got["kind"] == "site" and len(got["sites"]) == 1
    site = got["sites"][0]["sites"][0]
    assert site["file"] == row["f"] and site["function"] == row["fn"] and site["condition"] == row["c"]
    assert site["url"] == f"https://github.com/vllm-project/vllm/blob/v0.9.0/{row['f']}#L7"
    answer = site_answer(browser)
    assert answer["markup"] == 0
    assert browser.execute_script("return document.querySelectorAll('#paste-answer svg, #paste-answer b').length") == 0
    assert "<img src=x onerror=window.__pwned=1> must_be_set for … now" in answer["text"]
    assert "when x < 1 && <b>bold</b>" in answer["text"]
    assert browser.execute_script("return window.__pwned === undefined")


def test_a_log_shows_its_known_error_then_its_other_lines_known_sites(built, index_page):
    """A pasted log with a curated error and an error line only a known site knows: the record
    answers, and after it the site, at the log line it is on, as `errkb explain --json` lists
    it; a line the record answers is never also shown as a site."""
    db, _site = built
    curated = next(row["text"] for row in pastes() if row["kind"] == "exact" and "\n" not in row["text"])
    log = "\n".join(["INFO starting", "2026-08-14 21:17:39 ERROR ValueError: max_tokens must be at least 1, got 0.",
                     "INFO step 1", curated, "INFO done"])
    result = CliRunner().invoke(cli, ["explain", "--db", str(db), "--json", log])
    want = json.loads(result.output)
    assert want["matches"] and [s["line"] for s in want["sites"]] == [2], want["sites"]
    got = site_outcome(index_page, log)
    assert (got["kind"], got["id"]) == ("match", want["matches"][0]["id"])
    shown = index_page.execute_script("""
const a = document.getElementById('paste-answer');
return Array.from(a.querySelectorAll('li.site-match')).map(li => ({
  tier: 'site', pattern: li.getAttribute('data-pattern'), line: Number(li.getAttribute('data-line')),
  trust: li.getAttribute('data-trust'), meaning: li.hasAttribute('data-meaning') ? li.getAttribute('data-meaning') : null,
  sites: Array.from(li.querySelectorAll('li.site')).map(s => JSON.parse(s.getAttribute('data-site')))}));""")
    assert shown == want["sites"]
    answer = site_answer(index_page)
    assert "Also in this text, raised at known sites (where, not a fix):" in answer["heads"]
    assert "line 2: max_tokens must be at least 1, got …." in answer["text"]
    # the curated line alone, twice, in a log: its record, and no site for it
    got = site_outcome(index_page, f"INFO a\n{curated}\nINFO b\n{curated}")
    assert got["kind"] == "match" and site_answer(index_page)["sites"] == 0


PRINTED_TEXTS = [
    "E       ValueError: bad\nE         second line\nE\nE       ",
    "E   a\nplain\nE   RuntimeError: x\nE     y",
    "err = Unsupported('torch.* op returned non-Tensor\\n  Explanation: it doesn\\'t trace...o this\\n')",
    "x = foo.bar.Baz(\"a\\tb\\x41\\u00e9\\U0001F600\\uD800 escapes \\d kept\\n\")",
    "it's a 'quote' and don't 'count\\n this one' ok",
    "cut off 'no closing quote\\n runs to the end",
    "lower(\"lowercase callee does not name a class\\n at all\")",
    "E" * 5 + "\nE E E E\nE\tno",
    "'short\\n'",
    "json {\"msg\": \"Line one of the message\\nLine two ... and more\\\\ path\"}",
    "ünïcödé 'ĉaractères accentués\\nsur deux lignes'",
    # an astral letter before a quote (an apostrophe) and in a called name; Python's white space
    # at a margin line's end (U+0085 is, U+FEFF is not): the review's cases
    "x = \U0001d400'first line of the message\\nsecond line of it'",
    "raise \U0001d400Error('first line of the message\\nsecond line of it')",
    "E   first line of the message here\ufeff\nE   second line",
    "E   first line of the message here\x85\nE   second line",
]


def test_the_boxs_printed_forms_are_explains(index_page):
    """errkb.text.printed's forms, ported: the same texts, first lines and kinds on edge cases
    (apostrophes, cut-off and unknown escapes, \\x/\\u/\\U and surrogates, elision, blank runs)."""
    from errkb.text.printed import printed_forms

    for text in PRINTED_TEXTS + PRINTED_PASTES:
        want = [[f.text, f.first_line, f.line_for_line] for f in printed_forms(text)]
        got = index_page.execute_script(
            "return window.errkbPrintedForms(arguments[0]).map(f => [f.text, f.first, f.lineForLine]);", text)
        assert got == want, text
    assert sum(bool(printed_forms(t)) for t in PRINTED_TEXTS) >= 7  # most of them quote a form
