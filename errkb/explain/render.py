"""The terminal text of ``errkb explain``: one small function per part of the page.

Plain Python, not a template: every line of the page is "compose a string, make it
visible, wrap or fold it to the width, maybe colour it", which reads more plainly as a
call than as a template of filters, and a cold ``errkb explain`` then needs no template
machinery at all (Jinja2 compiling or importing was a third of such a call).

Record text is untrusted: everything printed goes through :func:`errkb.terminal.visible`
before it is wrapped (so an escape's width counts) and again as it is printed; only the
styles added here carry escape sequences. Every line fits ``width`` columns (prose is
wrapped, code folded; a URL alone on its line stays whole). Colour is added only when
asked for.
"""

from __future__ import annotations

from errkb.terminal import visible

# A log's summary lists every distinct known error; this many are explained in full
# (in order of first appearance: the first is often the cause of the rest).
LOG_EXPLAINED = 5

CONTINUATION = "\u21aa "  # "↪ ": this line continues the one above

_STYLES = {
    "title": {"fg": "red", "bold": True},
    "heading": {"bold": True},
    "matched": {"fg": "yellow", "bold": True},
    "dim": {"dim": True},
    "link": {"fg": "cyan"},
    "code": {"fg": "green"},
    "removed": {"fg": "red"},
    "added": {"fg": "green"},
}


def render_text(explanation, show_all: bool = False, color: bool = False, width: int = 80) -> str:
    """The human explanation of an :class:`errkb.explain.explainer.Explanation`,
    fitting ``width`` columns, coloured when ``color``."""
    page = _Page(color, width)
    found = explanation.found
    limit = len(found) if show_all else (LOG_EXPLAINED if explanation.mode == "log" else 1)
    shown = found[:limit]
    others = len(found) - len(shown)
    if explanation.mode == "log" and shown:
        _log_summary(page, explanation, shown, others)
    elif shown:
        _text_matches(page, shown, others)
    else:
        kind = f"log ({explanation.lines:d} lines)" if explanation.mode == "log" else "text"
        page.prose(f"No known error matches this {kind}.", 0)
        if getattr(explanation, "sites", None):
            _known_sites(page, explanation.sites, "Where it is raised (a known site: errkb has no fix for it):")
        if explanation.near:
            page.blank()
            page.prose("Similar, not exact (the message may have changed between versions):", 0, style="heading")
            _near_matches(page, explanation.near)
        elif getattr(explanation, "search", None):
            _search_hits(page, explanation)
    return page.text()


def _known_sites(page: _Page, sites: list, heading: str, log: bool = False) -> None:
    """The known-site tier (errkb.match.sites.SiteMatch): every site raising each message
    (in a log, each message led by the log line it is on)."""
    page.blank()
    page.prose(heading, 0, style="heading")
    for m in sites:
        at = f"line {m.line_number}: " if log else ""
        if m.meaning is not None:
            page.prose(f"{at}{m.table_name}: {m.meaning}", 2, 4)
            continue
        page.prose(at + _template(m.pattern), 2, 4, style="title")
        if getattr(m, "truncated", False):
            page.prose("the text stops inside this message (cut short); the rest is the site's", 4, 6, style="dim")
        shown, more = m.shown()
        for site in shown:
            page.prose(site.describe(), 4, 6)
            url = site.source_url()
            if url:
                page.prose(url, 6, style="dim")
        if more:
            page.prose(m.more("errkb explain --json"), 4, 6, style="dim")


def _template(pattern: str) -> str:
    """A site pattern as people read a message template: its text, "…" for each value."""
    from errkb.match.chunks import chunks_of

    return "".join("…" if c is None else c for c in chunks_of(pattern))


def _search_hits(page: _Page, explanation) -> None:
    """Nothing matched and nothing is close: what keyword search finds for the text's words."""
    from errkb.explain.explainer import search_command

    command = search_command(explanation.search_words)
    page.blank()
    page.prose(f"Records that mention these words (keyword search, not a match: {command}):", 0, style="heading")
    for h in explanation.search:
        page.prose(f"{h.error_class or 'Error'}  {h.repo}/{h.slug}", 2, 4)
        page.prose(" ".join(h.message.split())[:200], 4, 4, style="dim")
        page.prose(f"see it:  errkb show {h.record_id}", 4)


