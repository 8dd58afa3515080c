"""A crash counts as no verdict: only the validation's own assertion or exit rejects a state,
and only a fixed state that runs through shows the fix working.

Small synthetic cases run in the real sandbox with errkb's own interpreter (no venvs): a tiny
"library" written beside the case, validations that crash before any verdict (a bad argv,
argparse's usage error, an assertion inside the library), an 'after' whose child process
cannot start; and the same rules on the sandbox tier of `errkb verify`.
"""

from __future__ import annotations

import json
import sys

import pytest
from click.testing import CliRunner

from errkb.cli import cli
from errkb.verify import proofs as P
from errkb.verify import sandbox
from errkb.verify.reproducers import Requirements, case
from errkb.verify.runs import run_reproducer
from tests.support import write_jsonl

needs_ns = pytest.mark.skipif(not sandbox.capabilities().namespaces, reason="needs namespaces (root and util-linux unshare)")

LIBRARY = '''
def check(limit):
    if 3 > limit:
        raise ValueError(f"Widget count 3 exceeds limit {limit}")
    return "3 widgets fit"


def strict(limit):
    assert limit >= 0, "widgetlib: negative limit"
    return limit
'''

CASE = '''
import subprocess
import sys

import widgetlib

STATES = {"before": {"argv": ["--limit", "2"], "env": {}}, "after": {"argv": ["--limit", "5"], "env": {}}}


def trigger(state):
    limit = int(state["argv"][1])
    if state is STATES["after"] and AFTER_CHILD:
        # the fixed program hands its work to a child that cannot start
        subprocess.run([sys.executable, "-c", "import widgetlib_worker"], check=True, capture_output=True)
    return widgetlib.check(limit)


AFTER_CHILD = False
'''

OWN_VERDICT = '''import sys
limit = int(sys.argv[sys.argv.index("--limit") + 1])
if limit < 3:
    raise SystemExit(f"limit {limit} is below the 3 widgets")
'''


def _record(seed_record, validation: str) -> dict:
    rec = dict(seed_record)
    lines = LIBRARY.splitlines()
    rec.update(id="feedfacefeedface", slug="widget-count-exceeds-limit", errorMessage="Widget count 3 exceeds limit 2",
               messagePattern=r"Widget count (.+?) exceeds limit (.+?)", errorClass="ValueError", validationCode=validation,
               # the record's raise site is the library's: widgetlib.py, in check()
               filePath="widgetlib.py", sourceCode="\n".join(lines), sourceCodeStart=1, sourceCodeEnd=len(lines),
               lineNumber=next(n for n, text in enumerate(lines, 1) if "raise ValueError" in text))
    return rec


@pytest.fixture
def widget_case(tmp_path, monkeypatch):
    folder = tmp_path / "cases"
    folder.mkdir()
    for p in (tmp_path, folder):
        p.chmod(0o755)
    (folder / "widgetlib.py").write_text(LIBRARY)  # the single driver puts the case's folder on sys.path
    (folder / "widgets.py").write_text(CASE)
    monkeypatch.setenv("ERRKB_GPU_PYTHON", sys.executable)
    rep = case("feedfacefeedface", "widgets.py", Requirements(system_python=True))
    return rep.__class__(**{**rep.__dict__, "case": folder / "widgets.py"})


def _prove(record: dict, rep) -> tuple[str, dict]:
    checks = []
    run_reproducer(record, rep, None, checks.append)
    status, _reason = P.judge(record, rep.tier, checks)
    return status, {c.check: c for c in checks}


@needs_ns
def test_the_validations_own_exit_with_its_message_is_a_verdict(seed_record, widget_case):
    status, checks = _prove(_record(seed_record, OWN_VERDICT), widget_case)
    assert status == "proven"
    before = checks["validationCode:before:in-reproducer"]
    assert (before.outcome, before.exception_class) == ("pass", "SystemExit")
    assert before.reason == "rejects the 'before' state, as it must (SystemExit: limit 2 is below the 3 widgets)"


