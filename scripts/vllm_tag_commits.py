"""Fill data/sites/tags.json's "vllm" map (release -> commit) from vLLM's sdists.

vLLM's release wheels name no commit, and its repository is too big to fetch here; each
sdist's ``vllm/_version.py`` (setuptools-scm, written when the sdist was built from the
tag) does: ``__commit_id__ = commit_id = 'g9da56fd18'`` (a short hash). pip unpacks the
sdist before its metadata step (which needs torch) fails; ``--no-clean`` keeps it, and
only that one file is read. Nothing is built or run.

    python scripts/vllm_tag_commits.py             # every vllm release in releases.lock
    python scripts/vllm_tag_commits.py 0.6.3 0.7.0
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from errkb.mine.releases import scm_commit
from errkb.mine.site_build import lock_path, read_lock
from errkb.mine.site_index import version_key

ROOT = Path(__file__).resolve().parent.parent
TAGS = ROOT / "data" / "sites" / "tags.json"


def commit(version: str) -> str | None:
    scratch = Path(tempfile.mkdtemp(prefix="errkb-vllm-tag-"))
    try:
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "--disable-pip-version-check",
                        "--no-binary=:all:", "--no-build-isolation", "--no-clean", "-d", str(scratch / "out"),
                        f"vllm=={version}"], capture_output=True, text=True, timeout=900, check=False,
                       env=dict(os.environ, TMPDIR=str(scratch)))
        for module in sorted(scratch.glob("pip-*/*/vllm/_version.py")) + sorted(scratch.glob("out/*/vllm/_version.py")):
            found = scm_commit(module.read_text(encoding="utf-8", errors="replace"))
            if found:
                return found
        return None
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def main() -> None:
    versions = sys.argv[1:] or [s.split("==", 1)[1] for s in read_lock(lock_path(ROOT / "data/sites/sites.jsonl.gz"))
                                if s.startswith("vllm==")]
    data = json.loads(TAGS.read_text())
    known = data.setdefault("vllm", {})
    for version in versions:
        if version in known:
            continue
        found = commit(version)
        print(f"vllm {version}: {found or 'no commit in its sdist'}", flush=True)
        if found:
            known[version] = found
            data["vllm"] = dict(sorted(known.items(), key=lambda kv: version_key(kv[0])))
            TAGS.write_text(json.dumps(data, indent=1, sort_keys=False) + "\n")


if __name__ == "__main__":
    main()
