"""Source checks: what a record names must exist in the project's source (on demand, not at ingest).

S401 env var not in source, S402 CLI flag not in source, S403 a literal part of
errorMessage that the raise's format code cannot produce (only what can be shown:
a float formatted with a fixed precision ``{x:.1f}`` never prints more decimals; an
interpolated ``round(x, 2)``, ``format(x, ".2f")``, ``int(x)`` or a call to a helper of the
same source tree returning one of those prints a float repr, exactly 2 places or an integer).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from errkb.errors import ErrkbError
from errkb.mine.raise_sites import sites_in_source
from errkb.mine.sources import SourceTree

CODES = {
    "S401": "env-var-not-in-source",
    "S402": "cli-flag-not-in-source",
    "S403": "message-literal-not-producible",
}

ENV_PREFIXES = ("VLLM_", "TORCH_", "NCCL_", "CUDA_", "PYTORCH_", "FLASHINFER_")
_ENV = re.compile(r"\b((?:" + "|".join(ENV_PREFIXES) + r")[A-Z0-9_]*[A-Z0-9])\b")
# Which project's source defines a prefix: a PyTorch record's fix may name a vLLM variable,
# which PyTorch's source never mentions. NCCL_* and CUDA_* belong to native libraries.
PREFIX_OWNER = {"VLLM_": "vllm-project/vllm", "FLASHINFER_": "flashinfer-ai/flashinfer",
                "TORCH_": "pytorch/pytorch", "PYTORCH_": "pytorch/pytorch"}
_FLAG = re.compile(r"(?<![\w-])--([a-z][a-z0-9]*(?:-[a-z0-9]+)+|[a-z][a-z0-9]{2,})\b")
_FIXED = re.compile(r"\.(\d+)[fF%]$")


class SourceUnreadable(ErrkbError):
    pass


@dataclass
class SourceFinding:
    code: str
    record_id: str | None
    message: str

    @property
    def name(self) -> str:
        return CODES[self.code]

    def __str__(self) -> str:
        return f"{self.code} {self.name} [{self.record_id}] {self.message}"

    def as_dict(self) -> dict:
        return {"code": self.code, "name": self.name, "record_id": self.record_id, "message": self.message}


def _texts(record: dict) -> str:
    sols = record.get("solutions") or []
    parts = [s if isinstance(s, str) else str(s) for s in sols]
    parts.append(str(record.get("exampleFix") or ""))
    return "\n".join(parts)


def names_in(record: dict) -> tuple[list[str], list[str]]:
    """(env var names, CLI flags without the dashes) the record's solutions and exampleFix name."""
    text = _texts(record)
    envs = sorted(set(_ENV.findall(text)))
    flags = sorted(set(_FLAG.findall(text)))
    return envs, flags


def _flag_in(flag: str, corpus: str) -> bool:
    field = flag.replace("-", "_")
    return f"--{flag}" in corpus or re.search(r"\b" + re.escape(field) + r"\s*:", corpus) is not None


