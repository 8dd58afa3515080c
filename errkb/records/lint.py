"""Lint: what a record must satisfy beyond the schema.

Each rule has a stable code (like ruff or ShellCheck) and every finding is one line
naming the file, the position, the record id, the reason and the fix. Error-level
findings keep a record out of the store (it goes to rejects, with every reason);
warnings are stored next to the record and shown by ``errkb lint`` and the site.

The batch rules (duplicate id, shared slug) are checked by a :class:`Linter`
that sees records one at a time, so ingest can stream.
"""

from __future__ import annotations

import ast
import re
import time
from collections.abc import Iterable
from dataclasses import dataclass, field

from errkb.records.read import Origin, SourcedRecord, content_hash, lone_surrogate_in
from errkb.records.schema import validate
from errkb.records.urls import fix_page_path
from errkb.text import bounded, patterns


@dataclass(frozen=True)
class Rule:
    code: str
    name: str
    level: str  # "error" | "warning"
    fix: str


# Longer patterns are warned about (W206): the longest real one is far shorter, and
# engines have limits (Hyperscan refuses literals of about 16 KB).
MAX_PATTERN_CHARS = 4096

RULES = {
    r.code: r
    for r in [
        Rule("E100", "unreadable", "error", "make the file valid UTF-8 JSON: a record object, a wrapper, an array or JSON Lines"),
        Rule("E101", "schema", "error", "make the record match the v2 schema (`errkb schema` prints it)"),
        Rule("E201", "pattern-compile", "error", "write messagePattern in Python `re` syntax"),
        Rule("E202", "pattern-self-match", "error", "make messagePattern match errorMessage (escape literal text, use (.+?) for values)"),
        Rule("E203", "pattern-too-generic", "error", "pin down more of the message's literal text in messagePattern"),
        Rule("E207", "pattern-too-costly", "error",
             "write long repeats as (.+?) or a smaller count ({n} copies of a group are compiled n times)"),
        Rule("W204", "pattern-needs-backtracking", "warning",
             "avoid backreferences and lookarounds so the pattern runs on a linear-time engine"),
        Rule("W206", "pattern-too-long", "warning",
             f"keep messagePattern under {MAX_PATTERN_CHARS} characters (placeholders for long values)"),
        Rule("W205", "pattern-slot-needs-a-value", "warning", "write (.*?) for a value that may be empty"),
        Rule("E301", "line-outside-window", "error", "set lineNumber within sourceCodeStart..sourceCodeEnd"),
        Rule("E302", "window-line-count", "error", "make sourceCode exactly sourceCodeEnd - sourceCodeStart + 1 lines"),
        # A warning, not an error: the generator points lineNumber at the raise, and a
        # message held in a constant far above it (urllib3's NODE_JSPI_ERROR) is still right.
        Rule("W303", "raise-line-lacks-message", "warning", "point lineNumber at the raise that builds this message"),
        Rule("E304", "github-url-mismatch", "error", "build githubUrl from repo, analyzedSha, filePath and the source window"),
        Rule("W501", "validation-reads-no-setup", "warning",
             "make validationCode read the setup it judges (its flags from sys.argv/argparse, environment variables, "
             "a config file, the installed library or device) instead of values written into it"),
        Rule("W502", "validation-not-python", "warning", "write validationCode as a Python script"),
        Rule("W503", "validation-too-long", "warning", "keep validationCode a short script (the real checks, not a program)"),
        Rule("W504", "validation-cannot-reject", "warning",
             "make validationCode reject the broken setup by its own verdict: an assert, a raise, or sys.exit "
             "with a message or a non-zero status"),
        Rule("E401", "duplicate-id", "error", "give each record its own id"),
        # A warning, not an error: the upstream generator cuts a message's slug at 50
        # characters, so one message raised at several sites of a repo gives several
        # records (ids) with one slug. The site gives each its own page and lists them.
        Rule("W402", "shared-slug", "warning",
             "nothing, when the message is raised at several sites; else give the record a slug of its own"),
    ]
}

