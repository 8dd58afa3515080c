"""Text from records and runs, made safe to print on a terminal.

Record prose, patterns and sandbox output are untrusted: an escape sequence in a
record's ``documentation`` could set the user's clipboard (OSC 52), clear the screen
or rewrite what was printed before it, and a bidi override could make text read
differently from what it is. :func:`visible` shows such characters as escapes instead
of emitting them. Newline and tab pass through (prose and code need them); JSON
output never goes through here (``json.dumps`` escapes control characters itself).
"""

from __future__ import annotations

import re

# C0 controls except \t and \n, DEL, C1 controls; the bidi embeddings, overrides and
# isolates (U+202A-U+202E, U+2066-U+2069), and the directional marks that can reorder
# a line as well (U+200E, U+200F, U+061C).
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _escape(m: re.Match) -> str:
    cp = ord(m.group())
    return f"\\x{cp:02x}" if cp <= 0xFF else f"\\u{cp:04x}"


def visible(text: str) -> str:
    """``text`` with every control character (but ``\\n`` and ``\\t``) and every bidi
    control shown as an escape (ESC becomes the four characters ``\\x1b``).
    Idempotent: the escapes are plain printable ASCII."""
    if not isinstance(text, str):
        return text
    return _UNSAFE.sub(_escape, text)


def one_line(text: str) -> str:
    """``text`` made :func:`visible` with newline and tab escaped too: for a file name or
    other value quoted inside a one-line message (a file may be named ``"a\\nb.json"``)."""
    return visible(text).replace("\n", "\\n").replace("\t", "\\t")
