"""Judging a run: what one sandboxed run of a record's code or reproducer says about the
record, as a CheckResult (pass / fail / skipped / error / timeout with its reason) —
whether the real library raised the record's own message (through errkb's matcher),
at which raise site, and where the record disagrees with the traceback."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

from errkb.records.proofs import error_mismatch
from errkb.verify import sandbox
from errkb.verify.reproducers import Reproducer, Scenario


@dataclass
class CheckResult:
    """One verification run, as stored in the runs table."""

    record_id: str
    slug: str
    tier: str
    check: str
    outcome: str
    reason: str
    duration_s: float = 0.0
    exception_class: str | None = None
    exception_message: str | None = None
    message_matched: bool | None = None
    details: dict = field(default_factory=dict)
    started_at: str = ""
    run_id: int | None = None
    # The same observation judged against another record (errkb.verify.mutants: a mutated
    # message or class changes only the judging of a run); never stored.
    rejudge: Callable[[dict], list[CheckResult]] | None = field(default=None, repr=False, compare=False)

    def to_dict(self) -> dict:
        out = asdict(self)
        out.pop("rejudge", None)
        return out


def message_matches(record: dict, message: str | None) -> tuple[bool | None, str]:
    """Whether ``message`` matches the record's messagePattern, through errkb's matcher."""
    if message is None:
        return None, "no message observed"
    try:
        from errkb.match.matcher import Matcher
    except ImportError as e:
        return None, f"matcher unavailable ({e})"
    matches = Matcher.from_records([record]).match(message)
    hit = any(m.record_id == record["id"] for m in matches)
    return hit, "matches messagePattern" if hit else "does not match messagePattern"


def from_sandbox(record: dict, tier: str, check: str, res: sandbox.SandboxResult, **kw) -> CheckResult:
    details = {
        "returncode": res.returncode, "network": res.network, "notes": res.notes,
        "stdout_tail": res.stdout[-2000:], "stderr_tail": res.stderr[-2000:],
    }
    details.update(kw.pop("details", {}))
    return CheckResult(
        record_id=record["id"], slug=record["slug"], tier=tier, check=check,
        outcome=kw.pop("outcome", res.outcome), reason=kw.pop("reason", res.reason),
        duration_s=res.duration_s, exception_class=res.exception_class,
        exception_message=res.exception_message, details=details, **kw,
    )


SINGLE_NOT_RUN = ("ImportError", "ModuleNotFoundError", "SyntaxError", "NameError", "IndentationError")

# The file names the validation code runs under: compiled in a driver (``<validationCode>``)
# or written into the sandbox's folder as a script (errkb.verify.runs).
OWN_CODE = ("<validationCode>", "snippet.py")
_FRAME = re.compile(r'^\s*File "([^"]*)", line (\d+), in (.+)$', re.M)


def traceback_frames(stderr: str) -> list[dict]:
    """The frames (innermost last) of the last Python traceback in ``stderr``."""
    start = stderr.rfind("Traceback (most recent call last):")
    if start < 0:
        return []
    return [{"file": f, "line": int(n), "function": fn.strip()} for f, n, fn in _FRAME.findall(stderr[start:])]


def validation_crash(record: dict, exc_class: str | None, exc_message: str | None, frames: list[dict]) -> str | None:
    """Why an exception that ended a validation run is no verdict, or None when it is one.

    A validation rejects a state only by its own verdict: an ``assert`` or ``SystemExit``
    raised by the validation code itself (its innermost frame is the code's own), or the
    record's own error (by its messagePattern) raised through it, which is the library's
    verdict on the user's state (a validation that starts the engine the user starts).
    Anything else — an ImportError, ``int()`` of a bad argv, argparse's usage error (a
    SystemExit raised inside argparse), a child that cannot start — crashed before any
    verdict, and is an error of the proof, never a rejection."""
    if exc_class is None:
        return None
    inner = frames[-1] if frames else None
    own = inner is not None and os.path.basename(str(inner.get("file"))) in OWN_CODE
    if exc_class in ("AssertionError", "SystemExit") and own:
        return None
    if exc_class not in SINGLE_NOT_RUN and message_matches(record, exc_message)[0]:
        return None
    at = f" in {os.path.basename(str(inner['file']))}:{inner['line']} ({inner['function']})" if inner else ""
    kind = "a usage error" if exc_class == "SystemExit" else f"{exc_class}: {(exc_message or '')[:200]}"
    return f"crashed before any verdict ({kind}{at}): only its own assertion or exit is a verdict"


def judge_single(record: dict, rep: Reproducer, scenario: Scenario, mode: str, res: sandbox.SandboxResult) -> CheckResult:
    """One single.py run: the trigger must raise the record's error in 'before' and not in
    'after'; the validation must reject 'before' and accept 'after'."""
    from errkb.verify.reproducers.single import RESULT_PREFIX

    state = scenario.state
    check = f"reproducer:{rep.name}:{scenario.name}" if mode == "trigger" else f"validationCode:{state}:in-reproducer"
    line = next((ln for ln in res.stdout.splitlines() if ln.startswith(RESULT_PREFIX)), None)
    if line is None:
        outcome = res.outcome if res.outcome in ("timeout", "error") else "error"
        return from_sandbox(record, rep.tier, check, res, outcome=outcome,
                             reason=f"the reproducer produced no result ({res.reason})")
    observed = json.loads(line[len(RESULT_PREFIX):])
    raised = bool(observed.get("raised"))
    exc_class, exc_message = observed.get("exception_class"), observed.get("exception_message")
    details = {"scenario": scenario.description, "state": {"argv": observed.get("argv"), "env": observed.get("env")},
               "versions": observed.get("versions", {}), "note": observed.get("note"), "sandbox_notes": res.notes}
    base = dict(record_id=record["id"], slug=record["slug"], tier=rep.tier, check=check, duration_s=res.duration_s,
                exception_class=exc_class, exception_message=exc_message, details=details)
    shown = f"{exc_class}: {(exc_message or '')[:300]}"
    if mode == "validate":
        if raised and exc_class in SINGLE_NOT_RUN:
            return CheckResult(outcome="error", reason=f"the validation code could not run in the {state!r} state ({shown})", **base)
        crash = validation_crash(record, exc_class, exc_message, observed.get("frames") or []) if raised else None
        if crash:
            # Neither a rejection of 'before' nor of 'after': the proof itself is in error.
            return CheckResult(outcome="error", reason=f"the validation code {crash} in the {state!r} state", **base)
        if state == "before":
            if raised:
                return CheckResult(outcome="pass", reason=f"rejects the 'before' state, as it must ({shown})", **base)
            return CheckResult(outcome="fail", reason="validation does not reject the broken state (it passed in 'before')", **base)
        if raised:
            return CheckResult(outcome="fail", reason=f"validation rejects the fixed state ({shown})", **base)
        return CheckResult(outcome="pass", reason="accepts the 'after' state", **base)
    matched, match_why = message_matches(record, exc_message) if raised else (None, "nothing raised")
    base["message_matched"] = matched
    site = raise_site(observed) if raised else None
    at = f" at {site['file_name']}:{site['line']} in {site['function']}" if site else ""
    if site:
        details["raise_site"] = {k: v for k, v in site.items() if k != "frames"}
        if matched:
            details["drift"] = record_drift(record, site)
    if raised and matched is None:
        return CheckResult(outcome="error", reason=f"{exc_class} raised but could not be matched: {match_why}", **base)
    if scenario.expect_raise:
        if raised and matched:
            wrong = error_mismatch(record, exc_class, site)
            if wrong:
                return CheckResult(outcome="fail", reason=f"the record's message was raised{at}, but not as the record "
                                                          f"says: {'; '.join(wrong)}", **base)
            return CheckResult(outcome="pass", reason=f"{exc_class} raised{at}; {match_why}", **base)
        if raised and exc_class in SINGLE_NOT_RUN:
            return CheckResult(outcome="error", reason=f"the {scenario.state!r} state could not run ({shown}{at})", **base)
        return CheckResult(outcome="fail", reason=f"expected the record's error; saw {shown if raised else 'no exception'}", **base)
    if raised and matched:
        return CheckResult(outcome="fail", reason=f"the record's error is still raised ({exc_class}{at})", **base)
    if raised:
        # Something else stopped the fixed state (a child that cannot start, a bad argument):
        # it never showed the fix working, so it is no pass.
        return CheckResult(outcome="error", reason=f"the {scenario.state!r} state crashed ({shown}{at}): "
                                                   "no verdict that the fix removes the error", **base)
    return CheckResult(outcome="pass", reason=f"no exception matching messagePattern; {observed.get('note') or 'no exception'}",
                       **base)


def judge_scenario(record: dict, rep: Reproducer, scenario: Scenario, res: sandbox.SandboxResult) -> list[CheckResult]:
    """Turn one driver run into the scenario's run (and its validation run)."""
    from errkb.verify.reproducers.fused_workspace import RESULT_PREFIX

    check = f"reproducer:{rep.name}:{scenario.name}"
    line = next((ln for ln in res.stdout.splitlines() if ln.startswith(RESULT_PREFIX)), None)
    if line is None:
        outcome = res.outcome if res.outcome in ("timeout", "error") else "error"
        return [from_sandbox(record, rep.tier, check, res, outcome=outcome,
                              reason=f"the reproducer produced no result ({res.reason})")]
    observed = json.loads(line[len(RESULT_PREFIX):])
    ranks = observed["ranks"]
    details = {"scenario": scenario.description, "ranks": [{k: v for k, v in r.items() if k != "log_tail"} for r in ranks],
               "rank_logs": [r.get("log_tail", "")[-1500:] for r in ranks], "sandbox_notes": res.notes}
    base = dict(record_id=record["id"], slug=record["slug"], tier=rep.tier, check=check, duration_s=res.duration_s, details=details)
    if observed.get("timed_out"):
        return [CheckResult(outcome="timeout", reason=f"ranks did not finish within {observed['timeout_s']:g}s; ended by pid", **base)]
    broken = [r for r in ranks if "setup_error" in r or "node_count" not in r]
    if broken:
        why = broken[0].get("setup_error", "no result")
        return [CheckResult(outcome="error", reason=f"rank {broken[0]['rank']} failed before the check: {why}", **base)]
    counts = sorted({r["node_count"] for r in ranks})
    if scenario.expect_node_count is not None and counts != [scenario.expect_node_count]:
        why = f"precondition failed: vLLM's get_node_count() gave {counts}, expected {scenario.expect_node_count}"
        return [CheckResult(outcome="error", reason=why, **base)]

    raiser = next((r for r in ranks if r.get("raised")), None)
    exc_class = raiser.get("exception_class") if raiser else None
    exc_message = raiser.get("exception_message") if raiser else None
    matched, match_why = message_matches(record, exc_message) if raiser else (False, "nothing raised")
    site = raise_site(raiser) if raiser else None
    if site:
        details["raise_site"] = site
        if matched:
            # Only the record's own error says anything about the record's accuracy.
            details["drift"] = record_drift(record, site)
    if scenario.expect_raise:
        wrong = error_mismatch(record, exc_class, site) if raiser and matched else []
        if raiser and matched and wrong:
            outcome = "fail"
            where = f" at {site['file_name']}:{site['line']} in {site['function']}" if site else ""
            reason = f"the record's message was raised{where}, but not as the record says: {'; '.join(wrong)}"
        elif raiser and matched:
            outcome = "pass"
            where = f"{site['file_name']}:{site['line']} in {site['function']}"
            reason = f"{exc_class} raised at {where}; {match_why} (get_node_count()={counts[0]})"
        elif raiser and matched is None:
            outcome, reason = "error", f"{exc_class} raised but could not be matched: {match_why}"
        else:
            outcome = "fail"
            reason = f"expected the record's error; saw {exc_class + ': ' + (exc_message or '') if raiser else 'no exception'}"
    else:
        if raiser and matched:
            outcome, reason = "fail", f"the record's error is still raised ({exc_class} at {site['file_name']}:{site['line']})"
        elif raiser and matched is None:
            outcome, reason = "error", f"{exc_class} raised but could not be matched: {match_why}"
        elif raiser and ranks[0].get("fi_ar_available") is not False:
            # Only the driver's own finding (FlashInfer absent, measured before the call) says a
            # later exception lies past the record's check; any other one is a crash, no pass.
            outcome = "error"
            reason = (f"the {scenario.state!r} state crashed ({exc_class}: {(exc_message or '')[:200]}"
                      + (f" at {site['file_name']}:{site['line']} in {site['function']}" if site else "")
                      + "): no verdict that the fix removes the error")
        else:
            outcome = "pass"
            next_step = (f"then {exc_class}: {exc_message} at {site['file_name']}:{site['line']} in {site['function']}"
                         if raiser else f"workspace: {ranks[0].get('workspace')}")
            reason = f"no exception matching messagePattern (get_node_count()={counts[0]}); {next_step}"
            multicast = [ln.strip() for r in ranks for ln in r.get("log_tail", "").splitlines() if "multicast" in ln.lower()]
            if multicast:
                reason += f"; vLLM logged: {multicast[0][:300]}"
            if raiser and ranks[0].get("fi_ar_available") is False:
                reason += (" — fixed, workspace not creatable on this host (no flashinfer/CUDA)" if scenario.state == "after"
                           else " — the check does not fire; workspace not creatable on this host (no flashinfer/CUDA)")
    out = [CheckResult(outcome=outcome, reason=reason, exception_class=exc_class, exception_message=exc_message,
                       message_matched=matched if raiser else None, **base)]
    validations = [r.get("validation") for r in ranks if r.get("validation")]
    if scenario.run_validation and validations:
        crashed = [(v, validation_crash(record, v.get("exception_class"), v.get("exception_message"), v.get("frames") or []))
                   for v in validations if v["outcome"] == "fail" and "frames" in v]
        crashed = [(v, why) for v, why in crashed if why]
        if crashed:
            v, why = crashed[0]
            out.append(CheckResult(
                record_id=record["id"], slug=record["slug"], tier=rep.tier, check=f"validationCode:{scenario.state}:in-reproducer",
                outcome="error", reason=f"the validation code {why} in the {scenario.state!r} state",
                exception_class=v.get("exception_class"), exception_message=v.get("exception_message"),
                duration_s=res.duration_s, details={"per_rank": validations}))
            return out
        failed = [v for v in validations if v["outcome"] == "fail"]
        must_fail = scenario.state == "before"
        v_ok = bool(failed) if must_fail else not failed
        first = (failed or validations)[0]
        v_reason = (f"{'rejects' if failed else 'accepts'} the {scenario.state!r} state with get_node_count()={counts[0]}"
                    + (f" ({first['exception_class']}: {first['exception_message']})" if failed else "")
                    + ("" if v_ok else (" — it must fail there" if must_fail else " — it must pass there")))
        out.append(CheckResult(
            record_id=record["id"], slug=record["slug"], tier=rep.tier, check=f"validationCode:{scenario.state}:in-reproducer",
            outcome="pass" if v_ok else "fail", reason=v_reason,
            exception_class=first.get("exception_class"), exception_message=first.get("exception_message"),
            duration_s=res.duration_s, details={"per_rank": validations},
        ))
    return out


