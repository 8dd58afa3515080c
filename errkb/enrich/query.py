"""``errkb query``: which known errors happened, how often and where, in archives that
``errkb enrich --input ... --output ...`` (or ``errkb spark-enrich``) wrote.

DuckDB is the file engine over the user's own archives (errkb.enrich.duck);
paths and column names reach SQL only quoted.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Sequence

from errkb.enrich.duck import ArchiveError, column_expr, connect, duck_error, input_format, source_sql, sql_ident
from errkb.enrich.value import errkb_sql_type

TIME_COLUMNS = ("timestamp", "@timestamp", "ts", "time", "date", "datetime")

# docs/pipelines.md's "which known errors happened last week, how often, on which hosts",
# with {archive} standing for the enriched file(s). tests/test_enrich_archive.py runs it.
LAST_WEEK_SQL = """\
SELECT errkb.id, errkb.repo, errkb.slug, errkb.errorClass,
       count(*)                              AS lines,
       min(CAST(ts AS TIMESTAMPTZ))          AS first_seen,
       max(CAST(ts AS TIMESTAMPTZ))          AS last_seen,
       list(DISTINCT host ORDER BY host)     AS hosts
FROM {archive}
WHERE errkb.id IS NOT NULL
  AND CAST(ts AS TIMESTAMPTZ) >= now() - INTERVAL 7 DAY
