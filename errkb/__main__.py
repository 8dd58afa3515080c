"""``python -m errkb``, and the file spark-submit runs, since it takes a .py file and not a
console script: ``spark-submit .../errkb/__main__.py spark-enrich --input ... --output ...``
(the job itself runs from the imported errkb.enrich.spark, so executors unpickle its
functions by reference)."""

import os
import sys

if not __package__:
    # Run as a file: Python put errkb/ itself first on sys.path, where its subpackages
    # would shadow top-level modules (site, ...). Take it off before importing anything.
    _here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _here]

from errkb.console import main

if __name__ == "__main__":
    main()
