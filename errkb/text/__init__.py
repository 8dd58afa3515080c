"""Pattern text and log text, at the base of the house: the dataset's regex dialect
(``patterns``: what a ``messagePattern`` needs, its exact RE2 translation; ``gaps``:
literal-and-gap plans decided with ``str.find``; ``bounded``: one search of one
untrusted pattern) and how text is normalised before a pattern runs on it
(``normalize``).

Pure functions importing nothing of errkb above the base: lint (records) judges a
pattern with the same analysis and normalisation the matcher (match) runs, and the
site and the miner use them too.
"""
