"""Proofs as data: reading the committed proofs (``data/proofs/<record-id>.json``) and
errkb's findings (``data/findings/``), and what they say per record — the one line
explain prints, the status the site filters on, the coverage figure stats prints.

Producing proofs (running reproducers) is errkb.verify.proofs; this module only reads,
beside the other data errkb keeps next to the records (errkb.records.variants), so explain,
the site and stats show proof status without importing the verification machinery.

Binding: a proof carries the sha256 of the record fields it exercised (EXERCISED, as
canonical JSON) and the release it ran on; a proof whose digest differs from the record as
stored now proved some other content, so it is "out of date" and nothing shows it as
proven. A proven proof without a digest is out of date too: nothing ties it to a record.

Coverage: a record is "proven on CPU" with a committed cpu-real proof bound to its
current content, "proven on GPU" with such a gpu proof, "out of date" when its proof is
bound to other content, "GPU-only" when its only reproducers need a GPU and none
has been proven yet, else "unproven". Which reproducers a record has is the registry's
(errkb.verify.reproducers), written beside the proofs as ``data/proofs/reproducers.json``
by errkb.verify.proofs.write_reproducer_index and kept equal to it by tests/test_proof.py.
"""

from __future__ import annotations

import hashlib
import json
import re
from functools import cache
from pathlib import Path

from errkb.errors import ErrkbError
from errkb.resources import data_dir

# The tiers of each record's registered reproducers; not a proof (it has no record_id).
REPRODUCER_INDEX = "reproducers.json"


# The record fields a proof exercises: the message and pattern the observed error is judged
# by, the class, the fix whose states are run, the validation that tells them apart.
EXERCISED = ("errorMessage", "messagePattern", "errorClass", "exampleFix", "validationCode")
# What a strong proof exercised (a labelled one says it in its own label).
STRONG = "the user's entry point, on the release nearest the record"
STATUSES = ("proven on CPU", "proven on GPU", "out of date", "GPU-only", "unproven")


class ProofError(ErrkbError):
    """Bad input to prove (unknown record, unreadable proof file)."""


def proofs_dir(root: Path | None = None) -> Path:
    return (root or data_dir()) / "proofs"


def findings_dir(root: Path | None = None) -> Path:
    return (root or data_dir()) / "findings"


def _read_json(path: Path) -> dict | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as e:
        raise ProofError(f"{path}: not a readable proof file: {e}") from e
    if not isinstance(data, dict):
        raise ProofError(f"{path}: not a readable proof file: top level is not an object")
    return data


def load_proof(record_id: str, folder: Path | None = None) -> dict | None:
    """The committed proof of a record, or None."""
    if not record_id or "/" in record_id or record_id.startswith("."):
        return None
    return _read_json((folder or proofs_dir()) / f"{record_id}.json")


def load_findings(record_id: str, folder: Path | None = None) -> dict | None:
    """errkb's own findings about a record whose text is kept as ingested, or None."""
    if not record_id or "/" in record_id or record_id.startswith("."):
        return None
    return _read_json((folder or findings_dir()) / f"{record_id}.json")


def all_proofs(folder: Path | None = None) -> dict[str, dict]:
    folder = folder or proofs_dir()
    out = {}
    if folder.is_dir():
        for path in sorted(folder.glob("*.json")):
            data = _read_json(path)
            if data and data.get("record_id"):
                out[data["record_id"]] = data
    return out


@cache
def reproducer_tiers() -> dict[str, tuple[str, ...]]:
    """Record id -> the tiers of its registered reproducers (the bundled index)."""
    path = proofs_dir() / REPRODUCER_INDEX
    data = _read_json(path) or {}
    tiers = data.get("tiers", {})
    if not isinstance(tiers, dict) or not all(isinstance(v, list) for v in tiers.values()):
        raise ProofError(f"{path}: not a readable proof file: \"tiers\" is not an object of lists")
    return {str(k): tuple(v) for k, v in tiers.items()}


