"""Nothing errkb reads back from its cache folder can run code.

Jinja's bytecode cache unmarshals code objects from disk: a file planted in the cache
folder ran on the next ``errkb explain``. The test plants exactly the file Jinja's
FileSystemBytecodeCache would load for errkb's templates, with code that leaves a
marker, and runs explain and the snippet writer (which renders a Jinja template) for real.
"""

from __future__ import annotations

import marshal
import os
import subprocess
import sys
from pathlib import Path

import jinja2

from errkb.resources import templates_dir
from tests.support import REPO, SEED_ID, SEED_MESSAGE


def plant_bytecode(folder: Path, marker: Path) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    cache = jinja2.FileSystemBytecodeCache(str(folder))
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(templates_dir())))
    planted = []
    for name in ("snippet.py.j2",):  # (explain renders in plain Python: errkb.explain.render)
        source, filename, _ = env.loader.get_source(env, name)
        bucket = cache.get_bucket(env, name, filename, source)
        bucket.code = compile(f"open({str(marker)!r}, 'w').write('ran')", filename, "exec")
        cache.set_bucket(bucket)
        planted.extend(folder.iterdir())
    assert planted and all(marshal.version for _ in planted)
    return planted


def test_a_planted_template_bytecode_file_never_runs(tmp_path):
    cache_dir = tmp_path / "cache"
    marker = tmp_path / "PWNED"
    plant_bytecode(cache_dir / "templates-bytecode", marker)
    env = dict(os.environ, ERRKB_CACHE_DIR=str(cache_dir))
    env.pop("ERRKB_DB", None)
    done = subprocess.run([sys.executable, "-m", "errkb", "explain", SEED_MESSAGE], capture_output=True, text=True,
                          env=env, cwd=REPO, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "fix" in done.stdout.lower() or done.stdout.strip()
    assert not marker.exists(), "explain ran code from the cache folder"
    done = subprocess.run([sys.executable, "-m", "errkb", "snippets", "--out", str(tmp_path / "snippets"), SEED_ID],
                          capture_output=True, text=True, env=env, cwd=REPO, timeout=300)
    assert done.returncode == 0, done.stderr
    assert list((tmp_path / "snippets").iterdir())
    assert not marker.exists(), "the snippet writer ran code from the cache folder"


def test_explain_writes_no_code_into_the_cache_folder(tmp_path):
    cache_dir = tmp_path / "cache"
    env = dict(os.environ, ERRKB_CACHE_DIR=str(cache_dir))
    env.pop("ERRKB_DB", None)
    for _ in range(2):
        done = subprocess.run([sys.executable, "-m", "errkb", "explain", SEED_MESSAGE], capture_output=True,
                              text=True, env=env, cwd=REPO, timeout=300)
        assert done.returncode == 0, done.stderr
    written = [p for p in cache_dir.rglob("*") if p.is_file()]
    assert not [p for p in written if p.name.startswith("__jinja2_") or p.suffix in (".pyc", ".pickle", ".pkl")]
    for p in written:
        head = p.read_bytes()[:2]
        assert head != b"\x80\x04" and head != b"\x80\x05", f"{p} looks like a pickle"
