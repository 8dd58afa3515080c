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
import itertools
import re
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from errkb.mine.reaching import UNKNOWN, reaching, read_at
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
    kind: str = "raise"  # "raise", or (only when asked for) "assert", "warn", "log", "factory", "response"
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
# "response": an HTTP error a server builds from the message (vLLM's OpenAI server:
# `return self.create_error_response("...", err_type="NotFoundError")`), what its client pastes.
ALL_KINDS = frozenset({"raise", "assert", "warn", "log", "factory", "response"})


def _reason_kind(reason: str) -> str:
    """The reason without its particulars ("file over 2000000 bytes" stays whole; "... : detail" is cut)."""
    return reason.split(":", 1)[0]


def sites_in_source(text: str, file: str, warnings: bool = False, kinds: frozenset[str] | None = None,
                    helpers: dict[tuple[str, str], RaisingHelper] | None = None,
                    calls: list[HelperCall] | None = None, classes: ReleaseClasses | None = None) -> list[RaiseSite]:
    """Every raise site of one Python file (and ``warnings.warn`` call, if asked; every
    kind in ``kinds`` when given). Raises SyntaxError/ValueError if the file does not parse.

    With ``helpers`` (a release's whole read, errkb.mine.releases), calls to *raising helpers*
    are raise sites too (:func:`raising_helper`: torch._dynamo's ``unimplemented(msg)``): this
    file's are followed here and added to ``helpers`` as ``(module, name) -> RaisingHelper``; a
    call of a name imported from another module (``from .exc import unimplemented``) goes to
    ``calls`` as a :class:`HelperCall`, for the caller to keep where that module's function
    turns out to be one (:func:`helper_call_templates`). With ``classes``, a class whose base
    is imported (torch._inductor's ``GPUTooOldForTriton(ShortenTraceback)``) is read as an
    exception class too; the message it builds is kept in ``classes`` until the release's
    read says whether that base is one (:class:`ReleaseClasses`)."""
    if kinds is None:
        kinds = frozenset({"raise", "warn"}) if warnings else frozenset({"raise"})
    tree = ast.parse(text, filename=file)
    lines = text.splitlines()
    bindings = _module_bindings(tree)
    # a helper is followed only where its def is the name's one binding (not rebound, not an import's fallback)
    functions = {node.name: node for node in tree.body
                 if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and bindings[node.name] == 1}
    finder = _SiteFinder(file, lines, _module_constants(tree, bindings), kinds, functions, _parents_of(tree))
    if "raise" in kinds or classes is not None:
        finder.module_names = _module_names(tree, file)
    if "factory" in kinds:
        class_defs = [node for node in ast.walk(tree) if isinstance(node, ast.ClassDef)]  # one walk for both
        finder.exception_classes = _exception_classes(class_defs)
        if classes is not None:
            module = module_of(file)
            classes.exceptions.update((module, name) for name in finder.exception_classes)
            finder.pending_classes = _class_bases(class_defs, module, finder.exception_classes, finder.module_names)
    if helpers is not None and "raise" in kinds:
        module = module_of(file)
        for name, func in functions.items():
            helper = raising_helper(func, functions)
            if helper is not None:
                finder.raising_helpers[name] = helper
                helpers[(module, name)] = helper
        if calls is not None:
            finder.imported = {name: target for name, target in _from_imports(tree, file).items() if bindings[name] == 1}
            finder.calls = calls
    finder.visit(tree)
    if classes is not None:
        for name, bases in finder.pending_classes.items():
            classes.pending[(module, name)] = (bases, finder.pending_sites.get(name, []))
    return finder.sites


@dataclass
class ReleaseClasses:
    """A release's exception classes, by (module, name), and the classes whose bases are
    imported from another module of it (or derive from such a class), each with its bases
    and the sites of the messages it builds: kept where a base turns out to be an exception
    class once the whole release is read."""

    exceptions: set[tuple[str, str]] = field(default_factory=set)
    pending: dict[tuple[str, str], tuple[list[tuple[str, str]], list[RaiseSite]]] = field(default_factory=dict)

    def resolved_sites(self) -> list[RaiseSite]:
        """The sites of the pending classes that are exception classes (up to _CLASS_DEPTH
        levels of them above a known one)."""
        known = set(self.exceptions)
        left = {key: bases for key, (bases, _) in self.pending.items()}
        for _ in range(_CLASS_DEPTH):
            more = [key for key, bases in left.items() if any(base in known for base in bases)]
            if not more:
                break
            known.update(more)
            for key in more:
                del left[key]
        return [site for key, (_, sites) in self.pending.items() if key in known and key not in self.exceptions
                for site in sites]


# A raising helper is short: a function that raises its first argument, perhaps after a check
# or a log line, not one that happens to raise it among much else.
HELPER_MAX_STATEMENTS = 12


@dataclass(frozen=True)
class ParamRef:
    """A raising helper's parameter inside the message it raises: at a call, that argument's
    text, after the white-space changes the helper makes to it first (``transforms``:
    ``("indent", prefix)``, ``("dedent",)``, ``("strip",)``, ``("lstrip",)``, ``("rstrip",)``,
    innermost first)."""

    name: str
    position: int | None  # its place among the positional parameters; None: keyword-only
    transforms: tuple[tuple[str, ...], ...] = ()


@dataclass(frozen=True)
class JoinedParam:
    """A value a formatting function joins from one parameter (``"\\n".join(... for h in
    hints)``): empty text where the call gives that parameter an empty collection, else a value."""

    name: str
    position: int | None
    value: Placeholder


@dataclass(frozen=True)
class RaisingHelper:
    """What a call to a raising helper raises: the class, and the message as text, values and
    the parameters it is built from (:func:`helper_call_templates` fills them from a call)."""

    error_class: str
    parts: tuple[str | Placeholder | ParamRef | JoinedParam, ...]


def raising_helper(func: ast.FunctionDef | ast.AsyncFunctionDef,
                   functions: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] | None = None) -> RaisingHelper | None:
    """What a call to ``func`` raises, if it is a *raising helper*: a short, undecorated
    module-level function (no generator) that raises an exception built from its parameters.
    Either it raises its first parameter as given (torch._dynamo's ``def unimplemented(msg, *,
    from_exc=..., case_name=None): ... raise Unsupported(msg, case_name=case_name)``), or it
    returns no value and ends by raising a message it builds from them, in an f-string or
    through a formatting function of its module (torch 2.7+'s ``unimplemented_v2(gb_type,
    context, explanation, hints)``: ``msg = format_graph_break_message(gb_type, context,
    explanation, hints); ... raise Unsupported(msg)``). A call to one raises that message: the
    call is the site."""
    params = func.args.posonlyargs + func.args.args
    if params and params[0].arg in ("self", "cls"):
        return None
    if func.decorator_list or any(isinstance(n, (ast.Yield, ast.YieldFrom, ast.Await)) for n in ast.walk(func)):
        return None  # a decorator may answer the call; a generator's body runs only when iterated
    body = list(_statements_of(func.body))
    if len(body) > HELPER_MAX_STATEMENTS:
        return None
    try:
        if params:
            error_class = _raises_first_parameter(params[0].arg, body)
            if error_class is not None:
                return RaisingHelper(error_class, (ParamRef(params[0].arg, 0),))
        return _raises_built_message(func, body, functions or {})
    except RecursionError:  # a `+` chain thousands deep: no helper, and the file's other sites kept
        return None


def _raises_first_parameter(first: str, body: list[ast.stmt]) -> str | None:
    raised = None
    for stmt in body:
        if any(t.id == first for t in _stored_names(stmt)):
            return None  # the message is changed before it is raised
        # raised, so a class: any capitalised name (dynamo's Unsupported ends in neither Error nor Exception)
        if isinstance(stmt, ast.Raise) and isinstance(stmt.exc, ast.Call) and _call_name(stmt.exc.func)[:1].isupper() \
                and stmt.exc.args and isinstance(stmt.exc.args[0], ast.Name) and stmt.exc.args[0].id == first:
            raised = raised or _call_name(stmt.exc.func)
    return raised


def _raises_built_message(func: ast.FunctionDef | ast.AsyncFunctionDef, body: list[ast.stmt],
                          functions: dict[str, ast.FunctionDef | ast.AsyncFunctionDef]) -> RaisingHelper | None:
    """A helper that returns no value and whose last statement raises a message built from its
    parameters: written in the raise (``raise TypeError(f"{name} must be {expected}")``), or a
    local built once at its top level (in an f-string, or by a formatting function of its
    module) that every other binding only extends (``msg += link``) or rebinds in a block that
    raises before the end is reached. The raise is read as every raise is
    (:func:`_exception_and_message`); a parameter the helper changes otherwise is a value."""
    last = func.body[-1] if func.body else None
    if not isinstance(last, ast.Raise) or last.exc is None:
        return None
    if any(isinstance(stmt, ast.Return) and stmt.value is not None for stmt in body):
        return None  # it returns a value where it can (a converter that raises for what it cannot convert)
    try:
        error_class, value = _exception_and_message(last.exc)
    except NoTemplate:
        return None
    params = _kept_parameters(func, body)
    if isinstance(value, ast.Name) and value.id not in params:
        built = [s for s in func.body if any(t.id == value.id for t in _stored_names(s))]
        if len(built) != 1 or not isinstance(built[0], ast.Assign) or len(built[0].targets) != 1 \
                or not _bindings_escape(func.body, value.id, built[0]):
            return None
        value = built[0].value
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id in functions:
        parts = _formatted_parts(functions[value.func.id], value, params)
    else:
        parts = _message_parts(value, params, {})
    if parts is None or not any(isinstance(p, (ParamRef, JoinedParam)) for p in parts):
        return None
    return RaisingHelper(error_class, tuple(parts))