# How far around lineNumber the message's first words may sit: a message is often
# built a few lines above the raise (msg = f"..."; raise X(msg)) or wrapped below it.
RAISE_AREA = 6


@dataclass
class Finding:
    code: str
    message: str
    record_id: str | None
    origin: Origin | None
    level: str = field(init=False)
    name: str = field(init=False)

    def __post_init__(self):
        rule = RULES[self.code]
        self.level = rule.level
        self.name = rule.name

    @property
    def fix(self) -> str:
        return RULES[self.code].fix

    def __str__(self) -> str:
        where = f"{self.origin}: " if self.origin else ""
        rid = f"[{self.record_id}] " if self.record_id else ""
        return f"{where}{self.code} {self.name} {rid}{self.message} (fix: {self.fix})"

    def as_dict(self) -> dict:
        return {
            "code": self.code,
            "name": self.name,
            "level": self.level,
            "record_id": self.record_id,
            "file": self.origin.file if self.origin else None,
            "line": self.origin.line if self.origin else None,
            "column": self.origin.column if self.origin else None,
            "index": self.origin.index if self.origin else None,
            "message": self.message,
            "fix": self.fix,
        }


def _first_words(pattern_literal: str, count: int = 3) -> list[str]:
    return re.findall(r"[A-Za-z0-9_]{2,}", pattern_literal)[:count]


