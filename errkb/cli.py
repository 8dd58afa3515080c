"""The `errkb` command: a thin shell over the library.

Each command parses its arguments, calls one library function, and maps library
errors to ``click.ClickException`` (exit 2) with a one-line message. Shared option
bundles are decorators so every command spells ``--db`` and ``--json`` the same way.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import click

from errkb import __version__
from errkb.explain.command import LARGE_LOG_BYTES, explain_command, is_pasted_text
from errkb.progress import Progress
from errkb.records.view import RecordView
from errkb.signals import exit_on_stop_signals, ignore_stop_signals
from errkb.terminal import one_line, visible


class UsageError(click.ClickException):
    """Bad input or usage: exit code 2, one line naming what and where."""

    exit_code = 2

    def format_message(self) -> str:
        return visible(self.message)  # messages quote file names and record text


def db_option(fn):
    """``--db PATH``: the DuckDB store (default ``$ERRKB_DB``, else the per-user cache)."""
    return click.option(
        "--db",
        "db_path",
        type=click.Path(dir_okay=False, path_type=Path),
        envvar="ERRKB_DB",
        default=None,
        help="DuckDB store file (default: $ERRKB_DB, else a per-user cache built from the bundled data/).",
    )(fn)


def json_option(fn):
    """``--json``: the one machine-readable output contract of every command."""
    return click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")(fn)


def print_json(data) -> None:
    click.echo(json.dumps(data, indent=2, ensure_ascii=False, default=str))


def open_store(db_path: Path | None, read_only: bool = False):
    """Open the store named by ``--db``; library errors become one-line usage errors.

    Commands that only read pass ``read_only=True`` so many can run at once.
    """
    from errkb.store.db import Store

    return Store.open(db_path, read_only=read_only)


class ErrkbGroup(click.Group):
    """The command group: every library error becomes one line and exit 2, and a stop
    signal (Ctrl-C, SIGTERM) unwinds the command's clean-up and exits 128+signal."""

    def invoke(self, ctx):
        from errkb.errors import ErrkbError, Stopped
        from errkb.signals import quiet_broken_pipe, stop_on_signals

        try:
            with stop_on_signals():  # on the main thread; elsewhere the process's own handlers
                return super().invoke(ctx)
        except ErrkbError as e:
            raise UsageError(str(e)) from e
        except Stopped as e:
            echo(f"errkb: stopped by {e}", err=True)
            ctx.exit(e.exit_code)
        except (click.exceptions.ClickException, click.exceptions.Exit, click.exceptions.Abort):
            raise
        except BrokenPipeError:
            # The reader went away (`errkb list | head`): stop quietly with 128 + SIGPIPE.
            ctx.exit(quiet_broken_pipe())
        except Exception as e:
            # A failure inside errkb (an engine refusing a pattern, say) is exit 2 and one
            # line, never a traceback with exit 1, which would read as "no match".
            import os
            import traceback

            if os.environ.get("ERRKB_DEBUG"):
                raise
            # the innermost frame of our own code, not of the standard library or a package
            frames = [f for f in traceback.extract_tb(e.__traceback__) if "/lib/python" not in f.filename]
            where = f"{Path(frames[-1].filename).name}:{frames[-1].lineno}" if frames else "errkb"
            raise UsageError(f"internal error at {where}: {type(e).__name__}: {e} (ERRKB_DEBUG=1 shows the traceback)") from e


def main() -> None:
    """The whole command tree (:mod:`errkb.console` is the console script; it sends here
    every call but a plain ``errkb explain``), and then, while the process winds down
    after its work (DuckDB closing, the interpreter's teardown), a stop signal ends it with
    128 + signal quietly instead of a traceback or death by the signal's default action."""
    import atexit

    # The interpreter's teardown resets every Python-level signal handler to SIG_DFL
    # (not SIG_IGN), so a SIGTERM then, after a completed ingest, killed the process by
    # the default action (-15). Registered first, this runs last of the exit handlers,
    # when the work is done: from then on a stop signal is ignored and the exit code is
    # the command's own.
    atexit.register(ignore_stop_signals)
    try:
        cli(prog_name="errkb")
    finally:
        exit_on_stop_signals()


def present_failure(error: BaseException, command: str) -> None:
    """Show an exception that a command's body raised outside click (errkb.console's
    plain ``explain``) exactly as ``errkb <command>`` shows it: it is raised again inside
    a command of an :class:`ErrkbGroup`, whose handler and click's ``main`` give the
    message and the exit code (this exits, or lets what click lets through propagate)."""

    def body():
        raise error

    group = ErrkbGroup(context_settings=cli.context_settings)
    group.add_command(click.Command(command, callback=body))
    group.main([command], prog_name="errkb")


@click.group(cls=ErrkbGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="errkb")
def cli():
    """errkb: paste an error, get the known fix.

    Matches log lines and tracebacks against an error-knowledge dataset
    (schema v2 records) and explains them.
    """


# -- foundation: schema, lint, ingest, rejects, show, list, stats ----------------


def echo(message=None, err: bool = False, nl: bool = True) -> None:
    """click.echo for human output: record text and run output are untrusted, so
    control characters and bidi overrides are shown, not emitted (errkb.terminal)."""
    click.echo(visible(message) if isinstance(message, str) else message, err=err, nl=nl)


def _echo_err(line: str) -> None:
    echo(line, err=True)


@cli.command()
def schema():
    """Print the JSON Schema (draft 2020-12) of a v2 record."""
    from errkb.records.schema import schema_text

    echo(schema_text(), nl=False)


@cli.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@json_option
def lint(paths, as_json):
    """Check records beyond the schema; exit 1 when any error-level finding exists.

    PATHS are files (any form: wrapper, bare record, array, JSON Lines) or folders.
    """
    from errkb.records.lint import has_errors, lint_records
    from errkb.records.read import read_records

    findings = lint_records(read_records(paths))
    if as_json:
        print_json([f.as_dict() for f in findings])
    else:
        for f in findings:
            echo(str(f))
        errors = sum(f.level == "error" for f in findings)
        _echo_err(f"{errors} error(s), {len(findings) - errors} warning(s)")
    sys.exit(1 if has_errors(findings) else 0)


