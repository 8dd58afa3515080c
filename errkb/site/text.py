"""Text placed into pages: record text (untrusted) with its control characters shown
as escapes, JSON safe inside ``<script>``, and the short excerpts lists show."""

from __future__ import annotations

import json
import re

from markupsafe import Markup

from errkb.terminal import visible


def visible_value(value):
    """Every value a template prints: control characters and bidi overrides from record
    text shown as escapes (``\\x1b``), as in the terminal (errkb.terminal). Escaping for
    HTML leaves them: a NUL or an ESC went into the page as is, and a U+202E could
    reorder a line of code on a fix page. Highlighted code (Markup) is treated alike:
    such characters are never part of a tag."""
    if not isinstance(value, str):
        return value
    # CR is a line break to the HTML parser (CRLF and a lone CR become LF), not a control
    shown = visible(value.replace("\r\n", "\n").replace("\r", "\n") if "\r" in value else value)
    if shown is value or shown == value:
        return value
    return Markup(shown) if isinstance(value, Markup) else shown


def script_json(value) -> Markup:
    """JSON safe to place inside ``<script type="application/json">``: no ``</script>``,
    no ``<!--``, no U+2028/2029 (they end a line in older JavaScript)."""
    text = json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    for raw, esc in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"), ("\u2028", "\\u2028"), ("\u2029", "\\u2029")):
        text = text.replace(raw, esc)
    # DEL, C1 controls and bidi overrides as JSON escapes (the same characters), so that
    # the templates' finalize (visible_value) finds none to rewrite into invalid JSON.
    return Markup(_JSON_UNSAFE.sub(lambda m: "\\u%04x" % ord(m.group()), text))


_JSON_UNSAFE = re.compile("[\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def excerpt(text: str, limit: int = 220) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"
