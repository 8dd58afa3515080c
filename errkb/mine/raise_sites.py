"""Find the places a Python codebase raises errors, and the message each one carries.

Used by ``errkb mine`` (start draft records for a codebase) and ``errkb drift`` (check
where a record's message is raised now). Only ``ast`` is used: the code under
inspection is never imported or run.

A raise site is ``raise X(<message>)`` where the message is something a regex can be
derived from: a string literal, an f-string, implicit or ``+`` concatenation, a ``%``
or ``.format`` template, or a module-level string constant (or a template built on
one). Every other raise site is still counted, with the reason it could not be
templated, so a scan says honestly how much of the codebase it covers.
"""

from __future__ import annotations

import ast
import io
import json
import re
import string
import subprocess
import tarfile
import zipfile
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

# The seed record's window is lines 203-239 around a raise at 221: 18 lines either side.
CONTEXT_LINES = 18

# Exactly the characters the dataset backslash-escapes in messagePattern. Python's
# re.escape also escapes spaces, quotes, '-', '#', '&' and '~', which the dataset
# keeps as they are (see the seed and bench-corpus/patterns.jsonl.gz).
_REGEX_META = frozenset(".^$*+?{}[]\\|()")
_CONTROL_ESCAPES = {"\n": "\\n", "\t": "\\t", "\r": "\\r", "\f": "\\f", "\v": "\\v"}

# A placeholder must not swallow a line break: log lines are matched one at a time.
# Only when the message's own literal text spans lines (a multi-line message, where
# values such as tables and reprs are themselves often multi-line) may it cross one.
WILDCARD = "(.+?)"
WILDCARD_MULTILINE = "([\\s\\S]+?)"

# A template with fewer literal letters/digits than this would match almost any line.
MIN_LITERAL_ALNUM = 4

# Keyword arguments that carry the message when there is no positional one.
_MESSAGE_KEYWORDS = ("message", "msg", "detail", "reason", "description", "error")

_PRINTF_SPEC = re.compile(
    r"%(?P<key>\([^)]*\))?(?P<flags>[#0\- +]*)(?P<width>\*|\d+)?(?:\.(?P<prec>\*|\d+))?[hlL]?(?P<conv>[diouxXeEfFgGcrsa%])"
)


# ---------------------------------------------------------------- message templates


@dataclass(frozen=True)
class Placeholder:
    """A value formatted into a message at run time."""

    expr: str  # source text of the value ("self.dtype", "len(shape)"); "" when unknown
    conversion: str = ""  # "r", "s" or "a" ({x!r}, %r)
    format_spec: str = ""  # "d", ".2f", ... (as written; printf conversions are mapped)

    def display(self) -> str:
        return "{" + (self.expr or "…") + "}"

    def plausible_value(self) -> str:
        """A value a reader would accept in the rendered example message (never empty, one line)."""
        spec = self.format_spec.rstrip()
        kind = spec[-1:] if spec else ""
        hint = _hint(self.expr)
        if kind in ("d", "i", "u", "n", "o", "c") or _looks_countable(self.expr, hint):
            value = "3"
        elif kind in ("x", "X"):
            value = "1f"
        elif kind in ("e", "E", "f", "F", "g", "G", "%"):
            value = "0.5"
        elif "dtype" in hint:
            value = "float32"
        elif "shape" in hint:
            value = "(2, 3)"
        elif hint.endswith(("path", "file", "filename", "dir", "directory")):
            value = "/tmp/example"
        elif hint.endswith("type") or hint in ("cls", "klass", "class"):
            value = "str"
        elif hint:
            value = hint
        else:
            value = "value"
        if self.conversion in ("r", "a") and value[:1] not in "('[" and not value.isdigit():
            value = repr(value)
        return value


def _hint(expr: str) -> str:
    """The identifier that names the value: ``self.model.dtype`` -> ``dtype``."""
    names = re.findall(r"[A-Za-z_][A-Za-z0-9_]*", expr)
    names = [n for n in names if not (n.startswith("__") and n.endswith("__"))] or names
    if not names:
        return ""
    if expr.startswith(("type(", "repr(", "str(")) and len(names) > 1:
        return "type" if expr.startswith("type(") else names[-1].lower()
    return names[-1].lower()


def _looks_countable(expr: str, hint: str) -> bool:
    if expr.startswith("len("):
        return True
    if hint in ("n", "i", "j", "k", "num", "count", "size", "length", "idx", "index", "dim", "ndim", "rank", "axis", "lineno", "line"):
        return True
    return hint.startswith(("num_", "n_")) or hint.endswith(("_size", "_len", "_count", "_num", "_idx", "_index", "_dim", "_rank"))