@cli.command("check-source")
@click.argument("source", type=click.Path(path_type=Path))
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@json_option
def check_source(source, paths, as_json):
    """Check records against a project's source (S401 env var, S402 CLI flag, S403 message literal).

    SOURCE is a checkout, package folder, wheel or sdist of the analysed commit or
    release; PATHS are record files or folders. Exit 1 when any finding exists.
    """
    from errkb.mine.source_check import check_records
    from errkb.records.read import read_records

    records = [r.record for r in read_records(paths) if r.record is not None]
    findings = check_records(records, source)
    if as_json:
        print_json([f.as_dict() for f in findings])
    else:
        for f in findings:
            echo(str(f))
        _echo_err(f"{len(findings)} finding(s) in {len(records)} record(s)")
    sys.exit(1 if findings else 0)


@cli.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@db_option
@json_option
def ingest(paths, db_path, as_json):
    """Validate and store records: one transaction, every version kept.

    Exit 0 when all were accepted, 1 when some were rejected (they are kept in the
    rejects table: `errkb rejects`), 2 when a path cannot be read.
    """
    from errkb.store.db import Store

    with Store.open(db_path) as store, Progress("ingest: records read") as progress:
        report = store.ingest(paths, progress=progress.set)
    if as_json:
        print_json(report.as_dict())
    else:
        echo(report.summary())
        for w in report.warnings[:20]:
            _echo_err(f"warning: {w}")
        if len(report.warnings) > 20:  # e.g. one per file of a dataset whose wrapper has an extra key
            _echo_err(f"... and {len(report.warnings) - 20} more warnings (--json lists them all)")
        for r in report.rejects[:20]:
            for reason in r.reasons:
                _echo_err(reason)
        if len(report.rejects) > 20:
            _echo_err(f"... and {len(report.rejects) - 20} more rejects")
        if report.rejected:
            _echo_err(f"{report.rejected} rejected record(s) kept with their reasons; see them with `errkb rejects`")
    sys.exit(1 if report.rejected else 0)


@cli.command()
@click.option("--run", "run_id", type=int, default=None, help="Only the rejects of this ingest run.")
@db_option
@json_option
def rejects(run_id, db_path, as_json):
    """List rejected inputs, verbatim, with every reason. Exit 1 when there are none (like grep)."""
    with open_store(db_path, read_only=True) as store:
        rows = store.rejects(run_id)
    if as_json:
        print_json(rows)
        sys.exit(0 if rows else 1)
    for r in rows:
        where = f"{one_line(r['file'])}:{r['line']}:{r['column']}" + (f" (array item {r['index']})" if r["index"] is not None else "")
        echo(f"#{r['reject_id']} run {r['run_id']} {where}" + (f" id {r['record_id']}" if r["record_id"] else ""))
        for reason in r["reasons"]:
            echo(f"  {reason}")
    _echo_err(f"{len(rows)} reject(s)")
    sys.exit(0 if rows else 1)


def _record_text(record: dict) -> str:
    lines = []
    for key, value in record.items():
        if isinstance(value, list):
            lines.append(f"{key}:")
            lines.extend(f"  - {v}" for v in value)
        elif isinstance(value, str) and "\n" in value:
            lines.append(f"{key}:")
            lines.extend(f"    {v}" for v in value.split("\n"))
        else:
            lines.append(f"{key}: {'null' if value is None else value}")
    return "\n".join(lines)


@cli.command()
@click.argument("key")
@click.option("--history", is_flag=True, help="Every stored version of the record, oldest first.")
@db_option
@json_option
def show(key, history, db_path, as_json):
    """Show one record by id, slug or OWNER/NAME/SLUG (--json: exactly as ingested).

    A slug that several records share (one message raised at several sites of a repo)
    names them all: show one by its id.
    """
    with open_store(db_path, read_only=True) as store:
        record = store.get(key)
        if record is None:
            raise UsageError(f"no record with id or slug {key!r} (try `errkb list` or `errkb search`)")
        versions = store.history(record["id"]) if history else None
        findings = store.findings(record["id"]) if not (as_json or history) else []
    if as_json:
        print_json(versions if history else record)
    elif history:
        for v in versions:
            echo(f"{v['ingested_at']}  run {v['run_id']}  datasetVersion {v['dataset_version']}  {v['content_hash'][:12]}  {v['file']}")
    else:
        echo(_record_text(record))
        # Style findings never reject a record; they are stored with it and shown here.
        for f in findings:
            _echo_err(f"{f['level']}: {f['code']} {f['name']} {f['message']}")


@cli.command("list")
@click.option("--repo", default=None, help="Only records of this owner/name.")
@click.option("--tag", default=None, help="Only records with this tag.")
@click.option("--class", "error_class", default=None, help="Only records of this error class.")
@click.option("--severity", default=None, help="Only records of this severity.")
@db_option
@json_option
def list_(repo, tag, error_class, severity, db_path, as_json):
    """List current records (filters combine). Exit 1 when none is listed (like grep).

    On a terminal: a table with a header; piped: one record a line, no header (for grep and cut).
    """
    with open_store(db_path, read_only=True) as store:
        records = store.records(repo=repo, tag=tag, error_class=error_class, severity=severity)
    if as_json:
        print_json(records)
        sys.exit(0 if records else 1)
    if sys.stdout.isatty():
        # A table for people: a header and aligned columns (the slug, longest, last).
        # Piped, one record a line as before, for grep and cut.
        rows = [("ID", "REPO", "CLASS", "SEVERITY", "SLUG")]
        views = [RecordView.of(r) for r in records]
        rows += [(v.id, v.repo, v.error_class, v.severity, v.slug) for v in views]
        rows = [tuple(visible(str(v)) for v in row) for row in rows]
        widths = [max(len(row[i]) for row in rows) for i in range(4)]
        for row in rows:
            echo("  ".join(v.ljust(w) for v, w in zip(row, widths)) + "  " + row[4])
    else:
        for r in records:
            echo(f"{r['id']}  {r['repo']}  {r['errorClass']}  {r['slug']}")
    _echo_err(f"{len(records)} record(s)")
    sys.exit(0 if records else 1)


@cli.command()
@db_option
@json_option
def stats(db_path, as_json):
    """Counts by repo, class, type, severity and lint status."""
    from errkb.records.proofs import coverage, coverage_line, mutation_line, mutation_score

    with open_store(db_path, read_only=True) as store:
        data = store.stats()
        records = list(store.records())
        data["proof_coverage"] = coverage(records)
        data["mutation_score"] = mutation_score(records)
    if as_json:
        print_json(data)
        return
    for key in ("records", "versions", "rejects", "ingest_runs", "verification_runs", "dataset_version"):
        echo(f"{key}: {data[key]}")
    echo(coverage_line(data["proof_coverage"]))
    echo(mutation_line(data["mutation_score"]))
    for key in ("by_repo", "by_class", "by_type", "by_severity", "by_lint_status"):
        echo(f"{key}:")
        for name, count in data[key].items():
            echo(f"  {count:6d}  {name}")


