"""`errkb enrich` as a streaming filter: framing, lossless pass-through, JSON lines,
counters, and real processes for pipes and signals."""

from __future__ import annotations

import base64
import json
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from errkb.cli import cli
from errkb.enrich.lines import LineEnricher, stream
from tests.support import SEED_ID, SEED_MESSAGE, SEED_SLUG, SEED_SOLUTION, build_store, seed_records

SITE = "https://errkb.example.org"
SEED_URL = f"{SITE}/errors/vllm-project/vllm/{SEED_SLUG}.html"
MATCHING_LINE = f"2026-08-14 21:17:39,123 ERROR [core.py:12] ValueError: {SEED_MESSAGE}"
ERRKB_BIN = Path(sys.executable).parent / "errkb"


def run_enrich(store_db: Path, data: bytes, *args: str):
    result = CliRunner().invoke(cli, ["enrich", "--db", str(store_db), *args], input=data)
    return result


def out_lines(result) -> list[str]:
    text = result.stdout_bytes.decode("utf-8")
    assert text == "" or text.endswith("\n"), "every output line ends in a newline"
    return text.split("\n")[:-1]  # not splitlines(): U+2028 inside a message is not a line end


# -- the output contract -----------------------------------------------------------


def test_matched_plain_line_gains_errkb_object_and_others_pass_in_order(store_db):
    data = f"first ordinary line\n{MATCHING_LINE}\nlast ordinary line\n".encode()
    result = run_enrich(store_db, data, "--site-url", SITE)
    assert result.exit_code == 0, result.output
    lines = [json.loads(x) for x in out_lines(result)]
    assert lines[0] == {"message": "first ordinary line"}
    assert lines[2] == {"message": "last ordinary line"}
    assert lines[1]["message"] == MATCHING_LINE
    errkb = lines[1]["errkb"]
    assert set(errkb) == {"tier", "id", "slug", "repo", "errorClass", "severity", "score", "solution", "url"}
    assert errkb["tier"] == "curated"
    assert (errkb["id"], errkb["slug"], errkb["repo"]) == (SEED_ID, SEED_SLUG, "vllm-project/vllm")
    assert (errkb["errorClass"], errkb["severity"]) == ("ValueError", "error")
    assert errkb["solution"] == SEED_SOLUTION
    assert errkb["url"] == SEED_URL
    assert isinstance(errkb["score"], float)


def test_url_is_relative_without_site_url(store_db, monkeypatch):
    monkeypatch.delenv("ERRKB_SITE_URL", raising=False)
    result = run_enrich(store_db, MATCHING_LINE.encode())
    assert json.loads(out_lines(result)[0])["errkb"]["url"] == f"errors/vllm-project/vllm/{SEED_SLUG}.html"


def test_site_url_from_environment(store_db, monkeypatch):
    monkeypatch.setenv("ERRKB_SITE_URL", SITE + "/")
    result = run_enrich(store_db, MATCHING_LINE.encode())
    assert json.loads(out_lines(result)[0])["errkb"]["url"] == SEED_URL


def test_each_line_gets_the_record_it_matches(tmp_path):
    # Variants only: the seed's own (unanchored) pattern would also match a variant's message.
    v1, v2 = seed_records()[1:]
    db = build_store(tmp_path / "variants.duckdb", [v1, v2])
    data = f"ValueError: {v2['errorMessage']}\nValueError: {v1['errorMessage']}\n".encode()
    result = run_enrich(db, data)
    assert [json.loads(x)["errkb"]["id"] for x in out_lines(result)] == [v2["id"], v1["id"]]


def test_json_line_keeps_every_field_byte_for_byte(store_db):
    # Odd spacing, key order, a float that json.dumps would rewrite, unicode: all kept.
    unmatched = '{"ts":"2026-08-14T21:17:39Z",  "level":"info","message":"GET / 200","latency":1.50,"user":"Zoë"}'
    matched = '{"ts":"2026-08-14T21:17:40Z","host":"web-1","message":' + json.dumps(f"ValueError: {SEED_MESSAGE}") + ',"n":1.50}'
    result = run_enrich(store_db, f"{unmatched}\n{matched}\n".encode())
    first, second = out_lines(result)
    assert first == unmatched
    assert second.startswith(matched[:-1] + ', "errkb": {')
    obj = json.loads(second)
    assert obj["errkb"]["id"] == SEED_ID
    assert {k: v for k, v in obj.items() if k != "errkb"} == json.loads(matched)


