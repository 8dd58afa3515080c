"""Verification: running records' fixes and validation code in the sandbox, real
reproducers, and the proofs committed with the data.

The sandbox module is also run as a file inside the run's namespaces, so it imports
nothing from errkb.
"""
