"""Code on fix pages: which language a block is in, Pygments highlighting, and an
exampleFix split into its Before and After sections."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass


@dataclass
class CodeBlock:
    """One highlighted block: ``html`` is Pygments output (already escaped), ``text`` the code."""

    text: str
    html: str
    language: str
    label: str = ""


_SHELL_START = re.compile(r"^\s*(export |\$ |pip |python3? |cd |docker |nvidia-smi|vllm |[A-Z_][A-Z0-9_]*=|#!)")


def language_of(code: str, filename: str | None = None) -> str:
    if filename:
        suffix = filename.rsplit(".", 1)[-1].lower() if "." in filename else ""
        if suffix == "py":
            return "python"
        if suffix in ("sh", "bash"):
            return "bash"
    try:
        ast.parse(code)
        return "python"
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        pass
    lines = [ln for ln in code.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    if lines and all(_SHELL_START.match(ln) for ln in lines):
        return "bash"
    return "text"


class Highlighter:
    """Pygments with one lexer/formatter per kind, reused across thousands of pages."""

    def __init__(self) -> None:
        from pygments.formatters import HtmlFormatter
        from pygments.lexers import BashLexer, PythonLexer, TextLexer

        self._lexers = {"python": PythonLexer(), "bash": BashLexer(), "text": TextLexer()}
        self._plain = HtmlFormatter(cssclass="hl", wrapcode=True)
        self._numbered = HtmlFormatter(cssclass="hl", wrapcode=True, linenos="inline")

    def block(self, code: str, language: str, label: str = "") -> CodeBlock:
        from pygments import highlight

        html = highlight(code, self._lexers[language], self._plain)
        return CodeBlock(text=code, html=html, language=language, label=label)

    def source(self, code: str, start: int, raise_line: int, filename: str) -> CodeBlock:
        """The source excerpt with real line numbers and the raise line marked."""
        from pygments import highlight

        language = language_of(code, filename)
        # One formatter, re-pointed per excerpt: building one costs as much as the
        # highlighting itself.
        formatter = self._numbered
        formatter.linenostart = start
        formatter.hl_lines = {raise_line - start + 1} if start <= raise_line else set()
        html = highlight(code, self._lexers[language], formatter)
        return CodeBlock(text=code, html=html, language=language)

    @staticmethod
    def css() -> str:
        from pygments.formatters import HtmlFormatter

        return (
            "/* Generated from Pygments' default (light) and monokai (dark) styles. */\n"
            + HtmlFormatter(style="default").get_style_defs(".hl")
            + "\n@media (prefers-color-scheme: dark) {\n"
            + HtmlFormatter(style="monokai").get_style_defs(".hl")
            + "\n}\n"
        )


# A section marker is a comment line holding only the word, at the start of a line:
# "# before" ... "# after". Inline comments such as "x = 1  # after" or a
# "# before: old call" note inside one program are not sections.
_FIX_MARKER = re.compile(r"^(?:#|//|--)[ \t]*(before|after|wrong|right|bad|good|fixed|broken)[ \t]*:?[ \t]*$", re.I | re.M)
_AFTER_WORDS = {"after", "right", "good", "fixed"}


def split_example_fix(text: str) -> list[tuple[str, str]]:
    """``[(label, code)]``: "Before" and "After" sections when the fix has both marker
    lines (``# before`` ... ``# after``), else the whole fix as one unlabelled block."""
    marks = list(_FIX_MARKER.finditer(text))
    kinds = {m.group(1).lower() in _AFTER_WORDS for m in marks}
    if kinds != {True, False}:
        return [("", text.strip("\n"))]
    out: list[tuple[str, str]] = []
    head = text[: marks[0].start()].strip("\n")
    if head.strip():
        out.append(("", head))
    for i, m in enumerate(marks):
        end = marks[i + 1].start() if i + 1 < len(marks) else len(text)
        body = text[m.end():end].strip("\n")
        out.append(("After" if m.group(1).lower() in _AFTER_WORDS else "Before", body))
    return out
