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

from errkb.mine.sources import BadArchive, SourceTree
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
    kind: str = "raise"  # "raise", or (only when asked for) "assert", "warn", "log", "factory"
    condition: str | None = None  # the test of the innermost enclosing `if` ("not (x)" in its else)

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
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (path, reason): never read

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
            "skipped": len(self.skipped),
            "skipped_reasons": dict(Counter(_reason_kind(r) for _, r in self.skipped).most_common()),
            "sites": len(self.sites),
            "templated": templated,
            "templated_share": round(templated / len(self.sites), 4) if self.sites else 0.0,
            "untemplated": len(self.sites) - templated,
            "untemplated_reasons": dict(self.untemplated_reasons().most_common()),
        }


# What a site can be. "raise" alone is what drafts and drift read; the known-site
# index reads them all (a logged or asserted message is pasted as often as a raised one).
ALL_KINDS = frozenset({"raise", "assert", "warn", "log", "factory"})


def _reason_kind(reason: str) -> str:
    """The reason without its particulars ("file over 2000000 bytes" stays whole; "... : detail" is cut)."""
    return reason.split(":", 1)[0]


def sites_in_source(text: str, file: str, warnings: bool = False, kinds: frozenset[str] | None = None) -> list[RaiseSite]:
    """Every raise site of one Python file (and ``warnings.warn`` call, if asked; every
    kind in ``kinds`` when given). Raises SyntaxError/ValueError if the file does not parse."""
    if kinds is None:
        kinds = frozenset({"raise", "warn"}) if warnings else frozenset({"raise"})
    tree = ast.parse(text, filename=file)
    lines = text.splitlines()
    finder = _SiteFinder(file, lines, _module_constants(tree), kinds)
    finder.visit(tree)
    return finder.sites


def scan(source: SourceTree | str | Path, include: Callable[[str, str], bool] | None = None, warnings: bool = False,
         progress: Callable[[int], None] | None = None, kinds: frozenset[str] | None = None,
         exclude_vendored: bool = False) -> Scan:
    """Scan every .py file of ``source``; ``include(file, text)`` may skip files cheaply
    before they are parsed (drift only needs files that mention a record's words).
    ``warnings`` also collects ``warnings.warn(...)`` calls (the benchmark corpus does);
    ``kinds`` (a subset of ALL_KINDS) says exactly which sites to collect.
    ``exclude_vendored`` leaves out vendored trees and test-internal modules.
    ``progress(files_read)`` is called after each file (a large package takes a minute)."""
    tree = source if isinstance(source, SourceTree) else SourceTree.open(source)
    result = Scan(root=str(tree.path))
    try:
        _scan_files(tree, result, include, warnings, progress, kinds, exclude_vendored)
    except BadArchive as e:  # a .whl that is no zip: nothing to read, said in the summary
        result.skipped.append((str(tree.path), str(e)))
    result.skipped.extend(tree.skipped)
    return result


def _scan_files(tree: SourceTree, result: Scan, include, warnings, progress, kinds, exclude_vendored) -> None:
    from errkb.mine.walk import excluded_reason

    for file, text in tree.python_files():
        if exclude_vendored:
            why = excluded_reason(file)
            if why is not None:
                result.skipped.append((file, why))
                continue
        result.files += 1
        if progress is not None:
            progress(result.files)
        if include is not None and not include(file, text):
            continue
        result.parsed += 1
        try:
            result.sites.extend(sites_in_source(text, file, warnings, kinds))
        except (SyntaxError, ValueError, RecursionError, MemoryError) as e:
            # Python 2 files, templates with .py names, NUL bytes: count them, move on.
            line = getattr(e, "lineno", None)
            where = f" (line {line})" if line else ""
            result.unparsable.append((file, f"{type(e).__name__}{where}: {getattr(e, 'msg', None) or e}"))


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
    def __init__(self, file: str, lines: list[str], constants: dict[str, ast.expr], kinds: frozenset[str]):
        self.file = file
        self.kinds = kinds
        self.warnings = "warn" in kinds
        # Innermost enclosing `if` test, as source text ("not (...)" inside its else).
        self.conditions: list[str | None] = [None]
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
                if stmt.exc is not None and "raise" in self.kinds:  # a bare `raise` re-raises: no new message
                    self._add_site(stmt, lambda stmt=stmt: _exception_and_message(stmt.exc), "raise")
                continue
            if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
                call = stmt.value
                if self.warnings and _is_warnings_warn(call):
                    self._add_site(call, lambda call=call: _warning_and_message(call), "warn")
                    continue
                if "log" in self.kinds and _is_logger_call(call):
                    self._add_site(call, lambda call=call: _log_level_and_message(call), "log")
                    continue
            if isinstance(stmt, ast.Assert) and stmt.msg is not None and "assert" in self.kinds:
                self._add_site(stmt, lambda stmt=stmt: ("AssertionError", stmt.msg), "assert",
                               condition=_negated(stmt.test))
                continue
            if (isinstance(stmt, ast.Return) and "factory" in self.kinds and isinstance(stmt.value, ast.Call)
                    and _names_exception_class(stmt.value.func)):
                value = stmt.value
                self._add_site(stmt, lambda value=value: _exception_and_message(value), "factory")
                continue
            if isinstance(stmt, ast.If):
                test = _source_of(stmt.test)
                self.conditions.append(test)
                self._statements(stmt.body)
                self.conditions[-1] = None if test is None or _is_elif(stmt) else _negated(stmt.test)
                self._statements(stmt.orelse)
                self.conditions.pop()
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

    def _add_site(self, node: ast.stmt | ast.expr, class_and_message, site_kind: str, condition: str | None = None) -> None:
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
                condition=condition or self.conditions[-1],
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




