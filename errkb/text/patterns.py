"""What a dataset ``messagePattern`` (Python ``re`` syntax) needs to run safely.

Everything here is pure analysis of the parse tree that Python's own ``re`` parser
builds (``re._parser``), so the answers describe exactly the pattern ``re`` would run:

* which features only a backtracking engine can run (backreferences, lookaround,
  conditionals, possessive quantifiers, atomic groups),
* whether it can match the empty string or almost any line (too generic to be useful),
* how specific it is (literal characters every match pins down) and which literal
  factors every match must contain (the matcher's prefilter keys on the longest),
* an RE2 translation that means exactly what ``re.search`` means, where one exists.

The translation is emitted from the parse tree, never by textual substitution, because
``re`` and RE2 disagree on the details that matter for exactness: ``\\d``/``\\w``/``\\s``
are Unicode-aware in ``re`` and ASCII in RE2, ``$`` also matches before a final newline
in ``re``, ``\\b`` is Unicode-aware in ``re``, and case folding differs.
"""

from __future__ import annotations

import functools
import re
import re._casefix as _casefix
import re._compiler as _compiler
import re._constants as C
import re._parser as sre_parse
import warnings
from dataclasses import dataclass, field

# Deciding a gap plan lives apart, so a cold `errkb explain` runs plans without this module.
from errkb.text.gaps import gap_match as gap_match

try:  # the C helpers that `re` itself uses for case folding
    import _sre
except ImportError:  # pragma: no cover - CPython always has it
    _sre = None

# `re`'s parser warns (FutureWarning, on stderr) about set syntax it may read differently
# one day ("[[" is a "Possible nested set"): in a dataset's pattern that is data, and the
# pattern means today what `re` runs, so the warning is only noise in every command's output.
# Silenced around each parse of a dataset pattern only: errkb used as a library must not
# change its host's warning filters.
_SET_SYNTAX_WARNING = "Possible (nested set|set (difference|intersection|symmetric difference))"


def parse(pattern: str):
    """``re``'s parse tree of a dataset pattern, without ``re``'s set-syntax warnings.
    Raises what ``re._parser.parse`` raises."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=FutureWarning, message=_SET_SYNTAX_WARNING)
        return sre_parse.parse(pattern)


def compile_re(pattern: str) -> re.Pattern:
    """``re.compile`` of a dataset pattern, without ``re``'s set-syntax warnings."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=FutureWarning, message=_SET_SYNTAX_WARNING)
        return re.compile(pattern)

# RE2 rejects counted repetition above 1000.
RE2_MAX_REPEAT = 1000
# Counted repeats are compiled by copying their body (the `regex` module of the bounded
# path, RE2): `(?:(?:y{1000}){1000}){1000}` is 10**9 copies, which took 24 GB before the
# kernel killed ingest. A pattern whose program would be larger than this many items is
# run by no engine (0.1 s and 40 MB to compile at the limit).
MAX_EXPANDED_ITEMS = 100_000
# What compiling a pattern costs before any engine runs it, bounded per record in total
# (not per class or per form): `re`'s compiler builds a 65,536-entry map for every class
# that spans the BMP (about 10 ms each, 4,000 of them were 70 s of lint), and parsing,
# compiling and translating cost about 7 microseconds per character of pattern. Both are
# estimated from the text and the parse tree before `re` compiles anything; a pattern
# over either is E207 (a reject) and no engine ever compiles it. Real patterns are far
# below both (the longest is under 1,000 characters, the widest class \w-sized).
MAX_PATTERN_COST_CHARS = 65_536
MAX_CLASS_CODEPOINTS = 1 << 18
# Fewer pinned literal characters than this and a pattern matches almost any line.
MIN_SPECIFIC_LITERALS = 4
# Flag bits as plain ints: RegexFlag's enum operators dominate analysis time otherwise.
_I, _M, _S, _A = int(re.IGNORECASE), int(re.MULTILINE), int(re.DOTALL), int(re.ASCII)


class Untranslatable(Exception):
    """The pattern has no exact RE2 equivalent (it needs the bounded path)."""


@dataclass
class PatternAnalysis:
    pattern: str
    compile_error: str | None = None
    needs_backtracking: bool = False
    backtracking_reasons: list[str] = field(default_factory=list)
    matches_empty: bool = False
    too_generic: bool = False
    literal_chars: int = 0
    required_literals: list[str] = field(default_factory=list)
    anchored_start: bool = False
    anchored_end: bool = False
    ignore_case: bool = False
    # Nested unbounded repetition: exponential in a backtracking engine such as `re`,
    # harmless under RE2. Lint reports it; the matcher never runs it through `re`.
    exponential_in_re: bool = False
    # Sequential unbounded repeats: k of them can cost O(n**k) in `re` on a failing text.
    unbounded_repeats: int = 0
    # RE2 syntax with the same meaning as the `re` pattern, or None (see re2_issue).
    re2_pattern: str | None = None
    re2_issue: str | None = None
    # The RE2 translation is exact only on ASCII text (Unicode \b / \B); on other
    # text the matcher uses the bounded path.
    re2_ascii_only: bool = False
    # Zero-width assertions (^ $ \A \Z \b \B) make a match depend on what surrounds it,
    # so a match inside a longer text does not imply one in the message alone.
    has_assertions: bool = False
    # For the common shape "literal, (.+?), literal, ..." (optionally ^...$): the plan
    # that decides a match on one line without a regex engine (see gap_match).
    gap_plan: tuple | None = None
    # Why no engine runs this pattern although `re` compiles it (its counted repeats
    # expand past MAX_EXPANDED_ITEMS), or None.
    too_costly: str | None = None

    @property
    def linear_safe(self) -> bool:
        """True when a linear-time engine (RE2) runs this pattern with `re`'s meaning."""
        return self.compile_error is None and self.too_costly is None and self.re2_pattern is not None

    @property
    def unusable(self) -> str | None:
        """Why this pattern is never run (it does not compile, or costs too much to), or None."""
        if self.compile_error is not None:
            return f"does not compile: {self.compile_error}"
        return self.too_costly

    @property
    def prefilter_literal(self) -> str | None:
        """The longest required literal (by UTF-8 length): the prefilter's key."""
        if not self.required_literals:
            return None
        return max(self.required_literals, key=lambda s: len(s.encode("utf-8", "surrogatepass")))