def test_json_field_dotted_path_and_literal_dotted_key(store_db):
    nested = json.dumps({"log": {"msg": SEED_MESSAGE}, "host": "a"})
    literal = json.dumps({"log.msg": SEED_MESSAGE, "host": "b"})
    top_level_only = json.dumps({"message": SEED_MESSAGE, "host": "c"})
    result = run_enrich(store_db, f"{nested}\n{literal}\n{top_level_only}\n".encode(), "--field", "log.msg")
    outs = [json.loads(x) for x in out_lines(result)]
    assert [o.get("errkb", {}).get("id") for o in outs] == [SEED_ID, SEED_ID, None]
    assert out_lines(result)[2] == top_level_only  # the message is read from --field only


def test_several_fields_first_present_wins(store_db):
    lines = [json.dumps({"log": SEED_MESSAGE}), json.dumps({"message": SEED_MESSAGE}), json.dumps({"msg": SEED_MESSAGE})]
    result = run_enrich(store_db, ("\n".join(lines) + "\n").encode(), "--field", "log", "--field", "message")
    outs = [json.loads(x) for x in out_lines(result)]
    assert ["errkb" in o for o in outs] == [True, True, False]


def test_non_string_field_passes_unmatched(store_db):
    line = json.dumps({"message": {"text": SEED_MESSAGE}})
    result = run_enrich(store_db, (line + "\n").encode())
    assert out_lines(result) == [line]


def test_reenriching_replaces_the_errkb_key(store_db):
    first = run_enrich(store_db, (MATCHING_LINE + "\n").encode(), "--site-url", SITE)
    again = run_enrich(store_db, first.stdout_bytes, "--site-url", SITE)
    obj = json.loads(out_lines(again)[0])
    assert obj == json.loads(out_lines(first)[0])
    assert out_lines(again)[0].count('"errkb"') == 1


@pytest.mark.parametrize("s", ["", " ", "\t "])
def test_a_null_errkb_member_is_enriched_as_if_absent(store_db, s):
    """A schema's empty default (``"errkb": null``) is no enrichment: the line is enriched,
    its top-level null members taken out, every other member kept byte for byte."""
    msg = json.dumps(MATCHING_LINE)
    lines = [  # (input, what the output holds before its errkb member)
        (f'{{"errkb":{s}null,{s}"message":{s}{msg},{s}"n":{s}1e999}}', f'{{"message":{s}{msg},{s}"n":{s}1e999'),
        (f'{{"message":{s}{msg},{s}"errkb"{s}:{s}null{s}}}', f'{{"message":{s}{msg}'),
        (f'{{"a":{s}"errkb",{s}"errkb":{s}null,{s}"message":{s}{msg},{s}"d":{s}{{"errkb":{s}null}}}}',
         f'{{"a":{s}"errkb",{s}"message":{s}{msg},{s}"d":{s}{{"errkb":{s}null}}'),
        (f'{{"message":{s}{msg},{s}"errkb":{s}null,{s}"errkb":{s}null}}', f'{{"message":{s}{msg}'),
        (f'{{"\\u0065rrkb":{s}null,{s}"message":{s}{msg}}}', f'{{"message":{s}{msg}'),
    ]
    unmatched = '{"message": "no match here", "errkb": null}'
    data = ("\n".join([line for line, _ in lines] + [unmatched]) + "\n").encode()
    result = run_enrich(store_db, data, "--json")
    out = out_lines(result)
    assert len(out) == len(lines) + 1
    assert out[-1] == unmatched  # unmatched: written as read
    for (_, kept), got in zip(lines, out):
        assert got.startswith(kept + ", " + '"errkb": {"id": "' + SEED_ID)
        assert json.loads(got)["errkb"]["id"] == SEED_ID
    assert json.loads(result.stderr)["already_enriched"] == 0


def test_only_matched_drops_the_rest(store_db):
    data = f"a\n{MATCHING_LINE}\nb\n{json.dumps({'message': 'c'})}\n".encode()
    result = run_enrich(store_db, data, "--only-matched")
    assert [json.loads(x)["message"] for x in out_lines(result)] == [MATCHING_LINE]


# -- nothing lost, whatever the bytes --------------------------------------------------