GROUP BY ALL
ORDER BY lines DESC"""

_DURATION = re.compile(r"^(\d+)\s*([smhdw])$")


def parse_since(value: str, now: dt.datetime | None = None) -> dt.datetime:
    """``7d`` / ``24h`` / ``30m`` / ``2w`` ago, or an ISO date or date-time."""
    now = now or dt.datetime.now(dt.UTC)
    m = _DURATION.match(value.strip())
    if m:
        n, unit = int(m.group(1)), m.group(2)
        seconds = n * {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}[unit]
        return now - dt.timedelta(seconds=seconds)
    try:
        t = dt.datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError as e:
        raise ArchiveError(f"--since/--until {value!r}: not a duration (7d, 24h, 30m) or an ISO date-time") from e
    return t if t.tzinfo else t.replace(tzinfo=dt.UTC)


def _archive_relation(con, paths: Sequence[str]) -> tuple[str, dict[str, str], set[str]]:
    """(SQL, columns, errkb's fields) of the archive(s) as a relation whose ``errkb``
    column is errkb's struct in every format (one schema probe; DuckDB errors propagate):

    - a CSV archive holds it as text, a JSON object per cell (DuckDB's struct literal in
      archives written before): cast back to the struct, so every query reads ``errkb.id``;
    - logs holding a key ``Errkb`` (kept under its own name) give an archive whose errkb
      column DuckDB reads as ``errkb_1`` (its names ignore case; errkb writes its column
      last): that one is ``errkb`` here, and the input's is renamed ``Errkb (input)``."""
    source = source_sql([str(p) for p in paths])
    rel = con.sql(f"SELECT * FROM {source} LIMIT 0")
    types = dict(zip(rel.columns, rel.types))
    ours = [c for c in rel.columns if c.lower() == "errkb" or re.fullmatch(r"errkb_\d+", c, re.IGNORECASE)]
    if not ours:
        return source, {c: str(t) for c, t in types.items()}, set()
    col = ours[-1]
    inputs = [c for c in ours[:-1] if c.lower() == "errkb"]
    value, duck_type = sql_ident(col), types[col]
    if str(duck_type).upper() == "VARCHAR":
        struct = errkb_sql_type()
        value = f"COALESCE(TRY_CAST(TRY_CAST({value} AS JSON) AS {struct}), TRY_CAST({value} AS {struct}))"
        duck_type = con.sql(f"SELECT NULL::{struct} AS e").types[0]
    columns = {(f"{c} (input)" if c in inputs else c): str(t) for c, t in types.items() if c != col}
    columns["errkb"] = str(duck_type)
    fields = _struct_fields(duck_type)
    if col == "errkb" and value == sql_ident(col):
        return source, columns, fields
    renamed = ", ".join(f"{sql_ident(c)} AS {sql_ident(c + ' (input)')}" for c in inputs)
    excluded = ", ".join(sql_ident(c) for c in [*inputs, col])
    select = f"* EXCLUDE ({excluded}), " + (renamed + ", " if renamed else "") + f"{value} AS errkb"
    return f"(SELECT {select} FROM {source})", columns, fields


def _time_expr(name: str, columns: dict[str, str]) -> str:
    ctype = columns.get(name, "").upper()
    col = sql_ident(name)
    if ctype in ("DOUBLE", "FLOAT", "BIGINT", "INTEGER", "HUGEINT", "UBIGINT", "DECIMAL") or ctype.startswith("DECIMAL"):
        return f"to_timestamp(CAST({col} AS DOUBLE))"  # epoch seconds (Fluent Bit's "date")
    if ctype == "JSON":
        return f"TRY_CAST(json_extract_string({col}, '$') AS TIMESTAMPTZ)"
    return f"TRY_CAST({col} AS TIMESTAMPTZ)"


def known_errors(
    paths: Sequence[str],
    since: str | None = None,
    until: str | None = None,
    time_column: str | None = None,
    by: Sequence[str] | None = None,
) -> list[dict]:
    """Known errors in an enriched archive: per record (and per known site: ``site``
    "library file:line", no id; None on a record's row), how many lines, first and last
    seen, and the distinct values of each ``by`` column (hosts, services, ...). ``by``
    None: the ``host`` column where the archive has one (a column named is required)."""
    import duckdb

    con = connect()
    try:
        source, columns, fields = _archive_relation(con, paths)
    except duckdb.Error as e:
        raise ArchiveError(f"{', '.join(map(str, paths))}: {duck_error(e)}") from e
    if "errkb" not in columns:
        if input_format([str(p) for p in paths]) == "json":  # JSON Lines out writes errkb on matched lines only
            raise ArchiveError(f"{paths[0]}: no line has an errkb member: no line of it matched, or it was not "
                               "enriched (errkb enrich --input ... --output ...)")
        raise ArchiveError(f"{paths[0]}: no errkb column (enrich it first: errkb enrich --input ... --output ...)")
    if time_column is None:
        time_column = next((c for c in TIME_COLUMNS if c in columns), None)
        if time_column is None and (since or until):
            raise ArchiveError(f"{paths[0]}: no time column found (columns: {', '.join(columns)}); name it with --time-column")
    elif time_column not in columns:
        raise ArchiveError(f"{paths[0]}: no column {time_column!r} (columns: {', '.join(columns)})")
    def field(name: str) -> str:  # a JSON Lines archive's struct holds only the keys its lines have
        return f"errkb.{sql_ident(name)}" if name in fields else "NULL"

    select = [f"{field('id')} AS id", f"{field('repo')} AS repo", f"{field('slug')} AS slug",
              f"{field('errorClass')} AS error_class", f"{field('severity')} AS severity",
              f"{_site_sql(fields)} AS site", "count(*) AS lines"]
    where = ["errkb IS NOT NULL"]
    args: list = []
    if time_column is not None:
        t = _time_expr(time_column, columns)
        select += [f"min({t}) AS first_seen", f"max({t}) AS last_seen"]
        if since:
            where.append(f"{t} >= ?")
            args.append(parse_since(since))
        if until:
            where.append(f"{t} < ?")
            args.append(parse_since(until))
    if by is None:
        by = ["host"] if column_expr("host", columns) is not None else []
    for name in by:
        expr = column_expr(name, columns)
        if expr is None:
            raise ArchiveError(f"{paths[0]}: no column {name!r} to group by (columns: {', '.join(columns)})")
        alias = sql_ident(name.replace(".", "_") + "s")
        select.append(f"list(DISTINCT {expr} ORDER BY {expr}) FILTER (WHERE {expr} IS NOT NULL) AS {alias}")
    sql = f"SELECT {', '.join(select)} FROM {source} WHERE {' AND '.join(where)} GROUP BY ALL ORDER BY lines DESC, id, site"
    try:
        cur = con.execute(sql, args)
        names = [d[0] for d in cur.description]
        rows = [dict(zip(names, r)) for r in cur.fetchall()]
    except duckdb.Error as e:
        raise ArchiveError(f"{paths[0]}: {duck_error(e)}") from e
    finally:
        con.close()
    for r in rows:
        for k in ("first_seen", "last_seen"):
            if isinstance(r.get(k), dt.datetime):
                r[k] = r[k].isoformat()
    return rows


def _struct_fields(duck_type) -> set[str]:
    """The field names of the ``errkb`` struct column (empty when it is not a struct)."""
    try:
        return {name for name, _ in duck_type.children}
    except (AttributeError, TypeError, ValueError):  # not a struct (a CSV archive reads it as text)
        return set()


def _site_sql(fields: set[str]) -> str:
    """Where a known site's row is raised ("library file:line"; a curated table's message,
    which has no place, as "CUDA: <message>"), NULL on a record's row. Parquet and Spark
    output nest it in ``errkb.site``; a JSON Lines output has the filter's flat object."""
    if "site" in fields:
        s = "errkb.site"
    elif "pattern" in fields and "tier" in fields:
        s = "errkb"
    else:  # written before the site tier: no site rows
        return "NULL"
    place = lambda k: f"{s}.{sql_ident(k)}" if s != "errkb" or k in fields else "NULL"  # noqa: E731
    return (f"CASE WHEN errkb.tier = 'site' THEN CASE WHEN {place('file')} IS NULL "
            f"THEN concat(upper({place('trust')}), ': ', {place('pattern')}) "
            f"ELSE concat({place('library')}, ' ', {place('file')}, ':', {place('line')}) END END")


def run_sql(paths: Sequence[str], sql: str) -> tuple[list[str], list[tuple]]:
    """Run the user's ``sql`` with the archive(s) visible as the view ``enriched``."""
    import duckdb

    con = connect()
    try:
        con.execute(f"CREATE VIEW enriched AS SELECT * FROM {_archive_relation(con, paths)[0]}")
        cur = con.execute(sql)
        names = [d[0] for d in cur.description] if cur.description else []
        return names, cur.fetchall() if names else []
    except duckdb.Error as e:
        raise ArchiveError(f"query: {duck_error(e)}") from e
    finally:
        con.close()