# The dataset's usual shape: escaped literal text and (.+?) / (.*?) placeholders,
# optionally anchored. Such a pattern is analysed by one tokenising pass instead of
# re's parser (about 10x faster, which is most of what linting 50k records costs);
# tests/test_patterns.py checks it agrees with the full analysis on real patterns.
_SIMPLE_TOKENS = re.compile(r"((?:\\[^A-Za-z0-9]|[^\\.^$*+?{}\[\]|()])+)|\(\.([+*])\?\)")
_UNESCAPE = re.compile(r"\\(.)", re.S)


def _analyze_simple(pattern: str) -> PatternAnalysis | None:
    body = pattern
    anchored_start = body.startswith("^")
    if anchored_start:
        body = body[1:]
    # "$" ends an anchor unless escaped: an odd run of backslashes before it.
    anchored_end = body.endswith("$") and (len(body) - 1 - len(body[:-1].rstrip("\\"))) % 2 == 0
    if anchored_end:
        body = body[:-1]
    factors: list[str] = []
    run: list[str] = []
    flat: list = [_START] if anchored_start else []
    wildcards = plus = pos = 0
    for m in _SIMPLE_TOKENS.finditer(body):
        if m.start() != pos:
            return None
        pos = m.end()
        literal, star_or_plus = m.groups()
        if star_or_plus is None:
            text = _UNESCAPE.sub(r"\1", literal) if "\\" in literal else literal
            run.append(text)
            flat.append(text)
            continue
        wildcards += 1
        plus += star_or_plus == "+"
        flat.append(int(star_or_plus == "+"))
        if run:
            factors.append("".join(run))
            run.clear()
    if pos != len(body):
        return None
    if run:
        factors.append("".join(run))
    if anchored_end:
        flat.append(_END)
    literal_chars = sum(len(f) for f in factors)
    matches_empty = literal_chars == 0 and plus == 0
    return PatternAnalysis(
        pattern=pattern,
        matches_empty=matches_empty,
        too_generic=matches_empty or literal_chars < MIN_SPECIFIC_LITERALS,
        literal_chars=literal_chars,
        required_literals=factors,
        anchored_start=anchored_start,
        anchored_end=anchored_end,
        unbounded_repeats=wildcards,
        has_assertions=anchored_start or anchored_end,
        gap_plan=_plan_from_flat(flat),
    )


