"""The messages C++ and CUDA sources raise: ``TORCH_CHECK(cond, "msg", x, ...)`` and its
family, ``FLASHINFER_CHECK``/``FLASHINFER_ERROR``, ``AT_ERROR``, ``throw std::..._error(...)``
(with ``+`` concatenations, in a check's message too: ``"launch failed: " + std::string(e)``),
messages built on an ``std::ostringstream`` (``oss << "a" << x;`` then
``FLASHINFER_ERROR(oss.str())``), and tvm-ffi's streamed checks, which FlashInfer's C++ uses
from 0.4 on: ``TVM_FFI_ICHECK(cond) << "a" << x;``, ``TVM_FFI_ICHECK_EQ(a, b) << ...``,
``TVM_FFI_CHECK(cond, ValueError) << ...``, ``TVM_FFI_THROW(ValueError) << ...`` (the user sees
``Check failed: (cond) is false: a ...``: the streamed text is the message's own part).

There is no C++ parser here: a bounded, linear scan finds each macro or ``throw``, its
balanced argument list (string and character literals and comments respected) and the
string literals in it. What the scan cannot follow (an unbalanced list, a raw string,
a message with no literal text) is counted with the reason, never guessed. The enclosing
function is a heuristic (the last unindented line that opens a definition), named so.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterator
from dataclasses import dataclass

from errkb.mine.templates import NoTemplate, Placeholder, Template, check_encodable

# Checks whose first argument is the condition, the rest the message's pieces.
_CHECKS = ("TORCH_CHECK", "TORCH_CHECK_VALUE", "TORCH_CHECK_TYPE", "TORCH_CHECK_INDEX", "TORCH_CHECK_NOT_IMPLEMENTED",
           "TORCH_CHECK_LINALG", "TORCH_INTERNAL_ASSERT", "FLASHINFER_CHECK", "STD_TORCH_CHECK")
# Errors whose every argument is a piece of the message.
_ERRORS = ("FLASHINFER_ERROR", "AT_ERROR", "TORCH_WARN", "TORCH_WARN_ONCE")
# c10's: the first argument names the error class (c10::<Type>), then as above.
_TYPED_CHECKS = ("TORCH_CHECK_WITH",)  # (Type, cond, msg...)
_TYPED_ERRORS = ("C10_THROW_ERROR", "C10D_THROW_ERROR")  # (Type, msg...)
# c10d's logging macros: their arguments are fmt::format's (a format string, then its values),
# and what they log is what a rank prints before it throws ("[c10d] The client socket has
# timed out after 600000ms while trying to connect to (10.0.0.1, 29500).").
_FMT_LOGS = {"C10D_ERROR": "ERROR", "C10D_WARNING": "WARNING"}
# tvm-ffi's checks and throws: the arguments name the condition (and the error kind), the
# message is what is streamed after the call (``<< "a" << x;``). ``ICHECK`` raises InternalError,
# which reaches Python as a RuntimeError.
_TVM_CHECKS = ("TVM_FFI_ICHECK", "TVM_FFI_ICHECK_EQ", "TVM_FFI_ICHECK_NE", "TVM_FFI_ICHECK_LT", "TVM_FFI_ICHECK_LE",
               "TVM_FFI_ICHECK_GT", "TVM_FFI_ICHECK_GE", "TVM_FFI_CHECK", "TVM_FFI_CHECK_EQ", "TVM_FFI_CHECK_NE",
               "TVM_FFI_CHECK_LT", "TVM_FFI_CHECK_LE", "TVM_FFI_CHECK_GT", "TVM_FFI_CHECK_GE")
_TVM_THROWS = ("TVM_FFI_THROW", "TVM_FFI_LOG_AND_THROW")
# A CUDA kernel's device-side assertion: its text is the condition as the preprocessor
# stringifies it (whitespace runs as one space, comments gone), printed by the device's
# assert: "<file>:<line>: <function>: block: [...], thread: [...] Assertion `<cond>` failed."
_KERNEL_ASSERTS = ("CUDA_KERNEL_ASSERT",)
_TVM_OPS = {"EQ": "==", "NE": "!=", "LT": "<", "LE": "<=", "GT": ">", "GE": ">="}
_CLASS = {"TORCH_CHECK_VALUE": "ValueError", "TORCH_CHECK_TYPE": "TypeError", "TORCH_CHECK_INDEX": "IndexError",
          "TORCH_CHECK_NOT_IMPLEMENTED": "NotImplementedError", "TORCH_CHECK_LINALG": "LinAlgError",
          "TORCH_WARN": "UserWarning", "TORCH_WARN_ONCE": "UserWarning"}
_SITE = re.compile(r"\b(" + "|".join(sorted(_CHECKS + _ERRORS + _TYPED_CHECKS + _TYPED_ERRORS + _TVM_CHECKS + _TVM_THROWS
                                             + _KERNEL_ASSERTS + tuple(_FMT_LOGS),
                                             key=len, reverse=True)) + r")\s*\(|"
                   r"\bthrow\s+(?:std::)?([A-Za-z_]\w*(?:_error|Error|_argument|_range|Exception))\s*\(")
# An argument list longer than this is not a message a person wrote.
_MAX_ARGS_CHARS = 6000
_MIN_LITERAL_ALNUM = 4
_MAX_CONDITION = 160
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", '"': '"', "'": "'", "\\": "\\", "0": "\0", "a": "\a", "b": "\b",
            "f": "\f", "v": "\v", "?": "?"}
_DEFINITION = re.compile(r"^(?!(?:if|for|while|switch|return|else|do|case|template|namespace|class|struct)\b)"
                         r"[A-Za-z_][\w:<>,\*&\s]*?\b([A-Za-z_]\w*(?:::~?[A-Za-z_]\w*)*)\s*\(")
# ATen's structured kernels: "TORCH_META_FUNC(clamp) (" opens clamp's meta function (no return
# type before the name, so _DEFINITION does not see it), "TORCH_IMPL_FUNC(clamp_out) (" its kernel.
_STRUCTURED = re.compile(r"^(TORCH_(?:PRECOMPUTE_)?(?:META|IMPL)_FUNC2?)\s*\(\s*(\w+)\s*(?:,\s*(\w+)\s*)?\)")
_STREAM = re.compile(r"^\s*([A-Za-z_]\w*)\.str\(\)\s*$")
_NAME = re.compile(r"^\s*([A-Za-z_]\w*)\s*$")
_STR_CALL = re.compile(r"^\s*(?:c10::)?str\s*\(")
_FMT_CALL = re.compile(r"^\s*(?:::)?(?:fmt|std)::format\s*\(")
# A replacement field of a format string: "{}", "{0}", "{:>8}", "{name}" ("{{" and "}}" are braces).
_FMT_FIELD = re.compile(r"\{\{|\}\}|\{(?:[^{}]|\{[^{}]*\})*\}")  # a nested width: "{:{}}"
# How far back a message variable's definition is looked for.
_LOOK_BACK = 4000


@dataclass
class CppSite:
    file: str
    line: int
    function: str  # heuristic; "" when no definition line was found above
    error_class: str
    template: Template | None
    condition: str | None
    reason: str | None  # why there is no template
    kind: str = "C++"


def cpp_sites(text: str, file: str) -> Iterator[CppSite]:
    """Every check, error macro and ``throw`` of one C++/CUDA source, templated where possible."""
    # A macro body's line continuations are blanks to the scan (same length: offsets hold).
    text = text.replace("\\\n", " \n")
    line_starts = [0] + [m.end() for m in re.finditer("\n", text)]
    definitions = _definitions(text, line_starts)
    def_lines = [d[0] for d in definitions]
    for m in _SITE.finditer(text):
        if _in_comment_or_define(text, m.start()):
            continue
        line = bisect.bisect_right(line_starts, m.start())
        at = bisect.bisect_right(def_lines, line) - 1
        function = definitions[at][1] if at >= 0 else ""
        macro, thrown = m.group(1), m.group(2)
        error_class = thrown or _FMT_LOGS.get(macro or "") or _CLASS.get(macro or "", "RuntimeError")
        kind = "log" if macro in _FMT_LOGS else "C++"
        condition, template, reason = None, None, None
        try:
            args, end = _arguments_end(text, m.end())
            if macro in _KERNEL_ASSERTS:
                if len(args) != 1:
                    raise NoTemplate("kernel assertion without one condition")
                stringified = " ".join(_without_comments(args[0]).split())
                literal = stringified.replace("\\", "\\\\").replace('"', '\\"')  # as a C literal for _template
                template = _template([f'"Assertion `{literal}` failed."'])
                yield CppSite(file, line, function, "RuntimeError", template, _condition(args[0]), None, kind="assert")
                continue
            if macro in _TVM_CHECKS + _TVM_THROWS:
                error_class, condition, pieces = _tvm_site(macro, args, text, end)
                template = _template(_expand(pieces, text[max(0, m.start() - _LOOK_BACK) : m.start()]))
                yield CppSite(file, line, function, error_class, template, condition, None)
                continue
            if macro in _FMT_LOGS:
                pieces = _expand(_fmt_pieces(args), text[max(0, m.start() - _LOOK_BACK) : m.start()])
                yield CppSite(file, line, function, _FMT_LOGS[macro], _template(pieces), None, None, kind="log")
                continue
            if macro in _TYPED_CHECKS + _TYPED_ERRORS:
                if len(args) < 2:
                    raise NoTemplate("typed check without an error class")
                error_class = args[0].split("::")[-1]
                args = args[1:]
            if macro in _CHECKS + _TYPED_CHECKS:
                if not args:
                    raise NoTemplate("check without a condition")
                condition = _condition(args[0])
                pieces = args[1:]
            elif macro:
                pieces = args
            else:
                if len(args) != 1:
                    raise NoTemplate("exception built from several arguments")
                pieces = _split_top(args[0], "+")
            pieces = _expand(pieces, text[max(0, m.start() - _LOOK_BACK) : m.start()])
            template = _template(pieces)
        except NoTemplate as e:
            reason = str(e)
        yield CppSite(file, line, function, error_class, template, condition, reason, kind=kind)


def _condition(expr: str) -> str | None:
    """The failing condition of a check, one line, comments out; None for ``false`` (always raised)."""
    expr = " ".join(re.sub(r"//[^\n]*|/\*.*?\*/", " ", expr, flags=re.S).split())
    if expr in ("false", "0"):
        return None
    if len(expr) > _MAX_CONDITION:
        expr = expr[: _MAX_CONDITION - 3].rstrip() + "..."
    return f"not ({expr})"


def _tvm_site(macro: str, args: list[str], text: str, end: int) -> tuple[str, str | None, list[str]]:
    """(error class, condition, message pieces) of a tvm-ffi check or throw whose argument list
    closes at ``end``: the pieces are what is streamed into it up to the statement's ``;``."""
    kind = "RuntimeError"  # InternalError (ICHECK) reaches Python as a RuntimeError
    if macro in _TVM_THROWS:
        if len(args) != 1:
            raise NoTemplate("tvm-ffi throw without one error kind")
        kind, condition = args[0].split("::")[-1], None
    else:
        binary = macro.rsplit("_", 1)[-1] if macro.rsplit("_", 1)[-1] in _TVM_OPS else None
        wanted = (2 if binary else 1) + (0 if macro.startswith("TVM_FFI_ICHECK") else 1)
        if len(args) != wanted:
            raise NoTemplate(f"tvm-ffi check with {len(args)} arguments, not {wanted}")
        if not macro.startswith("TVM_FFI_ICHECK"):
            kind = args[-1].split("::")[-1]
        condition = _condition(f"{args[0]} {_TVM_OPS[binary]} {args[1]}" if binary else args[0])
    if kind == "InternalError":
        kind = "RuntimeError"
    rest = _without_comments(text[end : end + _MAX_ARGS_CHARS])  # `<< "a"  // why` then `<< x;`
    stream = rest.lstrip()
    if not stream.startswith("<<"):
        raise NoTemplate("tvm-ffi check without a streamed message")
    stream = stream[2:]
    pieces = _split_top(stream[: _statement_end(stream)], "<<")
    return kind, condition, pieces


