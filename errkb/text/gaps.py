"""Running a gap plan (``errkb.text.patterns``: a pattern of literals and ``(.+?)``-like
gaps) on one line: the matcher's fast confirm, apart from the pattern analysis so a
process that only matches (a cold ``errkb explain``, a log filter) does not load it.
"""

from __future__ import annotations


def gap_match(text: str, plan: tuple) -> bool:
    """Whether a gap-plan pattern matches `text`, exactly as re.search would, for a
    text WITHOUT newlines (the caller checks). Linear: one str.find per literal.

    Placing every literal at its earliest possible position is optimal because the
    gaps only have lower bounds, so the greedy scan decides existence exactly."""
    anchored_start, anchored_end, lead, literals, gaps, tail = plan
    if literals and not anchored_start and not anchored_end:
        # the usual shape, on the matcher's hot path: one find per literal
        first = literals[0]
        pos = text.find(first, lead or 0)
        if pos < 0:
            return False
        pos += len(first)
        i = 0
        for gap in gaps:
            i += 1
            lit = literals[i]
            pos = text.find(lit, pos + gap)
            if pos < 0:
                return False
            pos += len(lit)
        return tail is None or len(text) - pos >= tail
    n = len(text)
    if not literals:
        need = lead or 0
        if anchored_start and anchored_end:
            return n >= need if lead is not None else n == 0
        return n >= need
    last_index = len(literals) - 1
    pos = 0
    for i, lit in enumerate(literals):
        if i == last_index and anchored_end and tail is None:
            # the last literal must end the text, no earlier than the greedy position
            earliest = pos + (gaps[i - 1] if i else (lead or 0))
            start = n - len(lit)
            if start < earliest or not text.endswith(lit):
                return False
            if i == 0 and anchored_start and lead is None:
                return start == 0
            return True
        if i == 0:
            if anchored_start and lead is None:
                if not text.startswith(lit):
                    return False
                start = 0
            else:
                start = text.find(lit, lead or 0)
        else:
            start = text.find(lit, pos + gaps[i - 1])
        if start < 0:
            return False
        pos = start + len(lit)
    if tail is not None:
        return n - pos >= tail
    return True
