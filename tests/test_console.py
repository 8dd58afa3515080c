"""The console script (errkb.console): a plain `errkb explain` is answered without click,
and answers exactly as the click command does; anything else goes to click."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from errkb.console import plain_explain
from tests.support import SEED_MESSAGE

REPO = Path(__file__).resolve().parents[1]
LINE = f"(EngineCore_DP0 pid=1234) ERROR 08-14 21:17:39 [core.py:700] ValueError: {SEED_MESSAGE}"
DRIFTED = LINE.replace("trtllm", "nccl")
# A Jupyter traceback begins with a rule of dashes and points with "---->": pasted whole,
# it is TEXT, not an unknown option.
JUPYTER = ("-" * 75 + "\nValueError                                Traceback (most recent call last)\n"
           "----> 1 llm = LLM(model)\n\nValueError: " + SEED_MESSAGE)
# The click path, as `errkb` ran before errkb.console existed.
CLICK = [sys.executable, "-c", "import sys; sys.argv[0] = 'errkb'; from errkb.cli import main; main()"]
QUICK = [sys.executable, "-m", "errkb"]


@pytest.mark.parametrize("argv", [
    ["explain", "text"], ["explain", "--json", "text"], ["explain", "text", "--all", "--json"],
    ["explain", "--db", "x.duckdb", "text"], ["explain", "--db=x.duckdb", "text"], ["explain", "-"], ["explain"],
    ["explain", "--file", "log.txt"], ["explain", "--file=log.txt", "--all"],
    ["explain", JUPYTER], ["explain", JUPYTER, "--json"], ["explain", "--json", "--> 358 raise RuntimeError(x)"],
    ["explain", "- ERROR: x"], ["explain", "-1 is not a valid rank"], ["explain", "--=> x"],
])
def test_a_plain_explain_call_is_read_here(argv, monkeypatch):
    monkeypatch.delenv("ERRKB_DB", raising=False)
    options = plain_explain(argv)
    assert options is not None
    assert options["text"] == next((a for a in argv[1:] if a not in ("--json", "--all", "--db", "--file", "--db=x.duckdb",
                                                                  "--file=log.txt", "x.duckdb", "log.txt")), None)
    assert options["as_json"] == ("--json" in argv) and options["show_all"] == ("--all" in argv)


@pytest.mark.parametrize("argv", [
    [], ["--version"], ["--help"], ["search", "x"], ["explain", "--help"], ["explain", "-h"], ["explain", "a", "b"],
    ["explain", "--json", "--json", "x"], ["explain", "--jso", "x"], ["explain", "--db"], ["explain", "--db", ""],
    ["explain", "--db=", "x"], ["explain", "--db", "/"], ["explain", "--file", "/"], ["explain", "--", "-x"],
    ["explain", "-x"], ["explain", "--json=1", "x"], ["explain", "--db", "-", "x"], ["explain", "--db", "a", "--db", "b", "x"],
])
def test_anything_else_goes_to_click(argv, monkeypatch):
    monkeypatch.delenv("ERRKB_DB", raising=False)
    assert plain_explain(argv) is None


def test_click_reads_the_db_variable_and_shell_completion(monkeypatch):
    monkeypatch.setenv("ERRKB_DB", "/")  # a folder: click refuses it, so click must say so
    assert plain_explain(["explain", "x"]) is None
    monkeypatch.setenv("ERRKB_DB", "some.duckdb")
    assert str(plain_explain(["explain", "x"])["db_path"]) == "some.duckdb"
    monkeypatch.setenv("_ERRKB_COMPLETE", "bash_complete")
    assert plain_explain(["explain", "x"]) is None


def _cases(store_db: Path, tmp_path: Path) -> list[tuple[list[str], str | None, dict]]:
    log = tmp_path / "run.log"
    log.write_text(f"INFO starting\nValueError: {SEED_MESSAGE}\nINFO done\n")
    empty = tmp_path / "empty.txt"
    empty.write_text(" \n")
    db = str(store_db)
    return [
        (["explain", "--db", db, LINE], None, {}),
        (["explain", "--json", "--db", db, LINE], None, {}),
        (["explain", f"--db={db}", "--all", DRIFTED], None, {}),
        (["explain", "--db", db, "--json", DRIFTED], None, {}),
        (["explain", "--db", db, "--file", str(log)], None, {}),
        (["explain", "--db", db, "-"], LINE, {}),
        (["explain", "--json", "--db", db], DRIFTED, {}),
        (["explain", LINE], None, {"ERRKB_DB": db}),
        (["explain", "--db", db, " "], None, {}),
        (["explain", "--db", db, "--file", str(empty)], None, {}),
        (["explain", "--db", db, "--file", str(tmp_path / "missing.txt")], None, {}),
        (["explain", "--db", db, "--file", str(log), "text"], None, {}),
        (["explain", "--db", str(tmp_path / "no-such.duckdb"), LINE], None, {}),
        (["explain", "--db", db], "", {}),
        (["explain", "--db", db, JUPYTER], None, {}),
        (["explain", JUPYTER, "--db", db, "--json"], None, {}),
        (["explain", "--db", db, "--> 1 x\n-" + "-" * 40], None, {}),
    ]


def test_both_paths_answer_alike(store_db, tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("ERRKB_DB", "_ERRKB_COMPLETE")}
    env["NO_COLOR"] = "1"
    for args, stdin, extra in _cases(store_db, tmp_path):
        runs = [subprocess.run(cmd + args, input=(stdin or "").encode(), capture_output=True, cwd=REPO, env={**env, **extra})
                for cmd in (CLICK, QUICK)]
        click_run, quick_run = runs
        assert (quick_run.returncode, quick_run.stdout, quick_run.stderr) == (click_run.returncode, click_run.stdout,
                                                                              click_run.stderr), args
        assert click_run.returncode in (0, 1, 2)


def test_a_pasted_jupyter_traceback_is_explained_not_refused_as_an_option(store_db):
    """A traceback copied from a notebook begins with dashes; both doors explain it."""
    env = {**os.environ, "NO_COLOR": "1"}
    for cmd in (CLICK, QUICK):
        for args in (["explain", "--db", str(store_db), JUPYTER], ["explain", JUPYTER, "--json", "--db", str(store_db)]):
            result = subprocess.run(cmd + args, capture_output=True, text=True, cwd=REPO, env=env)
            assert result.returncode == 0, result.stderr[-2000:]
            assert "No such option" not in result.stderr
            assert "flashinfer-allreduce-quantization-fusion" in result.stdout


@pytest.mark.parametrize(("args", "shown"), [
    (["sites", "match", "----> 1 x\nValueError: max_tokens must be at least 1, got 0."], "vllm/sampling_params.py"),
    (["search", "--> allreduce", "--json"], '"tier": "curated"'),
])
def test_the_other_commands_that_take_a_paste_read_a_dash_as_text(store_db, args, shown):
    env = {**os.environ, "NO_COLOR": "1", "ERRKB_DB": str(store_db)}
    result = subprocess.run(CLICK + args, capture_output=True, text=True, cwd=REPO, env=env)
    assert result.returncode == 0, result.stderr[-2000:]
    assert shown in result.stdout


def test_search_keeps_its_options_and_its_word_order_around_a_paste(store_db):
    """A short option's attached value (-n+1, as click reads it) is the option's, and
    the words stay in the order typed (the "matched ..." line lists them so)."""
    env = {**os.environ, "NO_COLOR": "1", "ERRKB_DB": str(store_db)}

    def search(*args):
        result = subprocess.run([*CLICK, "search", *args], capture_output=True, text=True, cwd=REPO, env=env)
        assert result.returncode == 0, result.stderr[-2000:]
        return result.stdout

    assert len(json.loads(search("-n+1", "allreduce", "--json", "--no-sites"))) == 1
    assert search("--> fusion", "allreduce", "--no-sites") == search("fusion", "allreduce", "--no-sites")
    assert "matched fusion, allreduce" in search("fusion", "--no-sites", "--> allreduce")


def test_a_plain_explain_call_never_imports_click(store_db):
    args = [*QUICK[:1], "-X", "importtime", *QUICK[1:], "explain", "--db", str(store_db), LINE]
    env = {**os.environ, "NO_COLOR": "1"}
    subprocess.run(args, cwd=REPO, env=env, capture_output=True, check=False)  # makes the cache fresh
    result = subprocess.run(args, cwd=REPO, env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-2000:]
    imported = {line.rsplit("|", 1)[-1].strip() for line in result.stderr.splitlines() if line.startswith("import time:")}
    assert "errkb.console" in imported and "errkb.explain.explainer" in imported
    assert not {m for m in imported if m.split(".")[0] in ("click", "duckdb", "jinja2")} and "errkb.cli" not in imported


@pytest.mark.parametrize(("args", "closed", "rc", "message"), [
    (["explain", "-"], 0, 2, b"Error: stdin: cannot read: stdin is closed\n"),
    (["explain"], 0, 2, b"Error: stdin: cannot read: stdin is closed\n"),
    (["explain", LINE], 1, 0, b""),
    (["explain", "--json", LINE], 1, 0, b""),
])
def test_a_closed_stream_is_no_internal_error(store_db, args, closed, rc, message):
    """`errkb explain - <&-` and `errkb explain TEXT >&-`, on both paths: stdin or stdout
    is None in Python; it was 'internal error: ... has no attribute isatty' (exit 2)."""
    env = {**{k: v for k, v in os.environ.items() if k != "_ERRKB_COMPLETE"}, "ERRKB_DB": str(store_db)}
    for cmd in (CLICK, QUICK):
        close = f"import os; os.close({closed}); os.execv({cmd[0]!r}, {cmd + args!r})"
        result = subprocess.run([sys.executable, "-c", close], capture_output=True, cwd=REPO, env=env)
        assert (result.returncode, result.stderr) == (rc, message), cmd


def test_the_console_script_imports_click_s_tree_never_the_other_way():
    """console.py picks the door and imports errkb.cli when click is needed; explain's body
    lives in errkb.explain.command. Nothing below imports the console script back, not
    even inside a function (cli.py importing the body from console.py was a cycle)."""
    import ast

    for path in [REPO / "errkb" / "cli.py", *sorted((REPO / "errkb" / "explain").glob("*.py"))]:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
        imported |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        assert "errkb.console" not in imported, path
        if path.parent.name == "explain":
            assert "errkb.cli" not in imported, path
