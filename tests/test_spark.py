"""errkb.enrich.spark on a real local SparkSession (local[2]): one session for the whole module.

The reference every Spark result is held against is `errkb enrich` itself, run as a
separate process on the same input: the archive path (Parquet out) for row-for-row
column equality, the line filter for text with invalid UTF-8.
"""

from __future__ import annotations

import gzip
import json
import os
import pickle
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.spark

pyspark = pytest.importorskip("pyspark", reason="needs pyspark: pip install 'errkb[spark]'")
pa = pytest.importorskip("pyarrow", reason="needs pyarrow: pip install 'errkb[spark]'")
pq = pytest.importorskip("pyarrow.parquet")
if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
    pytest.skip("needs Java 17 for Spark", allow_module_level=True)

from click.testing import CliRunner  # noqa: E402

from errkb.cli import cli  # noqa: E402
from errkb.enrich.spark import (  # noqa: E402
    SparkEnrichError,
    build_index,
    enrich,
    enrich_batch,
    enrich_with_stats,
    partition_function,
)
from errkb.resources import data_dir  # noqa: E402
from errkb.store.db import Store  # noqa: E402
from tests.support import REPO, real_records, variant  # noqa: E402

ERRKB_FIELDS = ("id", "slug", "repo", "errorClass", "severity", "score", "solution", "url", "tier")
FIXTURE_LOGS = sorted((REPO / "tests" / "fixtures" / "real_logs").glob("*.txt"))


