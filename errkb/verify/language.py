"""Which language a record's exampleFix or validationCode is in (Python or shell, or
why neither), and whether it parses (``compile()``, ``bash -n``), without running it."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile

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
    compiles = python_syntax_error(code) is None
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


def python_syntax_error(code: str) -> str | None:
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
    return python_syntax_error(code) if language == "python" else _shell_syntax_error(code)
