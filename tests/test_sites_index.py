"""The slim site index: release ranges, reproducible bytes, merging parts, and the CI
check that one release's part, rebuilt from a committed fixture, equals what ships."""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

import pytest

from errkb.mine.releases import LIBRARIES, Part, read_release
from errkb.mine.site_index import SiteIndexData, _expand, _ranges, read_lines, version_key
from errkb.resources import data_dir

FIXTURE = Path(__file__).parent / "fixtures" / "sites" / "vllm-0.2.7-py.tar.gz"
SHIPPED = data_dir() / "sites" / "sites.jsonl.gz"


def _row(p, f="vllm/a.py", n=1):
    return {"p": p, "f": f, "n": n, "fn": "f", "c": None, "k": "raise", "e": "ValueError"}


def _part(version, rows, commit=None):
    part = Part("vllm", version, commit)
    part.rows = rows
    return part


def test_ranges_round_trip():
    order = ["0.1", "0.2", "0.3", "0.4", "0.10"]
    assert _ranges(order, {"0.1", "0.2", "0.4", "0.10"}) == "0.1-0.2,0.4-0.10"
    assert _expand(order, "0.1-0.2,0.4-0.10") == {"0.1", "0.2", "0.4", "0.10"}
    assert _ranges(order, {"0.3"}) == "0.3"


def test_merge_keeps_newest_line_and_ranges_in_version_order(tmp_path):
    index = SiteIndexData()
    index.add(_part("0.10.0", [_row("gone after 0.9 never", n=5), _row("always here message", n=30)], "c" * 40))
    index.add(_part("0.9.0", [_row("gone after 0.9 never", n=4), _row("always here message", n=20)]))
    index.add(_part("0.2.0", [_row("always here message", n=10)]))
    path = tmp_path / "sites.jsonl.gz"
    index.write(path)
    header, rows = read_lines(path)
    assert [v for v, _ in header["libraries"]["vllm"]["releases"]] == ["0.2.0", "0.9.0", "0.10.0"]
    by = {r["p"]: r for r in rows}
    assert by["always here message"]["r"] == "0.2.0-0.10.0" and by["always here message"]["n"] == 30
    assert by["gone after 0.9 never"]["r"] == "0.9.0-0.10.0"
    # loading and re-adding a release replaces its part
    again = SiteIndexData.load(path)
    again.add(_part("0.9.0", [_row("always here message", n=20)]))
    assert {r["p"]: r["r"] for r in json.loads("[" + ",".join(gzip.decompress(again.dumps()).decode().splitlines()[1:]) + "]")} == {
        "always here message": "0.2.0-0.10.0", "gone after 0.9 never": "0.10.0"}


def test_same_parts_same_bytes():
    def build(order):
        index = SiteIndexData()
        for v in order:
            index.add(_part(v, [_row(f"message of release {v} here"), _row("shared message text")]))
        return index.dumps()

    assert build(["0.1", "0.2", "0.3"]) == build(["0.3", "0.1", "0.2"])


def test_fixture_part_rebuilds_what_ships():
    """CI's reproducibility check, offline: vLLM 0.2.7's message-holding members are
    committed (tests/fixtures/sites/, 117 KB); its part must equal the shipped index's
    rows for 0.2.7 (lines compared where 0.2.7 is a row's newest release)."""
    part = read_release(FIXTURE, LIBRARIES["vllm"], "0.2.7")
    assert len(part.rows) > 100
    shipped = SiteIndexData.load(SHIPPED)
    assert "0.2.7" in shipped.releases.get("vllm", {}), f"{SHIPPED} must hold vllm 0.2.7 (its fixture is committed)"
    key = lambda r: (r["p"], r["f"], r["fn"], r["k"], r["e"] or "", r["c"] or "")  # noqa: E731
    have = {key(r): r for r in shipped.release_rows("vllm", "0.2.7")}
    built = {key(r): r for r in part.rows}
    assert set(have) == set(built)
    newest = {k for k, v in shipped.seen.items() if k[0] == "vllm" and max(v, key=version_key) == "0.2.7"}
    for k in built:
        if ("vllm", *k) in newest:
            assert have[k]["n"] == built[k]["n"]