def _fixed_precision_problem(record: dict, tree: SourceTree) -> str | None:
    text = tree.read_text(record.get("filePath") or "")
    if text is None:
        return None
    try:
        sites = sites_in_source(text, record["filePath"])
    except (SyntaxError, ValueError):
        return None
    line = record.get("lineNumber")
    message = record.get("errorMessage") or ""
    site = next((s for s in sites if s.line <= (line or 0) <= s.end_line and s.template), None)
    if site is None:
        # The release's lines differ from the analysed commit's: the one raise in the file
        # whose template matches the whole message is the record's raise.
        fitting = [s for s in sites if s.template is not None and s.template.fullmatches(message)]
        site = fitting[0] if len(fitting) == 1 else None
    if site is None or site.template is None:
        return None
    parts = site.template.parts
    printf = _printf_specs(site.source_code) if site.message_kind == "percent" else None
    holes = sum(1 for p in parts if not isinstance(p, str))
    hole = -1
    for i, part in enumerate(parts):
        if isinstance(part, str):
            continue
        hole += 1
        spec = part.format_spec.strip()
        if printf is not None and len(printf) == holes:
            spec = printf[hole]  # the template keeps %.2f as "f"; the format string has the places
        m = _FIXED.search(spec)
        before = parts[i - 1] if i > 0 and isinstance(parts[i - 1], str) else None
        if i == 0:
            start = 0
        elif not before or before not in message:
            continue
        else:
            start = message.index(before) + len(before)
        num = re.match(r"-?\d+(?:\.(\d+))?", message[start:])
        if not num:
            continue
        if m:
            digits = int(m.group(1))
            if len(num.group(1) or "") != digits:
                return (f"errorMessage has {num.group(0)!r} after {(before or '').strip()!r} but {site.file}:{site.line} "
                        f"formats {{{part.expr}:{spec}}} with {digits} decimal(s)")
            continue
        if part.format_spec.strip() or part.conversion not in ("", "s", "r"):
            continue
        form = _Resolver(tree, record["filePath"], text, site.line).form(part.expr)
        if form is None:
            continue
        printed = _printed(num.group(0), form)
        if printed is not None and printed != num.group(0):
            return (f"errorMessage says {num.group(0)!r} but {site.file}:{site.line} prints {form.describe}: "
                    f"{printed!r}")
    return None


_PRINTF = re.compile(r"%(?:\([^)]*\))?[-#0 +]*(?:\d+|\*)?(?:\.(\d+))?([diouxXeEfFgGcrsa%])")


def _printf_specs(source: str) -> list[str] | None:
    """The precision spec (".2f", or "") of each conversion of the raise's literal ``%`` format string."""
    try:
        tree = ast.parse(source.strip())
    except (SyntaxError, ValueError):
        return None
    for node in ast.walk(tree):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod) and isinstance(node.left, ast.Constant) \
                and isinstance(node.left.value, str):
            return [f".{m.group(1)}{m.group(2)}" if m.group(1) and m.group(2) in "fF" else ""
                    for m in _PRINTF.finditer(node.left.value) if m.group(2) != "%"]
    return None


@dataclass(frozen=True)
class _Form:
    """What an interpolated expression prints: a float repr after round(x, n), n fixed places, or an integer."""

    kind: str  # "round", "fixed" or "int"
    places: int
    describe: str


def _printed(num: str, form: _Form) -> str | None:
    """The text the code would print for the value the message shows (None when it cannot tell)."""
    try:
        value = float(num)
    except ValueError:
        return None
    if form.kind == "fixed":
        return f"{value:.{form.places}f}"
    if form.kind == "int":
        return str(int(value)) if value == int(value) else None
    if form.kind == "round":
        printed = repr(round(value, form.places))
        return printed if "e" not in printed else None
    return None


def _short(node: ast.AST) -> str:
    text = ast.unparse(node)
    return text if len(text) <= 40 else text[:37] + "…"


