"""JSON shape inference for Parquet/CSV out: which columns a JSON Lines archive's
object lines become, typed where the type holds every value exactly, else JSON text.

A first pass asks DuckDB for the structure of every object line
(``json_group_structure``); each top-level key becomes a column under its own name;
lines that are not JSON objects become rows whose ``message`` holds the line. The plan
(:class:`JsonPlan`) is the SQL the second pass converts each block with
(``json_transform``).
"""

from __future__ import annotations

import json
import os
import re
from collections import deque
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from errkb.enrich.duck import MESSAGE_COLUMN, ArchiveError, duck_error, lambda_sql, sql_string
from errkb.enrich.jsonl import RAW_TABLE, raw_batch, raw_blocks

# A number DuckDB would not hold exactly in a BIGINT/DOUBLE column: 16 or more digits
# before the point (beyond 2**53 possibly) or a 3-digit exponent (1e999 is not a
# double). A member whose value holds one is kept as JSON text (false alarms, e.g. such
# text inside a string, only cost a typed column). RE2 inside DuckDB: linear time.
_RISKY_NUMBER = r"(^|[:,\[])\s*-?(\d{16}|\d+(\.\d+)?[eE][+-]?\d{3})"
_INTS = frozenset({"UBIGINT", "BIGINT", "HUGEINT"})
_MAX_DEPTH = 32  # deeper structures are kept as JSON text
TEXT_COLUMN = "__errkb_text"
# At most this many of an archive's top-level keys become columns; the members under
# the others go to one JSON column (rest_column). docs/enrich.md states the bound.
MAX_COLUMNS = 256
REST_COLUMN = "_rest"


MAX_FIELDS = 1024  # typed fields in all (a struct's members count): the rest are JSON text


def _width(t) -> int:
    """How many fields a json_transform structure types (at least 1)."""
    if isinstance(t, dict):
        return 1 + sum(_width(v) for v in t.values())
    if isinstance(t, list):
        return _width(t[0]) if t else 1
    return 1


def rest_column(members) -> str:
    """The name of the JSON column holding the members beyond MAX_COLUMNS: ``_rest``,
    with more underscores in front while a key of the archive has that name."""
    name = REST_COLUMN
    while name in members:
        name = "_" + name
    return name  # true where a line is not a JSON object



# The block mapped so that a number's shape is left: digits -> "0", signs -> "+", e/E ->
# "e", "." stays, what may precede a number (: , [ and JSON whitespace) -> ":", all else
# -> "x". A risky number always leaves one of these shapes: ":" (and a sign) and 16
# digits, or an exponent "e000"/"e+000" right after ":" (and a sign), digits and points,
# a digit last (a false alarm, such text inside a string, costs one query over the block).
_SHAPE_TABLE = bytes(
    ord("0") if 48 <= b <= 57 else ord("+") if b in b"+-" else ord("e") if b in b"eE" else ord(".") if b == 46
    else ord(":") if b in b":,[ \t\r\n" else ord("x")
    for b in range(256)
)
_BIG_INT_SHAPES = (b":" + b"0" * 16, b":+" + b"0" * 16)


def _may_hold_risky_number(block: bytes) -> bool:
    """False when no JSON number in ``block`` can be one _RISKY_NUMBER flags: the usual
    block (hex ids and digits inside strings aside) costs a few C passes, not a regex
    over every line."""
    shape = block.translate(_SHAPE_TABLE)
    if any(mark in shape for mark in _BIG_INT_SHAPES):
        return True
    for mark in (b"e000", b"e+000"):  # a 3-digit exponent: does a number start right before it?
        i = shape.find(mark)
        while i >= 0:
            if shape[i - 1:i] == b"0":  # in JSON a digit comes right before the exponent
                before = shape[max(0, i - 64):i].rstrip(b"0.")
                if not before or before.endswith((b":", b":+")):  # (64 digits and points: say yes)
                    return True
            i = shape.find(mark, i + 1)
    return False