def test_shipped_index_is_canonical():
    """What ships is exactly what the writer writes for its rows (compared decompressed:
    another zlib may compress the same bytes differently)."""
    shipped = SiteIndexData.load(SHIPPED)
    assert gzip.decompress(shipped.dumps()) == gzip.decompress(SHIPPED.read_bytes())
    assert set(shipped.releases) == {"vllm", "torch", "flashinfer"}


def test_build_stamps_a_commit_the_tag_map_learned_later(tmp_path):
    """vLLM's wheels name no commit; once tags.json has one (from the release's sdist), any
    build writes it into the header without reading the release again."""
    from errkb.mine.releases import tag_commits
    from errkb.mine.site_build import build

    version, commit = "0.16.0", tag_commits("vllm")["0.16.0"]
    index = SiteIndexData()
    index.add(_part(version, [_row("a message raised in one release only")]))
    index.add(_part("0.1.9", [_row("a message raised in one release only")]))
    path = tmp_path / "sites.jsonl.gz"
    index.write(path)
    build([], path)
    releases = dict(SiteIndexData.load(path).releases["vllm"])
    assert releases == {"0.1.9": None, version: commit}


def test_generated_copies_are_one_row_of_the_first_file_with_how_many_files_raise_it():
    """One message of one function and condition raised in more files of a release than
    COPIES_MOST (FlashInfer's generated kernels: one check in 2,230 files) is one row, the first
    file's, with the count; a message hand-written in many files (other functions, as
    torch.optim's "Invalid learning rate" in 21) and one of a few files keep every site."""
    from errkb.match.sites import COPIES_MOST

    def copies(version, first, count):
        return _part(version, [_row("grid too large", f"flashinfer/data/csrc/k{i:04d}/launch.cu", n=i + 7)
                               for i in range(first, first + count)][::-1])

    many = copies("0.7.4", 0, COPIES_MOST + 25)
    hand = [dict(_row("Invalid learning rate: (.+?)", f"torch/optim/{name}.py"), fn=f"{name.upper()}.__init__")
            for name in ("sgd", "adam", "adagrad", "adamw", "adamax", "asgd", "lbfgs", "nadam", "radam", "rmsprop",
                         "rprop", "sparse_adam")]
    few = [_row("message of two files", f"vllm/{name}.py") for name in ("a", "b")]
    many.rows += hand + few
    many.keep_copies()
    (row,) = [r for r in many.rows if r["p"] == "grid too large"]
    assert (row["f"], row["n"], row["x"]) == ("flashinfer/data/csrc/k0000/launch.cu", 7, COPIES_MOST + 25)
    assert [r for r in many.rows if r["p"] != "grid too large"] == hand + few  # untouched, no "x"
    assert many.copies == COPIES_MOST + 24 and many.summary()["copies_left_out"] == COPIES_MOST + 24
    # the row spans every release whose copies it stands for, though their first file differs;
    # its file, line and count are the newest's, whatever order the releases come in
    older = copies("0.7.3", 5, COPIES_MOST + 3)
    older.keep_copies()
    built = []
    for parts in ((older, many), (many, older)):
        index = SiteIndexData()
        for part in parts:
            index.add(part)
        (key,) = [k for k in index.rows if k[1] == "grid too large"]
        assert index.seen[key] == {"0.7.3", "0.7.4"}
        assert index.rows[key]["f"] == "flashinfer/data/csrc/k0000/launch.cu" and index.rows[key]["x"] == COPIES_MOST + 25
        built.append(index.dumps())
    assert built[0] == built[1]
    assert SiteIndexData.load(_write(built[0])).dumps() == built[0]  # the key survives a round trip


def _write(data: bytes) -> Path:
    import tempfile

    path = Path(tempfile.mkdtemp()) / "sites.jsonl.gz"
    path.write_bytes(data)
    return path


def _sdist(folder: Path, version: str, source: str) -> None:
    """A vLLM sdist of one module, as pip would leave it in the releases folder."""
    import io
    import tarfile

    data = source.encode()
    with tarfile.open(folder / f"vllm-{version}.tar.gz", "w:gz") as tar:
        info = tarfile.TarInfo(f"vllm-{version}/vllm/checks.py")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))


