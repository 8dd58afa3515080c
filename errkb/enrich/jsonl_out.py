"""JSON Lines in, JSON Lines out: the streaming filter's own lines, in worker processes.

Each line goes through the streaming filter's line enricher (errkb.enrich.lines.
LineEnricher), so the output is byte for byte what ``errkb enrich < archive.jsonl``
writes: object lines keep their bytes with the ``errkb`` member spliced in as text, any
other line becomes ``{"message": <line>}``. Workers have the matcher but not the
records: they leave a NUL where each errkb text goes and send the hits; the parent puts
the texts in (errkb.enrich.value.RecordValues).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from errkb.enrich.jsonl import STRICT_JSON, raw_blocks
from errkb.enrich.lines import Counters, LineEnricher, cut_long, field_value, has_null_errkb, without_null_errkb
from errkb.enrich.pool import add_bounded, bounded_report, pool_map
from errkb.enrich.value import Hit, RecordValues


def line_enricher(matcher, fields: Sequence[str], only_matched: bool, sites=None) -> LineEnricher:
    """A worker's line enricher: lines a record matched get a NUL and their hit
    (``found``); a line only a known site matched gets its site object's text at once
    (it needs no record). ``sites`` is pickled as its path and reopened in the worker."""
    enricher = LineEnricher(matcher, fields=list(fields), only_matched=only_matched, sites=sites)
    enricher.found = []
    return enricher


def enrich_lines(block: bytes, final: bool, enricher: LineEnricher):
    """The streaming filter's output for ``block`` with a NUL for each errkb object, the
    hits in line order, (lines, JSON object lines, invalid UTF-8 lines, already
    enriched, lines tagged with a known site, failed site lookups) and the time-bound report (a pool task: ``enricher`` is the worker's)."""
    e = enricher
    e.counters = Counters()
    e.found = []
    out = _objects_block(e, block)
    if out is None:
        out = e.enrich_block(block, final)
    c = e.counters
    return (out, e.found, (c.lines, c.json_lines, c.invalid_utf8, c.already_enriched, c.sites, c.site_errors),
            bounded_report(e.matcher))


def _match_lines(e, messages: list[str]) -> list[list]:
    """The matcher's batch call; a failure there costs only the lines it failed on (as
    in the streaming filter)."""
    try:
        return e.matcher.match_lines(cut_long(messages))
    except Exception:
        out = []
        for m in messages:
            try:
                out.append(e.matcher.match_lines([m])[0])
            except Exception:
                e.counters.matcher_errors += 1
                out.append([])
        return out


def _hole(e: LineEnricher, match) -> str:
    """Where a worker's matched line gets its errkb text: a NUL, the hit noted; a known
    site's text (errkb.enrich.value.SiteValues) is written at once."""
    if hasattr(match, "sites"):  # an errkb.match.sites.SiteMatch, not a record's match
        e.counters.sites += 1
        return e.site_values.text(match)
    e.found.append(Hit.of(match))
    return "\x00"


def _splice(line: str, empty: bool, text: str) -> str:
    """``line`` (a JSON object) with ``"errkb": text`` added before its closing brace, as
    text: the input's members stay byte for byte (the streaming filter's rule)."""
    body = line.rstrip()
    return f'{body[:-1]}"errkb": {text}}}' if empty else f'{body[:-1]}, "errkb": {text}}}'


def _objects_block(e, block: bytes) -> bytes | None:
    """``e.enrich_block(block)`` for the usual block of a JSON Lines archive, where every
    line is a JSON object (None for any other block): the block itself is the output of
    its unmatched lines, so only matched lines are rebuilt (the streaming filter wraps
    every line as text first, for pipes that mostly carry text). The tests hold the two
    to the same bytes."""

    if b"\r" in block or not block.startswith(b"{"):
        return None
    try:
        text = block.decode("utf-8")
    except UnicodeDecodeError:
        return None
    lines = text.split("\n")
    if text.count("\n{") != len(lines) - 1:
        return None
    # per line: 0 an object, 1 the empty object, 2 an object with an errkb member, 3 one
    # whose errkb is null (enriched as if it had none; docs/enrich.md) (kept
    # as flags, not dicts: a block's dicts alive at once would keep the collector busy)
    kinds, messages, paths = [], [], e.paths
    scan = STRICT_JSON.scan_once  # the decoder without its whitespace regexes: a line here starts with "{"
    try:
        for line in lines:
            obj, end = scan(line, 0)
            if end != len(line) and line[end:].strip(" \t\n\r"):
                return None
            kinds.append((3 if has_null_errkb(obj) else 2) if "errkb" in obj else 0 if obj else 1)
            messages.append(field_value(obj, paths) or "")
    except (ValueError, RecursionError, StopIteration):
        return None
    counters = e.counters
    counters.lines += len(lines)
    counters.json_lines += len(lines)
    results = _match_lines(e, messages)
    if e.sites is not None:
        results = e.add_sites(messages, results)
    matched = [i for i, r in enumerate(results) if r]
    done = {i: lines[i] if kinds[i] == 2 else _splice(*without_null_errkb(lines[i]), _hole(e, results[i][0]))
            if kinds[i] == 3 else _splice(lines[i], kinds[i] == 1, _hole(e, results[i][0])) for i in matched}
    counters.already_enriched += sum(1 for i in matched if kinds[i] == 2)  # written as read (docs/enrich.md)
    if e.only_matched:
        return "".join(done[i] + "\n" for i in matched).encode("utf-8")
    if not matched:
        return block + b"\n"
    out_lines = block.split(b"\n")
    for i, line in done.items():
        out_lines[i] = line.encode("utf-8")
    out_lines.append(b"")
    return b"\n".join(out_lines)


def jsonl_to_jsonl(files, out, matcher, fields, site_url, only_matched, workers, max_lines, resolve_many,
                   summary, sites=None) -> None:
    """Enrich the JSON Lines ``files`` into the binary file ``out``, counting into
    ``summary`` (an errkb.enrich.archive.ArchiveSummary)."""
    # the streaming filter's own errkb texts (one JSON text per record, the score put in)
    values = RecordValues(site_url, resolve_many, matcher.record)
    per_process: dict = {}
    # no key: the parent keeps no copy of a block while a worker has it
    tasks = ((None, (block, final), len(block)) for _, block, final in raw_blocks(files, max_lines))
    if workers <= 1:
        local = line_enricher(matcher, fields, only_matched, sites)
        results: Iterator = ((key, enrich_lines(*args, local)) for key, args, _ in tasks)
    else:
        results = pool_map(tasks, enrich_lines, workers, matcher, line_enricher, (list(fields), only_matched, sites))
    for _, (data, found, (lines, objects, invalid, already, sited, site_failed), report) in results:
        summary.batches += 1
        summary.rows += lines
        summary.not_json += lines - objects
        summary.invalid_utf8 += invalid
        summary.already_enriched += already
        summary.sites += sited
        summary.site_errors += site_failed
        add_bounded(summary, per_process, report)
        if found:
            values.fetch([h.record_id for h in found])
            parts = data.split(b"\x00")
            pieces = [parts[0]]
            for hit, part in zip(found, parts[1:]):
                pieces += [values.text(hit).encode("utf-8"), part]
                summary.by_record[hit.record_id] += 1
            data = b"".join(pieces)
            summary.matched += len(found)
        summary.written += data.count(b"\n")
        out.write(data)
    summary.labels.update(values.labels)
