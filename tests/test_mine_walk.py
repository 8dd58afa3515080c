"""Bad input never stops a scan: git-ignored folders and venvs are not entered, a folder
1,100 levels deep, a huge, deep or unparsable file, a wheel that is no zip and a zip
bomb's member are each skipped with a count and a reason."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from errkb.mine.raise_sites import ALL_KINDS, scan
from errkb.mine.releases import LIBRARIES, ReleaseError, read_release
from errkb.mine.sources import MAX_MEMBER_BYTES
from errkb.mine.walk import MAX_FILE_BYTES, excluded_reason

RAISE = 'def f(x):\n    raise ValueError("the value of x is not acceptable here")\n'


def _files(result):
    return sorted({s.file for s in result.sites})


def test_gitignored_folders_and_venvs_are_not_entered(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "a.py").write_text(RAISE)
    (tmp_path / ".gitignore").write_text("# caches\n.errkb-cache/\nbuild/\n*.gen.py\n")
    for folder in (".errkb-cache/venvs/x/lib", "build/lib", "env/lib"):
        (tmp_path / folder).mkdir(parents=True)
        (tmp_path / folder / "b.py").write_text(RAISE)
    (tmp_path / "env" / "pyvenv.cfg").write_text("home = /usr\n")
    (tmp_path / "pkg" / "c.gen.py").write_text(RAISE)
    result = scan(tmp_path)
    assert _files(result) == ["pkg/a.py"]
    reasons = dict(result.skipped)
    assert reasons["build"] == "git-ignored folder"
    assert reasons["env"] == "virtual environment (pyvenv.cfg)"
    assert result.summary()["skipped"] == len(result.skipped) >= 2


def test_git_checkout_does_not_mine_its_ignored_cache(tmp_path):
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text(RAISE)
    (tmp_path / ".gitignore").write_text(".cache-of-venvs/\n")
    (tmp_path / ".cache-of-venvs" / "lib").mkdir(parents=True)
    (tmp_path / ".cache-of-venvs" / "lib" / "big.py").write_text(RAISE)
    assert _files(scan(tmp_path)) == ["pkg/__init__.py"]


def test_folder_1100_levels_deep_is_a_reason_not_a_recursion_error(tmp_path):
    (tmp_path / "top.py").write_text(RAISE)
    fd = os.open(tmp_path, os.O_RDONLY)
    try:
        for _ in range(1100):  # mkdir relative to a dir fd: no path grows past PATH_MAX
            os.mkdir("d", dir_fd=fd)
            inner = os.open("d", os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = inner
        with open(os.open("deep.py", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd), "w") as f:
            f.write(RAISE)
    finally:
        os.close(fd)
    result = scan(tmp_path)
    assert _files(result) == ["top.py"]
    assert any("levels deep" in reason for _, reason in result.skipped)
    # drift and check-source read trees the same way: the CLI exits cleanly too
    run = subprocess.run([sys.executable, "-m", "errkb", "mine", str(tmp_path), "--repo", "a/b", "--sha", "0" * 40,
                          "--out", str(tmp_path / "drafts.jsonl")], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])})
    assert "RecursionError" not in run.stderr + run.stdout
    assert run.returncode in (0, 1), run.stderr
    _flatten(tmp_path)


def _flatten(tmp_path: Path) -> None:
    """Move each level up beside the first, so pytest's (recursive) clean-up can remove it."""
    prev, i = tmp_path / "d", 0
    while (prev / "d").exists():
        nxt = tmp_path / f"n{i}"
        os.rename(prev / "d", nxt)
        prev, i = nxt, i + 1


def test_huge_deep_and_unparsable_files_are_counted(tmp_path):
    (tmp_path / "ok.py").write_text(RAISE)
    (tmp_path / "huge.py").write_text("x = 1\n" * (MAX_FILE_BYTES // 6 + 10))
    (tmp_path / "deep.py").write_text("x = " + "(" * 5000 + "1" + ")" * 5000 + "\n")
    (tmp_path / "py2.py").write_text('print "hello"\n')
    result = scan(tmp_path, kinds=ALL_KINDS)
    assert _files(result) == ["ok.py"]
    assert dict(result.skipped)["huge.py"] == f"file over {MAX_FILE_BYTES} bytes"
    assert {f for f, _ in result.unparsable} == {"deep.py", "py2.py"}


def test_not_a_wheel_is_a_reason(tmp_path):
    bad = tmp_path / "vllm-0.0.1-py3-none-any.whl"
    bad.write_bytes(b"this is not a zip archive at all")
    result = scan(bad)
    assert result.sites == [] and "not a zip archive" in result.skipped[0][1]
    with pytest.raises(ReleaseError, match="not a zip archive"):
        read_release(bad, LIBRARIES["vllm"], "0.0.1")


def test_zip_bomb_member_is_skipped(tmp_path):
    wheel = tmp_path / "vllm-0.0.1-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("vllm/ok.py", RAISE)
        zf.writestr("vllm/bomb.py", b"#" * (MAX_MEMBER_BYTES + 1))  # a few KB compressed
        zf.writestr("vllm/third_party/dep.py", RAISE)
        zf.writestr("vllm/tests/test_x.py", RAISE)
    assert wheel.stat().st_size < 100_000
    part = read_release(wheel, LIBRARIES["vllm"], "0.0.1")
    assert [r["f"] for r in part.rows] == ["vllm/ok.py"]
    assert part.skipped == {f"member over {MAX_MEMBER_BYTES} bytes": 1, "vendored third-party tree": 1,
                            "test-internal module": 1}


def test_vendored_and_test_paths():
    assert excluded_reason("flashinfer/data/3rdparty/cutlass/x.h").startswith("vendored")
    assert excluded_reason("torch/testing/_internal/common.py").startswith("test-internal")
    assert excluded_reason("vllm/test_utils.py").startswith("test-internal")
    assert excluded_reason("vllm/sampling_params.py") is None


def test_archive_over_the_cap_is_refused_not_added_in_part(tmp_path, monkeypatch):
    """Past MAX_ARCHIVE_BYTES of message-holding members the archive is not read on, and the
    release is refused with the reason: a part read only partly would say every later message
    is absent from the release. The cap is above the largest covered release (FlashInfer 0.7.4:
    613 MB)."""
    import errkb.mine.sources as sources

    assert sources.MAX_ARCHIVE_BYTES > 613_000_000
    wheel = tmp_path / "vllm-0.0.1-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as zf:
        for name in ("a", "b", "c"):
            zf.writestr(f"vllm/{name}.py", RAISE)
    monkeypatch.setattr(sources, "MAX_ARCHIVE_BYTES", 2 * len(RAISE))
    with pytest.raises(ReleaseError, match="^" + re.escape(f"{wheel.name}: archive over {2 * len(RAISE)} bytes of "
                                                         "members: rest not read; the release is not added")):
        read_release(wheel, LIBRARIES["vllm"], "0.0.1")