# -- verify / runs (errkb.verify.runs, errkb.verify.sandbox) ------------------------------


def _run_line(r: dict) -> str:
    took = f"{r['duration_s']:.2f}s" if r.get("duration_s") is not None else ""
    return f"{r['outcome'].upper():8} {r['record_id']}  {r['tier']:8} {r['check']:<44} {took:>8}  {r['reason']}"


@cli.command()
@click.argument("keys", nargs=-1)
@click.option("--all", "all_records", is_flag=True, help="Verify every record in the store.")
@click.option("--tier", type=click.Choice(["syntax", "sandbox", "cpu-real", "gpu"]), default="sandbox", show_default=True,
              help="syntax: language + syntax only; sandbox: also run fixes and validation code; "
                   "cpu-real / gpu: also the record's real reproducers of that tier.")
@db_option
@json_option
def verify(keys, all_records, tier, db_path, as_json):
    """Check and run records' example fixes and validation code in a sandbox; store every run.

    Exit status: 0 all passed or skipped, 1 something failed, errored or timed out, 2 bad input.
    """
    from errkb.verify.runs import verify as run_verify

    progress = None
    if not as_json and sys.stderr.isatty():
        progress = lambda r: echo(_run_line(r.to_dict()), err=True)  # noqa: E731
    with open_store(db_path) as store:
        report = run_verify(store, list(keys), all_records=all_records, tier=tier, progress=progress,
                            note=lambda line: _echo_err(f"errkb verify: {line}"))
    if as_json:
        print_json(report.to_dict())
    else:
        if progress is None:
            for r in report.results:
                echo(_run_line(r.to_dict()))
        counts = ", ".join(f"{n} {k}" for k, n in report.counts.items() if n)
        echo(f"{len(report.results)} checks: {counts or 'none'}")
        for record_id, proof in report.proofs.items():
            why = proof["line"] if proof["status"].startswith("proven") or proof["status"] == "out of date" else {
                "GPU-only": "its reproducer needs a GPU (errkb prove --tier gpu)",
            }.get(proof["status"], "passing checks are not proof (errkb prove)")
            echo(f"{record_id}  {proof['status']}: {why}")
    sys.exit(0 if report.ok else 1)


@cli.command()
@click.argument("keys", nargs=-1)
@click.option("--all", "all_records", is_flag=True, help="Prove every record that has reproducers of the tier.")
@click.option("--tier", type=click.Choice(["cpu-real", "gpu"]), default="cpu-real", show_default=True)
@click.option("--write", "write_dir", type=click.Path(file_okay=False, path_type=Path),
              help="Write each proven record's proof to DIR/<record-id>.json (the bundled one: data/proofs).")
@click.option("--check", "check_only", is_flag=True,
              help="Re-run the committed CPU-tier proofs; exit 1 when one no longer holds.")
@click.option("--bindings-only", is_flag=True,
              help="With --check: only check that each committed proof is bound to its record as stored "
                   "(the digest of the fields it exercised); re-run nothing.")
@click.option("--proofs", "proofs_dir_opt", type=click.Path(file_okay=False, path_type=Path),
              help="Folder of committed proofs for --check (default: the bundled data/proofs).")
@click.option("--mutants/--no-mutants", default=True, show_default=True,
              help="Judge each proven record's mutants (a non-fixing exampleFix, a wrong message or class, an "
                   "always-true, always-false or crashing validation); the proof written carries their verdicts, "
                   "and --check fails when one survives (kinds awaiting other work aside: docs/proofs.md).")
@db_option
@json_option
def prove(keys, all_records, tier, write_dir, check_only, bindings_only, proofs_dir_opt, mutants, db_path, as_json):
    """Run records' real reproducers and judge each record proven, failed, skipped or unproven.

    Exit status: 0 every named record proven or skipped (e.g. needs CUDA), 1 one failed or
    is unproven (or, with --check, a committed proof no longer holds or is out of date: its
    record changed since it was proven, or one of its mutants survived), 2 bad input.
    """
    from errkb.records.proofs import ProofError
    from errkb.verify import proofs as P

    progress = None
    if not as_json and sys.stderr.isatty():
        progress = lambda r: echo(_run_line(r.to_dict()), err=True)  # noqa: E731
    note = lambda line: _echo_err(f"errkb prove: {line}")  # noqa: E731
    if bindings_only and not check_only:
        raise ProofError("--bindings-only goes with --check")
    with open_store(db_path, read_only=True) as store:
        if check_only:
            if keys or all_records:
                raise ProofError("--check re-runs every committed CPU proof; give no record ids and no --all")
            held, broken = P.check_store(store, proofs_dir_opt, progress, note, rerun=not bindings_only,
                                         mutants=mutants)
            if as_json:
                print_json({"checked": held, "broken": [{"record_id": r, "reason": why} for r, why in broken]})
            else:
                for rid, why in broken:
                    echo(f"NO LONGER HOLDS {rid}: {why}")
                what = "are bound to their records" if bindings_only else "hold"
                echo(f"{held - len(broken)}/{held} committed CPU proofs {what}")
            sys.exit(1 if broken else 0)
        records = P.records_to_prove(store, keys, all_records, tier)
    results = []
    for proof, path in P.prove_records(records, tier, write_dir, progress, note, mutants):
        results.append((proof, path))
        if not as_json:
            lib = proof.library or {}
            echo(f"{proof.status.upper():9} {proof.record_id}  {tier:8} {lib.get('name', '-')} {lib.get('version', '')}  "
                       f"{proof.reason}" + (f"  -> {path}" if path else ""))
            for kind, v in ((proof.mutants or {}).get("kinds") or {}).items():
                echo(f"  mutant {kind}: {v['verdict']}" + (f" by {v['by']}" if v.get("by") else "")
                     + f": {v['why']}"[:300])
    if as_json:
        print_json([dict(p.to_dict(), written=str(path) if path else None) for p, path in results])
    else:
        counts = {}
        for p, _ in results:
            counts[p.status] = counts.get(p.status, 0) + 1
        echo(f"{len(results)} record(s): " + (", ".join(f"{n} {k}" for k, n in counts.items()) or "none"))
    sys.exit(0 if all(p.status in ("proven", "skipped") for p, _ in results) else 1)


