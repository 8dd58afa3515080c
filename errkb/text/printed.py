"""A paste as the program printed it, where the paste quotes it.

Two quotings are common in the pastes of public issues, and both hide a message that
spans lines from a pattern written for it:

* pytest's failure margin: each line of the exception as pytest shows it begins with
  ``E`` and the test's indentation (``E               torch._dynamo.exc.Unsupported: ...``,
  ``E                 Explanation: ...``). The margin is the ``E`` and the spaces every
  line of the run shares; what is left is the message with its own indentation.
* a string literal: the message inside a repr or a JSON string, its line breaks written
  ``\\n`` (``cur_exn = Unsupported('torch.* op returned non-Tensor\\n  Explanation: ...')``).
  The literal with the most escapes is decoded; the class it is the argument of, where
  a ``Name(`` opens it, is put before it as a traceback would (``Unsupported: ...``).
  pytest's ``saferepr`` elides a long repr's middle (``traced into...o this``): the text
  before the elision is a message cut short, and is a form too.

:func:`printed_forms` gives each such form with the line of the paste it begins on;
explain reads a form only where the paste as given matched nothing. Each pass here is
one scan of the text, without regular expressions over it.
"""

from __future__ import annotations

from errkb.plain import Plain

# pytest marks every line of the exception with this, then the test's indentation.
PYTEST_MARK = "E"
# Forms kept from one paste: the pytest runs and literals a paste quotes one message in.
MAX_FORMS = 4
# A literal shorter than this (letters and digits) is a key or a word, never a message.
MIN_LITERAL_ALNUM = 12
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", "'": "'", '"': '"', "0": "\0", "a": "\a", "b": "\b",
            "f": "\f", "v": "\v"}
_HEX_DIGITS = {"x": 2, "u": 4, "U": 8}


class PrintedForm(Plain):
    """A message a paste quotes, as the program printed it: ``text``, the paste's line it
    begins on (``first_line``), and whether its lines are the paste's lines one for one
    (``line_for_line``: a pytest run) or all come from that one line (a decoded literal)."""

    _fields = ("text", "first_line", "line_for_line")

    def __init__(self, text: str, first_line: int, line_for_line: bool) -> None:
        self.text = text
        self.first_line = first_line
        self.line_for_line = line_for_line


def printed_forms(text: str) -> list[PrintedForm]:
    """Each message the paste quotes, as the program printed it, the most likely first;
    empty when the paste quotes none."""
    forms = [PrintedForm(run, first, True) for first, run in reversed(pytest_runs(text.split("\n")))]
    literal = escaped_literal(text)
    if literal is not None:
        first, message = literal
        forms.append(PrintedForm(message, first, False))
        elided = _before_elision(message)
        if elided is not None:
            forms.append(PrintedForm(elided, first, False))
    seen: set[str] = {text}
    out = []
    for form in forms:
        if form.text.strip() and form.text not in seen:
            seen.add(form.text)
            out.append(form)
    return out[:MAX_FORMS]


def pytest_marked(line: str) -> bool:
    """True for a line of pytest's failure margin: ``E`` then a space, or ``E`` alone."""
    return line[:1] == PYTEST_MARK and (len(line) == 1 or line[1] == " ")


def unmarked(run: list[str]) -> str | None:
    """A run of pytest-marked lines without the margin they share (the ``E`` and the
    spaces every non-blank line has after it), blank edge lines left off; None for a run
    of blank lines only."""
    bodies = [line[1:].rstrip() for line in run]
    margin = min((len(b) - len(b.lstrip(" ")) for b in bodies if b.strip()), default=None)
    if margin is None:
        return None
    return "\n".join(b[margin:] for b in bodies).strip("\n")


def pytest_runs(lines: list[str]) -> list[tuple[int, str]]:
    """Each run of pytest-marked lines without its margin: ``(its first line number, its
    text)``, the run taken from its first non-blank line. A run of blank lines only is none."""
    runs: list[tuple[int, str]] = []
    start = None
    for number, line in enumerate([*lines, ""], 1):
        if number <= len(lines) and pytest_marked(line):
            if start is None and line[1:].strip():
                start = number
            continue
        if start is not None:
            text = unmarked(lines[start - 1 : number - 1])
            if text is not None:
                runs.append((start, text))
            start = None
    return runs


def escaped_literal(text: str) -> tuple[int, str] | None:
    """The string literal of ``text`` with the most backslash escapes, decoded, with the
    class whose argument it is before it (``Name: message``), and the line it begins on;
    None when no literal of a message's length holds an escape. A literal the paste cuts
    off (no closing quote) runs to the text's end."""
    best: tuple[int, int, int] | None = None  # (escapes, opening quote, end)
    i, n = 0, len(text)
    while i < n:
        quote = text[i]
        if quote not in "'\"" or (i and text[i - 1].isalnum()):  # "doesn't": an apostrophe, no literal
            i += 1
            continue
        j, escapes = i + 1, 0
        while j < n and text[j] != quote:
            if text[j] == "\\" and j + 1 < n:
                escapes += 1
                j += 1
            j += 1
        if escapes and (best is None or escapes > best[0]):
            best = (escapes, i, j)
        i = j + 1
    if best is None:
        return None
    _, start, end = best
    message = decode_escapes(text[start + 1 : end])
    if sum(c.isalnum() for c in message) < MIN_LITERAL_ALNUM:
        return None
    name = _called_name(text, start)
    if name is not None:
        message = f"{name}: {message}"
    return text.count("\n", 0, start) + 1, message


def decode_escapes(body: str) -> str:
    """A Python or JSON string literal's body with its escapes decoded; an escape it does
    not know (``\\d`` in a quoted pattern) is kept as written, and so is a cut-off one."""
    out: list[str] = []
    i, n = 0, len(body)
    while i < n:
        c = body[i]
        if c != "\\" or i + 1 >= n:
            out.append(c)
            i += 1
            continue
        e = body[i + 1]
        if e in _ESCAPES:
            out.append(_ESCAPES[e])
            i += 2
            continue
        width = _HEX_DIGITS.get(e)
        digits = body[i + 2 : i + 2 + width] if width else ""
        if width and len(digits) == width and all(d in "0123456789abcdefABCDEF" for d in digits):
            code = int(digits, 16)
            out.append(chr(code) if code < 0x110000 and not 0xD800 <= code <= 0xDFFF else "\ufffd")
            i += 2 + width
            continue
        out.append(c)
        i += 1
    return "".join(out)


def _called_name(text: str, quote: int) -> str | None:
    """The capitalised (dotted) name whose call the literal at ``quote`` is the first
    argument of (``Unsupported(`` in ``Unsupported('...')``), else None."""
    i = quote - 1
    while i >= 0 and text[i] in " \t":
        i -= 1
    if i < 0 or text[i] != "(":
        return None
    end = i
    i -= 1
    while i >= 0 and (text[i].isalnum() or text[i] in "_."):
        i -= 1
    name = text[i + 1 : end].strip(".")
    last = name.rsplit(".", 1)[-1]
    return name if last[:1].isupper() else None


def _before_elision(message: str) -> str | None:
    """The message up to pytest's ``saferepr`` elision (``...`` between two non-blank
    characters, where the repr's middle was left out), else None."""
    at = message.find("...")
    while at != -1:
        before, after = message[at - 1 : at], message[at + 3 : at + 4]
        if before and after and not before.isspace() and not after.isspace() and after != ".":
            return message[:at]
        at = message.find("...", at + 3)
    return None