@dataclass(frozen=True)
class Template:
    """A message as literal text interleaved with placeholders."""

    parts: tuple[str | Placeholder, ...]

    @staticmethod
    def of(parts: list[str | Placeholder]) -> Template:
        merged: list[str | Placeholder] = []
        for part in parts:
            if isinstance(part, str):
                if not part:
                    continue
                if merged and isinstance(merged[-1], str):
                    merged[-1] = merged[-1] + part
                    continue
            merged.append(part)
        return Template(tuple(merged))

    def __add__(self, other: Template) -> Template:
        return Template.of([*self.parts, *other.parts])

    @property
    def literal(self) -> str:
        return "".join(p for p in self.parts if isinstance(p, str))

    @property
    def placeholders(self) -> list[Placeholder]:
        return [p for p in self.parts if isinstance(p, Placeholder)]

    @property
    def multiline(self) -> bool:
        return "\n" in self.literal

    def display(self) -> str:
        """The message as a person reads it: ``Unsupported dtype {dtype}``."""
        return "".join(p if isinstance(p, str) else p.display() for p in self.parts)

    def render(self) -> str:
        """An example message with plausible values in place of the placeholders."""
        return "".join(p if isinstance(p, str) else p.plausible_value() for p in self.parts)

    def pattern(self) -> str:
        """messagePattern, built the way the dataset builds it."""
        wildcard = WILDCARD_MULTILINE if self.multiline else WILDCARD
        return "".join(escape_literal(p) if isinstance(p, str) else wildcard for p in self.parts)

    def matches(self, text: str) -> bool:
        """Whether ``self.pattern()`` would find a match in ``text``, in linear time.

        The pattern is literal chunks separated by non-empty wildcards, so the
        leftmost placement of each chunk is optimal; single-line templates are tried
        one line at a time because their wildcards cannot cross a line break.
        """
        chunks: list[str | None] = [p if isinstance(p, str) else None for p in self.parts]
        if self.multiline:
            return _chunks_match(chunks, text)
        return any(_chunks_match(chunks, line) for line in text.split("\n"))


    def fullmatches(self, text: str) -> bool:
        """Whether ``self.pattern()`` matches all of ``text`` (as ``re.fullmatch``), in linear time."""
        if not self.multiline and "\n" in text:
            return False  # neither the literal text nor a wildcard can hold a line break
        parts = list(self.parts)
        if parts and isinstance(parts[0], str):
            if not text.startswith(parts[0]):
                return False
            text, parts = text[len(parts[0]) :], parts[1:]
        if parts and isinstance(parts[-1], str):
            if not text.endswith(parts[-1]) or len(text) < len(parts[-1]):
                return False
            text, parts = text[: len(text) - len(parts[-1])], parts[:-1]
        if not parts:
            return text == ""
        # Now parts start and end with a wildcard: leftmost placement of the middle
        # chunks leaves the most room for the rest.
        return _chunks_match([p if isinstance(p, str) else None for p in parts], text)


def _chunks_match(chunks: list[str | None], text: str) -> bool:
    pos = 0
    gap = 0  # characters a preceding wildcard still has to consume
    started = False
    for chunk in chunks:
        if chunk is None:
            gap += 1
            continue
        at = text.find(chunk, pos + gap) if started else text.find(chunk, gap)
        if at < 0:
            return False
        # A leading wildcard needs `gap` characters anywhere before the first chunk.
        pos = at + len(chunk)
        gap = 0
        started = True
    if not started:
        return len(text) >= gap
    return len(text) - pos >= gap


def escape_literal(text: str) -> str:
    out = []
    for ch in text:
        if ch in _REGEX_META:
            out.append("\\" + ch)
        elif ch in _CONTROL_ESCAPES:
            out.append(_CONTROL_ESCAPES[ch])
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\x{ord(ch):02x}")
        else:
            out.append(ch)
    return "".join(out)


# ---------------------------------------------------------------- raise sites


@dataclass
class RaiseSite:
    """One ``raise`` statement that creates an exception."""

    file: str  # POSIX path relative to the scan root ("vllm/distributed/x.py")
    line: int  # line of the ``raise`` keyword
    end_line: int  # last line of the raise statement
    function: str  # qualified enclosing function ("Parser.parse", "<module>")
    error_class: str | None
    template: Template | None
    message_kind: str | None  # literal, f-string, concatenation, percent, format, constant
    reason: str | None  # why no template could be derived (None when templated)
    source_start: int
    source_end: int
    source_code: str
    kind: str = "raise"  # "raise", or "warn" for warnings.warn(...) (only when asked for)

    @property
    def templated(self) -> bool:
        return self.template is not None

    @property
    def function_name(self) -> str:
        return self.function.rsplit(".", 1)[-1]


@dataclass
class Scan:
    """The raise sites of one codebase, with what could not be read or templated."""

    root: str
    files: int = 0
    parsed: int = 0
    sites: list[RaiseSite] = field(default_factory=list)
    unparsable: list[tuple[str, str]] = field(default_factory=list)  # (file, reason)

    @property
    def templated(self) -> list[RaiseSite]:
        return [s for s in self.sites if s.template is not None]

    def untemplated_reasons(self) -> Counter:
        return Counter(s.reason for s in self.sites if s.template is None)

    def summary(self) -> dict:
        templated = len(self.templated)
        return {
            "root": self.root,
            "files": self.files,
            "files_parsed": self.parsed,
            "files_unparsable": len(self.unparsable),
            "sites": len(self.sites),
            "templated": templated,
            "templated_share": round(templated / len(self.sites), 4) if self.sites else 0.0,
            "untemplated": len(self.sites) - templated,
            "untemplated_reasons": dict(self.untemplated_reasons().most_common()),
        }


def sites_in_source(text: str, file: str, warnings: bool = False) -> list[RaiseSite]:
    """Every raise site of one Python file (and ``warnings.warn`` call, if asked).
    Raises SyntaxError/ValueError if the file does not parse."""
    tree = ast.parse(text, filename=file)
    lines = text.splitlines()
    finder = _SiteFinder(file, lines, _module_constants(tree), warnings)
    finder.visit(tree)
    return finder.sites