@pytest.fixture(scope="module")
def spark(tmp_path_factory):
    from pyspark.sql import SparkSession

    if SparkSession.getActiveSession() is not None:
        pytest.fail("another SparkSession is active; this module owns the only one")
    # Workers run PYSPARK_PYTHON (default: python3 on PATH); make it this interpreter.
    monkeypatch = pytest.MonkeyPatch()
    monkeypatch.setenv("PYSPARK_PYTHON", sys.executable)
    session = (
        SparkSession.builder.master("local[2]")
        .appName("errkb-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.local.dir", str(tmp_path_factory.mktemp("spark-local")))
        # Small Arrow batches: many batches per partition, so "once per worker, not
        # per batch" is tested, not assumed.
        .config("spark.sql.execution.arrow.maxRecordsPerBatch", "16")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()
    monkeypatch.undo()


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> tuple[Path, list[dict]]:
    """A store of the bundled records plus variants of them (distinct ids and messages)."""
    folder = tmp_path_factory.mktemp("spark-dataset")
    real = real_records(data_dir())
    records = real + [variant(real[i % len(real)], i) for i in range(12)]
    src = folder / "records.jsonl"
    src.write_text("".join(json.dumps({"record": r, "datasetVersion": "2026-12-02T00:00:00.000Z"}) + "\n" for r in records))
    db = folder / "store.duckdb"
    with Store.open(db) as store:
        report = store.ingest([src])
    assert report.rejected == 0, [r.reasons for r in report.rejects]
    return db, records


def log_lines(records: list[dict]) -> list[str]:
    """Real log lines, and each record's message the ways logs carry it."""
    lines: list[str] = []
    for f in FIXTURE_LOGS:
        lines.extend(f.read_text(encoding="utf-8", errors="replace").splitlines())
    for i, r in enumerate(records):
        msg = r["errorMessage"]
        lines.append(f"{r['errorClass']}: {msg}")
        lines.append(f"2026-12-01 10:{i % 60:02d}:00,123 ERROR [engine.py:{i}] {msg}")
        lines.append(f"\x1b[31mERROR\x1b[0m (Worker pid={1000 + i}) {msg}")
        lines.append(f"INFO step {i} finished in 0.{i}s")
    lines += ["", "   ", "ValueError: something no record describes", "né — ünïcödé ✓ 日本語"]
    return lines


def run_errkb(*args: str, stdin: bytes | None = None, db: Path | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    if db is not None:
        env["ERRKB_DB"] = str(db)
    return subprocess.run([sys.executable, "-m", "errkb", *args], input=stdin, capture_output=True, env=env, timeout=300, check=False)


def by_n(rows) -> dict[int, dict | None]:
    return {r["n"]: (r["errkb"].asDict(recursive=True) if r["errkb"] is not None else None) for r in rows}


# -- equality with `errkb enrich` ------------------------------------------------------------


def test_spark_equals_errkb_enrich_row_for_row(spark, dataset, tmp_path):
    db, records = dataset
    lines = log_lines(records)
    rows = [{"n": i, "host": f"gpu-{i % 7}", "message": line} for i, line in enumerate(lines)]
    rows += [{"n": len(lines), "host": "gpu-x", "message": None}, {"n": len(lines) + 1, "host": "gpu-y"}]
    archive = tmp_path / "logs.jsonl"
    archive.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")

    reference = tmp_path / "reference.parquet"
    done = run_errkb("enrich", "--input", str(archive), "--output", str(reference), "--workers", "1", "-q", db=db)
    assert done.returncode == 0, done.stderr.decode()
    expected = {r["n"]: r["errkb"] for r in pq.read_table(reference).to_pylist()}

    # Many partitions, most of them empty (24 partitions for the rows of 1 file split
    # in two), so partition boundaries and empty partitions are crossed.
    df = spark.read.json(str(archive)).repartition(24)
    got_rows = enrich(df, db=db, sites=True).collect()  # as errkb enrich's default
    got = by_n(got_rows)

    assert len(got_rows) == len(rows)
    assert sorted(got) == sorted(expected)
    matched = [n for n, v in expected.items() if v is not None and v["tier"] != "site"]
    assert len(matched) >= 3 * len(records)  # the comparison is about real matches
    # and about known sites (the real logs' errors no record describes): tier site, where it is raised
    sited = [n for n, v in expected.items() if v is not None and v["tier"] == "site"]
    assert sited and all(expected[n]["site"]["pattern"] and expected[n]["id"] is None for n in sited)
    for n in expected:
        assert got[n] == expected[n], f"row {n}: {lines[n] if n < len(lines) else None!r}"
    # Input columns pass through.
    assert {r["n"]: (r["host"], r["message"]) for r in got_rows} == {r["n"]: (r["host"], r.get("message")) for r in rows}
    assert got[len(lines)] is None and got[len(lines) + 1] is None  # null and missing message


def test_spark_enrich_cli_output_equals_errkb_enrich_output(spark, dataset, tmp_path):
    db, records = dataset
    lines = log_lines(records)
    rows = [{"n": i, "message": line} for i, line in enumerate(lines)]
    archive = tmp_path / "logs.jsonl"
    archive.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    reference = tmp_path / "reference.parquet"
    done = run_errkb("enrich", "--input", str(archive), "--output", str(reference), "--workers", "1", "-q", db=db)
    assert done.returncode == 0, done.stderr.decode()

    out = tmp_path / "spark-out"
    result = CliRunner().invoke(
        cli, ["spark-enrich", "--input", str(archive), "--output", str(out), "--master", "local[2]", "--db", str(db), "--json"]
    )
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output)
    written = pq.read_table(out).to_pylist()
    expected = {r["n"]: r["errkb"] for r in pq.read_table(reference).to_pylist()}
    assert {r["n"]: r["errkb"] for r in written} == expected
    assert summary["rows"] == len(rows)
    assert summary["matched"] == sum(v is not None and v["tier"] != "site" for v in expected.values()) > 0
    assert summary["sites"] == sum(v is not None and v["tier"] == "site" for v in expected.values()) > 0
    assert summary["format"] == "json"
    # The written struct has the archive path's type, so `errkb query` reads it too:
    # Spark's output folder itself (part files beside _SUCCESS and .crc files).
    assert pq.read_schema(reference).field("errkb").type == pq.ParquetDataset(out).schema.field("errkb").type
    assert (out / "_SUCCESS").exists()
    query = CliRunner().invoke(cli, ["query", str(out), "--sql",
                                     "SELECT count(*) AS n FROM enriched WHERE errkb IS NOT NULL AND errkb.tier <> 'site'"])
    assert (query.exit_code, query.stdout) == (0, f"n\n{summary['matched']}\n"), query.output


def test_invalid_utf8_text_rows_match_like_the_filter_and_pass_through_losslessly(spark, dataset, tmp_path):
    db, records = dataset
    seed_message = records[0]["errorMessage"]
    raw_lines = [
        b"plain line",
        b"bad \xff\xfe bytes before " + seed_message.encode(),
        f"{records[0]['errorClass']}: {seed_message}".encode() + b" \xc3(",
        b"\x80\x81\x82",
        b"",
        "ünïcödé fine".encode(),
        f"{records[1]['errorClass']}: {records[1]['errorMessage']}".encode(),
        b"\xff\xfe ValueError: max_tokens must be at least 1, got 0.",  # only a known site, bad bytes before it
    ]
    text = tmp_path / "raw.log"
    text.write_bytes(b"\n".join(raw_lines) + b"\n")

    # records only on both sides (--no-sites, sites=False): the filter's JSON objects are compared
    # with the struct's record fields (a site's object and struct differ in shape)
    done = run_errkb("enrich", "-q", "--no-sites", str(text), db=db)
    assert done.returncode == 0, done.stderr.decode()
    filtered = [json.loads(x) for x in done.stdout.decode().splitlines()]
    assert len(filtered) == len(raw_lines)
    # Spark's errkb struct carries the record tiers (curated, variant) as the filter's objects do
    expected = [d.get("errkb") for d in filtered]
    assert all(e is None or e["tier"] in ("curated", "variant") for e in expected)
    assert sum(e is not None for e in expected) >= 2  # invalid lines matched too

    # coalesce(1) keeps the file's order, so row i is line i.
    df = spark.read.text(str(text)).coalesce(1)
    out = tmp_path / "out.parquet"
    enrich(df, column="value", db=db, sites=False).write.parquet(str(out))
    table = pq.read_table(out)
    got = table.column("errkb").to_pylist()
    assert [g if g is None else {k: g[k] for k in ERRKB_FIELDS} for g in got] == expected
    assert all(g is None or g["site"] is None for g in got)
    # with the tier on, the row holding invalid bytes and a vLLM message gets its known site
    sited = enrich(df, column="value", db=db, sites=True).collect()[-1]["errkb"]
    assert (sited["tier"], sited["site"]["file"], sited["id"]) == ("site", "vllm/sampling_params.py", None)
    # The invalid bytes are still there, byte for byte, in the passed-through column.
    assert table.column("value").cast(pa.binary()).to_pylist() == raw_lines


# -- the index: built once per dataset version, shipped as a file, loaded once per worker ----


def test_index_is_loaded_once_per_worker_not_per_batch(spark, tmp_path, seed_record):
    # A dataset of its own, so no worker has its index cached from another test.
    records = [variant(seed_record, 1000 + i) for i in range(5)]
    src = tmp_path / "r.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in records))
    db = tmp_path / "own.duckdb"
    with Store.open(db) as store:
        store.ingest([src])
    rows = [(i, records[i % 5]["errorMessage"] if i % 3 == 0 else f"line {i}") for i in range(3000)]
    df = spark.createDataFrame(rows, "n long, message string").repartition(16)

    out, stats = enrich_with_stats(df, db=db)
    result = out.collect()
    assert len(result) == 3000
    assert sum(r["errkb"] is not None for r in result) == 1000
    assert stats.rows == 3000 and stats.matched == 1000
    assert stats.batches >= 3000 // 16  # maxRecordsPerBatch=16
    workers = stats.loads_by_worker
    assert 1 <= stats.index_loads <= spark.sparkContext.defaultParallelism  # 2 Python workers at most
    assert set(workers.values()) == {1}  # each worker process loaded it exactly once
    assert set(stats.batches_by_worker) <= set(workers)

    # A second job on the same dataset version finds the index loaded already.
    again, stats2 = enrich_with_stats(df, db=db)
    again.count()
    assert stats2.rows == 3000 and stats2.index_loads == 0


def test_a_new_dataset_version_ships_a_new_index(spark, tmp_path, seed_record):
    first = [variant(seed_record, 2000)]
    second = first + [variant(seed_record, 2001)]
    db = tmp_path / "versions.duckdb"
    src = tmp_path / "a.jsonl"
    src.write_text(json.dumps(first[0]) + "\n")
    with Store.open(db) as store:
        store.ingest([src])
    index1 = build_index(db)
    df = spark.createDataFrame([(second[1]["errorMessage"],)], "message string")
    assert enrich(df, db=db, sites=False).collect()[0]["errkb"] is None  # (with sites: the seed's known site)

    src.write_text("".join(json.dumps(r) + "\n" for r in second))
    with Store.open(db) as store:
        store.ingest([src])
    index2 = build_index(db)
    assert index2.sha256 != index1.sha256 and index2.name != index1.name
    assert build_index(db) == index2  # compiled once per dataset version
    out, stats = enrich_with_stats(df, db=db)
    assert out.collect()[0]["errkb"]["id"] == second[1]["id"]
    assert stats.index_loads == 1


def test_the_task_closure_carries_the_index_name_not_the_index(dataset):
    from pyspark import cloudpickle

    db, _ = dataset
    index = build_index(db)
    payload = cloudpickle.dumps(partition_function(index, "files", None))
    assert index.name.encode() in payload
    assert len(payload) < 2048 < index.path.stat().st_size
    assert b"messagePattern" not in payload and b"ERRKB-MATCHER" not in payload
    assert isinstance(pickle.loads(payload), type(partition_function(index, "files", None)))


def test_shared_path_shipping(spark, dataset, tmp_path):
    db, records = dataset
    index = build_index(db, folder=tmp_path)
    df = spark.createDataFrame([(records[2]["errorMessage"],), ("nothing",)], "message string")
    got = [r["errkb"] for r in enrich(df, index=index.path, ship="shared").collect()]
    assert got[0]["id"] == records[2]["id"] and got[1] is None


def test_empty_dataframe_loads_no_index(spark, dataset):
    db, _ = dataset
    df = spark.createDataFrame([], "message string").repartition(4)
    out, stats = enrich_with_stats(df, db=db)
    assert out.collect() == []
    assert stats.index_loads == 0 and stats.batches == 0
    assert out.columns == ["message", "errkb"]


def test_site_url_makes_fix_page_urls_absolute(spark, dataset):
    db, records = dataset
    r = records[0]
    df = spark.createDataFrame([(f"{r['errorClass']}: {r['errorMessage']}",)], "message string")
    got = enrich(df, db=db, site_url="https://errkb.example/kb/").collect()[0]["errkb"]
    assert got["url"] == f"https://errkb.example/kb/errors/{r['repo']}/{r['slug']}.html"


def test_message_in_a_struct_and_an_existing_errkb_column_is_replaced(spark, dataset):
    db, records = dataset
    r = records[3]
    df = spark.createDataFrame(
        [((r["errorMessage"], "w1"), "stale")], "log struct<message: string, worker: string>, errkb string"
    )
    out = enrich(df, column="log.message", db=db)
    assert out.columns == ["log", "errkb"]
    assert out.collect()[0]["errkb"]["id"] == r["id"]


def test_enrich_batch_without_spark(dataset):
    """The executor's core on a plain Arrow batch: nulls, bytes, and a match."""
    from errkb.match.matcher import Matcher

    db, records = dataset
    matcher = Matcher.load(build_index(db).path)
    r = records[0]
    batch = pa.RecordBatch.from_pydict(
        {"k": [1, 2, 3], "__errkb_message": pa.array([None, b"\xff" + r["errorMessage"].encode(), b"x"], pa.binary())}
    )
    out = enrich_batch(batch, matcher, None)
    assert out.schema.names == ["k", "errkb"]
    values = out.column("errkb").to_pylist()
    assert values[0] is None and values[2] is None and values[1]["id"] == r["id"]


# -- errors ------------------------------------------------------------------------------


def test_errors_name_the_file_and_the_reason(spark, dataset, tmp_path):
    db, _ = dataset
    runner = CliRunner()
    missing = tmp_path / "nope.jsonl"
    result = runner.invoke(cli, ["spark-enrich", "--input", str(missing), "--output", str(tmp_path / "o"), "--db", str(db)])
    assert result.exit_code == 2
    assert result.output.strip() == f"Error: {missing}: no such file or folder"

    logs = tmp_path / "logs.jsonl"
    logs.write_text('{"msg": "a"}\n{"msg": "b"}\n')
    result = runner.invoke(cli, ["spark-enrich", "--input", str(logs), "--output", str(tmp_path / "o"), "--db", str(db)])
    assert result.exit_code == 2
    assert result.output.strip() == f"Error: {logs}: no column 'message' to match (columns: msg)"

    odd = tmp_path / "logs.data"
    odd.write_text("x\n")
    result = runner.invoke(cli, ["spark-enrich", "--input", str(odd), "--output", str(tmp_path / "o"), "--db", str(db)])
    assert result.exit_code == 2
    assert result.output.strip() == (
        f"Error: {odd}: cannot tell the input format from the name; pass --format parquet|json|text"
    )

    existing = tmp_path / "existing"
    existing.mkdir()
    result = runner.invoke(cli, ["spark-enrich", "--input", str(logs), "--output", str(existing), "--db", str(db)])
    assert result.exit_code == 2
    assert result.output.strip() == f"Error: {existing}: already exists (remove it, or pass --overwrite)"


def test_corrupt_json_lines_are_kept_and_counted(spark, dataset, tmp_path):
    db, records = dataset
    r = records[0]
    logs = tmp_path / "mixed.jsonl.gz"
    with gzip.open(logs, "wt", encoding="utf-8") as f:
        f.write(json.dumps({"message": f"{r['errorClass']}: {r['errorMessage']}"}) + "\n")
        f.write("{not json at all\n")
        f.write(json.dumps({"message": "fine"}) + "\n")
    out = tmp_path / "out"
    result = CliRunner().invoke(cli, ["spark-enrich", "--input", str(logs), "--output", str(out), "--db", str(db), "--json"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output)
    assert (summary["rows"], summary["matched"], summary["corrupt_rows"]) == (3, 1, 1)
    table = pq.read_table(out).to_pylist()
    assert sorted(x["_corrupt_record"] or "" for x in table) == ["", "", "{not json at all"]


def test_missing_column_in_the_api_is_a_clear_error(spark, dataset):
    db, _ = dataset
    df = spark.createDataFrame([("a",)], "text string")
    with pytest.raises(SparkEnrichError, match=r"^no column 'message' to match \(columns: text\)$"):
        enrich(df, db=db)


def test_an_index_whose_hyperscan_database_cannot_load_here_still_matches_the_same(dataset, monkeypatch):
    """A Hyperscan database loads only on CPUs like the compiling one. No foreign CPU is
    at hand, so its refusal is what is simulated (``hyperscan.loadb`` raising as it
    does there); the rebuilt literal prefilter must find the same matches."""
    hyperscan = pytest.importorskip("hyperscan", reason="the fallback is for Hyperscan databases")
    from errkb.enrich.spark import load_matcher
    from errkb.match.matcher import Matcher, MatcherError

    db, records = dataset
    index = build_index(db)
    native = Matcher.load(index.path)
    if native.prefilter != "hyperscan":
        pytest.skip("the index holds no Hyperscan database on this machine")
    lines = [f"{r['errorClass']}: {r['errorMessage']}" for r in records] + ["nothing", ""]

    def foreign(*args, **kwargs):
        raise hyperscan.error("database was compiled for a different platform")

    monkeypatch.setattr(hyperscan, "loadb", foreign)
    with pytest.raises(MatcherError, match="cannot load the prefilter database: database was compiled"):
        Matcher.load(index.path)
    rebuilt, fell_back = load_matcher(index.path)
    assert fell_back and rebuilt.prefilter != "hyperscan"
    batch = pa.RecordBatch.from_pydict({"__errkb_message": lines})
    expected = enrich_batch(batch, native, None).column("errkb").to_pylist()
    assert enrich_batch(batch, rebuilt, None).column("errkb").to_pylist() == expected
    assert sum(v is not None for v in expected) == len(records)


def test_a_file_that_is_not_an_index_is_refused(spark, tmp_path):
    bogus = tmp_path / "index.idx"
    bogus.write_text("hello")
    df = spark.createDataFrame([("x",)], "message string")
    with pytest.raises(SparkEnrichError, match=r"index\.idx: not an errkb matcher index$"):
        enrich(df, index=bogus)


def test_a_broken_parquet_file_is_named_in_one_line(spark, dataset, tmp_path):
    db, _ = dataset
    broken = tmp_path / "logs.parquet"
    broken.write_bytes(b"PAR1 this is not parquet")
    result = CliRunner().invoke(cli, ["spark-enrich", "--input", str(broken), "--output", str(tmp_path / "o"), "--db", str(db)])
    assert result.exit_code == 2
    last = result.output.strip().splitlines()[-1]
    assert last.startswith(f"Error: {broken}: cannot read as parquet: ")
    assert not (tmp_path / "o").exists()