def lint_record(record: dict, origin: Origin | None = None) -> list[Finding]:
    """The rules that look at one record alone."""
    rid = record.get("id") if isinstance(record.get("id"), str) else None
    out: list[Finding] = []

    def add(code: str, message: str) -> None:
        out.append(Finding(code, message, rid, origin))

    surrogate = lone_surrogate_in(record)
    if surrogate is not None:
        # The reader rejects these; a record built in Python (Store.ingest_items) may hold
        # one, and no rule (nor the store) can take text UTF-8 cannot encode.
        add("E100", f"{surrogate}: a lone UTF-16 surrogate is not a character")
        return out
    for problem in validate(record):
        add("E101", problem)

    pattern, message = record.get("messagePattern"), record.get("errorMessage")
    analysis = None
    if isinstance(pattern, str) and pattern:
        analysis = patterns.analyze(pattern, translate=False)
        if analysis.compile_error:
            add("E201", f"messagePattern does not compile: {analysis.compile_error}")
        elif analysis.too_costly:
            add("E207", f"messagePattern cannot be run: {analysis.too_costly}")
        else:
            if analysis.needs_backtracking:
                reasons = ", ".join(analysis.backtracking_reasons)
                add("W204", f"messagePattern needs a backtracking engine ({reasons}); it runs on the bounded path")
            if len(pattern) > MAX_PATTERN_CHARS:
                add("W206", f"messagePattern is {len(pattern):,} characters (over {MAX_PATTERN_CHARS:,}); the matcher keys it on "
                            "a piece of its literal text, and engines may refuse it (then only this record is skipped)")
            if analysis.matches_empty:
                add("E203", "messagePattern matches the empty string, so it matches every line")
            elif analysis.too_generic:
                add("E203", f"messagePattern pins down only {analysis.literal_chars} literal characters, so it matches almost any line")
            if isinstance(message, str):
                # One time budget for everything this record's self-match runs (every
                # normalised form, every slot retried): a bound per form was paid once per
                # line of a long message (a 56-line one took 121 s).
                deadline = time.monotonic() + SELF_MATCH_TIMEOUT_S
                verdict = self_match_normalised(analysis, message, deadline)
                # Re-running a pattern per slot is cheap only for a linear one: a hostile
                # pattern is not searched again (E202 stands for it).
                linear = not analysis.exponential_in_re and not analysis.needs_backtracking
                empty_slots = _empty_slots(pattern, message, deadline) if verdict is False and linear else []
                if empty_slots:
                    slots = " and ".join(empty_slots)
                    add("W205", f"messagePattern matches errorMessage only if {slots} may be empty; (.+?) needs at least one character")
                elif verdict is False:
                    add("E202", "messagePattern does not match its own errorMessage")
                elif verdict is None and len(message) > MAX_SELF_MATCH_MESSAGE and _backtracks(analysis):
                    add("E202", f"messagePattern could not be checked against errorMessage: a pattern that needs "
                                f"backtracking is run on at most {MAX_SELF_MATCH_MESSAGE:,} characters, and errorMessage "
                                f"has {len(message):,}")
                elif verdict is None:
                    add("E202", "messagePattern could not be checked against errorMessage within the time bound")

    start, end, line = record.get("sourceCodeStart"), record.get("sourceCodeEnd"), record.get("lineNumber")
    source = record.get("sourceCode")
    ints = all(isinstance(v, int) and not isinstance(v, bool) for v in (start, end, line))
    if ints:
        if not start <= line <= end:
            add("E301", f"lineNumber {line} is outside sourceCodeStart..sourceCodeEnd ({start}..{end})")
        if isinstance(source, str):
            have, want = len(source.split("\n")), end - start + 1
            if have != want:
                add("E302", f"sourceCode has {have} lines, sourceCodeStart..sourceCodeEnd ({start}..{end}) needs {want}")
            elif start <= line <= end and analysis is not None and analysis.required_literals:
                words = _first_words(analysis.required_literals[0])
                if words:
                    lines = source.split("\n")
                    lo, hi = max(0, line - start - RAISE_AREA), min(len(lines), line - start + RAISE_AREA + 1)
                    area = "\n".join(lines[lo:hi]).lower()
                    missing = [w for w in words if w.lower() not in area]
                    if missing:
                        add("W303", f"the source around line {line} does not contain the message's first words "
                                    f"({' '.join(words)}); missing: {' '.join(missing)}")

    url = record.get("githubUrl")
    if isinstance(url, str) and ints and all(isinstance(record.get(k), str) for k in ("repo", "analyzedSha", "filePath")):
        want = f"https://github.com/{record['repo']}/blob/{record['analyzedSha']}/{record['filePath']}#L{start}-L{end}"
        if url != want:
            add("E304", f"githubUrl is {url}, expected {want}")

    code = record.get("validationCode")
    tags = record.get("tags")
    draft = isinstance(tags, list) and "draft" in tags  # `"tags": 1` is E101, not a crash here
    if isinstance(code, str) and code.strip() and not draft:
        reads = validation_reads_setup(code)
        if reads is None:
            add("W503", f"validationCode is {len(code.encode('utf-8', 'surrogatepass')) // 1024} KiB, over the "
                        f"{MAX_VALIDATION_CODE // 1024} KiB errkb analyses: not checked")
        elif isinstance(reads, str):
            add("W502", f"validationCode is not Python: {reads}")
        elif reads is False:
            add("W501", "validationCode reads nothing of the user's setup (no arguments, environment variables, files, "
                        "or library/device queries of its own): the values it judges are written into it, so it "
                        "cannot tell the user's broken setup from the fixed one")
        if reads is not None and not isinstance(reads, str) and validation_can_reject(code) is False:
            add("W504", "validationCode cannot reject anything (no assert, no raise, no sys.exit/exit with a "
                        "message or a non-zero status): it passes in the broken setup as in the fixed one")
    return out


# What counts as reading the setup a validation judges. Validation code runs as its own
# script (`python validate.py <the user's flags>`), so a value it assigns itself is never
# the user's. Names, not data flow: a cheap, conservative static check (a warning).
_SETUP_MODULES = {  # json/yaml left out: what they parse comes from open()/stdin/environ, counted there
    "argparse", "getopt", "click", "fileinput", "configparser", "tomllib", "subprocess", "importlib", "platform", "pynvml",
}
_SETUP_ATTRIBUTES = {("sys", "argv"), ("sys", "stdin"), ("os", "environ"), ("os", "getenv"), ("os", "environb"),
                     ("sys", "version_info"), ("sys", "version")}
