"""errkb.text.normalize: text as it really arrives -> the messages patterns were written for."""

from __future__ import annotations

import io
import itertools
import tracemalloc

import pytest

from errkb.text.normalize import (
    iter_messages,
    line_messages,
    prefix_length,
    split_error_class,
    strip_ansi,
    strip_prefixes,
    text_messages,
    to_text,
)

MSG = "Flashinfer allreduce quantization fusion is not supported for multi-node allreduce with 'trtllm' backend. Please use 'mnnvl' backend instead."


def texts(messages):
    return [m.text for m in messages]


def test_header_only_keeps_a_loggers_name():
    """prefix_length(names=False): the header proper (what the known-site tier's half rule does
    not count), a logger's or module's name after the level kept: it says whose line it is."""
    for line, rest in [
        ("2026-12-05 03:00:00,123 ERROR wandb.sdk.sender: Failed", "wandb.sdk.sender: Failed"),
        ("ERROR:wandb.sdk.sender:Failed", "wandb.sdk.sender:Failed"),
        ("2026-08-02 17:46:54.764 | ERROR    | uvicorn.error:885 - TypeError: x", "uvicorn.error:885 - TypeError: x"),
        ("(EngineCore_DP0 pid=1) ERROR 12-15 18:57:10 [core.py:918] ValueError: x", "ValueError: x"),
        ("WARNING 01-10 21:49:05 model_runner_base.py:143] Failed", "Failed"),
        ("Aug 16 03:07:54 worker-2 python[61178]: KeyError: 'x'", "KeyError: 'x'"),
    ]:
        assert line[prefix_length(line, names=False):] == rest, line
    # the default still takes the name off, as the records' matcher wants
    assert strip_prefixes("2026-12-05 03:00:00,123 ERROR wandb.sdk.sender: Failed") == "Failed"


@pytest.mark.parametrize(
    "line, body",
    [
        ("2026-08-05 15:26:02,985 DEBUG [gpu_worker.py:337] sending heartbeat", "sending heartbeat"),
        ("2026-08-02T18:07:14.645Z ERROR boom", "boom"),
        ("INFO 08-14 21:17:39 [core.py:123] Engine started", "Engine started"),
        ("(EngineCore_DP0 pid=1234) INFO 08-14 21:17:39 [core.py:123] Engine started", "Engine started"),
        ("(Worker pid=77) ERROR 08-14 21:17:39 [worker.py:9] ValueError: x", "ValueError: x"),
        ("(VllmWorker rank=0 pid=3) WARNING 08-14 21:17:39 [a.py:1] careful", "careful"),
        # vLLM before 0.7: the file without a bracket
        ("WARNING 01-10 21:49:05 model_runner_base.py:143] Failed to pickle inputs", "Failed to pickle inputs"),
        ("INFO 06-05 10:00:00 llm_engine.py:161] Initializing an LLM engine", "Initializing an LLM engine"),
        ("[rank0]: ValueError: bad rank", "ValueError: bad rank"),
        ("[rank12]:   File \"x.py\", line 3, in f", "  File \"x.py\", line 3, in f"),
        ("Aug 16 03:07:54 worker-2 python[61178]: KeyError: 'x'", "KeyError: 'x'"),
        ("I0816 01:13:49.301394    2120 prober.go:107] probe failed", "probe failed"),
        # PyTorch's C++ (c10) log header: glog's, bracketed, no thread, a 3- or 4-digit date; before
        # 2.2 the level alone
        ("[E521 15:43:02.707733876 socket.cpp:1023] [c10d] The client socket has timed out",
         "[c10d] The client socket has timed out"),
        ("[W1220 15:40:19.894087820 TCPStore.cpp:358] [c10d] TCP client failed",
         "[c10d] TCP client failed"),
        ("[rank0]:[E ProcessGroupNCCL.cpp:563] [Rank 0] Watchdog caught collective operation timeout",
         "[Rank 0] Watchdog caught collective operation timeout"),
        ("ERROR:app.db:ValueError: Could not deduce type from expr.", "ValueError: Could not deduce type from expr."),
        ("2026-08-23 00:24:21.529 | ERROR    | ingest:312 - JaxprTypeError: oops", "JaxprTypeError: oops"),
        ("[ERROR] disk full", "disk full"),
        # pytest's failure margin, and one after a CI runner's timestamp
        ("E       RuntimeError: CUDA error: out of memory", "RuntimeError: CUDA error: out of memory"),
        ("2026-03-01T10:00:00.123Z E   AssertionError: bad", "AssertionError: bad"),
        ("E  two spaces is no margin", "E  two spaces is no margin"),
        ("plain message without prefix", "plain message without prefix"),
    ],
)
def test_log_prefixes_are_stripped(line, body):
    assert strip_prefixes(line) == body


