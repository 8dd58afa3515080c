"""The terminal templates of ``errkb explain``, compiled ahead of time.

Jinja compiles a template to Python source and then to a code object on every process
start: for the two explain templates that was the largest single cost of a cold
``errkb explain``. ``python scripts/compile_templates.py`` writes the compiled modules into
``errkb/explain/compiled_templates/`` (committed, shipped in the package, checked fresh in
CI), with a manifest of the Jinja release and each template's SHA-256.

They are loaded only when the manifest says they were compiled from exactly the templates
on disk by the Jinja release running now; otherwise explain compiles in process as
before.

Each compiled module also has a copy, ``lite_<key>.py``, identical but for its one import
line, which takes the runtime names from ``errkb.explain.runtime`` instead of
``jinja2.runtime``: explain renders through those without importing Jinja2 at all (a
third of a cold call). The copies depend on the templates only (the runtime is errkb's),
so they are used whenever the templates' hashes match the manifest.

Nothing here is read from a cache folder: these modules are part of the package, as
trusted as its other code (issue #15 removed Jinja's on-disk bytecode cache, which a
planted file could turn into code execution).
"""

from __future__ import annotations

import importlib
import json
import types
from pathlib import Path

TEMPLATES = ("explain.txt.j2", "_explain_record.txt.j2", "_explain_near.txt.j2")
COMPILED_DIR = Path(__file__).resolve().parent / "compiled_templates"
MANIFEST = COMPILED_DIR / "manifest.json"


def _digest(name: str, data: bytes) -> str:
    """hashlib's digest of ``data``, from CPython's own implementations of SHA-1 and
    SHA-256 where present: loading OpenSSL for hashlib cost a cold ``errkb explain``
    ~2.5 ms to hash two small templates and a name. Same digests either way."""
    try:
        if name == "sha1":
            from _sha1 import sha1 as new
        else:
            try:
                from _sha256 import sha256 as new  # CPython 3.11
            except ImportError:
                from _sha2 import sha256 as new  # CPython 3.12+
    except ImportError:
        import hashlib

        new = getattr(hashlib, name)
    return new(data).hexdigest()


def template_hashes(templates: Path) -> dict[str, str]:
    return {name: _digest("sha256", (templates / name).read_bytes()) for name in TEMPLATES}


def manifest(templates: Path) -> dict:
    import jinja2

    return {"jinja2": jinja2.__version__, "templates": template_hashes(templates)}


def usable(templates: Path) -> bool:
    """Whether the compiled modules match these templates and this Jinja release."""
    try:
        recorded = json.loads(MANIFEST.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return recorded == manifest(templates)


_JINJA_IMPORT = "from jinja2.runtime import "
_LITE_IMPORT = "from errkb.explain.runtime import "


def module_key(name: str) -> str:
    """The module name Jinja's ModuleLoader gives a template."""
    return "tmpl_" + _digest("sha1", name.encode("utf-8"))


def lite_usable(templates: Path) -> bool:
    """Whether the Jinja-free copies match these templates."""
    try:
        recorded = json.loads(MANIFEST.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(recorded, dict) and recorded.get("templates") == template_hashes(templates)


def lite_modules() -> dict[str, types.ModuleType] | None:
    """The Jinja-free copies by template name; None when one cannot be imported (the
    runtime lacks a name a recompiled template needs: Jinja2 renders then)."""
    modules = {}
    try:
        for name in TEMPLATES:
            modules[name] = importlib.import_module(f"{__package__}.compiled_templates.lite_{module_key(name)[5:]}")
    except ImportError:
        return None
    return modules


def compile_all(env, templates: Path, target: Path = COMPILED_DIR) -> None:
    """Write the compiled modules and their manifest into ``target``."""
    target.mkdir(parents=True, exist_ok=True)
    for old in [*target.glob("tmpl_*.py"), *target.glob("lite_*.py")]:
        old.unlink()
    env.compile_templates(str(target), zip=None, filter_func=lambda name: name in TEMPLATES)
    for name in TEMPLATES:
        source = (target / f"{module_key(name)}.py").read_text(encoding="utf-8")
        if not source.startswith(_JINJA_IMPORT):
            raise RuntimeError(f"{name}: the compiled module does not start with {_JINJA_IMPORT!r}")
        (target / f"lite_{module_key(name)[5:]}.py").write_text(_LITE_IMPORT + source[len(_JINJA_IMPORT):], encoding="utf-8")
    (target / "manifest.json").write_text(json.dumps(manifest(templates), indent=1, sort_keys=True) + "\n",
                                          encoding="utf-8")