def test_replacing_a_release_never_leaves_a_row_with_the_replaced_parts_line(tmp_path):
    """`errkb sites add` of a release already in the index replaces its part. A site the new part
    lacks but older releases have must get the line of the newest of those (read again), not
    keep the replaced part's line: the source link would point at the wrong line."""
    from errkb.mine.site_build import build

    releases = tmp_path / "releases"
    releases.mkdir()
    old_message = "def f(x):\n    if x:\n        raise ValueError('the tokenizer mode is not supported here')\n"
    other = "def g(y):\n    if y:\n        raise RuntimeError('a message every release of this package raises')\n"
    _sdist(releases, "0.1.0", other + old_message)  # the message at line 6
    _sdist(releases, "0.2.0", other + "\n" * 10 + old_message)  # moved to line 16
    index_path = tmp_path / "sites.jsonl.gz"
    build(["vllm==0.1.0", "vllm==0.2.0"], index_path, releases_dir=releases)
    rows = {r["p"]: r for r in read_lines(index_path)[1]}
    assert rows["the tokenizer mode is not supported here"]["n"] == 16

    (releases / "vllm-0.2.0.tar.gz").unlink()
    _sdist(releases, "0.2.0", other)  # 0.2.0 read again without the message (a miner change, say)
    said: list[str] = []
    report = build(["vllm==0.2.0"], index_path, releases_dir=releases, say=said.append)
    rows = {r["p"]: r for r in read_lines(index_path)[1]}
    gone = rows["the tokenizer mode is not supported here"]
    assert (gone["r"], gone["n"]) == ("0.1.0", 6)  # 0.1.0's own line, read again
    assert report.read_again == ["vllm==0.1.0"] and report.stale == 0
    assert any("reading vllm==0.1.0 again: 1 sites had their line from a replaced part" in s for s in said)
    # the same bytes as a build from nothing
    fresh = tmp_path / "fresh" / "sites.jsonl.gz"
    build(["vllm==0.1.0", "vllm==0.2.0"], fresh, fresh=True, releases_dir=releases)
    assert fresh.read_bytes() == index_path.read_bytes()

    # when the older release cannot be read, the build says so and how to fix it
    (releases / "vllm-0.1.0.tar.gz").write_bytes(b"not a tar")
    _sdist_bytes = (releases / "vllm-0.2.0.tar.gz").read_bytes()
    build(["vllm==0.2.0"], index_path, releases_dir=releases)  # nothing stale: no message lost
    (releases / "vllm-0.2.0.tar.gz").unlink()
    _sdist(releases, "0.2.0", other + old_message)
    build(["vllm==0.2.0"], index_path, releases_dir=releases)
    (releases / "vllm-0.2.0.tar.gz").write_bytes(_sdist_bytes)
    said.clear()
    report = build(["vllm==0.2.0"], index_path, releases_dir=releases, say=said.append)
    assert report.stale == 1 and [s for s, _ in report.failed] == ["vllm==0.1.0"]  # tried once
    assert any("1 sites keep the line of a replaced part: vllm==0.1.0 could not be read; "
               "`errkb sites add vllm==0.1.0` gives them their line" in s for s in said)


def test_replacing_releases_read_in_one_call_needs_no_second_read(tmp_path):
    """Both releases added again in one call, the newer one without a message the older has: the
    older is added after the newer (newest first), so its line is there without reading it twice."""
    from errkb.mine.site_build import build

    releases = tmp_path / "releases"
    releases.mkdir()
    message = "def f(x):\n    if x:\n        raise ValueError('the tokenizer mode is not supported here')\n"
    _sdist(releases, "0.1.0", message)
    _sdist(releases, "0.2.0", "\n" * 10 + message)
    index_path = tmp_path / "sites.jsonl.gz"
    build(["vllm==0.1.0", "vllm==0.2.0"], index_path, releases_dir=releases)
    (releases / "vllm-0.2.0.tar.gz").unlink()
    _sdist(releases, "0.2.0", "def g():\n    raise RuntimeError('a message every release of this package raises')\n")
    report = build(["vllm==0.1.0", "vllm==0.2.0"], index_path, releases_dir=releases, jobs=2)
    assert report.read_again == [] and report.stale == 0
    assert [p["version"] for p in report.parts] == ["0.2.0", "0.1.0"]
    # a release named twice, in two spellings, is read once
    again = build(["vllm==0.1.0", "VLLM==0.1.0", "vllm==0.1.0"], tmp_path / "x" / "sites.jsonl.gz", fresh=True,
                  releases_dir=releases)
    assert [p["version"] for p in again.parts] == ["0.1.0"]
    rows = {r["p"]: r for r in read_lines(index_path)[1]}
    assert (rows["the tokenizer mode is not supported here"]["r"], rows["the tokenizer mode is not supported here"]["n"]) == ("0.1.0", 3)