@cli.command()
@click.argument("key", required=False)
@db_option
@json_option
def runs(key, db_path, as_json):
    """List stored verification runs, of one record (id or slug) or of all. Exit 1 when there are none."""
    with open_store(db_path, read_only=True) as store:
        record_id = None
        if key:
            record = store.get(key)
            # A run may outlive its record (re-ingested data); an unknown key is still an id.
            record_id = record["id"] if record else key
        found = store.runs(record_id)
    if as_json:
        print_json(found)
    else:
        for r in found:
            runner = r.get("runner") or {}
            echo(f"#{r['run_id']:<5} {r['started_at'][:19]}  {runner.get('hostname', '?')}  " + _run_line(r))
        if not found:
            echo("no runs" + (f" for {key}" if key else "") + " (run `errkb verify`)", err=True)
    sys.exit(0 if found else 1)


# -- mine and drift: records from raise sites, and records that drifted ----------


@cli.command("mine")
@click.argument("path", required=False, type=click.Path(path_type=Path))
@click.option("--package", default=None, help="Mine an installed package (import name) instead of PATH.")
@click.option("--repo", default=None, help="owner/name on GitHub (default: git remote or package metadata).")
@click.option("--sha", default=None, help="40-hex commit of the code (default: git HEAD, or direct_url.json of the install).")
@click.option("--path-prefix", default="", help="Folder the package sits under in the repository (e.g. src).")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), default=None, help="Write the JSON Lines here (default: stdout).")
@json_option
def mine_command(path, package, repo, sha, path_prefix, out, as_json):
    """Draft records (JSON Lines) for every raise site of a Python codebase.

    PATH is a checkout, a package folder, a .py file, a wheel or an sdist. Drafts
    carry the "draft" tag and empty prose for a person to write. The report (sites
    found, templated, skipped and why) goes to stderr, or to stdout with --json
    (then --out is required). Exit 0 when drafts were written, 1 when none.
    """
    from errkb.mine.drafts import mine

    if as_json and out is None:
        raise UsageError("--json prints the report on stdout: give --out FILE for the records")
    with Progress("mine: files scanned") as progress:
        result = mine(path, package=package, repo=repo, sha=sha, path_prefix=path_prefix, progress=progress.set)
    if out is None:
        result.write_jsonl(click.get_text_stream("stdout"))
    else:
        try:
            with open(out, "w", encoding="utf-8") as f:
                result.write_jsonl(f)
        except OSError as e:
            raise UsageError(f"{out}: cannot write: {e.strerror or e}") from e
    summary = result.summary()
    if as_json:
        print_json(summary)
    else:
        hint = "" if path_prefix else " (use --path-prefix for a src/ layout)"
        _echo_err(f"{summary['source']}; filePath relative to {result.root}{hint}")
        _echo_err(
            f"{summary['files']} files, {summary['sites']} raise sites, {summary['templated']} templated "
            f"({summary['templated_share']:.0%}), {summary['records']} drafts written"
            + (f" to {out}" if out else "")
        )
        for reason, count in summary["untemplated_reasons"].items():
            _echo_err(f"  {count:6d}  not templated: {reason}")
        for reason, count in summary["refused_by_lint"].items():
            _echo_err(f"  {count:6d}  refused by {reason}")
        for file, reason in result.scan.unparsable[:10]:
            _echo_err(f"  unparsable: {file}: {reason}")
        for reason, count in summary.get("skipped_reasons", {}).items():
            _echo_err(f"  {count:6d}  not read: {reason}")
    sys.exit(0 if result.records else 1)


def _drift_lines(report) -> list[str]:
    lines = []
    for e in report.entries:
        rec = e.recorded
        where = f"{rec['file']}:{rec['line']}" + (f" {rec['function']}" if rec["function"] else "")
        if e.current:
            cur = e.current
            now = f"{cur['file']}:{cur['line']} {cur['function']}"
            lines.append(f"{e.status:9s} {e.slug}  {where} -> {now}" + (f"  [{', '.join(e.changes)}]" if e.changes else ""))
        else:
            lines.append(f"{e.status:9s} {e.slug}  {where}")
        if e.diff:
            lines.append(f"          diff: {e.as_dict()['word_diff']}")
        if e.closest:
            c = e.closest
            lines.append(f"          closest elsewhere: {c['file']}:{c['line']} {c['function']} (similarity {c['similarity']:.2f})")
            lines.append(f"          diff: {c['word_diff']}")
        for other in e.also_raised_at[:5]:
            lines.append(f"          also raised at {other}")
        for note in e.notes:
            lines.append(f"          note: {note}")
    return lines


@cli.command("new")
@click.argument("location", metavar="FILE:LINE")
@click.option("--repo", default=None, help="owner/name on GitHub (default: git remote or package metadata).")
@click.option("--sha", default=None, help="40-hex commit of the code (default: git HEAD, or what the install records).")
@click.option("--path-prefix", default="", help="Folder the package sits under in the repository (e.g. src).")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write the record here (default: stdout); an existing file is never overwritten.")
def new_command(location, repo, sha, path_prefix, out):
    """Draft one record from the raise at FILE:LINE, ready to fill in.

    FILE is a path in a checkout or an installed package, or a path inside an
    installed package by its import name (vllm/config.py:221). Everything the code
    knows is filled in (message, pattern, class, source window, GitHub link, commit);
    the prose is left empty and the record carries the "draft" tag until written.
    Exit 0 when the draft lints clean, 1 when lint found an error in it.
    """
    from errkb.mine.new import OPTIONAL_FIELDS, new_record
    from errkb.records.lint import lint_record

    drafted = new_record(location, repo=repo, sha=sha, path_prefix=path_prefix)
    text = json.dumps(drafted.wrapper(), indent=2, ensure_ascii=False) + "\n"
    if out is None:
        click.echo(text, nl=False)
    else:
        try:
            with open(out, "x", encoding="utf-8") as f:
                f.write(text)
        except FileExistsError:
            raise UsageError(f"{out}: already exists: choose another --out (a record file is never overwritten)") from None
        except OSError as e:
            raise UsageError(f"{out}: cannot write: {e.strerror or e}") from e
    record = drafted.record
    _echo_err(f"drafted {record['id']} {record['repo']}/{record['slug']} from {record['filePath']}:{record['lineNumber']}"
              + (f" to {out}" if out else ""))
    _echo_err(f"  {record['errorClass']}: {record['errorMessage']}")
    _echo_err(f"  pattern: {record['messagePattern']}")
    _echo_err(f"  source: {drafted.provenance.describe()}")
    _echo_err(f"to write: {', '.join(drafted.to_write)} (and {', '.join(OPTIONAL_FIELDS)} where you can); "
              "then remove the \"draft\" tag and run `errkb lint`")
    findings = lint_record(record)
    for finding in findings:
        _echo_err(str(finding))
    sys.exit(1 if any(f.level == "error" for f in findings) else 0)


