"""Message templates: the literal parts and placeholders of a raised message, built from
its format code (f-strings, ``%`` and ``.format`` templates, concatenations), and the
``messagePattern`` regex the dataset writes for them.

Used by errkb.mine.raise_sites, which finds the raise sites. Only ``ast`` is used: the
code under inspection is never imported or run.
"""

from __future__ import annotations

import ast
import re
import string
from dataclasses import dataclass

from errkb.match.chunks import chunks_match as _chunks_match

# Exactly the characters the dataset backslash-escapes in messagePattern. Python's
# re.escape also escapes spaces, quotes, '-', '#', '&' and '~', which the dataset
# keeps as they are (see the seed and bench-corpus/patterns.jsonl.gz).
_REGEX_META = frozenset(".^$*+?{}[]\\|()")
_CONTROL_ESCAPES = {"\n": "\\n", "\t": "\\t", "\r": "\\r", "\f": "\\f", "\v": "\\v"}

# A placeholder must not swallow a line break: log lines are matched one at a time.
# Only when the message's own literal text spans lines (a multi-line message, where
# values such as tables and reprs are themselves often multi-line) may it cross one.
WILDCARD = "(.+?)"
WILDCARD_MULTILINE = "([\\s\\S]+?)"

_PRINTF_SPEC = re.compile(
    r"%(?P<key>\([^)]*\))?(?P<flags>[#0\- +]*)(?P<width>\*|\d+)?(?:\.(?P<prec>\*|\d+))?[hlL]?(?P<conv>[diouxXeEfFgGcrsa%])"
)


# ---------------------------------------------------------------- message templates


@dataclass(frozen=True)
class Placeholder:
    """A value formatted into a message at run time."""

    expr: str  # source text of the value ("self.dtype", "len(shape)"); "" when unknown
    conversion: str = ""  # "r", "s" or "a" ({x!r}, %r)
    format_spec: str = ""  # "d", ".2f", ... (as written; printf conversions are mapped)

    def display(self) -> str:
        return "{" + (self.expr or "…") + "}"

    def plausible_value(self) -> str:
        """A value a reader would accept in the rendered example message (never empty, one line)."""
        spec = self.format_spec.rstrip()
        kind = spec[-1:] if spec else ""
        hint = _hint(self.expr)
        if kind in ("d", "i", "u", "n", "o", "c") or _looks_countable(self.expr, hint):
            value = "3"
        elif kind in ("x", "X"):
            value = "1f"
        elif kind in ("e", "E", "f", "F", "g", "G", "%"):
            value = "0.5"
        elif "dtype" in hint:
            value = "float32"
        elif "shape" in hint:
            value = "(2, 3)"
        elif hint.endswith(("path", "file", "filename", "dir", "directory")):
            value = "/tmp/example"
        elif hint.endswith("type") or hint in ("cls", "klass", "class"):
            value = "str"
        elif hint:
            value = hint
        else:
            value = "value"
        if self.conversion in ("r", "a") and value[:1] not in "('[" and not value.isdigit():
            value = repr(value)
        return value


def _hint(expr: str) -> str:
    """The identifier that names the value: ``self.model.dtype`` -> ``dtype``."""
    names = re.findall(r"[A-Za-z_][A-Za-z0-9_]*", expr)
    names = [n for n in names if not (n.startswith("__") and n.endswith("__"))] or names
    if not names:
        return ""
    if expr.startswith(("type(", "repr(", "str(")) and len(names) > 1:
        return "type" if expr.startswith("type(") else names[-1].lower()
    return names[-1].lower()


def _looks_countable(expr: str, hint: str) -> bool:
    if expr.startswith("len("):
        return True
    if hint in ("n", "i", "j", "k", "num", "count", "size", "length", "idx", "index", "dim", "ndim", "rank", "axis", "lineno", "line"):
        return True
    return hint.startswith(("num_", "n_")) or hint.endswith(("_size", "_len", "_count", "_num", "_idx", "_index", "_dim", "_rank"))