def test_invalid_utf8_round_trips_through_message_b64(store_db):
    raw = b"bad \xff\xfe bytes \xc3( and " + SEED_MESSAGE.encode()
    result = run_enrich(store_db, raw + b"\nok\n")
    first, second = (json.loads(x) for x in out_lines(result))
    assert base64.b64decode(first["message_b64"]) == raw
    assert first["message"] == raw.decode("utf-8", "replace")
    assert first["errkb"]["id"] == SEED_ID  # still matched on the decodable text
    assert second == {"message": "ok"}
    assert "1 lines were not valid UTF-8" in result.stderr


def test_nul_bytes_crlf_and_final_line_without_newline(store_db):
    data = b"nul\x00inside\r\nwindows line\r\nlone\rcarriage\nno newline at the end"
    result = run_enrich(store_db, data)
    assert [json.loads(x) for x in out_lines(result)] == [
        {"message": "nul\x00inside"},
        {"message": "windows line"},  # CRLF: the \r belongs to the line ending
        {"message": "lone\rcarriage"},  # a \r elsewhere is kept
        {"message": "no newline at the end"},
    ]


def test_broken_json_and_non_object_json_pass_as_plain_text(store_db):
    inputs = ['{"message": "unterminated', "{not json}", "[1, 2]", '"a string"', '{"a": NaN}', "{}"]
    result = run_enrich(store_db, ("\n".join(inputs) + "\n").encode())
    outs = out_lines(result)
    assert [json.loads(x) for x in outs[:5]] == [{"message": x} for x in inputs[:5]]
    assert outs[5] == "{}"


def test_del_character_and_escapes(store_db):
    # DEL marks line ends inside the escaper's fast path: a line holding one takes the other path.
    lines = ["del \x7f inside", 'tab\t"quoted" back\\slash \u2028 Zoë']
    for data in (lines[0] + "\n" + lines[1] + "\n", lines[1] + "\n"):
        result = run_enrich(store_db, data.encode())
        assert [json.loads(x)["message"] for x in out_lines(result)] == data.split("\n")[:-1]


def test_empty_lines_are_lines(store_db):
    result = run_enrich(store_db, b"\n\n\n")
    assert out_lines(result) == ['{"message": ""}'] * 3


def test_ten_megabyte_line(store_db):
    big = b"x" * (10 << 20) + b" ValueError: " + SEED_MESSAGE.encode()
    result = run_enrich(store_db, b"before\n" + big + b"\nafter\n")
    outs = out_lines(result)
    assert len(outs) == 3
    assert json.loads(outs[1])["message"].encode() == big
    assert json.loads(outs[2]) == {"message": "after"}


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.lists(
        st.one_of(
            st.binary(max_size=60).map(lambda b: b.replace(b"\n", b"")),
            st.text(max_size=40).map(lambda t: t.replace("\n", "").encode("utf-8", "surrogatepass")),
            st.sampled_from([SEED_MESSAGE.encode(), b'{"message": "x"}', b'{"message": 1}', b"{", b"\r", b"\x00",
                             b"del \x7f inside", b'tab\t"quoted" back\\slash']),
        ),
        max_size=30,
    ),
    st.integers(min_value=1, max_value=8),
    st.booleans(),
)
@example(lines=[b"\r"], batch=1, final_newline=False)  # a lone "\r" ending the input is kept
@example(lines=[b"a\r", b"\r"], batch=1, final_newline=True)
def test_property_one_line_out_per_line_in_and_each_round_trips(matcher, lines, batch, final_newline):
    data = b"\n".join(lines) + (b"\n" if final_newline and lines else b"")
    expected = data.split(b"\n")
    if expected and expected[-1] == b"":
        expected.pop()
    out = __import__("io").BytesIO()
    stream([__import__("io").BytesIO(data)], out, LineEnricher(matcher), batch=batch, handle_signals=False)
    written = out.getvalue()
    assert written == b"" or written.endswith(b"\n")
    outs = written.split(b"\n")[:-1] if written else []
    assert len(outs) == len(expected)
    for i, (raw, line) in enumerate(zip(expected, outs)):
        obj = json.loads(line)  # every output line is strict JSON
        # A "\r" before a "\n" is the line ending (CRLF); one ending the input is its own.
        terminated = i < len(expected) - 1 or data.endswith(b"\n")
        want = raw[:-1] if raw.endswith(b"\r") and terminated else raw
        if "message_b64" in obj:
            assert base64.b64decode(obj["message_b64"]) == want
        elif set(obj) <= {"message", "errkb"} and isinstance(obj.get("message"), str) and obj["message"].encode() == want:
            pass  # a plain-text line, wrapped
        else:  # a JSON object line: written unchanged, or with errkb spliced in
            assert line == want or json.loads(want) == {k: v for k, v in obj.items() if k != "errkb"}