@cli.command("drift")
@click.argument("path", type=click.Path(path_type=Path))
@click.option("--repo", required=True, help="owner/name of the records to check.")
@click.option("--sha", default=None, help="40-hex commit PATH is at (a wheel or installed package has none of its own).")
@click.option("--fix", is_flag=True, help="Write moved records with their new location as new versions.")
@db_option
@json_option
def drift_command(path, repo, sha, fix, db_path, as_json):
    """Check where each record of REPO is raised now in PATH.

    PATH is a checkout, an installed package folder, a wheel or an sdist. Each
    record is same, moved (new file, line or function), reworded (a close message
    at the recorded site) or gone. Exit 0 when all are the same, 1 when any
    drifted (after --fix: when any is left that --fix could not write).
    """
    from errkb.mine.drift import drift

    with open_store(db_path, read_only=not fix) as store, Progress("drift: files scanned") as progress:
        report = drift(store, path, repo, sha=sha, fix=fix, progress=progress.set)
    if as_json:
        print_json(report.as_dict())
    else:
        _echo_err(f"{path}: {report.provenance.describe()}")
        for note in report.notes:
            _echo_err(f"note: {note}")
        for line in _drift_lines(report):
            echo(line)
        counts = report.counts()
        scan = report.scan
        _echo_err(
            ", ".join(f"{n} {status}" for status, n in counts.items())
            + f" ({scan.files} files, {scan.parsed} parsed for these records' words)"
        )
        if report.fixed is not None:
            _echo_err(f"--fix: {report.fixed['new']} new, {report.fixed['updated']} updated, {report.fixed['rejected']} rejected")
    left = [e for e in report.entries if e.status != "same"]
    if report.fixed is not None:
        left = [e for e in left if e.status != "moved"] + ([None] * report.fixed["rejected"])
    sys.exit(1 if left else 0)


# -- enrich: log-pipeline filter and archive batch path (errkb/enrich/lines.py, errkb/enrich/archive.py)


def _enrich_reporter(as_json: bool):
    def report(counters) -> None:
        _echo_err(json.dumps(counters.as_dict()) if as_json else counters.summary())
    return report


@cli.command()
@click.argument("files", nargs=-1, type=click.Path(dir_okay=False, allow_dash=True))
@click.option("--field", "fields", multiple=True, default=("message",), show_default=True,
              help="Key or dotted path holding the message of JSON lines (or archive rows); repeat to try several.")
@click.option("--site-url", envvar="ERRKB_SITE_URL", default=None,
              help="Where the fix pages are hosted (default $ERRKB_SITE_URL); without it `url` is a relative path.")
@click.option("--only-matched", is_flag=True, help="Write only the lines that matched a record.")
@click.option("--flush", "flush_each_line", is_flag=True,
              help="One write per line (batches never wait for input anyway; this also splits them).")
@click.option("--batch", type=click.IntRange(min=1), default=16384, show_default=True,
              help="Most lines matched and written at once (a batch never waits for more input).")
@click.option("--input", "archives", multiple=True,
              help="Archive to enrich in bulk (.jsonl/.ndjson/.json, .parquet, .csv; globs allowed); needs --output.")
@click.option("--output", type=click.Path(dir_okay=False), default=None,
              help="File the archive path writes (.parquet, or .jsonl/.csv).")
@click.option("--workers", type=click.IntRange(min=1), default=None, help="Matcher processes for --input (default: CPU count).")
@click.option("--quiet", "-q", is_flag=True, help="No counters on stderr at the end (SIGUSR1 still prints them).")
@click.option("--no-sites", "no_sites", is_flag=True,
              help="No known-site tier: lines no record matches are not tagged with where they are raised.")
@db_option
@json_option
def enrich(files, fields, site_url, only_matched, flush_each_line, batch, archives, output, workers, quiet, no_sites,
           db_path, as_json):
    """Add the matching record to each log line: NDJSON in, NDJSON out.

    Reads FILES (or stdin) line by line and writes one JSON object per line to
    stdout, in order; a matched line gains an `errkb` object (id, slug, repo,
    errorClass, severity, score, solution, url, tier); a line no record matches but a
    known site does gets tier "site" and where it is raised (--no-sites: not). With
    --input/--output it enriches whole archives through DuckDB instead. Counters go to stderr at the end and on
    SIGUSR1; SIGTERM stops after writing every line already read. --json prints the
    counters as JSON.
    """
    from errkb.enrich.lines import run_filter
    from errkb.kb import KnowledgeBase

    if (archives or output) and not (archives and output):
        raise UsageError("--input and --output go together (an archive in, an enriched file out)")
    if archives and files:
        raise UsageError("give archives with --input, not as arguments, when --output is used")
    kb = KnowledgeBase.open(db_path)
    if archives:
        from errkb.enrich.archive import enrich_archive

        summary = enrich_archive(archives, output, kb.matcher, fields=fields, site_url=site_url,
                                 only_matched=only_matched, workers=workers, resolve_many=kb.get_many,
                                 sites=None if no_sites else kb.sites())
        if not quiet:
            _echo_err(json.dumps(summary.as_dict()) if as_json else summary.summary())
        return
    report = _enrich_reporter(as_json)
    result = run_filter(kb.matcher, files, fields=fields, site_url=site_url, only_matched=only_matched,
                        batch=batch, flush_each_line=flush_each_line, report=report, resolve_many=kb.get_many,
                        sites=None if no_sites else kb.sites())
    if not quiet:
        report(result.counters)


# -- spark-enrich: the same enrichment on Apache Spark (errkb.enrich.spark) ----------------


@cli.command("spark-enrich")
@click.option("--input", "input_path", required=True, help="Parquet, JSON Lines or text file/folder (local path or URI).")
@click.option("--output", "output_path", required=True, help="Parquet folder to write.")
@click.option("--master", default=None, help="Spark master (default: spark-submit's, else local[*]), e.g. local[2].")
@click.option("--column", default="message", show_default=True, help="Column holding the message (text input: the line).")
@click.option("--format", "input_format", type=click.Choice(["parquet", "json", "text"]), default=None,
              help="Input format (default: from the file names).")
@click.option("--index", "index_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Prebuilt index file (errkb.enrich.spark.build_index); default: compiled from --db.")
@click.option("--site-url", envvar="ERRKB_SITE_URL", default=None,
              help="Where the fix pages are hosted (default $ERRKB_SITE_URL); without it `url` is a relative path.")
