"""A record's exampleFix read as its two states, and a case's mapping of them to what runs here.

``parse_fix`` is pure (nothing runs; every loop linear in the text): for a shell fix in
``# before`` / ``# after`` sections, each state's program words, flags, environment
(``export``s, inline ``VAR=value cmd`` and ``env VAR=value`` assignments, ``docker run -e``)
and the wrappers it runs through (``sudo``, ``env``, ``docker run ... IMAGE``, ``torchrun``,
a pipe into ``tee``/``tail``); for a Python fix, each state's program: the "after" is the
code as written, the "before" is derived from the fix's own markers (a ``# before: <code>``
line in place of the statement marked ``# after``, or a commented-out ``# before`` block in
place of the ``# after`` block) when that derivation parses. Anything else is
``NotExecutable(reason)``, never half a state.

``map_states`` applies a case's ``MAPPING`` (plain data in the case module: value
substitutions, per-flag substitutions, flags appended, wrappers it accepts, a flag the runner
expresses as a variable (``flag_env``: the variable's change stands for the flag's), and for a Python
fix the arguments its validation is given in each state, or, for a program that cannot run here
(it allocates on a GPU), the keywords of one call read from its code as flags: ``call_keywords``)
and checks it:
what the record's fix changes between its states (the flags, variables or program lines
that differ) must be exactly what the mapped states change. The environment that reaches a
run passes ``sandbox.allowed_state_env`` first.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field

from errkb.verify.language import detect_language
from errkb.verify.sandbox import allowed_state_env
from errkb.verify.shell import (
    ASSIGNMENT,
    CONTAINER_TOOLS,
    NOT_COMMANDS,
    WRAPPER_OPTIONS,
    WRAPPERS,
    Operator,
    after_container_options,
    command_flags,
    line_commands,
    logical_lines,
    own_words,
    split_states,
)

STATE_NAMES = ("before", "after")


@dataclass(frozen=True)
class NotExecutable:
    reason: str

    def __str__(self) -> str:
        return f"exampleFix not executable ({self.reason})"


@dataclass(frozen=True)
class ShellState:
    program: tuple[str, ...]  # the command's own words, unwrapped (python -m ... --flags)
    flags: tuple[str, ...]  # errkb.verify.shell.command_flags of the section
    env: dict[str, str] = field(default_factory=dict)  # exported, inline and container variables
    wrappers: tuple[str, ...] = ()  # sudo, env, docker, torchrun, tee, tail ...


@dataclass(frozen=True)
class PythonState:
    program: str


@dataclass(frozen=True)
class FixStates:
    language: str  # "shell" | "python"
    before: ShellState | PythonState
    after: ShellState | PythonState

    def state(self, name: str) -> ShellState | PythonState:
        return self.before if name == "before" else self.after


# -- shell ---------------------------------------------------------------------------

_LAUNCHERS = frozenset({"torchrun", "deepspeed", "accelerate", "mpirun", "srun"})
_LAUNCHER_VALUED = frozenset({"--nproc_per_node", "--nproc-per-node", "--nnodes", "--node_rank", "--node-rank",
                              "--master_addr", "--master-addr", "--master_port", "--master-port", "--rdzv_backend",
                              "--rdzv-backend", "--rdzv_endpoint", "--rdzv-endpoint", "--rdzv_id", "--rdzv-id",
                              "-np", "-n", "-N", "--max_restarts", "--max-restarts", "--num_gpus", "--num-gpus"})
_PIPE_SINKS = frozenset({"tee", "tail", "head", "grep", "cat", "less"})


def _unwrap(words: list[str], env: dict[str, str], wrappers: list[str]) -> list[str]:
    """``words`` without assignments and wrappers, the variables they set put in ``env`` and
    the wrappers named in ``wrappers``. A loop over positions: linear in the words."""
    i, n = 0, len(words)
    while i < n:
        word = words[i]
        if ASSIGNMENT.match(word):
            name, _, value = word.partition("=")
            env[name] = value
            i += 1
        elif word in WRAPPERS:
            wrappers.append(word)
            i += 1
            while i < n and words[i] in WRAPPER_OPTIONS:
                i += 1
        elif word in CONTAINER_TOOLS and i + 1 < n:
            j = i + 1
            if words[j] == "container" and j + 1 < n:
                j += 1
            if words[j] not in ("run", "exec"):
                break
            k = j + 1
            while k < n and words[k] in ("-e", "--env") and k + 1 < n:  # the container's variables
                k += 2
            for m in range(j + 1, min(after_container_options(words, j + 1), n)):
                if words[m] in ("-e", "--env") and m + 1 < n and "=" in words[m + 1]:
                    name, _, value = words[m + 1].partition("=")
                    env[name] = value
                elif words[m].startswith("--env=") and "=" in words[m][6:]:
                    name, _, value = words[m][6:].partition("=")
                    env[name] = value
            j = after_container_options(words, j + 1)
            wrappers.append(f"{word} {words[i + 1]} {words[j] if j < n else ''}".strip())
            j += 1
            if j < n and not words[j].startswith("-"):
                i = j
                continue
            return words[j - 1:j] + words[j:]  # the image's entrypoint takes the arguments
        elif word in _LAUNCHERS:
            j = i + 1
            while j < n and words[j].startswith("-"):
                j += 1 if "=" in words[j] or words[j] not in _LAUNCHER_VALUED else 2
            wrappers.append(" ".join(words[i:j]))
            # torchrun script.py args: the program is the script, run by python
            return (["python", *words[j:]] if j < n and words[j].endswith(".py") else words[j:])
        else:
            break
    return words[i:]


def _shell_state(name: str, section: str) -> ShellState | NotExecutable:
    env: dict[str, str] = {}
    shell_vars: dict[str, str] = {}
    program: list[str] = []
    wrappers: list[str] = []
    for line in logical_lines(section):
        try:
            commands = line_commands(line)
        except ValueError:
            return NotExecutable(f"the {name!r} section has an unbalanced quote: {line[:80]!r}")
        for raw in commands:
            words = own_words(raw)
            pipe = next((k for k, w in enumerate(raw) if isinstance(w, Operator) and w == "|"), None)
            piped = [w for w in raw[pipe + 1:] if not isinstance(w, Operator)] if pipe is not None else []
            if not words:
                continue
            if words[0] == "export":
                for word in words[1:]:
                    if ASSIGNMENT.match(word):
                        key, _, value = word.partition("=")
                        env[key] = value
                    elif word in shell_vars:
                        env[word] = shell_vars[word]
                continue
            if words[0] == "unset":
                for word in words[1:]:
                    env.pop(word, None)
                continue
            if all(ASSIGNMENT.match(w) for w in words):  # a shell variable, not exported
                for word in words:
                    key, _, value = word.partition("=")
                    shell_vars[key] = value
                continue
            inline: dict[str, str] = {}
            command = _unwrap(words, inline, wrappers)
            if not command or command[0] in NOT_COMMANDS:
                continue
            if command[0] in ("source", "."):
                return NotExecutable(f"the {name!r} section sources {command[1:2]}, a file errkb does not have")
            program = command
            env.update(inline)
            if piped and piped[0] in _PIPE_SINKS:
                wrappers.append(f"| {piped[0]}")
    if not program and not env:
        return NotExecutable(f"the {name!r} section has no command and sets no variable")
    return ShellState(program=tuple(program), flags=tuple(command_flags(section) or ()), env=env,
                      wrappers=tuple(wrappers))


# -- python --------------------------------------------------------------------------

# Line patterns anchored at a fixed start and without a lazy run before a trailing \s*: a line
# of 20,000 spaces is read in linear time (exampleFix text is untrusted).
_BEFORE_LINE = re.compile(r"\s*#\s*before\s*:", re.I)
_BEFORE_HEADER = re.compile(r"^\s*#\s*before\b[^:]*$", re.I)
_AFTER_HEADER = re.compile(r"^\s*#\s*after\b", re.I)
_AFTER_WORD = re.compile(r"#\s*after\b", re.I)
_SPACE_HASH = re.compile(r"\s#")


def before_text(line: str) -> str | None:
    """The text of a ``# before: <text>`` line, stripped (None: not such a line, or nothing after the colon)."""
    m = _BEFORE_LINE.match(line)
    return (line[m.end():].strip() or None) if m else None