def analyze(pattern: str, translate: bool = True) -> PatternAnalysis:
    """Analyse one Python-``re`` pattern; never raises for bad patterns (see compile_error).

    ``translate=False`` skips the RE2 translation (about a third of the cost), for
    callers such as lint that only need the analysis.
    """
    if isinstance(pattern, str) and len(pattern) > MAX_PATTERN_COST_CHARS:
        return PatternAnalysis(pattern=pattern, too_costly=(
            f"it is {len(pattern):,} characters, over the {MAX_PATTERN_COST_CHARS:,} errkb compiles "
            "(compiling it would take seconds in every command that loads the dataset)"))
    if not translate and isinstance(pattern, str):
        simple = _analyze_simple(pattern)
        if simple is not None:
            return simple
    result = PatternAnalysis(pattern=pattern)
    if not isinstance(pattern, str):
        result.compile_error = f"pattern is {type(pattern).__name__}, not a string"
        return result
    try:
        parsed = parse(pattern)
    except (re.error, RecursionError, OverflowError, ValueError, TypeError) as e:
        result.compile_error = str(e)
        return result
    try:
        # a range is only ever written [x-y]: most patterns need no walk at all
        width = _class_codepoints(list(parsed), MAX_CLASS_CODEPOINTS) if "[" in pattern and "-" in pattern else 0
    except RecursionError:
        width = MAX_CLASS_CODEPOINTS + 1
    if width > MAX_CLASS_CODEPOINTS:
        # decided before `re` compiles it: compiling is what costs
        result.too_costly = (f"its character classes span over {MAX_CLASS_CODEPOINTS:,} code points in all, "
                             "which `re` expands one by one when it compiles the pattern")
        return result
    try:
        # compile from the parse tree (what re.compile does after parsing): catches the
        # errors only the compiler raises, without parsing twice
        _compiler.compile(parsed, 0)
    except (re.error, RecursionError, OverflowError, ValueError, TypeError) as e:
        result.compile_error = str(e)
        return result
    flags = int(parsed.state.flags)
    result.ignore_case = bool(flags & _I)
    try:
        # what the repeats add to the pattern's own size (a long literal is not costly)
        written = _expanded_items(list(parsed), 1 << 62, expand=False)
        expanded = _expanded_items(list(parsed), written + MAX_EXPANDED_ITEMS)
    except RecursionError:
        written, expanded = 0, MAX_EXPANDED_ITEMS + 1
    if expanded - written > MAX_EXPANDED_ITEMS:
        result.too_costly = (f"its counted repeats expand it by over {MAX_EXPANDED_ITEMS:,} items, more than "
                             "an engine can compile in bounded memory")

    walker = _Walker()
    walker.sequence(list(parsed), flags)
    result.backtracking_reasons = sorted(set(walker.backtracking))
    result.needs_backtracking = bool(result.backtracking_reasons)
    result.exponential_in_re = walker.nested_unbounded
    result.unbounded_repeats = walker.unbounded_repeats
    result.has_assertions = walker.assertions
    if walker.ignore_case_seen:
        result.ignore_case = True

    result.matches_empty = parsed.getwidth()[0] == 0
    factors = _required_factors(list(parsed), flags)
    result.required_literals = [f for f in factors if f]
    result.literal_chars = sum(len(f) for f in result.required_literals)
    result.too_generic = result.matches_empty or result.literal_chars < MIN_SPECIFIC_LITERALS

    items = list(parsed)
    result.anchored_start = bool(items) and items[0][0] is C.AT and items[0][1] in (C.AT_BEGINNING, C.AT_BEGINNING_STRING)
    result.anchored_end = bool(items) and items[-1][0] is C.AT and items[-1][1] in (C.AT_END, C.AT_END_STRING)

    result.gap_plan = _gap_plan(items, flags)
    if result.needs_backtracking:
        result.re2_issue = "needs backtracking: " + ", ".join(result.backtracking_reasons)
    elif result.too_costly:
        result.re2_issue = result.too_costly
    elif translate:
        try:
            translator = _RE2Translator()
            result.re2_pattern = translator.translate(parsed, flags)
            result.re2_ascii_only = translator.ascii_only
        except Untranslatable as e:
            result.re2_issue = str(e)
        except RecursionError:
            result.re2_issue = "pattern nests too deeply to translate"
    return result


# The `regex` module's Unicode properties say what re's \w and \d hold, except for
# code points assigned after Python's own Unicode version (regex's tables are newer):
# those are excluded explicitly. Far shorter than re's classes spelled out as ranges,
# which took regex about 0.2 s to compile per pattern.
_REGEX_PROPS = {C.CATEGORY_WORD: r"[\p{L}\p{N}_]", C.CATEGORY_DIGIT: r"\p{Nd}"}


@functools.cache
def _regex_excess(category) -> str:
    """A class of the code points regex's property for ``category`` holds and re's
    category does not, or "" when there are none."""
    import regex

    # every code point but the surrogates, once, scanned by both engines at C speed
    text = "".join(map(chr, range(0xD800))) + "".join(map(chr, range(0xE000, 0x110000)))
    theirs = {m.start() for m in regex.finditer(_REGEX_PROPS[category], text)}
    ours = {m.start() for m in re.finditer(r"\d" if category is C.CATEGORY_DIGIT else r"\w", text)}
    extra = [i if i < 0xD800 else i + 0x800 for i in sorted(theirs - ours)]
    return ("[" + _class_body(_ranges(extra)) + "]") if extra else ""


def _regex_word_tests() -> tuple[str, str, str, str]:
    r"""Lookarounds for "the character before/after is (not) a word character", with
    re's meaning of \w."""
    w, ex = _REGEX_PROPS[C.CATEGORY_WORD], _regex_excess(C.CATEGORY_WORD)
    if not ex:
        return f"(?<={w})", f"(?<!{w})", f"(?={w})", f"(?!{w})"
    return (f"(?<={w})(?<!{ex})", f"(?:(?<!{w})|(?<={ex}))", f"(?={w})(?!{ex})", f"(?:(?!{w})|(?={ex}))")


def _regex_category(items) -> str | None:
    r"""\w \W \d \D alone in a class, for the regex dialect; None for anything else."""
    negate = bool(items) and items[0][0] is C.NEGATE
    rest = items[1:] if negate else items
    if len(rest) != 1 or rest[0][0] is not C.CATEGORY:
        return None
    category = rest[0][1]
    negated = {C.CATEGORY_NOT_WORD: C.CATEGORY_WORD, C.CATEGORY_NOT_DIGIT: C.CATEGORY_DIGIT}
    if category in negated:
        category, negate = negated[category], not negate
    if category not in _REGEX_PROPS:
        return None
    prop, ex = _REGEX_PROPS[category], _regex_excess(category)
    inner = prop[1:-1] if prop.startswith("[") else prop
    if not negate:
        return f"(?:(?!{ex}){prop})" if ex else prop
    return f"(?:(?={ex})(?s:.)|[^{inner}])" if ex else f"[^{inner}]"