def scan(source: SourceTree | str | Path, include: Callable[[str, str], bool] | None = None, warnings: bool = False,
         progress: Callable[[int], None] | None = None) -> Scan:
    """Scan every .py file of ``source``; ``include(file, text)`` may skip files cheaply
    before they are parsed (drift only needs files that mention a record's words).
    ``warnings`` also collects ``warnings.warn(...)`` calls (the benchmark corpus does).
    ``progress(files_read)`` is called after each file (a large package takes a minute)."""
    tree = source if isinstance(source, SourceTree) else SourceTree.open(source)
    result = Scan(root=str(tree.path))
    for file, text in tree.python_files():
        result.files += 1
        if progress is not None:
            progress(result.files)
        if include is not None and not include(file, text):
            continue
        result.parsed += 1
        try:
            result.sites.extend(sites_in_source(text, file, warnings))
        except (SyntaxError, ValueError, RecursionError, MemoryError) as e:
            # Python 2 files, templates with .py names, NUL bytes: count them, move on.
            line = getattr(e, "lineno", None)
            where = f" (line {line})" if line else ""
            result.unparsable.append((file, f"{type(e).__name__}{where}: {getattr(e, 'msg', None) or e}"))
    return result


def _module_constants(tree: ast.Module) -> dict[str, ast.expr]:
    """Module-level ``NAME = <string expression>`` assignments, assigned exactly once."""
    seen: Counter = Counter()
    values: dict[str, ast.expr] = {}
    for node in tree.body:
        targets: list[ast.expr] = []
        value = None
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        for target in targets:
            if isinstance(target, ast.Name):
                seen[target.id] += 1
                values[target.id] = value
    return {name: v for name, v in values.items() if seen[name] == 1 and _is_string_expr(v)}


def _is_string_expr(node: ast.expr) -> bool:
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str)
    if isinstance(node, ast.JoinedStr):
        return True
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _is_string_expr(node.left) or _is_string_expr(node.right)
    return False


def _local_strings(func: ast.FunctionDef | ast.AsyncFunctionDef) -> dict[str, ast.expr]:
    """Names bound exactly once in a function (not in nested scopes), to a string
    expression: ``msg = f"..."; raise ValueError(msg)`` is as common as the inline form.
    Names bound in any other way (loops, ``+=``, ``with ... as``) are left out."""
    bindings: Counter = Counter()
    values: dict[str, ast.expr] = {}
    todo: list[ast.AST] = list(func.body)
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            values[node.targets[0].id] = node.value
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            values[node.target.id] = node.value
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            bindings[node.id] += 1
        todo.extend(ast.iter_child_nodes(node))
    for arg in (*func.args.posonlyargs, *func.args.args, *func.args.kwonlyargs, func.args.vararg, func.args.kwarg):
        if arg is not None:
            bindings[arg.arg] += 1
    return {name: v for name, v in values.items() if bindings[name] == 1 and _is_string_expr(v)}


class _NoTemplate(Exception):
    """Why a message expression cannot become a template (the reason is reported)."""


# Statement lists a raise can sit in. Raise is a statement, so walking statements
# only (not the expressions, which are most of the tree) finds every one of them.
_BODY_FIELDS = ("body", "orelse", "finalbody")