class _Risky:
    """A number in a parsed line that DuckDB would not hold exactly (see _RISKY_NUMBER)."""


_RISKY = _Risky()
_RISKY_LITERAL = re.compile(r"-?(\d{16}|\d+(\.\d+)?[eE][+-]?\d{3})")


def _int_literal(text: str):
    return _RISKY if len(text) - text.startswith("-") >= 16 else 0


def _float_literal(text: str):
    return _RISKY if _RISKY_LITERAL.match(text) else 0.0


def _not_a_constant(name: str):
    raise ValueError(f"{name} is not JSON")


_MARKING = json.JSONDecoder(parse_int=_int_literal, parse_float=_float_literal, parse_constant=_not_a_constant)


def _holds_risky(value) -> bool:
    if value is _RISKY:
        return True
    if isinstance(value, dict):
        return any(_holds_risky(v) for v in value.values())
    if isinstance(value, list):
        return any(_holds_risky(v) for v in value)
    return False


def _risky_keys(line: str) -> set[str] | None:
    """The top-level keys of ``line`` whose value holds a number DuckDB would not hold
    exactly; None when Python cannot parse it that deep. Parsed here, not by
    ``json_each`` in DuckDB, which repeats the whole line for every member (a 12,000-key
    line took 2 GB). A line that is no JSON object has none."""
    try:
        obj = _MARKING.decode(line)
        return {k for k, v in obj.items() if _holds_risky(v)} if isinstance(obj, dict) else set()
    except RecursionError:
        return None
    except ValueError:
        return set()


def _merge(a, b, depth: int = 0):
    """Two ``json_group_structure`` results merged (as DuckDB merges them, coarser)."""
    if a is None or a == "NULL":
        return b
    if b is None or b == "NULL":
        return a
    if depth > _MAX_DEPTH:
        return "JSON"
    if isinstance(a, dict) and isinstance(b, dict):
        out = dict(a)
        for k, v in b.items():
            out[k] = _merge(out[k], v, depth + 1) if k in out else v
        return out
    if isinstance(a, list) and isinstance(b, list):
        return [_merge(a[0] if a else None, b[0] if b else None, depth + 1)]
    if isinstance(a, str) and isinstance(b, str):
        if a == b:
            return a
        if a in _INTS and b in _INTS:
            return "HUGEINT"
        if a in _INTS | {"DOUBLE"} and b in _INTS | {"DOUBLE"}:
            return "DOUBLE"
    return "JSON"


def fold(key: str) -> str:
    return key.lower()  # DuckDB's names are case-insensitive


def _exact(structure, risky: bool, depth: int = 0):
    """The ``json_transform`` structure that holds every value of ``structure`` exactly,
    or None when only JSON text does (mixed types, arrays of mixed values, numbers a
    BIGINT/DOUBLE would change, keys differing only in case, empty keys, deep nesting)."""
    if depth > _MAX_DEPTH:
        return None
    if isinstance(structure, str):
        if structure in ("VARCHAR", "BOOLEAN"):
            return structure
        if structure in _INTS:
            if not risky:  # at most 15 digits: a BIGINT holds it
                return "BIGINT"
            return structure if structure in ("UBIGINT", "BIGINT") else None
        if structure == "DOUBLE":
            return None if risky else "DOUBLE"
        return None  # NULL (never a value), JSON (mixed), or a type this code does not know
    if isinstance(structure, list):
        inner = _exact(structure[0], risky, depth + 1) if structure else None
        return [inner] if inner is not None else None
    if isinstance(structure, dict):
        if not structure or "" in structure or len({fold(k) for k in structure}) < len(structure):
            return None
        out = {}
        for k, v in structure.items():
            t = _exact(v, risky, depth + 1)
            if t is None:
                return None
            out[k] = t
        return out
    return None


def _pointer(parts: Sequence[str]) -> str:
    """A JSON Pointer (RFC 6901) to a member: DuckDB's JSON paths cannot name every key."""
    return "".join("/" + p.replace("~", "~0").replace("/", "~1") for p in parts)


