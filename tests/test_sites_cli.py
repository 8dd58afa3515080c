"""`errkb sites`: a thin shell over the library; bad input is one line and exit 2, a
release that cannot be read is reported (exit 1) and never crashes the build."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from errkb.mine.releases import Part
from errkb.mine.site_index import SiteIndexData

ROOT = Path(__file__).resolve().parents[1]


def _errkb(*args, tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "ERRKB_CACHE_DIR": str(tmp_path / "cache"),
           "ERRKB_RELEASES_DIR": str(tmp_path / "releases")}
    return subprocess.run([sys.executable, "-m", "errkb", "sites", *args], capture_output=True, text=True,
                          env=env, timeout=120)


def test_match_json_names_the_tier_and_sites(tmp_path):
    index = SiteIndexData()
    part = Part("vllm", "0.6.3", None)
    part.rows = [{"p": r"max_tokens must be at least 1, got (.+?)\.", "f": "vllm/sampling_params.py", "n": 9,
                  "fn": "SamplingParams._verify_args", "c": "self.max_tokens < 1", "k": "raise", "e": "ValueError"}]
    index.add(part)
    path = tmp_path / "i" / "sites.jsonl.gz"
    index.write(path)
    run = _errkb("match", "--index", str(path), "--json", "ValueError: max_tokens must be at least 1, got 0.",
                 tmp_path=tmp_path)
    assert run.returncode == 0, run.stderr
    (m,) = json.loads(run.stdout)
    assert m["tier"] == "site" and m["sites"][0]["function"] == "SamplingParams._verify_args"
    text = _errkb("match", "--index", str(path), "max_tokens must be at least 1, got 0.", tmp_path=tmp_path)
    assert "raised at vllm/sampling_params.py:9 in SamplingParams._verify_args when self.max_tokens < 1" in text.stdout
    assert _errkb("match", "--index", str(path), "nothing here", tmp_path=tmp_path).returncode == 1


def test_bad_spec_and_empty_lock_are_usage_errors(tmp_path):
    run = _errkb("add", "numpy==1.0", "--index", str(tmp_path / "s.jsonl.gz"), tmp_path=tmp_path)
    assert run.returncode == 2 and "unknown library 'numpy'" in run.stderr
    run = _errkb("build", "--from-lock", "--index", str(tmp_path / "s.jsonl.gz"), tmp_path=tmp_path)
    assert run.returncode == 2 and "releases.lock: no releases listed" in run.stderr


def test_unreadable_release_is_reported_not_fatal(tmp_path):
    (tmp_path / "releases").mkdir()
    (tmp_path / "releases" / "vllm-0.0.1-py3-none-any.whl").write_bytes(b"not a zip")
    run = _errkb("add", "vllm==0.0.1", "--index", str(tmp_path / "s.jsonl.gz"), "--json", tmp_path=tmp_path)
    assert run.returncode == 1, run.stderr
    report = json.loads(run.stdout)
    assert "not a zip archive" in report["failed"][0]["reason"] and report["sites"] == 0


def test_jobs_read_releases_in_parallel_into_the_same_bytes(tmp_path):
    """`--jobs 2` reads releases in worker processes; the index and the report are what one
    process writes (a release that cannot be read is reported the same way)."""
    import shutil

    releases = tmp_path / "releases"
    releases.mkdir()
    shutil.copy(ROOT / "tests" / "fixtures" / "sites" / "vllm-0.2.7-py.tar.gz", releases / "vllm-0.2.7.tar.gz")
    (releases / "vllm-0.0.1-py3-none-any.whl").write_bytes(b"not a zip")
    reports = {}
    for jobs in ("1", "2"):
        index = tmp_path / jobs / "sites.jsonl.gz"
        run = _errkb("add", "vllm==0.0.1", "vllm==0.2.7", "--index", str(index), "--jobs", jobs, "--json",
                     tmp_path=tmp_path)
        assert run.returncode == 1, run.stderr
        report = json.loads(run.stdout)
        reports[jobs] = (index.read_bytes(), [p["version"] for p in report["releases"]],
                         [f["release"] for f in report["failed"]], report["sites"])
        assert (tmp_path / jobs / "releases.lock").read_text() == "vllm==0.2.7\n"
    assert reports["1"] == reports["2"]
    assert reports["1"][1] == ["0.2.7"] and reports["1"][2] == ["vllm==0.0.1"] and reports["1"][3] > 100
