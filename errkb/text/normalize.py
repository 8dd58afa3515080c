"""Turn text as it really arrives into the messages a pattern was written for.

A record's ``messagePattern`` describes the exception message alone. Real text wraps
it: ANSI colour, log prefixes (timestamps, levels, ``(EngineCore_DP0 pid=1234)``,
``[file.py:123]``, ``[rank0]:``, pytest's ``E       ``), JSON log envelopes, tracebacks whose final
``ErrorClass: message`` line is what matters, chained exceptions, messages wrapped
over several lines, Windows line endings, invalid UTF-8.

Every function here is linear in the input: the few regular expressions are ours,
anchored, and have no nested repetition. The raw text always stays a candidate, so
normalisation only ever adds places a pattern may match.
"""

from __future__ import annotations

import json
import re
from collections import deque
from collections.abc import Iterable, Iterator

from errkb.plain import Plain
from errkb.text.printed import pytest_marked, unmarked

# Longest message kept from one traceback / continuation, and most exceptions kept
# from one chain: bounds memory when a stream holds a pathological traceback.
MAX_MESSAGE_CHARS = 64 * 1024
MAX_CHAIN = 16
MAX_CONTINUATION_LINES = 20
# Texts with more lines than this are not also joined into one wrapped message.
MAX_WRAP_LINES = 50
# Lines of one run of pytest's failure margin kept as its message.
MAX_PYTEST_LINES = 200

_ANSI = re.compile(r"\x1b(?:\[[0-?]{0,32}[ -/]{0,8}[@-~]|\][^\x07\x1b]{0,512}(?:\x07|\x1b\\)|[@-Z\\-_])")