# -- counters and usage errors -----------------------------------------------------------


def test_counters_on_stderr_and_as_json(store_db):
    data = f"{MATCHING_LINE}\nplain\n{MATCHING_LINE}\n".encode()
    text = run_enrich(store_db, data)
    assert text.stderr.splitlines()[0].startswith("errkb enrich: 3 lines, 2 matched (66.7%), ")
    assert text.stderr.splitlines()[1].split() == ["2", SEED_ID, f"vllm-project/vllm/{SEED_SLUG}"]
    as_json = run_enrich(store_db, data, "--json")
    counters = json.loads(as_json.stderr)
    assert (counters["lines"], counters["matched"]) == (3, 2)
    assert counters["top"] == [{"id": SEED_ID, "record": f"vllm-project/vllm/{SEED_SLUG}", "lines": 2}]
    assert counters["lines_per_s"] > 0
    assert run_enrich(store_db, data, "--quiet").stderr == ""


def test_reads_files_in_order_and_dash_for_stdin(store_db, tmp_path):
    a = tmp_path / "a.log"
    a.write_bytes(b"a1\na2-no-newline")
    b = tmp_path / "b.log"
    b.write_bytes(f"{MATCHING_LINE}\n".encode())
    result = run_enrich(store_db, b"from stdin\n", str(a), "-", str(b))
    assert [json.loads(x)["message"] for x in out_lines(result)] == ["a1", "a2-no-newline", "from stdin", MATCHING_LINE]


def test_missing_file_is_a_usage_error(store_db, tmp_path):
    result = run_enrich(store_db, b"", str(tmp_path / "nope.log"))
    assert result.exit_code == 2
    assert result.stderr == f"Error: {tmp_path / 'nope.log'}: no such file\n"
    assert result.stdout == ""


def test_missing_store_is_a_usage_error(tmp_path):
    result = CliRunner().invoke(cli, ["enrich", "--db", str(tmp_path / "none.duckdb")], input=b"x\n")
    assert result.exit_code == 2
    assert "none.duckdb: no such store" in result.stderr


# -- real processes: pipes and signals ---------------------------------------------------