@dataclass
class JsonPlan:
    """How JSON object lines become columns (from the first pass over the archive)."""

    names: list[str]
    exprs: list[str]
    json_columns: list[bool]
    message: str
    sql: str
    fast_sql: str  # the same, for a block whose lines starting with "{" are all JSON


def _block_structure(con, block: bytes, final: bool) -> tuple[Any, set[str], int, int, int]:
    """(structure of the block's object lines, keys holding a risky number, object lines,
    other lines, lines not UTF-8)."""
    import duckdb

    con.register(RAW_TABLE, raw_batch(block, final))
    query = (f"SELECT CAST(json_group_structure(j) AS VARCHAR), count(j), count(*) - count(j), count(__b64) "
             f"FROM (SELECT CASE WHEN __obj THEN {{}}(__text AS JSON) END AS j, __b64 FROM {RAW_TABLE})")
    try:  # the usual block: every line starting with "{" is JSON
        text, n_obj, n_other, n_b64 = con.execute(query.format("CAST")).fetchall()[0]
    except (duckdb.InvalidInputException, duckdb.ConversionException):
        text, n_obj, n_other, n_b64 = con.execute(query.format("TRY_CAST")).fetchall()[0]
    risky: set[str] = set()
    if _may_hold_risky_number(block):
        pattern = sql_string(_RISKY_NUMBER)
        suspects = [t for (t,) in con.execute(
            f"SELECT __text FROM {RAW_TABLE} WHERE __obj AND regexp_matches(__text, {pattern})").fetchall()]
        for line in suspects:
            keys = _risky_keys(line)
            if keys is None:  # deeper than Python parses: DuckDB asks this line's members
                con.execute("CREATE OR REPLACE TEMP TABLE __errkb_suspect AS SELECT ? AS t", [line])
                keys = {k for (k,) in con.execute(
                    f"SELECT DISTINCT je.key FROM (SELECT TRY_CAST(t AS JSON) AS j FROM __errkb_suspect) f, "
                    f"json_each(f.j) je WHERE regexp_matches(CAST(je.value AS VARCHAR), {pattern})").fetchall()}
            risky.update(keys)
    found = None
    if text:
        try:
            found = json.loads(text)
        except RecursionError:  # nesting deeper than Python parses: per key, deep ones as JSON
            found = {}
            for key, sub in con.execute(
                f"SELECT je.key, CAST(json_group_structure(je.value) AS VARCHAR) FROM "
                f"(SELECT TRY_CAST(__text AS JSON) AS j, row_number() OVER () AS n FROM {RAW_TABLE} WHERE __obj) f, "
                f"json_each(f.j) je GROUP BY je.key ORDER BY min(f.n)"
            ).fetchall():
                try:
                    found[key] = json.loads(sub)
                except RecursionError:
                    found[key] = "JSON"
        # every line here is an object: a structure that is not one (DuckDB says "JSON"
        # for {}) means objects without members
        found = found if isinstance(found, dict) else {}
    return found, risky, n_obj, n_other, n_b64