class _Resolver:
    """Resolves an interpolated expression to the form it prints, following local variables
    assigned once before the raise and helpers defined in the same source tree (imports followed)."""

    def __init__(self, tree: SourceTree, file: str, text: str, line: int):
        self.tree = tree
        self.file = file
        self.line = line
        self.modules: dict[str, ast.Module | None] = {}
        self.module = self._parse(file, text)
        self.depth = 0

    def _parse(self, rel: str, text: str | None) -> ast.Module | None:
        if rel not in self.modules:
            try:
                self.modules[rel] = ast.parse(text) if text is not None else None
            except (SyntaxError, ValueError):
                self.modules[rel] = None
        return self.modules[rel]

    def form(self, expr: str) -> _Form | None:
        if not expr or self.module is None:
            return None
        try:
            node = ast.parse(expr, mode="eval").body
        except (SyntaxError, ValueError):
            return None
        func = self._enclosing(self.module, self.line)
        return self._expr(node, self.file, self.module, func, self.line)

    @staticmethod
    def _enclosing(module: ast.Module, line: int) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
        best = None
        for node in ast.walk(module):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.lineno <= line <= (node.end_lineno or 0):
                if best is None or node.lineno > best.lineno:
                    best = node
        return best

    def _expr(self, node: ast.expr, rel: str, module: ast.Module, func, line: int) -> _Form | None:
        self.depth += 1
        try:
            if self.depth > 12:
                return None
            return self._expr_inner(node, rel, module, func, line)
        finally:
            self.depth -= 1

    def _expr_inner(self, node: ast.expr, rel: str, module: ast.Module, func, line: int) -> _Form | None:
        if isinstance(node, ast.JoinedStr) and len(node.values) == 1 and isinstance(node.values[0], ast.FormattedValue):
            spec = node.values[0].format_spec
            if spec is None and node.values[0].conversion in (-1, ord("s")):
                return self._expr(node.values[0].value, rel, module, func, line)
            if isinstance(spec, ast.JoinedStr) and all(isinstance(v, ast.Constant) for v in spec.values):
                m = _FIXED.search("".join(str(v.value) for v in spec.values))
                if m:
                    return _Form("fixed", int(m.group(1)), f"{_short(node)}, {m.group(1)} places")
            return None
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod) and isinstance(node.left, ast.Constant) \
                and isinstance(node.left.value, str):
            m = re.fullmatch(r"%\.(\d+)f", node.left.value)
            return _Form("fixed", int(m.group(1)), f"{_short(node)}, {m.group(1)} places") if m else None
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.FloorDiv):
            return _Form("int", 0, f"{_short(node)}, an integer")
        if isinstance(node, ast.Name) and func is not None:
            value = self._assigned_once(func, node.id, line)
            if value is not None:
                inner = self._expr(value, rel, module, func, value.lineno)
                if inner is not None:
                    return _Form(inner.kind, inner.places, f"{node.id} = {inner.describe}")
            return None
        if not isinstance(node, ast.Call) or node.keywords and not isinstance(node.func, ast.Name):
            return None
        name = node.func.id if isinstance(node.func, ast.Name) else None
        if name == "round":
            if len(node.args) == 2 and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, int) \
                    and not node.keywords:
                # round() of an int stays an int: only a value that is surely a float (a true
                # division, a float literal, float(...)) is known to print a float repr.
                if not any(isinstance(n, ast.BinOp) and isinstance(n.op, ast.Div)
                           or isinstance(n, ast.Constant) and isinstance(n.value, float)
                           or isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "float"
                           for n in ast.walk(node.args[0])):
                    return None
                return _Form("round", node.args[1].value, f"{_short(node)}, a float")
            if len(node.args) == 1 and not node.keywords:
                return _Form("int", 0, f"{_short(node)}, an integer")
            return None
        if name == "int" and len(node.args) == 1:
            return _Form("int", 0, f"{_short(node)}, an integer")
        if name == "format" and len(node.args) == 2 and isinstance(node.args[1], ast.Constant) \
                and isinstance(node.args[1].value, str):
            m = re.fullmatch(r"\.(\d+)f", node.args[1].value)
            return _Form("fixed", int(m.group(1)), f"{_short(node)}, {m.group(1)} places") if m else None
        if name == "str" and len(node.args) == 1:
            return self._expr(node.args[0], rel, module, func, line)
        if name is None:
            return None
        found = self._helper(name, rel, module)
        if found is None:
            return None
        hrel, hmodule, hdef = found
        returns = [r for r in ast.walk(hdef) if isinstance(r, ast.Return)]
        if not returns or any(r.value is None for r in returns):
            return None
        forms = {self._expr(r.value, hrel, hmodule, hdef, r.lineno) for r in returns}
        if len(forms) != 1 or None in forms:
            return None
        form = forms.pop()
        return _Form(form.kind, form.places, f"{name}(...) = {form.describe}")

    @staticmethod
    def _assigned_once(func, name: str, line: int) -> ast.expr | None:
        values = []
        for node in ast.walk(func):
            if isinstance(node, (ast.AugAssign, ast.AnnAssign)) and isinstance(node.target, ast.Name) and node.target.id == name:
                if isinstance(node, ast.AnnAssign) and node.value is not None:
                    values.append(node)
                else:
                    return None
            elif isinstance(node, ast.Assign):
                targets = [t for t in node.targets]
                if any(isinstance(t, ast.Name) and t.id == name for t in targets):
                    if len(targets) != 1:
                        return None
                    values.append(node)
                elif any(name in {n.id for n in ast.walk(t) if isinstance(n, ast.Name)} for t in targets):
                    return None
            elif isinstance(node, (ast.For, ast.AsyncFor, ast.With, ast.NamedExpr)):
                target = getattr(node, "target", None)
                if target is not None and name in {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}:
                    return None
        if any(isinstance(a, ast.arg) and a.arg == name for a in ast.walk(func.args)):
            return None
        if len(values) != 1 or values[0].lineno >= line:
            return None
        return values[0].value

    def _helper(self, name: str, rel: str, module: ast.Module):
        for node in module.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
                return rel, module, node
        for node in ast.walk(module):
            if not isinstance(node, ast.ImportFrom):
                continue
            for alias in node.names:
                if (alias.asname or alias.name) != name:
                    continue
                target = self._module_file(node.module or "", node.level, rel)
                if target is None:
                    return None
                trel, tmod = target
                for d in tmod.body:
                    if isinstance(d, (ast.FunctionDef, ast.AsyncFunctionDef)) and d.name == alias.name:
                        return trel, tmod, d
                return None
        return None

    def _module_file(self, dotted: str, level: int, rel: str) -> tuple[str, ast.Module] | None:
        if level:
            base = rel.split("/")[:-1]
            if level > 1:
                base = base[: len(base) - (level - 1)]
            parts = base + (dotted.split(".") if dotted else [])
        else:
            parts = dotted.split(".")
        prefixes = [""]
        # A checkout or sdist keeps the package under a folder (vllm-0.18.0/vllm/...): the raise's
        # file path tells where the package starts.
        top = parts[0] if parts else ""
        segs = rel.split("/")
        if not level and top in segs:
            prefixes = ["/".join(segs[: segs.index(top)])]
        for prefix in prefixes:
            stem = "/".join(([prefix] if prefix else []) + parts)
            for cand in (stem + ".py", stem + "/__init__.py"):
                mod = self._parse(cand, self.tree.read_text(cand)) if cand not in self.modules else self.modules[cand]
                if mod is not None:
                    return cand, mod
        return None