def _formatted_parts(formatter: ast.FunctionDef | ast.AsyncFunctionDef, call: ast.Call,
                     params: dict[str, ParamRef]) -> list | None:
    """The parts of what ``call`` (in a helper with ``params``) makes ``formatter`` return."""
    shape = _formatter_parts(formatter)
    arguments = _call_arguments(call, _parameters(formatter))
    if shape is None or arguments is None:
        return None
    parts: list = []
    for part in shape:
        if not isinstance(part, (ParamRef, JoinedParam)):
            parts.append(part)
            continue
        argument = arguments.get(part.name)
        if isinstance(argument, ast.Name) and argument.id in params:
            ref = params[argument.id]
            parts.append(ParamRef(ref.name, ref.position, ref.transforms + part.transforms)
                         if isinstance(part, ParamRef) else JoinedParam(ref.name, ref.position, part.value))
        elif isinstance(part, ParamRef) and isinstance(argument, ast.Constant) and isinstance(argument.value, str):
            parts.extend(_transformed(Template.of([argument.value]), part.transforms).parts)
        elif isinstance(part, JoinedParam):
            parts.append(part.value)
        else:
            parts.append(placeholder_for(argument) if argument is not None else Placeholder(part.name))
    return parts


def _parameters(func: ast.FunctionDef | ast.AsyncFunctionDef) -> dict[str, ParamRef]:
    positional = func.args.posonlyargs + func.args.args
    out = {p.arg: ParamRef(p.arg, n) for n, p in enumerate(positional)}
    out.update((p.arg, ParamRef(p.arg, None)) for p in func.args.kwonlyargs)
    return out


def _kept_parameters(func: ast.FunctionDef | ast.AsyncFunctionDef, body: list[ast.stmt]) -> dict[str, ParamRef]:
    """The parameters whose text reaches the end of ``func``: never rebound, or rebound at its
    top level only to re-indent or strip them (``explanation = textwrap.indent(explanation,
    "    ").lstrip()``: the changes are kept with the parameter)."""
    params = _parameters(func)
    for stmt in body:
        for target in _stored_names(stmt):
            ref = params.get(target.id)
            if ref is None:
                continue
            changes = _reflow_of(stmt.value, target.id) if isinstance(stmt, ast.Assign) and stmt in func.body else None
            if changes is None:
                del params[target.id]
            else:
                params[target.id] = ParamRef(ref.name, ref.position, ref.transforms + changes)
    return params


def _formatter_parts(func: ast.FunctionDef | ast.AsyncFunctionDef) -> tuple | None:
    """The text a short formatting function returns, as parts over its parameters
    (torch's ``format_graph_break_message``): it returns an f-string, a ``+`` concatenation or
    a local built once from one. A parameter it only re-indents or strips first keeps its
    place; a local it joins from one parameter is empty where that parameter is given empty;
    every other value is a value."""
    body = list(_statements_of(func.body))
    if len(body) > HELPER_MAX_STATEMENTS or func.decorator_list:
        return None
    returns = [s for s in body if isinstance(s, ast.Return)]
    if len(returns) != 1 or returns[0] is not func.body[-1] or returns[0].value is None:
        return None
    params = _kept_parameters(func, body)
    joins: dict[str, JoinedParam] = {}
    for stmt in func.body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            joined = _joined_parameter(stmt.value, params)
            name = stmt.targets[0].id
            if joined is not None and sum(any(t.id == name for t in _stored_names(s)) for s in body) == 1:
                joins[name] = JoinedParam(joined.name, joined.position, Placeholder(name))
    value = returns[0].value
    if isinstance(value, ast.Name) and value.id not in params:
        built = [s for s in func.body if any(t.id == value.id for t in _stored_names(s))]
        if len(built) != 1 or not isinstance(built[0], ast.Assign) or not _bindings_escape(func.body, value.id, built[0]):
            return None
        value = built[0].value
    parts = _message_parts(value, params, joins)
    return tuple(parts) if any(isinstance(p, (ParamRef, JoinedParam)) for p in parts) else None


def _joined_parameter(node: ast.expr, params: dict[str, ParamRef]) -> ParamRef | None:
    """The parameter ``"sep".join(param)`` or ``"sep".join(... for x in param)`` joins (empty
    when it is), else None."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "join"
            and isinstance(node.func.value, ast.Constant) and isinstance(node.func.value.value, str)
            and len(node.args) == 1 and not node.keywords):
        return None
    joined = node.args[0]
    if isinstance(joined, (ast.GeneratorExp, ast.ListComp)) and len(joined.generators) == 1:
        joined = joined.generators[0].iter
    return params.get(joined.id) if isinstance(joined, ast.Name) else None


def _message_parts(node: ast.expr, params: dict[str, ParamRef], joins: dict[str, JoinedParam]) -> list:
    """An f-string, text or ``+`` chain as text, values and references to ``params``."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.Name) and (node.id in params or node.id in joins):
        return [params.get(node.id) or joins[node.id]]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _message_parts(node.left, params, joins) + _message_parts(node.right, params, joins)
    if isinstance(node, ast.JoinedStr):
        out: list = []
        for value in node.values:
            if (isinstance(value, ast.FormattedValue) and isinstance(value.value, ast.Name)
                    and value.conversion in (-1, ord("s")) and value.format_spec is None):
                out.extend(_message_parts(value.value, params, joins))
            else:
                out.extend(template_of_fstring(ast.JoinedStr(values=[value])).parts)
        return out
    return [placeholder_for(node)]


def _reflow_of(node: ast.expr, name: str) -> tuple[tuple[str, ...], ...] | None:
    """The white-space changes ``node`` makes to ``name`` (innermost first: ``("indent",
    prefix)``, ``("dedent",)``, ``("strip",)``, ``("lstrip",)``, ``("rstrip",)``; ``()`` for
    ``name`` itself), or None when it is anything else."""
    if isinstance(node, ast.Name):
        return () if node.id == name else None
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute) or node.keywords:
        return None
    func = node.func
    if func.attr in ("strip", "lstrip", "rstrip") and not node.args:
        inner = _reflow_of(func.value, name)
        return None if inner is None else (*inner, (func.attr,))
    if not (isinstance(func.value, ast.Name) and func.value.id == "textwrap" and node.args):
        return None
    inner = _reflow_of(node.args[0], name)
    if inner is None:
        return None
    if func.attr == "dedent" and len(node.args) == 1:
        return (*inner, ("dedent",))
    if func.attr == "indent" and len(node.args) == 2 and isinstance(node.args[1], ast.Constant) \
            and isinstance(node.args[1].value, str):
        return (*inner, ("indent", node.args[1].value))
    return None


def _transformed(template: Template, transforms: tuple[tuple[str, ...], ...]) -> Template | None:
    """``template`` after a helper's white-space changes; None (a value) where re-indenting
    text of several lines would change it in ways its parts cannot say."""
    parts = list(template.parts)
    for change in transforms:
        if change[0] in ("indent", "dedent") and "\n" in template.literal:
            return None
        if change[0] == "indent":
            if parts and not (isinstance(parts[0], str) and not "".join(p for p in parts if isinstance(p, str)).strip()
                              and len(parts) == 1):
                parts.insert(0, change[1])  # a line with text gets the prefix; a blank one does not
        if change[0] in ("dedent", "strip", "lstrip") and parts and isinstance(parts[0], str):
            parts[0] = parts[0].lstrip()
        if change[0] in ("strip", "rstrip") and parts and isinstance(parts[-1], str):
            parts[-1] = parts[-1].rstrip()
        parts = list(Template.of(parts).parts)
    return Template.of(parts)


def _stored_names(stmt: ast.stmt) -> list[ast.Name]:
    """The names one statement binds by assignment (its own targets, not those of nested blocks)."""
    if isinstance(stmt, ast.Assign):
        targets = stmt.targets
    elif isinstance(stmt, (ast.AugAssign, ast.AnnAssign, ast.For, ast.AsyncFor)):
        targets = [stmt.target]
    elif isinstance(stmt, (ast.With, ast.AsyncWith)):
        targets = [item.optional_vars for item in stmt.items if item.optional_vars is not None]
    else:
        return []
    return [n for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)]


