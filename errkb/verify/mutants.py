"""Mutants: the wrong records a reviewer would try against a proven record, each shown caught.

From a proven record (and its proof) each registered kind derives one mutated record:

* ``non-fixing-fix``: the exampleFix's "after" made equal to its "before";
* ``wrong-message``: errorMessage and messagePattern changed to a plausible, different
  message (one word swapped in both: "CUDA" -> "ROCm");
* ``wrong-class``: an errorClass that is neither the record's nor the one observed;
* ``always-true-validation``: a validationCode that is ``pass``;
* ``always-false-validation``: a validationCode that rejects every state (its own assert);
* ``crashing-validation``: the validationCode with ``int("total*2")`` before any verdict.

A mutant is *killed* when the real prove machinery (errkb.verify.proofs) does not judge the
mutated record proven; it *survives* when it does. Only what the mutation can change is
re-run: a message or class mutant re-judges the original run's observations
(``CheckResult.rejudge``); a validation mutant re-runs only the validation in the states that
can kill it; the exampleFix mutant re-runs the "after" trigger. The checks not re-run are the
original run's, and ``proofs.judge`` rules on the whole.

Kinds that can only die once other work lands say so in ``AWAITS`` (``awaits`` names the
records: a non-fixing exampleFix survives only where the case hard-codes its states): their
survivors are counted as survivors (the score shows them) but do not fail ``errkb prove
--check``; any other survivor does.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
from dataclasses import dataclass

from errkb.records.proofs import WRAPPERS
from errkb.verify.fixstates import before_text, marked_after, parse_error, statement_span, uncommented, without_comment
from errkb.verify.judge import CheckResult, message_matches
from errkb.verify.shell import SECTION_HEADER

KILLED, SURVIVED, NOT_DERIVED = "killed", "survived", "not derived"

# kind -> why its survivors are expected today (issue 25); empty once those land.
AWAITS = {
    "non-fixing-fix": "its case still hard-codes its states instead of mapping the record's exampleFix (issue 25 item 1)",
}


def awaits(kind: str, proof) -> str | None:
    """Why a survivor of ``kind`` is expected today, or None. A non-fixing exampleFix can only
    die where the proof's states come from the record: its proof ran an ``exampleFix:states``
    check (a case with a MAPPING, or the multi-rank driver reading the exampleFix's sections);
    a case that still hard-codes its states cannot see the mutation."""
    if kind != "non-fixing-fix":
        return AWAITS.get(kind)
    from_record = any(c.check == "exampleFix:states" and c.outcome == "pass" for c in proof.checks)
    return None if from_record else AWAITS[kind]


@dataclass(frozen=True)
class Mutant:
    kind: str
    record: dict | None  # the mutated record; None when the kind cannot be derived from this record
    change: str  # what was changed, or why it could not be derived
    steps: tuple[frozenset, ...]  # (state, mode) runs to try in turn, stopping at a kill; () = re-judge only


@dataclass(frozen=True)
class Kind:
    name: str
    derive: Callable[[dict, dict | None], tuple[dict | None, str]]  # (record, proof dict) -> (mutated, change)
    steps: tuple[frozenset, ...]


KINDS: dict[str, Kind] = {}


def kind(name: str, steps: tuple[tuple[tuple[str, str], ...], ...] = ()):
    """Register a mutant kind: ``derive(record, proof)`` returns (the mutated record or None, what changed or why not)."""
    def register(derive):
        KINDS[name] = Kind(name, derive, tuple(frozenset(step) for step in steps))
        return derive
    return register


def _with(record: dict, **fields) -> dict:
    return {**record, **fields}


# -- (a) a non-fixing exampleFix ------------------------------------------------------



def _parses(code: str) -> bool:
    return parse_error(code) is None


def _has_code(text: str) -> bool:
    return any(line.strip() and not line.lstrip().startswith("#") for line in text.splitlines())


def _uncommented_code(block: str) -> str | None:
    """A block of commented-out Python (every line a comment) as code, when it parses and does
    something (a call or an assignment: a lone commented word is prose); else None."""
    code = uncommented(block.splitlines())
    if code is None or not _parses(code):
        return None
    does = any(isinstance(node, (ast.Call, ast.Assign, ast.AugAssign)) for node in ast.walk(ast.parse(code)))
    return code if does else None


def non_fixing_fix(fix: str | None) -> tuple[str | None, str]:
    """The exampleFix with its "after" made equal to its "before", or (None, why not).

    Sections (``# before`` / ``# after`` headers, errkb.verify.shell.split_states): each after
    section's body becomes the before sections' body. A Python fix with a ``# before: <code>``
    line and one statement marked ``# after``: the marked statement becomes that code."""
    if not fix or not fix.strip():
        return None, "the record has no exampleFix"
    marks = list(SECTION_HEADER.finditer(fix))
    names = {m.group(1).lower() for m in marks}
    if names == {"before", "after"}:
        bodies = [fix[m.end():(marks[i + 1].start() if i + 1 < len(marks) else len(fix))].strip("\n")
                  for i, m in enumerate(marks)]
        before = "\n".join(b for m, b in zip(marks, bodies) if m.group(1).lower() == "before").strip("\n")
        if not _has_code(before):  # a `# before: <code>` header is the before's code
            heads = [before_text(m.group(0)) for m in marks if m.group(1).lower() == "before"]
            code = [without_comment(h).strip() for h in heads if h is not None]
            if len(code) == 1 and _parses(code[0]):
                before = code[0]
        if not _has_code(before):  # a commented-out before block (what errkb.verify.fixstates runs)
            before = _uncommented_code(before) or before
        if not _has_code(before):
            return None, "the exampleFix's 'before' is prose, not code: nothing to make the 'after' equal to"
        out = fix[:marks[0].start()]
        for m, body in zip(marks, bodies):
            out += m.group(0) + "\n" + (body if m.group(1).lower() == "before" else before) + "\n\n"
        return out.rstrip("\n") + "\n", "the 'after' section's body replaced by the 'before' section's"
    lines = fix.splitlines()
    befores = [text for line in lines if (text := before_text(line)) is not None]
    marked = [i for i, line in enumerate(lines) if marked_after(line)]
    if len(befores) == 1 and len(marked) == 1:
        code = without_comment(befores[0]).strip()
        if not _parses(code):
            return None, f"the '# before:' line is prose, not code: {code[:80]!r}"
        if not _parses(fix):
            return None, "the exampleFix does not parse as Python"
        line = marked[0] + 1
        span = statement_span(ast.parse(fix), line, lines)  # the statement the state parse replaces, one rule for both
        if span is None:
            return None, f"line {line} marked '# after' is not a statement of its own line"
        start, end = span
        indent = re.match(r"\s*", lines[start - 1]).group(0)
        out = "\n".join(lines[:start - 1] + [f"{indent}{code}  # after"] + lines[end:]) + "\n"
        if not _parses(out):
            return None, "the fix with its '# before:' code in place of the '# after' statement does not parse"
        return out, f"the statement marked '# after' (line {line}) replaced by the '# before:' code: {code[:80]}"
    return None, "the exampleFix has neither '# before'/'# after' sections nor one '# before: <code>' line over one '# after' statement"


@kind("non-fixing-fix", steps=((("after", "trigger"),),))
def _non_fixing(record: dict, proof: dict | None) -> tuple[dict | None, str]:
    fix, change = non_fixing_fix(record.get("exampleFix"))
    return (None if fix is None else _with(record, exampleFix=fix)), change


# -- (b) a message the library never raises -------------------------------------------

# A plausible neighbour of a word in an error message; else a fallback noun.
SWAPS = {
    "CUDA": "ROCm", "ROCm": "CUDA", "NCCL": "Gloo", "MPI": "UCC", "GPU": "TPU", "CPU": "GPU",
    "initialized": "destroyed", "initializing": "destroying", "supported": "deprecated", "greater": "smaller",
    "smaller": "larger", "less": "more", "divisible": "aligned", "match": "exceed", "default": "global",
    "Default": "Global", "Unknown": "Deprecated", "Timed": "Stopped", "twice": "late", "quantization": "compilation",
    "attention": "embedding", "memory": "storage", "rendezvous": "transport", "process": "thread",
}
FALLBACK_WORDS = ("scheduler", "tokenizer", "executor", "sampler")


def _word(word: str) -> re.Pattern:
    return re.compile(rf"(?<![\w\\]){re.escape(word)}(?!\w)")


def wrong_message(record: dict, observed: str | None = None) -> tuple[dict | None, str]:
    """The record with one word of its errorMessage swapped, in its messagePattern too, so
    that the pattern matches the new message and neither the record's nor the observed one."""
    message, pattern = str(record.get("errorMessage") or ""), str(record.get("messagePattern") or "")
    words = list(dict.fromkeys(re.findall(r"[A-Za-z][A-Za-z]{2,}", message)))
    ordered = [w for w in words if w in SWAPS] + sorted((w for w in words if w not in SWAPS), key=len, reverse=True)
    for word in ordered:
        if not _word(word).search(pattern):
            continue
        new = SWAPS.get(word) or next((f for f in FALLBACK_WORDS if f not in message.lower()), None)
        if new is None:
            continue
        mutated = _with(record, errorMessage=_word(word).sub(new, message), messagePattern=_word(word).sub(new, pattern))
        if not message_matches(mutated, mutated["errorMessage"])[0]:
            continue  # the pattern no longer matches its own message: not a record a reviewer would write
        if any(message_matches(mutated, m)[0] for m in (message, observed) if m):
            continue  # still matches what the library raises: no different message
        return mutated, f"errorMessage and messagePattern: {word!r} -> {new!r}"
    return None, "no word of the errorMessage appears literally in its messagePattern"


@kind("wrong-message")
def _wrong_message(record: dict, proof: dict | None) -> tuple[dict | None, str]:
    return wrong_message(record, ((proof or {}).get("observed") or {}).get("exception_message"))


# -- (c) a wrong errorClass ------------------------------------------------------------

CLASSES = ("RuntimeError", "ValueError", "TypeError", "KeyError", "NotImplementedError", "AssertionError")


@kind("wrong-class")
def _wrong_class(record: dict, proof: dict | None) -> tuple[dict | None, str]:
    observed = ((proof or {}).get("observed") or {}).get("exception_class")
    taken = {record.get("errorClass"), observed} | {inner for outer, inner in WRAPPERS if outer == observed}
    new = next(c for c in CLASSES if c not in taken)
    return _with(record, errorClass=new), f"errorClass {record.get('errorClass')} -> {new} (the run raised {observed})"


# -- (d, e, f) validations -------------------------------------------------------------

ALWAYS_TRUE = "pass\n"
ALWAYS_FALSE = 'assert False, "errkb mutant: rejects every state"\n'
CRASH = 'int("total*2")  # errkb mutant: crashes before any verdict\n'


def _validation(record: dict, code: str, change: str) -> tuple[dict | None, str]:
    if not str(record.get("validationCode") or "").strip():
        return None, "the record has no validationCode"
    return _with(record, validationCode=code), change


@kind("always-true-validation", steps=((("before", "validate"),),))
def _always_true(record: dict, proof: dict | None) -> tuple[dict | None, str]:
    return _validation(record, ALWAYS_TRUE, "validationCode replaced by `pass` (accepts every state)")


@kind("always-false-validation", steps=((("after", "validate"),),))
def _always_false(record: dict, proof: dict | None) -> tuple[dict | None, str]:
    return _validation(record, ALWAYS_FALSE, "validationCode replaced by `assert False` (rejects every state)")


@kind("crashing-validation", steps=((("before", "validate"),), (("after", "validate"),)))
def _crashing(record: dict, proof: dict | None) -> tuple[dict | None, str]:
    code = str(record.get("validationCode") or "")
    return _validation(record, CRASH + code, "`int(\"total*2\")` (a ValueError) put before the validationCode's first line")


# -- deriving and judging --------------------------------------------------------------


def derive(record: dict, proof: dict | None = None) -> list[Mutant]:
    """Every registered kind's mutant of ``record`` (``proof``: its proof as a dict, for what was observed)."""
    out = []
    for k in KINDS.values():
        mutated, change = k.derive(record, proof)
        out.append(Mutant(k.name, mutated, change, k.steps))
    return out


def _verdict(mutant: Mutant, status: str, reason: str, new: list[CheckResult], ran: list[str], proof) -> dict:
    from errkb.verify.runs import FAILING

    if status == "proven":
        return {"verdict": SURVIVED, "change": mutant.change, "by": None, "runs": ran,
                "why": "the mutated record is still proven: " + reason,
                "awaits": awaits(mutant.kind, proof)}
    bad = next((c for c in new if c.outcome in FAILING), None)
    return {"verdict": KILLED, "change": mutant.change, "by": bad.check if bad else None, "runs": ran,
            "why": f"{status}: " + (f"{bad.outcome}: {bad.reason}" if bad else reason)}


def judge_mutant(mutant: Mutant, proof, prove_record: Callable, judge: Callable, tier: str = "cpu-real",
                 note: Callable[[str], None] | None = None) -> dict:
    """Whether the prove machinery catches ``mutant`` of the record ``proof`` (an
    errkb.verify.proofs.Proof, just run) proved: re-judging or re-running only what the
    mutation changes, the rest taken from ``proof``'s checks. ``prove_record`` and ``judge``
    are errkb.verify.proofs' (passed in: that module calls this one)."""
    if mutant.record is None:
        return {"verdict": NOT_DERIVED, "change": None, "by": None, "runs": [], "why": mutant.change}
    if not mutant.steps:
        new, seen = [], set()
        for c in proof.checks:
            if c.rejudge is not None and id(c.rejudge) not in seen:
                seen.add(id(c.rejudge))
                new.extend(c.rejudge(mutant.record))
        names = {c.check for c in new}
        status, reason = judge(mutant.record, tier, [c for c in proof.checks if c.check not in names] + new)
        return _verdict(mutant, status, reason, new, ["re-judged: " + ", ".join(sorted(names))], proof)
    verdict, ran = None, []
    for step in mutant.steps:
        again = prove_record(mutant.record, tier, note=note, select=step)
        new = again.checks
        ran += [c.check for c in new]
        names = {c.check for c in new}
        status, reason = judge(mutant.record, tier, [c for c in proof.checks if c.check not in names] + new)
        verdict = _verdict(mutant, status, reason, new, ran, proof)
        if verdict["verdict"] == KILLED:
            break
    return verdict


def run_mutants(record: dict, proof, prove_record: Callable, judge: Callable, tier: str = "cpu-real",
                note: Callable[[str], None] | None = None) -> dict:
    """The ``mutants`` section of a proven record's proof: per kind, its verdict
    (errkb.verify.proofs.judge_mutants is the entry point)."""
    kinds = {}
    for mutant in derive(record, proof.to_dict()):
        kinds[mutant.kind] = judge_mutant(mutant, proof, prove_record, judge, tier, note)
        if note:
            v = kinds[mutant.kind]
            note(f"{record['id']}: mutant {mutant.kind}: {v['verdict']}" + (f" by {v['by']}" if v.get("by") else ""))
    return {"score": score(kinds), "kinds": kinds}


def score(kinds: dict) -> dict:
    killed = sum(1 for v in kinds.values() if v.get("verdict") == KILLED)
    survived = sum(1 for v in kinds.values() if v.get("verdict") == SURVIVED)
    return {"killed": killed, "tried": killed + survived}


def unexpected_survivors(section: dict | None) -> list[tuple[str, str]]:
    """(kind, why) of each survivor not expected today (its verdict names no ``awaits``): what fails ``--check``."""
    return [(k, v.get("why", "")) for k, v in ((section or {}).get("kinds") or {}).items()
            if v.get("verdict") == SURVIVED and not v.get("awaits")]
