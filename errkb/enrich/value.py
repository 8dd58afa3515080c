"""The ``errkb`` value a matched line or row gets, and the one match type of enrich.

All three paths (the streaming filter, the archive path, Spark) write the same value
for a match: id, slug, repo, errorClass, severity, score, the first solution, the
fix-page URL and the tier (curated, or variant: an older wording matched). It is built
here, once per record (:class:`RecordValues`), and written either as JSON text (the
filter, JSON Lines out) or as Arrow columns (Parquet/CSV out, Spark). Only the score and
the tier differ between two lines matching one record, so each record's value is kept
without them and they are put in per line.

A match crossing a process boundary (archive workers to the parent) or built from a
record alone is a :class:`Hit`; the matcher's own ``Match`` is read through the same
attributes, so both feed :class:`RecordValues`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any

from errkb.records.urls import fix_page_path, fix_page_url

# "tier": "curated", or "variant" when an older wording of the record matched, or "site":
# a known site matched (no record: the JSON object is site_object; in the struct column
# only repo, errorClass, url and tier are set, and "site" holds where it is raised)
ERRKB_FIELDS = ("id", "slug", "repo", "errorClass", "severity", "score", "solution", "url", "tier")
_RECORD_FIELDS = tuple(k for k in ERRKB_FIELDS if k not in ("score", "tier"))  # the same for every match of a record
# The struct column's last field, "site" (null on a record's match): site_object's where-fields.
SITE_FIELDS = ("library", "file", "line", "function", "condition", "kind", "releases", "pattern", "trust",
               "otherSites", "meaning")
_SITE_INTEGERS = ("line", "otherSites")


def rounded(score: float) -> float:
    """The score as every path writes it (Python's correctly rounded ``round``)."""
    return round(float(score), 3)


class Hit:
    """What enrich needs of a match: the record's id and index fields, and the score.

    Plain slots, so it pickles small (archive workers send these to the parent)."""

    __slots__ = ("record_id", "score", "repo", "slug", "error_class", "severity", "variant")

    def __init__(self, record_id: str, score: float, repo: str | None, slug: str | None,
                 error_class: str | None, severity: str | None, variant: bool = False):
        self.record_id = record_id
        self.score = score
        self.repo = repo
        self.slug = slug
        self.error_class = error_class
        self.severity = severity
        self.variant = variant  # matched by an older wording of the record (tier "variant")

    @classmethod
    def of(cls, match: Any) -> Hit:
        """The hit of a matcher ``Match`` (its fields read once, here)."""
        return cls(match.record_id, float(match.score), match.repo, match.slug, match.error_class, match.severity,
                   bool(getattr(match, "variant", None)))

    @classmethod
    def from_record(cls, record_id: str, record: dict, score: float = 0.0) -> Hit:
        """A hit known only by its record (the archive path's workers send ids)."""
        return cls(record_id, score, record.get("repo") or "unknown/unknown", record.get("slug") or record_id,
                   record.get("errorClass"), record.get("severity"))

    def __reduce__(self):
        return (Hit, (self.record_id, self.score, self.repo, self.slug, self.error_class, self.severity, self.variant))


def errkb_object(match: Any, site_url: str | None = None, record: dict | None = None) -> dict:
    """The ``errkb`` object of a line matched by ``match`` (a matcher ``Match`` or a
    :class:`Hit`); ``record`` saves the matcher's own look-up of the record when the
    caller has it."""
    if record is None:
        record = getattr(match, "record", None) or {}
    solutions = record.get("solutions") or []
    repo, slug = match.repo, match.slug
    return {
        "id": match.record_id,
        "slug": slug,
        "repo": repo,
        "errorClass": match.error_class,
        "severity": match.severity,
        "score": rounded(match.score),
        "solution": solutions[0] if solutions else None,
        "url": fix_page_url(site_url, repo, slug) if site_url else fix_page_path(repo, slug),
        "tier": tier_of(match),
    }


def site_object(site: Any) -> dict:
    """The ``errkb`` object of a line only a known site matched (an
    errkb.match.sites.SiteMatch): where the message is raised (its newest site), the
    releases and the source link; no fix fields (a site is not a fix)."""
    top = site.sites[0] if site.sites else None
    obj = {"tier": "site", "pattern": site.pattern, "trust": site.trust}
    if top is not None:
        obj.update({"library": top.library, "repo": top.repo, "file": top.file, "line": top.line, "function": top.function,
                    "condition": top.condition, "kind": top.kind, "errorClass": top.error_class,
                    "releases": top.releases, "url": top.source_url(), "otherSites": len(site.sites) - 1})
    if site.meaning is not None:
        obj["meaning"] = site.meaning
    return obj


class SiteValues:
    """The ``errkb`` value of each known site matched, kept per pattern (a log repeats
    a few sites): the dict (the archive path's rows) and its JSON text (the filter's
    lines). The one memo of both, as RecordValues is of records' values."""

    def __init__(self):
        self._objects: dict[str, dict] = {}
        self._texts: dict[str, str] = {}

    def object(self, site: Any) -> dict:
        obj = self._objects.get(site.pattern)
        if obj is None:
            obj = self._objects[site.pattern] = site_object(site)
        return obj

    def text(self, site: Any) -> str:
        text = self._texts.get(site.pattern)
        if text is None:
            text = self._texts[site.pattern] = json.dumps(self.object(site), ensure_ascii=False)
        return text


def is_site(match: Any) -> bool:
    """Whether an archive match is a known site's (its site_object, as workers send it)
    rather than a record's (a :class:`Hit`)."""
    return isinstance(match, dict)


def site_struct_type():
    """The Arrow type of the struct column's ``site`` field."""
    import pyarrow as pa

    return pa.struct([(k, pa.int64() if k in _SITE_INTEGERS else pa.string()) for k in SITE_FIELDS])


def errkb_struct_type():
    """The Arrow type of the ``errkb`` column (Parquet/CSV out and Spark): ERRKB_FIELDS,
    then ``site`` (a known site's where-fields; null on a record's match)."""
    import pyarrow as pa

    return pa.struct([(k, pa.float64() if k == "score" else pa.string()) for k in ERRKB_FIELDS]
                     + [("site", site_struct_type())])


def errkb_sql_type() -> str:
    """errkb_struct_type in DuckDB's SQL: ``errkb query`` casts a CSV archive's ``errkb``
    text (a JSON object per cell) back to it, so one query reads every output format."""
    site = ", ".join(f'"{k}" {"BIGINT" if k in _SITE_INTEGERS else "VARCHAR"}' for k in SITE_FIELDS)
    fields = ", ".join(f'"{k}" {"DOUBLE" if k == "score" else "VARCHAR"}' for k in ERRKB_FIELDS)
    return f'STRUCT({fields}, "site" STRUCT({site}))'


def tier_of(match: Any) -> str:
    """A record match's tier: "variant" when an older wording of the record matched, else "curated"."""
    return "variant" if getattr(match, "variant", None) else "curated"


def tier_text(match: Any) -> str:
    """The end of a record match's JSON text: its tier and the closing brace."""
    return f', "tier": "{tier_of(match)}"}}'


class RecordValues:
    """The ``errkb`` value of each record seen so far, built on its first match.

    ``resolve_many(ids) -> {id: record}`` fetches the records of a batch's new matches
    in one call (a store look-up per record costs a query each; see :meth:`fetch`);
    ``resolve_one(id)`` is the fallback per record; without either, the match's own
    ``record`` (the matcher's look-up) is used.
    """

    def __init__(self, site_url: str | None = None,
                 resolve_many: Callable[[list[str]], dict[str, dict]] | None = None,
                 resolve_one: Callable[[str], dict | None] | None = None):
        self.site_url = site_url
        self.resolve_many = resolve_many
        self.resolve_one = resolve_one
        self.labels: dict[str, str] = {}  # record id -> "repo/slug"
        self.index: dict[str, int] = {}  # record id -> its row in the columns
        self._fetched: dict[str, dict] = {}
        self._columns: dict[str, list] = {k: [] for k in _RECORD_FIELDS}
        self._arrays: dict | None = None
        # record id -> (JSON text before the score, text after it)
        self._text: dict[str, tuple[str, str]] = {}

    # -- building a record's value ----------------------------------------------------

    def fetch(self, record_ids: Iterable[str]) -> None:
        """Fetch the records of ``record_ids`` not seen yet, in one ``resolve_many`` call."""
        if self.resolve_many is None:
            return
        new = set(record_ids).difference(self.index)
        new.difference_update(self._fetched)
        if new:
            self._fetched.update(self.resolve_many(sorted(new)))

    def position(self, match: Any) -> int:
        """The row of ``match``'s record in the columns, its value built on first sight."""
        at = self.index.get(match.record_id)
        if at is None:
            at = self._add(match)
        return at

    def _add(self, match: Any) -> int:
        rid = match.record_id
        record = self._fetched.pop(rid, None)
        if record is None and self.resolve_one is not None:
            record = self.resolve_one(rid)
        obj = errkb_object(match, self.site_url, record)
        for k in _RECORD_FIELDS:
            self._columns[k].append(obj[k])
        self.labels[rid] = f"{obj['repo']}/{obj['slug']}"
        self._arrays = None
        at = self.index[rid] = len(self.index)
        return at

    def value(self, match: Any) -> dict:
        """The ``errkb`` object of ``match`` (a new dict; the embedding API returns it)."""
        at = self.position(match)
        obj = {k: self._columns[k][at] for k in _RECORD_FIELDS}
        obj.update(score=rounded(match.score), tier=tier_of(match))
        return {k: obj[k] for k in ERRKB_FIELDS}

    # -- as JSON text ------------------------------------------------------------------

    def parts(self, match: Any) -> tuple[str, str]:
        """(JSON text before the score, text after it) of ``match``'s record."""
        rid = match.record_id
        parts = self._text.get(rid)
        if parts is None:
            obj = self.value(match)
            obj["score"] = 0.0
            del obj["tier"]  # per match: text() appends it
            text = json.dumps(obj, ensure_ascii=False)
            try:
                text.encode("utf-8")
            except UnicodeEncodeError:  # a lone surrogate in the record: escape it
                text = json.dumps(obj)
            head, tail = text.split('"score": 0.0', 1)
            parts = self._text[rid] = (head + '"score": ', tail)
        return parts

    def text(self, match: Any) -> str:
        """The ``errkb`` object of ``match`` as JSON text (what a JSON line gets), its tier
        last (``curated``, or ``variant`` when an older wording of the record matched)."""
        head, tail = self._text.get(match.record_id) or self.parts(match)
        return f"{head}{rounded(match.score)!r}{tail[:-1]}{tier_text(match)}"


    # -- as Arrow columns ----------------------------------------------------------------

    def struct(self, n: int, rows: list[int], matches: list[Any]):
        """The ``errkb`` struct column of ``n`` rows: ``matches[k]``'s value at row
        ``rows[k]``, null elsewhere. A match is a record's (a :class:`Hit` or matcher
        ``Match``) or a known site's (its site_object: tier "site", repo, errorClass and
        url set, the rest of the record fields null, and the where-fields in ``site``)."""
        import numpy as np
        import pyarrow as pa

        sited = [k for k, m in enumerate(matches) if is_site(m)]
        if sited:
            site_rows = [rows[k] for k in sited]
            site_objs = [matches[k] for k in sited]
            keep = [k for k, m in enumerate(matches) if not is_site(m)]
            rows, matches = [rows[k] for k in keep], [matches[k] for k in keep]
        at = [self.position(m) for m in matches]
        if self._arrays is None:
            self._arrays = {k: pa.array(v, type=pa.string()) for k, v in self._columns.items()}
        take = np.zeros(n, dtype=np.int32)
        valid = np.zeros(n, dtype=bool)
        score = np.zeros(n, dtype=np.float64)
        if rows:
            take[rows] = at
            valid[rows] = True
            score[rows] = [rounded(m.score) for m in matches]
        # null indices: the children are null under a null struct too, and on a site's row
        no_record = ~valid
        take_arr = pa.array(take, mask=no_record)
        if sited:
            valid[site_rows] = True
        missing = ~valid
        children = []
        for k in ERRKB_FIELDS:
            if k == "score":  # a site has no score
                children.append(pa.array(score, type=pa.float64(), mask=no_record))
            elif k == "tier":
                tiers = np.full(n, "curated", dtype=object)
                if rows:
                    tiers[rows] = [tier_of(m) for m in matches]
                if sited:
                    tiers[site_rows] = "site"
                children.append(pa.array(tiers, type=pa.string(), mask=missing))
            else:
                column = self._arrays[k].take(take_arr) if len(self._arrays[k]) else pa.nulls(n, pa.string())
                if sited and k in ("repo", "errorClass", "url"):
                    values = column.to_numpy(zero_copy_only=False).astype(object)
                    values[site_rows] = [o.get(k) for o in site_objs]
                    column = pa.array(values, type=pa.string())
                children.append(column)
        if sited:
            where: list = [None] * n
            for row, obj in zip(site_rows, site_objs):
                where[row] = {f: obj.get(f) for f in SITE_FIELDS}
            children.append(pa.array(where, type=site_struct_type()))
        else:
            children.append(pa.nulls(n, site_struct_type()))
        return pa.StructArray.from_arrays(children, fields=list(errkb_struct_type()), mask=pa.array(missing))
