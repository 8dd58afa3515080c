"""Ingest into the DuckDB store: counts, versions, rejects, exit codes, atomicity."""

from __future__ import annotations

import gzip
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest
from click.testing import CliRunner

from errkb.cli import cli
from errkb.store.db import Store
from tests.support import REPO, SEED_FILE, SEED_ID, write_jsonl


def run(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


def test_ingest_then_reingest_changes_nothing(db_path):
    first = run("ingest", "--db", db_path, SEED_FILE)
    assert first.exit_code == 0
    assert first.stdout == "1 new, 0 updated, 0 unchanged, 0 rejected\n"
    with Store.open(db_path) as store:
        before = store.dataset_hash(), store.stats()["versions"]
    again = run("ingest", "--db", db_path, SEED_FILE)
    assert again.stdout == "0 new, 0 updated, 1 unchanged, 0 rejected\n"
    with Store.open(db_path) as store:
        assert (store.dataset_hash(), store.stats()["versions"]) == before


def test_changed_record_becomes_current_and_old_version_stays(db_path, tmp_path, seed_wrapper):
    run("ingest", "--db", db_path, SEED_FILE)
    seed_wrapper["record"]["documentation"] += " Seen on 0.28.0."
    seed_wrapper["datasetVersion"] = "2026-12-01T00:00:00.000Z"
    changed = tmp_path / "changed.json"
    changed.write_text(json.dumps(seed_wrapper))
    result = run("ingest", "--db", db_path, changed)
    assert result.stdout == "0 new, 1 updated, 0 unchanged, 0 rejected\n"
    with Store.open(db_path, read_only=True) as store:
        assert store.get(SEED_ID)["documentation"].endswith("Seen on 0.28.0.")
        history = store.history(SEED_ID)
    assert [v["dataset_version"] for v in history] == ["2026-08-15T22:17:37.221Z", "2026-12-01T00:00:00.000Z"]
    shown = run("show", "--db", db_path, "--history", "--json", SEED_ID)
    assert len(json.loads(shown.stdout)) == 2


def test_show_json_returns_the_record_exactly_as_ingested(db_path, seed_record):
    run("ingest", "--db", db_path, SEED_FILE)
    for key in (SEED_ID, seed_record["slug"], f"vllm-project/vllm/{seed_record['slug']}"):
        result = run("show", "--db", db_path, "--json", key)
        assert result.exit_code == 0
        assert json.loads(result.stdout) == seed_record
        assert list(json.loads(result.stdout)) == list(seed_record)


def test_show_unknown_key_is_a_usage_error(db_path):
    run("ingest", "--db", db_path, SEED_FILE)
    result = run("show", "--db", db_path, "nope")
    assert result.exit_code == 2
    assert result.stderr == "Error: no record with id or slug 'nope' (try `errkb list` or `errkb search`)\n"


BAD_INPUTS = {
    "invalid.json": b'{"record": {"id": }}',
    "truncated.json": SEED_FILE.read_bytes()[:300],
    "number.json": b"42",
    "version1.json": json.dumps({**json.loads(SEED_FILE.read_text())["record"], "schemaVersion": 1}).encode(),
    "empty.json": b"",
    "latin1.json": SEED_FILE.read_bytes().replace(b"Flashinfer", "Fl\u00e4shinfer".encode("latin-1"), 1),
}


def test_every_bad_input_is_rejected_kept_verbatim_and_named(db_path, tmp_path):
    folder = tmp_path / "bad"
    folder.mkdir()
    for name, raw in BAD_INPUTS.items():
        (folder / name).write_bytes(raw)
    result = run("ingest", "--db", db_path, SEED_FILE, folder)
    assert result.exit_code == 1
    assert result.stdout == f"1 new, 0 updated, 0 unchanged, {len(BAD_INPUTS)} rejected\n"
    assert result.stderr.endswith(f"{len(BAD_INPUTS)} rejected record(s) kept with their reasons; see them with `errkb rejects`\n")
    listing = run("rejects", "--db", db_path, "--json")
    rejects = {os.path.basename(r["file"]): r for r in json.loads(listing.stdout)}
    assert set(rejects) == set(BAD_INPUTS)
    with duckdb.connect(str(db_path), read_only=True) as con:
        raw = dict(con.execute("SELECT source_file, raw FROM rejects").fetchall())
    for name, data in BAD_INPUTS.items():
        assert bytes(raw[str(folder / name)]) == data
    assert rejects["invalid.json"]["reasons"] == [f"{folder / 'invalid.json'}:1:19: E100 unreadable invalid JSON: Expecting value (fix: make the file valid UTF-8 JSON: a record object, a wrapper, an array or JSON Lines)"]
    assert any("E101 schema [2e3fedf4ee50f84a] /schemaVersion: 2 was expected" in r for r in rejects["version1.json"]["reasons"])
    assert "invalid UTF-8 byte 0xe4" in rejects["latin1.json"]["reasons"][0]
    assert "empty file, no records" in rejects["empty.json"]["reasons"][0]
    assert "truncated JSON" in rejects["truncated.json"]["reasons"][0]


def _seed_text(**changes) -> str:
    return json.dumps({**json.loads(SEED_FILE.read_text())["record"], **changes})


# Inputs Python's json module parses (or half-parses) but that are not a record errkb can
# store: each is one reject whose reason says what is wrong, and where.
def _hostile_json() -> dict[str, tuple[bytes, str]]:
    seed = _seed_text()
    at = seed.index('"lineNumber": ') + len('"lineNumber": ') + 1
    surrogate = seed.replace('"documentation": "', '"documentation": "\\ud800', 1)
    return {
        # int() refuses over 4,300 digits: the reader's ValueError used to escape as "internal error"
        "bigint.json": (seed.replace('"lineNumber": 221', '"lineNumber": 1' + "0" * 5000).encode(),
                        f":1:{at}: E100 unreadable invalid JSON: a number of over 4300 digits"),
        # DuckDB cannot encode it: the whole ingest used to roll back, storing nothing
        "surrogate.json": (surrogate.encode(),
                           f":1:{surrogate.index(chr(92) + 'ud800') + 1}: E100 unreadable documentation: "
                           "a \\u escape of a lone UTF-16 surrogate is not a character"),
        "nan.json": (seed.replace('"lineNumber": 221', '"lineNumber": NaN').encode(),
                     f":1:{at}: E100 unreadable invalid JSON: NaN is not JSON (write a number or null)"),
        "dupkey.json": ((seed[:-1] + ', "id": "00000000000000c9"}').encode(),
                        f":1:{len(seed) + 2}: E100 unreadable invalid JSON: duplicate key \"id\" in one object "
                        "(which value counts is not defined)"),
        "comma.json": (f"[{seed},]".encode(), f":1:{len(seed) + 3} (array item 1): E100 unreadable invalid JSON: "
                                              "trailing comma before ']'"),
        "utf16.json": (seed.encode("utf-16"), ":1:1: E100 unreadable invalid JSON: the file is UTF-16 (it starts with a "
                                              "UTF-16 byte-order mark); records are read as UTF-8"),
        "notes.md": (b"# notes\n", ":1:1: E100 unreadable invalid JSON: a JSON value cannot start with '# notes'"),
        # compressed twice (a gzip file is read as what it holds, once): one reject for the whole
        # file, not one per "\n{" found in the binary
        "records.jsonl.gz": (gzip.compress(gzip.compress(((seed + "\n") * 50).encode(), mtime=0), mtime=0),
                             ":1:1: E100 unreadable invalid JSON: gzip-compressed data inside gzip-compressed data; "
                             "decompress the outer layer first"),
        "latin1.jsonl": (b"\xe4rger\n", ":1:1: E100 unreadable invalid JSON: invalid UTF-8 byte 0xe4 at 1:1, not JSON text"),
        "null.txt": (b'{"record": null, "datasetVersion": "v"}',
                     ':1:1: E100 unreadable the wrapper\'s "record" is null, not a record object'),
        "nested.txt": (json.dumps({"record": json.loads(SEED_FILE.read_text())}).encode(),
                       ':1:1: E100 unreadable a wrapper inside a wrapper: "record" holds another {"record": ...}'),
    }


def test_hostile_json_is_one_reject_each_with_what_and_where_and_the_rest_is_stored(db_path, tmp_path):
    folder = tmp_path / "hostile"
    folder.mkdir()
    cases = _hostile_json()
    for name, (raw, _) in cases.items():
        (folder / name).write_bytes(raw)
    result = run("ingest", "--db", db_path, SEED_FILE, folder)
    assert result.exit_code == 1, result.output
    assert "internal error" not in result.stderr and "rolled back" not in result.stderr
    # the seed again as comma.json's first item: unchanged
    assert result.stdout == f"1 new, 0 updated, 1 unchanged, {len(cases)} rejected\n"
    rejects = {os.path.basename(r["file"]): r for r in json.loads(run("rejects", "--db", db_path, "--json").stdout)}
    fix = " (fix: make the file valid UTF-8 JSON: a record object, a wrapper, an array or JSON Lines)"
    for name, (_raw, reason) in cases.items():
        assert rejects[name]["reasons"] == [f"{folder / name}{reason}{fix}"], name
    with duckdb.connect(str(db_path), read_only=True) as con:
        kept = dict(con.execute("SELECT source_file, raw FROM rejects").fetchall())
    assert bytes(kept[str(folder / "surrogate.json")]) == cases["surrogate.json"][0]
    assert bytes(kept[str(folder / "bigint.json")]) == cases["bigint.json"][0]


def test_reingesting_the_same_rejects_adds_no_rows(db_path, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_bytes(b'[1, {"id": 2')
    first = run("ingest", "--db", db_path, bad)
    assert first.stdout == "0 new, 0 updated, 0 unchanged, 2 rejected\n"
    run("ingest", "--db", db_path, bad)
    assert len(json.loads(run("rejects", "--db", db_path, "--json").stdout)) == 2


def test_same_id_twice_with_different_content_keeps_first_rejects_second(db_path, tmp_path, seed_record):
    path = write_jsonl(tmp_path / "twice.jsonl", [seed_record, {**seed_record, "documentation": "other"}])
    result = run("ingest", "--db", db_path, path)
    assert result.exit_code == 1
    assert result.stdout == "1 new, 0 updated, 0 unchanged, 1 rejected\n"
    assert f"{path}:2:1: E401 duplicate-id [{SEED_ID}] id {SEED_ID} already appears at {path}:1:1 with different content" in result.stderr


def test_a_slug_shared_with_a_stored_record_is_accepted_with_a_warning(db_path, tmp_path, make_variant, seed_record):
    run("ingest", "--db", db_path, SEED_FILE)
    clash = {**make_variant(1), "slug": seed_record["slug"]}
    result = run("ingest", "--db", db_path, write_jsonl(tmp_path / "clash.jsonl", [clash]))
    assert result.exit_code == 0, result.output
    assert result.stdout == "1 new, 0 updated, 0 unchanged, 0 rejected\n"
    with Store.open(db_path, read_only=True) as store:
        (finding,) = store.findings(clash["id"])
    assert (finding["code"], finding["level"]) == ("W402", "warning")
    assert finding["message"] == (
        f"slug '{seed_record['slug']}' of vllm-project/vllm is also record {SEED_ID} (in the store): each has its own "
        f"fix page, errors/vllm-project/vllm/{seed_record['slug']}.html lists them")


def test_unreadable_path_is_exit_2_and_writes_nothing(db_path):
    run("ingest", "--db", db_path, SEED_FILE)
    result = run("ingest", "--db", db_path, SEED_FILE, "/no/such/dir")
    assert result.exit_code == 2
    assert result.stderr == "Error: /no/such/dir: no such file or folder\n"
    assert json.loads(run("stats", "--db", db_path, "--json").stdout)["ingest_runs"] == 1


def test_list_filters_and_stats(db_path, tmp_path, make_variant):
    other = {**make_variant(1), "errorClass": "RuntimeError", "severity": "warning", "tags": ["cuda"]}
    run("ingest", "--db", db_path, SEED_FILE, write_jsonl(tmp_path / "o.jsonl", [other]))
    ids = lambda *a: [r["id"] for r in json.loads(run("list", "--db", db_path, "--json", *a).stdout)]  # noqa: E731
    assert len(ids()) == 2
    assert ids("--class", "RuntimeError") == [other["id"]]
    assert ids("--severity", "error") == [SEED_ID]
    assert ids("--tag", "cuda") == [other["id"]]
    assert ids("--repo", "pytorch/pytorch") == []
    stats = json.loads(run("stats", "--db", db_path, "--json").stdout)
    assert stats["by_class"] == {"RuntimeError": 1, "ValueError": 1}
    assert stats["by_lint_status"] == {"clean": 2}


def test_read_commands_need_an_existing_store(tmp_path):
    missing = tmp_path / "missing.duckdb"
    result = run("list", "--db", missing)
    assert result.exit_code == 2
    assert result.stderr == f"Error: {missing}: no such store (create it with `errkb ingest --db {missing} PATH`)\n"


def test_default_store_is_built_from_bundled_data_and_refreshed(tmp_path, monkeypatch, seed_wrapper, make_variant):
    import errkb.store.db as store_mod

    data = tmp_path / "data"
    data.mkdir()
    (data / "seed.txt").write_text(json.dumps(seed_wrapper))
    monkeypatch.setattr(store_mod, "data_dir", lambda: data)
    monkeypatch.setenv("ERRKB_CACHE_DIR", str(tmp_path / "cache"))
    assert [r["id"] for r in json.loads(run("list", "--json").stdout)] == [SEED_ID]
    (data / "more.json").write_text(json.dumps(make_variant(7)))
    assert len(json.loads(run("list", "--json").stdout)) == 2
    assert (tmp_path / "cache" / "errkb.duckdb").exists()


def _variants_file(path, make_variant, n):
    return write_jsonl(path, [make_variant(i) for i in range(n)])


def _ingest_from_fifo(db_path, fifo, inherit_ignored_sigint: bool):
    def child_setup():
        # A background job of a non-interactive shell (CI, `cmd &` in a script) starts
        # with SIGINT ignored; Python then never raises KeyboardInterrupt by itself.
        signal.signal(signal.SIGINT, signal.SIG_IGN if inherit_ignored_sigint else signal.SIG_DFL)

    return subprocess.Popen(
        [sys.executable, "-m", "errkb", "ingest", "--db", str(db_path), str(fifo)],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=child_setup,
    )


STOPS = [
    pytest.param(sig, point, ignored, id=f"{sig.name}-{point}" + ("-sigint-inherited-ignored" if ignored else ""))
    for sig, point, ignored in [
        (signal.SIGKILL, "after-a-flush", False),
        (signal.SIGINT, "waiting-for-input", False),
        (signal.SIGINT, "after-a-flush", False),
        (signal.SIGINT, "after-a-flush", True),
        (signal.SIGINT, "mid-batch", True),
        (signal.SIGTERM, "waiting-for-input", False),
        (signal.SIGTERM, "after-a-flush", False),
        (signal.SIGTERM, "mid-batch", False),
        (signal.SIGTERM, "at-commit", False),
    ]
]


@pytest.mark.slow
@pytest.mark.parametrize(("how", "point", "sigint_ignored"), STOPS)
def test_stop_mid_ingest_leaves_store_as_it_was(db_path, tmp_path, make_variant, how, point, sigint_ignored):
    run("ingest", "--db", db_path, SEED_FILE)
    with Store.open(db_path) as store:
        before = (store.dataset_hash(), store.stats())
    fifo = tmp_path / "records.fifo"
    os.mkfifo(fifo)
    proc = _ingest_from_fifo(db_path, fifo, sigint_ignored)
    n = {"waiting-for-input": 0, "after-a-flush": 2600, "mid-batch": 6000, "at-commit": 2600}[point]
    with open(fifo, "w") as w:
        # More records than one flush (2000) reach DuckDB inside the open transaction.
        for i in range(n):
            w.write(json.dumps(make_variant(i)) + "\n")
        w.flush()
        if point in ("waiting-for-input", "after-a-flush"):
            time.sleep(1)  # the reader is blocked on the pipe now, or about to be
        if point != "at-commit":
            proc.send_signal(how)
    if point == "at-commit":
        # End of input: the run lints what is left, flushes and commits; the signal lands
        # somewhere in there. The commit is atomic: all of the run or none of it.
        time.sleep(0.3)
        proc.send_signal(how)
    started = time.monotonic()
    _, err = proc.communicate(timeout=60)
    took = time.monotonic() - started
    # Generous for a loaded 2-core CI machine; a process that ignores the signal waits
    # forever, one that honours it exits in well under a second.
    assert took < 20, f"{how.name} took {took:.1f}s to stop the ingest"
    with Store.open(db_path) as store:
        after = (store.dataset_hash(), store.stats())
    if point == "at-commit" and after != before:
        # The commit had begun: it completes (atomic), and the run counts as done.
        assert after[1]["records"] == before[1]["records"] + n
        # Done (0), stopped by errkb once done (128+signal), or, when the signal lands
        # in the interpreter's own teardown (Python restores the default handler at
        # finalization, after errkb's last code ran), ended by it: a shell sees 143
        # either way, and the store holds the whole run.
        assert proc.returncode in (0, 128 + how, -how)
        return
    assert proc.returncode == (-signal.SIGKILL if how == signal.SIGKILL else 128 + how), err.decode()[-2000:]
    if how != signal.SIGKILL:
        assert err.decode().strip().endswith(f"errkb: stopped by {how.name}")
    assert after == before


def test_store_never_downloads_duckdb_extensions(db_path):
    with Store.open(db_path) as store:
        settings = dict(store.con.execute(
            "SELECT name, value FROM duckdb_settings() WHERE name IN ('autoinstall_known_extensions', 'autoload_known_extensions')"
        ).fetchall())
    assert settings == {"autoinstall_known_extensions": "false", "autoload_known_extensions": "false"}


def test_a_file_name_with_a_newline_or_escape_stays_on_its_one_error_line(db_path, tmp_path):
    folder = tmp_path / "names"
    folder.mkdir()
    (folder / "a\nb.json").write_bytes(b"x")
    (folder / "c\x1b[2Jd.json").write_bytes(b"x")
    result = run("ingest", "--db", db_path, folder)
    assert result.exit_code == 1
    reason = ":1:1: E100 unreadable invalid JSON: a JSON value cannot start with 'x' (fix: make the file valid UTF-8 " \
             "JSON: a record object, a wrapper, an array or JSON Lines)"
    assert result.stderr.splitlines() == [f"{folder}/a\\nb.json{reason}", f"{folder}/c\\x1b[2Jd.json{reason}",
                                          "2 rejected record(s) kept with their reasons; see them with `errkb rejects`"]
    shown = run("rejects", "--db", db_path)
    assert shown.stdout.splitlines() == [f"#1 run 1 {folder}/a\\nb.json:1:1", f"  {folder}/a\\nb.json{reason}",
                                         f"#2 run 1 {folder}/c\\x1b[2Jd.json:1:1", f"  {folder}/c\\x1b[2Jd.json{reason}"]
    # stored verbatim: the JSON listing names the real file
    assert {r["file"] for r in json.loads(run("rejects", "--db", db_path, "--json").stdout)} == {
        f"{folder}/a\nb.json", f"{folder}/c\x1b[2Jd.json"}
    missing = run("ingest", "--db", db_path, tmp_path / "no\nsuch")
    assert (missing.exit_code, missing.stderr) == (2, f"Error: {tmp_path}/no\\nsuch: no such file or folder\n")


def test_a_dataset_whose_every_wrapper_has_an_extra_key_is_stored_with_twenty_warnings_shown(db_path, tmp_path,
                                                                                              make_variant):
    """Upstream files may carry wrapper keys errkb does not know: every record is stored,
    and stderr is not one warning line per file of the dataset."""
    folder = tmp_path / "upstream"
    folder.mkdir()
    for i in range(25):
        wrapper = {"record": make_variant(i + 1), "datasetVersion": "2026-08-15T22:17:37.221Z", "generator": "g"}
        (folder / f"{i:03d}.txt").write_text(json.dumps(wrapper))
    result = run("ingest", "--db", db_path, folder)
    assert (result.exit_code, result.stdout) == (0, "25 new, 0 updated, 0 unchanged, 0 rejected\n")
    lines = result.stderr.splitlines()
    assert lines[0] == f"warning: {folder / '000.txt'}:1:1: wrapper keys generator are not part of the dataset format; ignored"
    assert lines[20:] == ["... and 5 more warnings (--json lists them all)"]
    assert len(json.loads(run("ingest", "--db", db_path, "--json", folder).stdout)["warnings"]) == 25


def test_bytes_that_are_not_utf8_in_a_file_name_or_a_key_never_reach_duckdb(db_path, tmp_path, seed_wrapper):
    """A folder holding "r\\xff.json" rolled the whole ingest back (DuckDB refuses the
    surrogate Python decodes the name to); `show $'\\xff'` was an "internal error"."""
    folder = tmp_path / "names"
    folder.mkdir()
    odd = os.fsdecode(bytes(folder) + b"/r\xff.json")
    Path(odd).write_text(json.dumps(seed_wrapper))
    for paths in ([folder], [odd]):
        result = run("ingest", "--db", db_path, *paths)
        assert result.exit_code == 0, result.output
    with Store.open(db_path, read_only=True) as store:
        [first] = [v["file"] for v in store.history(SEED_ID)]
    assert first == f"{folder}/r\\xff.json"
    for args in (["show", "\udcff"], ["show", "--history", "\udcff"]):
        result = run(*args[:1], "--db", db_path, *args[1:])
        assert (result.exit_code, result.stderr) == (2, "Error: no record with id or slug '\\udcff' (try `errkb list` or "
                                                        "`errkb search`)\n")
    for flag in ("--repo", "--tag", "--class"):
        result = run("list", "--db", db_path, flag, "x\udcff")
        assert (result.exit_code, result.stdout) == (1, ""), result.output  # nothing listed: 1, like grep
