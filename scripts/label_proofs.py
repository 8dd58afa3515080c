"""Write each committed proof's strength and label (what its run exercised) from its reproducer
as registered (``case(..., label=...)`` in errkb/verify/reproducers): "strong" for the user's entry
point on the release nearest the record, else "labelled" with the phrase errkb explain shows.

    python scripts/label_proofs.py

Only those two fields change (errkb.verify.proofs.relabel); the binding and the checks are the run's.
"""

from __future__ import annotations

import sys

from errkb.verify.proofs import relabel


def main() -> int:
    written = relabel()
    for rid, strength, label in written:
        print(f"{rid}: {strength}{': ' + label if label else ''}")
    print(f"{len(written)} proof(s) relabelled")
    return 0


if __name__ == "__main__":
    sys.exit(main())