_SETUP_CALLS = {"open", "input"}
_SETUP_METHODS = {  # file reads, and queries of the installed library, the host or the device
    "read_text", "read_bytes", "is_available", "device_count", "get_device_capability",
    "get_device_properties", "get_device_name", "mem_get_info", "virtual_memory", "cpu_count", "sysconf",
    "is_built", "is_mpi_available", "is_nccl_available", "is_gloo_available", "is_initialized", "get_start_method",
    "__version__", "version", "exists", "is_file", "is_dir", "isfile", "isdir", "which", "is_bf16_supported",
    "get_world_size", "get_rank", "get_backend", "sched_getaffinity", "open",
}
_IMPORT_ERRORS = {"ImportError", "ModuleNotFoundError"}
# Longer code is not analysed: parsing untrusted text costs memory and time (64 KiB of
# hostile code took 0.2 s and 40 MiB); the longest bundled validation is 1.4 KiB.
MAX_VALIDATION_CODE = 16 * 1024


def validation_reads_setup(code: str) -> bool | str | None:
    """True when validation code reads its input (arguments, environment, files, the installed
    library, host or device); False when it only checks values written into it; a reason
    string when it is not Python; None when it was not analysed (too long)."""
    if len(code) > MAX_VALIDATION_CODE:
        return None
    try:
        tree = ast.parse(code)
    except SyntaxError as e:
        return f"line {e.lineno}: {e.msg}" if e.lineno else e.msg
    except (RecursionError, MemoryError):  # CPython's parser refuses absurd nesting this way
        return "nested too deeply for Python's parser"
    except ValueError as e:  # NUL bytes, lone surrogates
        return str(e)
    # `import os as o`: o.environ is os.environ.
    alias = {"os": "os", "sys": "sys"}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            alias.update({a.asname: a.name for a in node.names if a.asname and a.name in ("os", "sys")})
    for node in ast.walk(tree):
        if isinstance(node, ast.Import) and any(a.name.split(".")[0] in _SETUP_MODULES for a in node.names):
            return True
        if isinstance(node, ast.ImportFrom):
            if (node.module or "").split(".")[0] in _SETUP_MODULES:
                return True
            if node.module in ("os", "sys") and any((node.module, a.name) in _SETUP_ATTRIBUTES for a in node.names):
                return True
        if isinstance(node, ast.Attribute):
            if isinstance(node.value, ast.Name) and (alias.get(node.value.id), node.attr) in _SETUP_ATTRIBUTES:
                return True
            if node.attr in _SETUP_METHODS:
                return True
        if isinstance(node, ast.Call):
            if isinstance(node.func, ast.Name) and node.func.id in _SETUP_CALLS:
                return True
            # AutoConfig.from_pretrained("org/model") reads a checkpoint named in the code, not the user's.
            if isinstance(node.func, ast.Attribute) and node.func.attr == "from_pretrained" and not (
                    node.args and isinstance(node.args[0], ast.Constant)):
                return True
        if isinstance(node, ast.Try) and any(  # try: import flash_attn / except ImportError: an install probe
                isinstance(h.type, ast.Name) and h.type.id in _IMPORT_ERRORS
                or isinstance(h.type, ast.Tuple) and any(isinstance(t, ast.Name) and t.id in _IMPORT_ERRORS for t in h.type.elts)
                for h in node.handlers) and any(isinstance(b, (ast.Import, ast.ImportFrom)) for b in node.body):
            return True
    return False


# How a validation says "broken": errkb judges it by its own verdict only (errkb.verify.judge),
# so code with none of these can never reject a state, whatever it reads.
_EXIT_CALLS = {("sys", "exit"), ("os", "_exit"), (None, "exit"), (None, "quit")}


