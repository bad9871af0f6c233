"""The command line: a thin typer layer over the library; progress on stderr, results on stdout.

Exit statuses: 0 done, 1 findings (audits), 2 usage, configuration or connection error.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import shlex
import signal
import sys
import threading
import time
from concurrent.futures.process import BrokenProcessPool
from importlib import metadata
from pathlib import Path
from typing import Callable, Iterator, Optional, TextIO

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text
from typer.core import TyperGroup

from anonymizer import audit
from anonymizer.config import Config, load_config
from anonymizer.parallel import default_workers
from anonymizer.run import RunSummary
from anonymizer.run import reprocess as reprocess_job
from anonymizer.run import run as run_job
from anonymizer.settings import ConfigError, read_text_file
from anonymizer.source import DBAPIError, database_error
from anonymizer.spans import CATEGORIES
from anonymizer.target import Target

# Options of the whole program that an operator also writes after the subcommand (`anonymizer run -v`).
GLOBAL_FLAGS = ("-v", "--verbose")
GLOBAL_VALUED = ("--log-file",)


class GlobalOptionsGroup(TyperGroup):
    """Accepts the global options anywhere before `--`: they are moved in front of the subcommand."""

    def parse_args(self, ctx: typer.Context, args: list[str]) -> list[str]:
        moved, rest = [], []
        i = 0
        while i < len(args):
            arg = args[i]
            if arg == "--":
                rest += args[i:]
                break
            if arg in GLOBAL_FLAGS or arg.startswith(tuple(f"{o}=" for o in GLOBAL_VALUED)):
                moved.append(arg)
            elif arg in GLOBAL_VALUED and i + 1 < len(args):
                moved += args[i : i + 2]
                i += 1
            else:
                rest.append(arg)
            i += 1
        return super().parse_args(ctx, moved + rest)


app = typer.Typer(
    cls=GlobalOptionsGroup,
    add_completion=False,
    no_args_is_help=True,
    help="De-identify clinical notes in a database using each patient's structured record.\n\n"
    "Exit statuses: 0 done, 1 findings (audits), 2 usage, configuration or connection error.",
)
out = Console()
err = Console(stderr=True)

ConfigOption = typer.Option(None, "--config", "-c", help="Configuration file (default: $ANONYMIZER_CONFIG, then ./anonymizer.toml).")
WorkersOption = typer.Option(
    None, "--workers", "-w", min=1, help="Worker processes (default: the number of cores); the output does not depend on it."
)


def version() -> str:
    try:
        return metadata.version("anonymizer")
    except metadata.PackageNotFoundError:
        return "unknown"


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"anonymizer {version()}")
        raise typer.Exit(0)


class UTCFormatter(logging.Formatter):
    """Log lines that start with their time in UTC, ISO 8601 (`2026-11-25T12:00:00Z`); the CLI's
    own progress and error lines follow it bare, any other with its level and logger."""

    converter = time.gmtime

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s", datefmt="%Y-%m-%dT%H:%M:%SZ")

    def format(self, record: logging.LogRecord) -> str:
        if record.name in (progress_log.name, error_log.name):
            return f"{self.formatTime(record, self.datefmt)} {record.getMessage()}"
        return super().format(record)


# Progress lines of run and reprocess (counts only, never note text): on stderr when it is not a
# terminal (a batch job, where a progress bar would be noise), and in --log-file.
progress_log = logging.getLogger("anonymizer.cli.progress")
# The one error line of a failed command, also in --log-file (stderr has it already).
error_log = logging.getLogger("anonymizer.cli.error")
for _own in (progress_log, error_log):
    _own.propagate = False  # their own handlers only (configure_logging)
    _own.addHandler(logging.NullHandler())  # none configured: nowhere, not logging's last resort (stderr)
PROGRESS_INTERVAL = 10.0  # seconds between two progress lines


def remove_log_handlers() -> None:
    """The handlers :func:`configure_logging` added, removed and closed (when the command ends)."""
    for logger in (logging.getLogger(), progress_log, error_log):
        for handler in [h for h in logger.handlers if getattr(h, "anonymizer_cli", False)]:
            logger.removeHandler(handler)
            handler.close()


def configure_logging(verbose: bool, log_file: Path | None) -> None:
    """Only the command line configures logging (never the library): the tool's warnings (with -v,
    details and other libraries' warnings) on stderr, everything from info up in --log-file, each
    line with its time."""
    root = logging.getLogger()
    remove_log_handlers()
    stderr = logging.StreamHandler(sys.stderr)
    stderr.setLevel(logging.INFO if verbose else logging.WARNING)
    if not verbose:  # a driver's warning (psycopg's aborted pipeline after an error) would break the one error line
        stderr.addFilter(lambda record: record.name.startswith("anonymizer") or record.levelno >= logging.ERROR)
    handlers: list[tuple[tuple[logging.Logger, ...], logging.Handler]] = [((root,), stderr)]
    if not err.is_terminal:  # decided as for the progress bar
        handlers.append(((progress_log,), logging.StreamHandler(sys.stderr)))
    if log_file is not None:
        try:
            log_file.parent.mkdir(parents=True, exist_ok=True)
            handlers.append(((root, progress_log, error_log), logging.FileHandler(log_file, encoding="utf-8")))
        except OSError as exc:
            raise fail(f"--log-file: cannot write {log_file} ({exc.strerror})") from None
    for loggers, handler in handlers:
        handler.anonymizer_cli = True  # type: ignore[attr-defined]
        handler.setFormatter(UTCFormatter())
        for logger in loggers:
            logger.addHandler(handler)
    root.setLevel(logging.INFO if verbose or log_file is not None else logging.WARNING)
    for own in (progress_log, error_log):
        own.setLevel(logging.INFO)


@app.callback()
def main(
    ctx: typer.Context,
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Log details to stderr (also accepted after the subcommand)."),
    log_file: Optional[Path] = typer.Option(
        None, "--log-file", help="Also log, with progress lines, to this file (appended; also accepted after the subcommand)."
    ),
    _version: bool = typer.Option(False, "--version", callback=_print_version, is_eager=True, help="Print the version and exit."),
) -> None:
    """De-identify clinical notes in a database using each patient's structured record."""
    configure_logging(verbose, log_file)
    ctx.call_on_close(remove_log_handlers)