def marked_after(line: str) -> bool:
    """Code with a trailing ``# after`` mark (a comment line is no code)."""
    if line.lstrip().startswith("#"):
        return False
    return any(line[: m.start()].strip() for m in _AFTER_WORD.finditer(line))


def without_comment(code: str) -> str:
    """``code`` without a trailing ``  # comment`` (from the first '#' after whitespace)."""
    m = _SPACE_HASH.search(code)
    return code if m is None else code[: m.start()].rstrip()


def parse_error(code: str) -> str | None:
    """Why ``code`` does not parse as Python (None: it parses). Never raises: fix text is untrusted."""
    try:
        ast.parse(code)
    except (SyntaxError, ValueError, MemoryError, RecursionError) as e:
        return f"{type(e).__name__}: {getattr(e, 'msg', e)}"
    return None


def uncommented(lines: list[str]) -> str | None:
    """Commented-out lines (every non-blank one a ``#`` comment) as the code they hold, each
    line's indentation kept; None when some line is not a comment. Both the "before" state
    (from a ``# before`` block) and the non-fixing-fix mutant read a block this one way."""
    block = [line for line in lines if line.strip()]
    if not block or not all(line.lstrip().startswith("#") for line in block):
        return None
    return "\n".join(re.sub(r"^(\s*)#\s?", r"\1", line) for line in block)


