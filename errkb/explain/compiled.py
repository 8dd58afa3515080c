"""The terminal templates of ``errkb explain``, compiled ahead of time.

Jinja compiles a template to Python source and then to a code object on every process
start: for the two explain templates that was the largest single cost of a cold
``errkb explain``. ``python scripts/compile_templates.py`` writes the compiled modules into
``errkb/explain/compiled_templates/`` (committed, shipped in the package, checked fresh in
CI), with a manifest of the Jinja release and each template's SHA-256.

They are loaded only when the manifest says they were compiled from exactly the templates
on disk by the Jinja release running now; otherwise explain compiles in process as
before. Nothing here is read from a cache folder: these modules are part of the package,
as trusted as its other code (issue #15 removed Jinja's on-disk bytecode cache, which a
planted file could turn into code execution).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

TEMPLATES = ("explain.txt.j2", "_explain_record.txt.j2")
COMPILED_DIR = Path(__file__).resolve().parent / "compiled_templates"
MANIFEST = COMPILED_DIR / "manifest.json"


def template_hashes(templates: Path) -> dict[str, str]:
    return {name: hashlib.sha256((templates / name).read_bytes()).hexdigest() for name in TEMPLATES}


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


def compile_all(env, templates: Path, target: Path = COMPILED_DIR) -> None:
    """Write the compiled modules and their manifest into ``target``."""
    target.mkdir(parents=True, exist_ok=True)
    for old in target.glob("tmpl_*.py"):
        old.unlink()
    env.compile_templates(str(target), zip=None, filter_func=lambda name: name in TEMPLATES)
    (target / "manifest.json").write_text(json.dumps(manifest(templates), indent=1, sort_keys=True) + "\n",
                                          encoding="utf-8")