def _bindings_escape(body: list[ast.stmt], name: str, built: ast.stmt) -> bool:
    """Whether every binding of ``name`` in ``body`` but ``built`` leaves the text that
    reaches the end of ``body`` starting as ``built`` made it: ``name += ...``, or one inside
    a block that raises at its end, outside any ``try`` that could catch it (torch's ``if
    isinstance(from_exc, Unsupported): msg = f"{from_exc.msg} ... {msg}"; raise ...``)."""
    def escapes(block: list[ast.stmt], top: bool, in_try: bool) -> bool:
        for stmt in block:
            if stmt is not built and any(t.id == name for t in _stored_names(stmt)):
                extends = isinstance(stmt, ast.AugAssign) and isinstance(stmt.op, ast.Add)
                if not extends and (top or in_try or not isinstance(block[-1], ast.Raise)):
                    return False
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                continue
            caught = in_try or bool(getattr(stmt, "handlers", None))
            inner = [(getattr(stmt, "body", None) or [], caught), (getattr(stmt, "orelse", None) or [], in_try),
                     (getattr(stmt, "finalbody", None) or [], in_try)]
            inner += [(h.body, in_try) for h in getattr(stmt, "handlers", ())]
            inner += [(c.body, in_try) for c in getattr(stmt, "cases", ())]
            if not all(escapes(b, False, t) for b, t in inner if b and isinstance(b, list)):
                return False
        return True

    return escapes(body, True, False)


def _call_arguments(call: ast.Call, params: dict[str, ParamRef]) -> dict[str, ast.expr] | None:
    """A call's arguments by the parameter each is given to (None: ``*args``/``**kwargs`` hide which)."""
    if any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
        return None
    positional = sorted((ref.position, name) for name, ref in params.items() if ref.position is not None)
    out = {name: arg for (_, name), arg in zip(positional, call.args)}
    out.update((k.arg, k.value) for k in call.keywords if k.arg in params)
    return out


@dataclass
class HelperCall:
    """A call that raises through a raising helper, its arguments read as message text (the
    templates each can give, or a value): all its module knows until the release is read whole.
    Positional arguments stop at a ``*args`` (those after it are not known by place)."""

    target: tuple[str, str]  # (module, name) of the function called
    file: str
    line: int
    function: str
    condition: str | None
    positional: list[list[Template] | Placeholder]
    keywords: dict[str, list[Template] | Placeholder]


def helper_call_templates(helper: RaisingHelper, call: HelperCall) -> list[Template]:
    """The messages ``call`` raises through ``helper``: its parts with each parameter filled by
    the call's argument (after the helper's white-space changes to it). Only the arguments' own
    text counts towards the literal minimum, in each variant (the helper's wording is shared by
    all its calls); an argument not given, or one a change makes unknowable, is a value; a
    joined parameter given empty is empty text. White space the message ends with is left off
    (a pasted message rarely keeps it). Raises NoTemplate when none is a usable message."""
    variants: list[tuple[list, int]] = [([], 0)]  # (parts, letters/digits the call's arguments gave)
    for part in helper.parts:
        if not isinstance(part, (ParamRef, JoinedParam)):
            for parts, _ in variants:
                parts.append(part)
            continue
        argument = call.keywords.get(part.name)
        if argument is None and part.position is not None and part.position < len(call.positional):
            argument = call.positional[part.position]
        if isinstance(part, JoinedParam):
            empty = isinstance(argument, list) and all(not t.parts for t in argument)
            if not empty:
                for parts, _ in variants:
                    parts.append(part.value)
            continue
        options = None
        if isinstance(argument, list):
            options = [t for t in (_transformed(t, part.transforms) for t in argument) if t is not None] or None
        if options is None:
            value = argument if isinstance(argument, Placeholder) else Placeholder(part.name)
            for parts, _ in variants:
                parts.append(value)
            continue
        if len(options) == 1:  # extended in place: a helper of many parts costs no copies per part
            given = sum(ch.isalnum() for ch in options[0].literal)
            variants = [(parts, n + given) for parts, n in variants]
            for parts, _ in variants:
                parts.extend(options[0].parts)
            continue
        variants = [([*parts, *t.parts], n + sum(ch.isalnum() for ch in t.literal))
                    for parts, n in variants for t in options][:MAX_ALTERNATIVES]
    out = []
    for parts, given in variants:
        if given < MIN_LITERAL_ALNUM:
            continue
        merged = Template.of(parts).parts
        if merged and isinstance(merged[-1], str):
            merged = (*merged[:-1], merged[-1].rstrip())
        try:
            out.append(usable_template(Template.of(list(merged))))
        except NoTemplate:
            continue
    if not out:
        raise NoTemplate("message literal too short to identify the error")
    return out


def usable_template(template: Template) -> Template:
    """``template`` as a site keeps it (colour codes dropped), or NoTemplate saying why not."""
    template = _without_colour(template)
    if not template.literal.strip():
        raise NoTemplate("message has no literal text")
    if sum(ch.isalnum() for ch in template.literal) < MIN_LITERAL_ALNUM:
        raise NoTemplate("message literal too short to identify the error")
    check_encodable(template)
    return template


def _call_name(func: ast.expr) -> str:
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""


def module_of(file: str) -> str:
    """The dotted module of a package file ("torch/_dynamo/exc.py" -> "torch._dynamo.exc")."""
    parts = file[: -len(".py")].split("/") if file.endswith(".py") else file.split("/")
    if parts and parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _from_imports(tree: ast.Module, file: str) -> dict[str, tuple[str, str]]:
    """The names a module's top-level ``from M import N [as A]`` bind: A -> (M resolved, N)."""
    package = module_of(file).split(".")
    if not file.endswith("/__init__.py"):
        package = package[:-1]
    out: dict[str, tuple[str, str]] = {}
    for node in tree.body:
        if not isinstance(node, ast.ImportFrom):
            continue
        if node.level:
            if node.level - 1 > len(package):
                continue
            base = package[: len(package) - (node.level - 1)]
            module = ".".join(base + ([node.module] if node.module else []))
        else:
            module = node.module or ""
        for alias in node.names:
            if alias.name != "*":
                out[alias.asname or alias.name] = (module, alias.name)
    return out


def _module_names(tree: ast.Module, file: str) -> dict[str, str]:
    """What each name a module's top-level imports bind stands for, as a dotted path:
    ``import torch._prims_common as utils`` binds utils -> torch._prims_common, ``import
    torch`` torch -> torch, ``from torch._prims_common import check`` check ->
    torch._prims_common.check."""
    out = {name: f"{module}.{original}" if module else original
           for name, (module, original) in _from_imports(tree, file).items()}
    for node in tree.body:
        if isinstance(node, ast.Import):
            for alias in node.names:
                out[alias.asname or alias.name.split(".", 1)[0]] = alias.name if alias.asname else alias.name.split(".", 1)[0]
    return out


# torch's checks whose message is a callable, evaluated only when the check fails:
# ``torch._check(x.dim() == 2, lambda: f"expected 2D, got {x.dim()}D")`` raises
# RuntimeError("expected 2D, got 3D") (torch/__init__.py, 2.1 on; its meta kernels and
# decompositions make thousands of them), ``torch._prims_common.check(b, s, exc_type)`` before.
# name -> (the class it raises, the position of the condition; the message follows it)
TORCH_CHECKS = {
    "torch._check": ("RuntimeError", 0),
    "torch._check_index": ("IndexError", 0),
    "torch._check_value": ("ValueError", 0),
    "torch._check_type": ("TypeError", 0),
    "torch._check_not_implemented": ("NotImplementedError", 0),
    "torch._check_tensor_all": ("RuntimeError", 0),
    "torch._check_with": (None, 1),  # the class is its first argument
    "torch._check_tensor_all_with": (None, 1),
    "torch._prims_common.check": ("RuntimeError", 0),  # exc_type= names another
}


def _dotted(node: ast.expr, module_names: dict[str, str]) -> str | None:
    """``a.b.c`` with its first name read as what the module's imports bind it to."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name) or node.id not in module_names:
        return None
    return ".".join([module_names[node.id], *reversed(parts)])


def _torch_check(call: ast.Call, module_names: dict[str, str]) -> tuple[str | None, ast.expr, ast.expr] | None:
    """(class, message, condition) of a call of torch's check family whose message is a
    lambda (a check given no message raises torch's generic "Expected cond to be True"), or None."""
    name = _dotted(call.func, module_names)
    if name not in TORCH_CHECKS or any(isinstance(a, ast.Starred) for a in call.args):
        return None
    error_class, at = TORCH_CHECKS[name]
    keywords = {k.arg: k.value for k in call.keywords if k.arg is not None}
    args = list(call.args)
    if error_class is None or "exc_type" in keywords or (name == "torch._prims_common.check" and len(args) > 2):
        if error_class is None:
            given = args[0] if args else keywords.get("error_type")
        else:
            given = keywords.get("exc_type", args[2] if len(args) > 2 else None)
        error_class = _base_name(given) if given is not None else ""
        if not error_class[:1].isupper():  # a variable holding the class (`error_type`): unknown here
            error_class = None
    test = args[at] if len(args) > at else keywords.get("cond", keywords.get("b"))
    message = args[at + 1] if len(args) > at + 1 else keywords.get("message", keywords.get("s"))
    if test is None or not isinstance(message, ast.Lambda) or message.args.args or message.args.vararg:
        return None
    return error_class, message.body, test


def _message_like(node: ast.expr) -> bool:
    """An argument that reads as a message: text, an f-string, ``%``/``+`` with text, ``"...".format()``,
    or a name (a message built above the call: ``msg = f"..."; unimplemented(msg)``; one that
    holds no text gives no template and is dropped)."""
    if isinstance(node, ast.Name):
        return True
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str)
    if isinstance(node, ast.JoinedStr):
        return True
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Mod)):
        return _message_like(node.left) or _message_like(node.right)
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "format"
            and isinstance(node.func.value, ast.Constant) and isinstance(node.func.value.value, str))


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