class _Page:
    """The lines of the page being written, at one width, coloured or not."""

    def __init__(self, color: bool, width: int) -> None:
        self.color = color
        self.width = width
        self.lines: list[str] = []

    def line(self, text: str, style: str | None = None) -> None:
        text = visible(text)
        if style is not None and self.color:
            text = _style(text, style)
        self.lines.append(text)

    def blank(self) -> None:
        self.lines.append("")

    def prose(self, text, indent: int = 2, hang: int | None = None, style: str | None = None) -> None:
        self.line(wrap(visible(text), self.width, indent, hang), style)

    def code(self, text, indent: int = 4) -> None:
        self.line(fold_code(visible(text), self.width, indent), "code")

    def heading(self, text: str) -> None:
        self.blank()
        self.line(text, "heading")

    def rule(self, text: str) -> None:
        """``text`` followed by dashes to the full width (between explained matches)."""
        self.blank()
        self.line(text.ljust(self.width, "-"), "dim")

    def text(self) -> str:
        return "".join(line + "\n" for line in self.lines)


def _plural(n: int, many: str = "s", one: str = "") -> str:
    return one if n == 1 else many


def _log_summary(page: _Page, explanation, shown: list, others: int) -> None:
    """A log: every distinct known error in one line each, then the first few explained."""
    listed = explanation.found
    n, lines = len(listed), explanation.lines
    page.line(f"{n:d} known error{_plural(n)} in {lines:d} line{_plural(lines)}", "heading")
    for f in listed:
        occ = f.occurrences
        page.prose(f"{occ.count:6d} x  lines {occ.first_line:d}-{occ.last_line:d}  {f.error_class or 'Error'}  {f.slug}", 0, 12)
    for k, f in enumerate(shown, 1):
        page.rule(f"-- {k:d}/{n:d} ")
        _record(page, f)
    if others:
        page.blank()
        page.prose(f"{others:d} more known error{_plural(others)} listed above; `errkb explain --all` explains every one, "
                   "`errkb show ID` one record.", 0, style="dim")
    if explanation.near:
        page.blank()
        page.prose("Also in this log, similar to known errors but not exact (the message may have changed between versions):",
                   0, style="heading")
        _near_matches(page, explanation.near)
    if getattr(explanation, "sites", None):
        _known_sites(page, explanation.sites, "Also in this log, raised at known sites (where, not a fix):", log=True)


def _text_matches(page: _Page, shown: list, others: int) -> None:
    """A text: its best match (or, with ``--all``, every one) explained."""
    for k, f in enumerate(shown, 1):
        if k > 1:
            page.rule(f"-- match {k:d}/{len(shown):d} ")
        _record(page, f)
    if others:
        one = others == 1
        page.blank()
        page.prose(f"{others:d} other record{_plural(others)} also matched; `errkb explain --all` shows "
                   f"{'it' if one else 'them all'} with {'its' if one else 'their'} score{_plural(others)}.", 0, style="dim")


def _record(page: _Page, f) -> None:
    """One matched record (an :class:`errkb.explain.explainer.Found`), explained."""
    from errkb.records.view import RecordView  # only a shown match needs it (~3 ms to import)

    r = f.record or {}
    v = RecordView.of(r)
    page.prose(f"{f.error_class or 'Error'}  {f.slug}", 0, 2, style="title")
    if f.variant:
        va = f.variant
        first, last = va.get("first"), va.get("last")
        releases = first if first == last else f"{first}–{last}"
        page.prose(f"{va.get('relation') or 'other'} wording ({va.get('project')} {releases}) of {f.slug}", 2)
    if getattr(f, "truncated", False):
        page.prose("your text stops inside this message: it begins it, word for word", 2)
    bounded = "  (bounded regex path)" if f.bounded else ""
    page.prose(f"{f.repo}  score {f.score:.2f}  id {f.record_id}{bounded}", 2, style="dim")
    if f.occurrences:
        occ = f.occurrences
        page.prose(f"seen {occ.count:d} time{_plural(occ.count)}, lines {occ.first_line:d}-{occ.last_line:d}", 2)
    page.prose(f.message, 2)
    page.prose(f.proof()["line"], 2, style="dim")
    if v.is_draft:
        page.blank()
        page.prose("Draft record: mined from the source, not yet curated; only the raise site is known.", 2, style="dim")
    if r.get("documentation"):
        page.heading("What it is")
        page.prose(r["documentation"], 2)
    if v.file_path:
        page.heading("Where it is raised")
        page.prose(f"{v.file_path}:{v.line_number}", 2)
        if "#" in v.github_url and v.line_number is not None:
            page.prose(v.github_url.split("#", 1)[0] + f"#L{v.line_number}", 2, style="link")
    if r.get("triggerScenarios") or r.get("commonSituations"):
        page.heading("Why it happens")
        if r.get("triggerScenarios"):
            page.prose(r["triggerScenarios"], 2)
        if r.get("commonSituations"):
            page.prose(f"Common situations: {r['commonSituations']}", 2)
    solutions = [s for s in v.solutions if s.strip()]
    if solutions:
        page.heading("How to fix")
        for k, s in enumerate(solutions, 1):
            page.prose(f"{k:d}. {s}", 2, 5)
    if r.get("exampleFix"):
        page.heading("Example fix")
        page.code(r["exampleFix"], 4)
    if r.get("validationCode"):
        page.heading("Validate the fix")
        page.code(r["validationCode"], 4)
    tips = [s for s in v.prevention_tips if s.strip()]
    if tips:
        page.heading("Prevention")
        for t in tips:
            page.prose(f"- {t}", 2, 4)