_COMPOUND = tuple(getattr(ast, name) for name in ("If", "For", "While", "With", "Try", "TryStar", "Match", "FunctionDef",
                                                    "ClassDef", "AsyncFunctionDef", "AsyncFor", "AsyncWith")
                  if hasattr(ast, name))


def statement_span(tree: ast.Module, line: int, lines: list[str]) -> tuple[int, int] | None:
    """The first and last line (1-based) of the innermost simple statement holding ``line``: the
    statement a ``# after`` mark on any of its lines marks (the state parse and the non-fixing
    mutant replace the same one, whole lines). None when no statement holds it, or when other
    code shares those lines (``if ok: w.plan(...)  # after``, ``a = 1; b(2)  # after``):
    replacing the lines would drop that code."""
    best = None
    for node in ast.walk(tree):
        if isinstance(node, ast.stmt) and node.lineno <= line <= (node.end_lineno or node.lineno):
            if not isinstance(node, _COMPOUND) or node.lineno == line:
                if best is None or node.lineno >= best.lineno:
                    best = node
    if best is None:
        return None
    first, last = best.lineno, best.end_lineno or best.lineno
    if lines[first - 1][: best.col_offset].strip():
        return None
    tail = lines[last - 1][best.end_col_offset or 0 :].strip() if isinstance(best.end_col_offset, int) else ""
    if tail and not tail.startswith("#"):
        return None
    return first, last


def _after_block(lines: list[str], header: int) -> tuple[int, int] | None:
    """The code under an ``# after`` header: from the first code line after it (comments
    skipped) to the line before the next blank one; None when there is none."""
    first = header + 1
    while first < len(lines) and lines[first].lstrip().startswith("#"):
        first += 1
    end = first
    while end < len(lines) and lines[end].strip():
        end += 1
    return (first, end) if end > first else None


def _statement_ends(tree: ast.Module, first: int, end: int) -> list[int]:
    """The end line (1-based, inclusive) of each outermost statement that starts in lines
    ``first``..``end - 1`` (0-based), in order."""
    inside = sorted((n.lineno, n.end_lineno or n.lineno) for n in ast.walk(tree)
                    if isinstance(n, ast.stmt) and first < n.lineno <= end)
    out, last = [], 0
    for start, stop in inside:
        if start > last:
            out.append(stop)
            last = stop
    return out


