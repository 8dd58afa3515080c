"""Hostile input, round 3 (issue 26): a venv planted in the cache folder was trusted and run
as root with every capability, even for the bundled seed. errkb runs only venvs it built
and can verify (a keyed digest, the key outside the cache folder); the planted ones here
are generated from a few shapes, and their interpreter would leave a file if it ran."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from errkb.verify import reproducers
from errkb.verify.reproducers import Requirements, VenvError, ensure_venv

# each test builds a real venv (ensurepip included): tens of seconds on a shared machine
pytestmark = pytest.mark.slow

REQ = Requirements()  # no pip steps: a build is `python -m venv` and bytecode, seconds


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("ERRKB_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    return tmp_path


def planted_python(path: Path, evidence: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.is_symlink() or path.exists():
        path.unlink()
    path.write_text(f"#!/bin/sh\necho \"planted ran as $(id -u)\" >> {evidence}\nexec {sys.executable} \"$@\"\n")
    path.chmod(0o755)


def target(cache: Path) -> Path:
    return cache / "cache" / "venvs" / REQ.key()


@pytest.mark.parametrize("marker", ["none", "no-digest", "fake-digest", "other-key"])
def test_a_planted_venv_is_never_executed(cache, marker):
    venv = target(cache)
    evidence = cache / "evidence"
    planted_python(venv / "bin" / "python", evidence)
    (venv / "pyvenv.cfg").write_text(f"home = {Path(sys.executable).parent}\n")
    info = {"packages": {"torch": "2.13.0"}}
    if marker == "fake-digest":
        info["digest"] = "0" * 64
    elif marker == "other-key":  # a digest made right, but with a key that is not this user's
        info["digest"] = reproducers.venv_digest(venv, b"k" * 32)
    if marker != "none":
        (venv / "errkb-venv.json").write_text(json.dumps(info))
    victim = cache / "victim"
    victim.write_text("intact")
    (venv.parent / f"{REQ.key()}.lock").symlink_to(victim)  # a planted lock: must not be followed
    lines = []
    with pytest.raises(VenvError, match="cannot open the venv lock"):
        ensure_venv(REQ, log=lines.append)
    assert victim.read_text() == "intact"
    (venv.parent / f"{REQ.key()}.lock").unlink()
    built = ensure_venv(REQ, log=lines.append)
    assert built.built, lines
    assert not evidence.exists(), evidence.read_text()
    assert Path(built.python).is_symlink()  # the venv's own link to an interpreter, not the planted script
    out = subprocess.run([str(built.python), "-c", "import sys; print(sys.prefix)"], capture_output=True, text=True,
                         timeout=60)
    assert out.stdout.strip() == str(venv) and not evidence.exists()
    if marker != "none":
        assert any("is not one errkb built" in line for line in lines), lines
    again = ensure_venv(REQ)
    assert not again.built


@pytest.mark.parametrize("tamper", ["python", "pth", "pyvenv", "module", "bytecode"])
def test_a_venv_altered_after_it_was_built_is_rebuilt(cache, tamper):
    first = ensure_venv(REQ)
    assert first.built
    venv = target(cache)
    evidence = cache / "evidence"
    site = next(venv.glob("lib/python*/site-packages"))
    if tamper == "python":
        planted_python(venv / "bin" / "python", evidence)
    elif tamper == "pth":
        (site / "zz-evil.pth").write_text(f"import os; open({str(evidence)!r}, 'a').write('pth ran')\n")
    elif tamper == "pyvenv":
        (venv / "pyvenv.cfg").write_text((venv / "pyvenv.cfg").read_text() + "include-system-site-packages = true\n")
    elif tamper == "module":
        (site / "sitecustomize.py").write_text(f"open({str(evidence)!r}, 'a').write('sitecustomize ran')\n")
    else:  # bytecode Python would load for a top-level module, without its source
        tag = sys.implementation.cache_tag
        (site / "__pycache__").mkdir(exist_ok=True)
        (site / "__pycache__" / f"sitecustomize.{tag}.pyc").write_bytes(b"\0" * 16)
    again = ensure_venv(REQ)
    assert again.built
    assert not evidence.exists()
    assert not (site / "zz-evil.pth").exists() and not (site / "sitecustomize.py").exists()


def test_the_key_lives_outside_the_cache_and_is_closed_to_others(cache, monkeypatch):
    ensure_venv(REQ)
    key = cache / "config" / "errkb" / "venv.key"
    assert key.stat().st_mode & 0o777 == 0o600 and len(key.read_bytes()) == 32
    key.chmod(0o644)
    with pytest.raises(VenvError, match="closed to others"):
        ensure_venv(REQ)
    key.chmod(0o600)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(cache / "cache" / "inside"))
    with pytest.raises(VenvError, match="must not lie inside the cache folder"):
        ensure_venv(REQ)
    assert os.path.isdir(cache / "cache" / "venvs")