def _scope_bindings(body: list[ast.stmt]) -> Counter:
    """How many times each name is bound in one scope's statements (nested blocks included,
    nested defs and classes counted as one binding of their name and not entered)."""
    bindings: Counter = Counter()
    todo: list[ast.AST] = list(body)
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bindings[node.name] += 1
            continue
        if isinstance(node, ast.Lambda):
            continue
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            bindings[node.id] += 1
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bindings[node.name] += 1
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                bindings[alias.asname or alias.name.split(".")[0]] += 1
        elif isinstance(node, (ast.MatchAs, ast.MatchStar)) and node.name:
            bindings[node.name] += 1
        todo.extend(ast.iter_child_nodes(node))
    return bindings


def _module_bindings(tree: ast.Module) -> Counter:
    """Each module-level name's bindings, a function's ``global NAME`` counted as two (its
    value is then set elsewhere too)."""
    bindings = _scope_bindings(tree.body)
    for node in ast.walk(tree):
        if isinstance(node, ast.Global):
            for name in node.names:
                bindings[name] += 2
    return bindings


def _module_constants(tree: ast.Module, bindings: Counter) -> dict[str, ast.expr]:
    """Module-level ``NAME = <string expression>`` assignments, the name bound nowhere else
    (not in an ``if``, a loop, an import, a ``+=``, a function's ``global``)."""
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
                values[target.id] = value
    return {name: v for name, v in values.items() if bindings[name] == 1 and _is_string_expr(v)}


def _is_string_expr(node: ast.expr) -> bool:
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str)
    if isinstance(node, ast.JoinedStr):
        return True
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _is_string_expr(node.left) or _is_string_expr(node.right)
    return False


@dataclass
class _Locals:
    """What a function binds (not in nested scopes): ``bindings`` counts each name's
    bindings, parameters and imports and ``except ... as`` included; ``choices`` are its
    names bound only by assignments of string text, none of which reads the name itself
    (what a nested helper reads from its enclosing function, which runs before it);
    ``defs`` the functions defined in it by name, in source order (helpers); ``texts`` its
    names that some assignment gives string text (a call's argument worth reading as one)."""

    bindings: Counter
    choices: dict[str, list[ast.expr]]
    defs: dict[str, list[ast.FunctionDef | ast.AsyncFunctionDef]]
    texts: frozenset[str] = frozenset()


def _locals_of(func: ast.FunctionDef | ast.AsyncFunctionDef) -> _Locals:
    bindings: Counter = Counter()
    values: dict[str, list[ast.expr]] = {}
    defs: dict[str, list[ast.FunctionDef | ast.AsyncFunctionDef]] = {}
    todo: list[ast.AST] = list(func.body)
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            if not isinstance(node, ast.ClassDef):
                defs.setdefault(node.name, []).append(node)
            bindings[node.name] += 1
            for inner in ast.walk(node):  # a nested def's `nonlocal msg; msg = ...` changes ours
                if isinstance(inner, ast.Nonlocal):
                    for name in inner.names:
                        bindings[name] += 2
            continue
        if isinstance(node, ast.Lambda):
            continue
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            values.setdefault(node.targets[0].id, []).append(node.value)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            values.setdefault(node.target.id, []).append(node.value)
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            bindings[node.id] += 1
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bindings[node.name] += 1
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                bindings[alias.asname or alias.name.split(".")[0]] += 1
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            for name in node.names:
                bindings[name] += 2  # never a choice: its value is set elsewhere
        elif isinstance(node, (ast.MatchAs, ast.MatchStar)) and node.name:
            bindings[node.name] += 1
        todo.extend(ast.iter_child_nodes(node))
    for arg in (*func.args.posonlyargs, *func.args.args, *func.args.kwonlyargs, func.args.vararg, func.args.kwarg):
        if arg is not None:
            bindings[arg.arg] += 1
    # `msg = f"{msg} and ..."` builds a message step by step: no one assignment is a choice of it.
    choices = {name: sorted(v, key=lambda n: (n.lineno, n.col_offset)) for name, v in values.items()
               if bindings[name] == len(v) and all(_is_string_expr(x) for x in v)
               and not any(isinstance(n, ast.Name) and n.id == name for x in v for n in ast.walk(x))}
    for found in defs.values():
        found.sort(key=lambda n: n.lineno)
    texts = frozenset(name for name, v in values.items() if any(_is_string_expr(x) for x in v))
    return _Locals(bindings, choices, defs, texts)


def _parents_of(tree: ast.Module) -> dict[int, ast.FunctionDef | ast.AsyncFunctionDef | None]:
    """Each def's lexically enclosing def (a class body is no scope a method's body sees)."""
    parents: dict[int, ast.FunctionDef | ast.AsyncFunctionDef | None] = {}
    todo: list[tuple[ast.stmt, ast.FunctionDef | ast.AsyncFunctionDef | None]] = [(s, None) for s in tree.body]
    while todo:
        stmt, enclosing = todo.pop()
        inner = enclosing
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            parents[id(stmt)] = enclosing
            inner = stmt
        for name in _BODY_FIELDS:
            todo.extend((child, inner) for child in getattr(stmt, name, None) or ())
        for clause in (*getattr(stmt, "handlers", ()), *getattr(stmt, "cases", ())):
            todo.extend((child, inner) for child in clause.body)
    return parents


# A message chosen among assignments or a helper's returns gives one pattern per choice, up
# to this many (vLLM's "... model length of {n}. {suggestion}" has two suggestions).
MAX_ALTERNATIVES = 8
# A list a function collects its messages in is read up to this many items (a hostile
# function of thousands of appends, joined by as many raises, stays linear).
MAX_JOINED_ITEMS = 256

# The sub-expressions one message may be built from (choices within choices within helpers):
# past this the site is counted as untemplated, so a hostile file stays linear.
EXPANSION_BUDGET = 500

# A terminal's colour codes in a message ("\033[1mdo those steps only ...\033[0m") are
# not in what a user pastes: the pattern leaves them out.
_ANSI_SGR = re.compile(r"\x1b\[[0-9;]*m")


# Statement lists a raise can sit in. Raise is a statement, so walking statements
# only (not the expressions, which are most of the tree) finds every one of them.
_BODY_FIELDS = ("body", "orelse", "finalbody")