def _in_comment_or_define(text: str, pos: int) -> bool:
    """A hit inside a ``//`` comment or a ``#define`` of the macro itself."""
    start = text.rfind("\n", 0, pos) + 1
    head = text[start:pos].lstrip()
    return head.startswith(("//", "*", "/*", "#define", "#  define"))


def _definitions(text: str, line_starts: list[int]) -> list[tuple[int, str]]:
    """(line, name) of each unindented line that looks like a function definition."""
    out = []
    for i, start in enumerate(line_starts):
        if start >= len(text) or text[start] in " \t\n#/}{*":
            continue
        end = text.find("\n", start)
        head = text[start : end if end >= 0 else len(text)]
        if head.rstrip().endswith(";") or len(head) > 300:
            continue
        structured = _STRUCTURED.match(head)
        if structured:
            macro, name, overload = structured.groups()
            out.append((i + 1, f"{macro}({name}{', ' + overload if overload else ''})"))
            continue
        m = _DEFINITION.match(head)
        if m:
            out.append((i + 1, m.group(1)))
    return out


def _arguments(text: str, pos: int) -> list[str]:
    """The top-level, comma-separated arguments of the call whose "(" ends just before ``pos``."""
    return _arguments_end(text, pos)[0]


def _arguments_end(text: str, pos: int) -> tuple[list[str], int]:
    """:func:`_arguments`, and the offset just past the call's closing ")"."""
    args, depth, start, i = [], 0, pos, pos
    end = min(len(text), pos + _MAX_ARGS_CHARS)
    while i < end:
        ch = text[i]
        if ch == '"':
            if i > 0 and text[i - 1] == "R":
                raise NoTemplate("raw string literal")
            i = _end_of_literal(text, i, '"', end)
            continue
        if ch == "'":
            i = _end_of_literal(text, i, "'", end)
            continue
        if ch == "/" and text.startswith("//", i):
            nl = text.find("\n", i)
            i = end if nl < 0 else nl
            continue
        if ch == "/" and text.startswith("/*", i):
            close = text.find("*/", i + 2, end)
            if close < 0:
                raise NoTemplate("unterminated comment in the arguments")
            i = close + 2
            continue
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            if depth == 0:
                if ch != ")":
                    raise NoTemplate("unbalanced brackets in the arguments")
                args.append(text[start:i])
                return [a.strip() for a in args if a.strip()], i + 1
            depth -= 1
        elif ch == "," and depth == 0:
            args.append(text[start:i])
            start = i + 1
        i += 1
    raise NoTemplate(f"argument list not closed within {_MAX_ARGS_CHARS} characters")


