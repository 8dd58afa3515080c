"""Progress of long commands: on stderr only; a bar on a terminal, plain lines elsewhere
and only when the work takes long (issue 18, item 2)."""

from __future__ import annotations

import io
import json
import os

import pytest
from click.testing import CliRunner

from errkb import progress as progress_module
from errkb.cli import cli
from errkb.progress import Progress
from tests.support import SEED_FILE, SEED_MESSAGE, on_terminal


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def test_short_work_off_a_terminal_says_nothing():
    out, clock = io.StringIO(), Clock()
    with Progress("ingest: records read", stream=out, clock=clock) as p:
        for _ in range(1000):
            p.update()
        clock.now += 1.0
    assert out.getvalue() == ""


def test_long_work_off_a_terminal_prints_a_line_every_ten_seconds_and_one_at_the_end():
    out, clock = io.StringIO(), Clock()
    with Progress("site: fix pages", 3000, stream=out, clock=clock) as p:
        for _ in range(3000):
            clock.now += 0.01
            p.update()
    assert out.getvalue().splitlines() == [
        "site: fix pages: 1,000/3,000 (10 s)",
        "site: fix pages: 2,000/3,000 (20 s)",
        "site: fix pages: done, 3,000/3,000 in 30.0 s",
    ]


def test_a_failed_phase_prints_no_done_line():
    out, clock = io.StringIO(), Clock()
    with pytest.raises(KeyboardInterrupt), Progress("drift: files scanned", stream=out, clock=clock) as p:
        clock.now += 8
        p.update()
        raise KeyboardInterrupt
    assert "done" not in out.getvalue()


def test_json_stdout_stays_json_and_progress_goes_to_stderr(tmp_path, monkeypatch):
    monkeypatch.setattr(progress_module, "AFTER_S", 0.0)  # every phase counts as long here
    result = CliRunner().invoke(cli, ["ingest", "--json", "--db", str(tmp_path / "s.duckdb"), str(SEED_FILE)])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["new"] == 1
    assert result.stderr.startswith("ingest: records read: done, 1 in ")


def test_site_build_draws_a_bar_on_a_terminal_and_never_on_stdout(seed_db, tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "NO_COLOR"}
    env["TERM"] = "xterm"
    terminal, stdout = on_terminal(["site", "build", "--db", str(seed_db), "--out", str(tmp_path / "site")], env,
                                   stdout_on_terminal=False)
    assert "site: fix pages  [####################################]  1/1" in terminal
    assert stdout.startswith(f"{tmp_path / 'site'}: ")
    assert "#" not in stdout and "\x1b" not in stdout and "\r" not in stdout


@pytest.mark.parametrize("variable", [{"TERM": "dumb"}, {"NO_COLOR": "1"}])
def test_dumb_terminal_and_no_color_draw_no_bar(seed_db, tmp_path, variable):
    env = {k: v for k, v in os.environ.items() if k != "NO_COLOR"}
    env["TERM"] = "xterm"
    env.update(variable)
    terminal, _ = on_terminal(["site", "build", "--db", str(seed_db), "--out", str(tmp_path / "site")], env,
                              stdout_on_terminal=False)
    assert "#" not in terminal and "\x1b" not in terminal and "\r" not in terminal.replace("\r\n", "\n")


def test_explain_over_a_big_log_reports_bytes_read_on_stderr_only(seed_db, tmp_path, monkeypatch):
    import errkb.cli

    monkeypatch.setattr(errkb.cli, "LARGE_LOG_BYTES", 1000)  # a big log, as far as the command knows
    monkeypatch.setattr(progress_module, "AFTER_S", 0.0)

    log = tmp_path / "run.log"
    log.write_text("".join(f"2025-08-02T18:07:14Z INFO worker-{i} step {i} done\n" for i in range(200))
                   + f"ValueError: {SEED_MESSAGE}\n")
    result = CliRunner().invoke(cli, ["explain", "--json", "--db", str(seed_db), "--file", str(log)])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["lines"] == 201
    size = log.stat().st_size
    assert result.stderr.startswith(f"explain: log read: done, {size:,}/{size:,} bytes in ")


def test_a_big_byte_count_is_shown_in_mib(monkeypatch):
    """A 3 GiB log's progress read 3,221,225,472 bytes: sizes of a MiB or more are shown in MiB."""
    import io

    monkeypatch.setattr(progress_module, "AFTER_S", 0.0)
    out = io.StringIO()
    with progress_module.Progress("explain: log read", 3 << 30, "bytes", stream=out) as p:
        p.set(3 << 30)
    assert out.getvalue().startswith("explain: log read: done, 3,072/3,072 MiB in ")