class _SiteFinder:
    def __init__(self, file: str, lines: list[str], constants: dict[str, ast.expr], kinds: frozenset[str],
                 functions: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] | None = None,
                 parents: dict[int, ast.FunctionDef | ast.AsyncFunctionDef | None] | None = None):
        self.file = file
        self.module_functions = functions or {}
        self._parents = parents or {}  # a def's enclosing def
        self._target: ast.stmt | None = None  # the statement a message is built for (None: a closure's scope)
        self._flow_memo: dict = {}  # errkb.mine.reaching's per-file memo
        self._read_at: dict[int, ast.stmt] = {}  # id(value) -> the statement its names are read at
        self._helper_memo: dict[int, list[Template] | str] = {}
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
        self._locals_cache: dict[int, _Locals] = {}
        self.classes: list[ast.ClassDef | None] = [None]  # the class of each function on the stack
        self._helpers_open: set[int] = set()  # helpers being read (a recursive helper is not followed)
        self._names_open: set[tuple[int, str, int]] = set()  # (function, name, statement) being expanded
        self.sites: list[RaiseSite] = []
        # raising helpers (sites_in_source's ``helpers``): this module's by name; names imported
        # from other modules -> (module, name), whose calls with message-like arguments go to ``calls``
        self.raising_helpers: dict[str, RaisingHelper] = {}
        self.imported: dict[str, tuple[str, str]] = {}
        self.calls: list | None = None
        # the module each name of this module's imports stands for (torch._check's family is
        # recognised by what it is: `torch._check`, `utils.check` of `import torch._prims_common as utils`)
        self.module_names: dict[str, str] = {}
        # this module's exception classes (by name): the message one builds in its __init__
        # or __str__ is what every raise of it prints (vLLM's EngineDeadError)
        self.exception_classes: set[str] = set()
        # classes whose bases are another module's (name -> the bases, as (module, name)):
        # their messages wait in pending_sites until the release is read (ReleaseClasses)
        self.pending_classes: dict[str, list[tuple[str, str]]] = {}
        self.pending_sites: dict[str, list[RaiseSite]] = {}
        self._methods: dict[int, set[int]] = {}  # id(class) -> ids of its body's statements
        self._constants_of: dict[int, dict[str, list[ast.expr]]] = {}  # id(class) -> _class_constants
        self._joined_templates: dict[tuple[int, str], list[Template]] = {}
        self._joined_memo: dict[tuple[int, str], tuple[list[ast.expr], list[ast.stmt]] | None] = {}

    def visit(self, tree: ast.Module) -> None:
        self._statements(tree.body)

    def _statements(self, body: list[ast.stmt]) -> None:
        for stmt in body:
            self._target = stmt
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                self.scope.append(stmt.name)
                self.functions.append(None if isinstance(stmt, ast.ClassDef) else stmt)
                self.classes.append(stmt if isinstance(stmt, ast.ClassDef) else self.classes[-1])
                self._statements(stmt.body)
                self.classes.pop()
                self.functions.pop()
                self.scope.pop()
                continue
            if isinstance(stmt, ast.Raise):
                if stmt.exc is not None and "raise" in self.kinds:  # a bare `raise` re-raises: no new message
                    self._add_site(stmt, lambda stmt=stmt: _exception_and_message(stmt.exc), "raise")
                continue
            built = self._built_by_class(stmt)
            if built is not None:
                node, class_name, message = built
                before = len(self.sites)
                self._add_site(node, lambda class_name=class_name, message=message: (class_name, message), "factory",
                               printed_as=class_name)
                if class_name in self.pending_classes:  # the release's read decides
                    self.pending_sites.setdefault(class_name, []).extend(self.sites[before:])
                    del self.sites[before:]
                continue
            if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
                call = stmt.value
                if self.warnings and _is_warnings_warn(call):
                    self._add_site(call, lambda call=call: _warning_and_message(call), "warn")
                    continue
                if "log" in self.kinds and _is_logger_call(call):
                    self._add_site(call, lambda call=call: _log_level_and_message(call), "log")
                    continue
                check = _torch_check(call, self.module_names) if "raise" in self.kinds else None
                if check is not None:
                    error_class, message, test = check
                    self._add_site(call, lambda error_class=error_class, message=message: (error_class, message),
                                   "raise", condition=_negated(test))
                    continue
                if isinstance(call.func, ast.Name) and (call.args or call.keywords):
                    helper = self.raising_helpers.get(call.func.id)
                    if helper is not None:  # a call to this module's raising helper raises its message
                        self._add_site(call, lambda call=call, helper=helper: (
                            helper.error_class, helper_call_templates(helper, self._helper_call(call, None))), "raise")
                        continue
                    target = self.imported.get(call.func.id)
                    if (target is not None and self.calls is not None
                            and any(_message_like(a) for a in [*call.args, *(k.value for k in call.keywords)])):
                        # maybe another module's raising helper: the release's read decides
                        self._budget, self._raise_line = EXPANSION_BUDGET, call.lineno
                        self.calls.append(self._helper_call(call, target))
                        continue
            if isinstance(stmt, ast.Assert) and stmt.msg is not None and "assert" in self.kinds:
                self._add_site(stmt, lambda stmt=stmt: ("AssertionError", stmt.msg), "assert",
                               condition=_negated(stmt.test))
                continue
            if ("response" in self.kinds and isinstance(stmt, (ast.Return, ast.Expr, ast.Assign, ast.AnnAssign))
                    and isinstance(stmt.value, ast.Call) and _is_error_response_call(stmt.value)):
                value = stmt.value
                self._add_site(stmt, lambda value=value: _response_type_and_message(value), "response")
                continue
            if (isinstance(stmt, ast.Return) and "factory" in self.kinds and isinstance(stmt.value, ast.Call)
                    and _names_exception_class(stmt.value.func)):
                value = stmt.value
                self._add_site(stmt, lambda value=value: _exception_and_message(value), "factory")
                continue
            if isinstance(stmt, ast.If):
                # an elif chain is walked in a loop: a thousand-branch chain is no recursion
                branch, opened = stmt, 0
                while True:
                    test = _source_of(branch.test)
                    self.conditions.append(test)
                    opened += 1
                    self._statements(branch.body)
                    if _is_elif(branch):
                        self.conditions[-1] = None
                        branch = branch.orelse[0]
                        self._target = branch
                        continue
                    self.conditions[-1] = None if test is None else _negated(branch.test)
                    self._statements(branch.orelse)
                    break
                del self.conditions[-opened:]
                continue
            for name in _BODY_FIELDS:
                inner = getattr(stmt, name, None)
                if inner:
                    self._statements(inner)
            for handler in getattr(stmt, "handlers", ()):
                self._statements(handler.body)
            for case in getattr(stmt, "cases", ()):
                self._statements(case.body)

    def _helper_call(self, call: ast.Call, target: tuple[str, str] | None) -> HelperCall:
        """A call's arguments read as message text: the templates each gives, or a value. A
        name is read only where it may hold text (a local or enclosing function's variable
        assigned some, a module constant): most calls pass values, and following each one's
        assignments would spend the file's flow budget (errkb.mine.reaching) on them."""
        def read(node: ast.expr) -> list[Template] | Placeholder:
            if (isinstance(node, ast.Constant) and node.value == "") or (
                    isinstance(node, (ast.List, ast.Tuple, ast.Set)) and not node.elts):
                return [Template.of([])]  # given empty: empty text (a hint list joined from it, too)
            if _message_like(node) and (not isinstance(node, ast.Name) or self._may_hold_text(node.id)):
                try:
                    return [t for t, _ in self._templates(node)][:MAX_ALTERNATIVES]
                except (NoTemplate, RecursionError):
                    pass
            return placeholder_for(node)

        return HelperCall(target=target or ("", ""), file=self.file, line=call.lineno,
                          function=".".join(self.scope) or "<module>", condition=self.conditions[-1],
                          positional=[read(a) for a in itertools.takewhile(
                              lambda a: not isinstance(a, ast.Starred), call.args)],
                          keywords={k.arg: read(k.value) for k in call.keywords if k.arg is not None})

    def _may_hold_text(self, name: str) -> bool:
        if name in self.constants:
            return True
        func = self.functions[-1]
        while func is not None:
            if name in self._locals(func).texts:
                return True
            func = self._parents.get(id(func))
        return False

    def _locals(self, func: ast.FunctionDef | ast.AsyncFunctionDef | None = None) -> _Locals | None:
        func = func if func is not None else self.functions[-1]
        if func is None:
            return None
        key = id(func)
        if key not in self._locals_cache:
            self._locals_cache[key] = _locals_of(func)
        return self._locals_cache[key]

    def _built_by_class(self, stmt: ast.stmt) -> tuple[ast.AST, str, ast.expr] | None:
        """(node, class, message) where ``stmt`` is where an exception class of this module
        builds its message: the text its ``__init__`` hands its base (``super().__init__(msg)``,
        ``Base.__init__(self, msg)``) or its ``__str__`` returns. Every ``raise Class(...)``
        prints it, wherever it is (a raise site of the class sees only its arguments). A
        parameter handed on as it came is the caller's message, not one built here."""
        cls, func = self.classes[-1], self.functions[-1]
        if (cls is None or func is None or func.name not in ("__init__", "__str__")
                or (cls.name not in self.exception_classes and cls.name not in self.pending_classes)):
            return None
        methods = self._methods.get(id(cls))
        if methods is None:  # once per class: a hostile class of thousands of methods stays linear
            methods = self._methods[id(cls)] = {id(node) for node in cls.body}
        if id(func) not in methods:
            return None
        if func.name == "__str__":
            message = stmt.value if isinstance(stmt, ast.Return) and stmt.value is not None else None
        else:
            call = stmt.value if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) else None
            target = call.func if call is not None else None
            if not (isinstance(target, ast.Attribute) and target.attr == "__init__"):
                return None
            if isinstance(target.value, ast.Call) and isinstance(target.value.func, ast.Name) \
                    and target.value.func.id == "super":
                args = call.args
            elif isinstance(target.value, (ast.Name, ast.Attribute)) and _base_name(target.value) in {
                    _base_name(b) for b in cls.bases}:  # Base.__init__(self, msg), Base one of its bases
                args = call.args[1:]
            else:
                return None
            message = args[0] if args and not isinstance(args[0], ast.Starred) else None
            arguments = func.args
            parameters = {a.arg for a in arguments.posonlyargs + arguments.args + arguments.kwonlyargs}
            parameters.update(a.arg for a in (arguments.vararg, arguments.kwarg) if a is not None)
            if message is None or (isinstance(message, ast.Name) and message.id in parameters):
                return None
        if message is None:
            return None
        if isinstance(message, ast.Attribute) and isinstance(message.value, ast.Name) \
                and message.value.id in ("self", "cls", cls.name):  # self.ENGINE_DEAD_MESSAGE
            constants = self._constants_of.get(id(cls))
            if constants is None:  # once per class: a class of thousands of them stays linear
                constants = self._constants_of[id(cls)] = _class_constants(cls)
            values = constants.get(message.attr, [])
            if len(values) == 1 and _is_string_expr(values[0]):
                message = values[0]
        if not _message_like(message):
            return None
        return stmt, cls.name, message

    def _add_site(self, node: ast.stmt | ast.expr, class_and_message, site_kind: str, condition: str | None = None,
                  printed_as: str | None = None) -> None:
        error_class = None
        self._raise_line = node.lineno
        self._budget = EXPANSION_BUDGET
        found: list[tuple[Template | None, str | None, str | None]] = []  # (template, kind, reason)
        try:
            error_class, message = class_and_message()
            seen: set[tuple] = set()
            # a helper call's messages come templated (helper_call_templates)
            found_templates = [(t, "helper call") for t in message] if isinstance(message, list) else self._templates(message)
            if printed_as is not None:
                # as a traceback prints it ("torch._dynamo.exc.BackendCompilerFailed: backend=...
                # raised:"): the class's name is the message's own text there, and makes a short
                # message specific enough to serve (errkb.match.sites' trust rule)
                found_templates = [*found_templates, *((Template.of([f"{printed_as}: "]) + t, kind)
                                                       for t, kind in found_templates)]
            for template, kind in found_templates:
                try:
                    template = usable_template(template)
                except NoTemplate as e:
                    found.append((None, None, str(e)))
                    continue
                if template.parts not in seen:
                    seen.add(template.parts)
                    found.append((template, kind, None))
        except NoTemplate as e:
            found.append((None, None, str(e)))
        except RecursionError:  # a `+` chain or nesting thousands deep: this site, not the file
            found.append((None, None, "message expression nested too deeply"))
        templated = [f for f in found if f[0] is not None]
        start = max(1, node.lineno - CONTEXT_LINES)
        end = min(len(self.lines), node.lineno + CONTEXT_LINES)
        for template, kind, reason in (templated or found[:1]):
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

    # -- a message with choices: one template per choice

    def _templates(self, node: ast.expr, depth: int = 0) -> list[tuple[Template, str]]:
        """The templates a message expression can give (more than one where it names a
        variable assigned in several branches, or calls a helper with several returns)."""
        if depth > 20:
            raise NoTemplate("message expression nested too deeply")
        self._budget -= 1
        if self._budget < 0:  # hostile code: branches of branches of helpers would be exponential
            raise NoTemplate(f"message has over {EXPANSION_BUDGET} ways to be built")
        if isinstance(node, ast.Name):
            named = self._name_options(node.id, depth)
            if named is None:
                raise NoTemplate("message is a variable")
            templates, kind = named
            return [(t, kind) for t in templates]
        if isinstance(node, ast.Tuple):
            return [(t, "tuple") for t in self._tuple_templates(node, depth)]
        if (isinstance(node, ast.JoinedStr) and len(node.values) == 1 and isinstance(node.values[0], ast.FormattedValue)
                and node.values[0].conversion == -1 and node.values[0].format_spec is None
                and isinstance(node.values[0].value, ast.Call) and self._joined_list(node.values[0].value) is not None):
            return self._templates(node.values[0].value, depth + 1)  # f"{' '.join(errors)}"
        if isinstance(node, ast.JoinedStr):
            return [(t, "f-string") for t in self._fstring_templates(node, depth)]
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            return [(t, "concatenation") for t in self._concatenation_templates(node, depth)]
        if isinstance(node, ast.Call):
            collected = self._joined_list(node)
            if collected is not None:
                key = (id(self.functions[-1]), node.args[0].id)
                templates = self._joined_templates.get(key)
                if templates is None:  # once per list: as many raises of it stay linear
                    values, where = collected
                    templates = self._joined_templates[key] = self._alternatives(values, depth, where,
                                                                                  limit=MAX_JOINED_ITEMS)
                return [(t, "joined list") for t in templates]
            helper = self._helper(node.func, node.lineno)
            if helper is not None:
                return [(t, "helper") for t in self._helper_templates(helper, depth)]
        return [self._template(node, depth)]

    def _joined_list(self, call: ast.Call) -> tuple[list[ast.expr], list[ast.stmt]] | None:
        """(items, statements) where ``call`` joins a list this function collects its messages
        in (``errors.append(f"LoRA rank {r} is greater than ...")`` under each check, then
        ``raise ValueError(" ".join(errors))``: vLLM's PEFTHelper.validate_legal): each item is
        the message when its check alone fails, read where it is appended. None otherwise."""
        func = self.functions[-1]
        if not (func is not None and isinstance(call.func, ast.Attribute) and call.func.attr == "join"
                and isinstance(call.func.value, ast.Constant) and isinstance(call.func.value.value, str)
                and len(call.args) == 1 and not call.keywords and isinstance(call.args[0], ast.Name)):
            return None
        name = call.args[0].id
        key = (id(func), name)
        if key in self._joined_memo:
            return self._joined_memo[key]
        values: list[ast.expr] = []
        where: list[ast.stmt] = []
        for stmt in _statements_of(func.body):
            if len(values) >= MAX_JOINED_ITEMS:
                break
            value = stmt.value if isinstance(stmt, (ast.Expr, ast.Assign, ast.AugAssign)) else None
            if (isinstance(stmt, ast.Expr) and isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute)
                    and value.func.attr == "append" and isinstance(value.func.value, ast.Name)
                    and value.func.value.id == name and len(value.args) == 1):
                values.append(value.args[0])
                where.append(stmt)
            elif (isinstance(value, ast.List) and (
                    (isinstance(stmt, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in stmt.targets))
                    or (isinstance(stmt, ast.AugAssign) and isinstance(stmt.target, ast.Name) and stmt.target.id == name))):
                values.extend(e for e in value.elts if not isinstance(e, ast.Starred))
                where.extend(stmt for e in value.elts if not isinstance(e, ast.Starred))
        found = self._joined_memo[key] = (values[:MAX_JOINED_ITEMS], where[:MAX_JOINED_ITEMS]) if values else None
        return found

    def _alternatives(self, values: list[ast.expr], depth: int, where: list[ast.stmt] | None = None,
                      limit: int = MAX_ALTERNATIVES) -> list[Template]:
        """Each value's templates (the first ``limit``); ``where`` gives the statement each value
        is assigned in, where its own names are read (``msg = f"{msg} is deprecated"`` reads the
        earlier ``msg``)."""
        out: list[Template] = []
        saved = self._target
        for n, value in enumerate(values):
            if isinstance(value, ast.Constant) and value.value == "":
                out.append(Template.of([]))  # `note = ""` in one branch: the message without it
                continue
            if where is not None:
                self._target = where[n]
            try:
                out.extend(t for t, _ in self._templates(value, depth + 1))
            except NoTemplate:
                continue
            finally:
                self._target = saved
        if not out:
            raise NoTemplate("message is a variable")
        return out[:limit]

    def _fstring_templates(self, node: ast.JoinedStr, depth: int) -> list[Template]:
        """An f-string whose fields name string constants or locals assigned string text
        (``f"... {max_len}. {suggestion}"``) gives that text, not a wildcard, in each of its choices."""
        variants: list[list[str | Placeholder]] = [[]]
        for value in node.values:
            options: list[Template] | None = None
            if (isinstance(value, ast.FormattedValue) and isinstance(value.value, ast.Name)
                    and value.conversion in (-1, ord("s")) and value.format_spec is None):
                named = self._name_options(value.value.id, depth)
                options = named[0] if named else None
            if options is None:
                piece = template_of_fstring(ast.JoinedStr(values=[value])).parts
                variants = [[*v, *piece] for v in variants]
            else:
                variants = [[*v, *o.parts] for v in variants for o in options][:MAX_ALTERNATIVES]
        return [Template.of(v) for v in variants]

    def _tuple_templates(self, node: ast.Tuple, depth: int) -> list[Template]:
        """What ``str()`` of a built-in exception given several arguments prints: the repr of
        their tuple. Each argument's text is read as a message's is (names, ``%``, ``+``,
        helpers), then written as repr writes it; a non-string constant is its repr; what
        cannot be read is a value (its repr unknown). Only the arguments' own text counts
        towards the literal minimum: ``(x, None)`` says nothing."""
        variants: list[list[str | Placeholder]] = [["("]]
        text = 0
        for n, element in enumerate(node.elts):
            options: list[list[str | Placeholder]]
            if isinstance(element, ast.Constant) and not isinstance(element.value, str):
                options = [[repr(element.value)]]
            else:
                try:
                    found = [t for t, _ in self._templates(element, depth + 1)]
                except NoTemplate:
                    found = []
                if not found:
                    options = [[placeholder_for(element, "r")]]
                else:
                    text += max(sum(ch.isalnum() for ch in t.literal) for t in found)
                    options = [list(_quoted(t, q).parts) for t in found for q in _repr_quotes(t)]
            comma = [", "] if n else []
            variants = [[*v, *comma, *o] for v in variants for o in options][:MAX_ALTERNATIVES]
        if text < MIN_LITERAL_ALNUM:
            raise NoTemplate("message literal too short to identify the error")
        return [Template.of([*v, ")"]) for v in variants]

    def _concatenation_templates(self, node: ast.BinOp, depth: int) -> list[Template]:
        """``text + name + CONSTANT``: each operand's choices, as in an f-string."""
        operands: list[tuple[ast.expr, ast.stmt | None]] = []

        def flatten(n: ast.expr, at: ast.stmt | None) -> None:
            # `msg += x` made msg's text base + x: the base is read where it was assigned, x at the `+=`
            at = self._read_at.get(id(n), at)
            if isinstance(n, ast.BinOp) and isinstance(n.op, ast.Add):
                flatten(n.left, at)
                flatten(n.right, at)
            else:
                operands.append((n, at))

        flatten(node, None)
        variants: list[list[str | Placeholder]] = [[]]
        literal_seen = False
        saved = self._target
        for operand, at in operands:
            options: list[Template] | None = None
            self._target = at if at is not None else saved
            try:
                if isinstance(operand, ast.Name):
                    named = self._name_options(operand.id, depth)
                    options = named[0] if named else None
                elif _is_string_expr(operand) or (isinstance(operand, ast.BinOp) and isinstance(operand.op, ast.Mod)) or (
                        isinstance(operand, ast.Call) and isinstance(operand.func, ast.Attribute)
                        and operand.func.attr == "format"):
                    options = [t for t, _ in self._templates(operand, depth + 1)]
            finally:
                self._target = saved
            if options is None:
                variants = [[*v, placeholder_for(operand)] for v in variants]
            else:
                literal_seen = True
                variants = [[*v, *o.parts] for v in variants for o in options][:MAX_ALTERNATIVES]
        if not literal_seen:
            raise NoTemplate("message is an expression")
        return [Template.of(v) for v in variants]

    def _name_options(self, name: str, depth: int) -> tuple[list[Template], str] | None:
        """The text a name in a message stands for, with where it came from ("variable" or
        "constant"): the string assignments of a local that reach the statement the message
        is built in (one, or one per branch; a ``+=`` extends them), a variable of an
        enclosing function (a nested helper's closure: torch's ``UNSAFE_MESSAGE``) read in
        that function's scope, or a module constant. None: a wildcard (a parameter, a
        computed value, a name bound in any other way)."""
        func = self.functions[-1]
        key = (id(func), name, id(self._target))
        if key in self._names_open:  # `a = f"{b}"; b = f"{a}"`: a wildcard, not a loop
            return None
        self._names_open.add(key)
        try:
            return self._name_text(func, name, depth)
        finally:
            self._names_open.discard(key)

    def _name_text(self, func, name: str, depth: int) -> tuple[list[Template], str] | None:
        if func is None and len(self.functions) > 1:
            return None  # a class body: its own names and its enclosing function's are not followed
        if func is not None:
            found = self._locals(func)
            if name in found.bindings:
                if self._target is None:
                    values, where = found.choices.get(name), None
                else:
                    reached = self._reaching(func, name)
                    values, where = (None, None) if reached is None else ([v for v, _ in reached], [w for _, w in reached])
                options = self._optional_alternatives(values, depth, where) if values else None
                return (options, "variable") if options else None
            outer = self._parents.get(id(func))
            while outer is not None:
                found = self._locals(outer)
                if name in found.bindings:
                    values = found.choices.get(name)
                    if not values:
                        return None
                    # read where it is assigned: its own names are the enclosing function's
                    self.functions.append(outer)
                    saved, self._target = self._target, None
                    try:
                        options = self._optional_alternatives(values, depth)
                    finally:
                        self._target = saved
                        self.functions.pop()
                    return (options, "variable") if options else None
                outer = self._parents.get(id(outer))
        if name in self.constants:
            options = self._optional_alternatives([self.constants[name]], depth)
            return (options, "constant") if options else None
        return None

    def _reaching(self, func, name: str) -> list[tuple[ast.expr, ast.stmt]] | None:
        """The string assignments of ``name`` that reach the statement being read, with the
        statement of each, when every binding that reaches it is one (errkb.mine.reaching)."""
        values = reaching(func, name, self._target, self._flow_memo)
        if not values or any(v is UNKNOWN or not _is_string_expr(v) for v, _ in values):
            return None
        self._read_at.update(read_at(func, name, self._flow_memo))
        return list(values)

    def _optional_alternatives(self, values: list[ast.expr], depth: int,
                               where: list[ast.stmt] | None = None) -> list[Template] | None:
        try:
            return self._alternatives(values, depth, where)
        except NoTemplate:
            return None

    def _helper(self, func: ast.expr, call_line: int) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
        """The function a message-building call runs, where it is defined in this file and
        nothing else is bound to its name: a def of this function (the last before the call)
        or of an enclosing one, a module-level def, or (``self.x(...)``) a method of the
        enclosing class (torch's ``_get_wo_message``, ``_create_warning_msg``)."""
        if isinstance(func, ast.Name):
            scope = self.functions[-1]
            while scope is not None:
                found = self._locals(scope)
                if func.id in found.bindings:
                    defs = found.defs.get(func.id, [])
                    if len(defs) != 1 or found.bindings[func.id] != 1:
                        return None  # also bound otherwise, or defined twice (in two branches): not known here
                    if scope is self.functions[-1] and defs[0].lineno >= call_line:
                        return None
                    return defs[0]
                scope = self._parents.get(id(scope))
            return self.module_functions.get(func.id)
        if (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id in ("self", "cls")
                and self.classes[-1] is not None):
            cls = self.classes[-1]
            if _scope_bindings(cls.body)[func.attr] != 1:
                return None  # defined twice, or rebound (`_msg = staticmethod(...)`): the last one is not known here
            for stmt in cls.body:
                if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and stmt.name == func.attr:
                    return stmt
        return None

    def _helper_templates(self, helper: ast.FunctionDef | ast.AsyncFunctionDef, depth: int) -> list[Template]:
        """The templates of the text a helper returns, read in the helper's own scope (its
        parameters are wildcards); once per helper and file."""
        known = self._helper_memo.get(id(helper))
        if isinstance(known, str):
            raise NoTemplate(known)
        if known is not None:
            return known
        if id(helper) in self._helpers_open:
            raise NoTemplate("message is a call result")
        returns = [n for n in _statements_of(helper.body) if isinstance(n, ast.Return) and n.value is not None]
        out: list[Template] = []
        self._helpers_open.add(id(helper))
        self.functions.append(helper)
        saved = self._raise_line, self._target
        try:
            for ret in returns:
                self._raise_line, self._target = ret.lineno, ret
                try:
                    out.extend(t for t, _ in self._templates(ret.value, depth + 1))
                except NoTemplate:
                    continue
        finally:
            self._raise_line, self._target = saved
            self.functions.pop()
            self._helpers_open.discard(id(helper))
        self._helper_memo[id(helper)] = out[:MAX_ALTERNATIVES] if out else "message is a call result"
        if not out:
            raise NoTemplate("message is a call result")
        return out[:MAX_ALTERNATIVES]

    # -- message expression -> template

    def _template(self, node: ast.expr, depth: int = 0) -> tuple[Template, str]:
        """One template of a message expression without choices (``_templates`` reads names,
        f-strings, ``+`` concatenations and helper calls before it comes here)."""
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
        if isinstance(node, ast.Name):
            return self._named_format_string(node.id)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            left, right = self._format_string(node.left), self._format_string(node.right)
            return left + right
        raise NoTemplate("format string is not a literal")


    def _named_format_string(self, name: str) -> str:
        """The literal a name of a ``%`` or ``.format`` template holds: a local (or an enclosing
        function's variable) bound once, to a string literal (torch's ``incompatible_device_warn
        = \"\"\"...\"\"\"`` then ``warnings.warn(incompatible_device_warn.format(...))``), else a
        module constant. A name bound any other way is no literal."""
        scope = self.functions[-1] if self.functions else None
        while scope is not None:
            found = self._locals(scope)
            if name in found.bindings:
                values = found.choices.get(name)
                if values and len(values) == 1 and isinstance(values[0], ast.Constant) \
                        and isinstance(values[0].value, str):
                    return values[0].value
                raise NoTemplate("format string is not a literal")
            scope = self._parents.get(id(scope))
        value = self.constants.get(name)
        if isinstance(value, ast.Constant) and isinstance(value.value, str):
            return value.value
        raise NoTemplate("format string is not a literal")