def check_records(records: Iterable[dict], source: str | Path) -> list[SourceFinding]:
    """Findings for ``records`` against one source tree (checkout, package folder, wheel or sdist)."""
    try:
        tree = SourceTree.open(Path(source).resolve())
        corpus = "\n".join(text for _, text in tree.python_files())
    except (OSError, ValueError) as e:
        raise SourceUnreadable(f"cannot read source: {e}", where=str(source)) from None
    if not corpus:
        raise SourceUnreadable("no .py files in the source", where=str(source))
    findings: list[SourceFinding] = []
    for record in records:
        rid = record.get("id")
        envs, flags = names_in(record)
        for env in envs:
            owner = next((o for p, o in PREFIX_OWNER.items() if env.startswith(p)), None)
            if owner is None or (record.get("repo") and owner != record.get("repo")):
                continue
            if env not in corpus:
                findings.append(SourceFinding("S401", rid, f"{env} is named in the fix but no .py file of the source mentions it"))
        for flag in flags:
            if not _flag_in(flag, corpus):
                findings.append(SourceFinding("S402", rid, f"--{flag} is named in the fix but the source has neither "
                                                           f"'--{flag}' nor a field {flag.replace('-', '_')}"))
        problem = _fixed_precision_problem(record, tree)
        if problem:
            findings.append(SourceFinding("S403", rid, problem))
    return findings
