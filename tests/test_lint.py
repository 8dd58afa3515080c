"""Schema and lint rules: each rule fires on the record it is for, with its code."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from errkb.cli import cli
from errkb.records.lint import RULES, lint_record
from errkb.records.schema import schema, validator
from tests.support import SEED_FILE, write_jsonl


def codes(record) -> list[str]:
    return sorted({f.code for f in lint_record(record)})


def test_schema_is_valid_draft_2020_12_and_requires_every_seed_key(seed_record):
    import jsonschema

    jsonschema.Draft202012Validator.check_schema(schema())
    assert schema()["required"] == list(seed_record)
    assert schema()["additionalProperties"] is False


def test_schema_command_prints_the_shipped_schema():
    result = CliRunner().invoke(cli, ["schema"])
    assert result.exit_code == 0
    assert json.loads(result.output) == schema()


def test_seed_lints_clean():
    result = CliRunner().invoke(cli, ["lint", str(SEED_FILE)])
    assert result.exit_code == 0, result.output
    assert result.stdout == ""
    assert result.stderr == "0 error(s), 0 warning(s)\n"


@pytest.mark.parametrize(
    "change, problem",
    [
        ({"schemaVersion": 1}, "/schemaVersion: 2 was expected"),
        ({"id": "XYZ"}, '/id: "XYZ" does not match "^[0-9a-f]{16}$"'),
        ({"lineNumber": "221"}, '/lineNumber: "221" is not of type "integer"'),
        ({"analyzedSha": "abc"}, '/analyzedSha: "abc" does not match "^[0-9a-f]{40}$"'),
        ({"solutions": []}, "/solutions: [] has less than 1 item"),
        ({"extra": 1}, "(record): Additional properties are not allowed ('extra' was unexpected)"),
    ],
)
def test_schema_violations(seed_record, change, problem):
    record = {**seed_record, **change}
    findings = [f for f in lint_record(record) if f.code == "E101"]
    assert [f.message for f in findings] == [problem]


def test_missing_keys_are_reported_on_one_line(seed_record):
    record = {k: v for k, v in seed_record.items() if k not in ("slug", "tags")}
    (finding,) = [f for f in lint_record(record) if f.code == "E101"]
    assert finding.message == "(record): missing required keys: slug, tags"


def test_draft_records_may_leave_prose_empty(seed_record):
    draft = {**seed_record, "documentation": "", "solutions": [], "tags": ["draft"]}
    assert codes(draft) == []
    curated = {**draft, "tags": ["vllm"]}
    assert codes(curated) == ["E101"]


def test_python_and_rust_validators_agree(seed_record):
    cases = [seed_record, {**seed_record, "severity": "loud"}, {**seed_record, "httpStatus": 99}, {"id": 1}]
    py, rs = validator("python"), validator("rust")
    for case in cases:
        assert bool(py.errors(case)) == bool(rs.errors(case))


def test_pattern_rules(seed_record):
    assert codes({**seed_record, "messagePattern": "Flashinfer (unclosed"}) == ["E201"]
    assert "E202" in codes({**seed_record, "messagePattern": "Totally different message"})
    generic = {**seed_record, "messagePattern": ".*", "errorMessage": "anything"}
    assert "E203" in codes(generic)
    assert "E203" in codes({**seed_record, "messagePattern": "(.+?) (.+?)"})
    backref = {**seed_record, "messagePattern": r"Flashinfer (\w+) \1", "errorMessage": "Flashinfer x x"}
    assert "W204" in codes(backref)


def test_catastrophic_pattern_does_not_stall_self_match(seed_record):
    record = {**seed_record, "messagePattern": "Flashinfer (a+)+$", "errorMessage": "Flashinfer " + "a" * 40 + "!"}
    assert "E202" in codes(record)


def test_source_window_rules(seed_record):
    assert codes({**seed_record, "lineNumber": 300}) == ["E301"]
    assert codes({**seed_record, "sourceCodeEnd": 240, "githubUrl": seed_record["githubUrl"].replace("L239", "L240")}) == ["E302"]
    # The raise line lacking the message's words is a warning: upstream records whose
    # message is a module constant far above the raise (pip's urllib3) are right.
    assert codes({**seed_record, "lineNumber": 206}) == ["W303"]


def test_github_url_must_agree(seed_record):
    url = seed_record["githubUrl"].replace("#L203-L239", "#L200-L239")
    (finding,) = lint_record({**seed_record, "githubUrl": url})
    assert finding.code == "E304"
    assert finding.message.endswith(f"expected {seed_record['githubUrl']}")


def test_duplicate_id_is_an_error_and_a_shared_slug_a_warning_in_one_batch(tmp_path, seed_record, make_variant):
    changed = {**seed_record, "documentation": "changed"}
    other = make_variant(1)
    same_slug = {**make_variant(2), "slug": other["slug"]}
    path = write_jsonl(tmp_path / "dups.jsonl", [seed_record, changed, other, same_slug])
    result = CliRunner().invoke(cli, ["lint", "--json", str(path)])
    assert result.exit_code == 1  # E401 only
    found = [(f["code"], f["level"], f["line"]) for f in json.loads(result.output)]
    assert found == [("E401", "error", 2), ("W402", "warning", 4)]


def test_lint_line_names_file_position_record_and_fix(tmp_path, seed_record):
    path = write_jsonl(tmp_path / "one.jsonl", [{**seed_record, "lineNumber": 300}])
    result = CliRunner().invoke(cli, ["lint", str(path)])
    assert result.exit_code == 1
    assert result.stdout.splitlines()[0] == (
        f"{path}:1:1: E301 line-outside-window [2e3fedf4ee50f84a] lineNumber 300 is outside "
        "sourceCodeStart..sourceCodeEnd (203..239) (fix: set lineNumber within sourceCodeStart..sourceCodeEnd)"
    )


def test_every_rule_has_a_unique_stable_code():
    assert sorted(RULES) == ["E100", "E101", "E201", "E202", "E203", "E207", "E301", "E302", "E304", "E401", "W204", "W205", "W206", "W303", "W402", "W501", "W502", "W503", "W504"]


@pytest.mark.parametrize("repo", ["../..", "owner/..", "owner/.", ".hidden/name",
                                  # longer than GitHub allows: the site build stopped with "File name too long"
                                  "a/" + "b" * 101, "o" * 40 + "/name"])
def test_repo_names_that_would_escape_the_site_are_schema_errors(seed_record, repo):
    (finding,) = [f for f in lint_record({**seed_record, "repo": repo}) if f.code == "E101"]
    assert finding.message.startswith(f'/repo: "{repo}" does not match')


def test_repo_names_as_long_as_github_allows_are_taken(seed_record):
    repo = "o" * 39 + "/" + "n" * 100
    url = seed_record["githubUrl"].replace("vllm-project/vllm", repo)
    assert [f.code for f in lint_record({**seed_record, "repo": repo, "githubUrl": url}) if f.level == "error"] == []


WRONG_TYPES = [None, 1, -1, 1.5, True, [], {}, "", "\n", ["a"], [None], [1], {"a": 1}, 10**30, "../../x", ["draft"], [[]]]


@pytest.mark.parametrize("value", WRONG_TYPES, ids=repr)
def test_any_json_value_in_any_field_is_findings_never_a_crash(seed_record, value):
    """Rules past the schema read fields the schema has already refused (`"tags": 1` made
    the W501 check raise TypeError: lint and ingest ended in 'internal error')."""
    for key in seed_record:
        lint_record({**seed_record, key: value})
    lint_record({**seed_record, "documentation": "lone \udcff"})  # a record built in Python


def test_a_wrongly_typed_field_is_one_schema_finding_through_the_cli(tmp_path, seed_record):
    path = write_jsonl(tmp_path / "r.jsonl", [{**seed_record, "tags": 1}])
    result = CliRunner().invoke(cli, ["lint", str(path)])
    assert result.exit_code == 1
    assert result.stdout == (f"{path}:1:1: E101 schema [2e3fedf4ee50f84a] /tags: 1 is not of type \"array\" (fix: make "
                             "the record match the v2 schema (`errkb schema` prints it))\n")
    surrogate = lint_record({**seed_record, "solutions": ["ok", "lone \udcff"]})
    assert [(f.code, f.message) for f in surrogate] == [
        ("E100", "solutions[1]: a lone UTF-16 surrogate is not a character")]


def test_output_piped_into_head_stops_quietly_not_as_an_internal_error(tmp_path, seed_record):
    """`errkb lint ... | head` (or list, rejects): the closed pipe was reported as
    "internal error at cli.py: BrokenPipeError", exit 2. Now: nothing on stderr, and
    128 + SIGPIPE as a shell reports for `ls | head`."""
    import subprocess
    import sys

    from tests.support import REPO

    bad = [{**seed_record, "id": f"{i:016x}", "lineNumber": 300} for i in range(2000)]  # an E301 line each
    path = write_jsonl(tmp_path / "r.jsonl", bad)
    proc = subprocess.Popen([sys.executable, "-m", "errkb", "lint", str(path)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, cwd=REPO)
    first = proc.stdout.readline()
    proc.stdout.close()
    err = proc.stderr.read()
    proc.wait(timeout=60)
    assert b"E301" in first
    assert (proc.returncode, err) == (141, b"")


def test_a_message_longer_than_4096_characters_is_checked_when_the_pattern_is_linear(tmp_path, seed_record):
    """A C++ error message of 7,000 characters with a `\\d+` in its pattern is a real
    record: it was rejected with E202 "could not be checked within the time bound",
    though RE2 checks it in microseconds. Only a pattern needing backtracking keeps the cap."""
    from errkb.records.lint import MAX_SELF_MATCH_MESSAGE

    frames = " ".join(f"frame{i}" for i in range(800))
    message = "CUDA error 42: " + frames
    assert len(message) > MAX_SELF_MATCH_MESSAGE
    linear = {**seed_record, "errorMessage": message, "messagePattern": r"CUDA error (\d+): frame0 (.*?) frame799$"}
    assert [f.code for f in lint_record(linear) if f.level == "error"] == []
    wrong = {**linear, "messagePattern": r"CUDA error (\d+): frame0 (.*?) frame800$"}
    assert [f.message for f in lint_record(wrong) if f.level == "error"] == [
        "messagePattern does not match its own errorMessage"]
    lookahead = {**linear, "messagePattern": r"CUDA error (\d+): (?=frame0)(.*?) frame799$"}
    assert [f.message for f in lint_record(lookahead) if f.level == "error"] == [
        "messagePattern could not be checked against errorMessage: a pattern that needs backtracking is run on at "
        f"most 4,096 characters, and errorMessage has {len(message):,}"]