def _first_pass(con, files: Sequence[str], max_lines: int) -> tuple[Any, set[str], int, int, int]:
    """(merged structure of the object lines, keys holding a risky number, object lines,
    other lines, lines not UTF-8) over every line of ``files``. Blocks are read and
    asked in a few threads (DuckDB and numpy let go of the GIL), one block per thread
    and one more in flight; their structures are merged in file order, so columns come
    in the order their keys first appear."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    import duckdb

    local = threading.local()

    def run(block: bytes, final: bool):
        cursor = getattr(local, "cursor", None)
        if cursor is None:
            cursor = local.cursor = con.cursor()
        return _block_structure(cursor, block, final)

    structure = None
    risky: set[str] = set()
    objects = others = invalid = 0
    # half the cores, up to 4: the workers and DuckDB's own threads want the rest
    threads = max(1, min(4, (os.cpu_count() or 1) // 2))
    with ThreadPoolExecutor(threads, thread_name_prefix="errkb-archive") as pool:
        pending: deque[tuple[str, Future]] = deque()

        def collect() -> None:
            nonlocal structure, objects, others, invalid
            path, fut = pending.popleft()
            try:
                found, keys, n_obj, n_other, n_b64 = fut.result()
            except duckdb.Error as e:
                raise ArchiveError(f"{path}: {duck_error(e)}") from e
            if found is not None:
                structure = _merge(structure, found)
            risky.update(keys)
            objects += n_obj
            others += n_other
            invalid += n_b64

        for path, block, final in raw_blocks(files, max_lines):
            pending.append((path, pool.submit(run, block, final)))
            if len(pending) > threads:
                collect()
        while pending:
            collect()
    return structure, risky, objects, others, invalid


def json_plan(con, files: Sequence[str], fields: Sequence[str], max_lines: int, spec: str) -> JsonPlan:
    """Read the archive once and decide its columns: every top-level key under its own
    name (``errkb`` aside: the new one replaces it), typed where the type is exact, else
    JSON text; ``message`` (and ``message_b64``) hold the lines that are not JSON objects."""
    structure, risky, objects, others, invalid = _first_pass(con, files, max_lines)
    members = structure if isinstance(structure, dict) else {}
    keys = [k for k in members if k != "errkb"]
    rest: list[str] = []
    if len(keys) > MAX_COLUMNS:
        # DuckDB's cost of a plan grows faster than its column count (a 12,000-key object
        # took 54 s and 11.7 GB): beyond the first MAX_COLUMNS keys, in order of first
        # appearance, a line's members go to one JSON column (the keys matched on and
        # the ones the other lines' text lands in stay columns).
        needed = {f for f in fields} | {f.split(".")[0] for f in fields} | {"message", "message_b64"}
        kept = {k for i, k in enumerate(keys) if i < MAX_COLUMNS or k in needed}
        rest = [k for k in keys if k not in kept]
        keys = [k for k in keys if k in kept]
    types = {k: _exact(members[k], k in risky) for k in keys}
    budget = MAX_FIELDS
    for k in keys:  # nested objects count too: past the budget a column is JSON text
        if types[k] is not None:
            width = _width(types[k])
            if width > budget:
                types[k] = None
            else:
                budget -= width
    for name, needed in (("message", others > 0), ("message_b64", invalid > 0)):
        if needed and name in types and types[name] != "VARCHAR":
            types[name] = None  # holds the other lines' text too: JSON (the text as a JSON string)
    groups: list[dict] = []  # json_transform structures; keys differing only in case go to different ones
    folded: list[set[str]] = []  # each group's keys, folded
    where: dict[str, str] = {}
    for k in keys:
        if k == "":
            where[k] = f"CASE WHEN __ok THEN json_extract(__text, {sql_string(_pointer(['']))}) END"
            types[k] = None
            continue
        f = fold(k)
        g = next((i for i, seen in enumerate(folded) if f not in seen), None)
        if g is None:
            groups.append({})
            folded.append(set())
            g = len(groups) - 1
        groups[g][k] = types[k] if types[k] is not None else "JSON"
        folded[g].add(f)
        where[k] = f"__j{g}[{sql_string(k)}]"
    names, exprs, json_cols = [], [], []
    for k in keys:
        names.append(k)
        exprs.append(where[k])
        json_cols.append(types[k] is None)
    if rest:
        # The line's other members as one JSON object (null when it has none), their
        # values as JSON text, in the line's order: a MAP of the line (__jrest), less the
        # kept keys, written back as an object. A row-wise expression, not a subquery
        # over json_each, which DuckDB turns into a join that reorders rows. A line
        # repeating a key has no MAP: its whole text goes there (nothing is lost).
        listed = "[" + ", ".join(sql_string(k) for k in [*keys, "errkb"]) + "]"
        kept_out = lambda_sql("e", f"NOT list_contains({listed}, e.key)")
        member = lambda_sql("e", "CAST(to_json(e.key) AS VARCHAR) || ':' || coalesce(CAST(e.value AS VARCHAR), 'null')")
        others_sql = (f"nullif('{{' || array_to_string(list_transform(list_filter(map_entries(__jrest), {kept_out}), "
                      f"{member}), ',') || '}}', '{{}}')")
        names.append(rest_column(members))
        exprs.append(f"CASE WHEN __ok THEN CASE WHEN __jrest IS NULL THEN __text ELSE {others_sql} END END")
        json_cols.append(True)
    # the lines that are not JSON objects: {"message": <line>} (+ message_b64), as the streaming filter
    for name, value, needed in (("message", "__text", others > 0), ("message_b64", "__b64", invalid > 0)):
        if not needed:
            continue
        if name in names:
            i = names.index(name)
            row = "to_json(" + value + ")" if json_cols[i] else value
            exprs[i] = f"CASE WHEN __ok THEN {exprs[i]} ELSE {row} END"
        else:
            names.append(name)
            exprs.append(f"CASE WHEN __ok THEN NULL ELSE {value} END")
            json_cols.append(False)
    # the message each object line is matched on: the first field holding a string
    candidates = []
    for f in fields:
        if f in where:
            e, t = where[f], types[f]
            candidates.append(e if t == "VARCHAR" else f"CASE WHEN json_type({e}) = 'VARCHAR' THEN {e} ->> '$' END"
                              if t is None else None)
        parts = f.split(".")
        if len(parts) > 1 and parts[0] in where:
            e, t = where[parts[0]], types[parts[0]]
            rest = parts[1:]
            while rest and isinstance(t, dict) and rest[0] in t:
                e, t = f"{e}[{sql_string(rest[0])}]", t[rest[0]]
                rest = rest[1:]
            if not rest and t == "VARCHAR":
                candidates.append(e)
            elif rest and t is None:
                ptr = sql_string(_pointer(rest))
                candidates.append(f"CASE WHEN json_type({e}, {ptr}) = 'VARCHAR' THEN json_extract_string({e}, {ptr}) END")
    candidates = [c for c in candidates if c is not None]
    if keys and not any(f in where or f.split(".")[0] in where for f in fields):
        raise ArchiveError(
            f"{spec}: no column {' or '.join(map(repr, fields))} to read messages from "
            f"(columns: {', '.join(keys)}); name one with --field"
        )
    matched_on = f"coalesce({', '.join(candidates)})" if len(candidates) > 1 else candidates[0] if candidates else "NULL"
    message = f"CASE WHEN __ok THEN {matched_on} ELSE __text END"
    parsed = [f"CASE WHEN __obj THEN TRY(json_transform(__text, {sql_string(json.dumps(g))})) END AS __j{i}"
              for i, g in enumerate(groups)]
    if rest:
        parsed.append(f"CASE WHEN __obj THEN TRY(json_transform(__text, {sql_string(json.dumps('MAP(VARCHAR, JSON)'))})) "
                      f"END AS __jrest")
    fast = [p.replace("TRY(json_transform(", "(json_transform(") for p in parsed]
    ok = "__j0 IS NOT NULL" if groups else "(__obj AND json_valid(__text))"
    columns = [f"{e} AS c{i}" for i, e in enumerate(exprs)]
    def select(parsed: list[str]) -> str:
        return (
            f"SELECT {', '.join([*columns, f'{message} AS {MESSAGE_COLUMN}', f'NOT __ok AS {TEXT_COLUMN}'])} "
            f"FROM (SELECT *, {ok} AS __ok FROM (SELECT {', '.join(['__text', '__b64', '__obj', *parsed])} FROM {RAW_TABLE}))"
        )

    return JsonPlan(names, exprs, json_cols, message, select(parsed), select(fast))
