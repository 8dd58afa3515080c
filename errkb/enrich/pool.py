"""The archive path's matcher worker processes: a pool that keeps memory bounded.

Each worker loads the matcher from an index file the parent saved once (never a
pickle of the matcher); a task's function runs with what the pool's ``setup`` made of
that matcher in the worker. At most two tasks per worker are in flight, so memory
stays bounded by a few batches whatever the input size.
"""

from __future__ import annotations

import multiprocessing
import os
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any

from errkb.cache import shipped_file
from errkb.enrich.duck import ArchiveError
from errkb.enrich.lines import cut_long
from errkb.enrich.value import Hit, SiteValues

_state: Any = None  # in a worker: what the pool's setup made of the loaded matcher


def _init_worker(index_path: str, setup, setup_args: tuple) -> None:
    global _state
    from errkb.match.matcher import Matcher

    matcher = Matcher.load(index_path)
    _state = setup(matcher, *setup_args) if setup is not None else matcher


def _call(fn, args: tuple):
    return fn(*args, _state)


def bounded_report(matcher) -> tuple[int, dict] | None:
    """(this process, what its matcher's time bound cut short so far)."""
    report = getattr(matcher, "bounded_report", None)
    return (os.getpid(), report()) if report is not None else None


class ColumnMatcher:
    """What matches a column of messages: the record matcher and, with the known-site tier
    on, the site index (errkb.match.sites.SiteIndex; None: the tier is off)."""

    def __init__(self, matcher, sites=None):
        self.matcher = matcher
        self.sites = sites
        self.site_errors = 0  # batches whose site lookup failed, so far (their rows got no site)
        self.site_values = SiteValues()


def column_matcher(matcher, sites=None) -> ColumnMatcher:
    """A worker's :class:`ColumnMatcher` (the pool's setup; ``sites`` is pickled as its
    path and reopened in the worker: errkb.match.sites.reopen)."""
    return ColumnMatcher(matcher, sites)


def match_column(messages: list, state: ColumnMatcher) -> tuple[list[int], list, Any, int]:
    """(rows, hits) of the best match of each matched message, the matcher's time-bound
    report and 1 when the batch's known-site lookup failed (a task: the state is the
    worker's). A hit is a record's (:class:`Hit`) or, on a row no record matched, a known
    site's (its site_object dict: curated always wins)."""
    matcher = state.matcher
    # bytes (Spark's text rows holding invalid UTF-8) are matched with U+FFFD for the bad bytes
    texts = cut_long([t if isinstance(t, (str, bytes)) else "" for t in messages])
    results = matcher.match_lines(texts)
    found: dict[int, Any] = {}
    failed = 0
    if state.sites is not None:
        left = [i for i, r in enumerate(results) if not r and texts[i]]
        if left:
            unmatched = [texts[i].decode("utf-8", "replace") if isinstance(texts[i], bytes) else texts[i] for i in left]
            try:
                found = {i: s for i, s in zip(left, state.sites.match_lines(unmatched)) if s is not None}
            except Exception:  # a broken site index costs the tier, never the records' matches
                failed = 1
                state.site_errors += 1
    rows, hits = [], []
    for i, best in enumerate(results):
        if best:
            rows.append(i)
            hits.append(Hit.of(best[0]))
        elif i in found:
            rows.append(i)
            hits.append(state.site_values.object(found[i]))
    return rows, hits, bounded_report(matcher), failed


def add_bounded(summary, per_process: dict, report) -> None:
    """Sum the latest time-bound report of each process into ``summary.bounded``."""
    if report is None:
        return
    pid, counts = report
    per_process[pid] = counts
    disabled: list[str] = []
    for c in per_process.values():
        disabled += [r for r in c["disabled"] if r not in disabled]
    summary.bounded = {"timeouts": sum(c["timeouts"] for c in per_process.values()),
                       "skipped": sum(c["skipped"] for c in per_process.values()), "disabled": disabled}


# Bytes of task input in flight at once (beyond one task): a batch of huge lines must not
# be queued 2 x workers times over (a 300 MB line pair took 2.17 GB).
MAX_INFLIGHT_BYTES = 64 << 20


def pool_map(tasks: Iterator[tuple[Any, tuple, int]], fn, workers: int, matcher, setup=None,
             setup_args: tuple = ()) -> Iterator:
    """(key, fn(*args, state)) for each (key, args, size) of ``tasks``, in order, ``fn``
    running in ``workers`` processes (``state``: ``setup(matcher, *setup_args)`` in each,
    the matcher itself without ``setup``). At most two tasks per worker are in flight,
    and at most MAX_INFLIGHT_BYTES of their ``size`` beyond the oldest (bounded memory).
    ``fn`` and ``setup`` are module functions (pickled by name)."""
    with shipped_file("matcher.idx", matcher.dumps(include_records=False)) as shipped:
        index_path = str(shipped)
        # spawn, not fork: the parent runs DuckDB threads, which fork would not carry over safely.
        ctx = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(max_workers=workers, mp_context=ctx, initializer=_init_worker,
                                 initargs=(index_path, setup, setup_args)) as pool:
            pending: deque[tuple[Any, Future, int]] = deque()
            inflight = 0
            for key, args, size in tasks:
                while pending and (len(pending) >= 2 * workers or inflight + size > MAX_INFLIGHT_BYTES):
                    k, fut, done = pending.popleft()
                    inflight -= done
                    yield k, _result(fut)
                pending.append((key, pool.submit(_call, fn, args), size))
                inflight += size
            while pending:
                k, fut, _ = pending.popleft()
                yield k, _result(fut)


def _result(fut: Future):
    try:
        return fut.result()
    except BrokenProcessPool as e:
        raise ArchiveError(f"a matcher worker process died ({e}); retry with --workers 1") from e