@click.option("--overwrite", is_flag=True, help="Replace --output if it exists.")
@click.option("--no-sites", "no_sites", is_flag=True,
              help="No known-site tier: rows no record matches are not tagged with where they are raised.")
@db_option
@json_option
def spark_enrich(input_path, output_path, master, column, input_format, index_path, site_url, overwrite, no_sites,
                 db_path, as_json):
    """Enrich a log archive on Apache Spark; write it as Parquet with the errkb column.

    Needs `pip install 'errkb[spark]'` and Java 17. Exit 0 when the output is written.
    """
    from errkb.enrich.spark import run_job

    report = run_job(input_path, output_path, master=master, column=column, input_format=input_format,
                     db=db_path, site_url=site_url, index=index_path, overwrite=overwrite, sites=not no_sites)
    if as_json:
        print_json(report.as_dict())
    else:
        echo(report.summary())


# -- site and snippets (errkb/site/build.py, errkb/site/snippets.py) ---------


@cli.group("variants")
def variants_group():
    """Other wordings of records' raise sites across releases of their project."""


@variants_group.command("build")
@click.argument("ids", nargs=-1, required=True)
@click.option("--releases", default=None,
              help="Comma-separated versions to download (with --package) or wheel/sdist/folder paths to scan.")
@click.option("--package", default=None, help="PyPI package whose releases hold the records' code (default: the repo's name).")
@click.option("--last", "last_n", type=int, default=None, help="Scan the last N releases of --package.")
@click.option("--write", "write_dir", type=click.Path(path_type=Path), default=None,
              help="Write <record-id>.json into this folder (e.g. data/variants).")
@db_option
@json_option
def variants_build_command(ids, releases, package, last_n, write_dir, db_path, as_json):
    """Find the other wordings of records ID... in past releases.

    Each release (--releases paths or versions, or the --last N releases of
    --package, downloaded as sdists, else wheels, into the errkb cache) is
    checked with drift; a reworded message at the record's raise site becomes a
    variant with the releases it holds for. explain matches variants exactly.
    """
    from errkb.mine.variants import build_for

    with open_store(db_path, read_only=True) as store:
        built = build_for(store, ids, releases=releases, package=package, last_n=last_n, write_dir=write_dir,
                          note=lambda line: _echo_err(f"variants: {line}"))
    results: list[dict] = []  # --json: one list, a variants file's content per record
    for record, result, path in built:
        if path is not None:
            _echo_err(f"wrote {path}")
        if as_json:
            results.append(result)
        else:
            echo(f"{record['id']}  {record.get('slug')}: {len(result['variants'])} variant(s), scanned {', '.join(result['scanned'])}")
            for var in result["variants"]:
                echo(f"  {var['first']}–{var['last']}  {var['file']}:{var['line']}  {var['message_template']}")
    if as_json:
        print_json(results)


@cli.group("site")
def site_group():
    """The static documentation site (fix pages, search, snippets)."""


@site_group.command("build")
@click.option("--out", "out", type=click.Path(file_okay=False, path_type=Path), default=Path("site"),
              show_default=True, help="Folder to write the site into.")
@click.option("--check", is_flag=True, help="Write nothing; exit 1 when OUT differs from a fresh build.")
@click.option("--base-url", default=None, help="Where the site is hosted (https://.../); makes sitemap.xml and 404.html absolute.")
@click.option("--workers", type=click.IntRange(min=1), default=1, show_default=True,
              help="Processes rendering fix pages (a pool pays off only with idle cores).")
@db_option
@json_option
def site_build(out, check, base_url, workers, db_path, as_json):
    """Build the site from the store into OUT (deterministic: a rebuild is byte-identical).

    In an errkb checkout the default OUT, site/, is the committed site (the build of the
    bundled data/ alone): it is rewritten only when named (`--out site`).
    """
    from click.core import ParameterSource

    from errkb.site.build import build_site, check_site

    named = click.get_current_context().get_parameter_source("out") == ParameterSource.COMMANDLINE
    if not check and not named and _committed_site(out):
        raise UsageError(f"{out}: this is errkb's committed site (the build of the bundled data/ alone); "
                         "write yours elsewhere with --out DIR, or rebuild the committed one with --out site")
    with open_store(db_path, read_only=True) as store:
        if check:
            report = check_site(store, out, base_url=base_url, workers=workers)
        else:
            report = _build_with_progress(build_site, store, out, base_url, workers)
    if as_json:
        print_json(report.as_dict())
    else:
        for w in report.warnings:
            _echo_err(f"warning: {w}")
    if check:
        if not as_json:
            for kind in ("stale", "missing", "extra"):
                for rel in getattr(report, kind):
                    echo(f"{kind}: {out / rel}")
            state = "up to date" if report.fresh else f"stale; rebuild with `errkb site build --out {out}`"
            _echo_err(f"{out}: {state} ({report.files} files)")
        sys.exit(0 if report.fresh else 1)
    if not as_json:
        echo(f"{out}: {report.pages} files ({report.records} fix pages), {len(report.written)} written, {len(report.removed)} removed")


def _committed_site(out: Path) -> bool:
    """Whether ``out`` is the site/ folder git tracks in the errkb checkout this errkb runs from."""
    from errkb.resources import data_dir

    root = data_dir().parent
    return data_dir().name == "data" and (root / ".git").exists() and out.resolve() == (root / "site").resolve()


def _build_with_progress(build_site, store, out, base_url, workers):
    with Progress("site: fix pages") as bar:
        def progress(done, total):
            bar.set_total(total)
            bar.update(1)

        return build_site(store, out, base_url=base_url, progress=progress, workers=workers)


@cli.command()
@click.argument("ids", nargs=-1)
@click.option("--out", "out", type=click.Path(file_okay=False, path_type=Path), default=Path("snippets"),
              show_default=True, help="Folder to write the snippets into.")
@db_option
@json_option
def snippets(ids, out, db_path, as_json):
    """Write one standalone validation snippet per record (IDS: ids or slugs; default all).

    Each snippet exits 0 when the fix validates, 1 when it fails, 2 when it cannot run.
    """
    from errkb.site.snippets import write_snippets

    with open_store(db_path, read_only=True) as store:
        report = write_snippets(store, out, ids)
    if as_json:
        print_json(report.as_dict())
        return
    for name in report.written:
        echo(str(out / name))
    for why in report.skipped:
        _echo_err(f"skipped {why}")
    _echo_err(f"{len(report.written)} written, {len(report.unchanged)} unchanged, {len(report.skipped)} skipped")


