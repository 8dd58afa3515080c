"""Which assignments of a name reach a statement: a small forward data flow over one
function's statement tree, used by the miner to tell what text a message variable holds
where the message is raised.

``msg = "a"`` in an ``if`` and ``msg = "b"`` in its ``else`` both reach a ``raise`` after
them; an assignment in a branch that raises or returns reaches nothing after that branch;
a later assignment replaces an earlier one; ``msg += " c"`` extends each value that
reaches it. The flow is sound before it is precise: where it cannot tell, the name is
``UNKNOWN`` and the miner writes a wildcard, never text the program may not produce. So a
binding whose value is not an assignment (a parameter, a loop or ``with`` target,
``except ... as``, an import, a tuple target, a walrus, ``global``/``nonlocal``), a ``+=``
inside a loop, a ``break`` or ``continue`` that passes a ``finally``, and more than
``_MAX_VALUES`` values are ``UNKNOWN``. An exception may leave a ``try`` body after any of
its statements, so its handlers and ``finally`` start from every state the body passed
through. Loops are walked twice (what one pass assigns reaches the next); ``break`` states
join what follows a loop, ``continue`` states the next pass.

One pass per (function, name) records the state at every statement, so a function's cost
is linear in its size for each name asked about. Only ``ast`` is used, nothing is run.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

UNKNOWN = object()  # a binding whose value is not readable text
_MAX_VALUES = 16  # values at one point; past this the name is UNKNOWN (the miner uses at most 8)
# Statements one file's flows may visit in all (one pass per function and name asked
# about): past this every further name is UNKNOWN, so a generated 4,000-line function
# with a message variable of its own at every raise stays seconds, not minutes. Real
# files use a few thousand (vLLM's largest, measured: see docs/mining.md).
FLOW_BUDGET = 100_000


def _join(*states):
    out: list = []
    seen: set[int] = set()
    reachable = False
    for state in states:
        if state is None:
            continue
        reachable = True
        for value in state:
            if id(value) not in seen:
                seen.add(id(value))
                out.append(value)
    if not reachable:
        return None
    return (UNKNOWN,) if len(out) > _MAX_VALUES else tuple(out)


def _stores(target: ast.expr, name: str) -> bool:
    return any(isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, (ast.Store, ast.Del))
               for n in ast.walk(target))


def _own_expressions(stmt: ast.stmt):
    """The expressions a statement evaluates itself (not those of the statements it holds)."""
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
        args = stmt.args
        yield from stmt.decorator_list
        yield from (d for d in (*args.defaults, *args.kw_defaults) if d is not None)
        yield from (a.annotation for a in (*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg)
                    if a is not None and a.annotation is not None)
        if stmt.returns is not None:
            yield stmt.returns
        return
    if isinstance(stmt, ast.ClassDef):
        yield from (*stmt.decorator_list, *stmt.bases, *(k.value for k in stmt.keywords))
        return
    for child in ast.iter_child_nodes(stmt):
        if isinstance(child, ast.match_case):
            yield child.pattern
            if child.guard is not None:
                yield child.guard
        elif isinstance(child, ast.ExceptHandler):
            if child.type is not None:
                yield child.type
        elif isinstance(child, ast.withitem):
            yield child.context_expr
            if child.optional_vars is not None:
                yield child.optional_vars
        elif isinstance(child, ast.expr):
            yield child


@dataclass
class _Facts:
    """What a function's flow needs once, whatever the name: its statements' walrus
    targets and the names it declares global or nonlocal (anywhere, nested defs included)."""

    walrus: dict[int, set[str]] = field(default_factory=dict)  # id(stmt) -> names its own `:=` bind
    declared: set[str] = field(default_factory=set)
    params: set[str] = field(default_factory=set)


def _facts(func: ast.FunctionDef | ast.AsyncFunctionDef) -> _Facts:
    facts = _Facts()
    args = func.args
    facts.params = {a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg)
                    if a is not None}
    for node in ast.walk(func):
        if isinstance(node, (ast.Global, ast.Nonlocal)):
            facts.declared.update(node.names)
    todo: list[ast.stmt] = list(func.body)
    while todo:
        stmt = todo.pop()
        names = set()
        for expr in _own_expressions(stmt):
            stack: list[ast.AST] = [expr]
            while stack:
                node = stack.pop()
                if isinstance(node, ast.NamedExpr):
                    names.add(node.target.id)
                if isinstance(node, ast.Lambda):  # its defaults run here, its body when called
                    stack.extend(d for d in (*node.args.defaults, *node.args.kw_defaults) if d is not None)
                else:
                    stack.extend(ast.iter_child_nodes(node))
        if names:
            facts.walrus[id(stmt)] = names
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        for name in ("body", "orelse", "finalbody"):
            todo.extend(getattr(stmt, name, None) or ())
        for clause in (*getattr(stmt, "handlers", ()), *getattr(stmt, "cases", ())):
            todo.extend(clause.body)
    return facts


class _Flow:
    def __init__(self, name: str, facts: _Facts):
        self.name = name
        self.facts = facts
        self.at: dict[int, tuple] = {}  # id(stmt) -> the state entering it (joined over passes)
        self.trail: list = []  # every state passed through, for a try's handlers
        self.loops: list[dict] = []  # per loop: its break and continue states, the finally clauses open in it
        self.made: dict[tuple[int, int], ast.expr] = {}  # (value, `+=`) -> value + addition, made once
        self.where: dict[int, ast.stmt] = {}  # id(value) -> the statement its names are read at
        self.visits = 0
        self.failed = False

    def body(self, stmts: list[ast.stmt], state):
        for stmt in stmts:
            if state is None:
                return None
            state = self.stmt(stmt, state)
            self.trail.append(state)
        return state

    def stmt(self, stmt: ast.stmt, state):
        self.visits += 1
        name = self.name
        if name in self.facts.walrus.get(id(stmt), ()):
            state = (UNKNOWN,)  # its own `:=` may rebind the name before the statement reads it
        self.at[id(stmt)] = _join(self.at.get(id(stmt)), state)
        self.trail.append(state)
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            return (UNKNOWN,) if stmt.name == name else state
        if isinstance(stmt, ast.Assign):
            if any(isinstance(t, ast.Name) and t.id == name for t in stmt.targets):
                self.where[id(stmt.value)] = stmt
                return (stmt.value,)
            return (UNKNOWN,) if any(_stores(t, name) for t in stmt.targets) else state
        if isinstance(stmt, ast.AnnAssign):
            if isinstance(stmt.target, ast.Name) and stmt.target.id == name and stmt.value is not None:
                self.where[id(stmt.value)] = stmt
                return (stmt.value,)
            return state
        if isinstance(stmt, ast.AugAssign):
            if not (isinstance(stmt.target, ast.Name) and stmt.target.id == name):
                return state
            if not isinstance(stmt.op, ast.Add) or self.loops:  # in a loop: how many times is not known
                return (UNKNOWN,)
            return tuple(UNKNOWN if v is UNKNOWN else self._extended(v, stmt) for v in state)
        if isinstance(stmt, (ast.Return, ast.Raise)):
            return None
        if isinstance(stmt, (ast.Break, ast.Continue)):
            if self.loops:
                loop = self.loops[-1]
                # through a finally clause the state is that clause's: not followed
                passed = (UNKNOWN,) if loop["finally"] else state
                loop["breaks" if isinstance(stmt, ast.Break) else "continues"].append(passed)
            return None
        if isinstance(stmt, ast.If):
            return _join(self.body(stmt.body, state), self.body(stmt.orelse, state))
        if isinstance(stmt, (ast.For, ast.AsyncFor, ast.While)):
            return self._loop(stmt, state)
        if isinstance(stmt, (ast.With, ast.AsyncWith)):
            if any(item.optional_vars is not None and _stores(item.optional_vars, name) for item in stmt.items):
                state = (UNKNOWN,)
            # a context manager may suppress an exception raised anywhere in its body
            start = len(self.trail)
            body = self.body(stmt.body, state)
            return _join(body, state, *self.trail[start:])
        if isinstance(stmt, (ast.Try, getattr(ast, "TryStar", ast.Try))):
            return self._try(stmt, state)
        if isinstance(stmt, ast.Match):
            cases = []
            for case in stmt.cases:
                binds = any(getattr(n, "name", None) == name or getattr(n, "rest", None) == name
                            for n in ast.walk(case.pattern))
                cases.append(self.body(case.body, (UNKNOWN,) if binds else state))
            return _join(state, *cases)
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            if any((alias.asname or alias.name.split(".")[0]) == name for alias in stmt.names):
                return (UNKNOWN,)
            return state
        if isinstance(stmt, ast.Delete):
            return () if any(_stores(t, name) for t in stmt.targets) else state
        return state

    def _extended(self, value: ast.expr, stmt: ast.AugAssign) -> ast.expr:
        key = (id(value), id(stmt))
        if key not in self.made:
            made = ast.copy_location(ast.BinOp(left=value, op=ast.Add(), right=stmt.value), stmt)
            self.made[key] = made
            self.where[id(made)] = stmt  # the addition is read at the `+=`; the base where it was made
            self.where.setdefault(id(stmt.value), stmt)
        return self.made[key]

    def _loop(self, stmt, state):
        endless = isinstance(stmt, ast.While) and isinstance(stmt.test, ast.Constant) and bool(stmt.test.value)
        bound = isinstance(stmt, (ast.For, ast.AsyncFor)) and _stores(stmt.target, self.name)
        loop = {"breaks": [], "continues": [], "finally": 0}
        self.loops.append(loop)
        try:
            inside = (UNKNOWN,) if bound else state
            first = self.body(stmt.body, inside)
            again = self.body(stmt.body, _join(inside, first, *loop["continues"]))
            ends = _join(inside, first, again, *loop["continues"])
        finally:
            self.loops.pop()
        after = None if endless else self.body(stmt.orelse, _join(state, ends))
        return _join(after, *loop["breaks"])

    def _try(self, stmt, state):
        start = len(self.trail)
        if stmt.finalbody and self.loops:
            self.loops[-1]["finally"] += 1  # a break or continue from here on passes the finally
        try:
            body = self.body(stmt.body, state)
            anywhere = _join(state, *self.trail[start:])  # an exception may leave the body after any statement
            handlers = []
            for handler in stmt.handlers:
                handlers.append(self.body(handler.body, (UNKNOWN,) if handler.name == self.name else anywhere))
            orelse = self.body(stmt.orelse, body)
        finally:
            if stmt.finalbody and self.loops:
                self.loops[-1]["finally"] -= 1
        out = _join(orelse, *handlers)
        if not stmt.finalbody:
            return out
        # a finally runs after every way out: normal, handled, raised anywhere, from a handler
        final = self.body(stmt.finalbody, _join(out, anywhere, *self.trail[start:]))
        return final if out is not None else None


def reaching(func: ast.FunctionDef | ast.AsyncFunctionDef, name: str, target: ast.stmt,
             _memo: dict | None = None) -> tuple | None:
    """The values of ``name`` that reach ``target`` (a statement of ``func``'s body, at any
    depth), each as (expression, the statement assigning it: the names in the expression
    are read there): an assigned expression (a ``+=`` gives ``value + addition``) or
    ``(UNKNOWN, None)``; an empty tuple where nothing assigned reaches it; None where
    ``target`` is not reached. ``_memo`` (a dict the caller keeps per file) holds each
    function's facts and each (function, name)'s flow, so asking again costs nothing."""
    memo = _memo if _memo is not None else {}
    facts = memo.get(id(func))
    if facts is None:
        facts = memo[id(func)] = _facts(func)
    if name in facts.declared:
        return ((UNKNOWN, None),)
    flow = memo.get((id(func), name))
    if flow is None:
        flow = _Flow(name, facts)
        if memo.get("visits", 0) > FLOW_BUDGET:
            flow.failed = True
        else:
            try:
                flow.body(func.body, (UNKNOWN,) if name in facts.params else ())
            except RecursionError:  # thousands of nested blocks: nothing is claimed
                flow.failed = True
            memo["visits"] = memo.get("visits", 0) + flow.visits
        if flow.failed:
            flow.at = {}
        memo[(id(func), name)] = flow
    if flow.failed:
        return ((UNKNOWN, None),)
    found = flow.at.get(id(target))
    if found is None:
        return None
    return tuple((v, None) if v is UNKNOWN else (v, flow.where[id(v)]) for v in found)


def read_at(func: ast.FunctionDef | ast.AsyncFunctionDef, name: str, memo: dict) -> dict[int, ast.stmt]:
    """For the values ``reaching`` gave for ``name``: id(expression) -> the statement its
    names are read at (a ``+=``'s addition at the ``+=``, its base where the base was made)."""
    flow = memo.get((id(func), name))
    return {} if flow is None else flow.where