def _python_before(code: str) -> str | NotExecutable:
    lines = code.splitlines()
    tree = ast.parse(code)
    marked = [i for i, line in enumerate(lines) if marked_after(line)]
    befores = [(i, text) for i, line in enumerate(lines) if (text := before_text(line)) is not None]
    headers_after = [i for i, line in enumerate(lines) if _AFTER_HEADER.match(line)]
    if len(befores) > 1:
        return NotExecutable(f"{len(befores)} '# before:' lines: not one replacement")
    replacement = None
    if befores:
        text = without_comment(befores[0][1])
        if parse_error(text.strip()) is None:
            replacement = text.strip()
    if replacement is not None:
        if len(marked) == 1:  # `# before: <code>` in place of the statement marked `# after`
            span = statement_span(tree, marked[0] + 1, lines)
            if span is None:
                return NotExecutable(f"line {marked[0] + 1} marked '# after' is not a statement of its own line")
            start, end = span[0] - 1, span[1]
        elif not marked and len(headers_after) == 1 and (block := _after_block(lines, headers_after[0])):
            start, end = block  # `# before: <code>` in place of the code under the `# after` header
        else:
            return NotExecutable(f"a '# before:' line and {len(marked)} statements marked '# after': "
                                 "not one replacement")
        indent = re.match(r"\s*", lines[start]).group(0)
        return "\n".join(lines[:start] + [indent + replacement] + lines[end:]) + "\n"
    # A `# before` header (or a `# before: <prose>` one) over commented-out code, in place of the
    # code under the `# after` header.
    headers_before = [i for i, line in enumerate(lines) if _BEFORE_HEADER.match(line) or before_text(line) is not None]
    if len(headers_before) == 1 and len(headers_after) == 1 and headers_before[0] < headers_after[0]:
        b, a = headers_before[0], headers_after[0]
        block = [line for line in lines[b + 1:a] if line.strip()]
        if not block and befores:
            return NotExecutable(f"the '# before:' line is not code and no commented-out code follows it: "
                                 f"{befores[0][1][:80]!r}")
        code_before = uncommented(block)
        if code_before is None:
            return NotExecutable("the '# before' block is not commented-out code")
        before_code = code_before.split("\n")
        why = parse_error(code_before)
        if why:
            return NotExecutable(f"the commented-out '# before' block is not code ({why})")
        after = _after_block(lines, a)
        if after is None:
            return NotExecutable("the '# after' block has no code")
        # as many of the after block's statements as the before block has take its place
        count = len(ast.parse("\n".join(before_code)).body)
        ends = _statement_ends(tree, *after)
        end = ends[min(count, len(ends)) - 1] if ends else after[1]
        return "\n".join(lines[:b] + before_code + [""] + lines[end:]) + "\n"
    if befores:
        return NotExecutable(f"the '# before:' line is not code and no commented-out code follows it: "
                             f"{befores[0][1][:80]!r}")
    return NotExecutable("no '# before' marker from which the broken program can be derived")


def _python_states(code: str) -> FixStates | NotExecutable:
    why = parse_error(code)
    if why:
        return NotExecutable(f"the fix does not parse as Python ({why})")
    before = _python_before(code)
    if isinstance(before, NotExecutable):
        return before
    why = parse_error(before)
    if why:
        return NotExecutable(f"the derived 'before' program does not parse ({why})")
    return FixStates("python", PythonState(before), PythonState(code))


# -- the parse -----------------------------------------------------------------------


def parse_fix(fix: str | None) -> FixStates | NotExecutable:
    """A record's exampleFix as its two states, or why it cannot be."""
    if not fix or not fix.strip():
        return NotExecutable("the record has no exampleFix")
    language, why = detect_language(fix)
    if language is None:
        return NotExecutable(f"prose, not code: {why}")
    if language == "python":
        return _python_states(fix)
    sections = split_states(fix)
    if sections is None:
        return NotExecutable("a shell fix without '# before' and '# after' sections")
    states = {}
    for name in STATE_NAMES:
        state = _shell_state(name, sections[name])
        if isinstance(state, NotExecutable):
            return state
        states[name] = state
    return FixStates("shell", states["before"], states["after"])


# -- what a state changes ------------------------------------------------------------


def _options(argv: tuple[str, ...] | list[str]) -> dict[str, str]:
    """``--flag value`` / ``--flag=value`` / a switch / a positional, keyed by what a reader
    compares: the flag, or ``arg N`` for the N-th positional."""
    out: dict[str, str] = {}
    i, positional = 0, 0
    while i < len(argv):
        word = argv[i]
        if word.startswith("-") and len(word) > 1:
            key, eq, value = word.partition("=")
            if eq:
                out[key] = value
            elif i + 1 < len(argv) and not argv[i + 1].startswith("-"):
                out[key] = argv[i + 1]
                i += 1
            else:
                out[key] = "(set)"
        else:
            out[f"arg {positional}"] = word
            positional += 1
        i += 1
    return out


def changes(before: dict, after: dict) -> list[str]:
    """What differs between two runnable states ({"argv", "env"} or {"program"}): each
    differing flag (``--max-num-seqs``), variable (``$VAR``) or program line (``line N``)."""
    if "program" in before:  # the program's lines (an argv taken from them changes with them)
        a, b = before["program"].splitlines(), after["program"].splitlines()
        import difflib

        out = []
        for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes():
            if tag != "equal":
                out.append(f"line {i1 + 1}" if (i2 - i1, j2 - j1) == (1, 1) else f"lines {i1 + 1}-{i2} -> {j1 + 1}-{j2}")
        return out
    ob, oa = _options(before.get("argv", [])), _options(after.get("argv", []))
    eb, ea = before.get("env", {}), after.get("env", {})
    return ([k for k in sorted(ob.keys() | oa.keys()) if ob.get(k) != oa.get(k)]
            + [f"${k}" for k in sorted(eb.keys() | ea.keys()) if eb.get(k) != ea.get(k)])