@cli.command()
@click.argument("archives", nargs=-1, required=True)
@click.option("--since", default=None, help="Only lines at or after this: a duration ago (7d, 24h, 30m) or an ISO date-time.")
@click.option("--until", default=None, help="Only lines before this (same forms as --since).")
@click.option("--time-column", default=None, help="Column holding the line's time (default: timestamp, @timestamp, ts, time or date).")
@click.option("--by", "by", multiple=True,
              help="Column (or dotted path) whose distinct values are listed per error; repeat for several "
                   "[default: host, where the archive has one].")
@click.option("--sql", default=None, help="Run this SQL instead, with the archive(s) as the view `enriched`.")
@json_option
def query(archives, since, until, time_column, by, sql, as_json):
    """Which known errors happened, how often, and where, in enriched archives.

    ARCHIVES are files written by `errkb enrich --input ... --output ...` (globs
    allowed). Lines only a known site matched are listed apart (`site`: where it is
    raised, no record). Exit 1 when no record's error is found (known sites alone are
    not a fix, as in `errkb explain`).
    """
    from errkb.enrich.query import known_errors, run_sql

    if sql:
        names, rows = run_sql(archives, sql)
        data = [dict(zip(names, r)) for r in rows]
    else:
        data = known_errors(archives, since=since, until=until, time_column=time_column, by=by or None)
    if as_json:
        print_json(data)
    elif sql:
        echo("\t".join(names))
        for r in rows:
            echo("\t".join("" if v is None else str(v) for v in r))
    else:
        for r in data:
            where = "; ".join(f"{k}: {', '.join(map(str, v))}" for k, v in r.items() if isinstance(v, list))
            seen = f"  {r['first_seen']} .. {r['last_seen']}" if "first_seen" in r else ""
            if r.get("site"):  # where it is raised, not a record
                what = f"site  {r['site']}  {r['error_class'] or ''}".rstrip()
            else:
                what = f"{r['id']}  {r['repo']}/{r['slug']}  {r['error_class']}"
            echo(f"{r['lines']:>8}  {what}{seen}" + (f"  [{where}]" if where else ""))
        records = sum(1 for r in data if not r.get("site"))
        sites = len(data) - records
        _echo_err(f"{records} known error(s)" + (f", {sites} known site(s)" if sites else ""))
    sys.exit(0 if any(not r.get("site") for r in data) else 1)


# -- explain / search (errkb.explain.explainer, errkb.match.near, errkb.match.search) --------------------