def record_digest(record: dict) -> str:
    """sha256 of the record's exercised fields as canonical JSON (sorted keys, no spaces,
    UTF-8), so the same content always gives the same digest whatever its key order."""
    fields = {k: record.get(k) for k in EXERCISED}
    text = json.dumps(fields, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def binding(record: dict, library: dict | None) -> dict:
    """What a proof file carries to say what it proved: the digest and the release."""
    release = f"{library.get('name')} {library.get('version')}" if library else None
    return {"fields": list(EXERCISED), "sha256": record_digest(record), "release": release}


def is_out_of_date(proof: dict | None, record: dict) -> bool:
    """True when a proven proof is not bound to ``record``'s current exercised fields."""
    if not proof or proof.get("status") != "proven":
        return False
    if not isinstance(record, dict):
        # A caller of the old id-only signature: a proof can only be judged against content.
        raise TypeError(f"a proof is judged against the record itself (a dict), not {type(record).__name__} {record!r}")
    bound = proof.get("bound")
    return not isinstance(bound, dict) or bound.get("sha256") != record_digest(record)


# Documented wrappers: the observed class stands for the record's inside it, and its raise
# site is the wrapper's own (so the site is not compared either).
WRAPPERS = {("ValidationError", "ValueError"): "pydantic's ValidationError wraps the ValueError a validator raises"}
_DEF = re.compile(r"\s*(?:async\s+)?def\s+(\w+)")


def record_function(record: dict) -> str | None:
    """The function the record's raise line sits in, from its own source window (the last
    ``def`` at or above lineNumber), or None when the window shows none."""
    lines = str(record.get("sourceCode") or "").splitlines()
    start, line = record.get("sourceCodeStart"), record.get("lineNumber")
    if not isinstance(start, int) or not isinstance(line, int) or not start <= line < start + len(lines):
        return None
    for text in reversed(lines[: line - start + 1]):
        m = _DEF.match(text)
        if m:
            return m.group(1)
    return None


def error_mismatch(record: dict, exc_class: str | None, site: dict | None) -> list[str]:
    """Where an observed error is not the record's, each a reason the proof fails: its class
    (a documented wrapper aside), its raise site's file and the function its raise line sits
    in (errkb.records.proofs.record_function). The line is not judged here: a line that moved
    inside the same function is drift (errkb.verify.judge.record_drift), reported with the
    observed line."""
    want = record.get("errorClass")
    out = []
    if exc_class and want and exc_class != want and (exc_class, want) not in WRAPPERS:
        out.append(f"the record's errorClass is {want}; the run raised {exc_class}")
    if not site or (exc_class, want) in WRAPPERS:
        return out  # a wrapper's raise site is the wrapper's own
    path = record.get("filePath")
    if path and site.get("file") and not str(site["file"]).endswith(str(path)):
        out.append(f"the record's filePath is {path}; the run raised in {site['file']}")
    func = record_function(record)
    if func and site.get("function") and site["function"] != func:
        out.append(f"the record's raise line is in {func}(); the run raised in {site['function']}()")
    return out


def observed_findings(proof: dict | None, record: dict) -> list[str]:
    """Where the error a committed proof observed is not the record's (error_mismatch). A
    proof made under the rule has none (`errkb prove` fails such a run); one made before it,
    or a record edited to a content the proof still digests, shows them on the record
    (explain, the site), and `errkb prove --check` fails it."""
    if not proof or proof.get("status") != "proven" or is_out_of_date(proof, record):
        return []  # an out-of-date proof observed an error of other content: it says nothing here
    observed = proof.get("observed") or {}
    return error_mismatch(record, observed.get("exception_class"), observed.get("raise_site"))


def _record_id(record: dict | str) -> str:
    return record if isinstance(record, str) else str(record.get("id") or "")


def status_of(record: dict, proof: dict | None) -> str:
    """"proven on CPU" | "proven on GPU" | "out of date" | "GPU-only" | "unproven"."""
    if proof and proof.get("status") == "proven":
        if is_out_of_date(proof, record):
            return "out of date"
        return "proven on CPU" if proof.get("tier") == "cpu-real" else "proven on GPU"
    if set(reproducer_tiers().get(_record_id(record), ())) == {"gpu"}:
        return "GPU-only"
    return "unproven"


def _release(proof: dict) -> str:
    lib = proof.get("library") or {}
    return f"{lib.get('name')} {lib.get('version')}" if lib else "its library"


def proof_line(proof: dict | None, record: dict | None = None) -> str:
    """One line for explain: "Reproduced with torch 2.13.0+cpu on 2026-12-02 (labelled: <what it
    exercised>)" or "(strong: ...)", "Proof out of
    date: ..." (``record`` given and changed since) or "Not reproduced yet"."""
    if not proof or proof.get("status") != "proven":
        return "Not reproduced yet"
    if record is not None and is_out_of_date(proof, record):
        why = ("the record changed since it was reproduced" if isinstance(proof.get("bound"), dict)
               else "it is not bound to the record's content; it was reproduced")
        return f"Proof out of date: {why} with {_release(proof)} on {proof.get('date')}"
    found = observed_findings(proof, record) if record is not None else []
    differs = f" (the run differs from the record: {'; '.join(found)})" if found else ""
    how, label = strength(proof)
    said = f" (labelled: {label})" if how == "labelled" else f" (strong: {STRONG})" if how == "strong" else ""
    return f"Reproduced with {_release(proof)} on {proof.get('date')}{said}{differs}"


def strength(proof: dict | None) -> tuple[str | None, str | None]:
    """(strength, label) of a proof: "strong" (the user's entry point on the release nearest the record)
    or "labelled" with what it exercised; (None, None) for a proof that does not say (made before
    proofs carried it) or is not proven."""
    if not proof or proof.get("status") != "proven" or proof.get("strength") not in ("strong", "labelled"):
        return None, None
    return proof["strength"], (proof.get("label") or None) if proof["strength"] == "labelled" else None


def proof_summary(record: dict, folder: Path | None = None) -> dict:
    """The small proof field explain's JSON carries, judged against ``record`` (the record
    as stored now: a proof of other content is "out of date", never "Reproduced")."""
    proof = load_proof(_record_id(record), folder)
    status = status_of(record, proof)
    proven = status.startswith("proven")
    how, label = strength(proof) if proven else (None, None)
    return {"status": status, "line": proof_line(proof, record),
            "library": proof.get("library") if proven else None,
            "date": proof.get("date") if proven else None,
            "strength": how, "label": label}


def coverage(records: list[dict], folder: Path | None = None) -> dict:
    """Counts by status of ``records`` (the records as stored now)."""
    proofs = all_proofs(folder)
    per = {r["id"]: status_of(r, proofs.get(r["id"])) for r in records}
    counts = {k: 0 for k in STATUSES}
    for s in per.values():
        counts[s] += 1
    # Of the proven on CPU, how many are strong and how many labelled (what each exercised).
    cpu = [strength(proofs.get(rid))[0] for rid, s in per.items() if s == "proven on CPU"]
    by_strength = {"strong": cpu.count("strong"), "labelled": cpu.count("labelled")}
    return {"total": len(records), "counts": counts, "strength": by_strength, "records": per}


def coverage_line(cov: dict) -> str:
    c = cov["counts"]
    gpu = f", {c['proven on GPU']} proven on GPU" if c["proven on GPU"] else ""
    stale = f", {c['out of date']} out of date" if c["out of date"] else ""
    st = cov.get("strength") or {}
    how = f" ({st.get('strong', 0)} strong, {st.get('labelled', 0)} labelled)" if sum(st.values()) else ""
    return (f"proof coverage: {c['proven on CPU']}/{cov['total']} proven on CPU{how}{gpu}{stale}, "
            f"{c['GPU-only']} GPU-only, {c['unproven']} unproven")


def mutation_score(records: list[dict], folder: Path | None = None) -> dict:
    """The mutants of the committed proofs (each proof's ``mutants`` section, written by
    ``errkb prove``; errkb.verify.mutants): killed / tried overall and by kind, over the
    records proven now (an out-of-date proof's mutants say nothing about the record)."""
    proofs = all_proofs(folder)
    by_kind: dict[str, dict[str, int]] = {}
    proven = judged = 0
    for record in records:
        proof = proofs.get(record["id"])
        if not status_of(record, proof).startswith("proven"):
            continue
        proven += 1
        kinds = ((proof.get("mutants") or {}).get("kinds") or {}) if isinstance(proof.get("mutants"), dict) else {}
        if kinds:
            judged += 1
        for name, verdict in kinds.items():
            counts = by_kind.setdefault(str(name), {"killed": 0, "survived": 0, "not derived": 0})
            v = verdict.get("verdict") if isinstance(verdict, dict) else None
            if v in counts:
                counts[v] += 1
    killed = sum(c["killed"] for c in by_kind.values())
    tried = killed + sum(c["survived"] for c in by_kind.values())
    return {"killed": killed, "tried": tried, "proven": proven, "judged": judged, "by_kind": dict(sorted(by_kind.items()))}


def mutation_line(score: dict) -> str:
    if not score["judged"]:
        return (f"mutation score: none judged (no proof of the {score['proven']} proven records carries mutants; "
                "errkb prove ID --write data/proofs)")
    survived = [f"{k} {c['survived']}" for k, c in score["by_kind"].items() if c["survived"]]
    return (f"mutation score: {score['killed']}/{score['tried']} killed"
            + (f" (survived: {', '.join(survived)})" if survived else "")
            + (f"; {score['proven'] - score['judged']} proven record(s) without mutants judged"
               if score["judged"] < score["proven"] else ""))