def _end_of_literal(text: str, i: int, quote: str, end: int) -> int:
    j = i + 1
    while j < end:
        if text[j] == "\\":
            j += 2
            continue
        if text[j] == quote:
            return j + 1
        if text[j] == "\n":
            raise NoTemplate("string literal runs past its line")
        j += 1
    raise NoTemplate("unterminated string literal")


def _without_comments(text: str) -> str:
    """``text`` with each ``//`` and ``/* */`` comment outside a literal made one blank (a line
    comment keeps its newline). One pass: linear. A literal or comment that does not close
    leaves the rest as it is (the caller's scan says why it cannot read it)."""
    out, i, start = [], 0, 0
    while i < len(text):
        ch = text[i]
        if ch in "\"'":
            try:
                i = _end_of_literal(text, i, ch, len(text))
            except NoTemplate:
                break
            continue
        if ch == "/" and text.startswith("//", i):
            out.append(text[start:i] + " ")
            nl = text.find("\n", i)
            i = start = len(text) if nl < 0 else nl
            continue
        if ch == "/" and text.startswith("/*", i):
            close = text.find("*/", i + 2)
            if close < 0:
                break
            out.append(text[start:i] + " ")
            i = start = close + 2
            continue
        i += 1
    out.append(text[start:])
    return "".join(out)