_LEVEL = r"(?:TRACE|DEBUG|INFO|NOTICE|WARNING|WARN|ERROR|ERR|CRITICAL|FATAL|EXCEPTION|SEVERE)"
# One alternative per prefix family. Each consumes its token and its own separator
# (one space), never the indentation of what follows: traceback frames keep theirs.
_PREFIX = re.compile(
    r"(?:"
    # ISO timestamps: 2026-08-05 15:26:02,985 / 2026-08-02T18:07:14.645Z / [2026-...]
    r"(?P<ts>\[?\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:[.,]\d{1,9})?)?(?:Z|[+-]\d{2}:?\d{2}| ?UTC)?\]?(?: \| | - | ?))"
    # vLLM: INFO 08-14 21:17:39 [core.py:123] (the file is the next family's), and before 0.7
    # without the bracket: WARNING 01-10 21:49:05 model_runner_base.py:143]
    r"|(?P<vllm>" + _LEVEL + r" \d{2}-\d{2} \d{2}:\d{2}:\d{2}(?:\.\d{1,9})? ?(?:[\w.-]{1,255}\.py:\d{1,10}\] ?)?)"
    # syslog: Aug 16 03:07:54 host prog[pid]:
    r"|(?P<syslog>[A-Z][a-z]{2} [ \d]?\d \d{2}:\d{2}:\d{2} [\w.-]{1,255} [\w./@-]{1,255}?(?:\[\d{1,10}\])?: ?)"
    # glog / absl: I0816 01:13:49.301394    2120 prober.go:107]; PyTorch's C++ (c10) logs it
    # bracketed without the thread: [W220 15:40:19.894087820 TCPStore.cpp:358], before 2.2 with
    # its level alone: [E ProcessGroupNCCL.cpp:563]
    r"|(?P<glog>\[?[IWEF](?:\d{3,4} \d{2}:\d{2}:\d{2}\.\d{1,9}(?: {1,16}\d{1,10})?)? [\w./-]{1,255}:\d{1,10}\] ?)"
    # (EngineCore_DP0 pid=1234) / (Worker pid=12) / (VllmWorker rank=0 pid=3)
    r"|(?P<proc>\([\w.-]{1,100}(?: [\w.-]{1,40}=[\w.-]{1,40}){1,4}\) ?)"
    # [rank0]: / [rank12]:
    r"|(?P<rank>\[rank\d{1,6}\]: ?)"
    # pytest's failure margin: E and the test's indentation (errkb.text.printed reads a run of them)
    r"|(?P<pytest>E {3,64})"
    # [file.py:123] / [core.py:123 in fn]
    r"|(?P<file>\[[\w./<>-]{1,255}:\d{1,10}(?: [^\]\n]{1,100})?\] ?)"
    # Python logging's default LEVEL:logger: (a logger name never precedes a space)
    r"|(?P<pylog>" + _LEVEL + r":(?:[A-Za-z_][\w.]{0,200}:(?=\S))?(?: {1,16})?)"
    # loguru: | ERROR    | module:function:12 -
    r"|(?P<loguru>\| ?" + _LEVEL + r" {0,16}\| ?(?:[\w.<>]{1,255}:[\w.<>]{0,255}:?\d{1,10} - )?)"
    # loguru's column after its timestamp: ERROR    | module:function:12 -
    r"|(?P<loguru2>" + _LEVEL + r" {0,16}\| (?:[\w.<>]{1,255}:[\w.<>]{0,255}:?\d{1,10} - )?)"
    # [ERROR] / ERROR / ERROR - / ERROR |
    r"|(?P<blevel>\[" + _LEVEL + r"\] ?)"
    r"|(?P<level>" + _LEVEL + r"(?: - | \| | {1,16}(?=\S)))"
    r")"
)
# `<timestamp> <LEVEL> <logger-or-worker>`: the name after a timestamp and a level
# (worker-3, vllm.engine.core, [gpu:1], uvicorn.error:). Only a name that cannot be
# an English word (it holds '.', '-', '/' or '_<n>', or is bracketed) and is followed
# by a capital or ends in a digit, so "ERROR non-zero exit status" keeps its words;
# the raw line stays a candidate whatever is taken off.
_LOGGER = re.compile(
    r"(?:\[[^\]\s]{1,100}\]|[A-Za-z_]\w{0,100}(?:[.\-/]\w{1,100}){1,12}|[A-Za-z]{1,100}_\d{1,10})"
    r"(?::? | - )(?=\S)"
)
_LOGGER_AFTER = frozenset({"level", "blevel"})
# A prefix that ends in pytest's margin (the E is a word of its own: not SEVERE's, TRACE's).
_PYTEST_MARGIN_END = re.compile(r"(?:^|\s)E {3,64}\Z")

# After these the message starts: nothing after them is a prefix any more.
_TERMINAL_PREFIXES = frozenset({"syslog", "glog", "file", "pylog", "loguru", "loguru2"})
_LEVEL_PREFIXES = frozenset({"vllm", "pylog", "loguru", "loguru2", "blevel", "level"})
# The families that may carry a logger's or module's name after their level, and their level
# part alone: what prefix_length(names=False) takes of them (a name is not a header: it may be
# another library's, "wandb.sdk.internal.sender", and says whose message the line is).
_LEVEL_ONLY = {"pylog": re.compile(_LEVEL + r":"), "loguru": re.compile(r"\| ?" + _LEVEL + r" {0,16}\| ?"),
               "loguru2": re.compile(_LEVEL + r" {0,16}\| ")}

TRACEBACK_HEADER = "Traceback (most recent call last):"
_CHAIN_SENTINELS = (
    "The above exception was the direct cause of the following exception:",
    "During handling of the above exception, another exception occurred:",
)
# Outside a traceback only names that look like exception classes count, so that
# "Note: ..." or "Loading: ..." are not taken for an error class: names ending in one of these.
_ERROR_SUFFIXES = ("Error", "Exception", "Warning", "Exit", "Interrupt", "Fault", "Failure", "Iteration", "Timeout",
                   "Refused", "Denied", "NotFound", "Err", "Exists")
