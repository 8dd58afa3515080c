"""Record prose and run output never reach the terminal as control sequences.

Hypothesis generates hostile strings (escape sequences, C0/C1 controls, DEL, bidi
overrides and isolates, mixed with ordinary text); they are put into every field a
command prints, and the printed text must hold none of them, shown as escapes
instead. JSON output stays exact.
"""

from __future__ import annotations

import json
import re

from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from errkb.cli import cli
from errkb.terminal import visible
from tests.support import SEED_FILE, SEED_ID, SEED_MESSAGE, force_stored_record

UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
ATTACKS = ["\x1b]52;c;ZWNobyBwd25lZA==\x07", "\x1b[2J\x1b[H", "\x1b[31m", "\r", "\x9b31m", "\x7f", "\x00",
           "\u202e", "\u2066", "\x08\x08", "\x1bP+q\x1b\\", "\x0b\x0c"]
hostile = st.lists(st.one_of(st.sampled_from(ATTACKS), st.text(alphabet=st.characters(max_codepoint=0x2100), max_size=8)),
                   min_size=1, max_size=8).map("".join)


@given(st.text())
def test_visible_leaves_no_control_character_and_is_idempotent(text):
    shown = visible(text)
    assert not UNSAFE.search(shown)
    assert visible(shown) == shown
    # what is safe is untouched: newlines, tabs, printable text
    assert shown.count("\n") == text.count("\n") and shown.count("\t") == text.count("\t")


def test_visible_spells_escapes_out():
    assert visible("a\x1b[2Jb\u202ec\td\n") == "a\\x1b[2Jb\\u202ec\td\n"
    assert visible("naïve 中文 — ok") == "naïve 中文 — ok"


def _store(tmp_path, record_changes: dict):
    from errkb.store.db import Store

    record = json.loads(SEED_FILE.read_text())["record"]
    db = tmp_path / "s.duckdb"
    with Store.open(db) as store:
        store.ingest([SEED_FILE])
        force_stored_record(store.con, dict(record, **record_changes), like_id=SEED_ID)
    return db


PROSE = ["documentation", "commonSituations", "triggerScenarios", "exampleFix", "validationCode", "errorClass", "slug"]


@settings(max_examples=8, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(st.fixed_dictionaries({k: hostile for k in PROSE}), st.sampled_from([False, True]))
def test_explain_and_show_print_hostile_record_text_visibly(tmp_path_factory, fields, color):
    from errkb.explain.explainer import explain
    from errkb.explain.render import render_text
    from errkb.kb import KnowledgeBase

    changes = dict(fields, slug="s" + fields["slug"], solutions=[fields["documentation"]],
                   preventionTips=[fields["exampleFix"]], commonSituations=fields["commonSituations"],
                   triggerScenarios=fields["triggerScenarios"])
    db = _store(tmp_path_factory.mktemp("t"), changes)
    runner = CliRunner()
    for args in (["explain", "--db", str(db), SEED_MESSAGE], ["show", "--db", str(db), SEED_ID]):
        result = runner.invoke(cli, args)
        assert result.exit_code == 0, result.output
        assert not UNSAFE.search(result.output), (args, result.output)
    # the coloured rendering: only errkb's own colour codes, each a plain SGR
    text = render_text(explain(KnowledgeBase.open(db), SEED_MESSAGE), color=color)
    assert not UNSAFE.search(re.sub(r"\x1b\[[0-9;]*m", "", text))
    # --json stays exact: the same characters, JSON-escaped
    shown = json.loads(runner.invoke(cli, ["show", "--db", str(db), SEED_ID, "--json"]).output)
    assert shown["documentation"] == fields["documentation"]


def test_lint_and_errors_show_hostile_file_names_and_values_visibly(tmp_path):
    record = json.loads(SEED_FILE.read_text())["record"]
    bad = dict(record, githubUrl="https://github.com/x/y\x1b]52;c;AAAA\x07", lineNumber=10**6)
    path = tmp_path / "r\x1b[2J.json"
    path.write_text(json.dumps(bad))
    result = CliRunner().invoke(cli, ["lint", str(path)])
    assert "E304" in result.output and "\\x1b]52" in result.output
    assert not UNSAFE.search(result.output)
    result = CliRunner().invoke(cli, ["show", "--db", str(tmp_path / "none.duckdb"), "x\x1b[2Jy"])
    assert result.exit_code == 2 and not UNSAFE.search(result.output)