def _split_top(expr: str, op: str) -> list[str]:
    """``a + "b" + c`` split on top-level ``op`` (outside brackets and literals)."""
    parts, depth, start, i = [], 0, 0, 0
    while i < len(expr):
        ch = expr[i]
        if ch in "\"'":
            i = _end_of_literal(expr, i, ch, len(expr))
            continue
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif depth == 0 and expr.startswith(op, i) and not (op == "+" and expr.startswith("++", i)):
            parts.append(expr[start:i])
            i += len(op)
            start = i
            continue
        i += 1
    parts.append(expr[start:])
    return [p.strip() for p in parts if p.strip()]


def _expand(pieces: list[str], before: str) -> list[str]:
    """The message's pieces with ``oss.str()``, ``c10::str(a, b)`` and a message variable
    (``std::string err = "a" + x;`` or ``auto msg = c10::str(...)`` above the check)
    replaced by what they are built from."""
    if len(pieces) == 1:
        stream = _STREAM.match(pieces[0])
        if stream:
            return _stream_pieces(before, stream.group(1))
        name = _NAME.match(pieces[0])
        if name and not name.group(1).isupper():
            return _expand(_variable_pieces(before, name.group(1)), "")
    out: list[str] = []
    for piece in pieces:
        formatted = _FMT_CALL.match(piece)
        if formatted and piece.rstrip().endswith(")"):
            out.extend(_fmt_pieces(_arguments(piece.rstrip()[:-1] + ")", formatted.end())))
            continue
        call = _STR_CALL.match(piece)
        if call and piece.rstrip().endswith(")"):
            inner = piece.rstrip()[:-1]
            out.extend(_arguments(inner + ")", call.end()))
            continue
        # a std::string concatenation ("launch failed: " + std::string(err)) is its pieces;
        # arithmetic (a + b), which holds no string literal, stays one value
        joined = _split_top(piece, "+")
        if len(joined) > 1 and any(_string_literal(p) is not None for p in joined):
            out.extend(joined)
        else:
            out.append(piece)
    return out