_ERROR_LINE = re.compile(
    r"((?:[A-Za-z_]\w{0,100}\.){0,12}[A-Za-z_]\w{0,100}"
    r"(?:" + "|".join(_ERROR_SUFFIXES) + r"))"
    r"(?::(?: |$)|$)"
)
# A line none of these is found in cannot name an error class outside a traceback: a
# cheap test before normalising a line only to look for one.
ERROR_HINTS = re.compile("|".join(_ERROR_SUFFIXES))
# The final line of a traceback names any class (KeyboardInterrupt, SystemExit, ...).
_TRACEBACK_ERROR_LINE = re.compile(r"((?:[A-Za-z_]\w{0,100}\.){0,12}[A-Za-z_]\w{0,100})(?::(?: |$)|$)")
_JSON_MESSAGE_KEYS = ("message", "msg", "log", "error", "err", "exception", "exc_info", "stack_trace", "text", "event")


class Message(Plain):
    """One place in a text where a record's pattern may match."""

    _fields = ("text", "error_class", "source")

    def __init__(self, text: str, error_class: str | None = None, source: str = "raw") -> None:
        self.text = text
        self.error_class = error_class
        self.source = source  # raw | line | message | traceback | json | wrapped


class LogMessage(Plain):
    """One message of a log stream: a single line, or a whole traceback block."""

    _fields = ("first_line", "last_line", "text", "error_class", "kind", "raw", "candidates")

    def __init__(self, first_line: int, last_line: int, text: str, error_class: str | None = None, kind: str = "line",
                 raw: str = "", candidates: list[Message] | None = None) -> None:
        self.first_line = first_line  # 1-based, inclusive
        self.last_line = last_line
        self.text = text  # the message (for a traceback: the last exception's message)
        self.error_class = error_class
        self.kind = kind  # line | traceback | pytest (a run of pytest's failure margin)
        self.raw = raw  # the first raw line (a line message's own text)
        self.candidates = [] if candidates is None else candidates


def to_text(data: str | bytes | bytearray) -> str:
    """Decode bytes as UTF-8, invalid bytes becoming U+FFFD; never raises.

    Lone surrogates (from ``surrogateescape`` decoding upstream) are replaced too,
    because the linear-time engines work on valid UTF-8 only."""
    if isinstance(data, (bytes, bytearray)):
        return bytes(data).decode("utf-8", "replace")
    try:
        data.encode("utf-8")
        return data
    except UnicodeEncodeError:
        return data.encode("utf-8", "surrogateescape" if _only_escapes(data) else "surrogatepass").decode("utf-8", "replace")


def _only_escapes(text: str) -> bool:
    return all(not ("\ud800" <= c <= "\udfff") or "\udc80" <= c <= "\udcff" for c in text)


def strip_ansi(text: str) -> str:
    if "\x1b" not in text:
        return text
    return _ANSI.sub("", text)


def prefix_length(line: str, names: bool = True) -> int:
    """Length of the log prefix(es) before the message (0 when there is none). With
    ``names=False`` only the header proper (timestamps, levels, process, rank, file:line,
    syslog's host and program): a logger's or module's name after a level stays, and so do
    the families after it."""
    pos = 0
    seen: set[str] = set()
    for _ in range(12):
        m = _PREFIX.match(line, pos)
        if m is None or m.end() == pos:
            if names and "ts" in seen and seen & _LOGGER_AFTER:
                pos = _logger_end(line, pos)
            break
        family = m.lastgroup
        # one level word per line: a second one belongs to the message
        if family in seen or (family in _LEVEL_PREFIXES and seen & _LEVEL_PREFIXES):
            break
        seen.add(family)
        pos = m.end()
        if not names and family in _LEVEL_ONLY:
            level = _LEVEL_ONLY[family].match(line, m.start())
            if level is not None and level.end() < pos:
                return level.end()
        if family in _TERMINAL_PREFIXES:
            break
    return pos