@dataclass(frozen=True)
class Template:
    """A message as literal text interleaved with placeholders."""

    parts: tuple[str | Placeholder, ...]

    @staticmethod
    def of(parts: list[str | Placeholder]) -> Template:
        merged: list[str | Placeholder] = []
        for part in parts:
            if isinstance(part, str):
                if not part:
                    continue
                if merged and isinstance(merged[-1], str):
                    merged[-1] = merged[-1] + part
                    continue
            merged.append(part)
        return Template(tuple(merged))

    def __add__(self, other: Template) -> Template:
        return Template.of([*self.parts, *other.parts])

    @property
    def literal(self) -> str:
        return "".join(p for p in self.parts if isinstance(p, str))

    @property
    def placeholders(self) -> list[Placeholder]:
        return [p for p in self.parts if isinstance(p, Placeholder)]

    @property
    def multiline(self) -> bool:
        return "\n" in self.literal

    def display(self) -> str:
        """The message as a person reads it: ``Unsupported dtype {dtype}``."""
        return "".join(p if isinstance(p, str) else p.display() for p in self.parts)

    def render(self) -> str:
        """An example message with plausible values in place of the placeholders."""
        return "".join(p if isinstance(p, str) else p.plausible_value() for p in self.parts)

    def pattern(self) -> str:
        """messagePattern, built the way the dataset builds it."""
        wildcard = WILDCARD_MULTILINE if self.multiline else WILDCARD
        return "".join(escape_literal(p) if isinstance(p, str) else wildcard for p in self.parts)

    def matches(self, text: str) -> bool:
        """Whether ``self.pattern()`` would find a match in ``text``, in linear time.

        The pattern is literal chunks separated by non-empty wildcards, so the
        leftmost placement of each chunk is optimal; single-line templates are tried
        one line at a time because their wildcards cannot cross a line break.
        """
        chunks: list[str | None] = [p if isinstance(p, str) else None for p in self.parts]
        if self.multiline:
            return _chunks_match(chunks, text)
        return any(_chunks_match(chunks, line) for line in text.split("\n"))


    def fullmatches(self, text: str) -> bool:
        """Whether ``self.pattern()`` matches all of ``text`` (as ``re.fullmatch``), in linear time."""
        if not self.multiline and "\n" in text:
            return False  # neither the literal text nor a wildcard can hold a line break
        parts = list(self.parts)
        if parts and isinstance(parts[0], str):
            if not text.startswith(parts[0]):
                return False
            text, parts = text[len(parts[0]) :], parts[1:]
        if parts and isinstance(parts[-1], str):
            if not text.endswith(parts[-1]) or len(text) < len(parts[-1]):
                return False
            text, parts = text[: len(text) - len(parts[-1])], parts[:-1]
        if not parts:
            return text == ""
        # Now parts start and end with a wildcard: leftmost placement of the middle
        # chunks leaves the most room for the rest.
        return _chunks_match([p if isinstance(p, str) else None for p in parts], text)


def escape_literal(text: str) -> str:
    out = []
    for ch in text:
        if ch in _REGEX_META:
            out.append("\\" + ch)
        elif ch in _CONTROL_ESCAPES:
            out.append(_CONTROL_ESCAPES[ch])
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\x{ord(ch):02x}")
        else:
            out.append(ch)
    return "".join(out)



class NoTemplate(Exception):
    """Why a message expression cannot become a template (the reason is reported)."""


def check_encodable(template: Template) -> None:
    try:
        template.literal.encode("utf-8")
    except UnicodeEncodeError:
        raise NoTemplate("message is not valid Unicode (lone surrogate)") from None