class _SiteFinder:
    def __init__(self, file: str, lines: list[str], constants: dict[str, ast.expr], warnings: bool = False):
        self.file = file
        self.warnings = warnings
        self.lines = lines
        self.constants = constants
        self.scope: list[str] = []
        # Enclosing functions; their single-assignment string locals are worked out
        # only when a raise there needs them (a full walk of every function is slow).
        self.functions: list[ast.FunctionDef | ast.AsyncFunctionDef | None] = [None]
        self._locals_cache: dict[int, dict[str, ast.expr]] = {}
        self.sites: list[RaiseSite] = []

    def visit(self, tree: ast.Module) -> None:
        self._statements(tree.body)

    def _statements(self, body: list[ast.stmt]) -> None:
        for stmt in body:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                self.scope.append(stmt.name)
                self.functions.append(None if isinstance(stmt, ast.ClassDef) else stmt)
                self._statements(stmt.body)
                self.functions.pop()
                self.scope.pop()
                continue
            if isinstance(stmt, ast.Raise):
                if stmt.exc is not None:  # a bare `raise` re-raises; it creates no new message
                    self._add_site(stmt, lambda stmt=stmt: _exception_and_message(stmt.exc), "raise")
                continue
            if self.warnings and isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) and _is_warnings_warn(stmt.value):
                call = stmt.value
                self._add_site(call, lambda call=call: _warning_and_message(call), "warn")
                continue
            for name in _BODY_FIELDS:
                inner = getattr(stmt, name, None)
                if inner:
                    self._statements(inner)
            for handler in getattr(stmt, "handlers", ()):
                self._statements(handler.body)
            for case in getattr(stmt, "cases", ()):
                self._statements(case.body)

    def _local(self, name: str) -> ast.expr | None:
        func = self.functions[-1]
        if func is None:
            return None
        key = id(func)
        if key not in self._locals_cache:
            self._locals_cache[key] = _local_strings(func)
        return self._locals_cache[key].get(name)

    def _add_site(self, node: ast.stmt | ast.expr, class_and_message, site_kind: str) -> None:
        error_class, template, kind, reason = None, None, None, None
        self._raise_line = node.lineno
        try:
            error_class, message = class_and_message()
            template, kind = self._template(message)
            if not template.literal.strip():
                raise _NoTemplate("message has no literal text")
            if sum(ch.isalnum() for ch in template.literal) < MIN_LITERAL_ALNUM:
                raise _NoTemplate("message literal too short to identify the error")
            _check_encodable(template)
        except _NoTemplate as e:
            template, kind, reason = None, None, str(e)
        start = max(1, node.lineno - CONTEXT_LINES)
        end = min(len(self.lines), node.lineno + CONTEXT_LINES)
        self.sites.append(
            RaiseSite(
                file=self.file,
                line=node.lineno,
                end_line=node.end_lineno or node.lineno,
                function=".".join(self.scope) or "<module>",
                error_class=error_class,
                template=template,
                message_kind=kind,
                reason=reason,
                source_start=start,
                source_end=end,
                source_code="\n".join(self.lines[start - 1 : end]),
                kind=site_kind,
            )
        )

    # -- message expression -> template

    def _template(self, node: ast.expr, depth: int = 0) -> tuple[Template, str]:
        if depth > 20:
            raise _NoTemplate("message expression nested too deeply")
        if isinstance(node, ast.Constant):
            if isinstance(node.value, str):
                if not node.value:
                    raise _NoTemplate("empty message")
                return Template.of([node.value]), "literal"
            if isinstance(node.value, bytes):
                raise _NoTemplate("message is bytes")
            raise _NoTemplate("message is a non-string constant")
        if isinstance(node, ast.JoinedStr):
            return _fstring(node), "f-string"
        if isinstance(node, ast.Name):
            local = self._local(node.id)
            if local is not None and local.lineno < self._raise_line:
                template, _ = self._template(local, depth + 1)
                return template, "variable"
            if node.id in self.constants and local is None:
                template, _ = self._template(self.constants[node.id], depth + 1)
                return template, "constant"
            raise _NoTemplate("message is a variable")
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            return self._concatenation(node, depth), "concatenation"
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
            fmt = self._format_string(node.left)
            return _percent(fmt, node.right), "percent"
        if isinstance(node, ast.Call):
            func = node.func
            translated = _gettext_literal(node)
            if translated is not None:
                return Template.of([translated]), "literal"
            if isinstance(func, ast.Attribute) and func.attr == "format":
                fmt = self._format_string(func.value)
                return _dot_format(fmt, node), "format"
            raise _NoTemplate("message is a call result")
        if isinstance(node, ast.Attribute):
            raise _NoTemplate("message is an attribute")
        if isinstance(node, ast.Subscript):
            raise _NoTemplate("message is a subscript")
        if isinstance(node, ast.IfExp):
            raise _NoTemplate("message is a conditional expression")
        raise _NoTemplate(f"message is a {type(node).__name__} expression")

    def _format_string(self, node: ast.expr) -> str:
        """The literal format string of a ``%`` or ``.format`` template."""
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value
        translated = _gettext_literal(node)
        if translated is not None:
            return translated
        if isinstance(node, ast.Name) and node.id in self.constants:
            value = self.constants[node.id]
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                return value.value
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            left, right = self._format_string(node.left), self._format_string(node.right)
            return left + right
        raise _NoTemplate("format string is not a literal")

    def _concatenation(self, node: ast.BinOp, depth: int) -> Template:
        operands: list[ast.expr] = []

        def flatten(n: ast.expr) -> None:
            if isinstance(n, ast.BinOp) and isinstance(n.op, ast.Add):
                flatten(n.left)
                flatten(n.right)
            else:
                operands.append(n)

        flatten(node)
        parts: list[str | Placeholder] = []
        literal_seen = False
        for operand in operands:
            if _is_string_expr(operand) or (isinstance(operand, ast.Name) and operand.id in self.constants):
                template, _ = self._template(operand, depth + 1)
                parts.extend(template.parts)
                literal_seen = True
            elif isinstance(operand, ast.BinOp) and isinstance(operand.op, ast.Mod):
                template, _ = self._template(operand, depth + 1)
                parts.extend(template.parts)
                literal_seen = True
            elif isinstance(operand, ast.Call) and isinstance(operand.func, ast.Attribute) and operand.func.attr == "format":
                template, _ = self._template(operand, depth + 1)
                parts.extend(template.parts)
                literal_seen = True
            else:
                parts.append(_placeholder_for(operand))
        if not literal_seen:
            raise _NoTemplate("message is an expression")
        return Template.of(parts)


# gettext wrappers return the literal itself when no translation is installed, which
# is what a log shows in the common (English) case: click, django, argparse use them.
_GETTEXT = frozenset({"_", "gettext", "gettext_lazy", "ugettext", "ugettext_lazy", "_lazy", "pgettext"})


def _gettext_literal(node: ast.expr) -> str | None:
    if not isinstance(node, ast.Call) or node.keywords:
        return None
    func = node.func
    name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
    if name not in _GETTEXT or not node.args:
        return None
    text = node.args[-1]  # pgettext(context, message)
    if isinstance(text, ast.Constant) and isinstance(text.value, str) and len(node.args) == (2 if name == "pgettext" else 1):
        return text.value
    return None