@contextlib.contextmanager
def stop_on_sigterm(progress: Callable[[int, int], None]) -> Iterator[Callable[[int, int], None]]:
    """`progress`, raising KeyboardInterrupt after the batch (or patient) it reports once SIGTERM
    has come: a scheduler's stop ends a run as Ctrl-C does, marked interrupted, but never inside
    a target transaction, where it could leave the target unable to record how the run ended.
    The process's own SIGTERM handler is back when the block ends (a program calling the CLI)."""
    requested = threading.Event()

    def advance(n: int, total: int) -> None:
        progress(n, total)
        if requested.is_set():
            raise KeyboardInterrupt

    if threading.current_thread() is not threading.main_thread():  # Python sets handlers only there
        yield progress
        return
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: requested.set())
    try:
        yield advance
    finally:
        signal.signal(signal.SIGTERM, previous)


class LineProgress:
    """Progress as timestamped lines every `interval` seconds: `run: 12,500 of 100,000 notes, 1,234 notes/s`."""

    def __init__(self, what: str, unit: str, interval: float) -> None:
        self.what, self.unit, self.interval = what, unit, interval
        self.done = self.total = 0
        self.started = self.last = time.monotonic()

    def __call__(self, n: int, total: int) -> None:
        self.done += n
        self.total = total
        now = time.monotonic()
        if now - self.last >= self.interval:
            self.last = now
            self.line()

    def line(self, suffix: str = "") -> None:
        elapsed = time.monotonic() - self.started
        rate = f", {self.done / elapsed:,.0f} {self.unit}/s" if elapsed > 0 else ""
        progress_log.info(f"{self.what}: {self.done:,} of {self.total:,} {self.unit}{rate}{suffix}")


IntervalOption = typer.Option(PROGRESS_INTERVAL, "--progress-interval", min=0.0, hidden=True, help="Seconds between progress lines.")
JsonSummaryOption = typer.Option(False, "--json", help="Print the summary as one JSON object on stdout.")


# A worker killed (the OOM killer, kill -9): the run is marked failed and the next run continues.
WORKER_DIED = "{} failed: a worker process ended abruptly (killed, or out of memory); run again to continue"


def fail(message: str, code: int = 2) -> typer.Exit:
    """One line on stderr (never wrapped: scripts grep it), and the exit status to raise."""
    line = "error: " + " ".join(message.split())
    typer.echo(line, err=True)
    error_log.error(line)
    return typer.Exit(code)