def placeholder_for(node: ast.expr, conversion: str = "", spec: str = "") -> Placeholder:
    try:
        expr = ast.unparse(node)
    except Exception:  # ast.unparse has gaps on odd nodes; the name is only a hint
        expr = ""
    if len(expr) > 80:
        expr = expr[:77] + "..."
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("str", "repr") and node.args:
        conversion = conversion or ("r" if node.func.id == "repr" else "")
    return Placeholder(expr=expr, conversion=conversion, format_spec=spec)


def template_of_fstring(node: ast.JoinedStr) -> Template:
    parts: list[str | Placeholder] = []
    for value in node.values:
        if isinstance(value, ast.Constant):
            parts.append(str(value.value))
        elif isinstance(value, ast.FormattedValue):
            conversion = chr(value.conversion) if value.conversion and value.conversion > 0 else ""
            spec = ""
            if isinstance(value.format_spec, ast.JoinedStr):
                pieces = value.format_spec.values
                if all(isinstance(p, ast.Constant) for p in pieces):
                    spec = "".join(str(p.value) for p in pieces)
            parts.append(placeholder_for(value.value, conversion, spec))
    return Template.of(parts)


def template_of_percent(fmt: str, right: ast.expr) -> Template:
    """``"... %s ... %(name)d" % args``."""
    if isinstance(right, ast.Tuple):
        values: list[ast.expr] | None = list(right.elts)
    else:
        values = None  # one value, or a mapping
    mapping = {}
    if isinstance(right, ast.Dict):
        for k, v in zip(right.keys, right.values):
            if isinstance(k, ast.Constant) and isinstance(k.value, str):
                mapping[k.value] = v
    parts: list[str | Placeholder] = []
    pos = 0
    index = 0
    for m in _PRINTF_SPEC.finditer(fmt):
        parts.append(fmt[pos : m.start()])
        pos = m.end()
        conv = m.group("conv")
        if conv == "%":
            parts.append("%")
            continue
        if m.group("width") == "*" or m.group("prec") == "*":
            index += (m.group("width") == "*") + (m.group("prec") == "*")
        key = m.group("key")
        conversion = conv if conv in ("r", "a") else ""
        spec = conv if conv not in ("r", "a", "s") else ""
        if key:
            name = key[1:-1]
            node = mapping.get(name)
            parts.append(placeholder_for(node, conversion, spec) if node is not None else Placeholder(name, conversion, spec))
        else:
            if values is not None:
                node = values[index] if index < len(values) else None
            else:
                node = right if index == 0 else None
            index += 1
            parts.append(placeholder_for(node, conversion, spec) if node is not None else Placeholder("", conversion, spec))
    parts.append(fmt[pos:])
    return Template.of(parts)


def template_of_format(fmt: str, call: ast.Call) -> Template:
    """``"... {} ... {name!r:>10}".format(*args, **kwargs)``."""
    keywords = {k.arg: k.value for k in call.keywords if k.arg}
    parts: list[str | Placeholder] = []
    auto = 0
    try:
        parsed = list(string.Formatter().parse(fmt))
    except ValueError as e:
        raise NoTemplate(f"bad .format string ({e})") from None
    for literal, field_name, spec, conversion in parsed:
        parts.append(literal)
        if field_name is None:
            continue
        head = re.split(r"[.\[]", field_name, maxsplit=1)[0]
        rest = field_name[len(head) :]
        node: ast.expr | None = None
        if head == "":
            if auto < len(call.args):
                node = call.args[auto]
            auto += 1
        elif head.isdigit():
            if int(head) < len(call.args):
                node = call.args[int(head)]
        else:
            node = keywords.get(head)
        if node is not None and not isinstance(node, ast.Starred):
            placeholder = placeholder_for(node, conversion or "", spec or "")
            if rest:
                placeholder = Placeholder(placeholder.expr + rest, placeholder.conversion, placeholder.format_spec)
        else:
            placeholder = Placeholder(field_name, conversion or "", spec or "")
        parts.append(placeholder)
    return Template.of(parts)


