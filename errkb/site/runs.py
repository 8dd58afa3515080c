"""Verification runs as people read them on a fix page: where a run ran, when, and its
details in words (never Python's repr)."""

from __future__ import annotations


def plain_text(value) -> str:
    """Nested run data (dicts, lists, None, booleans) in words, never Python's repr."""
    if value is None or value == "" or value == [] or value == {}:
        return "none"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, dict):
        return "; ".join(f"{k}: {plain_text(v)}" for k, v in sorted(value.items(), key=lambda kv: str(kv[0])))
    if isinstance(value, (list, tuple)):
        return ", ".join(plain_text(v) for v in value)
    return str(value)


def _os_words(os_text: str) -> str:
    """``Linux-6.8.0-1017-aws-x86_64-with-glibc2.39`` -> ``Linux``; ``macOS-14.5-arm64-arm-64bit`` -> ``macOS 14.5``."""
    parts = os_text.split("-")
    if parts[0] in ("macOS", "Windows", "Darwin") and len(parts) > 1:
        return f"{parts[0]} {parts[1]}"
    return parts[0]


def _gpu_words(runner: dict) -> str:
    gpus = runner.get("gpus")
    names: list[str] = []
    if isinstance(gpus, list):
        names = [str(g.get("name") or "GPU") if isinstance(g, dict) else str(g) for g in gpus if g]
    elif runner.get("gpu"):
        g = runner["gpu"]
        names = [str(g.get("name") or "GPU") if isinstance(g, dict) else str(g)]
    if not names:
        return "CPU"
    counted = [f"{names.count(n)}× {n}" if names.count(n) > 1 else n for n in dict.fromkeys(names)]
    return ", ".join(counted)


def runner_summary(runner) -> str:
    """Where a run ran, in words: ``Linux · Python 3.11.7 · CPU`` (or the GPU's name)."""
    if not isinstance(runner, dict):
        return "unknown runner" if runner in (None, "") else plain_text(runner)
    words = []
    if runner.get("os"):
        words.append(_os_words(str(runner["os"])))
    if runner.get("python"):
        words.append(f"Python {runner['python']}")
    words.append(_gpu_words(runner))
    return " · ".join(words)


def short_time(started_at) -> tuple[str, str]:
    """(``2026-12-01 10:00 UTC``, the full ISO text) for a run's start."""
    import datetime as dt

    text = "" if started_at is None else str(started_at)
    try:
        when = dt.datetime.fromisoformat(text)
    except ValueError:
        return text, text
    if when.tzinfo is not None:
        when = when.astimezone(dt.UTC)
    return when.strftime("%Y-%m-%d %H:%M") + " UTC", text


def run_rows(runs: list[dict]) -> list[dict]:
    """A record's stored runs for its fix page, newest first: outcome, check, reason,
    when and where up front, everything else (tier, duration, the full runner, package
    versions, the run's own details) as label/text pairs to fold away."""
    rows = []
    for run in sorted(runs, key=lambda r: (str(r.get("started_at") or ""), r.get("run_id") or 0), reverse=True):
        when, when_iso = short_time(run.get("started_at"))
        runner = run.get("runner")
        details: list[tuple[str, str]] = [("tier", str(run.get("tier") or "none"))]
        if run.get("duration_s") is not None:
            details.append(("took", "%.1f s" % run["duration_s"]))
        details.append(("started", when_iso or "unknown"))
        if isinstance(runner, dict):
            details.extend((str(k), plain_text(v)) for k, v in sorted(runner.items(), key=lambda kv: str(kv[0])) if v not in (None, ""))
        elif runner not in (None, ""):
            details.append(("runner", plain_text(runner)))
        if run.get("exception_class") or run.get("exception_message"):
            details.append(("raised", f"{run.get('exception_class') or ''}: {run.get('exception_message') or ''}".strip(": ")))
        if run.get("message_matched") is not None:
            details.append(("message matched", plain_text(run["message_matched"])))
        if isinstance(run.get("details"), dict):
            details.extend((str(k), plain_text(v)) for k, v in sorted(run["details"].items(), key=lambda kv: str(kv[0]))
                           if v not in (None, "", [], {}))
        rows.append({"outcome": str(run.get("outcome") or "unknown"), "check": str(run.get("check") or ""),
                     "reason": str(run.get("reason") or ""), "when": when, "when_iso": when_iso,
                     "where": runner_summary(runner), "details": details})
    return rows
