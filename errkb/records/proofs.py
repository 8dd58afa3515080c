"""Proofs as data: reading the committed proofs (``data/proofs/<record-id>.json``) and
errkb's findings (``data/findings/``), and what they say per record — the one line
explain prints, the status the site filters on, the coverage figure stats prints.

Producing proofs (running reproducers) is errkb.verify.proofs; this module only reads,
beside the other data errkb keeps next to the records (errkb.records.variants), so explain,
the site and stats show proof status without importing the verification machinery.

Coverage: a record is "proven on CPU" with a committed cpu-real proof, "proven on GPU"
with a committed gpu proof, "GPU-only" when its only reproducers need a GPU and none
has been proven yet, else "unproven". Which reproducers a record has is the registry's
(errkb.verify.reproducers), written beside the proofs as ``data/proofs/reproducers.json``
by errkb.verify.proofs.write_reproducer_index and kept equal to it by tests/test_proof.py.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

from errkb.errors import ErrkbError
from errkb.resources import data_dir

# The tiers of each record's registered reproducers; not a proof (it has no record_id).
REPRODUCER_INDEX = "reproducers.json"


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


def status_of(record_id: str, proof: dict | None) -> str:
    """"proven on CPU" | "proven on GPU" | "GPU-only" | "unproven"."""
    if proof and proof.get("status") == "proven":
        return "proven on CPU" if proof.get("tier") == "cpu-real" else "proven on GPU"
    if set(reproducer_tiers().get(record_id, ())) == {"gpu"}:
        return "GPU-only"
    return "unproven"


def proof_line(proof: dict | None) -> str:
    """One line for explain: "Reproduced with torch 2.13.0+cpu on 2026-12-02" or "Not reproduced yet"."""
    if not proof or proof.get("status") != "proven":
        return "Not reproduced yet"
    lib = proof.get("library") or {}
    what = f"{lib.get('name')} {lib.get('version')}" if lib else "its library"
    return f"Reproduced with {what} on {proof.get('date')}"


def proof_summary(record_id: str, folder: Path | None = None) -> dict:
    """The small proof field explain's JSON carries."""
    proof = load_proof(record_id, folder)
    return {"status": status_of(record_id, proof), "line": proof_line(proof),
            "library": (proof or {}).get("library") if proof and proof.get("status") == "proven" else None,
            "date": (proof or {}).get("date") if proof and proof.get("status") == "proven" else None}


def coverage(record_ids: list[str], folder: Path | None = None) -> dict:
    proofs = all_proofs(folder)
    per = {rid: status_of(rid, proofs.get(rid)) for rid in record_ids}
    counts = {k: 0 for k in ("proven on CPU", "proven on GPU", "GPU-only", "unproven")}
    for s in per.values():
        counts[s] += 1
    return {"total": len(record_ids), "counts": counts, "records": per}


def coverage_line(cov: dict) -> str:
    c = cov["counts"]
    gpu = f", {c['proven on GPU']} proven on GPU" if c["proven on GPU"] else ""
    return (f"proof coverage: {c['proven on CPU']}/{cov['total']} proven on CPU{gpu}, "
            f"{c['GPU-only']} GPU-only, {c['unproven']} unproven")
