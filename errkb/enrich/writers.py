"""Writing the enriched batches: DuckDB's COPY under the columns' own names, pyarrow
where DuckDB cannot name them."""

from __future__ import annotations

from pathlib import Path

from errkb.enrich.duck import sql_ident, sql_string
from errkb.enrich.shape import fold

OUTPUT_FORMATS = {
    ".parquet": "(FORMAT parquet, COMPRESSION zstd)",
    ".jsonl": "(FORMAT json)", ".ndjson": "(FORMAT json)", ".json": "(FORMAT json)",
    ".csv": "(FORMAT csv, HEADER true)",
}


def write(con, batches, tmp: str, out_ext: str, names: list[str] | None, json_cols: list[bool]) -> None:
    """Write the enriched batches to ``tmp``: DuckDB's COPY, under the columns' own
    names. DuckDB's names are case-insensitive (it writes ``host_1`` next to ``Host``),
    so when two names differ only in case pyarrow writes the Parquet file and the CSV
    header is written here."""
    con.register("enriched_batches", batches)
    options = OUTPUT_FORMATS[out_ext]
    if names is None and options == "(FORMAT json)":
        _write_jsonl(con, tmp)
        return
    # A CSV cell holds the errkb struct as its JSON object (DuckDB's own struct text is
    # read by nothing else); `errkb query` casts it back (errkb.enrich.query).
    errkb = "CAST(errkb AS JSON)" if options.startswith("(FORMAT csv") else "errkb"
    if names is None:
        con.execute(f"COPY (SELECT * REPLACE ({errkb} AS errkb) FROM enriched_batches) TO {sql_string(tmp)} {options}")
        return
    all_names = [*names, "errkb"]
    values = [f"CAST(c{i} AS JSON)" if j else f"c{i}" for i, j in enumerate(json_cols)] + [errkb]
    if "" not in all_names and len({fold(n) for n in all_names}) == len(all_names):
        select = ", ".join(f"{v} AS {sql_ident(n)}" for v, n in zip(values, all_names))
        con.execute(f"COPY (SELECT {select} FROM enriched_batches) TO {sql_string(tmp)} {options}")
        return
    # DuckDB cannot name these columns (two names differing only in case, an empty name)
    if options.startswith("(FORMAT parquet"):
        _write_parquet(batches, tmp, all_names, json_cols)
        return
    # CSV: DuckDB writes the rows, the header is written here
    import csv
    import io
    import shutil

    body = tmp + ".body"
    try:
        con.execute(f"COPY (SELECT {', '.join(values)} FROM enriched_batches) TO {sql_string(body)} (FORMAT csv, HEADER false)")
        header = io.StringIO()
        csv.writer(header, lineterminator="\n").writerow(all_names)
        with open(tmp, "wb") as out, open(body, "rb") as rows:
            out.write(header.getvalue().encode("utf-8"))
            shutil.copyfileobj(rows, out, 1 << 20)
    finally:
        Path(body).unlink(missing_ok=True)


def _write_parquet(batches, tmp: str, names: list[str], json_cols: list[bool]) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    fields = []
    for i, (name, f) in enumerate(zip(names, batches.schema)):
        is_json = i < len(json_cols) and json_cols[i]
        fields.append(pa.field(name, pa.json_() if is_json else f.type))
    schema = pa.schema(fields)
    with pq.ParquetWriter(tmp, schema, compression="zstd") as writer:
        for batch in batches:
            arrays = [col.cast(pa.string()).cast(pa.json_()) if i < len(json_cols) and json_cols[i] else col
                      for i, col in enumerate(batch.columns)]
            writer.write_batch(pa.record_batch(arrays, schema=schema))


# A row's JSON (DuckDB's to_json, what COPY ... (FORMAT json) writes) less its null errkb
# member: the streaming filter and JSON Lines in write no errkb key on an unmatched
# line, and every format's JSON Lines out must agree. errkb is the last column, so its
# member ends the object.
_UNMATCHED_JSON = (
    "SELECT CASE WHEN __errkb_row.errkb IS NULL THEN regexp_replace(CAST(to_json(__errkb_row) AS VARCHAR), ',?\"errkb\":null}$', '}') "
    "ELSE CAST(to_json(__errkb_row) AS VARCHAR) END AS j FROM enriched_batches __errkb_row"
)


def _write_jsonl(con, tmp: str) -> None:
    """JSON Lines of the enriched batches (Parquet/CSV in), batch by batch."""
    rel = con.sql(_UNMATCHED_JSON)
    to_reader = getattr(rel, "to_arrow_reader", None) or rel.fetch_record_batch  # duckdb < 1.4
    with open(tmp, "wb") as out:
        for batch in to_reader(1 << 16):
            lines = batch.column(0).to_pylist()
            if lines:
                out.write(("\n".join(lines) + "\n").encode("utf-8"))
