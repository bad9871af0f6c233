"""The command line: a thin typer layer over the library; progress on stderr, results on stdout.

Exit statuses: 0 done, 1 findings (audits), 2 usage, configuration or connection error.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from anonymizer.config import ConfigError, load_config
from anonymizer.run import RunSummary, run as run_job
from anonymizer.spans import CATEGORIES

app = typer.Typer(add_completion=False, no_args_is_help=True, help=__doc__)
out = Console()
err = Console(stderr=True)

ConfigOption = typer.Option(None, "--config", "-c", help="Configuration file (default: $ANONYMIZER_CONFIG, then ./anonymizer.toml).")


@app.callback()
def main(verbose: bool = typer.Option(False, "--verbose", "-v", help="Log progress details to stderr.")) -> None:
    """De-identify clinical notes in a database using each patient's structured record."""
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING,
        stream=sys.stderr,
        format="%(levelname)s %(name)s: %(message)s",
    )


def fail(message: str, code: int = 2) -> typer.Exit:
    err.print(f"error: {message}", markup=False, highlight=False)
    return typer.Exit(code)


@app.command()
def run(
    config: Optional[Path] = ConfigOption,
    batch_size: Optional[int] = typer.Option(None, min=1, help="Notes per batch and per target transaction."),
    limit: Optional[int] = typer.Option(None, min=1, help="Stop after this many notes."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Detect and count, write nothing."),
) -> None:
    """Anonymize every note of the source into the target."""
    try:
        cfg = load_config(config)
        with Progress(
            TextColumn("anonymizing"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[rate]} notes/s"),
            TimeElapsedColumn(),
            console=err,
            transient=True,
        ) as bar:
            task = bar.add_task("run", total=limit, rate="-")

            def advance(n: int, total: int) -> None:
                bar.update(task, total=total, advance=n)
                elapsed = bar.tasks[task].elapsed or 0
                bar.update(task, rate=f"{bar.tasks[task].completed / elapsed:,.0f}" if elapsed else "-")

            summary = run_job(cfg, batch_size=batch_size, limit=limit, dry_run=dry_run, progress=advance)
    except ConfigError as exc:
        raise fail(str(exc)) from None
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
    ):
        table.add_row(label, f"{value:,}")
    for category in CATEGORIES:
        if summary.spans[category]:
            table.add_row(f"spans {category}", f"{summary.spans[category]:,}")
    rate = summary.notes / summary.seconds if summary.seconds else 0.0
    table.add_row("seconds", f"{summary.seconds:.1f}")
    table.add_row("notes/s", f"{rate:,.0f}")
    out.print(table)