class PastedTextCommand(click.Command):
    """A command that takes pasted text: an argument that begins with a dash but cannot
    be an option (a Jupyter traceback's rule of dashes, its ``-->`` arrows, a ``- `` log
    line; :func:`errkb.explain.command.is_pasted_text`) is text, not an unknown option.
    The options (with their values) are put first and every argument, in its order,
    behind a ``--``, so click reads the paste as an argument wherever it stands among the
    options (explain's fast door, errkb.console, reads it so too). A short option's value
    may be attached (``-n+2`` is ``-n`` with ``+2``, as click reads it), a ``--`` the user
    wrote keeps its meaning, and an option left without its value is click's to name."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if "--" not in args:
            valued = {o for p in self.params if isinstance(p, click.Option) and not p.is_flag for o in p.opts}
            short = tuple(o for o in valued if not o.startswith("--"))
            options: list[str] = []
            arguments: list[str] = []
            pasted = False
            i = 0
            while i < len(args):
                arg = args[i]
                if arg in valued:
                    if i + 1 == len(args):
                        return super().parse_args(ctx, args)
                    options += args[i:i + 2]
                    i += 2
                    continue
                if is_pasted_text(arg) and not arg.startswith(short):
                    pasted = True
                    arguments.append(arg)
                elif arg.startswith("-") and arg != "-":
                    options.append(arg)
                else:
                    arguments.append(arg)
                i += 1
            if pasted:
                args = [*options, "--", *arguments]
        return super().parse_args(ctx, args)


@cli.command(cls=PastedTextCommand)
@click.argument("text", required=False)
@click.option("--file", "file_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Read the text or log from this file.")
@click.option("--all", "show_all", is_flag=True,
              help="Every matching record with its score (in a log: count every record each message matches).")
@db_option
@json_option
def explain(text, file_path, show_all, db_path, as_json):
    """Explain a log line, a traceback or a whole log: the known error and its fix.

    TEXT is the text; `-` or no TEXT reads standard input (a whole log is streamed:
    every distinct known error with its count and first/last line). A TEXT that
    begins with a dash but is no option (a notebook's traceback: a rule of dashes,
    `---->` arrows) is read as text. Exit 0 when a
    known error matched, 1 when none did (similar records are offered), 2 for bad
    usage or input.
    """
    # The body is errkb.explain.command's; the console script's fast door runs it without click.
    explain_command(text, file_path, show_all, db_path, as_json, echo=click.echo, large_log_bytes=LARGE_LOG_BYTES)


@cli.command(cls=PastedTextCommand)
@click.argument("words", nargs=-1, required=True)
@click.option("--limit", "-n", type=click.IntRange(1, 1000), default=10, show_default=True,
              help="At most this many records (and this many known sites after them).")
@click.option("--no-sites", "no_sites", is_flag=True, help="Records only: no known sites after them.")
@db_option
@json_option
def search(words, limit, no_sites, db_path, as_json):
    """Keyword search over messages, documentation and fixes, best first (BM25F).

    For when you have words, not a log line (that is `errkb explain`). Exit 1 when
    no record holds any of the words.
    """
    from errkb.kb import KnowledgeBase
    from errkb.match.search import tokens

    query = " ".join(words)
    if not tokens(query):
        raise UsageError(f"search: no searchable words in {query!r} (common words like 'the' are ignored)")
    kb = KnowledgeBase.open(db_path)
    hits = kb.search(query, limit=limit)
    # The known-site tier after the records: where a message is raised, never a fix.
    sites = [] if no_sites else kb.sites().search(query, limit=limit)
    if as_json:
        print_json([{"tier": "curated", **h.as_dict()} for h in hits]
                   + [s.as_dict() for s in sites])
    else:
        for h in hits:
            echo(f"{h.score:6.2f}  {h.error_class or 'Error'}  {h.repo}/{h.slug}  {h.record_id}")
            message = " ".join(h.message.split())
            echo("        " + (message if len(message) <= 72 else message[:71] + "…"))
            echo(f"        matched {', '.join(h.matched)} in {', '.join(h.fields[:4])}")
        for s in sites:
            top = s.sites[0]
            echo(f"  site  known site, no fix: {s.pattern}")
            echo("        " + top.describe())
            url = top.source_url()
            if url:
                echo("        " + url)
            if len(s.sites) > 1:
                echo(f"        and {len(s.sites) - 1} other site(s) (errkb explain shows them all)")
        _echo_err(f"{len(hits)} record(s)" + (f", {len(sites)} known site(s)" if sites else ""))
    sys.exit(0 if hits else 1)


@cli.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
@click.option("--json", "json_path", type=click.Path(dir_okay=False, allow_dash=False, path_type=Path), default=None,
              help="Also write the report as JSON to this file.")
@click.option("--json-fd", type=click.IntRange(3), default=None, help="Also write the report as JSON to this open file descriptor.")
@click.option("--pty/--no-pty", "use_pty", default=None,
              help="Run the command on a pseudo-terminal (default: when errkb's stdout is a terminal).")
@db_option
def run(command, json_path, json_fd, use_pty, db_path):
    """Run COMMAND, pass its output through unchanged, then report each known error it printed.

    Reads what the command and every child process write (vLLM's engine core, torchrun
    workers: errors logged and re-raised in a child are found too), as `errkb explain`
    reads a piped log. Put `--` before the command: `errkb run -- vllm serve MODEL`.
    The report goes to stderr once the command ends; errkb exits with the command's
    status (128+N when a signal N ended it).
    """
    from errkb.explain.run import CommandNotRunnable, report_lines
    from errkb.explain.run import run as run_command
    from errkb.kb import KnowledgeBase

    try:
        result = run_command(list(command), lambda: KnowledgeBase.open(db_path), use_pty=use_pty)
    except CommandNotRunnable as e:
        echo(f"errkb: {e}", err=True)
        sys.exit(e.exit_status)
    for line in report_lines(result):
        _echo_err(line)
    report = json.dumps(result.as_dict(), indent=2, ensure_ascii=False, default=str) + "\n"
    if json_path is not None:
        try:
            json_path.write_text(report, encoding="utf-8")
        except OSError as e:
            _echo_err(f"errkb: run: cannot write the JSON report to {json_path}: {e.strerror}")
    if json_fd is not None:
        try:
            os.write(json_fd, report.encode())
        except OSError as e:
            _echo_err(f"errkb: run: cannot write the JSON report to fd {json_fd}: {e.strerror}")
    sys.exit(result.exit_status)


# ---- sites: the known-site index (errkb.mine.site_build builds it, errkb.match.sites reads it)


@cli.group("sites")
def sites_group():
    """The known-site index: where vLLM, PyTorch and FlashInfer raise each message."""


def _index_option(fn):
    return click.option("--index", "index_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
                        help="Index file (default: the bundled data/sites/sites.jsonl.gz).")(fn)


def _keep_option(fn):
    return click.option("--keep-archives/--drop-archives", default=True, show_default=True,
                        help="Keep downloaded wheels/sdists in the releases cache, or delete each once read.")(fn)


def _jobs_option(fn):
    return click.option("--jobs", "-j", type=click.IntRange(1, 64), default=1, show_default=True,
                        help="Releases fetched and read at once (worker processes).")(fn)


def _run_site_build(specs: list[str], index_path: Path | None, fresh: bool, as_json: bool, keep: bool,
                    jobs: int = 1) -> None:
    from errkb.mine.site_build import build, default_index_path

    path = index_path or default_index_path()
    report = build(specs, path, fresh=fresh, say=lambda line: _echo_err(f"sites: {line}"), keep_archives=keep,
                   jobs=jobs)
    if as_json:
        print_json(report.as_dict())
    else:
        echo(f"{path}: {report.rows} sites, {report.index_bytes} bytes; "
             f"{len(report.parts)} release(s) read, {len(report.failed)} skipped")
        if report.read_again:
            echo(f"  read again for the lines of sites a replaced part lacks: {', '.join(report.read_again)}")
        for spec, reason in report.failed:
            echo(f"  skipped {spec}: {reason}")
        if report.stale:
            echo(f"  {report.stale} sites keep a replaced part's line; `errkb sites add "
                 f"{' '.join(report.stale_releases)}` gives them their line")
    sys.exit(0 if not report.failed else 1)


@sites_group.command("add")
@click.argument("specs", nargs=-1, required=True)
@_index_option
@_keep_option
@_jobs_option
@json_option
def sites_add(specs, index_path, keep_archives, jobs, as_json):
    """Fetch releases (LIBRARY==VERSION, e.g. vllm==0.6.3) with pip and add their sites.

    Only the members that hold messages are read, in place. The release joins the
    lock (releases.lock next to the index). Exit 1 when a release could not be read.
    """
    from errkb.mine.releases import ReleaseError, parse_spec

    for spec in specs:
        try:
            parse_spec(spec)
        except ReleaseError as e:
            raise UsageError(str(e)) from None
    _run_site_build(list(specs), index_path, fresh=False, as_json=as_json, keep=keep_archives, jobs=jobs)


@sites_group.command("build")
@click.option("--from-lock", "from_lock", is_flag=True, required=True, help="Rebuild from every release in releases.lock.")
@_index_option
@_keep_option
@_jobs_option
@json_option
def sites_build(from_lock, index_path, keep_archives, jobs, as_json):
    """Rebuild the whole index from the releases its lock lists (the full backfill)."""
    from errkb.mine.releases import ReleaseError
    from errkb.mine.site_build import default_index_path, lock_path, read_lock

    path = index_path or default_index_path()
    try:
        specs = read_lock(lock_path(path))
    except ReleaseError as e:
        raise UsageError(str(e)) from None
    if not specs:
        raise UsageError(f"{lock_path(path)}: no releases listed (add some with `errkb sites add vllm==0.6.3`)")
    _run_site_build(specs, path, fresh=True, as_json=as_json, keep=keep_archives, jobs=jobs)


@sites_group.command("match", cls=PastedTextCommand)
@click.argument("text", required=False)
@_index_option
@json_option
def sites_match(text, index_path, as_json):
    """Where TEXT's message is raised (known sites only; `-` or nothing reads stdin). Exit 1 when none."""
    from errkb.match.sites import SiteIndex

    if text is None or text == "-":
        text = sys.stdin.read()
    index = SiteIndex.load(index_path)
    matches = index.match(text) or index.match_cut(text)  # as explain: whole messages, else one cut short
    if as_json:
        print_json([m.as_dict() for m in matches])
    else:
        for m in matches:
            for line in m.describe():
                echo(one_line(line))
    sys.exit(0 if matches else 1)


# ---- commands are added above this line (keep this marker) ----
