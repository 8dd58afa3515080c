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
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from errkb.mine.sources import SourceTree
from errkb.mine.templates import (
    NoTemplate,
    Placeholder,
    Template,
    check_encodable,
    placeholder_for,
    template_of_format,
    template_of_fstring,
    template_of_percent,
)

# The seed record's window is lines 203-239 around a raise at 221: 18 lines either side.
CONTEXT_LINES = 18

# A template with fewer literal letters/digits than this would match almost any line.
MIN_LITERAL_ALNUM = 4

# Keyword arguments that carry the message when there is no positional one.
_MESSAGE_KEYWORDS = ("message", "msg", "detail", "reason", "description", "error")

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
                raise NoTemplate("message has no literal text")
            if sum(ch.isalnum() for ch in template.literal) < MIN_LITERAL_ALNUM:
                raise NoTemplate("message literal too short to identify the error")
            check_encodable(template)
        except NoTemplate as e:
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
            raise NoTemplate("message expression nested too deeply")
        if isinstance(node, ast.Constant):
            if isinstance(node.value, str):
                if not node.value:
                    raise NoTemplate("empty message")
                return Template.of([node.value]), "literal"
            if isinstance(node.value, bytes):
                raise NoTemplate("message is bytes")
            raise NoTemplate("message is a non-string constant")
        if isinstance(node, ast.JoinedStr):
            return template_of_fstring(node), "f-string"
        if isinstance(node, ast.Name):
            local = self._local(node.id)
            if local is not None and local.lineno < self._raise_line:
                template, _ = self._template(local, depth + 1)
                return template, "variable"
            if node.id in self.constants and local is None:
                template, _ = self._template(self.constants[node.id], depth + 1)
                return template, "constant"
            raise NoTemplate("message is a variable")
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            return self._concatenation(node, depth), "concatenation"
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
            fmt = self._format_string(node.left)
            return template_of_percent(fmt, node.right), "percent"
        if isinstance(node, ast.Call):
            func = node.func
            translated = _gettext_literal(node)
            if translated is not None:
                return Template.of([translated]), "literal"
            if isinstance(func, ast.Attribute) and func.attr == "format":
                fmt = self._format_string(func.value)
                return template_of_format(fmt, node), "format"
            raise NoTemplate("message is a call result")
        if isinstance(node, ast.Attribute):
            raise NoTemplate("message is an attribute")
        if isinstance(node, ast.Subscript):
            raise NoTemplate("message is a subscript")
        if isinstance(node, ast.IfExp):
            raise NoTemplate("message is a conditional expression")
        raise NoTemplate(f"message is a {type(node).__name__} expression")

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
        raise NoTemplate("format string is not a literal")

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
                parts.append(placeholder_for(operand))
        if not literal_seen:
            raise NoTemplate("message is an expression")
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
        raise NoTemplate("no message argument")
    name = "UserWarning"
    if isinstance(category, ast.Name):
        name = category.id
    elif isinstance(category, ast.Attribute):
        name = category.attr
    elif category is not None:
        raise NoTemplate("warning category is computed")
    return name, message


def _exception_and_message(exc: ast.expr) -> tuple[str, ast.expr]:
    if not isinstance(exc, ast.Call):
        if isinstance(exc, (ast.Name, ast.Attribute)):
            raise NoTemplate("raises a class or an existing exception object, no message")
        raise NoTemplate("raises an expression")
    func = exc.func
    if isinstance(func, ast.Name):
        name = func.id
    elif isinstance(func, ast.Attribute):
        name = func.attr
    else:
        raise NoTemplate("exception class is computed")
    if not (name[:1].isupper() or name in ("error", "herror", "gaierror", "timeout") or name.endswith(("Error", "Exception"))):
        # `raise make_error(...)`: a factory; the class it builds is unknown here.
        # Lowercase names that are classes (socket.error, re.error) are let through.
        raise NoTemplate("raises the result of a factory call (class unknown)")
    if exc.args:
        first = exc.args[0]
        if isinstance(first, ast.Starred):
            raise NoTemplate("message is *args")
        return name, first
    for keyword in exc.keywords:
        if keyword.arg in _MESSAGE_KEYWORDS:
            return name, keyword.value
    raise NoTemplate("no message argument")