def _logger_end(line: str, pos: int) -> int:
    """Where the message starts after a logger or worker name at ``pos`` (``pos`` when none)."""
    m = _LOGGER.match(line, pos)
    if m is None or _ERROR_LINE.match(line, pos):  # "torch.cuda.OutOfMemoryError: ..." is the message
        return pos
    name = m.group(0).rstrip(": -")
    if name[-1:].isdigit() or name.endswith("]") or line[m.end():m.end() + 1].isupper():
        return m.end()
    return pos


def strip_prefixes(line: str) -> str:
    n = prefix_length(line)
    return line[n:] if n else line


def split_error_class(message: str, in_traceback: bool = False) -> tuple[str | None, str]:
    """``"ValueError: bad"`` -> ``("ValueError", "bad")``; no class -> ``(None, message)``."""
    m = (_TRACEBACK_ERROR_LINE if in_traceback else _ERROR_LINE).match(message)
    if m is None:
        return None, message
    return m.group(1), message[m.end():]


def json_message(line: str) -> str | None:
    """The message of a JSON log line (``{"level": ..., "message": ...}``), else None."""
    stripped = line.strip()
    if not (stripped.startswith("{") and stripped.endswith("}")):
        return None
    try:
        obj = json.loads(stripped)
    except (ValueError, RecursionError):
        return None
    for _depth in range(3):
        if not isinstance(obj, dict):
            return None
        for key in _JSON_MESSAGE_KEYS:
            value = obj.get(key)
            if isinstance(value, str) and value:
                return value
            if isinstance(value, dict):
                obj = value
                break
        else:
            return None
    return None


def needs_rewrite(line: str) -> bool:
    """True when a line's message may not be a plain substring of it (ANSI codes
    inside it, JSON string escapes), so scanning the raw line is not enough."""
    return "\x1b" in line or ("\\" in line and line.lstrip().startswith("{"))


def line_messages(line: str) -> list[Message]:
    """Every message one log line can carry, most specific last; the line itself first."""
    line = to_text(line)
    if line.endswith("\r"):
        line = line[:-1]
    out = [Message(line, None, "raw")]
    clean = strip_ansi(line)
    if clean != line:
        out.append(Message(clean, None, "line"))
    _add_line_forms(clean, out, depth=0)
    return _dedupe(out)


def _add_line_forms(line: str, out: list[Message], depth: int) -> None:
    body = strip_prefixes(line)
    if body != line:
        out.append(Message(body, None, "line"))
    inner = json_message(body)
    if inner is not None and depth < 2:
        inner_messages = text_messages(inner, _depth=depth + 1)
        out.extend(Message(m.text, m.error_class, "json" if m.source == "raw" else m.source) for m in inner_messages)
        return
    error_class, rest = split_error_class(body)
    if error_class is not None:
        out.append(Message(body, error_class, "line"))
        out.append(Message(rest, error_class, "message"))
        carried = client_error_message(rest)
        if carried is not None:
            out.append(Message(carried, None, "message"))
        return
    wrapped = _PYDANTIC_ERROR.match(body)
    if wrapped is not None:
        # A validator's exception as pydantic prints it under "1 validation error for X":
        # "  Value error, <message> [type=value_error, input_value=..., input_type=...]".
        message = _PYDANTIC_SUFFIX.sub("", body[wrapped.end():])
        out.append(Message(message, PYDANTIC_WRAPPERS[wrapped.group(1)], "message"))
        return
    carried = client_error_message(body)
    if carried is not None:
        out.append(Message(carried, None, "message"))


# An HTTP API client's error: the status, then the body the server sent as the client prints
# it (openai's APIStatusError: "Error code: 400 - {'object': 'error', 'message': 'At most 1
# image(s) may be provided in one request.', 'type': 'BadRequestError', ...}", the body a
# Python dict's repr, or JSON). The server's message is its first "message" value.
_CLIENT_ERROR = re.compile(r"Error code: [1-5][0-9][0-9] - \{")
_BODY_MESSAGE = re.compile(r"""(['"])message\1: ?(?:'((?:[^'\\\n]|\\[^\n]){1,8000})'|"((?:[^"\\\n]|\\[^\n]){1,8000})")""")