def test_prefix_stripping_keeps_message_words_that_look_like_levels():
    # only the prefix goes; "ERROR" inside the message stays
    assert strip_prefixes("2026-08-05 15:26:02,985 INFO [a.py:1] ERROR count is 3") == "ERROR count is 3"
    assert prefix_length("ValueError: x") == 0


def test_ansi_colour_codes_are_removed():
    coloured = "\x1b[1;31mERROR\x1b[0m 08-14 21:17:39 [core.py:1] \x1b[33mValueError\x1b[0m: " + MSG
    assert strip_ansi(coloured) == "ERROR 08-14 21:17:39 [core.py:1] ValueError: " + MSG
    assert MSG in texts(line_messages(coloured))


@pytest.mark.parametrize(
    "line",
    [
        '{"level": "error", "message": "ValueError: ' + MSG.replace("'", "\\u0027") + '"}',
        '{"ts": "2026-08-02T16:45:15.960Z", "level": "error", "msg": "ValueError: ' + MSG + '", "pid": 1}',
        '{"log": "ERROR 08-14 21:17:39 [core.py:1] ValueError: ' + MSG + '\\n", "stream": "stderr"}',
        '{"error": {"type": "ValueError", "message": "' + MSG + '"}}',
    ],
)
def test_json_log_lines_yield_their_message(line):
    found = line_messages(line)
    assert MSG in texts(found)


def test_error_class_is_split_off_dotted_names_too():
    assert split_error_class("ValueError: bad") == ("ValueError", "bad")
    assert split_error_class("torch.OutOfMemoryError: CUDA out of memory") == ("torch.OutOfMemoryError", "CUDA out of memory")
    assert split_error_class("Note: this is not an error class") == (None, "Note: this is not an error class")
    # in a traceback any class name counts
    assert split_error_class("KeyboardInterrupt", in_traceback=True) == ("KeyboardInterrupt", "")
    forms = line_messages("[rank0]: ValueError: " + MSG)
    assert any(m.text == MSG and m.error_class == "ValueError" for m in forms)


TRACEBACK = f"""Traceback (most recent call last):
  File "/usr/lib/python3.12/site-packages/vllm/distributed/device_communicators/flashinfer_all_reduce.py", line 221, in get_flashinfer_allreduce_quant_workspace
    raise ValueError(
    ^^^^^^^^^^^^^^^^^
ValueError: {MSG}
"""


def test_traceback_final_exception_line_is_the_message():
    found = text_messages(TRACEBACK)
    assert any(m.text == MSG and m.error_class == "ValueError" and m.source == "traceback" for m in found)


def test_chained_exceptions_are_all_candidates():
    text = f"""Traceback (most recent call last):
  File "a.py", line 1, in f
KeyError: 'backend'

The above exception was the direct cause of the following exception:

Traceback (most recent call last):
  File "b.py", line 2, in g
RuntimeError: workspace init failed

During handling of the above exception, another exception occurred:

Traceback (most recent call last):
  File "c.py", line 3, in h
ValueError: {MSG}"""
    found = text_messages(text)
    classes = {(m.error_class, m.text) for m in found}
    assert ("KeyError", "'backend'") in classes
    assert ("RuntimeError", "workspace init failed") in classes
    assert ("ValueError", MSG) in classes
    [block] = list(iter_messages(text.split("\n")))
    assert (block.first_line, block.last_line, block.kind) == (1, 15, "traceback")
    assert block.error_class == "ValueError" and block.text == MSG


