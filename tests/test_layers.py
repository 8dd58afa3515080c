"""The house plan (docs/design.md, "Layers") holds in the code: each layer a folder or a
module, data flowing one way, no import cycle, no private name used across modules.

Every import counts: module-level ones and those inside functions (imported on first
use to keep a cold start fast) alike, read from the whole syntax tree. There are no
exceptions to the order below; a module that needs something from above it is a
module in the wrong place.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "errkb"
# The layer of each top-level module or package of errkb/, bottom first: a module may
# import its own layer's modules and those of lower layers, never a higher one.
LAYERS = [
    # the base: errors, caches, signals, plain values, the terminal, progress, bundled
    # resources, and pattern/log text (errkb/text: the regex dialect, normalisation)
    {"errkb", "errors", "cache", "signals", "plain", "terminal", "progress", "resources", "text"},
    {"records"},   # input forms, the schema, lint, variants
    {"store"},     # DuckDB
    {"match"},     # the Matcher, near matches, search
    {"kb"},        # KnowledgeBase: the compiled view every consumer uses
    # Consumers. None imports another: what two of them need lives below them.
    {"explain", "enrich", "site", "verify", "mine"},
    {"cli"},       # click's command tree
    {"console"},   # the console script: answers a plain `errkb explain`, else hands over to cli
    {"__main__"},  # `python -m errkb` and spark-submit's file: runs the console script
]
LAYER = {name: rank for rank, names in enumerate(LAYERS) for name in names}
CONSUMERS = LAYERS[5]


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py")) if "reproducers/cases" not in p.as_posix()}


def layer_of(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "errkb"


def imports(path: Path) -> list[tuple[str, list[str], int]]:
    """(module, names, line) for every ``import errkb...`` / ``from errkb... import
    names`` anywhere in the file, function bodies included."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] == "errkb":
            # `from errkb.text import patterns` imports the module errkb.text.patterns.
            submodules = [f"{node.module}.{a.name}" for a in node.names if f"{node.module}.{a.name}" in MODULES]
            if submodules:
                found += [(m, [], node.lineno) for m in submodules]
            if len(submodules) < len(node.names):
                found.append((node.module, [a.name for a in node.names if f"{node.module}.{a.name}" not in MODULES],
                              node.lineno))
        elif isinstance(node, ast.Import):
            found += [(a.name, [], node.lineno) for a in node.names if a.name.split(".")[0] == "errkb"]
        elif isinstance(node, ast.ImportFrom) and node.level > 0:
            found.append((f"relative import level {node.level}", [], node.lineno))
    return found


def test_every_module_has_a_layer():
    unknown = sorted({layer_of(m) for m in MODULES} - set(LAYER))
    assert unknown == [], f"top-level names of errkb/ in no layer: {unknown} (add them to LAYERS and docs/design.md)"


def test_imports_are_absolute():
    # a relative import would hide an arrow from the checks below
    relative = [f"{m}:{line}" for m, p in MODULES.items() for name, _, line in imports(p) if name.startswith("relative")]
    assert relative == []


def test_data_flows_one_way():
    """No arrow runs up the layer order, and no consumer imports another."""
    wrong = []
    for module, path in MODULES.items():
        mine = layer_of(module)
        for imported, _, line in imports(path):
            if imported.startswith("relative"):
                continue
            theirs = layer_of(imported)
            if LAYER[theirs] > LAYER[mine] or (mine != theirs and mine in CONSUMERS and theirs in CONSUMERS):
                wrong.append(f"{module}:{line} ({mine}) imports {imported} ({theirs})")
    assert wrong == [], "\n".join(wrong)


@pytest.mark.parametrize("module", sorted(MODULES))
def test_no_private_name_is_imported_across_modules(module):
    private = [(m, n) for m, names, _ in imports(MODULES[module]) for n in names
               if n.startswith("_") and not n.startswith("__")]
    assert private == [], f"{module} imports private names {private}"


def import_graph() -> dict[str, set[str]]:
    graph = {}
    for module, path in MODULES.items():
        # `from errkb.x import name` depends on errkb.x; `import errkb.x.y` on errkb.x.y
        graph[module] = {imported for imported, _, _ in imports(path) if imported in MODULES and imported != module}
    return graph


def test_no_import_cycle():
    """Counting every import: a function-level import is a dependency all the same."""
    graph = import_graph()
    seen: dict[str, int] = {}  # 1 on the stack, 2 done
    cycles = []

    def visit(node: str, stack: list[str]) -> None:
        seen[node] = 1
        for nxt in sorted(graph[node]):
            if seen.get(nxt) == 1:
                cycles.append(" -> ".join(stack[stack.index(nxt):] + [nxt]))
            elif nxt not in seen:
                visit(nxt, stack + [nxt])
        seen[node] = 2

    for module in sorted(graph):
        if module not in seen:
            visit(module, [module])
    assert cycles == [], "import cycles:\n" + "\n".join(cycles)


def test_the_checks_see_function_level_imports(tmp_path):
    """The checks above would pass vacuously if `imports` missed imports inside
    functions: it must find both kinds, and resolve `from package import module`."""
    probe = tmp_path / "probe.py"
    probe.write_text("from errkb.text import patterns\n\ndef f():\n    from errkb.cli import cli\n"
                     "    import errkb.kb\n    from errkb import __version__\n")
    assert imports(probe) == [("errkb.text.patterns", [], 1), ("errkb.cli", ["cli"], 4), ("errkb.kb", [], 5),
                              ("errkb", ["__version__"], 6)]


def test_spark_submit_can_run_the_cli_as_a_plain_file(tmp_path):
    # spark-submit takes a .py file: errkb/__main__.py run as one must not let errkb/'s own
    # subpackages (site, ...) shadow top-level modules.
    result = subprocess.run([sys.executable, str(PACKAGE / "__main__.py"), "spark-enrich", "--help"],
                            cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("Usage: errkb spark-enrich [OPTIONS]")


def test_tests_share_through_support_only():
    """Tests mirror the packages and share one way: constants and helpers come from
    tests/support.py, fixtures from conftest.py by name; no test file imports conftest,
    another test module or bench/ (bench code is not under test)."""
    wrong = []
    for path in sorted((PACKAGE.parent / "tests").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                names = [node.module or ""] if node.level == 0 else [f"tests.{node.module or ''}"]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                continue
            for name in names:
                parts = name.split(".")
                if parts[0] == "bench" or (parts[0] == "tests" and len(parts) > 1 and parts[1] != "support"):
                    wrong.append(f"{path.name}:{node.lineno}: {name}")
    assert wrong == []