def test_pytorch_cpp_source_is_read_beside_its_wheel(tmp_path, monkeypatch):
    """A release listed in data/sites/cpp_sources.json gets its C++ source read into its part
    (PyTorch's .cpp, which no wheel ships): at repository paths, without tests or vendored
    kernels, only from an archive whose sha256 is the listed one."""
    import hashlib
    import io
    import tarfile
    import zipfile

    from errkb.mine import releases
    from errkb.mine.releases import ReleaseError, fetch_cpp_source

    folder = tmp_path / "releases"
    folder.mkdir()
    with zipfile.ZipFile(folder / "torch-9.9.9-cp312-none-macosx_11_0_arm64.whl", "w") as whl:
        whl.writestr("torch/cuda/__init__.py", "def f():\n    raise RuntimeError('a message of the wheel itself here')\n")
    members = {
        "aten/src/ATen/TensorIterator.cpp": 'void f(int a, int b) {\n  TORCH_CHECK(a == b, "Expected all tensors to '
                                            'be on the same device, but found at least two devices, ", a, " and ", b, "!");\n}\n',
        "aten/src/ATen/native/transformers/cuda/flash_attn/flash_api.cpp":
            'void g(bool ok) {\n  TORCH_CHECK(ok, "FlashAttention only supports Ampere GPUs or newer.");\n}\n',
        "aten/src/ATen/test/basic.cpp": 'void h(bool ok) {\n  TORCH_CHECK(ok, "a check of the test suite only here");\n}\n',
        "tools/x.cpp": 'void k(bool ok) {\n  TORCH_CHECK(ok, "a check outside the library folders here");\n}\n',
    }
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:xz") as tar:
        for name, text in members.items():
            info = tarfile.TarInfo("pytorch-v9.9.9/" + name)
            info.size = len(text.encode())
            tar.addfile(info, io.BytesIO(text.encode()))
    source = folder / "pytorch_9.9.9+dfsg.orig.tar.xz"
    source.write_bytes(buf.getvalue())
    listed = {"9.9.9": {"url": "http://deb.example/pool/pytorch_9.9.9+dfsg.orig.tar.xz", "size": source.stat().st_size,
                        "sha256": hashlib.sha256(buf.getvalue()).hexdigest()}}
    monkeypatch.setattr(releases, "cpp_sources", lambda library: listed if library == "torch" else {})
    from errkb.mine.site_build import build

    index_path = tmp_path / "sites.jsonl.gz"
    report = build(["torch==9.9.9"], index_path, releases_dir=folder)
    assert report.failed == []
    rows = {r["p"]: r for r in read_lines(index_path)[1]}
    same = rows["Expected all tensors to be on the same device, but found at least two devices, (.+?) and (.+?)!"]
    assert (same["f"], same["n"], same["k"], same["r"]) == ("aten/src/ATen/TensorIterator.cpp", 2, "C++", "9.9.9")
    assert "a message of the wheel itself here" in rows
    assert not [p for p in rows if "Ampere" in p or "test suite" in p or "outside the library" in p]
    # not in the releases folder: downloaded from its listed address (a file:// mirror here) and
    # checked; an archive there that is not the listed one is refused, named, and nothing is left
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    source.rename(mirror / source.name)
    listed["9.9.9"]["url"] = (mirror / source.name).as_uri()
    assert fetch_cpp_source(releases.LIBRARIES["torch"], "9.9.9", folder) == source and source.exists()
    umask = os.umask(0)
    os.umask(umask)
    assert source.stat().st_mode & 0o777 == 0o666 & ~umask  # as any download there, not private
    source.unlink()
    (mirror / source.name).write_bytes(buf.getvalue()[:-1] + b"x")
    with pytest.raises(ReleaseError, match=r"torch==9\.9\.9: its C\+\+ source file://.*orig\.tar\.xz is not the listed one"):
        fetch_cpp_source(releases.LIBRARIES["torch"], "9.9.9", folder)
    assert sorted(p.name for p in folder.iterdir()) == ["torch-9.9.9-cp312-none-macosx_11_0_arm64.whl"]
    assert fetch_cpp_source(releases.LIBRARIES["vllm"], "0.6.3", folder) is None  # none listed