def _statements_of(body: list[ast.stmt]):
    """Every statement of a function body, nested blocks included, nested defs and classes left out."""
    todo = deque(body)
    while todo:
        stmt = todo.popleft()
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        yield stmt
        for name in _BODY_FIELDS:
            todo.extend(getattr(stmt, name, None) or ())
        for handler in getattr(stmt, "handlers", ()):
            todo.extend(handler.body)
        for case in getattr(stmt, "cases", ()):
            todo.extend(case.body)


def _without_colour(template: Template) -> Template:
    if not any(isinstance(p, str) and "\x1b" in p for p in template.parts):
        return template
    return Template.of([_ANSI_SGR.sub("", p) if isinstance(p, str) else p for p in template.parts])


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
        if len(exc.args) > 1 and name in _TUPLE_STR_EXCEPTIONS:
            if any(isinstance(a, ast.Starred) for a in exc.args):
                raise NoTemplate("message is *args")
            return name, ast.copy_location(ast.Tuple(elts=list(exc.args), ctx=ast.Load()), exc)
        return name, first
    for keyword in exc.keywords:
        if keyword.arg in _MESSAGE_KEYWORDS:
            return name, keyword.value
    raise NoTemplate("no message argument")


# Built-in exceptions whose str() of several arguments is the repr of their tuple, which is
# what the user reads: ``raise ValueError("Unsupported FP8 dtype:", dtype)`` prints
# ``ValueError: ('Unsupported FP8 dtype:', 'fp8_e5m2')`` (a logging-style call, or an f-string
# split at a comma, 18 of them in vLLM 0.8.5). OSError and its kind build their own text, and a
# package's own classes may take several arguments for other ends: their first argument stays
# the message.
_TUPLE_STR_EXCEPTIONS = frozenset({
    "Exception", "RuntimeError", "ValueError", "TypeError", "AssertionError", "NotImplementedError",
    "AttributeError", "IndexError", "KeyError", "LookupError", "ImportError", "ModuleNotFoundError",
    "ArithmeticError", "ZeroDivisionError", "OverflowError", "MemoryError", "RecursionError"})


