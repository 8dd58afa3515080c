"""Validation snippets: one standalone Python file per record.

A snippet names its record (id, repo, slug, message, source link, analysed commit),
wraps the record's ``validationCode`` in ``validate()`` and has a ``__main__`` entry
point whose exit status says how it went: 0 validated, 1 validation failed, 2 it could
not run (a module is missing, or the code is not valid Python).

Record text is untrusted: header values are written as escaped, one-line comments and
as ``repr()`` literals, so no value can end the comment or a string early; the code
itself is indented into the function without touching the inside of multi-line
string literals (their content would change). The template is
``templates/snippet.py.j2``.
"""

from __future__ import annotations

import io
import tokenize
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from errkb.errors import ErrkbError
from errkb.resources import templates_dir

INDENT = "    "


class SnippetError(ErrkbError):
    """Bad snippet request (unknown id, unusable folder); one line for the user."""


@dataclass
class SnippetReport:
    out: Path
    written: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # "<id>: reason"

    def as_dict(self) -> dict:
        return {"out": str(self.out), "written": self.written, "unchanged": self.unchanged, "skipped": self.skipped}


def snippet_filename(record: dict) -> str:
    return f"{record['id']}.py"


def comment_text(value) -> str:
    """One line of ASCII that cannot leave a ``#`` comment: every control character,
    line separator and non-ASCII character is written as an escape."""
    return ascii(str(value))[1:-1]


def _string_continuation_lines(code: str) -> set[int]:
    """1-based lines that continue a multi-line string token (their leading
    whitespace belongs to the string, so indenting them would change its value)."""
    inside: set[int] = set()
    tokens = tokenize.generate_tokens(io.StringIO(code).readline)
    for tok in tokens:
        if tok.type == tokenize.STRING or tok.type == getattr(tokenize, "FSTRING_MIDDLE", -1):
            start, end = tok.start[0], tok.end[0]
            inside.update(range(start + 1, end + 1))
    return inside


def indent_code(code: str) -> str:
    """``code`` as the body of a function: every line indented one level except the
    inside of multi-line strings. Raises SyntaxError when ``code`` cannot be tokenized
    as Python (whether the function then compiles is checked on the whole snippet)."""
    code = code.replace("\r\n", "\n").replace("\r", "\n").expandtabs(8)
    try:
        keep = _string_continuation_lines(code)
    except (tokenize.TokenError, IndentationError) as e:
        raise SyntaxError(str(e)) from e
    out = []
    for n, line in enumerate(code.split("\n"), 1):
        out.append(line if n in keep or not line.strip() else INDENT + line)
    return "\n".join(out).rstrip() or INDENT + "pass"


def _env():
    from jinja2 import Environment, FileSystemLoader, StrictUndefined

    # A Python file, not HTML: escaping is done by the `comment` and `pyrepr` filters.
    env = Environment(
        loader=FileSystemLoader(str(templates_dir())),
        autoescape=False,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters["comment"] = comment_text
    env.filters["pyrepr"] = lambda v: ascii(v)
    return env


_TEMPLATE = None


def snippet_text(record: dict) -> str:
    """The snippet of ``record`` (which must have validationCode)."""
    global _TEMPLATE
    if _TEMPLATE is None:
        _TEMPLATE = _env().get_template("snippet.py.j2")
    code = record.get("validationCode")
    if not code:
        raise SnippetError(f"record {record['id']} has no validationCode")
    original_lines = code.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    try:
        body, problem = indent_code(code), None
    except (SyntaxError, ValueError) as e:
        body, problem = None, f"validationCode is not valid Python: SyntaxError: {getattr(e, 'msg', None) or e}"
    text = _TEMPLATE.render(r=record, body=body, problem=problem, original_lines=original_lines)
    try:
        compile(text, snippet_filename(record), "exec", dont_inherit=True)
    except (SyntaxError, ValueError) as e:
        if body is None:
            raise  # the fallback itself must always compile: a bug here, never shipped
        # Tokenizes but does not compile inside a function (`from __future__`, bad syntax).
        problem = f"validationCode is not valid Python: SyntaxError: {getattr(e, 'msg', None) or e}"
        text = _TEMPLATE.render(r=record, body=None, problem=problem, original_lines=original_lines)
        compile(text, snippet_filename(record), "exec", dont_inherit=True)
    return text


def select_records(store, ids: Iterable[str]) -> list[dict]:
    """The records named by id, slug or owner/name/slug; all records when none are named."""
    ids = list(ids)
    if not ids:
        return store.records()
    out = []
    for key in ids:
        rec = store.get(key)
        if rec is None:
            raise SnippetError(f"no record with id or slug {key!r} (try `errkb list`)")
        out.append(rec)
    return out


def write_snippets(store, out: Path, ids: Iterable[str] = ()) -> SnippetReport:
    """Write one snippet per record with validation code into ``out``."""
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise SnippetError(f"{out}: not a folder")
    records = select_records(store, ids)
    out.mkdir(parents=True, exist_ok=True)
    report = SnippetReport(out=out)
    for rec in records:
        if not rec.get("validationCode"):
            report.skipped.append(f"{rec['id']}: no validationCode")
            continue
        name = snippet_filename(rec)
        text = snippet_text(rec).encode()
        target = out / name
        if target.is_file() and target.read_bytes() == text:
            report.unchanged.append(name)
            continue
        target.write_bytes(text)
        report.written.append(name)
    return report