@needs_ns
@pytest.mark.parametrize(("validation", "why"), [
    # a bad argv: int() dies before the code judges anything
    ("import sys\nlimit = int(sys.argv[1])\nassert limit >= 3\n",
     "crashed before any verdict (ValueError: invalid literal for int() with base 10: '--limit' in <validationCode>:2 (<module>))"),
    # argparse's usage error is a SystemExit, but argparse's, not the code's
    ("import argparse\np = argparse.ArgumentParser()\np.add_argument('--max', type=int, required=True)\n"
     "p.add_argument('--limit', type=int)\nassert p.parse_args().limit >= 3\n",
     "crashed before any verdict (a usage error in argparse.py:"),
    # an assertion inside the library the code calls is the library's, not the code's verdict
    ("import sys, widgetlib\nwidgetlib.strict(-int(sys.argv[2]))\n",
     "crashed before any verdict (AssertionError: widgetlib: negative limit in widgetlib.py:9 (strict))"),
])
def test_a_validation_that_crashes_before_its_verdict_is_an_error_never_a_rejection(seed_record, widget_case, validation, why):
    status, checks = _prove(_record(seed_record, validation), widget_case)
    before = checks["validationCode:before:in-reproducer"]
    assert before.outcome == "error"
    assert before.reason.startswith(f"the validation code {why}")
    assert status == "failed"


@needs_ns
def test_the_records_own_error_raised_through_the_validation_is_its_verdict(seed_record, widget_case):
    # like a validation that starts the engine the user starts: the library's own check rejects
    validation = "import sys, widgetlib\nwidgetlib.check(int(sys.argv[2]))\n"
    status, checks = _prove(_record(seed_record, validation), widget_case)
    assert checks["validationCode:before:in-reproducer"].outcome == "pass"
    assert status == "proven"


@needs_ns
def test_an_after_state_whose_child_cannot_start_is_no_pass(seed_record, widget_case):
    widget_case.case.write_text(CASE.replace("AFTER_CHILD = False", "AFTER_CHILD = True"))
    status, checks = _prove(_record(seed_record, OWN_VERDICT), widget_case)
    after = checks["reproducer:widgets:after"]
    assert after.outcome == "error"
    assert after.reason.startswith("the 'after' state crashed (CalledProcessError: Command ")
    assert after.reason.endswith("no verdict that the fix removes the error")
    assert status == "failed"


@needs_ns
def test_a_before_state_that_cannot_import_its_library_is_an_error_not_a_failure_of_the_record(seed_record, widget_case):
    (widget_case.case.parent / "widgetlib.py").unlink()
    _status, checks = _prove(_record(seed_record, OWN_VERDICT), widget_case)
    # the case module itself imports the library: the driver stops before any trigger runs
    before = checks["reproducer:widgets:before"]
    assert before.outcome == "error"


def _verify(tmp_path, record) -> dict:
    db = tmp_path / "store.duckdb"
    ingest = CliRunner().invoke(cli, ["ingest", "--db", str(db), str(write_jsonl(tmp_path / "r.jsonl", [record]))])
    assert ingest.exit_code == 0, ingest.output
    result = CliRunner().invoke(cli, ["verify", "--db", str(db), record["id"], "--json"])
    return {r["check"]: r for r in json.loads(result.output)["results"]}


FIX = "# before\nexport VLLM_TEST_LIMIT=two\n\n# after\nexport VLLM_TEST_LIMIT=5\n"


def test_verify_calls_a_validation_crashing_in_the_broken_state_an_error_not_a_rejection(make_variant, tmp_path):
    record = make_variant(1)
    record.update(exampleFix=FIX, validationCode="import os\nassert int(os.environ['VLLM_TEST_LIMIT']) >= 3, 'too few'\n")
    checks = _verify(tmp_path, record)
    before = checks["validationCode:before"]
    assert before["outcome"] == "error"
    assert before["reason"].startswith("the validation code crashed before any verdict (ValueError: invalid literal for int()")
    assert checks["validationCode:after"]["outcome"] == "pass"


def test_verify_keeps_the_validations_own_exit_as_its_verdict(make_variant, tmp_path):
    record = make_variant(1)
    record.update(exampleFix=FIX, validationCode=(
        "import os, sys\nif os.environ['VLLM_TEST_LIMIT'] != '5':\n    sys.exit('VLLM_TEST_LIMIT must be 5')\n"))
    checks = _verify(tmp_path, record)
    assert checks["validationCode:before"]["outcome"] == "pass"
    assert checks["validationCode:after"]["outcome"] == "pass"