def raise_site(rank: dict) -> dict | None:
    frames = rank.get("frames") or []
    if not frames:
        return None
    last = frames[-1]
    path = last["file"]
    m = re.search(r"(?:site-packages|dist-packages)/(.+)$", path)
    return {"file": m.group(1) if m else path, "file_name": os.path.basename(path), "line": last["line"],
            "function": last["function"], "frames": frames}


def record_drift(record: dict, site: dict) -> list[str]:
    """Where the record disagrees with what the traceback really shows."""
    drift = []  # a wrong file or function is no drift but a failure (errkb.records.proofs.error_mismatch)
    if record.get("lineNumber") and site["line"] != record["lineNumber"]:
        start, end = record.get("sourceCodeStart"), record.get("sourceCodeEnd")
        inside = isinstance(start, int) and isinstance(end, int) and start <= site["line"] <= end
        drift.append(f"record's lineNumber is {record['lineNumber']}; raised at line {site['line']}"
                     + (" (inside the record's window)" if inside else ""))
    prose = " ".join(str(record.get(k) or "") for k in ("documentation", "triggerScenarios", "commonSituations"))
    if site["function"] not in prose:
        named = sorted({n for n in re.findall(r"\b[a-z_][a-z0-9]*(?:_[a-z0-9]+){2,}\b", prose)
                        if n not in (record.get("sourceCode") or "")})
        if named:
            drift.append(f"record's documentation names {', '.join(named)}; the traceback raises in {site['function']}")
    return drift