def record_states(fix: FixStates) -> dict[str, dict]:
    """The record's own states as a runner would take them: argv and environment of each
    shell state (the environment as written), or each Python state's program."""
    if fix.language == "python":
        return {name: {"program": fix.state(name).program} for name in STATE_NAMES}
    return {name: {"argv": list(fix.state(name).flags), "env": dict(fix.state(name).env)} for name in STATE_NAMES}


@dataclass(frozen=True)
class Mapped:
    states: dict[str, dict]  # {"before": {"argv", "env"} | {"program"}, "after": ...}
    shown: str  # the mapping as the proof shows it
    changes: list[str]  # what both the record's fix and the mapped states change
    dropped: dict[str, list[str]]  # variables the allow-list dropped, per state


class MappingError(ValueError):
    """The case's mapping changes something the record's fix does not (or misses what it does)."""


def describe(mapping: dict) -> str:
    parts = [f"{k!r} -> {v!r}" for k, v in (mapping.get("values") or {}).items()]
    for flag, table in (mapping.get("flag_values") or {}).items():
        parts += [f"{flag} {k} -> {v}" for k, v in table.items()]
    parts += [f"{k!r} -> {v!r}" for k, v in (mapping.get("substitute") or {}).items()]
    if mapping.get("python"):
        parts.insert(0, "the program as derived from the fix")
    if mapping.get("argv_from"):
        parts.append(f"the validation given the program's {mapping['argv_from']!r}")
    if mapping.get("validation_argv"):
        parts.append("the validation given " + ", ".join(f"{name}: {' '.join(argv) or '(no arguments)'}"
                                                         for name, argv in mapping["validation_argv"].items()))
    if mapping.get("call_keywords"):
        spec = mapping["call_keywords"]
        parts.append(f"the program's last {spec['call']}() call read as flags ("
                     + ", ".join(f"{k}= -> {flag}" for k, flag in spec["keywords"].items())
                     + "; a keyword it does not pass: no flag)")
    if mapping.get("model_flag"):
        parts.append(f"the positional model given as {mapping['model_flag']}")
    if mapping.get("append"):
        parts.append("appended: " + " ".join(mapping["append"]))
    if mapping.get("env"):
        parts.append("variables added: " + " ".join(f"{k}={v}" for k, v in mapping["env"].items()))
    for flag, (variable, table) in (mapping.get("flag_env") or {}).items():
        parts.append(f"{flag} expressed as ${variable} (" + ", ".join(f"{k} -> {v}" for k, v in table.items()) + ")")
    if mapping.get("wrappers"):
        parts.append("wrappers run as their command: " + ", ".join(mapping["wrappers"]))
    return "; ".join(parts) or "run as written"


_NOT_PASSED = object()


def _keyword_value(node: ast.expr) -> str | object | None:
    """A keyword argument's value as a flag's value: a string as itself, a dtype named on torch
    by its name (``torch.bfloat16`` -> ``bfloat16``, what ``getattr(torch, value)`` reads back),
    ``None`` as not passed (the callee's own default); anything else (a variable, another
    object's attribute, a call) is None: the case cannot read it without running the program."""
    if isinstance(node, ast.Constant):
        if node.value is None:
            return _NOT_PASSED
        return node.value if isinstance(node.value, str) else None
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "torch":
        return node.attr
    return None


def _call_flags(program: str, spec: dict) -> list[str] | NotExecutable:
    """The keywords the program's last ``spec["call"]()`` call passes, as the flags
    ``spec["keywords"]`` names for them (in that order, ``--flag=value``): what a program that
    cannot run here (it allocates on a GPU) says of the state, read without running it."""
    calls = [node for node in ast.walk(ast.parse(program)) if isinstance(node, ast.Call)
             and getattr(node.func, "attr", getattr(node.func, "id", None)) == spec["call"]]
    if not calls:
        return NotExecutable(f"the program never calls {spec['call']}()")
    call = max(calls, key=lambda node: (node.lineno, node.col_offset))
    if any(k.arg is None for k in call.keywords) or any(isinstance(a, ast.Starred) for a in call.args):
        return NotExecutable(f"the program's {spec['call']}() passes **kwargs or *args, which cannot be read "
                             "without running it")
    given = {k.arg: k.value for k in call.keywords}
    flags: list[str] = []
    for keyword, flag in spec["keywords"].items():
        if keyword in given:
            value = _keyword_value(given[keyword])
            if value is None:
                shown = (ast.get_source_segment(program, given[keyword]) or "?")[:60]
                return NotExecutable(f"the program's {spec['call']}() computes {keyword}= ({shown}), "
                                     "which cannot be read without running it")
            if value is not _NOT_PASSED:
                flags.append(f"{flag}={value}")
    return flags