def unwrapped_messages(text: str, _depth: int = 0) -> list[str]:
    """The messages a wrapper carries on a text's lines, each once, in order: a JSON line's
    message, a validator's message as pydantic prints it ("Value error, <message> [type=...]"),
    the message in an API client's error body (:func:`client_error_message`). What the
    known-site tier reads alone: the wrapper's words are not text a message is lost in."""
    out: list[str] = []
    for line in strip_ansi(to_text(text).replace("\r\n", "\n")).split("\n"):
        body = strip_prefixes(line)
        inner = json_message(body)
        if inner is not None:
            if _depth < 2:
                out.append(inner)
                out.extend(unwrapped_messages(inner, _depth + 1))
            continue
        error_class, rest = split_error_class(body)
        wrapped = _PYDANTIC_ERROR.match(body) if error_class is None else None
        if wrapped is not None:
            out.append(_PYDANTIC_SUFFIX.sub("", body[wrapped.end():]))
            continue
        carried = client_error_message(rest if error_class is not None else body)
        if carried is not None:
            out.append(carried)
    return list(dict.fromkeys(m for m in out if m.strip()))


def client_error_message(text: str) -> str | None:
    """The message an API client's error line carries in the server's body (its escapes
    decoded), else None."""
    head = _CLIENT_ERROR.match(text)
    if head is None:
        return None
    found = _BODY_MESSAGE.search(text, head.end() - 1)
    if found is None:
        return None
    from errkb.text.printed import decode_escapes

    message = decode_escapes(found.group(2) if found.group(2) is not None else found.group(3))
    return message if message.strip() else None


# pydantic's words before a validator's message, and the class each stands for
PYDANTIC_WRAPPERS = {"Value error": "ValueError", "Assertion failed": "AssertionError"}
_PYDANTIC_ERROR = re.compile(r"\s{0,8}(" + "|".join(PYDANTIC_WRAPPERS) + "), ")
_PYDANTIC_SUFFIX = re.compile(r" \[type=\w{1,64}, input_value=.*\Z", re.DOTALL)


def text_messages(text: str | bytes, _depth: int = 0) -> list[Message]:
    """Every message in a pasted text: the text itself, each line's forms, each
    exception of a (chained) traceback, and wrapped lines joined back together."""
    text = to_text(text)
    out = [Message(text, None, "raw")]
    if "\r" in text:
        text = text.replace("\r\n", "\n")
    text = strip_ansi(text)
    lines = text.split("\n")
    while lines and not lines[-1].strip():
        lines.pop()
    if not lines:
        return _dedupe(out)
    if len(lines) == 1:
        if lines[0] != out[0].text:
            out.append(Message(lines[0], None, "line"))
        _add_line_forms(lines[0], out, _depth)
        return _dedupe(out)
    # The matcher tries forms from the last to the first and reports the first that
    # matches as the message: the lines joined together are the least specific form
    # (a whole traceback glued into one line), so they go before each line's and each
    # exception's own message and are reported only when nothing narrower matches.
    # A message raised from C++ often begins (or ends) with a newline and spans lines:
    # the text without its blank edge lines is the message itself (what a `^...$`
    # multi-line pattern is written for), with its class split off when it has one.
    bare = _without_blank_edges(text)
    if "\n" in bare:
        out.append(Message(bare, None, "raw"))
        error_class, rest = split_error_class(bare)
        if error_class is not None:
            out.append(Message(_without_blank_edges(rest), error_class, "raw"))
    if len(lines) <= MAX_WRAP_LINES:
        out.extend(_wrapped_forms(lines))
    for msg in iter_messages(lines):
        for form in msg.candidates:
            out.append(form)
            if form.text[:1] == "\n" or form.text[-1:] == "\n":  # "RuntimeError: \nFound no ..."
                out.append(Message(_without_blank_edges(form.text), form.error_class, form.source))
    return _dedupe(out)


