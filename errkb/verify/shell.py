"""Reading a shell fix the way a shell would: its ``# before`` / ``# after`` sections, and
the flags of each section's command — the words the shell splits (quotes, backslashes,
operators glued to words), unwrapped from ``VAR=value``, ``sudo``/``env``/``nohup``,
``docker run ... IMAGE`` and ``bash -c``, redirections and here-documents left out.

Pure functions over text: nothing here runs anything (errkb.verify.runs runs the
sections in the sandbox). Every loop is linear in the line it reads, so a hostile
record cannot stall ``verify``.
"""

from __future__ import annotations

import re

_SECTION = re.compile(r"^\s*#\s*(before|after)\b[^\n]*$", re.I | re.M)
SECTION_HEADER = _SECTION  # a '# before' / '# after' header line; group 1 is which


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


ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")
_SEPARATORS = frozenset({"&&", "||", ";", "&"})
_PYTHONS = re.compile(r"(?:.*/)?python[0-9.]*")
# Lines and commands that set up or report, never the program the flags are for.
NOT_COMMANDS = frozenset({"export", "unset", "cd", "set", "source", ".", "true", "false", ":", "echo", "sleep", "wait",
                           "cat", "printf", "tee", "mkdir", "touch", "cp", "mv", "rm", "ln", "chmod"})
# Commands that run the rest of the line: `sudo -E python ...`, `env VAR=1 vllm ...`.
WRAPPERS = frozenset({"sudo", "env", "nohup", "time", "exec"})
WRAPPER_OPTIONS = frozenset({"-E", "-H", "-n", "-S", "-i", "-p", "--preserve-env"})
_PYTHON_VALUED = frozenset({"-X", "-W", "-Q"})
_HEREDOC = re.compile(r"<<-?\s*(['\"]?)([A-Za-z_][A-Za-z0-9_]*)\1")


def command_flags(section: str, _depth: int = 0) -> list[str] | None:
    """The flags of a state's command: its last command (continuations joined, comments,
    ``export``/``cd`` and ``VAR=value`` prefixes left out, the last of ``a && b``, run
    through ``sudo``/``env``/``nohup``/``docker run``/``bash -c`` as the command itself,
    redirections left out) from its first option on, ``python -m module`` skipped; for
    ``vllm serve``, every argument (its model is a positional). None when the section has
    no command with an option."""
    for line in reversed(logical_lines(section)):
        try:
            commands = line_commands(line)
        except ValueError:  # unbalanced quotes: not a command errkb can read
            return None
        for command in reversed(commands):
            command = _unwrapped(own_words(command))
            if command and command[0] in ("bash", "sh") and command[1:2] == ["-c"] and len(command) > 2 and _depth < 2:
                flags = command_flags(command[2], _depth + 1)  # the command is the string
                if flags is not None:
                    return flags
                continue
            if not command or command[0] in NOT_COMMANDS:
                continue
            if tuple(command[:2]) in _POSITIONAL_SUBCOMMANDS:
                return command[2:] or None
            start = _python_args_start(command) if _PYTHONS.fullmatch(command[0]) else 1
            first = next((i for i in range(start, len(command)) if command[i].startswith("-")), None)
            return command[first:] if first is not None else None
    return None


def logical_lines(section: str) -> list[str]:
    """A section's command lines as the shell reads them: continuations joined, comment
    lines and here-document bodies left out."""
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
    return lines


def line_commands(line: str) -> list[list[str]]:
    """A line's commands (split at ``;``, ``&&``, ``||``, ``&`` and parentheses), each its
    words with the pipes and redirections still in (``Operator`` words). Raises ValueError
    on an unbalanced quote."""
    commands: list[list[str]] = [[]]
    for token in _shell_words(line):
        if isinstance(token, Operator) and (token in _SEPARATORS or token in ("(", ")")):
            commands.append([])
        else:
            commands[-1].append(token)
    return commands


# Subcommands whose positional arguments are the program's too: `vllm serve MODEL --flags`
# (the validation needs the model as much as the flags).
_POSITIONAL_SUBCOMMANDS = frozenset({("vllm", "serve")})


def own_words(command: list[str]) -> list[str]:
    """A command's words as the program gets them: up to a pipe, without redirections and
    their targets (`--port 8000 2>/dev/null --tp 2` passes both flags), and without the
    braces of a `{ ...; }` group."""
    words: list[str] = []
    skip_target = False
    for token in command:
        if isinstance(token, Operator):
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


class Operator(str):
    """An unquoted shell operator (``;``, ``&&``, ``|``, a redirection), not a word."""


def _shell_words(line: str) -> list[str]:
    """A line's words as the shell splits them (quotes and backslashes undone, a comment left
    out), with its unquoted operators as ``Operator`` words even when glued to a word:
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
                words.append(Operator(">"))
                i += 2
                continue
            close()
            j = i
            while j < n and line[j] in ";&|":
                j += 1
            words.append(Operator(line[i:j]))
            i = j
        elif c in "()":
            close()
            words.append(Operator(c))
            i += 1
        elif c in "<>":
            descriptor = "".join(word)
            if started and (quoted or not (descriptor.isascii() and descriptor.isdigit())):
                close()  # `a>b`: the shell ends the word a
            word.clear()
            started = quoted = False  # 2>: the descriptor is the redirection's
            words.append(Operator(c))
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
        if ASSIGNMENT.match(word):
            i += 1
        elif word in WRAPPERS:
            i += 1
            while i < n and tokens[i] in WRAPPER_OPTIONS:
                i += 1
        elif word in CONTAINER_TOOLS and i + 1 < n:
            j = i + 1
            if tokens[j] == "container" and j + 1 < n:  # docker container run
                j += 1
            if tokens[j] not in ("run", "exec"):
                break
            j = after_container_options(tokens, j + 1)
            image, j = tokens[j:j + 1], j + 1
            if j < n and not tokens[j].startswith("-"):
                i = j  # the container's command, itself maybe wrapped
                continue
            # no command: the image's entrypoint takes the arguments (`vllm/vllm-openai --model m`)
            return image + tokens[j:]
        else:
            break
    return tokens[i:]


CONTAINER_TOOLS = frozenset({"docker", "podman", "nerdctl"})
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


def after_container_options(tokens: list[str], i: int) -> int:
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


def fix_flags(snippets: dict, states: dict | None = None) -> dict[str, list[str]]:
    """For a shell fix in before/after sections, the flags of each state's command. A
    section that also sets environment variables whose values were not captured (it
    stopped first, e.g. its command is not installed; inline `VAR=value cmd` assignments
    included) gives no flags: judged on its flags alone, with its environment missing, the
    state would be a different one."""
    if "exampleFix" not in snippets or snippets["exampleFix"][0] != "shell":
        return {}
    sections = split_states(snippets["exampleFix"][1]) or {}
    flags = {name: command_flags(section) for name, section in sections.items()
             if name in (states or {}) or not _SETS_ENVIRONMENT.search(section)}
    return {name: f for name, f in flags.items() if f}


# A line that gives its command variables: export/unset, an assignment (bare, or inline before
# a command: `NCCL_SOCKET_IFNAME=eth0 torchrun ...`), `env VAR=value cmd`, or sourcing a file.
_SETS_ENVIRONMENT = re.compile(
    r"""^[ \t]*(?:export|unset|source|\.)[ \t]|^[ \t]*[A-Za-z_][A-Za-z0-9_]*=|(?:^|[ \t])env[ \t]+(?:-\S+[ \t]+)*"""
    r"""[A-Za-z_][A-Za-z0-9_]*=""",
    re.MULTILINE)