def _exits_non_zero(call: ast.Call) -> bool:
    """A call of sys.exit/exit/quit/os._exit that may end with a non-zero status (or a message)."""
    func = call.func
    name = ((func.value.id if isinstance(func.value, ast.Name) else "", func.attr) if isinstance(func, ast.Attribute)
            else (None, func.id) if isinstance(func, ast.Name) else None)
    if name not in _EXIT_CALLS:
        return False
    if not call.args:
        return False  # exit() is status 0
    arg = call.args[0]
    return not (isinstance(arg, ast.Constant) and arg.value in (0, None, False))


def validation_can_reject(code: str) -> bool | None:
    """False when validation code has no way to give a verdict of its own: no ``assert``, no
    ``raise``, no exit with a message or a non-zero status (``sys.exit(main())`` counts); None
    when it was not analysed (not Python, or too long)."""
    if len(code) > MAX_VALIDATION_CODE:
        return None
    try:
        tree = ast.parse(code)
    except (SyntaxError, RecursionError, MemoryError, ValueError):
        return None
    for node in ast.walk(tree):
        if isinstance(node, (ast.Assert, ast.Raise)):
            return True
        if isinstance(node, ast.Call) and _exits_non_zero(node):
            return True
    return False


# Self-match runs the dataset's own regex on its own message: both untrusted, so it
# goes through a linear-time engine where the pattern allows, and a time bound where not.
# The bound is for the whole record (all forms of its message together).
SELF_MATCH_TIMEOUT_S = 1.0
MAX_SELF_MATCH_MESSAGE = 4096


def _self_match(analysis: patterns.PatternAnalysis, message: str, deadline: float | None = None) -> bool | None:
    """Does the pattern match its message? None when that cannot be decided safely
    (or before ``deadline``, a ``time.monotonic()`` value)."""
    if analysis.gap_plan is not None and "\n" not in message:
        # Literals and placeholders only: decided by str.find, exactly and linearly.
        return patterns.gap_match(message, analysis.gap_plan)
    if len(message) > MAX_SELF_MATCH_MESSAGE and _backtracks(analysis):
        return None
    # A linear pattern runs on RE2 in linear time (or, where RE2 cannot, on the bounded
    # path under its time bound), however long the message: a C++ error of 7,000
    # characters is a real record, and was rejected as "could not be checked".
    timeout = SELF_MATCH_TIMEOUT_S if deadline is None else deadline - time.monotonic()
    if timeout <= 0:
        return None
    return bounded.search(analysis.pattern, message, timeout)


def _backtracks(analysis: patterns.PatternAnalysis) -> bool:
    return analysis.needs_backtracking or analysis.exponential_in_re


def self_match_normalised(analysis: patterns.PatternAnalysis, message: str,
                          deadline: float | None = None) -> bool | None:
    """Does the pattern match its message as the matcher sees it? The matcher runs a
    pattern on the normalised forms of a text (normalize.text_messages: the message's
    lines, prefixes and a leading newline gone), so a `^`-anchored pattern for a
    message raised from C++ as "\\nCUDA error: ..." is right, and lint judges it the same way.
    ``deadline`` (a ``time.monotonic()`` value) bounds all the forms together; without
    one, the whole check gets SELF_MATCH_TIMEOUT_S."""
    from errkb.text.normalize import text_messages

    if deadline is None:
        deadline = time.monotonic() + SELF_MATCH_TIMEOUT_S
    verdict = _self_match(analysis, message, deadline)
    if verdict:
        return True
    undecided = verdict is None
    for form in text_messages(message)[1:]:
        found = _self_match(analysis, form.text, deadline)
        if found:
            return True
        undecided = undecided or found is None
    return None if undecided else False


# A value slot as errkb mine and the dataset write it; only its lazy `+` differs from
# the `*` that would also take an empty value.
_SLOTS = ("(.+?)", "([\\s\\S]+?)")


