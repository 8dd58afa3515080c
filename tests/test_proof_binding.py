"""A proof is bound to what it proved: the digest of the record fields it exercised.

A record changed after its proof (here 35ef3efc's message and pattern say "ROCm") is ingested
into a scratch store, with the bundled proofs as they are; explain, stats, the site and
``prove --check`` must each call its proof out of date, never "Reproduced", and --check must
say so without re-running anything.
"""

from __future__ import annotations

import json
import shutil

import pytest
from click.testing import CliRunner

from errkb.cli import cli
from errkb.records import proofs as D
from errkb.records.read import read_records
from errkb.resources import data_dir
from errkb.verify import proofs as P

RID = "35ef3efc5bca58bb"
RECORD_FILE = data_dir() / "pytorch/pytorch/torch-not-compiled-with-cuda-enabled.json"
ROCM = "Torch not compiled with ROCm enabled"


def _bundled() -> dict[str, dict]:
    return {item.record["id"]: item.record for item in read_records([data_dir()]) if item.record}


@pytest.fixture
def mutated_db(tmp_path):
    """A store holding 35ef3efc as a reviewer changed it: another message (and its pattern)."""
    wrapper = json.loads(RECORD_FILE.read_text())
    wrapper["record"].update(errorMessage=ROCM, messagePattern=ROCM)
    folder = tmp_path / "data"
    folder.mkdir()
    (folder / "record.json").write_text(json.dumps(wrapper))
    db = tmp_path / "store.duckdb"
    result = CliRunner().invoke(cli, ["ingest", str(folder), "--db", str(db)])
    assert result.exit_code == 0, result.output
    return db


def test_the_digest_covers_exactly_the_exercised_fields_in_any_key_order():
    record = _bundled()[RID]
    digest = D.record_digest(record)
    assert D.record_digest(dict(reversed(list(record.items())))) == digest
    assert D.record_digest(dict(record, severity="low", documentation="other prose")) == digest
    for field in D.EXERCISED:
        assert D.record_digest(dict(record, **{field: "changed"})) != digest, field


# GPU proofs whose record changed since (issue 25 item 1: 97a67fed's exampleFix now gives its
# states, and its "before" line was corrected to a whole program): only a GPU can re-prove them,
# and until one does they say so wherever the proof is shown.
AWAITING_A_GPU = {"97a67fede3271408"}


def test_every_committed_proof_is_bound_to_its_record_as_committed():
    records = _bundled()
    proofs = D.all_proofs()
    assert proofs and P.check_bindings(records, None) == []
    for rid, proof in proofs.items():
        assert proof["bound"]["release"] == f"{proof['library']['name']} {proof['library']['version']}", rid
        if rid in AWAITING_A_GPU:
            assert proof["tier"] == "gpu" and D.is_out_of_date(proof, records[rid]), rid
            assert D.status_of(records[rid], proof).startswith("out of date"), (rid, D.status_of(records[rid], proof))
            continue
        assert proof["bound"]["sha256"] == D.record_digest(records[rid]), rid
        assert D.status_of(records[rid], proof).startswith("proven"), rid


def test_explain_of_a_changed_record_says_its_proof_is_out_of_date(mutated_db):
    proof = D.load_proof(RID)
    runner = CliRunner()
    text = runner.invoke(cli, ["explain", "--db", str(mutated_db), ROCM])
    assert text.exit_code == 0, text.output
    shown = " ".join(text.output.split())  # the renderer wraps the line to the terminal's width
    assert (f"Proof out of date: the record changed since it was reproduced with torch "
            f"{proof['library']['version']} on {proof['date']}") in shown
    assert "Reproduced with" not in shown
    out = runner.invoke(cli, ["explain", "--json", "--db", str(mutated_db), ROCM])
    shown = json.loads(out.output)["matches"][0]["proof"]
    assert shown["status"] == "out of date" and shown["line"].startswith("Proof out of date")
    assert shown["library"] is None and shown["date"] is None and shown["findings"] == []


def test_stats_does_not_count_an_out_of_date_proof_as_proven(mutated_db):
    result = CliRunner().invoke(cli, ["stats", "--db", str(mutated_db)])
    assert result.exit_code == 0, result.output
    assert "proof coverage: 0/1 proven on CPU, 1 out of date, 0 GPU-only, 0 unproven" in result.output
    data = json.loads(CliRunner().invoke(cli, ["stats", "--json", "--db", str(mutated_db)]).output)
    assert data["proof_coverage"]["records"] == {RID: "out of date"}


def test_check_fails_on_an_out_of_date_proof_naming_it_without_running_it(mutated_db, tmp_path, monkeypatch):
    folder = tmp_path / "proofs"
    folder.mkdir()
    shutil.copy(data_dir() / "proofs" / f"{RID}.json", folder)

    def no_run(*args, **kwargs):
        raise AssertionError("an out-of-date proof was re-run")

    monkeypatch.setattr(P, "prove_record", no_run)
    for flags in ([], ["--bindings-only"]):
        result = CliRunner().invoke(cli, ["prove", "--check", *flags, "--proofs", str(folder), "--db", str(mutated_db)])
        assert result.exit_code == 1, result.output
        assert (f"NO LONGER HOLDS {RID}: out of date: the record's exercised fields (errorMessage, messagePattern, "
                f"errorClass, exampleFix, validationCode) changed since it was proven") in result.output


def test_a_proof_without_a_digest_is_out_of_date_and_rebind_binds_it_but_never_a_changed_one(tmp_path):
    records = _bundled()
    folder = tmp_path / "proofs"
    folder.mkdir()
    proof = json.loads((data_dir() / "proofs" / f"{RID}.json").read_text())
    del proof["bound"]
    (folder / f"{RID}.json").write_text(json.dumps(proof))
    assert D.status_of(records[RID], D.load_proof(RID, folder)) == "out of date"
    assert "it carries no digest" in P.check_bindings(records, folder)[0][1]
    assert P.rebind(records, folder) == ([RID], [])
    assert D.status_of(records[RID], D.load_proof(RID, folder)) == "proven on CPU"
    changed = {RID: dict(records[RID], errorMessage=ROCM)}
    assert P.rebind(changed, folder) == ([], [(RID, "out of date: its digest is not the record's; re-prove it")])
    assert D.status_of(changed[RID], D.load_proof(RID, folder)) == "out of date"


def test_the_site_shows_an_out_of_date_proof_as_such(mutated_db, tmp_path):
    out = tmp_path / "site"
    result = CliRunner().invoke(cli, ["site", "build", "--db", str(mutated_db), "--out", str(out)])
    assert result.exit_code == 0, result.output
    page = next(out.glob("errors/pytorch/pytorch/*.html")).read_text()
    assert "Proof out of date: the record changed since it was reproduced with torch" in page
    assert "Reproduced with" not in page
    index = (out / "index.html").read_text()
    assert "<strong>0/1</strong> reproduced on CPU · 1 out of date" in index
    search = "".join(p.read_text() for p in (out / "search").glob("*.js"))
    assert '"pr":"out of date"' in search.replace(": ", ":")


def test_a_proof_is_never_judged_from_an_id_alone():
    proof = D.load_proof(RID)
    with pytest.raises(TypeError, match="a proof is judged against the record itself"):
        D.proof_summary(RID)
    with pytest.raises(TypeError, match="a proof is judged against the record itself"):
        D.status_of(RID, proof)
    assert D.status_of("0000000000000000", None) == "unproven"  # nothing to judge: an id will do