def _near_matches(page: _Page, near: list) -> None:
    """The near matches ("similar, not exact"), each with how it differs."""
    for n in near:
        r = n.record or {}
        page.blank()
        # shown from the score --json gives (4 places), so the two never disagree in the 2nd
        page.prose(f"{round(n.similarity, 4):.2f}  {n.error_class or 'Error'}  {n.repo}  ({', '.join(map(str, n.closeness))})", 2, 8)
        page.prose(n.slug, 8)
        differences = n.differences
        if differences:
            parts = [f"{d.record} -> {d.text}" if d.op == "changed" else f"no {d.record}" if d.op == "missing" else f"extra {d.text}"
                     for d in differences]
            page.prose("differs: " + "; ".join(parts), 8, 10)
        page.prose(f"record:  {r.get('errorMessage') or ''}", 8, 17, style="dim")
        page.prose(f"see it:  errkb show {n.record_id}", 8, 17, style="dim")


def _style(text: str, name: str) -> str:
    import click  # only a terminal in colour gets here

    return click.style(text, **_STYLES[name]) if text else ""


def wrap(text, width: int = 80, indent: int = 2, hang: int | None = None) -> str:
    """Prose wrapped to ``width`` columns, paragraphs (line breaks) kept.

    ``hang``: indent of continuation lines (default ``indent``). A word longer than
    the line is cut, except a URL, which stays whole so it can still be opened.
    """
    import textwrap

    if text is None:
        return ""
    hang = indent if hang is None else hang
    out: list[str] = []
    first = True
    for paragraph in str(text).split("\n"):
        lead = " " * (indent if first else hang)
        first = False
        if not paragraph.strip():
            out.append("")
            continue
        lines = textwrap.wrap(
            paragraph, width=width, initial_indent=lead, subsequent_indent=" " * hang,
            break_long_words=False, break_on_hyphens=False,
        ) or [lead]
        for line in lines:
            out.extend(_cut(line, width, hang))
    return "\n".join(out)


def _cut(line: str, width: int, hang: int) -> list[str]:
    if len(line) <= width:
        return [line]
    stripped = line.strip()
    if " " not in stripped and stripped.startswith(("http://", "https://")):
        return [line]
    room = max(width - hang, 10)
    # by index: `rest = rest[room:]` copied the rest each time, quadratic on a 3 MB field
    return [line[:width]] + [" " * hang + line[i : i + room] for i in range(width, len(line), room)]


def fold_code(text, width: int = 80, indent: int = 4) -> str:
    """Code indented by ``indent``, each line folded at ``width`` (continuations marked)."""
    if text is None:
        return ""
    lead = " " * indent
    room = max(width - indent, 20)
    out: list[str] = []
    for line in str(text).expandtabs(4).split("\n"):
        first = True
        pos = 0  # by index: `line = line[cut:]` copied the rest each time, quadratic on a 3 MB line
        while True:
            avail = room if first else room - len(CONTINUATION)
            if len(line) - pos <= avail:
                out.append((lead + ("" if first else CONTINUATION) + line[pos:]).rstrip())
                break
            # break after the last space that leaves at least half the line, else hard
            cut = line.rfind(" ", pos + avail // 2, pos + avail) + 1 or pos + avail
            out.append((lead + ("" if first else CONTINUATION) + line[pos:cut]).rstrip())
            pos = cut
            first = False
    return "\n".join(out)