def wrapped_messages(text: str) -> list[Message]:
    """The forms of ``text_messages`` that join a text's lines back into one message (an
    issue's editor or a terminal wrapped it): none for one line or over MAX_WRAP_LINES."""
    lines = strip_ansi(to_text(text).replace("\r\n", "\n")).split("\n")
    while lines and not lines[-1].strip():
        lines.pop()
    return _dedupe(_wrapped_forms(lines)) if 1 < len(lines) <= MAX_WRAP_LINES else []


def _wrapped_forms(lines: list[str]) -> list[Message]:
    """The lines without their log prefixes and edge blanks, run together and space-separated,
    each also with its error class split off where it has one."""
    bodies = [strip_prefixes(line).strip() for line in lines]
    out = []
    for joined in ("".join(bodies), " ".join(b for b in bodies if b)):
        out.append(Message(joined, None, "wrapped"))
        error_class, rest = split_error_class(joined)
        if error_class is not None:
            out.append(Message(rest, error_class, "wrapped"))
    return out


def _without_blank_edges(text: str) -> str:
    """``text`` without its leading and trailing blank lines (lines inside kept)."""
    lines = text.split("\n")
    first, last = 0, len(lines)
    while first < last and not lines[first].strip():
        first += 1
    while last > first and not lines[last - 1].strip():
        last -= 1
    return "\n".join(lines[first:last])


def repaired_forms(messages: list[Message], text: str | None = None) -> list[Message]:
    """Forms of pasted messages repaired the two ways a paste most often differs from
    what the program printed; the matcher tries them only when nothing matched the text
    as given.

    * Cut before the final period (an issue title, a clause copied out of a log) while
      the record's pattern ends with ``\\.``: the period is put back, before any closing
      quote or bracket the paste wrapped the message in (```…group```).
    * Quoted from the source, where Python joins adjacent string literals
      (``"…process group " "twice!"``): the literals are joined.

    A text that ends in other punctuation (a colon, a comma, an ellipsis) gets no period.
    Given the pasted ``text``, only a message that ends where the paste ends gets one: a
    paste is cut at its end, and a line inside it (a log line, the first line of a
    message wrapped onto the next) is as the program printed it."""
    at_end = _paste_end(text) if text is not None else None
    out = []
    for m in messages:
        message = m.text.rstrip()
        forms = [message]
        joined = _ADJACENT_LITERALS.sub("", message)
        if joined != message:
            forms.append(joined)
            out.append(Message(joined, m.error_class, m.source))
        if at_end is not None and not at_end(message):
            continue
        for form in forms:
            core = form.rstrip(_CLOSERS)
            if core and core[-1].isalnum():
                out.append(Message(core + "." + form[len(core):], m.error_class, m.source))
                if core != form:
                    out.append(Message(form + ".", m.error_class, m.source))
    return _dedupe(out)


_CLOSERS = ")]'\"`"

# Two string literals side by side: the closing quote of one, blanks, the same quote.
_ADJACENT_LITERALS = re.compile(r"""(["'])[ \t]+\1""")


def _paste_end(text: str):
    """Whether a message of ``text`` ends where the text ends: it is the end of the last
    line (that line, its body after a log prefix, its message after an error class), or
    it ends with that line's body (the whole text, lines joined back together)."""
    lines = strip_ansi(text.replace("\r\n", "\n")).split("\n")
    while lines and not lines[-1].strip():
        lines.pop()
    last = lines[-1].rstrip() if lines else ""
    body = strip_prefixes(last).strip()
    return lambda message: last.endswith(message) or (bool(body) and message.endswith(body))


