"""Compile the explain templates into errkb/explain/compiled_templates/ (see errkb.explain.compiled).

    python scripts/compile_templates.py          # rewrite the compiled modules
    python scripts/compile_templates.py --check  # exit 1 when they do not match templates/ (CI)
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from errkb.explain import compiled
from errkb.resources import templates_dir


def environment():
    import jinja2

    from errkb.explain import explainer

    # The environment explain renders with (its options shape the compiled code; its
    # filters are looked up by name at render time).
    env = explainer._environment.__wrapped__(color=False, width=80)
    # Compile from the template sources, whatever the current loader prefers.
    env.loader = jinja2.FileSystemLoader(str(templates_dir()))
    return env


def main() -> int:
    if "--check" in sys.argv[1:]:
        with tempfile.TemporaryDirectory() as tmp:
            compiled.compile_all(environment(), templates_dir(), Path(tmp))
            fresh = {p.name: p.read_bytes() for p in Path(tmp).iterdir()}
        current = {p.name: p.read_bytes() for p in compiled.COMPILED_DIR.iterdir() if p.is_file()}
        if fresh != current:
            print("errkb/explain/compiled_templates: stale; run `python scripts/compile_templates.py`", file=sys.stderr)
            return 1
        return 0
    compiled.compile_all(environment(), templates_dir())
    return 0


if __name__ == "__main__":
    sys.exit(main())