_RE2_ESCAPE = re.compile(r"\\x\{([0-9a-f]+)\}")


@functools.lru_cache(maxsize=4096)
def bounded_translation(pattern: str) -> str | None:
    """``pattern`` for the ``regex`` module with exactly ``re``'s meaning, or None when
    it needs backtracking constructs (then it runs as written, under the same bound).

    The bounded path runs linear-safe patterns where RE2 cannot (a Unicode ``\\b`` on
    non-ASCII text, or no RE2 installed). ``regex`` itself differs from ``re`` in what
    ``\\w``, ``\\s`` and ``\\b`` mean on some characters; the RE2 translation's explicit
    classes (built from Python's own tables) and lookaround word boundaries do not."""
    try:
        parsed = parse(pattern)
    except (re.error, RecursionError, OverflowError, ValueError, TypeError):
        return None
    try:
        out = _RE2Translator(dialect="regex").translate(parsed, int(parsed.state.flags))
    except (Untranslatable, RecursionError):
        return None
    # every \x{..} in the output is one _cp wrote: a literal backslash is \x{5c}
    return _RE2_ESCAPE.sub(lambda m: "\\U%08x" % int(m.group(1), 16), out)


# ---------------------------------------------------------------------------------
# Feature walk: backtracking-only constructs, nested repetition, assertions.


class _Walker:
    def __init__(self) -> None:
        self.backtracking: list[str] = []
        self.nested_unbounded = False
        self.unbounded_repeats = 0
        self.assertions = False
        self.ignore_case_seen = False

    def sequence(self, items, flags: int, in_unbounded: bool = False) -> None:
        for op, av in items:
            self.node(op, av, flags, in_unbounded)

    def node(self, op, av, flags: int, in_unbounded: bool) -> None:
        if op is C.GROUPREF:
            self.backtracking.append("backreference")
        elif op is C.GROUPREF_EXISTS:
            self.backtracking.append("conditional group")
            _group, yes, no = av
            self.sequence(list(yes), flags, in_unbounded)
            if no is not None:
                self.sequence(list(no), flags, in_unbounded)
        elif op in (C.ASSERT, C.ASSERT_NOT):
            direction, sub = av
            kind = "lookahead" if direction == 1 else "lookbehind"
            self.backtracking.append(("negative " if op is C.ASSERT_NOT else "") + kind)
            self.sequence(list(sub), flags, in_unbounded)
        elif op is C.POSSESSIVE_REPEAT:
            self.backtracking.append("possessive quantifier")
            self.sequence(list(av[2]), flags, in_unbounded)
        elif op is C.ATOMIC_GROUP:
            self.backtracking.append("atomic group")
            self.sequence(list(av), flags, in_unbounded)
        elif op in (C.MAX_REPEAT, C.MIN_REPEAT):
            lo, hi, sub = av
            # A repeat whose body can itself repeat without bound (or repeats many times)
            # is the classic exponential shape: (a+)+, (.*a){25}.
            big = hi is C.MAXREPEAT or hi > 10
            self.unbounded_repeats += big
            if in_unbounded and _has_unbounded(list(sub)):
                self.nested_unbounded = True
            if big and _has_unbounded(list(sub)):
                self.nested_unbounded = True
            self.sequence(list(sub), flags, in_unbounded or big)
        elif op is C.SUBPATTERN:
            _group, add, delete, sub = av
            sub_flags = (flags | add) & ~delete
            if sub_flags & _I:
                self.ignore_case_seen = True
            self.sequence(list(sub), sub_flags, in_unbounded)
        elif op is C.BRANCH:
            for alt in av[1]:
                self.sequence(list(alt), flags, in_unbounded)
        elif op is C.AT:
            self.assertions = True