def _is_warnings_warn(call: ast.Call) -> bool:
    func = call.func
    return (
        isinstance(func, ast.Attribute) and func.attr == "warn" and isinstance(func.value, ast.Name) and func.value.id == "warnings"
    ) or (isinstance(func, ast.Name) and func.id == "warn")


def _warning_and_message(call: ast.Call) -> tuple[str, ast.expr]:
    """``warnings.warn(message, Category)``: the category defaults to UserWarning."""
    category: ast.expr | None = call.args[1] if len(call.args) > 1 else None
    message: ast.expr | None = call.args[0] if call.args else None
    for keyword in call.keywords:
        if keyword.arg == "category":
            category = keyword.value
        elif keyword.arg == "message":
            message = keyword.value
    if message is None:
        raise _NoTemplate("no message argument")
    name = "UserWarning"
    if isinstance(category, ast.Name):
        name = category.id
    elif isinstance(category, ast.Attribute):
        name = category.attr
    elif category is not None:
        raise _NoTemplate("warning category is computed")
    return name, message


def _exception_and_message(exc: ast.expr) -> tuple[str, ast.expr]:
    if not isinstance(exc, ast.Call):
        if isinstance(exc, (ast.Name, ast.Attribute)):
            raise _NoTemplate("raises a class or an existing exception object, no message")
        raise _NoTemplate("raises an expression")
    func = exc.func
    if isinstance(func, ast.Name):
        name = func.id
    elif isinstance(func, ast.Attribute):
        name = func.attr
    else:
        raise _NoTemplate("exception class is computed")
    if not (name[:1].isupper() or name in ("error", "herror", "gaierror", "timeout") or name.endswith(("Error", "Exception"))):
        # `raise make_error(...)`: a factory; the class it builds is unknown here.
        # Lowercase names that are classes (socket.error, re.error) are let through.
        raise _NoTemplate("raises the result of a factory call (class unknown)")
    if exc.args:
        first = exc.args[0]
        if isinstance(first, ast.Starred):
            raise _NoTemplate("message is *args")
        return name, first
    for keyword in exc.keywords:
        if keyword.arg in _MESSAGE_KEYWORDS:
            return name, keyword.value
    raise _NoTemplate("no message argument")


def _check_encodable(template: Template) -> None:
    try:
        template.literal.encode("utf-8")
    except UnicodeEncodeError:
        raise _NoTemplate("message is not valid Unicode (lone surrogate)") from None


def _placeholder_for(node: ast.expr, conversion: str = "", spec: str = "") -> Placeholder:
    try:
        expr = ast.unparse(node)
    except Exception:  # ast.unparse has gaps on odd nodes; the name is only a hint
        expr = ""
    if len(expr) > 80:
        expr = expr[:77] + "..."
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("str", "repr") and node.args:
        conversion = conversion or ("r" if node.func.id == "repr" else "")
    return Placeholder(expr=expr, conversion=conversion, format_spec=spec)


def _fstring(node: ast.JoinedStr) -> Template:
    parts: list[str | Placeholder] = []
    for value in node.values:
        if isinstance(value, ast.Constant):
            parts.append(str(value.value))
        elif isinstance(value, ast.FormattedValue):
            conversion = chr(value.conversion) if value.conversion and value.conversion > 0 else ""
            spec = ""
            if isinstance(value.format_spec, ast.JoinedStr):
                pieces = value.format_spec.values
                if all(isinstance(p, ast.Constant) for p in pieces):
                    spec = "".join(str(p.value) for p in pieces)
            parts.append(_placeholder_for(value.value, conversion, spec))
    return Template.of(parts)


def _percent(fmt: str, right: ast.expr) -> Template:
    """``"... %s ... %(name)d" % args``."""
    if isinstance(right, ast.Tuple):
        values: list[ast.expr] | None = list(right.elts)
    else:
        values = None  # one value, or a mapping
    mapping = {}
    if isinstance(right, ast.Dict):
        for k, v in zip(right.keys, right.values):
            if isinstance(k, ast.Constant) and isinstance(k.value, str):
                mapping[k.value] = v
    parts: list[str | Placeholder] = []
    pos = 0
    index = 0
    for m in _PRINTF_SPEC.finditer(fmt):
        parts.append(fmt[pos : m.start()])
        pos = m.end()
        conv = m.group("conv")
        if conv == "%":
            parts.append("%")
            continue
        if m.group("width") == "*" or m.group("prec") == "*":
            index += (m.group("width") == "*") + (m.group("prec") == "*")
        key = m.group("key")
        conversion = conv if conv in ("r", "a") else ""
        spec = conv if conv not in ("r", "a", "s") else ""
        if key:
            name = key[1:-1]
            node = mapping.get(name)
            parts.append(_placeholder_for(node, conversion, spec) if node is not None else Placeholder(name, conversion, spec))
        else:
            if values is not None:
                node = values[index] if index < len(values) else None
            else:
                node = right if index == 0 else None
            index += 1
            parts.append(_placeholder_for(node, conversion, spec) if node is not None else Placeholder("", conversion, spec))
    parts.append(fmt[pos:])
    return Template.of(parts)


