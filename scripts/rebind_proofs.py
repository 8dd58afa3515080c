"""Bind the committed proofs to the records they proved: write each proof's ``bound``
(the sha256 of the record fields it exercised, and its release) from the bundled records.

    python scripts/rebind_proofs.py

Run once, for proofs written before proofs carried a digest: those were made for exactly
the records as committed. A proof that already has a digest is left as it is, and one whose
digest differs from its record is reported and left out of date (errkb.verify.proofs.rebind).
Exit status 1 when any proof is left unbound.
"""

from __future__ import annotations

import sys

from errkb.records.read import read_records
from errkb.resources import data_dir
from errkb.verify.proofs import rebind


def main() -> int:
    records = {item.record["id"]: item.record for item in read_records([data_dir()]) if item.record}
    written, left = rebind(records)
    for rid in written:
        print(f"bound {rid}")
    for rid, why in left:
        print(f"left {rid}: {why}", file=sys.stderr)
    print(f"{len(written)} proof(s) bound, {len(left)} left unbound")
    return 1 if left else 0


if __name__ == "__main__":
    sys.exit(main())