def test_message_wrapped_over_lines_is_joined():
    half = MSG.index(" with 'trtllm'")
    wrapped = "ValueError: " + MSG[:half] + "\n" + MSG[half + 1:]
    assert MSG in texts(text_messages(wrapped))
    tb = "Traceback (most recent call last):\n  File \"x.py\", line 1, in f\nValueError: " + MSG[:half] + "\n" + MSG[half + 1:]
    assert MSG in texts(text_messages(tb))


def test_windows_line_endings():
    text = TRACEBACK.replace("\n", "\r\n")
    assert MSG in texts(text_messages(text))
    assert MSG in texts(line_messages("ValueError: " + MSG + "\r"))
    [msg] = list(iter_messages(["[rank0]: ValueError: " + MSG + "\r\n"]))
    assert msg.text == MSG


def test_invalid_utf8_never_raises():
    data = b"ValueError: caf\xe9 \xff\xfe " + MSG.encode()
    text = to_text(data)
    assert "\ufffd" in text and MSG in text
    assert to_text("lone \udce9 surrogate") == "lone \ufffd surrogate"
    assert any(t.endswith(MSG) for t in texts(line_messages(data)))
    assert line_messages(data)[-1].error_class == "ValueError"
    assert [m.text for m in iter_messages([b"\xff\xfe", b"KeyError: \xc3"])] == ["\ufffd\ufffd", "\ufffd"]


def test_vllm_traceback_with_per_line_prefixes_is_one_block():
    prefix = "(EngineCore_DP0 pid=4242) ERROR 08-14 21:17:39 [core.py:710] "
    lines = [
        "(EngineCore_DP0 pid=4242) INFO 08-14 21:17:38 [core.py:90] starting",
        prefix + "Traceback (most recent call last):",
        prefix + '  File "/x/site-packages/vllm/v1/engine/core.py", line 701, in run',
        prefix + "    self.step()",
        prefix + "ValueError: " + MSG,
        "(EngineCore_DP0 pid=4242) INFO 08-14 21:17:40 [core.py:99] shutting down",
    ]
    messages = list(iter_messages(lines))
    assert [(m.first_line, m.last_line, m.kind) for m in messages] == [(1, 1, "line"), (2, 5, "traceback"), (6, 6, "line")]
    assert messages[1].text == MSG and messages[1].error_class == "ValueError"
    assert messages[2].text == "shutting down"


def test_iter_messages_streams_in_constant_memory():
    tb = ["Traceback (most recent call last):"] + ['  File "x.py", line 1, in f'] * 50 + ["ValueError: boom"]
    ordinary = ["2026-08-05 15:26:02,985 INFO [a.py:1] request served"] * 10

    def endless():
        for _ in range(3000):
            yield from ordinary
            yield from tb

    tracemalloc.start()
    count = 0
    for i, _msg in enumerate(iter_messages(endless())):
        count += 1
        if i == 1000:
            tracemalloc.reset_peak()
    _current, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert count == 3000 * 11
    # 183k lines streamed; the peak after warm-up stays tiny (no accumulation)
    assert peak < 2_000_000


def test_huge_traceback_is_capped_not_accumulated():
    lines = itertools.chain(["Traceback (most recent call last):"], ("  frame line" for _ in range(200_000)), ["ValueError: " + "x" * 500_000])
    [msg] = list(iter_messages(lines))
    assert msg.last_line == 200_002 and len(msg.text) <= 64 * 1024


def test_empty_text():
    assert texts(text_messages("")) == [""]
    assert list(iter_messages([])) == []
    assert list(iter_messages(io.StringIO(""))) == []