def _dot_format(fmt: str, call: ast.Call) -> Template:
    """``"... {} ... {name!r:>10}".format(*args, **kwargs)``."""
    keywords = {k.arg: k.value for k in call.keywords if k.arg}
    parts: list[str | Placeholder] = []
    auto = 0
    try:
        parsed = list(string.Formatter().parse(fmt))
    except ValueError as e:
        raise _NoTemplate(f"bad .format string ({e})") from None
    for literal, field_name, spec, conversion in parsed:
        parts.append(literal)
        if field_name is None:
            continue
        head = re.split(r"[.\[]", field_name, maxsplit=1)[0]
        rest = field_name[len(head) :]
        node: ast.expr | None = None
        if head == "":
            if auto < len(call.args):
                node = call.args[auto]
            auto += 1
        elif head.isdigit():
            if int(head) < len(call.args):
                node = call.args[int(head)]
        else:
            node = keywords.get(head)
        if node is not None and not isinstance(node, ast.Starred):
            placeholder = _placeholder_for(node, conversion or "", spec or "")
            if rest:
                placeholder = Placeholder(placeholder.expr + rest, placeholder.conversion, placeholder.format_spec)
        else:
            placeholder = Placeholder(field_name, conversion or "", spec or "")
        parts.append(placeholder)
    return Template.of(parts)


# ---------------------------------------------------------------- where the source comes from


@dataclass
class Provenance:
    """What a scanned tree says about itself: project, version, commit."""

    kind: str  # "git checkout", "wheel", "installed package", "directory"
    repo: str | None = None  # owner/name on GitHub, when the metadata names one
    sha: str | None = None  # 40-hex commit, only when really known
    version: str | None = None
    distribution: str | None = None
    note: str = ""  # why there is no sha, or that the tree is dirty

    def describe(self) -> str:
        bits = [self.kind]
        if self.distribution:
            bits.append(f"{self.distribution} {self.version or ''}".strip())
        if self.sha:
            bits.append(f"commit {self.sha}")
        if self.note:
            bits.append(self.note)
        return "; ".join(bits)


_GITHUB_REPO = re.compile(r"https?://(?:www\.)?github\.com/([A-Za-z0-9_.-]+)/([A-Za-z0-9_.-]+?)(?:\.git)?(?:[/#?].*)?$")
_SHA = re.compile(r"^[0-9a-f]{40}$")
_SKIP_DIRS = {"__pycache__", ".git", ".hg", ".tox", ".nox", ".venv", "venv", "node_modules", ".mypy_cache", ".pytest_cache"}


class SourceTree:
    """A codebase to scan: a folder (checkout, site-packages, unpacked wheel), one
    package folder, one .py file, or a wheel/zip/sdist archive read in place."""

    def __init__(self, path: Path, root: Path | None, archive: bool):
        self.path = path
        self.root = root  # folder file paths are relative to (None for archives)
        self.archive = archive

    @classmethod
    def open(cls, path: str | Path) -> SourceTree:
        path = Path(path)
        if not path.exists():
            raise FileNotFoundError(f"{path}: no such file or folder")
        if path.is_file() and path.suffix in (".whl", ".zip") or path.name.endswith((".tar.gz", ".tgz")):
            return cls(path, None, archive=True)
        if path.is_file():
            return cls(path, _package_root(path.parent), archive=False)
        toplevel = git_toplevel(path)
        if toplevel is not None:
            return cls(path, toplevel, archive=False)
        return cls(path, _package_root(path), archive=False)

    def python_files(self) -> Iterator[tuple[str, str]]:
        """(POSIX path relative to the root, text) of every .py file, sorted by path."""
        if self.archive:
            yield from self._archive_files()
            return
        for rel, p in self._paths():
            yield rel, _decode(p.read_bytes())

    def _paths(self) -> list[tuple[str, Path]]:
        if self.path.is_file():
            files = [self.path]
        else:
            files = sorted(
                p
                for p in self.path.rglob("*.py")
                if p.is_file() and not (set(p.relative_to(self.path).parts[:-1]) & _SKIP_DIRS)
            )
        return [(p.relative_to(self.root).as_posix() if self.root else p.name, p) for p in files]

    def file_names(self) -> set[str]:
        """Relative paths of every .py file, without reading them."""
        if not self.archive:
            return {rel for rel, _ in self._paths()}
        if self.path.suffix in (".whl", ".zip"):
            with zipfile.ZipFile(self.path) as zf:
                return {n for n in zf.namelist() if n.endswith(".py")}
        return {rel for rel, _ in self._archive_files()}

    def _archive_files(self) -> Iterator[tuple[str, str]]:
        if self.path.name.endswith((".tar.gz", ".tgz")):
            with tarfile.open(self.path) as tar:
                members = sorted((m for m in tar.getmembers() if m.isfile() and m.name.endswith(".py")), key=lambda m: m.name)
                for m in members:
                    # sdists wrap everything in "<name>-<version>/"; the repo layout is below it.
                    rel = PurePosixPath(*PurePosixPath(m.name).parts[1:]).as_posix()
                    handle = tar.extractfile(m)
                    if handle is not None and rel:
                        yield rel, _decode(handle.read())
            return
        with zipfile.ZipFile(self.path) as zf:
            for name in sorted(n for n in zf.namelist() if n.endswith(".py")):
                yield name, _decode(zf.read(name))

    def read_text(self, rel: str) -> str | None:
        """One file's text by its relative path (None if absent)."""
        if self.archive:
            if self.path.suffix in (".whl", ".zip"):
                with zipfile.ZipFile(self.path) as zf:
                    try:
                        return _decode(zf.read(rel))
                    except KeyError:
                        return None
            for name, text in self._archive_files():
                if name == rel:
                    return text
            return None
        base = self.root or self.path
        p = base / rel
        return _decode(p.read_bytes()) if p.is_file() else None

    def provenance(self) -> Provenance:
        if self.archive:
            return _archive_provenance(self.path)
        if self.root is not None and (self.root / ".git").exists():
            return _git_provenance(self.root)
        return _installed_provenance(self.path)