def _flag_value(words: tuple[str, ...], flag: str) -> str | None:
    """The value ``flag`` has in a command's words (``--flag V`` or ``--flag=V``), or None."""
    for k, word in enumerate(words):
        if word == flag and k + 1 < len(words):
            return words[k + 1]
        if word.startswith(flag + "="):
            return word.split("=", 1)[1]
    return None


def map_states(fix: FixStates, mapping: dict) -> Mapped | NotExecutable:
    """The record's states through the case's mapping, checked. Raises MappingError when
    what the mapped states change is not what the record's fix changes."""
    own = record_states(fix)
    out: dict[str, dict] = {}
    dropped: dict[str, list[str]] = {}
    if fix.language == "python":
        if not mapping.get("python"):
            return NotExecutable("a Python fix, and the case runs a command line")
        for name in STATE_NAMES:
            program = own[name]["program"]
            for old, new in (mapping.get("substitute") or {}).items():
                program = program.replace(old, new)
            out[name] = {"program": program}
            if mapping.get("argv_from"):  # what the validation is given: the record's own value (init_method=...)
                code_lines = "\n".join(line for line in own[name]["program"].splitlines()
                                       if not line.lstrip().startswith("#"))
                out[name]["argv"] = re.findall(mapping["argv_from"], code_lines)
            elif mapping.get("validation_argv"):  # what the program does, said as the validation's flags
                out[name]["argv"] = list(mapping["validation_argv"][name])
            elif mapping.get("call_keywords"):  # what the program passes, read from its code (it needs a GPU)
                flags = _call_flags(program, mapping["call_keywords"])
                if isinstance(flags, NotExecutable):
                    return flags
                out[name]["argv"] = [*flags, *(mapping.get("append") or ())]
    else:
        if mapping.get("python"):
            return NotExecutable("a shell fix, and the case runs a Python program")
        accepted = tuple(mapping.get("wrappers") or ())
        values, flag_values = mapping.get("values") or {}, mapping.get("flag_values") or {}
        for name in STATE_NAMES:
            state = fix.state(name)
            foreign = [w for w in state.wrappers if w.lstrip("| ").split()[0] not in accepted]
            if foreign:
                return NotExecutable(f"the {name!r} state runs through {foreign[0]!r}, which this runner does not have")
            argv, previous = [], None
            for k, word in enumerate(state.flags):
                table = flag_values.get(previous) if previous else None
                mapped_word = table.get(word, word) if table is not None else values.get(word, word)
                if k == 0 and not word.startswith("-") and mapping.get("model_flag"):
                    argv.append(mapping["model_flag"])  # `vllm serve MODEL` read by a parser that takes --model
                argv.append(mapped_word)
                previous = word if word.startswith("-") else None
            kept, gone = allowed_state_env(dict(state.env))
            if gone:
                dropped[name] = gone
            out[name] = {"argv": [*argv, *(mapping.get("append") or ())], "env": {**kept, **(mapping.get("env") or {})}}
            # a flag the runner cannot honour, expressed as the variable that sets the same quantity here
            # (vLLM's --gpu-memory-utilization is VLLM_CPU_KVCACHE_SPACE on the CPU backend)
            for flag, (variable, table) in (mapping.get("flag_env") or {}).items():
                value = _flag_value(state.flags, flag)
                if value not in table:
                    return NotExecutable(f"the {name!r} state's {flag} {value} has no counterpart on this runner "
                                         f"(${variable} is known for {flag} {', '.join(table)})")
                out[name]["env"][variable] = table[value]
    wanted, got = changes(own["before"], own["after"]), changes(out["before"], out["after"])
    for flag, (variable, _) in (mapping.get("flag_env") or {}).items():
        if flag in wanted:  # the variable is that flag's change, said in the runner's terms
            got = [c for c in got if c != f"${variable}"]
    if not wanted:
        raise MappingError("the record's exampleFix 'after' state is its 'before' state: the fix changes nothing")
    if wanted != got:
        raise MappingError(f"the record's fix changes {', '.join(wanted)}; the case's mapped states change "
                           f"{', '.join(got) or 'nothing'}")
    return Mapped(states=out, shown=describe(mapping), changes=wanted, dropped=dropped)