@app.command()
def run(
    config: Optional[Path] = ConfigOption,
    batch_size: Optional[int] = typer.Option(None, min=1, help="Notes per batch and per target transaction."),
    limit: Optional[int] = typer.Option(None, min=1, help="Stop after this many notes."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Detect and count, write nothing."),
    workers: Optional[int] = WorkersOption,
    as_json: bool = JsonSummaryOption,
    interval: float = IntervalOption,
    engine: str = typer.Option("local", "--engine", help="local: processes on this machine; spark: Apache Spark (docs/scale-out.md)."),
    master: Optional[str] = typer.Option(None, "--master", help="With --engine spark: its master (default: spark-submit's, or local[*])."),
) -> None:
    """Anonymize every note of the source into the target."""
    lines = LineProgress("dry run" if dry_run else "run", "notes", interval)
    if engine != "local" or master is not None:
        summary = _spark_run(config, engine, master, batch_size, limit, dry_run, workers)
        lines.done = lines.total = summary.notes  # Spark shows its own progress; the last line counts the notes
        report(summary, "run", False, as_json, lines)
        return
    bar = Progress(
        TextColumn("anonymizing"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[rate]} notes/s"),
        TimeElapsedColumn(),
        console=err,
        transient=True,
    )
    task = bar.add_task("run", total=None, rate="-")

    def advance(n: int, total: int) -> None:
        lines(n, total)
        if not err.is_terminal:
            return
        # Started on the first batch, so errors found while preparing print as one clean line.
        if not bar.live.is_started:
            bar.start()
        bar.update(task, total=total, advance=n)
        elapsed = bar.tasks[task].elapsed or 0
        bar.update(task, rate=f"{bar.tasks[task].completed / elapsed:,.0f}" if elapsed else "-")

    try:
        with stop_on_sigterm(advance) as progress:
            summary = run_job(
                load_config(config),
                batch_size=batch_size,
                limit=limit,
                dry_run=dry_run,
                progress=progress,
                workers=workers or default_workers(),
            )
    except ConfigError as exc:
        raise fail(str(exc)) from None
    except DBAPIError as exc:  # a database failed mid-run: one line, no data; the run is marked failed
        raise fail(str(database_error(exc, "run failed"))) from None
    except BrokenProcessPool:
        raise fail(WORKER_DIED.format("run")) from None
    finally:
        if bar.live.is_started:
            bar.stop()
    report(summary, "run", dry_run, as_json, lines)


def _spark_run(
    config: Optional[Path], engine: str, master: Optional[str], batch_size: Optional[int], limit: Optional[int], dry_run: bool,
    workers: Optional[int],
) -> RunSummary:
    """`run --engine spark`: the same configuration, the work on a Spark cluster (anonymizer.spark)."""
    if engine not in ("local", "spark"):
        raise fail(f"--engine {engine}: use --engine local or spark")
    if engine == "local":
        raise fail("--master: only with --engine spark")
    refused = [flag for flag, given in (("--limit", limit), ("--dry-run", dry_run), ("--workers", workers)) if given]
    if refused:
        raise fail(f"{', '.join(refused)}: not with --engine spark (its master sets the cores)")
    try:
        from py4j.protocol import Py4JError
        from pyspark.errors import PySparkException

        from anonymizer.spark import run as spark_job
    except ImportError:
        raise fail("--engine spark: pyspark is not installed; pip install 'anonymizer[spark]'") from None
    try:
        return spark_job(load_config(config), master=master, batch_size=batch_size)
    except ConfigError as exc:
        raise fail(str(exc)) from None
    except DBAPIError as exc:
        raise fail(str(database_error(exc, "run failed"))) from None
    except (PySparkException, Py4JError) as exc:  # the job failed; Spark's log above says where
        raise fail(f"run failed: the Spark job failed ({type(exc).__name__}); the next run continues where it stopped") from None


def report(summary: RunSummary, kind: str, dry_run: bool, as_json: bool, lines: LineProgress) -> None:
    """The summary: a table, or with --json one JSON object, on stdout; a last progress line."""
    if summary.run_id is not None:
        lines.what = f"{kind} {summary.run_id}"
    lines.line(", finished")
    if as_json:
        item = {
            "run_id": summary.run_id,
            "kind": kind,
            "dry_run": dry_run,
            "notes": summary.notes,
            "done": summary.done,
            "skipped": summary.skipped,
            "failed": summary.failed,
            "no_record": summary.no_record,
            "spans": {c: summary.spans[c] for c in CATEGORIES if summary.spans[c]},
            "seconds": round(summary.seconds, 3),
        }
        print(json.dumps(item))
        return
    print_summary(summary, dry_run)


def print_summary(summary: RunSummary, dry_run: bool) -> None:
    table = Table(title="dry run (nothing written)" if dry_run else f"run {summary.run_id}")
    table.add_column("what")
    table.add_column("count", justify="right")
    for label, value in (
        ("notes read", summary.notes),
        ("anonymized", summary.done),
        ("skipped (unchanged)", summary.skipped),
        ("failed", summary.failed),
        ("without a patient record", summary.no_record),
    ):
        table.add_row(label, f"{value:,}")
    for category in CATEGORIES:
        if summary.spans[category]:
            table.add_row(f"spans {category}", f"{summary.spans[category]:,}")
    rate = summary.notes / summary.seconds if summary.seconds else 0.0
    table.add_row("seconds", f"{summary.seconds:.1f}")
    table.add_row("notes/s", f"{rate:,.0f}")
    out.print(table)


@app.command()
def reprocess(
    patient: list[str] = typer.Option([], "--patient", "-p", help="A patient id (repeatable)."),
    patients_from: Optional[Path] = typer.Option(None, help="A file of patient ids, one a line."),
    changed: bool = typer.Option(False, "--changed", help="Also every patient whose record changed since its last run."),
    config: Optional[Path] = ConfigOption,
    workers: Optional[int] = WorkersOption,
    as_json: bool = JsonSummaryOption,
    interval: float = IntervalOption,
) -> None:
    """Re-run every note of some patients, replacing their rows in one transaction per patient."""
    lines = LineProgress("reprocess", "patients", interval)
    ids = list(patient)
    try:
        if patients_from is not None:
            if not patients_from.is_file():
                raise ConfigError(f"--patients-from: file not found: {patients_from}")
            ids += [line.strip() for line in read_text_file(patients_from, "--patients-from").splitlines() if line.strip()]
        if not ids and not changed:
            raise ConfigError("give --patient, --patients-from or --changed")
        with stop_on_sigterm(lines) as progress:
            summary = reprocess_job(
                load_config(config), ids, changed=changed, progress=progress, workers=workers or default_workers(), refuse_unknown=True
            )
    except ConfigError as exc:
        raise fail(str(exc)) from None
    except DBAPIError as exc:
        raise fail(str(database_error(exc, "reprocess failed"))) from None
    except BrokenProcessPool:
        raise fail(WORKER_DIED.format("reprocess")) from None
    report(summary, "reprocess", False, as_json, lines)


audit_app = typer.Typer(no_args_is_help=True, help="Inspect what a run removed, what is left, and sample for review.")
app.add_typer(audit_app, name="audit")


def _target(config: Optional[Path]) -> tuple[Config, Target]:
    """The configured target as it is: an audit never creates, migrates or locks it."""
    cfg = load_config(config)
    return cfg, Target(cfg.target.url, create=False)


@audit_app.command("summary")
def audit_summary(
    run_id: Optional[int] = typer.Option(None, "--run", help="Only this run."),
    as_json: bool = typer.Option(False, "--json", help="Machine-readable output."),
    config: Optional[Path] = ConfigOption,
) -> None:
    """Per run: notes, spans per category and per detector, notes with no detection, failures."""
    try:
        reports = audit.summary(_target(config)[1], run_id)
    except ConfigError as exc:
        raise fail(str(exc)) from None
    except DBAPIError as exc:
        raise fail(str(database_error(exc, "audit failed"))) from None
    if as_json:
        print(json.dumps([vars(r) for r in reports], indent=2))  # vars: asdict mangles Counters
        return
    for r in reports:
        table = Table(title=f"run {r.run_id} ({r.kind}, {r.status}, started {r.started_at})")
        table.add_column("what")
        table.add_column("count", justify="right")
        table.add_column("only this detector", justify="right")
        for label, value in (
            ("notes anonymized", r.notes_done),
            ("notes skipped", r.notes_skipped),
            ("notes failed", r.notes_failed),
            ("notes with no detection", r.notes_without_detection),
        ):
            table.add_row(label, f"{value:,}", "")
        for category, count in sorted(r.spans_by_category.items()):
            table.add_row(f"spans {category}", f"{count:,}", "")
        for detector, count in sorted(r.spans_by_detector.items()):
            table.add_row(f"detector {detector}", f"{count:,}", f"{r.spans_only_by[detector]:,}")
        for reason, count in sorted(r.failures.items()):
            table.add_row(f"failure: {reason}", f"{count:,}", "")
        out.print(table)


@audit_app.command("note")
def audit_note(note_id: str, config: Optional[Path] = ConfigOption) -> None:
    """Show one source note with its detections highlighted, beside the anonymized text (prints PHI)."""
    try:
        cfg, target = _target(config)
        view = audit.note_view(cfg, target, note_id)
    except ConfigError as exc:
        raise fail(str(exc)) from None
    except DBAPIError as exc:
        raise fail(str(database_error(exc, "audit failed"))) from None
    marked = Text()
    position = 0
    replacements = view.replacements or [None] * len(view.spans)
    for (start, end, category, detectors), replacement in zip(view.spans, replacements):
        marked.append(view.source_text[position:start])
        marked.append(view.source_text[start:end], style="bold reverse")
        chosen = "" if replacement is None or replacement == f"[{category}]" else f" → {replacement}"
        marked.append(f"⟨{category}: {detectors}{chosen}⟩", style="cyan")
        position = end
    marked.append(view.source_text[position:])
    anonymized = view.anonymized_text if view.anonymized_text is not None else f"(failed: {view.failure})"
    # Printed one after the other, unwrapped: a note's lines stay whole when piped or copied.
    out.rule(f"note {view.note_id}: source, with detections")
    out.print(marked, soft_wrap=True)
    out.rule("anonymized")
    out.print(anonymized, soft_wrap=True, markup=False, highlight=False)


@audit_app.command("leaks")
def audit_leaks(
    as_json: bool = typer.Option(False, "--json", help="The findings as one JSON array ([] when clean)."),
    show_values: bool = typer.Option(False, "--show-values", help="Also print the leaked value (PHI)."),
    config: Optional[Path] = ConfigOption,
) -> None:
    """Scan the anonymized text for what remains of each patient's record; exit 1 on any finding."""
    found = 0
    findings = []
    try:
        cfg, target = _target(config)
        scan = audit.leaks(cfg, target)
        if scan.name_threshold != cfg.detectors.name_threshold:
            err.print(
                f"names checked with threshold {scan.name_threshold} (the shipped default), "
                f"not the configured {cfg.detectors.name_threshold}",
                highlight=False,
            )
        for leak in scan:
            found += 1
            item = dataclasses.asdict(leak)
            if not show_values:
                item.pop("value")
            if as_json:
                findings.append(item)
            else:
                print("\t".join(f"{k}={v}" for k, v in item.items()))
    except ConfigError as exc:
        raise fail(str(exc)) from None
    except DBAPIError as exc:
        raise fail(str(database_error(exc, "audit failed"))) from None
    if not scan.notes:
        raise fail("no anonymized notes in the target: nothing to check")
    if as_json:
        print(json.dumps(findings))
    err.print(f"scanned {scan.notes:,} notes: {found} finding(s)", highlight=False)
    raise typer.Exit(1 if found else 0)


@audit_app.command("sample")
def audit_sample(
    n: int = typer.Option(..., "--n", min=1, help="How many notes."),
    seed: int = typer.Option(..., "--seed", help="The same seed gives the same sample."),
    out_file: Path = typer.Option(..., "--out", help="JSON-lines file to write (contains PHI; created readable by you only)."),
    force: bool = typer.Option(False, "--force", help="Replace an existing file (never through a symlink)."),
    config: Optional[Path] = ConfigOption,
) -> None:
    """Write a reproducible random sample of notes with their detections, for manual review."""
    try:
        cfg, target = _target(config)
        items = audit.sample(cfg, target, n, seed)
        with private_file(out_file, force) as stream:
            stream.write("".join(json.dumps(item) + "\n" for item in items))
    except ConfigError as exc:
        raise fail(str(exc)) from None
    except DBAPIError as exc:
        raise fail(str(database_error(exc, "audit failed"))) from None
    err.print(f"{len(items)} notes written to {out_file}; mark spans under 'missed' and 'wrong', then import-review")


def private_file(path: Path, force: bool) -> TextIO:
    """A new file for PHI, readable by its owner only, opened without following a symlink.

    An existing file is refused unless `force` (then replaced); a symlink is refused always, so the
    sample cannot be sent to wherever a link points.
    """
    if path.is_symlink():
        raise ConfigError(f"--out: {path} is a symbolic link; give the file itself")
    if force:
        try:
            path.unlink()  # a new file, so it gets 0600 whatever the old one had
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise ConfigError(f"--out: cannot replace {path} ({exc.strerror})") from None
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except FileExistsError:
        raise ConfigError(f"--out: {path} exists; give another file or --force to replace it") from None
    except OSError as exc:
        raise ConfigError(f"--out: cannot create {path} ({exc.strerror})") from None
    return os.fdopen(fd, "w", encoding="utf-8")


@audit_app.command("import-review")
def audit_import_review(
    file: Path,
    reviewer: Optional[str] = typer.Option(None, "--reviewer", help="Who reviewed (default: each line's \"reviewer\", else you)."),
    config: Optional[Path] = ConfigOption,
) -> None:
    """Store the missed and wrongly removed spans of a reviewed sample file; each line is a finished review."""
    try:
        if not file.is_file():
            raise ConfigError(f"file not found: {file}")
        counts = audit.import_review(_target(config)[1], file, reviewer)
    except ConfigError as exc:
        raise fail(str(exc)) from None
    except DBAPIError as exc:
        raise fail(str(database_error(exc, "audit failed"))) from None
    out.print(f"imported {counts['missed']} missed, {counts['wrong']} wrong and {counts['category']} recategorised span(s)"
              f" ({counts['new']} new)", highlight=False)


@audit_app.command("estimate")
def audit_estimate(
    as_json: bool = typer.Option(False, "--json", help="One JSON object on stdout."),
    config: Optional[Path] = ConfigOption,
) -> None:
    """Estimate the PHI left in the release from the reviewed random sample: recall with its 95% interval."""
    from anonymizer.review.estimate import format_estimate, release_estimate

    try:
        cfg, target = _target(config)
        found, _ = release_estimate(cfg, target)
    except (ConfigError, ValueError) as exc:
        raise fail(str(exc)) from None
    except DBAPIError as exc:
        raise fail(str(database_error(exc, "audit failed"))) from None
    print(json.dumps(found.as_dict()) if as_json else format_estimate(found))


@app.command()
def review(
    config: Optional[Path] = ConfigOption,
    sample: Optional[int] = typer.Option(None, "--sample", min=1, help="Review a random sample of N notes (with --seed)."),
    seed: Optional[int] = typer.Option(None, "--seed", help="The sample's seed: the same seed, the same notes as audit sample."),
    notes: Optional[Path] = typer.Option(None, "--notes", help="Review the notes whose ids this file lists, one a line."),
    port: int = typer.Option(0, "--port", min=0, max=65535, help="Port to listen on (default: a free one)."),
    host: str = typer.Option("127.0.0.1", "--host", help="Address to listen on (a loopback address unless --allow-remote)."),
    allow_remote: bool = typer.Option(False, "--allow-remote", help="Listen on a non-loopback --host: the page shows PHI."),
    reviewer: Optional[str] = typer.Option(None, "--reviewer", help="The name marks carry until a reviewer gives theirs (default: you)."),
    evaluation: Optional[Path] = typer.Option(
        None, "--evaluation", help="A report of anonymizer evaluate --cv K --json F: the dashboard draws its threshold curve."
    ),
) -> None:
    """Serve the review page on this machine (it shows PHI): mark missed and wrong spans, see the run's
    dashboard and the release estimate. Without --sample or --notes, the notes reviewed so far."""
    from anonymizer.review.marks import file_queue, resumed_queue, sample_queue

    if (sample is None) != (seed is None):
        raise fail("--sample and --seed go together")
    if sample is not None and notes is not None:
        raise fail("--sample or --notes, not both")
    try:
        from anonymizer.review.app import make_server
    except ImportError as exc:
        raise fail(f"the review page needs the review extra ({exc.name} is missing): pip install 'anonymizer[review]'") from None
    try:
        cfg, target = _target(config)
        queue = sample_queue(target, sample, seed) if sample is not None else file_queue(target, notes) if notes else resumed_queue(target)
        report = json.loads(read_text_file(evaluation, "--evaluation")) if evaluation else None
        server, sock, url = make_server(cfg, target, queue, host=host, port=port, allow_remote=allow_remote, reviewer=reviewer,
                                        evaluation=report if isinstance(report, dict) else None)
    except ConfigError as exc:
        raise fail(str(exc)) from None
    except DBAPIError as exc:
        raise fail(str(database_error(exc, "review failed"))) from None
    except ValueError:
        raise fail(f"--evaluation: {evaluation} is not a JSON report") from None
    err.print(f"reviewing {queue.description}. The page shows PHI: open it on this machine only. Ctrl+C stops it.", highlight=False)
    print(url, flush=True)
    server.run(sockets=[sock])


@app.command("rules")
def rules_command(
    config: Optional[Path] = ConfigOption,
    as_json: bool = typer.Option(False, "--json", help="One JSON document on stdout."),
) -> None:
    """Each detector and what finds what: its rules, their categories, validators and context
    exceptions, the packaged rules and a configuration's [rules] extra folders alike."""
    from anonymizer.config import DEFAULT_FILE, ENV_VAR
    from anonymizer.rules import describe, extra_folders, format_description

    try:
        cfg = load_config(config) if config or os.environ.get(ENV_VAR) or Path(DEFAULT_FILE).is_file() else None
        if cfg is None:  # no configuration: the packaged rules
            described = describe()
        else:
            described = describe(cfg.detectors, extra_folders(cfg.rules.extra), cfg.lists, cfg.patients, cfg.classifier)
    except ConfigError as exc:
        raise fail(str(exc)) from None
    if as_json:
        print(json.dumps(described, indent=1))
    else:
        print(format_description(described), end="")


@app.command()
def evaluate(
    corpus: Path = typer.Argument(..., help="A PhysioNet-format folder, or a gold .jsonl file (e.g. sample_db/gold.jsonl)."),
    cv: int = typer.Option(0, "--cv", min=0, help="K-fold cross-validation grouped by patient (retrains per fold)."),
    model: Optional[Path] = typer.Option(None, help="A trained model (default: the shipped one)."),
    threshold: Optional[float] = typer.Option(None, help="Decision threshold (default: the model's)."),
    missed: bool = typer.Option(False, "--show-missed/--no-missed", help="Also print the missed phrases (they quote notes: PHI)."),
    json_out: Optional[Path] = typer.Option(None, "--json", help="Also write the report, without missed phrases, as JSON."),
    lockbox: bool = typer.Option(
        False, "--lockbox", help="Cross-validate the tuning part; score the lockbox (ids divisible by 3) with a model trained on it."
    ),
    tuning: bool = typer.Option(False, "--tuning", help="Score the tuning part only (the lockbox's patients left out)."),
    augment: Optional[int] = typer.Option(
        None, "--augment", min=0, help="With --cv or --lockbox: train also on N surrogate copies of each note (default 1)."
    ),
) -> None:
    """Score rules alone, the classifier alone and their union against a gold standard, token by token."""
    from anonymizer.classifier.training import DEFAULT_THRESHOLD, TrainingOptions
    from anonymizer.corpora import CorpusError, load_corpus, split_lockbox
    from anonymizer.evaluate import format_report, run_evaluation
    from anonymizer.pipeline import build_pipeline
    from anonymizer.settings import ClassifierConfig, DetectorsConfig

    if lockbox and (tuning or model):
        raise fail("--lockbox trains its own model on the tuning part: it takes neither --tuning nor --model")
    try:
        gold = load_corpus(corpus)
        if tuning:
            gold = split_lockbox(gold)[0]
        classifier = ClassifierConfig(enabled=not (cv or lockbox), model=str(model) if model else None, threshold=threshold)
        pipeline = build_pipeline(DetectorsConfig(), gold.lists, classifier)
    except (ConfigError, CorpusError, OSError) as exc:
        raise fail(str(exc)) from None
    options = TrainingOptions(threshold=DEFAULT_THRESHOLD if threshold is None else threshold)
    if augment is not None:
        options = dataclasses.replace(options, augment=augment)
    try:
        report = run_evaluation(gold, pipeline, cv=cv, options=options, lockbox=lockbox)
    except ValueError as exc:
        raise fail(str(exc)) from None
    out.print(format_report(report, missed=missed), markup=False, highlight=False, soft_wrap=True)
    if not missed and report.get("missed"):
        out.print(f"\n{len(report['missed'])} missed phrase(s) not shown (they quote notes: --show-missed prints them)", highlight=False)
    if json_out:
        public = {k: v for k, v in report.items() if k != "missed"}
        json_out.write_text(json.dumps(public, indent=1, sort_keys=True) + "\n", encoding="utf-8")


def _reviewed_corpus(config: Path):
    """The reviewed notes of a configuration's target, as a training corpus (one line when there are none)."""
    from anonymizer.review.gold import reviewed_corpus

    cfg, target = _target(config)
    corpus = reviewed_corpus(cfg, target, name=f"reviews of {config}")
    if not corpus.notes:
        raise ConfigError(f"--reviews {config}: no reviewed note in its target (anonymizer review, or audit import-review)")
    return corpus


@app.command()
def train(
    corpora: Optional[list[Path]] = typer.Argument(None, help="Annotated corpora: PhysioNet-format folders or gold .jsonl files."),
    out_model: Path = typer.Option(..., "--out", help="Where to write the model (.json.gz)."),
    reviews: Optional[list[Path]] = typer.Option(
        None, "--reviews", help="A configuration whose target holds reviewed notes (anonymizer review): train on them too."
    ),
    cv: int = typer.Option(0, "--cv", min=0, help="Also cross-validate, folds grouped by patient."),
    c: Optional[float] = typer.Option(None, "--c", help="SVM regularisation (default: the tuned one)."),
    threshold: Optional[float] = typer.Option(None, help="Decision threshold stored with the model."),
    mode: str = typer.Option("multiclass", help="multiclass or binary."),
    augment: Optional[int] = typer.Option(
        None, "--augment", min=0, help="Also train on N copies of each note, its PHI replaced by surrogates (default: the tuned number)."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the whole model card as JSON instead of a summary."),
) -> None:
    """Train the local-context SVM deterministically; the same inputs give the same model."""
    from anonymizer.classifier.train import train as train_model
    from anonymizer.classifier.training import TrainingOptions, rule_pipeline
    from anonymizer.corpora import CorpusError, load_corpus, merge_lists
    from anonymizer.scoring import format_categories, format_curve, format_rows

    if mode not in ("multiclass", "binary"):
        raise fail("--mode: multiclass or binary")
    if not corpora and not reviews:
        raise fail("give an annotated corpus, --reviews CONFIG, or both")
    try:
        loaded = [load_corpus(path) for path in corpora or []] + [_reviewed_corpus(path) for path in reviews or []]
    except (CorpusError, ConfigError, OSError) as exc:
        raise fail(str(exc)) from None
    except DBAPIError as exc:
        raise fail(str(database_error(exc, "reading the reviews failed"))) from None
    options = TrainingOptions(mode=mode)
    options = dataclasses.replace(options, **{k: v for k, v in (("c", c), ("threshold", threshold), ("augment", augment)) if v is not None})
    command = "anonymizer train " + " ".join(shlex.quote(a) for a in sys.argv[2:])
    card = train_model(loaded, out_model, options, cv=cv, pipeline=rule_pipeline(merge_lists(*(x.lists for x in loaded))), command=command)
    if as_json:
        print(json.dumps(card, indent=1, sort_keys=True))
        return
    notes = sum(c["notes"] for c in card["corpora"])
    copies = f", and {card['augmented_tokens']:,} tokens of surrogate copies" if card.get("augmented_tokens") else ""
    patients = sum(c["patients"] for c in card["corpora"])
    features = ", ".join(f"{k} {v:,}" for k, v in card["features"].items())
    out.print(
        f"model written to {out_model} ({card['bytes']:,} bytes, sha256 {card['sha256'][:16]}…)\n"
        f"trained on {notes:,} notes of {patients:,} patients in {len(card['corpora'])} corpus(es): "
        f"{card['tokens']:,} tokens, {card['phi_tokens']:,} of them PHI"
        + copies
        + f"\nfeatures: {features}",
        markup=False,
        highlight=False,
        soft_wrap=True,
    )
    if "cv" in card:
        for table in (
            format_rows(card["cv"]["rows"]),
            format_categories(card["cv"]["categories"]["union"]),
            format_curve(card["cv"]["curve"]),
        ):
            out.print(table, markup=False, highlight=False, soft_wrap=True)