def _empty_slots(pattern: str, message: str, deadline: float | None = None) -> list[str]:
    """The value slots that would have to match nothing for the pattern to match its
    message (`No rendezvous handler for (.+?)://` on "No rendezvous handler for ://"),
    named by number and position; [] when loosening them does not help either."""
    slots = []
    for slot in _SLOTS:
        at = pattern.find(slot)
        while at >= 0:
            escaped = len(pattern[:at]) - len(pattern[:at].rstrip("\\"))
            if escaped % 2 == 0:
                slots.append((at, slot))
            at = pattern.find(slot, at + 1)
    slots.sort()
    if not slots or len(slots) > 8:
        return []

    def loosened(chosen) -> bool:
        text, shift = pattern, 0
        for at, slot in chosen:
            star = slot[:-3] + "*?)"
            text = text[:at + shift] + star + text[at + shift + len(slot):]
            shift += len(star) - len(slot)
        return bool(self_match_normalised(patterns.analyze(text, translate=False), message, deadline))

    named = [f"value slot {i} {slot} (at character {at + 1})" for i, (at, slot) in enumerate(slots, 1)]
    single = [name for name, s in zip(named, slots) if loosened([s])]
    if single:
        return single
    return named if loosened(slots) else []


class Linter:
    """Lints a stream of records, including the rules that span the whole batch."""

    def __init__(self, known_slugs: dict[tuple[str, str], str | list[str]] | None = None):
        # (repo, slug) -> the ids holding it, preloaded with the store's current records
        # by ingest; several records of a repo may share a slug (W402)
        self.slugs: dict[tuple[str, str], list[tuple[str, Origin | None]]] = {
            k: [(i, None) for i in ([v] if isinstance(v, str) else v)] for k, v in (known_slugs or {}).items()
        }
        self.ids: dict[str, tuple[str, Origin]] = {}

    def check(self, item: SourcedRecord) -> list[Finding]:
        if item.error or item.record is None:
            return [Finding("E100", item.error or "no record", None, item.error_at or item.origin)]
        record = item.record
        findings = lint_record(record, item.origin)
        rid = record.get("id") if isinstance(record.get("id"), str) else None
        if rid:
            digest = content_hash(record)
            seen = self.ids.get(rid)
            if seen and seen[0] != digest:
                findings.append(Finding("E401", f"id {rid} already appears at {seen[1]} with different content", rid, item.origin))
            elif not seen:
                self.ids[rid] = (digest, item.origin)
        repo, slug = record.get("repo"), record.get("slug")
        if rid and isinstance(repo, str) and isinstance(slug, str) and not any(f.code == "E401" for f in findings):
            holders = self.slugs.setdefault((repo, slug), [])
            others = [(i, o) for i, o in holders if i != rid]
            if others:
                findings.append(Finding("W402", _shared_slug_message(repo, slug, others), rid, item.origin))
            if len(others) == len(holders):
                holders.append((rid, item.origin))
        return findings


def _shared_slug_message(repo: str, slug: str, others: list[tuple[str, Origin | None]]) -> str:
    named = [f"{i} ({f'at {o}' if o else 'in the store'})" for i, o in others[:3]]
    more = f" and {len(others) - 3} more" if len(others) > 3 else ""
    try:
        listed = fix_page_path(repo, slug)
    except ValueError:  # a repo without "/" (a schema error, reported as E101)
        listed = "its slug's page"
    return (f"slug {slug!r} of {repo} is also record{'s' if len(others) > 1 else ''} {', '.join(named)}{more}: "
            f"each has its own fix page, {listed} lists them")


def lint_records(items: Iterable[SourcedRecord]) -> list[Finding]:
    linter = Linter()
    out: list[Finding] = []
    for item in items:
        out.extend(linter.check(item))
    return out


def has_errors(findings: Iterable[Finding]) -> bool:
    return any(f.level == "error" for f in findings)
