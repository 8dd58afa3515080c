"""W504: validation code that cannot reject anything — it has no verdict of its own (no assert,
no raise, no exit with a message or a non-zero status), so it passes the broken setup too."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from errkb.cli import cli
from errkb.records.lint import RULES, lint_record, lint_records, validation_can_reject
from errkb.records.read import read_records
from errkb.resources import data_dir

CANNOT_REJECT = {
    "prints argv": "import sys; print(sys.argv)\n",
    "prints a check": "import os\nprint('ok' if os.environ.get('VLLM_USE_V1') == '1' else 'set VLLM_USE_V1=1')\n",
    "exits 0": "import sys\nif '--tp' not in sys.argv:\n    print('missing --tp')\nsys.exit(0)\n",
    "bare exit": "import sys\nprint(sys.argv)\nexit()\n",
    "exit None": "import sys\nsys.exit(None)\n",
}
CAN_REJECT = {
    "assert": "import sys\nassert '--tp' in sys.argv\n",
    "raise": "import os\nif os.environ.get('X') != '1':\n    raise RuntimeError('set X=1')\n",
    "SystemExit": "import sys\nif '--tp' not in sys.argv:\n    raise SystemExit('give --tp')\n",
    "sys.exit message": "import sys\nif '--tp' not in sys.argv:\n    sys.exit('give --tp')\n",
    "exit 1": "import sys\nif '--tp' not in sys.argv:\n    exit(1)\n",
    "os._exit": "import os, sys\nif '--tp' not in sys.argv:\n    os._exit(3)\n",
    "main's status": "import sys\n\ndef main():\n    return 0 if '--tp' in sys.argv else 1\n\nsys.exit(main())\n",
}


@pytest.mark.parametrize("name", sorted(CANNOT_REJECT))
def test_code_without_a_verdict_of_its_own_cannot_reject(name):
    assert validation_can_reject(CANNOT_REJECT[name]) is False


@pytest.mark.parametrize("name", sorted(CAN_REJECT))
def test_an_assert_a_raise_or_a_failing_exit_is_a_verdict(name):
    assert validation_can_reject(CAN_REJECT[name]) is True


def test_not_python_or_too_long_is_not_analysed():
    assert validation_can_reject("if [ -z \"$X\" ]; then exit 1; fi\n") is None
    assert validation_can_reject("print(1)\n" * 3000) is None


def test_w504_is_a_warning_that_names_why(seed_record):
    rec = dict(seed_record, validationCode=CANNOT_REJECT["prints argv"])
    found = [f for f in lint_record(rec) if f.code == "W504"]
    assert len(found) == 1
    assert RULES["W504"].level == "warning" and RULES["W504"].name == "validation-cannot-reject"
    assert found[0].message.startswith("validationCode cannot reject anything (no assert, no raise")
    assert not [f for f in lint_record(seed_record) if f.code == "W504"]


def test_lint_cli_reports_w504(seed_record, tmp_path):
    path = tmp_path / "r.json"
    path.write_text(json.dumps({"record": dict(seed_record, validationCode=CANNOT_REJECT["prints argv"])}))
    result = CliRunner().invoke(cli, ["lint", str(path)])
    assert "W504" in result.output


def test_no_bundled_record_has_a_validation_that_cannot_reject():
    findings = lint_records(read_records([data_dir()]))
    assert [f for f in findings if f.code == "W504"] == []
