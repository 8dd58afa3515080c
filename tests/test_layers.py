"""The house plan (docs/design.md) holds in the code: each layer a folder, data flowing
one way, no cycle, no private name used across modules, no library module importing the
CLI."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "errkb"
# Lower numbers are used by higher ones, never the other way round. Consumers (5) do not
# import each other, except the read side of proofs (verify.proof_data), which explain and the
# site show.
# signals raises errors' Stopped, so it sits just above the base.
LAYER = {"errors": 0, "cache": 0, "plain": 0, "terminal": 0, "progress": 0, "resources": 0, "signals": 1, "records": 1, "store": 2, "match": 3, "kb": 4,
         "explain": 5, "enrich": 5, "site": 5, "verify": 5, "mine": 5, "cli": 9, "console": 9, "__main__": 9}
# Pure functions over pattern text: lint checks patterns with the same analysis the matcher
# uses. They import nothing of errkb above errors.py (asserted below).
LEAVES = {"errkb.match.patterns", "errkb.match.gaps", "errkb.match.normalize", "errkb.match.bounded"}
SIBLING_READS = {"errkb.verify.proof_data"}
# The CLI: click's command tree, the console script (a plain explain answered without click)
# and `python -m errkb`; they use each other.
CLI_LAYER = {"cli", "console", "__main__"}


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def layer_of(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "errors"


def imports(path: Path, top_level_only: bool = False) -> list[tuple[str, list[str]]]:
    """(module, names) for each ``import errkb...`` / ``from errkb... import names``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    nodes = tree.body if top_level_only else ast.walk(tree)
    found = []
    for node in nodes:
        if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] == "errkb":
            # `from errkb.match import patterns` imports the module errkb.match.patterns.
            submodules = [f"{node.module}.{a.name}" for a in node.names if f"{node.module}.{a.name}" in MODULE_FILES]
            if submodules:
                found += [(m, []) for m in submodules]
            else:
                found.append((node.module, [a.name for a in node.names]))
        elif isinstance(node, ast.Import):
            found += [(a.name, []) for a in node.names if a.name.split(".")[0] == "errkb"]
    return found


MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py")) if "reproducers/cases" not in p.as_posix()}
MODULE_FILES = set(MODULES)


@pytest.mark.parametrize("module", sorted(MODULES))
def test_no_library_module_imports_the_cli(module):
    if layer_of(module) in CLI_LAYER:
        return  # the CLI itself, its console script and its `python -m errkb` / spark-submit entry
    assert not [m for m, _ in imports(MODULES[module]) if m == "errkb.cli"], f"{module} imports errkb.cli"


@pytest.mark.parametrize("module", sorted(MODULES))
def test_no_private_name_is_imported_across_modules(module):
    private = [(m, n) for m, names in imports(MODULES[module]) for n in names if n.startswith("_") and not n.startswith("__")]
    assert private == [], f"{module} imports private names {private}"


@pytest.mark.parametrize("module", sorted(MODULES))
def test_data_flows_one_way(module):
    mine = layer_of(module)
    for imported, _ in imports(MODULES[module]):
        theirs = layer_of(imported)
        if imported in SIBLING_READS and LAYER[mine] == 5:
            continue
        if imported in LEAVES and mine == "records":
            continue
        assert LAYER[theirs] < LAYER[mine] or theirs == mine or {mine, theirs} <= CLI_LAYER, \
            f"{module} ({mine}) imports {imported} ({theirs})"


@pytest.mark.parametrize("leaf", sorted(LEAVES))
def test_leaf_modules_stay_leaves(leaf):
    above = [m for m, _ in imports(MODULES[leaf]) if layer_of(m) not in ("errors", "plain", "terminal", "resources")
             and m not in LEAVES]
    assert above == [], f"{leaf} imports {above}"


def test_no_import_cycle():
    graph = {}
    for module, path in MODULES.items():
        targets = set()
        for imported, names in imports(path, top_level_only=True):
            for candidate in [f"{imported}.{n}" for n in names] + [imported]:
                if candidate in MODULES and candidate != module:
                    targets.add(candidate)
                    break
        graph[module] = targets
    seen: dict[str, int] = {}  # 1 on the stack, 2 done

    def visit(node: str, stack: list[str]) -> None:
        seen[node] = 1
        for nxt in sorted(graph[node]):
            if seen.get(nxt) == 1:
                cycle = stack[stack.index(nxt):] + [nxt]
                pytest.fail("import cycle: " + " -> ".join(cycle))
            if nxt not in seen:
                visit(nxt, stack + [nxt])
        seen[node] = 2

    for module in sorted(graph):
        if module not in seen:
            visit(module, [module])


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