# ---------------------------------------------------------------- the other kinds of site

# A condition longer than this is cut: it is shown on one line next to the site.
_CONDITION_CHARS = 160


def _source_of(node: ast.expr) -> str | None:
    try:
        text = " ".join(ast.unparse(node).split())
    except Exception:  # ast.unparse has gaps on odd nodes; a condition is only a hint
        return None
    return text if len(text) <= _CONDITION_CHARS else text[: _CONDITION_CHARS - 3] + "..."


def _negated_text(test: str) -> str:
    return f"not ({test})"


_INVERSE = {ast.Eq: ast.NotEq, ast.NotEq: ast.Eq, ast.Lt: ast.GtE, ast.GtE: ast.Lt, ast.Gt: ast.LtE, ast.LtE: ast.Gt,
            ast.Is: ast.IsNot, ast.IsNot: ast.Is, ast.In: ast.NotIn, ast.NotIn: ast.In}


def _negated(test: ast.expr) -> str | None:
    """The condition under which ``test`` is false (an ``assert`` fails, an ``else`` runs):
    ``x is None`` for ``x is not None``, else ``not (test)``."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return _source_of(test.operand)
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and type(test.ops[0]) in _INVERSE:
        return _source_of(ast.Compare(left=test.left, ops=[_INVERSE[type(test.ops[0])]()], comparators=test.comparators))
    text = _source_of(test)
    return None if text is None else _negated_text(text)


def _is_elif(stmt: ast.If) -> bool:
    """An ``elif`` chain: the else branch is another ``if``, whose own test says more than "not (...)"."""
    return len(stmt.orelse) == 1 and isinstance(stmt.orelse[0], ast.If)


# Levels a user sees by default (info and debug are left out: they are not errors).
_LOG_LEVELS = {"warning": "WARNING", "warn": "WARNING", "error": "ERROR", "exception": "ERROR", "critical": "CRITICAL",
               "fatal": "CRITICAL", "warning_once": "WARNING", "error_once": "ERROR", "warning_rank0": "WARNING"}


def _is_logger_call(call: ast.Call) -> bool:
    """``logger.warning(...)``, ``self._logger.error(...)``, ``logging.exception(...)``, vLLM's ``warning_once``."""
    func = call.func
    if not (isinstance(func, ast.Attribute) and func.attr in _LOG_LEVELS):
        return False
    owner = func.value
    name = owner.id if isinstance(owner, ast.Name) else owner.attr if isinstance(owner, ast.Attribute) else ""
    name = name.lower().lstrip("_")
    return name in ("logging", "log", "logger", "_logger") or name.endswith("logger") or name.endswith("_log")


def _log_level_and_message(call: ast.Call) -> tuple[str, ast.expr]:
    """``logger.warning("... %s ...", x)``: the message is the format string with its
    arguments templated in, as logging itself does (``%`` formatting)."""
    level = _LOG_LEVELS[call.func.attr]  # type: ignore[union-attr]
    if not call.args:
        for keyword in call.keywords:
            if keyword.arg == "msg":
                return level, keyword.value
        raise NoTemplate("no message argument")
    first, rest = call.args[0], call.args[1:]
    if isinstance(first, ast.Starred) or any(isinstance(a, ast.Starred) for a in rest):
        raise NoTemplate("message is *args")
    if not rest:
        return level, first
    # logging applies a lone mapping as named arguments, else the tuple of all arguments.
    right: ast.expr = rest[0] if len(rest) == 1 and isinstance(rest[0], ast.Dict) else ast.Tuple(elts=list(rest), ctx=ast.Load())
    return level, ast.copy_location(ast.BinOp(left=first, op=ast.Mod(), right=right), first)


def _names_exception_class(func: ast.expr) -> bool:
    """``return ValueError(...)``: a factory whose caller raises what it returns."""
    name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
    return name[:1].isupper() and name.endswith(("Error", "Exception"))
