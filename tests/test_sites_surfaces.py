"""The known-site tier on `errkb enrich` and `errkb search`, through the real command in a
real process over a real DuckDB store and the shipped site index: a line only a known site
knows is tagged tier site (where, releases, link; no fix), a curated line stays curated even
where a site raises the same message, another library's message gets no site."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.support import SEED_ID, SEED_MESSAGE

ROOT = Path(__file__).resolve().parents[1]
SITE_LINE = "2026-08-14 21:17:39 ERROR ValueError: max_tokens must be at least 1, got 0."
CURATED_LINE = f"2026-08-14 21:17:40 ERROR ValueError: {SEED_MESSAGE}"
FOREIGN = [
    "numpy.linalg.LinAlgError: Singular matrix",
    "ValueError: operands could not be broadcast together with shapes (3,) (4,)",
    "ValueError: Asking to pad but the tokenizer does not have a padding token. Please select a token to use as "
    "`pad_token` `(tokenizer.pad_token = tokenizer.eos_token e.g.)` or add a new pad token via "
    "`tokenizer.add_special_tokens({'pad_token': '[PAD]'})`.",
]


def _errkb(*args: str, stdin: str = "") -> subprocess.CompletedProcess:
    # ERRKB_CACHE_DIR: the test session's own cache (conftest), inherited
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "errkb", *args], input=stdin, capture_output=True, text=True,
                          env=env, timeout=300)


def test_enrich_tags_a_site_only_line_with_its_site_and_keeps_curated_lines_curated(store_db):
    lines = [SITE_LINE, CURATED_LINE, *FOREIGN, "INFO all good"]
    run = _errkb("enrich", "--db", str(store_db), "--json", stdin="\n".join(lines) + "\n")
    assert run.returncode == 0, run.stderr
    out = [json.loads(x) for x in run.stdout.splitlines()]
    assert [o["message"] for o in out] == lines
    site = out[0]["errkb"]
    assert site["tier"] == "site"
    assert (site["library"], site["file"], site["function"]) == ("vllm", "vllm/sampling_params.py",
                                                                 "SamplingParams._verify_args")
    assert "max_tokens < 1" in site["condition"] and site["releases"] and isinstance(site["line"], int)
    assert site["url"].startswith("https://github.com/vllm-project/vllm/blob/")
    assert not {"solution", "id", "slug", "score"} & set(site), "a known site is never a fix"
    # the seed's message is also raised at a known site in vLLM: the curated record wins
    curated = out[1]["errkb"]
    assert (curated["tier"], curated["id"]) == ("curated", SEED_ID) and curated["solution"]
    assert all("errkb" not in o for o in out[2:]), [o for o in out[2:] if "errkb" in o]
    counters = json.loads(run.stderr.strip().splitlines()[-1])
    assert (counters["matched"], counters["sites"]) == (1, 1)


def test_enrich_no_sites_turns_the_tier_off(store_db):
    run = _errkb("enrich", "--db", str(store_db), "--no-sites", "-q", stdin=f"{SITE_LINE}\n{CURATED_LINE}\n")
    assert run.returncode == 0, run.stderr
    out = [json.loads(x) for x in run.stdout.splitlines()]
    assert "errkb" not in out[0] and out[1]["errkb"]["tier"] == "curated"


def test_search_lists_known_sites_after_records_labelled_as_sites(store_db):
    run = _errkb("search", "--db", str(store_db), "--json", "max_tokens", "must", "be", "at", "least")
    out = json.loads(run.stdout)
    sites = [r for r in out if r["tier"] == "site"]
    assert sites and any(s["file"] == "vllm/sampling_params.py" for r in sites for s in r["sites"])
    tiers = [r["tier"] for r in out]
    assert tiers == sorted(tiers, key=lambda t: t == "site"), "records first, then known sites"
    assert all("solution" not in r and "fix" not in r for r in sites)
    # no record holds these words: a site is not a fix, so the exit code says "no record" (1)
    assert run.returncode == (0 if len(sites) < len(out) else 1)
    text = _errkb("search", "--db", str(store_db), "max_tokens", "must", "be", "at", "least")
    assert "known site, no fix: max_tokens must be at least 1" in text.stdout
    assert "vllm/sampling_params.py" in text.stdout


def test_search_curated_first_and_foreign_words_get_no_site(store_db):
    run = _errkb("search", "--db", str(store_db), "--json", *SEED_MESSAGE.split()[:8])
    out = json.loads(run.stdout)
    assert run.returncode == 0 and out[0]["tier"] == "curated" and out[0]["id"] == SEED_ID
    assert all(r["tier"] == "curated" for r in out[: next((k for k, r in enumerate(out) if r["tier"] == "site"),
                                                          len(out))])
    foreign = _errkb("search", "--db", str(store_db), "--json", "Singular", "matrix", "LinAlgError")
    assert [r for r in json.loads(foreign.stdout) if r["tier"] == "site"] == []


def test_the_batch_path_finds_what_the_per_text_path_finds():
    """enrich's batch reader and explain's per-text reader give each line the same best site,
    lines holding a short word one pattern is keyed on (" request") among them."""
    from errkb.match.sites import SiteIndex

    index = SiteIndex.load()
    lines = [SITE_LINE, CURATED_LINE, *FOREIGN, "INFO all good", "",
             "RuntimeError: Communication failed during all_reduce request: peer reset",
             "GET /v1/completions request 200 OK",
             "RuntimeError: CUDA error: device-side assert triggered",
             "RuntimeError: CUDA error: no kernel image is available for execution on the device"]
    batch = index.match_lines(lines)
    for line, got in zip(lines, batch):
        each = index.match(line)
        assert (got.pattern if got else None) == (each[0].pattern if each else None), line
    assert batch[0].sites[0].file == "vllm/sampling_params.py"
    assert batch[-2].meaning and batch[-1].meaning  # the CUDA table, in the same scan
    assert batch[2:5] == [None, None, None]
    assert batch[-4] is not None and batch[-3] is None


def test_explain_of_a_log_names_the_log_line_of_each_known_site(store_db):
    """A log with a curated error and a message only a known site knows: the curated answer
    first, then the site, given the log line it is on (not the line within its message)."""
    log = ["INFO starting", "INFO loading weights", SITE_LINE, "INFO step 1", CURATED_LINE, "INFO done"]
    run = _errkb("explain", "--db", str(store_db), "--json", stdin="\n".join(log) + "\n")
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout)
    assert [m["id"] for m in out["matches"]] == [SEED_ID]
    assert [(s["line"], s["sites"][0]["file"]) for s in out["sites"]] == [(3, "vllm/sampling_params.py")]
    text = _errkb("explain", "--db", str(store_db), stdin="\n".join(log) + "\n").stdout
    assert "Also in this log, raised at known sites (where, not a fix):\n  line 3: max_tokens must be at least 1" in text


def test_a_message_raised_in_hundreds_of_generated_files_lists_a_few_in_text(store_db):
    """FlashInfer's generated kernels raise one check in hundreds of files (it printed 2,825
    lines): the index keeps one site for them, the first file's, with how many files raise it;
    the text answer says so."""
    paste = "RuntimeError: tile: acc overlap reverses subtiles by index, which needs a uniform drain width"
    data = json.loads(_errkb("explain", "--db", str(store_db), "--json", paste).stdout)
    (match,) = data["sites"]
    copied = max(match["sites"], key=lambda s: s["copies"] or 0)
    assert copied["copies"] > 10 and len(match["sites"]) < copied["copies"]
    assert all(s["library"] == "flashinfer" for s in match["sites"])
    places, shown = sum(s["copies"] or 1 for s in match["sites"]), min(5, len(match["sites"]))
    text = _errkb("explain", "--db", str(store_db), paste).stdout
    assert text.count("raised at") == shown
    assert (f"… and {places - shown:,} more sites; generated copies: {copied['copies']:,} files of flashinfer "
            f"{copied['release']} raise it, the index keeps the first (errkb explain --json lists the sites it keeps)"
            ) in " ".join(text.split())  # the text answer wraps its lines
    assert len(text.splitlines()) < 60
    plain = _errkb("sites", "match", paste).stdout
    assert plain.count("raised at") == shown and f"and {places - shown:,} more sites; generated copies" in plain


def test_explain_of_a_paste_cut_short_gives_the_site_of_the_message_it_begins(store_db):
    """An issue's title stops inside vLLM's message (vllm#10990): no whole message matches, so
    explain reads it as cut short, gives the site and says so in text and JSON."""
    title = "ValueError: Model architectures ['Qwen2ForSequenceClassification'] are not supported for now"
    out = json.loads(_errkb("explain", "--db", str(store_db), "--json", title).stdout)
    assert out["matches"] == [] and out["sites"], out
    assert all(m["truncated"] for m in out["sites"])
    assert out["sites"][0]["sites"][0]["file"] == "vllm/model_executor/models/registry.py"
    text = _errkb("explain", "--db", str(store_db), title).stdout
    assert "the text stops inside this message (cut short)" in text
    # the same words as a whole message of their own, nothing after a sentence's last word: no site
    whole = "ValueError: hidden_size must be divisible by num_attention_heads"
    assert json.loads(_errkb("explain", "--db", str(store_db), "--json", whole).stdout)["sites"] == []


def test_a_long_paste_that_stops_inside_its_last_message_gets_its_site(store_db, tmp_path):
    """Over 50 lines, explain reads the paste as a log; when nothing in it matches and its
    last message stops inside one a library raises, that message's site is its answer, with
    the log's line number, marked cut short."""
    lines = [f"INFO 06-12 10:{n:02d}:00 loader.py:42] loading shard {n} of 60" for n in range(60)]
    title = "ValueError: Model architectures ['Qwen2ForSequenceClassification'] are not supported for now"
    log = tmp_path / "engine.log"
    log.write_text("\n".join([*lines, title]) + "\n")
    out = json.loads(_errkb("explain", "--db", str(store_db), "--json", "--file", str(log)).stdout)
    assert out["matches"] == [] and out["sites"], out
    site = out["sites"][0]
    assert site["truncated"] and site["line"] == 61
    assert site["sites"][0]["file"] == "vllm/model_executor/models/registry.py"
    # the same log with a later line that is no message cut short: nothing is claimed
    log.write_text("\n".join([*lines, title, "INFO 06-12 10:59:59 engine.py:1] shutting down"]) + "\n")
    assert json.loads(_errkb("explain", "--db", str(store_db), "--json", "--file", str(log)).stdout)["sites"] == []


GRAPH_BREAK = ("torch._dynamo.exc.Unsupported: can't handle functions not implemented in python\n"
               "  Explanation: Dynamo can only handle functions defined in python\n"
               "  Hint: Move usage of this function out of `torch.compile` region")


def test_a_paste_that_quotes_its_message_gets_the_site_of_the_message_as_printed(store_db):
    """pytest's "E   " margin and a repr with its line breaks written "\\n" hide a message that
    spans lines from its pattern; explain reads each as the program printed it and gives the
    site the plain message gets, on the line the quoted message begins."""
    def sites(text: str) -> list:
        return json.loads(_errkb("explain", "--db", str(store_db), "--json", text).stdout)["sites"]

    plain = sites(GRAPH_BREAK)
    assert plain and plain[0]["sites"][0]["file"] == "torch/_dynamo/variables/functions.py", plain
    margin = "\n".join("E" + " " * 15 + line for line in GRAPH_BREAK.split("\n"))
    pytest_paste = f">       return fn(*args)\n{margin}\n\ntests/test_compile.py:42: Unsupported"
    quoted = sites(pytest_paste)
    assert [s["pattern"] for s in quoted] == [s["pattern"] for s in plain] and quoted[0]["line"] == 2
    message = GRAPH_BREAK.split(": ", 1)[1].replace("\n", "\\n").replace("'", "\\'")
    assert [s["pattern"] for s in sites(f"cur_exn = Unsupported('{message}\\n')")] == [s["pattern"] for s in plain]
    # a margin or a literal around a message no library raises: still nothing
    assert sites("E       RuntimeError: my own check failed\nE         Explanation: mine") == []
    assert sites("x = MyError('my own check failed\\n  Explanation: mine')") == []


def test_a_long_pytest_log_gives_the_site_of_the_message_in_its_margin(store_db, tmp_path):
    """Over 50 lines explain reads a log: a run of pytest's margin is one message there, so a
    message spanning lines gets its site, at the run's first line."""
    session = [f"tests/test_compile.py::test_case_{n} PASSED" for n in range(60)]
    whole = GRAPH_BREAK + "\n\n  Developer debug context: functools.partial(<function f at 0x7a2080691b20>)"
    margin = [("E" + " " * 15 + line).rstrip() for line in whole.split("\n")]
    log = tmp_path / "pytest.log"
    log.write_text("\n".join([*session, ">       return fn(*args)", *margin, "",
                              "tests/test_compile.py:42: Unsupported"]) + "\n")
    out = json.loads(_errkb("explain", "--db", str(store_db), "--json", "--file", str(log)).stdout)
    assert out["matches"] == [] and out["sites"], out
    assert out["sites"][0]["line"] == 62 and not out["sites"][0].get("truncated")
    assert out["sites"][0]["sites"][0]["file"] == "torch/_dynamo/variables/functions.py"


def test_a_message_the_paste_wrapped_over_lines_gets_its_site_at_the_line_it_begins(store_db):
    """An issue's editor or a terminal wraps a long one-line message: its lines are joined back
    for the known-site tier, as they are for the records, and the site says the line the
    message begins on."""
    wrapped = ('  File "/app/serve.py", line 12, in generate\n'
               "ValueError: The decoder prompt (length 337896) is longer than the maximum model length of 128000. "
               "Make sure that `max_model_len` is no smaller than the number of text tokens plus multimodal tokens. "
               "For image inputs, the\n number of image tokens depends on the number of images, and possibly their "
               "aspect ratios as well.")
    out = json.loads(_errkb("explain", "--db", str(store_db), "--json", wrapped).stdout)
    assert out["matches"] == [] and out["sites"], out
    assert out["sites"][0]["line"] == 2 and not out["sites"][0].get("truncated")
    assert {s["file"] for s in out["sites"][0]["sites"]} >= {"vllm/v1/engine/processor.py"}
    # two other libraries' messages on two lines, joined, are no message of ours
    joined = json.loads(_errkb("explain", "--db", str(store_db), "--json", "\n".join(FOREIGN)).stdout)
    assert joined["sites"] == []


def test_where_a_quoted_or_wrapped_message_begins_is_a_line_of_the_paste(store_db):
    """A site read from a form of the paste says the paste's line: a wrapped message's first
    words found across its line breaks, a curated table's entry by its text (no crash), a
    decoded literal's line for every line of it, pytest's coloured margin read too."""
    def sites(text: str) -> list:
        out = _errkb("explain", "--db", str(store_db), "--json", text)
        assert out.returncode in (0, 1), out.stderr
        return [(s["pattern"][:40], s["line"]) for s in json.loads(out.stdout)["sites"]]

    experimental = ("'trtllm_gen' is an experimental FlashInfer API: it provides no\ncompatibility guarantees and may "
                    "change or be removed without deprecation.")
    assert sites("INFO loading 'llama' weights\nwhile loading the kernel:\n" + experimental) == [
        ("'(.+?)' is an experimental FlashInfer AP", 3)]
    ptx = sites("INFO step 3\nRuntimeError: CUDA error: the provided PTX was compiled with an\nunsupported toolchain.")
    assert ptx == [("the provided PTX was compiled with an un", 2)]
    literal = "w = Foo('" + experimental.replace("'", "\\'").replace("\n", "\\n") + "')"
    assert sites("first line\nsecond line\n" + literal) == [("'(.+?)' is an experimental FlashInfer AP", 3)]
    coloured = "\n".join(f"\x1b[1m\x1b[31mE               {line}\x1b[0m" for line in GRAPH_BREAK.split("\n"))
    assert [line for _, line in sites(">       fn(x)\n" + coloured)] == [2]


def test_a_message_a_wrapper_carries_is_read_alone_for_its_site(store_db):
    """A "half" (prose) message inside a wrapper's text: pydantic's "Value error, ...
    [type=value_error, input_value=...]" (intel-xpu-backend-for-triton#7166), openai's client
    "Error code: 400 - {'object': 'error', 'message': '...', ...}" (vllm#13513), vLLM's JSON
    error body. The wrapper's words are not text the message is lost in: the message is read
    alone, its site at the line it is on. The same words outside a wrapper, under as much
    foreign text, stay unserved."""
    pydantic = ("pydantic_core._pydantic_core.ValidationError: 1 validation error for VllmConfig\n"
                "Value error, Model Runner V2 does not yet support: ngram/ngram_gpu speculative decoding "
                "[type=value_error, input_value=ArgsKwargs((), {'model_co... 'shutdown_timeout': 0}), "
                "input_type=ArgsKwargs]\nFor further information visit https://errors.pydantic.dev/2.13/v/value_error")
    client = ("openai.BadRequestError: Error code: 400 - {'object': 'error', 'message': 'At most 1 image(s) may be "
              "provided in one request.', 'type': 'BadRequestError', 'param': None, 'code': 400}")
    body = ('{"object":"error","message":"At most 1 image(s) may be provided in one request.",'
            '"type":"BadRequestError","param":null,"code":400}')
    for text, line, file in ((pydantic, 2, "vllm/config/vllm.py"), (client, 1, "vllm/entrypoints/chat_utils.py"),
                             (body, 1, "vllm/entrypoints/chat_utils.py")):
        out = json.loads(_errkb("explain", "--db", str(store_db), "--json", text).stdout)
        assert out["matches"] == [] and out["sites"], (text, out)
        assert out["sites"][0]["line"] == line and out["sites"][0]["trust"] == "half", out["sites"][0]
        assert file in {s["file"] for s in out["sites"][0]["sites"]}
    loose = ("We saw this on our cluster last night after the upgrade to the new image: At most 1 image(s) may be "
             "provided in one request. and then the server stopped answering entirely")
    assert json.loads(_errkb("explain", "--db", str(store_db), "--json", loose).stdout)["sites"] == []


def test_a_whole_message_another_library_continues_lists_that_library_too(store_db):
    """FlashInfer 0.7.4's experimental cuDNN frontend raises torch's "view size is not compatible
    ... subspaces)" without torch's "Use .reshape(...) instead.": a title that stops there
    (temporal-shift-module#235, a PyTorch user) is whole for FlashInfer's and cut short for
    torch's. Both are listed, the whole match first; the same library's longer wording in
    another release is not (its release list already says where the message stands)."""
    title = ("view size is not compatible with input tensor's size and stride (at least one dimension spans across "
             "two contiguous subspaces).")
    out = json.loads(_errkb("explain", "--db", str(store_db), "--json", title).stdout)
    assert [(m.get("truncated", False), m["sites"][0]["library"]) for m in out["sites"]] == [
        (False, "flashinfer"), (True, "torch")], out["sites"]
    assert out["sites"][1]["sites"][0]["file"] == "aten/src/ATen/native/TensorShape.cpp"
    same = json.loads(_errkb("explain", "--db", str(store_db), "--json",
                             "ValueError: At most 1 image(s) may be provided in one request.").stdout)
    assert [m.get("truncated", False) for m in same["sites"]] == [False], same["sites"]
    # only on the whole match's own line: a whole vLLM message on line 1 says nothing of line 2,
    # which the PyTorch table answers (review)
    two = json.loads(_errkb("explain", "--db", str(store_db), "--json", "ValueError: max_tokens must be at least 1, "
                            "got 0.\nRuntimeError: Expected all tensors to be on the same device").stdout)
    assert not any(m.get("truncated") for m in two["sites"]), two["sites"]