def _decode(data: bytes) -> str:
    # PEP 263 coding cookies are rare in real packages; ast honours them from bytes,
    # but we need text for the source window, so read through io with the cookie.
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        import tokenize

        try:
            encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
            return data.decode(encoding)
        except (SyntaxError, LookupError, UnicodeDecodeError):
            return data.decode("latin-1")


def _package_root(folder: Path) -> Path:
    """The folder paths are relative to: above the outermost package (``__init__.py``)."""
    folder = folder.resolve()
    while (folder / "__init__.py").is_file() and folder.parent != folder:
        folder = folder.parent
    return folder


def git_toplevel(path: Path) -> Path | None:
    try:
        out = subprocess.run(
            ["git", "-C", str(path), "rev-parse", "--show-toplevel"],
            capture_output=True, text=True, timeout=20, check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if out.returncode != 0 or not out.stdout.strip():
        return None
    top = Path(out.stdout.strip()).resolve()
    # A package folder inside some unrelated repository (e.g. a venv inside a
    # checkout) is not that repository's code.
    try:
        rel = path.resolve().relative_to(top)
    except ValueError:
        return None
    tracked = subprocess.run(
        ["git", "-C", str(top), "ls-files", "--error-unmatch", "--", str(rel) if str(rel) != "." else "."],
        capture_output=True, text=True, timeout=20, check=False,
    )
    return top if tracked.returncode == 0 else None


def _git_provenance(top: Path) -> Provenance:
    def git(*args: str) -> str:
        r = subprocess.run(["git", "-C", str(top), *args], capture_output=True, text=True, timeout=20, check=False)
        return r.stdout.strip() if r.returncode == 0 else ""

    sha = git("rev-parse", "HEAD")
    prov = Provenance(kind="git checkout", sha=sha if _SHA.match(sha) else None)
    for remote in git("remote", "-v").splitlines():
        fields = remote.split()
        if len(fields) >= 2:
            url = re.sub(r"^git@github\.com:", "https://github.com/", fields[1])
            m = _GITHUB_REPO.match(url)
            if m:
                prov.repo = f"{m.group(1)}/{m.group(2)}"
                break
    if git("status", "--porcelain", "--untracked-files=no"):
        prov.note = "working tree has uncommitted changes: lines may not match the commit"
    if prov.sha is None:
        prov.note = "git checkout without a commit"
    return prov


def repo_from_urls(urls: list[str]) -> str | None:
    """owner/name from package metadata URLs, preferring Source/Repository entries."""
    ranked: list[tuple[int, str]] = []
    for entry in urls:
        label, _, url = entry.partition(",") if "," in entry else ("", "", entry)
        url = url.strip() or label.strip()
        m = _GITHUB_REPO.match(url)
        if not m:
            continue
        label = label.strip().lower()
        if label in ("source", "source code", "repository", "code", "github"):
            rank = 0
        else:
            rank = 1 if label in ("homepage", "home", "home-page") else 2
        ranked.append((rank, f"{m.group(1)}/{m.group(2)}"))
    return min(ranked)[1] if ranked else None


# Where distributions record the commit they were built from, without importing them:
# (module, names). vLLM: _version.py's __commit_id__ (setuptools-scm / vcs-versioning)
# and the older commit_id.py's __commit__; PyTorch: torch/version.py's git_version.
_COMMIT_MODULES = (
    ("_version.py", ("__commit_id__", "commit_id")),
    ("commit_id.py", ("__commit__", "commit_id")),
    ("version.py", ("git_version", "__commit__", "__commit_id__", "commit_id")),
    ("__init__.py", ("__commit__", "__commit_id__", "__git_version__")),
)
_COMMIT_VALUE = re.compile(r"^g?([0-9a-f]{7,40})$")


def commit_from_version_module(top: str, read: Callable[[str], str | None]) -> tuple[str | None, str]:
    """(full sha, "") from a package's version module, or (None, what was found instead);
    ``read(rel)`` returns a file's text under the package folder ``top``, or None."""
    short = ""
    for module, names in _COMMIT_MODULES:
        text = read(f"{top}/{module}")
        if not text:
            continue
        try:
            tree = ast.parse(text)
        except (SyntaxError, ValueError):
            continue
        for node in tree.body:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
            value = getattr(node, "value", None)
            while isinstance(value, ast.NamedExpr):
                value = value.value
            if not (isinstance(value, ast.Constant) and isinstance(value.value, str)):
                continue
            if any(isinstance(t, ast.Name) and t.id in names for t in targets):
                m = _COMMIT_VALUE.match(value.value.strip().lower())
                if m and len(m.group(1)) == 40:
                    return m.group(1), ""
                if m:
                    short = f"{top}/{module} names only the short commit {m.group(1)}"
    return None, short


def _no_commit_note(prov: Provenance, found: str = "") -> str:
    """Why there is no sha, and how a user finds the release's commit."""
    what = f"{prov.distribution} {prov.version}" if prov.distribution else "this tree"
    note = f"version of {what} is known but no commit sha: pass --sha with the release's commit"
    if found:
        note += f" ({found})"
    if prov.repo:
        note += f"; `git ls-remote --tags https://github.com/{prov.repo}` lists each release tag with its commit"
    return note


def _metadata_provenance(kind: str, metadata_text: str | None, direct_url: str | None) -> Provenance:
    prov = Provenance(kind=kind)
    if metadata_text:
        import email.parser

        msg = email.parser.Parser().parsestr(metadata_text, headersonly=True)
        prov.distribution = msg.get("Name")
        prov.version = msg.get("Version")
        urls = list(msg.get_all("Project-URL") or [])
        if msg.get("Home-page"):
            urls.append("Home-page, " + msg.get("Home-page"))
        prov.repo = repo_from_urls(urls)
    if direct_url:
        try:
            info = json.loads(direct_url)
        except ValueError:
            info = {}
        commit = (info.get("vcs_info") or {}).get("commit_id", "")
        if _SHA.match(commit or ""):
            prov.sha = commit
        m = _GITHUB_REPO.match(info.get("url", "") or "")
        if m and prov.repo is None:
            prov.repo = f"{m.group(1)}/{m.group(2)}"
    if prov.sha is None:
        prov.note = _no_commit_note(prov)
    return prov


def _with_version_module_commit(prov: Provenance, tops: list[str], read: Callable[[str], str | None]) -> Provenance:
    """Fill the sha from the distribution's version module when its metadata has none."""
    if prov.sha is not None:
        return prov
    found = ""
    for top in tops:
        sha, seen = commit_from_version_module(top, read)
        if sha:
            prov.sha, prov.note = sha, f"commit from {top}'s version module"
            return prov
        found = found or seen
    prov.note = _no_commit_note(prov, found)
    return prov


def _archive_provenance(path: Path) -> Provenance:
    if path.suffix in (".whl", ".zip"):
        with zipfile.ZipFile(path) as zf:
            names = zf.namelist()
            meta = next((n for n in names if n.count("/") == 1 and n.endswith(".dist-info/METADATA")), None)
            direct = next((n for n in names if n.count("/") == 1 and n.endswith(".dist-info/direct_url.json")), None)
            prov = _metadata_provenance(
                "wheel",
                zf.read(meta).decode("utf-8", "replace") if meta else None,
                zf.read(direct).decode("utf-8", "replace") if direct else None,
            )
            tops = sorted({n.split("/")[0] for n in names if n.count("/") == 1 and n.endswith("/__init__.py")})
            members = set(names)

            def read(rel: str) -> str | None:
                return zf.read(rel).decode("utf-8", "replace") if rel in members else None

            return _with_version_module_commit(prov, tops, read)
    with tarfile.open(path) as tar:
        pkg_info = next((m for m in tar.getmembers() if m.name.count("/") == 1 and m.name.endswith("/PKG-INFO")), None)
        text = tar.extractfile(pkg_info).read().decode("utf-8", "replace") if pkg_info else None
    return _metadata_provenance("sdist", text, None)


def _installed_provenance(path: Path) -> Provenance:
    """Metadata of the installed distribution that owns ``path``, if any."""
    path = path.resolve()
    site = _package_root(path if path.is_dir() else path.parent)
    top = path.relative_to(site).parts[0] if path != site and path.is_relative_to(site) else None
    if top is None:
        return Provenance(kind="directory", note="no git commit or package metadata found: pass --repo and --sha")
    for info in sorted(site.glob("*.dist-info")):
        tops = (info / "top_level.txt").read_text().split() if (info / "top_level.txt").is_file() else []
        record = (info / "RECORD").read_text(errors="replace") if (info / "RECORD").is_file() else ""
        if top in tops or f"\n{top}/__init__.py," in "\n" + record:
            meta = info / "METADATA"
            direct = info / "direct_url.json"
            prov = _metadata_provenance(
                "installed package",
                meta.read_text(errors="replace") if meta.is_file() else None,
                direct.read_text(errors="replace") if direct.is_file() else None,
            )

            def read(rel: str) -> str | None:
                p = site / rel
                return p.read_text(errors="replace") if p.is_file() else None

            return _with_version_module_commit(prov, [top], read)
    return Provenance(kind="directory", note="no git commit or package metadata found: pass --repo and --sha")


def package_path(name: str) -> Path:
    """The folder (or module file) of an importable package, found without importing it."""
    import importlib.util

    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError) as e:
        raise LookupError(f"package {name!r}: {e}") from None
    if spec is None:
        raise LookupError(f"package {name!r} is not installed in this Python ({_python()})")
    if spec.submodule_search_locations:
        return Path(list(spec.submodule_search_locations)[0])
    if spec.origin and spec.origin.endswith(".py"):
        return Path(spec.origin)
    raise LookupError(f"package {name!r} has no Python source ({spec.origin})")


def _python() -> str:
    import sys

    return sys.executable