def _dedupe(messages: list[Message]) -> list[Message]:
    seen: dict[str, int] = {}
    out: list[Message] = []
    for m in messages:
        i = seen.get(m.text)
        if i is None:
            seen[m.text] = len(out)
            out.append(m)
        elif out[i].error_class is None and m.error_class is not None:
            out[i] = Message(out[i].text, m.error_class, out[i].source)
    return out


# ---------------------------------------------------------------------------------
# Streaming: a whole log, traceback blocks grouped, constant memory.


def _shape(prefix: str) -> str:
    """A prefix with its digits dropped: lines of one traceback share it."""
    return "".join(c for c in prefix if not c.isdigit())


class _TracebackBlock:
    def __init__(self, first_line: int, prefix_shape: str) -> None:
        self.first_line = first_line
        self.last_line = first_line
        self.prefix_shape = prefix_shape
        self.exceptions: list[list[str]] = []  # [class_line, continuation...]
        self.state = "frames"  # frames | exception | gap
        self.continuation = 0

    def to_message(self) -> LogMessage:
        candidates: list[Message] = []
        final_class: str | None = None
        final_text = ""
        for parts in self.exceptions:
            first = parts[0]
            error_class, rest = split_error_class(first, in_traceback=True)
            candidates.append(Message(first, error_class, "traceback"))
            if error_class is not None:
                candidates.append(Message(rest, error_class, "traceback"))
            if len(parts) > 1:
                full_rest = "\n".join([rest, *parts[1:]])
                candidates.append(Message(full_rest, error_class, "traceback"))
                candidates.append(Message(" ".join(p.strip() for p in [rest, *parts[1:]] if p.strip()), error_class,
                                          "wrapped"))
                rest = full_rest
            final_class, final_text = error_class, rest
        return LogMessage(
            first_line=self.first_line,
            last_line=self.last_line,
            text=final_text[:MAX_MESSAGE_CHARS],
            error_class=final_class,
            kind="traceback",
            raw="",
            candidates=_dedupe([Message(m.text[:MAX_MESSAGE_CHARS], m.error_class, m.source) for m in candidates]),
        )


class _PytestBlock:
    """A run of lines in pytest's failure margin (errkb.text.printed): the exception pytest
    shows, read as one message, its lines as the program printed them. Its first line and its
    last MAX_PYTEST_LINES - 1 are kept (the root cause at the end of a quoted stderr)."""

    def __init__(self, first_line: int, line: str) -> None:
        self.first_line = first_line
        self.last_line = first_line
        self.head = line[:MAX_MESSAGE_CHARS]
        self.tail: deque[str] = deque(maxlen=MAX_PYTEST_LINES - 1)
        self.lines = 1

    def takes(self, line: str) -> bool:
        if not pytest_marked(line):
            return False
        self.tail.append(line[:MAX_MESSAGE_CHARS])
        self.lines += 1
        return True

    def to_message(self) -> LogMessage:
        """Its forms, the most telling last (as the matcher reads them): each other line that
        names an error class, the last traceback inside it (a subprocess's, a chained one),
        then the exception pytest reports, its first line on (whole only where no line was
        left out)."""
        kept = self.lines == 1 + len(self.tail)
        lines = (unmarked([self.head, *self.tail]) or "").split("\n")
        header = next((n for n, line in enumerate(lines) if line.startswith(TRACEBACK_HEADER)), None)
        reported = lines[:header] if header is not None else lines
        while reported and not reported[-1].strip():
            reported.pop()
        if not kept:
            reported = reported[:1]  # its continuation may be among the lines left out
        candidates: list[Message] = []
        named = 0
        for line in lines[1:]:
            stripped = line.strip()
            error_class, rest = split_error_class(stripped)
            if error_class is not None and named < MAX_CHAIN:
                named += 1
                candidates += [Message(stripped, error_class, "traceback"), Message(rest, error_class, "traceback")]
        inner = _last_traceback(lines[header:], self.first_line) if header is not None else None
        if inner is not None:
            candidates += inner.to_message().candidates
        outer = _TracebackBlock(self.first_line, "")
        outer.exceptions = [reported] if reported else []
        message = outer.to_message() if reported else (inner.to_message() if inner is not None else outer.to_message())
        message.candidates = _dedupe([*candidates, *message.candidates])
        message.last_line = self.last_line
        message.kind = "pytest"
        return message