@pytest.mark.parametrize(("line", "message", "error_class"), [
    # pydantic v2 prints a validator's exception under "1 validation error for X"
    ("  Value error, max_num_batched_tokens (8192) is smaller than max_model_len (131072). "
     "[type=value_error, input_value=ArgsKwargs((), {'model': 'm'}), input_type=ArgsKwargs]",
     "max_num_batched_tokens (8192) is smaller than max_model_len (131072).", "ValueError"),
    ("  Value error, GPU memory utilization must be less than 1.0. Got 1.5.",
     "GPU memory utilization must be less than 1.0. Got 1.5.", "ValueError"),
    ("  Assertion failed, tensor_parallel_size must divide heads [type=assertion_error, input_value={}, input_type=dict]",
     "tensor_parallel_size must divide heads", "AssertionError"),
])
def test_a_pydantic_validation_line_yields_the_validators_message(line, message, error_class):
    last = line_messages(line)[-1]
    assert (last.text, last.error_class) == (message, error_class)


def test_a_cut_pydantic_paste_still_finds_its_message():
    text = ("ValidationError: 1 validation error for SchedulerConfig\n"
            "  Value error, max_num_batched_tokens (8192) is smaller than max_model_len (131072). ...")
    forms = {(m.text, m.error_class) for m in text_messages(text)}
    assert ("max_num_batched_tokens (8192) is smaller than max_model_len (131072). ...", "ValueError") in forms


def test_a_run_of_pytests_margin_is_one_message_as_printed():
    """pytest shows the exception with "E" and the test's indentation before each line: a run
    of such lines is one message, its class split off and its lines as the program printed them;
    a traceback inside the margin gives its last exception."""
    lines = [">       fn(x)", "E               torch._dynamo.exc.Unsupported: can't handle it",
             "E                 Explanation: Dynamo can only handle functions", "E",
             "E                 Developer debug context: x", "", "tests/x.py:42: Unsupported",
             "E   Traceback (most recent call last):", 'E     File "x.py", line 3, in f',
             "E       raise ValueError('bad')", "E   ValueError: bad thing", "x.py:3: ValueError"]
    messages = [(m.kind, m.first_line, m.last_line, m.text, m.error_class) for m in iter_messages(lines)]
    assert messages[1] == ("pytest", 2, 5, "can't handle it\n  Explanation: Dynamo can only handle functions\n\n"
                           "  Developer debug context: x", "torch._dynamo.exc.Unsupported")
    assert messages[4] == ("pytest", 8, 11, "bad thing", "ValueError")
    assert [m[0] for m in messages] == ["line", "pytest", "line", "line", "pytest", "line"]
    # after a timestamp the margin is a prefix of one line; its traceback is read line by line
    stamped = [f"2026-03-01T10:00:00Z {line}" for line in lines[7:11]]
    assert all(m.kind == "line" for m in iter_messages(stamped))
    # a level that ends in E is no margin: its traceback is a block as before
    block = list(iter_messages(["SEVERE    Traceback (most recent call last):", '  File "x", line 1', "KeyError: 'a'"]))
    assert [(m.kind, m.text, m.error_class) for m in block] == [("traceback", "'a'", "KeyError")]