def _variable_pieces(before: str, name: str) -> list[str]:
    """What the message variable ``name`` is first assigned (``std::string name = a + "b";``)."""
    decl = list(re.finditer(r"\b(?:const\s+)?(?:std::string|auto)\s*&?\s*" + re.escape(name) + r"\s*=", before))
    if not decl:
        raise NoTemplate("message is a variable not defined nearby")
    body = before[decl[-1].end() :]
    end = _statement_end(body)
    expr = body[:end].strip()
    formatted = _FMT_CALL.match(expr)
    if formatted and expr.endswith(")"):
        return _fmt_pieces(_arguments(expr, formatted.end()))
    call = _STR_CALL.match(expr)
    if call and expr.endswith(")"):
        return _arguments(expr, call.end())
    return _split_top(expr, "+")


def _fmt_pieces(args: list[str]) -> list[str]:
    """``fmt::format("a {} b {:x}", x, y)``'s arguments as the message's pieces: the format
    string cut at its replacement fields (each a value, the argument it names where it names
    one), ``{{``/``}}`` its braces; a format that is not a literal is one value."""
    if not args:
        raise NoTemplate("format call without a format string")
    fmt = _string_literal(args[0])
    if fmt is None:
        return args
    values = iter(args[1:])
    pieces: list[str] = []
    at = 0
    for field in _FMT_FIELD.finditer(fmt):
        text = fmt[at : field.start()] + (field.group()[0] if field.group() in ("{{", "}}") else "")
        if text:
            pieces.append(_c_literal(text))
        if field.group() not in ("{{", "}}"):
            pieces.append(next(values, field.group()))
        at = field.end()
    if fmt[at:]:
        pieces.append(_c_literal(fmt[at:]))
    return pieces


def _c_literal(text: str) -> str:
    """``text`` written as a C string literal (what _string_literal reads back)."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t") + '"'


def _statement_end(body: str) -> int:
    """The offset of the ``;`` that ends the statement ``body`` begins (literals respected)."""
    i, depth = 0, 0
    while i < len(body):
        ch = body[i]
        if ch in "\"'":
            i = _end_of_literal(body, i, ch, len(body))
            continue
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == ";" and depth <= 0:
            return i
        i += 1
    raise NoTemplate("message variable's statement not closed")


def _stream_pieces(before: str, name: str) -> list[str]:
    """The pieces streamed into ``name`` (``name << "a" << x;``) since it was declared."""
    decl = list(re.finditer(r"\b(?:std::)?(?:ostringstream|stringstream)\s+" + re.escape(name) + r"\b", before))
    if not decl:
        raise NoTemplate("message is a stream not declared nearby")
    body = before[decl[-1].end() :]
    pieces: list[str] = []
    for statement in re.finditer(r"\b" + re.escape(name) + r"\s*<<(.*?);", body, re.S):
        pieces.extend(_split_top(statement.group(1), "<<"))
    if not pieces:
        raise NoTemplate("message stream has nothing streamed into it")
    return pieces


def _template(pieces: list[str]) -> Template:
    parts: list[str | Placeholder] = []
    for piece in pieces:
        literal = _string_literal(piece)
        if literal is not None:
            parts.append(literal)
        else:
            parts.append(Placeholder(" ".join(piece.split())[:80]))
    template = Template.of(parts)
    if sum(ch.isalnum() for ch in template.literal) < _MIN_LITERAL_ALNUM:
        raise NoTemplate("message has no literal text" if not template.literal.strip()
                         else "message literal too short to identify the error")
    check_encodable(template)
    return template


def _string_literal(piece: str) -> str | None:
    """The text of ``"a" "b"`` (adjacent literals, escapes decoded), else None."""
    piece = piece.strip()
    if not piece.startswith('"'):
        return None
    out, i = [], 0
    while i < len(piece):
        if piece[i].isspace():
            i += 1
            continue
        if piece[i] != '"':
            return None
        j = i + 1
        while j < len(piece) and piece[j] != '"':
            if piece[j] == "\\" and j + 1 < len(piece):
                out.append(_ESCAPES.get(piece[j + 1], piece[j + 1]))
                j += 2
                continue
            out.append(piece[j])
            j += 1
        i = j + 1
    return "".join(out)
