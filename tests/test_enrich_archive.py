"""The archive batch path (`errkb enrich --input ... --output ...`) and `errkb query`."""

from __future__ import annotations

import csv
import datetime as dt
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

pa = pytest.importorskip("pyarrow", reason="needs pyarrow: pip install 'errkb[archive]'")
import duckdb  # noqa: E402

from errkb.cli import cli  # noqa: E402
from errkb.enrich.archive import ArchiveError, enrich_archive  # noqa: E402
from errkb.enrich.query import LAST_WEEK_SQL, known_errors, parse_since  # noqa: E402
from tests.support import REPO, SEED_ID, SEED_MESSAGE, SEED_SLUG, SEED_SOLUTION  # noqa: E402

NOW = dt.datetime.now(dt.UTC).replace(microsecond=0)


def iso(t: dt.datetime) -> str:
    return t.isoformat().replace("+00:00", "Z")


def log_rows(n: int = 1000) -> list[dict]:
    """Every 10th row is the seed's error; hosts rotate; rows 0-499 are 2 days old, the rest 20 days."""
    rows = []
    for i in range(n):
        t = NOW - dt.timedelta(days=2 if i < n // 2 else 20, seconds=i)
        msg = f"ValueError: {SEED_MESSAGE}" if i % 10 == 0 else f"GET /api/{i} 200"
        rows.append({"ts": iso(t), "host": f"web-{i % 3}", "message": msg, "i": i, "log": {"msg": msg}})
    return rows


@pytest.fixture
def jsonl(tmp_path) -> Path:
    path = tmp_path / "logs.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in log_rows()))
    return path


def read(path: Path) -> list[dict]:
    return duckdb.sql(f"SELECT * FROM '{path}'").to_arrow_table().to_pylist()


def test_jsonl_to_parquet_keeps_rows_columns_and_order(matcher, jsonl, tmp_path):
    out = tmp_path / "enriched.parquet"
    summary = enrich_archive([str(jsonl)], out, matcher, site_url="https://e.test", workers=1, batch_rows=128)
    rows = read(out)
    assert (summary.rows, summary.matched, summary.written) == (1000, 100, 1000)
    assert summary.batches == 8
    assert [r["i"] for r in rows] == list(range(1000))
    assert list(rows[0]) == ["ts", "host", "message", "i", "log", "errkb"]
    assert rows[0]["errkb"] == {
        "id": SEED_ID, "slug": SEED_SLUG, "repo": "vllm-project/vllm", "errorClass": "ValueError",
        "severity": "error", "score": rows[0]["errkb"]["score"], "solution": SEED_SOLUTION,
        "url": f"https://e.test/errors/vllm-project/vllm/{SEED_SLUG}.html", "tier": "curated",
        "site": None,  # a record's row: where a known site is raised is a site's field only
    }
    assert rows[1]["errkb"] is None
    assert sum(r["errkb"] is not None for r in rows) == 100
    assert all((r["errkb"] is not None) == (r["i"] % 10 == 0) for r in rows)


def test_two_worker_processes_give_the_same_file(matcher, jsonl, tmp_path):
    one, two = tmp_path / "one.parquet", tmp_path / "two.parquet"
    enrich_archive([str(jsonl)], one, matcher, workers=1, batch_rows=100)
    summary = enrich_archive([str(jsonl)], two, matcher, workers=2, batch_rows=100)
    assert summary.workers == 2
    assert read(one) == read(two)


def test_csv_and_parquet_inputs_and_jsonl_output(matcher, jsonl, tmp_path):
    csv = tmp_path / "logs.csv"
    duckdb.sql(f"COPY (SELECT ts, host, message, i FROM read_json('{jsonl}')) TO '{csv}' (HEADER)")
    parquet = tmp_path / "logs.parquet"
    duckdb.sql(f"COPY (SELECT * FROM read_json('{jsonl}')) TO '{parquet}'")
    for src in (csv, parquet):
        out = tmp_path / f"out-{src.suffix[1:]}.jsonl"
        summary = enrich_archive([str(src)], out, matcher, workers=1)
        lines = [json.loads(x) for x in out.read_text().splitlines()]
        assert (summary.rows, summary.matched, len(lines)) == (1000, 100, 1000)
        assert lines[10]["errkb"]["id"] == SEED_ID and "errkb" not in lines[11]  # as the streaming filter writes it


def test_dotted_field_reads_a_struct_column(matcher, jsonl, tmp_path):
    out = tmp_path / "o.parquet"
    rows = json.loads(json.dumps(log_rows()))
    for r in rows:
        r["message"] = "moved to log.msg"
    jsonl.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert enrich_archive([str(jsonl)], out, matcher, fields=["log.msg"], workers=1).matched == 100
    assert enrich_archive([str(jsonl)], out, matcher, fields=["message"], workers=1).matched == 0


def test_a_key_first_seen_late_in_the_file_is_kept(matcher, tmp_path):
    # DuckDB's default schema sample would drop a key that first appears after it.
    src = tmp_path / "late.jsonl"
    rows = [{"message": f"line {i}"} for i in range(30_000)] + [{"message": SEED_MESSAGE, "late_key": "kept"}]
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "late.parquet"
    enrich_archive([str(src)], out, matcher, workers=1)
    last = duckdb.sql(f"SELECT late_key, errkb.id FROM '{out}' WHERE late_key IS NOT NULL").fetchall()
    assert last == [("kept", SEED_ID)]


def test_only_matched_and_existing_errkb_column_replaced(matcher, jsonl, tmp_path):
    first = tmp_path / "first.parquet"
    enrich_archive([str(jsonl)], first, matcher, workers=1)
    again = tmp_path / "again.parquet"
    summary = enrich_archive([str(first)], again, matcher, only_matched=True, workers=1)
    rows = read(again)
    assert (summary.rows, summary.written) == (1000, 100)
    assert [r["i"] for r in rows] == list(range(0, 1000, 10))
    assert list(rows[0]).count("errkb") == 1


def test_bad_inputs_are_one_line_errors(matcher, tmp_path):
    # A line that is not JSON no longer aborts the archive: it is kept and counted
    # (tests/test_enrich_archive_lossless.py). What cannot be read at all is one line.
    with pytest.raises(ArchiveError, match=r"nope\.jsonl: no such file$"):
        enrich_archive([str(tmp_path / "nope.jsonl")], tmp_path / "o.parquet", matcher)
    with pytest.raises(ArchiveError, match=r"logs\.txt: unknown archive format"):
        (tmp_path / "logs.txt").write_text("x\n")
        enrich_archive([str(tmp_path / "logs.txt")], tmp_path / "o.parquet", matcher)
    good = tmp_path / "good.jsonl"
    good.write_text('{"msg": "a"}\n')
    with pytest.raises(ArchiveError) as e:
        enrich_archive([str(good)], tmp_path / "o.parquet", matcher)
    assert str(e.value) == f"{good}: no column 'message' to read messages from (columns: msg); name one with --field"
    with pytest.raises(ArchiveError, match="would overwrite an input"):
        enrich_archive([str(good)], good, matcher)


def test_a_csv_duckdb_cannot_read_names_the_line_and_the_reason(store_db, tmp_path):
    """DuckDB's CSV error says where on its first line and why on a later one: both are
    kept in the one line (it used to be "CSV Error on Line: 3" and nothing else)."""
    bad = tmp_path / "logs.csv"
    bad.write_bytes(b'message\n"ok"\n\xff\xfe broken\n')
    result = CliRunner().invoke(cli, ["enrich", "--db", str(store_db), "--input", str(bad), "--output",
                                      str(tmp_path / "o.parquet"), "--workers", "1"])
    assert result.exit_code == 2
    assert result.stderr == (f"Error: {bad}: Invalid Input Error: CSV Error on Line: 3: Invalid unicode (byte sequence "
                             "mismatch) detected. This file is not utf-8 encoded.\n")
    assert not (tmp_path / "o.parquet").exists()


def test_a_file_name_that_is_not_utf8_is_one_line_not_an_internal_error(store_db, jsonl, tmp_path):
    import os

    odd = os.fsdecode(bytes(tmp_path) + b"/l\xff.jsonl")
    Path(odd).write_bytes(jsonl.read_bytes())
    shown = f"{tmp_path}/l\\xff.jsonl: the file name is not UTF-8, which DuckDB cannot open; rename the file"
    for args in (["enrich", "--input", odd, "--output", str(tmp_path / "o.parquet")],
                 ["enrich", "--input", str(tmp_path / "*.jsonl"), "--output", str(tmp_path / "o.parquet")],
                 ["query", odd]):
        db = ["--db", str(store_db)] if args[0] == "enrich" else []
        result = CliRunner().invoke(cli, [args[0], *db, *args[1:]])
        assert (result.exit_code, result.stderr) == (2, f"Error: {shown}\n"), result.output
    out = os.fsdecode(bytes(tmp_path) + b"/o\xff.parquet")
    result = CliRunner().invoke(cli, ["enrich", "--db", str(store_db), "--input", str(jsonl), "--output", out])
    expected = "Error: " + shown.replace("l\\xff.jsonl", "o\\xff.parquet") + "\n"
    assert (result.exit_code, result.stderr) == (2, expected)


def test_cli_archive_path_and_errors(store_db, jsonl, tmp_path):
    out = tmp_path / "cli.parquet"
    runner = CliRunner()
    result = runner.invoke(cli, ["enrich", "--db", str(store_db), "--input", str(jsonl), "--output", str(out),
                                 "--workers", "1", "--json"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stderr)
    assert (summary["rows"], summary["matched"], summary["written"]) == (1000, 100, 1000)
    assert summary["top"] == [{"id": SEED_ID, "record": f"vllm-project/vllm/{SEED_SLUG}", "rows": 100}]
    result = runner.invoke(cli, ["enrich", "--db", str(store_db), "--input", str(jsonl)])
    assert result.exit_code == 2
    assert result.stderr == "Error: --input and --output go together (an archive in, an enriched file out)\n"
    result = runner.invoke(cli, ["enrich", "--db", str(store_db), "--input", str(jsonl), "--output", str(tmp_path / "x.xlsx")])
    assert result.exit_code == 2
    assert result.stderr == f"Error: {tmp_path / 'x.xlsx'}: unknown output format (use .parquet, .jsonl or .csv)\n"


# -- asking the enriched archive -----------------------------------------------------------


@pytest.fixture
def enriched(matcher, jsonl, tmp_path) -> Path:
    out = tmp_path / "enriched.parquet"
    enrich_archive([str(jsonl)], out, matcher, workers=1)
    return out


def test_documented_last_week_sql(enriched):
    rows = duckdb.sql(LAST_WEEK_SQL.format(archive=f"'{enriched}'")).fetchall()
    # 50 of the 100 matched rows are 2 days old, the other 50 are 20 days old.
    assert len(rows) == 1
    rid, repo, slug, error_class, lines, first_seen, last_seen, hosts = rows[0]
    assert (rid, repo, slug, error_class, lines) == (SEED_ID, "vllm-project/vllm", SEED_SLUG, "ValueError", 50)
    assert hosts == ["web-0", "web-1", "web-2"]
    assert NOW - dt.timedelta(days=3) < first_seen <= last_seen < NOW


def test_pipelines_page_shows_the_tested_sql():
    page = (REPO / "docs" / "pipelines.md").read_text()
    assert LAST_WEEK_SQL.format(archive="'enriched.parquet'") in page


def test_known_errors_window_and_hosts(enriched):
    (week,) = known_errors([str(enriched)], since="7d")
    assert (week["id"], week["lines"], week["hosts"]) == (SEED_ID, 50, ["web-0", "web-1", "web-2"])
    (everything,) = known_errors([str(enriched)])
    assert everything["lines"] == 100
    (older,) = known_errors([str(enriched)], until="7d", by=["host", "log.msg"])
    assert older["lines"] == 50 and older["log_msgs"] == [f"ValueError: {SEED_MESSAGE}"]
    assert known_errors([str(enriched)], since="1h") == []


def test_query_of_an_archive_without_hosts_needs_no_by(matcher, tmp_path):
    """`--by host` was the default: an archive of logs without a host column could not be
    queried at all without naming some other column ("no column 'host' to group by")."""
    logs = tmp_path / "logs.jsonl"
    logs.write_text("".join(json.dumps({"ts": r["ts"], "message": r["message"]}) + "\n" for r in log_rows(20)))
    out = tmp_path / "enriched.parquet"
    enrich_archive([str(logs)], out, matcher, workers=1)
    result = CliRunner().invoke(cli, ["query", str(out), "--json"])
    assert result.exit_code == 0, result.output
    assert [(r["id"], r["lines"], "hosts" in r) for r in json.loads(result.stdout)] == [(SEED_ID, 2, False)]
    result = CliRunner().invoke(cli, ["query", str(out), "--by", "host"])
    assert (result.exit_code, result.stderr) == (2, f"Error: {out}: no column 'host' to group by (columns: ts, message, "
                                                    "errkb)\n")


def test_query_cli(enriched):
    runner = CliRunner()
    result = runner.invoke(cli, ["query", str(enriched), "--since", "7d", "--json"])
    assert result.exit_code == 0, result.output
    assert [(r["id"], r["lines"]) for r in json.loads(result.stdout)] == [(SEED_ID, 50)]
    result = runner.invoke(cli, ["query", str(enriched), "--since", "7d"])
    assert result.stdout.split()[:3] == ["50", SEED_ID, f"vllm-project/vllm/{SEED_SLUG}"]
    assert result.stdout.rstrip().endswith("[hosts: web-0, web-1, web-2]")
    result = runner.invoke(cli, ["query", str(enriched), "--since", "1h"])
    assert result.exit_code == 1 and result.stdout == ""
    result = runner.invoke(cli, ["query", str(enriched), "--sql", "SELECT count(*) AS n FROM enriched WHERE errkb IS NOT NULL"])
    assert (result.exit_code, result.stdout) == (0, "n\n100\n")
    result = runner.invoke(cli, ["query", str(enriched), "--since", "last tuesday"])
    assert result.exit_code == 2
    assert result.stderr == "Error: --since/--until 'last tuesday': not a duration (7d, 24h, 30m) or an ISO date-time\n"
    result = runner.invoke(cli, ["query", str(enriched), "--by", "region"])
    assert result.exit_code == 2
    assert result.stderr.startswith(f"Error: {enriched}: no column 'region' to group by (columns: ts, host, message, i, log, errkb")


def test_query_refuses_an_archive_that_was_not_enriched(jsonl):
    with pytest.raises(ArchiveError, match="no line has an errkb member: no line of it matched, or it was not enriched"):
        known_errors([str(jsonl)])  # JSON Lines out has errkb on matched lines only: it cannot tell which
    parquet = jsonl.with_suffix(".parquet")
    duckdb.sql(f"COPY (SELECT * FROM read_json('{jsonl}')) TO '{parquet}'")
    with pytest.raises(ArchiveError, match="no errkb column"):
        known_errors([str(parquet)])


def test_parse_since():
    now = dt.datetime(2026, 12, 2, 12, 0, tzinfo=dt.UTC)
    assert parse_since("7d", now) == now - dt.timedelta(days=7)
    assert parse_since("90m", now) == now - dt.timedelta(minutes=90)
    assert parse_since("2026-11-01", now) == dt.datetime(2026, 11, 1, tzinfo=dt.UTC)
    assert parse_since("2026-11-01T10:00:00Z", now) == dt.datetime(2026, 11, 1, 10, tzinfo=dt.UTC)


def test_without_pyarrow_the_archive_path_says_how_to_install_it(store_db, jsonl, tmp_path, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "pyarrow", None)  # what `import pyarrow` meets where it is not installed
    result = CliRunner().invoke(cli, ["enrich", "--db", str(store_db), "--input", str(jsonl), "--output", str(tmp_path / "o.parquet")])
    assert result.exit_code == 2
    assert result.stderr == "Error: the archive path needs pyarrow: pip install 'errkb[archive]'\n"


def test_query_reads_a_spark_output_folder(enriched, tmp_path):
    """`errkb spark-enrich` writes a folder: part files, _SUCCESS and .crc checksums
    (and key=value partition folders); `errkb query` reads it as one archive."""
    folder = tmp_path / "spark_out"
    (folder / "day=1").mkdir(parents=True)
    table = duckdb.sql(f"SELECT * FROM '{enriched}'").to_arrow_table()
    import pyarrow.parquet as pq

    pq.write_table(table.slice(0, 400), folder / "part-00000-abc-c000.snappy.parquet")
    pq.write_table(table.slice(400), folder / "day=1" / "part-00001-abc-c000.snappy.parquet")
    (folder / "_SUCCESS").write_bytes(b"")
    (folder / ".part-00000-abc-c000.snappy.parquet.crc").write_bytes(b"\x00crc")
    (folder / "_temporary").mkdir()
    (folder / "_temporary" / "part-00009.parquet").write_bytes(b"half written")
    runner = CliRunner()
    result = runner.invoke(cli, ["query", str(folder), "--since", "7d", "--json"])
    assert result.exit_code == 0, result.output
    assert [(r["id"], r["lines"]) for r in json.loads(result.stdout)] == [(SEED_ID, 50)]
    result = runner.invoke(cli, ["query", str(folder), "--sql", "SELECT count(*) AS n FROM enriched WHERE errkb IS NOT NULL"])
    assert (result.exit_code, result.stdout) == (0, "n\n100\n")
    empty = tmp_path / "empty_out"
    empty.mkdir()
    (empty / "_SUCCESS").write_bytes(b"")
    result = runner.invoke(cli, ["query", str(empty)])
    assert result.exit_code == 2
    assert result.stderr == f"Error: {empty}: a folder without .parquet, .jsonl/.ndjson/.json or .csv/.tsv files\n"


# -- the known-site tier on the archive path ---------------------------------------------

SITE_ROWS = [
    {"host": "a", "message": "ValueError: max_tokens must be at least 1, got 0."},  # a vLLM site, no record
    {"host": "b", "message": f"ValueError: {SEED_MESSAGE}"},  # a record (also raised at a known site)
    {"host": "c", "message": "RuntimeError: CUDA error: device-side assert triggered"},  # the CUDA table
    {"host": "d", "message": "numpy.linalg.LinAlgError: Singular matrix"},  # another library: nothing
    {"host": "e", "message": "GET /health 200"},
]


@pytest.fixture
def site_jsonl(tmp_path) -> Path:
    path = tmp_path / "sites.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for _ in range(40) for r in SITE_ROWS))
    return path


@pytest.mark.parametrize("workers", [1, 2])
def test_archive_rows_no_record_matches_get_their_known_site_and_curated_wins(store_db, site_jsonl, tmp_path, workers):
    """`errkb enrich --input/--output` tags a row only a known site matches with tier
    "site" and where it is raised (the struct's ``site`` field), never with fix fields; a
    record's row stays curated with a null ``site``; in worker processes too."""
    out = tmp_path / "sites.parquet"
    result = CliRunner().invoke(cli, ["enrich", "--db", str(store_db), "--input", str(site_jsonl), "--output", str(out),
                                      "--workers", str(workers), "--json"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stderr)
    assert (summary["rows"], summary["matched"], summary["sites"], summary["site_errors"]) == (200, 40, 80, 0)
    rows = read(out)
    assert [r["host"] for r in rows] == [r["host"] for _ in range(40) for r in SITE_ROWS]  # order kept
    vllm, curated, cuda, foreign, plain = (r["errkb"] for r in rows[:5])
    assert (vllm["tier"], vllm["repo"], vllm["errorClass"]) == ("site", "vllm-project/vllm", "VLLMValidationError")
    assert (vllm["site"]["library"], vllm["site"]["file"], vllm["site"]["function"]) == (
        "vllm", "vllm/sampling_params.py", "SamplingParams._verify_args")
    assert isinstance(vllm["site"]["line"], int) and vllm["site"]["releases"]
    assert vllm["url"].startswith("https://github.com/vllm-project/vllm/blob/")
    assert (vllm["id"], vllm["slug"], vllm["score"], vllm["solution"], vllm["severity"]) == (None,) * 5, \
        "a known site is never a fix"
    assert (curated["tier"], curated["id"], curated["site"]) == ("curated", SEED_ID, None)
    assert curated["solution"] == SEED_SOLUTION
    assert (cuda["tier"], cuda["site"]["trust"]) == ("site", "cuda") and "device-side assert" in cuda["site"]["meaning"]
    assert foreign is None and plain is None
    # errkb query counts the sites apart from the record, each by where it is raised
    found = {(r["id"], r["site"]): r["lines"] for r in known_errors([str(out)])}
    assert found == {(SEED_ID, None): 40, (None, f"vllm vllm/sampling_params.py:{vllm['site']['line']}"): 40,
                     (None, "CUDA: device-side assert triggered"): 40}


def test_archive_jsonl_output_is_the_filters_with_its_sites_and_no_sites_turns_it_off(store_db, site_jsonl, tmp_path):
    """JSON Lines out of the archive path is the streaming filter's output byte for byte,
    known sites included; --no-sites writes records only, on every output."""
    runner = CliRunner()
    out = tmp_path / "sites.out.jsonl"
    result = runner.invoke(cli, ["enrich", "--db", str(store_db), "--input", str(site_jsonl), "--output", str(out),
                                 "--workers", "2", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stderr)["sites"] == 80
    filtered = runner.invoke(cli, ["enrich", "--db", str(store_db), "--quiet"], input=site_jsonl.read_bytes())
    assert filtered.exit_code == 0, filtered.output
    assert out.read_bytes() == filtered.stdout_bytes
    tiers = [json.loads(line).get("errkb", {}).get("tier") for line in out.read_text().splitlines()[:5]]
    assert tiers == ["site", "curated", "site", None, None]
    for name in ("nosites.jsonl", "nosites.parquet"):
        path = tmp_path / name
        result = runner.invoke(cli, ["enrich", "--db", str(store_db), "--input", str(site_jsonl), "--output", str(path),
                                     "--workers", "1", "--no-sites", "--json"])
        assert result.exit_code == 0, result.output
        assert (json.loads(result.stderr)["matched"], json.loads(result.stderr)["sites"]) == (40, 0)
        rows = read(path)
        assert {r["errkb"]["tier"] for r in rows if r.get("errkb")} == {"curated"}


@pytest.mark.parametrize("name", ["broken.parquet", "broken.jsonl"])
def test_a_site_index_that_fails_costs_only_the_tier(matcher, site_jsonl, tmp_path, name):
    """A site index that cannot be used (here one a worker could not open: every lookup
    raises its reason) leaves the records' matches whole, on both outputs and in worker
    processes, and each batch's failed lookup is counted."""
    from errkb.match.sites import UnavailableSites

    out = tmp_path / name
    summary = enrich_archive([str(site_jsonl)], out, matcher, workers=2, batch_rows=64,
                             sites=UnavailableSites("the site cache went away"))
    assert (summary.matched, summary.sites, summary.site_errors) == (40, 0, summary.batches)
    assert summary.batches == 4
    assert "known-site lookups failed" in summary.summary()
    assert sum(1 for r in read(out) if r.get("errkb")) == 40


def test_a_site_index_that_cannot_be_prepared_or_reopened_turns_the_tier_off(tmp_path):
    """prepared() and reopen() (what a worker runs when it unpickles the index) turn an
    index that fails into one whose every lookup says why, instead of raising there."""
    from errkb.match.sites import SiteIndexError, UnavailableSites, prepared, reopen

    class Unpreparable:
        def prepare_batch(self):
            raise OSError("no space left on device")

    gone = prepared(Unpreparable())
    assert isinstance(gone, UnavailableSites) and "no space left" in gone.reason
    bad = tmp_path / "sites.jsonl.gz"
    bad.write_bytes(b"not gzip at all")
    broken = reopen(str(bad), str(tmp_path / "cache"))
    assert isinstance(broken, UnavailableSites)
    with pytest.raises(SiteIndexError, match="known-site index"):
        broken.match_lines(["anything"])


def test_query_of_a_jsonl_output_lists_its_sites_apart_and_exits_by_its_records(store_db, site_jsonl, tmp_path):
    """`errkb query` reads a JSON Lines output (the filter's flat site objects) as it reads
    Parquet: records by id, sites by where they are raised; exit 1 when only sites are there."""
    runner = CliRunner()
    out = tmp_path / "q.jsonl"
    assert runner.invoke(cli, ["enrich", "--db", str(store_db), "--input", str(site_jsonl), "--output", str(out),
                               "--workers", "1", "-q"]).exit_code == 0
    result = runner.invoke(cli, ["query", str(out), "--json"])
    assert result.exit_code == 0, result.output
    found = {(r["id"], r["site"]): r["lines"] for r in json.loads(result.stdout)}
    assert found[(SEED_ID, None)] == 40
    assert found[(None, "CUDA: device-side assert triggered")] == 40
    assert any(site and site.startswith("vllm vllm/sampling_params.py:") for _, site in found)
    text = runner.invoke(cli, ["query", str(out)])
    assert text.exit_code == 0 and "site  CUDA: device-side assert triggered" in text.stdout
    assert text.stderr.strip() == "1 known error(s), 2 known site(s)"
    only_sites = tmp_path / "only-sites.jsonl"
    only_sites.write_text("".join(line + "\n" for line in out.read_text().splitlines()
                                  if '"tier": "site"' in line))
    result = runner.invoke(cli, ["query", str(only_sites)])
    assert result.exit_code == 1, result.output  # known sites alone are not a fix
    assert "site  vllm vllm/sampling_params.py:" in result.stdout


def test_a_csv_output_holds_json_cells_and_queries_as_parquet_does(store_db, site_jsonl, tmp_path):
    """A CSV output's ``errkb`` cell is the struct's JSON object (what any CSV reader can
    parse; DuckDB's own struct text is read by nothing else), and `errkb query` reads it
    as it reads Parquet: the summary, and ``errkb.id`` in the user's SQL. It failed with
    DuckDB's "This type is not nested" before. A CSV written before (struct text) reads too."""
    runner = CliRunner()
    parquet, csv_out = tmp_path / "o.parquet", tmp_path / "o.csv"
    for out in (parquet, csv_out):
        result = runner.invoke(cli, ["enrich", "--db", str(store_db), "--input", str(site_jsonl), "--output", str(out),
                                     "--workers", "1", "-q"])
        assert result.exit_code == 0, result.output
    with csv_out.open(newline="") as f:
        cells = [row["errkb"] for row in csv.DictReader(f)]
    assert [json.loads(c) if c else None for c in cells] == [r["errkb"] for r in read(parquet)]
    old_csv = tmp_path / "before.csv"  # the struct as DuckDB prints it, as the CSV output was written before
    duckdb.sql(f"COPY (SELECT * FROM '{parquet}') TO '{old_csv}' (HEADER)")
    assert "{'id': " in old_csv.read_text()
    expected = known_errors([str(parquet)])
    assert len(expected) == 3
    assert known_errors([str(csv_out)]) == expected
    assert known_errors([str(old_csv)]) == expected
    sql = "SELECT errkb.tier, errkb.site.file, count(*) AS n FROM enriched GROUP BY ALL ORDER BY ALL"
    answers = {runner.invoke(cli, ["query", str(path), "--sql", sql]).output for path in (parquet, csv_out, old_csv)}
    assert len(answers) == 1 and "site\tvllm/sampling_params.py\t40" in answers.pop()


def test_the_sql_type_query_casts_to_is_the_columns_arrow_type():
    import pyarrow as pa

    from errkb.enrich.value import errkb_sql_type, errkb_struct_type

    arrow = duckdb.from_arrow(pa.table({"e": pa.array([], errkb_struct_type())})).types[0]
    assert duckdb.sql(f"SELECT NULL::{errkb_sql_type()} AS e").types[0] == arrow


def test_an_input_errkb_column_in_any_case_is_replaced(store_db, tmp_path):
    """An input column named errkb in another case (DuckDB's names ignore case, so it is
    the output's column to it) is replaced as a lowercase one is: the CSV output failed on
    it ("Malformed JSON ... when casting from source column Errkb")."""
    src = tmp_path / "in.csv"
    src.write_text('host,message,Errkb\na,"ValueError: max_tokens must be at least 1, got 0.",legacy\n'
                   'b,"ValueError: ' + SEED_MESSAGE + '",legacy\n')
    for name in ("o.csv", "o.parquet"):
        out = tmp_path / name
        result = CliRunner().invoke(cli, ["enrich", "--db", str(store_db), "--input", str(src), "--output", str(out),
                                          "--workers", "1", "-q"])
        assert result.exit_code == 0, result.output
        rows = read(out)
        assert list(rows[0]) == ["host", "message", "errkb"]
        assert [r["errkb"]["tier"] if isinstance(r["errkb"], dict) else json.loads(r["errkb"])["tier"]
                for r in rows] == ["site", "curated"]


def test_query_reads_errkbs_column_beside_a_logs_own_errkb_key(store_db, tmp_path):
    """Logs holding a key "Errkb" keep it under its own name (nothing is lost), so DuckDB
    reads errkb's own column back as ``errkb_1``: query said "no errkb column" on every
    output. errkb's column (the last) is ``errkb`` to query, the input's "Errkb (input)"."""
    src = tmp_path / "in.jsonl"
    src.write_text(json.dumps({"host": "a", "message": "ValueError: max_tokens must be at least 1, got 0.",
                               "Errkb": "theirs"}) + "\n")
    runner = CliRunner()
    for name in ("o.parquet", "o.csv", "o.out.jsonl"):
        out = tmp_path / name
        assert runner.invoke(cli, ["enrich", "--db", str(store_db), "--input", str(src), "--output", str(out),
                                   "--workers", "1", "-q"]).exit_code == 0
        (row,) = known_errors([str(out)])
        assert row["site"].startswith("vllm vllm/sampling_params.py:") and row["hosts"] == ["a"], name
        result = runner.invoke(cli, ["query", str(out), "--sql", 'SELECT "Errkb (input)", errkb.tier FROM enriched'])
        assert (result.exit_code, result.output) == (0, "Errkb (input)\ttier\ntheirs\tsite\n"), name