def _expanded_items(items, limit: int, expand: bool = True) -> int:
    """How many items the pattern's program holds once each counted repeat's body is
    copied as often as the engines compiling it copy it (its upper count, or its lower
    one when unbounded); ``expand=False``: as written. Stops counting past ``limit``."""
    total = 0
    for op, av in items:
        if op in (C.MAX_REPEAT, C.MIN_REPEAT, C.POSSESSIVE_REPEAT):
            lo, hi, sub = av
            copies = (max(lo, 1) if hi is C.MAXREPEAT else max(hi, 1)) if expand else 1
            total += copies * _expanded_items(list(sub), limit // copies + 1, expand)
        elif op is C.SUBPATTERN:
            total += _expanded_items(list(av[3]), limit - total, expand)
        elif op is C.ATOMIC_GROUP:
            total += _expanded_items(list(av), limit - total, expand)
        elif op in (C.ASSERT, C.ASSERT_NOT):
            total += _expanded_items(list(av[1]), limit - total, expand)
        elif op is C.BRANCH:
            total += sum(_expanded_items(list(alt), limit - total, expand) for alt in av[1])
        elif op is C.GROUPREF_EXISTS:
            total += sum(_expanded_items(list(alt), limit - total, expand) for alt in av[1:] if alt is not None)
        else:
            total += 1
        if total > limit:
            return total
    return total


def _class_codepoints(items, limit: int) -> int:
    """The code points the pattern's character classes span in the BMP, summed over every
    class as written: what `re`'s compiler (and the RE2 translation under IGNORECASE) walks
    one by one. Ranges above the BMP are compiled as ranges and cost nothing here. Stops
    counting past ``limit``."""
    total = 0
    for op, av in items:
        if op is C.IN:
            for item_op, item in av:
                if item_op is C.RANGE and item[0] <= 0xFFFF:
                    total += min(item[1], 0xFFFF) - item[0] + 1
        elif op in (C.MAX_REPEAT, C.MIN_REPEAT, C.POSSESSIVE_REPEAT):
            total += _class_codepoints(list(av[2]), limit - total)
        elif op is C.SUBPATTERN:
            total += _class_codepoints(list(av[3]), limit - total)
        elif op is C.ATOMIC_GROUP:
            total += _class_codepoints(list(av), limit - total)
        elif op in (C.ASSERT, C.ASSERT_NOT):
            total += _class_codepoints(list(av[1]), limit - total)
        elif op is C.BRANCH:
            for alt in av[1]:
                total += _class_codepoints(list(alt), limit - total)
                if total > limit:
                    return total
        elif op is C.GROUPREF_EXISTS:
            total += sum(_class_codepoints(list(alt), limit - total) for alt in av[1:] if alt is not None)
        if total > limit:
            return total
    return total


def _has_unbounded(items) -> bool:
    for op, av in items:
        if op in (C.MAX_REPEAT, C.MIN_REPEAT, C.POSSESSIVE_REPEAT):
            if av[1] is C.MAXREPEAT or av[1] > 10:
                return True
            if _has_unbounded(list(av[2])):
                return True
        elif op is C.SUBPATTERN:
            if _has_unbounded(list(av[3])):
                return True
        elif op is C.ATOMIC_GROUP:
            if _has_unbounded(list(av)):
                return True
        elif op is C.BRANCH:
            if any(_has_unbounded(list(alt)) for alt in av[1]):
                return True
    return False


# ---------------------------------------------------------------------------------
# Required literal factors: strings every match must contain.


def _is_exact_literal(op, av, flags: int) -> bool:
    if op is not C.LITERAL:
        return False
    if flags & _I and _iscased(av, flags):
        return False
    return True


def _required_factors(items, flags: int) -> list[str]:
    """Literal runs that every match contains. Zero-width assertions keep a run going
    (nothing is consumed between its two sides); anything else ends it."""
    factors: list[str] = []
    run: list[str] = []

    def end_run() -> None:
        if run:
            factors.append("".join(run))
            run.clear()

    for op, av in items:
        if _is_exact_literal(op, av, flags):
            run.append(chr(av))
        elif op is C.AT:
            continue
        elif op is C.SUBPATTERN:
            _group, add, delete, sub = av
            sub_flags = (flags | add) & ~delete
            inner = list(sub)
            exact = _exact_string(inner, sub_flags)
            if exact is not None:
                run.append(exact)
            else:
                end_run()
                factors.extend(_required_factors(inner, sub_flags))
        elif op in (C.MAX_REPEAT, C.MIN_REPEAT, C.POSSESSIVE_REPEAT):
            lo, hi, sub = av
            inner = list(sub)
            exact = _exact_string(inner, flags)
            if exact is not None and lo == hi and lo * len(exact) <= 256:
                run.append(exact * lo)
                continue
            end_run()
            if lo >= 1:
                factors.extend(_required_factors(inner, flags))
        elif op is C.ATOMIC_GROUP:
            end_run()
            factors.extend(_required_factors(list(av), flags))
        else:
            end_run()
    end_run()
    return factors


def _exact_string(items, flags: int) -> str | None:
    """The one string a sub-sequence matches, when it is a plain literal."""
    out: list[str] = []
    for op, av in items:
        if _is_exact_literal(op, av, flags):
            out.append(chr(av))
        elif op is C.SUBPATTERN:
            _group, add, delete, sub = av
            inner = _exact_string(list(sub), (flags | add) & ~delete)
            if inner is None:
                return None
            out.append(inner)
        else:
            return None
    return "".join(out)


# ---------------------------------------------------------------------------------
# Exact translation to RE2 syntax.


def _iscased(ch: int, flags: int) -> bool:
    if flags & _A:
        return _sre.ascii_iscased(ch)
    return _sre.unicode_iscased(ch)


@functools.lru_cache(maxsize=1)
def _unicode_lower_inverse() -> dict[int, tuple[int, ...]]:
    """lowered codepoint -> every codepoint that lowers to it (the way `re` folds case)."""
    inverse: dict[int, list[int]] = {}
    for cp in range(0x110000):
        lo = _sre.unicode_tolower(cp)
        inverse.setdefault(lo, []).append(cp) if lo != cp else None
    return {lo: tuple(v) for lo, v in inverse.items()}


def _case_equivalents(ch: int, flags: int) -> list[int]:
    """Every character `re` treats as equal to `ch` under IGNORECASE."""
    if flags & _A:
        lo = _sre.ascii_tolower(ch)
        return sorted({ch, lo, ord(chr(lo).upper()) if lo < 128 else lo})
    lo = _sre.unicode_tolower(ch)
    lows = {lo}
    lows.update(_casefix._EXTRA_CASES.get(lo, ()))
    inverse = _unicode_lower_inverse()
    out = set(lows)
    for low in lows:
        out.update(inverse.get(low, ()))
    out.add(ch)
    return sorted(c for c in out if not 0xD800 <= c <= 0xDFFF)


def _ranges(codepoints) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for cp in sorted(set(codepoints)):
        if out and cp == out[-1][1] + 1:
            out[-1] = (out[-1][0], cp)
        else:
            out.append((cp, cp))
    return out


def _complement(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    nxt = 0
    for lo, hi in ranges:
        if lo > nxt:
            out.append((nxt, lo - 1))
        nxt = hi + 1
    if nxt <= 0x10FFFF:
        out.append((nxt, 0x10FFFF))
    return out


def _without_surrogates(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out = []
    for lo, hi in ranges:
        if hi < 0xD800 or lo > 0xDFFF:
            out.append((lo, hi))
            continue
        if lo < 0xD800:
            out.append((lo, 0xD7FF))
        if hi > 0xDFFF:
            out.append((0xE000, hi))
    return out


@functools.cache
def _category_ranges(category) -> tuple[tuple[int, int], ...]:
    """The exact character set `re` uses for a category, as codepoint ranges.

    Computed from Python's own Unicode tables, so RE2 (which has its own, possibly
    different, Unicode version and ASCII-only \\d \\w \\s) agrees with `re` exactly."""
    ascii_digit = [(0x30, 0x39)]
    ascii_space = _ranges(map(ord, " \t\n\r\f\v"))
    ascii_word = _ranges([*range(0x30, 0x3A), *range(0x41, 0x5B), 0x5F, *range(0x61, 0x7B)])
    table = {
        C.CATEGORY_DIGIT: lambda: _ranges(cp for cp in range(0x110000) if chr(cp).isdecimal()),
        C.CATEGORY_SPACE: lambda: _ranges(cp for cp in range(0x3001) if chr(cp).isspace()),
        C.CATEGORY_WORD: lambda: _ranges(cp for cp in range(0x110000) if chr(cp).isalnum() or cp == 0x5F),
    }
    negated = {C.CATEGORY_NOT_DIGIT: C.CATEGORY_DIGIT, C.CATEGORY_NOT_SPACE: C.CATEGORY_SPACE, C.CATEGORY_NOT_WORD: C.CATEGORY_WORD}
    if category in negated:
        return tuple(_without_surrogates(_complement(list(_category_ranges(negated[category])))))
    if category in table:
        return tuple(_without_surrogates(table[category]()))
    ascii_table = {"ascii_digit": ascii_digit, "ascii_space": ascii_space, "ascii_word": ascii_word}
    if category in ascii_table:
        return tuple(ascii_table[category])
    raise Untranslatable(f"unsupported category {category}")


def _ascii_category_ranges(category) -> list[tuple[int, int]]:
    base = {
        C.CATEGORY_DIGIT: "ascii_digit", C.CATEGORY_NOT_DIGIT: "ascii_digit",
        C.CATEGORY_SPACE: "ascii_space", C.CATEGORY_NOT_SPACE: "ascii_space",
        C.CATEGORY_WORD: "ascii_word", C.CATEGORY_NOT_WORD: "ascii_word",
    }
    if category not in base:
        raise Untranslatable(f"unsupported category {category}")
    ranges = list(_category_ranges(base[category]))
    if category in (C.CATEGORY_NOT_DIGIT, C.CATEGORY_NOT_SPACE, C.CATEGORY_NOT_WORD):
        ranges = _without_surrogates(_complement(ranges))
    return ranges


_RE2_PLAIN = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 _'\"!#%&,/:;<=>@`~")


def _cp(cp: int) -> str:
    ch = chr(cp)
    if ch in _RE2_PLAIN:  # printable and never special in RE2 (also not inside a class)
        return ch
    return "\\x{%x}" % cp


def _class_body(ranges) -> str:
    return "".join(_cp(lo) if lo == hi else f"{_cp(lo)}-{_cp(hi)}" for lo, hi in ranges)


class _RE2Translator:
    def __init__(self, dialect: str = "re2") -> None:
        self.ascii_only = False
        # "regex": the same explicit classes for the `regex` module (the bounded path),
        # with \b / \B spelled as lookarounds over `re`'s own word class (see
        # bounded_translation).
        self.dialect = dialect

    def translate(self, parsed, flags: int) -> str:
        return self.sequence(list(parsed), flags, tail=True)

    def sequence(self, items, flags: int, tail: bool) -> str:
        parts = []
        last = len(items) - 1
        for i, (op, av) in enumerate(items):
            parts.append(self.node(op, av, flags, tail and i == last))
        return "".join(parts)

    def char_set(self, ch: int, flags: int) -> list[int]:
        if flags & _I and _iscased(ch, flags):
            return _case_equivalents(ch, flags)
        return [ch]

    def node(self, op, av, flags: int, tail: bool) -> str:
        if op is C.LITERAL:
            chars = self.char_set(av, flags)
            if 0xD800 <= av <= 0xDFFF:
                raise Untranslatable("pattern contains a lone surrogate")
            if len(chars) == 1:
                return _cp(av)
            return "[" + _class_body(_ranges(chars)) + "]"
        if op is C.NOT_LITERAL:
            if 0xD800 <= av <= 0xDFFF:
                raise Untranslatable("pattern contains a lone surrogate")
            return "[^" + _class_body(_ranges(self.char_set(av, flags))) + "]"
        if op is C.ANY:
            return "(?s:.)" if flags & _S else "[^\\x{a}]"
        if op is C.IN:
            return self.char_class(av, flags)
        if op is C.BRANCH:
            return "(?:" + "|".join(self.sequence(list(alt), flags, tail) for alt in av[1]) + ")"
        if op is C.SUBPATTERN:
            _group, add, delete, sub = av
            return "(?:" + self.sequence(list(sub), (flags | add) & ~delete, tail) + ")"
        if op in (C.MAX_REPEAT, C.MIN_REPEAT):
            lo, hi, sub = av
            if lo > RE2_MAX_REPEAT or (hi is not C.MAXREPEAT and hi > RE2_MAX_REPEAT):
                raise Untranslatable(f"repeat count above RE2's limit of {RE2_MAX_REPEAT}")
            body = self.sequence(list(sub), flags, tail=False)
            if hi is C.MAXREPEAT:
                quant = {0: "*", 1: "+"}.get(lo, "{%d,}" % lo)
            elif lo == hi:
                quant = "{%d}" % lo
            elif (lo, hi) == (0, 1):
                quant = "?"
            else:
                quant = "{%d,%d}" % (lo, hi)
            if op is C.MIN_REPEAT and lo != hi:
                quant += "?"
            return "(?:" + body + ")" + quant
        if op is C.AT:
            return self.at(av, flags, tail)
        raise Untranslatable(f"construct {op} has no RE2 equivalent")

    def at(self, code, flags: int, tail: bool) -> str:
        if code is C.AT_BEGINNING:
            return "(?m:^)" if flags & _M else "\\A"
        if code is C.AT_BEGINNING_STRING:
            return "\\A"
        end = "\\Z" if self.dialect == "regex" else "\\z"  # absolute end in each dialect
        if code is C.AT_END_STRING:
            return end
        if code is C.AT_END:
            if flags & _M:
                return "(?m:$)"
            if self.dialect == "regex":
                return "(?=\\x{a}?\\Z)"  # exactly re's $, anywhere in the pattern
            # `re`'s $ also matches just before a final newline. At the very end of a
            # pattern, consuming that optional newline decides the same texts.
            if tail:
                return "(?:\\x{a}?" + end + ")"
            raise Untranslatable("'$' before more pattern (re also matches it before a final newline)")
        if code in (C.AT_BOUNDARY, C.AT_NON_BOUNDARY):
            if self.dialect == "regex":
                if flags & _A:
                    w = "[" + _class_body(_ascii_category_ranges(C.CATEGORY_WORD)) + "]"
                    before, not_before, after, not_after = f"(?<={w})", f"(?<!{w})", f"(?={w})", f"(?!{w})"
                else:
                    before, not_before, after, not_after = _regex_word_tests()
                if code is C.AT_BOUNDARY:
                    return f"(?:{before}{not_after}|{not_before}{after})"
                return f"(?:{before}{after}|{not_before}{not_after})"
            if not flags & _A:
                # RE2's \b is ASCII-only; on ASCII text the two agree exactly.
                self.ascii_only = True
            return "\\b" if code is C.AT_BOUNDARY else "\\B"
        raise Untranslatable(f"assertion {code} has no RE2 equivalent")

    def char_class(self, items, flags: int) -> str:
        if self.dialect == "regex" and not flags & _A:
            compact = _regex_category(items)
            if compact is not None:
                return compact
        negate = False
        codepoints: list[int] = []
        ranges: list[tuple[int, int]] = []
        ignore = bool(flags & _I)
        for op, av in items:
            if op is C.NEGATE:
                negate = True
            elif op is C.LITERAL:
                if 0xD800 <= av <= 0xDFFF:
                    raise Untranslatable("pattern contains a lone surrogate")
                codepoints.extend(self.char_set(av, flags))
            elif op is C.RANGE:
                lo, hi = av
                if ignore:
                    if hi - lo > 2000:
                        raise Untranslatable("large case-insensitive character range")
                    for cp in range(lo, hi + 1):
                        if not 0xD800 <= cp <= 0xDFFF:
                            codepoints.extend(self.char_set(cp, flags))
                else:
                    ranges.extend(_without_surrogates([(lo, hi)]))
            elif op is C.CATEGORY:
                if flags & _A:
                    ranges.extend(_ascii_category_ranges(av))
                else:
                    ranges.extend(_category_ranges(av))
            else:
                raise Untranslatable(f"character class item {op} has no RE2 equivalent")
        merged = _merge(ranges + [(c, c) for c in codepoints])
        if not merged:
            # [^\s\S]-style empty classes: `re` never matches; RE2 rejects "[]".
            return "[^\\x{0}-\\x{10ffff}]" if not negate else "(?s:.)"
        return ("[^" if negate else "[") + _class_body(merged) + "]"


def _merge(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for lo, hi in sorted(ranges):
        if out and lo <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(out[-1][1], hi))
        else:
            out.append((lo, hi))
    return out


# ---------------------------------------------------------------------------------
# Literals separated by "any characters" gaps: decided with str.find, no regex.


def _gap_plan(items, flags: int) -> tuple | None:
    """(anchored_start, anchored_end, lead, literals, gaps, tail) for patterns made only
    of literal text and unbounded any-character repeats (``(.+?)``, ``.*``), else None.

    lead/tail: None when the pattern starts/ends with a literal, else the minimum
    number of characters the gap needs; gaps[i]: minimum characters between
    literals[i] and literals[i + 1]."""
    if flags & (_I | _M):
        return None
    flat: list = []
    if not _flatten_gaps(items, flags, flat):
        return None
    return _plan_from_flat(flat)


# Anchor markers in a flat token list: objects, never strings, so that a literal
# "^" or "$" character (an escaped \^ or \$) cannot pass for an anchor.
_START, _END = object(), object()


def _plan_from_flat(flat: list) -> tuple | None:
    """The gap plan of a flat token list: literal text, gap minimums (int), _START, _END."""
    anchored_start = anchored_end = False
    if flat and flat[0] is _START:
        anchored_start = True
        flat = flat[1:]
    if flat and flat[-1] is _END:
        anchored_end = True
        flat = flat[:-1]
    if any(t is _START or t is _END for t in flat):
        return None
    lead = tail = None
    # Each literal as a list of its pieces, joined once at the end: `+=` on a str in a
    # list copies it, quadratic in a long literal (a 300,000-character pattern took 1 s).
    literals: list[list[str]] = []
    gaps: list[int] = []
    pending_gap: int | None = None
    for token in flat:
        if isinstance(token, int):
            pending_gap = token if pending_gap is None else pending_gap + token
            continue
        if literals and pending_gap is None:
            literals[-1].append(token)
            continue
        if not literals:
            lead = pending_gap
        else:
            gaps.append(pending_gap)
        literals.append([token])
        pending_gap = None
    if literals:
        tail = pending_gap
    else:
        lead = pending_gap
    return anchored_start, anchored_end, lead, tuple("".join(lit) for lit in literals), tuple(gaps), tail


MAX_GAP_ALTERNATIVES = 8


def expanded_gap_plans(pattern: str) -> list[tuple] | None:
    """Gap plans whose union means what ``pattern`` means, for a pattern made of literal
    text, any-character gaps, optional groups and alternations (``…\\. (?:Based on
    (.+?)\\. )?Try…``): each optional group and each branch doubles the alternatives.
    None past MAX_GAP_ALTERNATIVES or for anything else. Whether a text matches is
    exactly whether one alternative does; each is decided with str.find, linearly."""
    try:
        parsed = parse(pattern)
    except (re.error, RecursionError, OverflowError):
        return None
    flags = int(parsed.state.flags)
    if flags & (_I | _M):
        return None
    flats = _expand_gaps(list(parsed), [[]])
    if flats is None:
        return None
    plans = [_plan_from_flat(flat) for flat in flats]
    return None if any(p is None or not p[3] for p in plans) else plans


def _expand_gaps(items, prefixes: list[list]) -> list[list] | None:
    out = prefixes
    for op, av in items:
        if op is C.LITERAL:
            out = [flat + [chr(av)] for flat in out]
        elif op is C.SUBPATTERN:
            _group, add, delete, sub = av
            if add or delete:
                return None
            out = _expand_gaps(list(sub), out)
        elif op in (C.MAX_REPEAT, C.MIN_REPEAT):
            lo, hi, sub = av
            inner = list(sub)
            if hi is C.MAXREPEAT and len(inner) == 1 and inner[0][0] is C.ANY:
                out = [flat + [lo] for flat in out]
            elif lo == 0 and hi == 1:
                present = _expand_gaps(inner, out)
                out = None if present is None else present + out
            else:
                return None
        elif op is C.BRANCH:
            branches = [_expand_gaps(list(alt), out) for alt in av[1]]
            out = None if any(b is None for b in branches) else [flat for b in branches for flat in b]
        elif op is C.AT and av in (C.AT_BEGINNING, C.AT_BEGINNING_STRING):
            out = [flat + [_START] for flat in out]
        elif op is C.AT and av in (C.AT_END, C.AT_END_STRING):
            out = [flat + [_END] for flat in out]
        else:
            return None
        if out is None or len(out) > MAX_GAP_ALTERNATIVES:
            return None
    return out


def _flatten_gaps(items, flags: int, out: list) -> bool:
    for op, av in items:
        if op is C.LITERAL:
            out.append(chr(av))
        elif op is C.SUBPATTERN:
            _group, add, delete, sub = av
            if add or delete:
                return False
            if not _flatten_gaps(list(sub), flags, out):
                return False
        elif op in (C.MAX_REPEAT, C.MIN_REPEAT):
            lo, hi, sub = av
            inner = list(sub)
            if hi is not C.MAXREPEAT or len(inner) != 1 or inner[0][0] is not C.ANY:
                return False
            out.append(lo)
        elif op is C.AT and av in (C.AT_BEGINNING, C.AT_BEGINNING_STRING):
            out.append(_START)
        elif op is C.AT and av in (C.AT_END, C.AT_END_STRING):
            out.append(_END)
        else:
            return False
    return True