def _spawn(store_db: Path, *args: str, **kw) -> subprocess.Popen:
    env = {**os.environ, "ERRKB_DB": str(store_db)}
    return subprocess.Popen([str(ERRKB_BIN), "enrich", *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env, **kw)


def _readline(pipe, timeout: float = 20.0) -> bytes:
    """One line from a pipe, failing (instead of hanging) when none comes in time."""
    fd = pipe.fileno()
    buf = b""
    deadline = time.monotonic() + timeout
    while not buf.endswith(b"\n"):
        left = deadline - time.monotonic()
        ready, _, _ = select.select([fd], [], [], max(left, 0))
        assert ready, f"no output line within {timeout}s (got {buf!r}): the filter stalled"
        chunk = os.read(fd, 1)
        assert chunk, f"pipe closed after {buf!r}"
        buf += chunk
    return buf


def test_live_consumer_gets_each_line_without_closing_input_then_sigterm_writes_the_rest(store_db):
    proc = _spawn(store_db)
    try:
        for i in range(3):
            proc.stdin.write(f"line {i}\n".encode())
            proc.stdin.flush()
            assert json.loads(_readline(proc.stdout)) == {"message": f"line {i}"}
        proc.stdin.write(MATCHING_LINE.encode() + b"\n")
        proc.stdin.flush()
        assert json.loads(_readline(proc.stdout))["errkb"]["id"] == SEED_ID
        # A line without its newline yet: read, but not complete. SIGTERM must still write it.
        proc.stdin.write(b"partial line")
        proc.stdin.flush()
        time.sleep(1.0)
        proc.send_signal(signal.SIGTERM)
        rest, err = proc.communicate(timeout=20)
    finally:
        proc.kill()
    assert proc.returncode == 0
    assert [json.loads(x) for x in rest.splitlines()] == [{"message": "partial line"}]
    assert b"Traceback" not in err
    assert err.decode().startswith("errkb enrich: 5 lines, 1 matched (20.0%)")


def test_sigusr1_prints_counters_while_running(store_db):
    proc = _spawn(store_db)
    try:
        proc.stdin.write(f"one\n{MATCHING_LINE}\n".encode())
        proc.stdin.flush()
        _readline(proc.stdout)
        _readline(proc.stdout)
        proc.send_signal(signal.SIGUSR1)
        report = _readline(proc.stderr).decode()
        assert report.startswith("errkb enrich: 2 lines, 1 matched (50.0%)")
        proc.stdin.write(b"three\n")
        out, err = proc.communicate(timeout=20)  # closes stdin: end of input
    finally:
        proc.kill()
    assert proc.returncode == 0
    assert [json.loads(x) for x in out.splitlines()] == [{"message": "three"}]
    rest_of_report, final = err.decode().split("\n", 1)
    assert rest_of_report.split() == ["1", SEED_ID, f"vllm-project/vllm/{SEED_SLUG}"]
    assert final.startswith("errkb enrich: 3 lines, 1 matched")


def test_closed_output_stops_quietly(store_db, tmp_path):
    big = tmp_path / "big.log"
    big.write_bytes(b"".join(f"line {i}\n".encode() for i in range(300_000)))
    proc = subprocess.Popen([str(ERRKB_BIN), "enrich", "--db", str(store_db), str(big)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    first = _readline(proc.stdout)
    proc.stdout.close()  # like `| head -1`
    err = proc.stderr.read()
    proc.wait(timeout=30)
    assert json.loads(first) == {"message": "line 0"}
    assert proc.returncode == 0
    assert b"Traceback" not in err and b"BrokenPipe" not in err
    assert err.startswith(b"errkb enrich: ")


def test_shell_pipeline_keeps_count_and_order(store_db, tmp_path):
    src = tmp_path / "in.log"
    lines = [MATCHING_LINE if i % 97 == 0 else f"{i} ordinary log line with some text" for i in range(50_000)]
    src.write_text("\n".join(lines) + "\n")
    out = subprocess.run(
        f"cat {src} | {ERRKB_BIN} enrich --db {store_db} --batch 7 -q | cat",
        shell=True, capture_output=True, check=True, timeout=120,
    ).stdout.splitlines()
    assert len(out) == len(lines)
    parsed = [json.loads(x) for x in out]
    assert [p["message"] for p in parsed] == lines
    assert sum("errkb" in p for p in parsed) == len(range(0, 50_000, 97))


def test_flush_writes_each_line_on_its_own(store_db):
    proc = _spawn(store_db, "--flush")
    try:
        proc.stdin.write(b"a\nb\nc\n")
        proc.stdin.flush()
        got = [json.loads(_readline(proc.stdout))["message"] for _ in range(3)]
        proc.communicate(timeout=20)
    finally:
        proc.kill()
    assert got == ["a", "b", "c"]


def test_closed_stdin_and_full_disk_are_one_line_errors(store_db):
    closed = subprocess.run(f"{ERRKB_BIN} enrich --db {store_db} <&-", shell=True, capture_output=True, timeout=60)
    assert (closed.returncode, closed.stderr) == (2, b"Error: stdin: closed; pipe lines in or name FILEs\n")
    full = subprocess.run(f"echo hello | {ERRKB_BIN} enrich --db {store_db} > /dev/full", shell=True, capture_output=True, timeout=60)
    assert (full.returncode, full.stderr) == (2, b"Error: stdout: cannot write: No space left on device\n")


@given(st.lists(st.text(max_size=30).map(lambda t: t.replace("\n", "").replace("\r", "")), min_size=1, max_size=20))
def test_block_escaping_writes_what_the_json_encoder_writes(lines):
    from errkb.enrich.lines import _wrap_block

    block = "\n".join(lines).encode("utf-8", "surrogatepass")
    try:
        block.decode("utf-8")
    except UnicodeDecodeError:
        return  # lone surrogates are not UTF-8: that block takes the message_b64 path
    wrapped = _wrap_block(block)
    expected = "".join('{"message": ' + json.encoder.encode_basestring(x) + "}\n" for x in lines).encode()
    if wrapped is None:  # control characters other than tab: escaped line by line instead
        assert any(c < " " and c != "\t" for x in lines for c in x)
    else:
        assert wrapped == expected