def test_a_pytest_run_keeps_the_exception_it_reports_its_root_cause_and_each_error_line():
    """The exception pytest reports (its first line) stays a form when a traceback follows it
    inside the margin; a run longer than MAX_PYTEST_LINES keeps its last lines, where a
    quoted stderr's root cause is; each line naming an error class is a form of its own."""
    from errkb.text.normalize import MAX_PYTEST_LINES

    def forms(lines):
        (message,) = [m for m in iter_messages(lines) if m.kind == "pytest"]
        return message, {(c.text, c.error_class) for c in message.candidates}

    outer = ["E       RuntimeError: Engine core initialization failed. See root cause above.", "E",
             "E       Traceback (most recent call last):", 'E         File "p.py", line 314, in _bootstrap',
             "E           self.run()", "E       KeyError: 'model_type'"]
    message, found = forms(outer)
    assert ("Engine core initialization failed. See root cause above.", "RuntimeError") in found
    assert ("'model_type'", "KeyError") in found
    assert (message.text, message.error_class) == ("Engine core initialization failed. See root cause above.",
                                                   "RuntimeError")
    stderr = [f"E       INFO loading shard {n}" for n in range(MAX_PYTEST_LINES + 50)]
    long_run = ["E       RuntimeError: Server exited unexpectedly. stderr:", *stderr,
                "E       ValueError: GPU memory utilization must be less than 1.0. Got 1.5."]
    message, found = forms(long_run)
    assert ("GPU memory utilization must be less than 1.0. Got 1.5.", "ValueError") in found
    assert (message.first_line, message.last_line) == (1, len(long_run))
    # a run of long lines past MAX_MESSAGE_CHARS in all: its last error line is still a form
    wide = ["E       RuntimeError: worker output:", *["E       " + "x" * 1000] * 80,
            "E       ValueError: GPU memory utilization must be less than 1.0. Got 1.5."]
    assert ("GPU memory utilization must be less than 1.0. Got 1.5.", "ValueError") in forms(wide)[1]


@pytest.mark.parametrize(("text", "message"), [
    # openai's client: the status, then the server's body as a dict's repr (vllm#13513)
    ("openai.BadRequestError: Error code: 400 - {'object': 'error', 'message': 'At most 1 image(s) may be provided "
     "in one request.', 'type': 'BadRequestError', 'param': None, 'code': 400}",
     "At most 1 image(s) may be provided in one request."),
    # a message with an apostrophe is repr'd in double quotes; escapes decoded; nested bodies
    ("Error code: 400 - {'error': {'message': \"This model's maximum context length is 4096 tokens.\\nReduce it\", "
     "'type': 'invalid_request_error'}}", "This model's maximum context length is 4096 tokens.\nReduce it"),
    ('Error code: 404 - {"object": "error", "message": "The model `x` does not exist.", "code": 404}',
     "The model `x` does not exist."),
])
def test_an_api_clients_error_line_yields_the_servers_message(text, message):
    from errkb.text.normalize import client_error_message, unwrapped_messages

    assert client_error_message(text.split(": ", 1)[1] if text.startswith("openai.") else text) == message
    assert message in [m.text for m in text_messages(text)]
    assert unwrapped_messages(text) == [message]


def test_unwrapped_messages_are_what_wrappers_carry_and_nothing_else():
    """The known-site tier reads these alone: a JSON line's message, pydantic's validator
    message, an API client's body message; a plain line, a class and its message, a body with
    no message, an unclosed string and a line that only mentions "Error code" give none."""
    from errkb.text.normalize import unwrapped_messages

    text = "\n".join([
        '{"level": "error", "message": "a JSON line carries this message"}',
        "pydantic_core._pydantic_core.ValidationError: 1 validation error for VllmConfig",
        "Value error, Model Runner V2 does not yet support: ngram [type=value_error, input_value={}, input_type=dict]",
        "ValueError: a plain message is its own line",
        "RuntimeError: Error code: 500 - {'detail': 'no message key here'}",
        "Error code: 400 - {'message': 'an unclosed string never ends",
        "We saw Error code: 400 - {'message': 'not at the start of the message'}",
    ])
    assert unwrapped_messages(text) == ["a JSON line carries this message", "Model Runner V2 does not yet support: ngram"]
    # a string that never closes is read at most 8,000 characters (a key's value opened by one
    # quote closes at the next of its kind, so a body of many keys is read once, linearly)
    assert unwrapped_messages("Error code: 400 - {'message': '" + "x" * 100_000) == []
    assert unwrapped_messages("Error code: 400 - {'message': '" + "x" * 9_000 + "'}") == []