def _repr_quotes(template: Template) -> list[str]:
    """The quotes ``repr`` may put around the text ``template`` gives: double where the text
    holds a single quote and no double one; single where it holds both or a double one; where
    it holds neither, single, and double too when a value is formatted in (a value holding a
    single quote makes repr choose double: ``"Got type: <class 'list'>"``)."""
    text = template.literal
    if "'" in text:
        return ['"'] if '"' not in text else ["'"]
    if '"' in text or not template.placeholders:
        return ["'"]
    return ["'", '"']


def _repr_text(piece: str, quote: str) -> str:
    """``piece`` as it reads inside repr's ``quote`` marks: escapes as repr writes them (a line
    break as \\n, a backslash doubled), a single quote escaped inside single quotes."""
    shown = repr(piece)
    inner = shown[1:-1]
    if shown[0] == quote or quote == '"':
        return inner
    return inner.replace("'", "\\'")  # repr chose double quotes for a piece holding a single one


def _quoted(template: Template, quote: str) -> Template:
    parts: list[str | Placeholder] = [quote]
    parts += [_repr_text(p, quote) if isinstance(p, str) else p for p in template.parts]
    parts.append(quote)
    return Template.of(parts)


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


# Levels a user sees by default. Info is read only where its text reports a failure
# (_REPORTS_FAILURE); debug never: neither is an error, and a log is full of them.
_LOG_LEVELS = {"warning": "WARNING", "warn": "WARNING", "error": "ERROR", "exception": "ERROR", "critical": "CRITICAL",
               "fatal": "CRITICAL", "warning_once": "WARNING", "error_once": "ERROR", "warning_rank0": "WARNING",
               "info": "INFO", "info_once": "INFO"}
