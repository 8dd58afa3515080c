"""Which assignments of a name reach a statement: a small forward data flow over one
function's statement tree, used by the miner to tell what text a message variable holds
where the message is raised.

``msg = "a"`` in an ``if`` and ``msg = "b"`` in its ``else`` both reach a ``raise`` after
them; an assignment in a branch that raises, returns, breaks or continues reaches nothing
after that branch; a later assignment replaces an earlier one; ``msg += " c"`` extends
each value that reaches it. A binding whose value is not an expression the miner can read
(a parameter, a loop or ``with`` target, ``except ... as``, an import, a tuple target, a
walrus, ``global``/``nonlocal``) is ``UNKNOWN``. Loops are walked twice (what the first
pass assigns reaches the second) and their ``break`` states join what follows them.
Only ``ast`` is used, nothing is run; cost is linear in the function's size.
"""

from __future__ import annotations

import ast

UNKNOWN = object()  # a binding whose value is not readable text
_MAX_VALUES = 16  # values kept per name at one point (more are cut: the miner uses at most 8)


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
    return tuple(out[:_MAX_VALUES]) if reachable else None


def _binds(target: ast.expr, name: str) -> bool:
    return any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(target))


def _walrus_binds(stmt: ast.stmt, name: str) -> bool:
    """A ``(name := ...)`` anywhere in the statement's own expressions."""
    todo: list[ast.AST] = [c for c in ast.iter_child_nodes(stmt) if not isinstance(c, ast.stmt)]
    while todo:
        node = todo.pop()
        if isinstance(node, ast.NamedExpr) and node.target.id == name:
            return True
        if isinstance(node, ast.Lambda):
            continue
        todo.extend(ast.iter_child_nodes(node))
    return False


class _Flow:
    def __init__(self, name: str, target: ast.stmt):
        self.name = name
        self.target = target
        self.found = None  # the state at the target (joined, when a loop passes it twice)
        self.breaks: list[list] = []
        self.made: dict[tuple[int, int], ast.expr] = {}  # (value, `+=`) -> value + addition, made once
        self.where: dict[int, ast.stmt] = {}  # id(value) -> the statement that assigns it

    def _extended(self, value: ast.expr, stmt: ast.AugAssign) -> ast.expr:
        key = (id(value), id(stmt))
        if key not in self.made:
            made = ast.copy_location(ast.BinOp(left=value, op=ast.Add(), right=stmt.value), stmt)
            self.made[key] = made
            self.where[id(made)] = stmt
        return self.made[key]

    def body(self, stmts: list[ast.stmt], state):
        for stmt in stmts:
            if state is None:
                return None
            state = self.stmt(stmt, state)
        return state

    def stmt(self, stmt: ast.stmt, state):
        name = self.name
        if stmt is self.target:
            self.found = _join(self.found, state)
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            return (UNKNOWN,) if stmt.name == name else state
        if isinstance(stmt, ast.Assign):
            if any(isinstance(t, ast.Name) and t.id == name for t in stmt.targets):
                self.where[id(stmt.value)] = stmt
                return (stmt.value,)
            if any(_binds(t, name) for t in stmt.targets):
                return (UNKNOWN,)
            return (UNKNOWN,) if _walrus_binds(stmt, name) else state
        if isinstance(stmt, ast.AnnAssign):
            if isinstance(stmt.target, ast.Name) and stmt.target.id == name and stmt.value is not None:
                self.where[id(stmt.value)] = stmt
                return (stmt.value,)
            return state
        if isinstance(stmt, ast.AugAssign):
            if isinstance(stmt.target, ast.Name) and stmt.target.id == name:
                if not isinstance(stmt.op, ast.Add):
                    return (UNKNOWN,)
                return tuple(UNKNOWN if v is UNKNOWN else self._extended(v, stmt) for v in state)
            return state
        if isinstance(stmt, (ast.Return, ast.Raise, ast.Continue)):
            return None
        if isinstance(stmt, ast.Break):
            if self.breaks:
                self.breaks[-1].append(state)
            return None
        if isinstance(stmt, ast.If):
            if _walrus_binds(stmt, name):
                state = (UNKNOWN,)
            return _join(self.body(stmt.body, state), self.body(stmt.orelse, state))
        if isinstance(stmt, (ast.For, ast.AsyncFor, ast.While)):
            if _walrus_binds(stmt, name):
                state = (UNKNOWN,)
            bound = isinstance(stmt, (ast.For, ast.AsyncFor)) and _binds(stmt.target, name)
            self.breaks.append([])
            inside = (UNKNOWN,) if bound else state
            first = self.body(stmt.body, inside)
            again = self.body(stmt.body, _join(inside, first))  # what one pass assigns reaches the next
            breaks = self.breaks.pop()
            after = _join(state, first, again)
            return _join(self.body(stmt.orelse, after), *breaks)
        if isinstance(stmt, (ast.With, ast.AsyncWith)):
            if any(item.optional_vars is not None and _binds(item.optional_vars, name) for item in stmt.items) \
                    or _walrus_binds(stmt, name):
                state = (UNKNOWN,)
            return self.body(stmt.body, state)
        if isinstance(stmt, (ast.Try, getattr(ast, "TryStar", ast.Try))):
            body = self.body(stmt.body, state)
            anywhere = _join(state, body)  # an exception may leave the body at any point
            handlers = []
            for handler in stmt.handlers:
                start = (UNKNOWN,) if handler.name == name else anywhere
                handlers.append(self.body(handler.body, start))
            out = _join(self.body(stmt.orelse, body), *handlers)
            if stmt.finalbody:
                final = self.body(stmt.finalbody, out if out is not None else anywhere)
                return final if out is not None else None
            return out
        if isinstance(stmt, ast.Match):
            cases = []
            for case in stmt.cases:
                start = (UNKNOWN,) if _pattern_binds(case.pattern, name) else state
                cases.append(self.body(case.body, start))
            return _join(state, *cases)
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            if any((alias.asname or alias.name.split(".")[0]) == name for alias in stmt.names):
                return (UNKNOWN,)
            return state
        if isinstance(stmt, ast.Delete):
            return () if any(_binds(t, name) for t in stmt.targets) else state
        if isinstance(stmt, (ast.Global, ast.Nonlocal)):
            return (UNKNOWN,) if name in stmt.names else state
        return (UNKNOWN,) if _walrus_binds(stmt, name) else state


def _pattern_binds(pattern: ast.AST, name: str) -> bool:
    return any(getattr(n, "name", None) == name or getattr(n, "rest", None) == name for n in ast.walk(pattern))


def reaching(func: ast.FunctionDef | ast.AsyncFunctionDef, name: str, target: ast.stmt) -> tuple | None:
    """The values of ``name`` that reach ``target`` (a statement of ``func``'s body, at any
    depth), each as (expression, the statement assigning it: the names in the expression
    are read there): an assigned expression (a ``+=`` gives ``value + addition``) or
    ``(UNKNOWN, None)``; an empty tuple where nothing assigned reaches it; None where
    ``target`` is not reached."""
    args = func.args
    params = {a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg) if a is not None}
    if any(isinstance(n, (ast.Global, ast.Nonlocal)) and name in n.names for n in ast.walk(func)):
        return ((UNKNOWN, None),)
    flow = _Flow(name, target)
    flow.body(func.body, (UNKNOWN,) if name in params else ())
    if flow.found is None:
        return None
    return tuple((v, None) if v is UNKNOWN else (v, flow.where[id(v)]) for v in flow.found)
