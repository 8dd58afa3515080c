"""A release that exists only as an sdist whose metadata step fails here (vLLM 0.21.0 and
FlashInfer 0.2-0.4 need torch to prepare metadata) is still read: pip unpacks it before
that step, errkb packs the unpacked source again (reproducibly) and mines its members,
nothing built or run. The real pip runs, on a local sdist (CI has no network)."""

from __future__ import annotations

import hashlib
import io
import tarfile
from pathlib import Path

from errkb.mine.releases import LIBRARIES, fetch, read_release

SETUP = 'import torch  # the metadata step needs torch, as vLLM\'s does\nraise SystemExit("no torch")\n'
MODULE = '''
def plan(page_size):
    if page_size not in (1, 16):
        raise ValueError(f"Unsupported page_size_for_flashinfer_sdist_test: {page_size}")
'''
HEADER = '''
void run(int64_t head_dim) {
  TORCH_CHECK(head_dim % 8 == 0, "head_dim of the sdist test kernel must be a multiple of 8, got ", head_dim);
}
'''


def _sdist(folder: Path, version: str) -> Path:
    top = f"flashinfer_python-{version}"
    files = {"PKG-INFO": f"Metadata-Version: 2.1\nName: flashinfer-python\nVersion: {version}\n",
             "setup.py": SETUP, "pyproject.toml": "",
             "flashinfer/page.py": MODULE,
             # setuptools-scm's, as vLLM's sdists carry it (their wheels name no commit)
             "flashinfer/_version.py": "__version__ = version = '9.9.1'\n__commit_id__ = commit_id = 'g9da56fd18'\n", "include/flashinfer/run.cuh": HEADER}
    out = folder / f"{top}.tar.gz"
    with tarfile.open(out, "w:gz") as tar:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(f"{top}/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return out


def test_sdist_whose_metadata_step_fails_is_read_from_its_source(tmp_path, monkeypatch):
    links = tmp_path / "links"
    links.mkdir()
    _sdist(links, "9.9.1")
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(links))
    monkeypatch.delenv("PIP_INDEX_URL", raising=False)
    into = tmp_path / "releases"
    archive = fetch(LIBRARIES["flashinfer"], "9.9.1", into)
    assert archive.name == "flashinfer-python-9.9.1.tar.gz"
    assert sorted(p.name for p in into.iterdir()) == [archive.name]  # pip's scratch is gone
    part = read_release(archive, LIBRARIES["flashinfer"], "9.9.1")
    assert part.commit == "9da56fd18"
    patterns = {r["p"]: r for r in part.rows}
    assert patterns["Unsupported page_size_for_flashinfer_sdist_test: (.+?)"]["f"] == "flashinfer/page.py"
    assert patterns["head_dim of the sdist test kernel must be a multiple of 8, got (.+?)"]["k"] == "C++"
    # the same sdist packs to the same bytes
    first = hashlib.sha256(archive.read_bytes()).hexdigest()
    archive.unlink()
    again = fetch(LIBRARIES["flashinfer"], "9.9.1", into)
    assert hashlib.sha256(again.read_bytes()).hexdigest() == first