_INFO_LEVELS = frozenset({"info", "info_once"})
# An info line that says something did not work is an error in all but level: vLLM logs
# "Cannot use FlashAttention-2 backend because the vllm_flash_attn package is not found" at
# info, and it is what a user pastes when asking why their engine is slow or falls back.
_REPORTS_FAILURE = re.compile(r"\b(?:cannot|can't|could not|couldn't|unable to|failed|failure|not supported|unsupported|"
                              r"not found|not available|unavailable|not installed|invalid|error)\b", re.I)


def _is_logger_call(call: ast.Call) -> bool:
    """``logger.warning(...)``, ``self._logger.error(...)``, ``logging.exception(...)``, vLLM's ``warning_once``."""
    func = call.func
    if not (isinstance(func, ast.Attribute) and func.attr in _LOG_LEVELS):
        return False
    owner = func.value
    name = owner.id if isinstance(owner, ast.Name) else owner.attr if isinstance(owner, ast.Attribute) else ""
    name = name.lower().lstrip("_")
    if not (name in ("logging", "log", "logger", "_logger") or name.endswith("logger") or name.endswith("_log")):
        return False
    return func.attr not in _INFO_LEVELS or _reports_failure(call)


def _reports_failure(call: ast.Call) -> bool:
    """Whether a log call's message text (its string literals: the format string, an
    f-string's text) says that something failed (_REPORTS_FAILURE)."""
    message = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "msg"), None)
    return any(_REPORTS_FAILURE.search(text) for text in _literal_texts(message))


def _literal_texts(node: ast.expr | None) -> list[str]:
    """The message's own literal text: a string, an f-string's text (not its fields'
    expressions: ``{STATUS['invalid']}`` says nothing), the operands of ``+``, a ``%`` or
    ``.format`` template."""
    if isinstance(node, ast.Constant):
        return [node.value] if isinstance(node.value, str) else []
    if isinstance(node, ast.JoinedStr):
        return [v.value for v in node.values if isinstance(v, ast.Constant) and isinstance(v.value, str)]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _literal_texts(node.left) + _literal_texts(node.right)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
        return _literal_texts(node.left)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "format":
        return _literal_texts(node.func.value)
    return []


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


# The helpers a server builds its HTTP error responses with (vLLM's OpenAIServing and its
# serving_* modules; the message is the first argument or ``message=``, the error type
# ``err_type=``, "BadRequestError" when not given).
_ERROR_RESPONSE_HELPERS = frozenset({"create_error_response", "create_streaming_error_response"})


def _is_error_response_call(call: ast.Call) -> bool:
    func = call.func
    name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
    return name in _ERROR_RESPONSE_HELPERS


_ERROR_TYPE = re.compile(r"[A-Z][A-Za-z0-9_]{0,80}Error")


def _response_type_and_message(call: ast.Call) -> tuple[str | None, ast.expr]:
    """``create_error_response("msg", err_type="NotFoundError")``: the error type a client sees
    and the message. The helper takes (message, err_type, status_code): a call whose second
    argument is not an error type's name (``create_error_response(400, "msg")``) is another
    helper's, and an error type computed at run time is unknown (None), never the default."""
    keywords = {k.arg: k.value for k in call.keywords if k.arg}
    message = call.args[0] if call.args else keywords.get("message")
    if message is None or isinstance(message, ast.Starred):
        raise NoTemplate("no message argument")
    if not isinstance(message, (ast.Constant, ast.JoinedStr, ast.BinOp, ast.Call, ast.Name, ast.Attribute)) or (
            isinstance(message, ast.Constant) and not isinstance(message.value, str)):
        raise NoTemplate("first argument is not a message")
    if "err_type" in keywords:
        err_type = keywords["err_type"]
    elif len(call.args) > 1:
        err_type = call.args[1]
    else:
        return "BadRequestError", message  # the helper's default
    if isinstance(err_type, ast.Constant) and isinstance(err_type.value, str):
        if not _ERROR_TYPE.fullmatch(err_type.value):
            raise NoTemplate("second argument is not an error type: not create_error_response(message, err_type)")
        return err_type.value, message
    return None, message


# A base named so is an exception class (Python's own and a package's: ValueError,
# TorchDynamoException, UserWarning); a class is one where a base is, or one of the module's own.
_EXCEPTION_BASE_ENDS = ("Error", "Exception", "Warning")
_EXCEPTION_BASES = frozenset({"BaseException", "KeyboardInterrupt", "SystemExit", "GeneratorExit", "StopIteration",
                              "StopAsyncIteration"})
# how many levels of a module's own exception hierarchy are followed (torch._dynamo's
# BackendCompilerFailed -> ShortenTraceback -> TorchDynamoException -> RuntimeError)
_CLASS_DEPTH = 8


def _base_name(node: ast.expr) -> str:
    return node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else ""


def _exception_classes(classes: list[ast.ClassDef]) -> set[str]:
    """The names of the exception classes among a module's classes: deriving from a class named as
    one (``Exception``, ``ValueError``, ``TorchDynamoException``) or from one of the module's
    own (a bounded number of levels). A class's own name says nothing: a ``RequestTimeout``
    or a ``ProcessExit`` with no such base is a value, and its ``__str__`` no message."""
    found = {c.name for c in classes if any(
        _base_name(b).endswith(_EXCEPTION_BASE_ENDS) or _base_name(b) in _EXCEPTION_BASES for b in c.bases)}
    for _ in range(_CLASS_DEPTH):
        more = {c.name for c in classes if c.name not in found and any(_base_name(b) in found for b in c.bases)}
        if not more:
            break
        found |= more
    return found


def _class_bases(classes: list[ast.ClassDef], module: str, found: set[str],
                 module_names: dict[str, str]) -> dict[str, list[tuple[str, str]]]:
    """The module's classes that are not known exception classes but may be: each with its
    bases as (module, name), where a base is imported (``from torch._dynamo.exc import
    ShortenTraceback``, ``exc.Unsupported``) or another such class of this module."""
    local = {c.name for c in classes}
    out: dict[str, list[tuple[str, str]]] = {}
    for c in classes:
        if c.name in found:
            continue
        bases = []
        for b in c.bases:
            if isinstance(b, ast.Name) and b.id in local:
                bases.append((module, b.id))
                continue
            dotted = _dotted(b, module_names)
            if dotted is not None and "." in dotted:
                bases.append(tuple(dotted.rsplit(".", 1)))
        if bases:
            out[c.name] = bases
    return out


def _class_constants(cls: ast.ClassDef) -> dict[str, list[ast.expr]]:
    """Each name the class body assigns, with every value it assigns it."""
    out: dict[str, list[ast.expr]] = {}
    for stmt in cls.body:
        if isinstance(stmt, (ast.Assign, ast.AnnAssign)) and stmt.value is not None:
            for target in stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]:
                if isinstance(target, ast.Name):
                    out.setdefault(target.id, []).append(stmt.value)
    return out


def _names_exception_class(func: ast.expr) -> bool:
    """``return ValueError(...)``: a factory whose caller raises what it returns."""
    name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
    return name[:1].isupper() and name.endswith(("Error", "Exception"))