def _last_traceback(lines: list[str], first_line: int) -> _TracebackBlock | None:
    """The last traceback block of ``lines`` (no log prefixes: a margin's text) that holds an
    exception; None when none does."""
    block = last = None
    for line in lines:
        if block is not None and _continue_block(block, "", line):
            continue
        if block is not None and block.exceptions:
            last = block
        block = _TracebackBlock(first_line, "") if line.startswith(TRACEBACK_HEADER) else None
    return block if block is not None and block.exceptions else last


def iter_messages(lines: Iterable[str | bytes], start: int = 1) -> Iterator[LogMessage]:
    """Messages of a log, in order: one per line, one per traceback block (chained
    exceptions included), or one per run of pytest's failure margin. Line numbers are 1-based. Memory stays bounded
    whatever the input (messages are capped, frames are not kept)."""
    block: _TracebackBlock | _PytestBlock | None = None
    number = start - 1
    for number, raw in enumerate(lines, start):
        line = to_text(raw)
        line = line.rstrip("\r\n")
        clean = strip_ansi(line)
        plen = prefix_length(clean)
        body = clean[plen:]
        if block is not None:
            if block.takes(clean) if isinstance(block, _PytestBlock) else _continue_block(block, clean[:plen], body):
                block.last_line = number
                continue
            yield block.to_message()
            block = None
        if pytest_marked(clean):
            block = _PytestBlock(number, clean)
            continue
        # pytest's margin takes each line's indentation with it: a traceback inside one cannot be
        # followed as a block (its frames look like messages), so its lines are read one by one
        if body.startswith(TRACEBACK_HEADER) and not _PYTEST_MARGIN_END.search(clean, 0, plen):
            block = _TracebackBlock(number, _shape(clean[:plen]))
            continue
        candidates = line_messages(line)
        error_class = next((m.error_class for m in reversed(candidates) if m.error_class), None)
        text = candidates[-1].text
        yield LogMessage(number, number, text[:MAX_MESSAGE_CHARS], error_class, "line", line, candidates)
    if block is not None:
        yield block.to_message()


def _continue_block(block: _TracebackBlock, prefix: str, body: str) -> bool:
    """Feed one line to an open traceback block; False when the line is not part of it."""
    same_prefix = _shape(prefix) == block.prefix_shape
    stripped = body.strip()
    if block.state == "frames":
        if not same_prefix and prefix:
            return False
        if body[:1] in (" ", "\t") or not stripped or body.startswith(TRACEBACK_HEADER):
            return True
        if stripped.startswith(("^", "~")):
            return True
        # the first unindented line after the frames: the exception
        if len(block.exceptions) < MAX_CHAIN:
            block.exceptions.append([body[:MAX_MESSAGE_CHARS]])
        block.state = "exception"
        block.continuation = 0
        return True
    if block.state == "exception":
        if not same_prefix:
            return False
        if not stripped:
            block.state = "gap"
            return True
        if stripped in _CHAIN_SENTINELS or body.startswith(TRACEBACK_HEADER):
            block.state = "frames"
            return True
        if block.continuation >= MAX_CONTINUATION_LINES or (prefix and _ERROR_LINE.match(body)):
            return False
        block.continuation += 1
        if block.exceptions:
            block.exceptions[-1].append(body[:MAX_MESSAGE_CHARS])
        return True
    # gap: a blank line after an exception; only a chain sentinel continues the block
    if not same_prefix:
        return False
    if not stripped:
        return True
    if stripped in _CHAIN_SENTINELS or body.startswith(TRACEBACK_HEADER):
        block.state = "frames"
        return True
    return False
