"""A database-to-database run: stream the source, anonymize each patient's notes, write the target.

Everything is checked (configuration, source schema, lists, rules, model) before the target is
touched.  Notes whose text, record and configuration are unchanged since they were written are
skipped, so a run stopped at any point and started again finishes with every note exactly once.
"""

from __future__ import annotations

import gc
import itertools
import logging
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Collection

from anonymizer.config import Config, ConfigError
from anonymizer.detectors.lists import load_list_file
from anonymizer.pipeline import NoteResult, Pipeline, anonymize_patient, build_pipeline
from anonymizer.parallel import processed_batches, processed_patients
from anonymizer.record import empty_record
from anonymizer.source import Batch, Source
from anonymizer.target import Target

log = logging.getLogger(__name__)

# A note leaves about a hundred container objects alive until its batch is written: at Python's
# default (700, 10, 10) the collector ran every few notes, about 3 % of a run's CPU.  (50_000, 20,
# 20) saved a little more but let the main process's peak memory grow with the source (159 MiB at
# 100,000 notes, 179 at 200,000); at (10_000, 10, 10) it stays flat (152, 155): docs/performance.md.
GC_THRESHOLD = (10_000, 10, 10)


@dataclass
class RunSummary:
    run_id: int | None = None
    notes: int = 0
    done: int = 0
    skipped: int = 0
    failed: int = 0
    no_record: int = 0  # notes read whose patient has no record (only detectors that need none ran)
    spans: Counter[str] = field(default_factory=Counter)
    seconds: float = 0.0


def load_lists(config: Config, source: Source) -> dict[str, list[str]]:
    """Every configured list's entries by category, from source tables and files."""
    lists: dict[str, list[str]] = {}
    for i, item in enumerate(config.lists):
        if item.file and not Path(item.file).is_file():
            raise ConfigError(f"lists[{i}].file: file not found: {item.file}")
        entries = load_list_file(Path(item.file)) if item.file else source.list_entries(item, i)
        lists.setdefault(item.category, []).extend(entries)
    return lists


def prepare(config: Config) -> tuple[Source, Pipeline]:
    """Validate the source against the configuration and build the pipeline, writing nothing."""
    source = Source(config)
    pipeline = build_pipeline(config.detectors, load_lists(config, source), config.classifier, replace=config.replace)
    _settle_gc()
    return source, pipeline


def _settle_gc() -> None:
    """Keep the loaded rules, lists and model out of every later collection (they live as long as
    the process), and collect the notes' short-lived objects less often (GC_THRESHOLD)."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLD)


def process_batch(batch: Batch, pipeline: Pipeline, skip: Callable[[str, str], bool]) -> tuple[list[NoteResult], int]:
    """Anonymize a batch patient by patient; `skip(note_id, digest)` says a note is already done."""
    results: list[NoteResult] = []
    skipped = 0
    for patient_id, group in itertools.groupby(batch.notes, key=lambda n: n.patient_id):
        record = batch.records[patient_id]
        todo, digests = [], []
        for note in group:
            digest = pipeline.source_digest(note.text, record)
            if skip(note.note_id, digest):
                skipped += 1
            else:
                todo.append(note)
                digests.append(digest)
        results.extend(anonymize_patient(record, todo, pipeline, digests))
    return results, skipped


def _count(summary: RunSummary, results: list[NoteResult]) -> None:
    for r in results:
        summary.notes += 1
        if r.error is None:
            summary.done += 1
            summary.spans.update(s.category for s in r.spans)
        else:
            summary.failed += 1


def run(
    config: Config,
    *,
    batch_size: int | None = None,
    limit: int | None = None,
    dry_run: bool = False,
    patient_ids: Collection[str] | None = None,
    kind: str = "run",
    progress: Callable[[int, int], None] | None = None,
    workers: int = 1,
) -> RunSummary:
    """Anonymize the configured source into the target (or only count, with `dry_run`).

    With `workers` > 1 the unit of work runs in a process pool (:mod:`anonymizer.parallel`);
    this process still reads and writes everything, in the same order, with the same output.
    """
    source, pipeline = prepare(config)
    target = None if dry_run else Target(config.target.url)
    summary = RunSummary()
    started = time.perf_counter()
    if target is not None:
        summary.run_id = target.start_run(kind, pipeline.digest, sorted(patient_ids) if patient_ids else None)
    total = source.count_notes(patient_ids) if progress else 0
    total = min(total, limit) if limit else total
    status = "failed"
    try:
        batches = source.batches(batch_size or config.run.batch_size, limit, patient_ids)
        for batch, results, skipped in processed_batches(batches, pipeline, target, config, workers):
            if target is not None:
                digests = {pid: batch.records[pid].digest() for pid in {n.patient_id for n in batch.notes}}
                target.write(summary.run_id, results, digests)
            summary.skipped += skipped
            summary.notes += skipped
            summary.no_record += sum(batch.records[n.patient_id] == empty_record(n.patient_id) for n in batch.notes)
            _count(summary, results)
            if progress:
                progress(len(batch.notes), total)
        status = "done"
    except KeyboardInterrupt:
        status = "interrupted"
        raise
    finally:
        summary.seconds = time.perf_counter() - started
        if target is not None:
            target.finish_run(summary.run_id, status, summary.done, summary.skipped, summary.failed)
    return summary


def changed_patients(source: Source, target: Target, chunk: int = 1000) -> list[str]:
    """Patients anonymized before whose record has changed since (by digest)."""
    known = target.record_digests()
    changed = []
    ids = [pid for pid in source.patient_ids() if pid in known]
    for start in range(0, len(ids), chunk):
        for pid, record in source.records(ids[start : start + chunk]).items():
            if record.digest() != known[pid]:
                changed.append(pid)
    return sorted(changed)


def reprocess(
    config: Config,
    patient_ids: Collection[str] = (),
    *,
    changed: bool = False,
    progress: Callable[[int, int], None] | None = None,
    workers: int = 1,
) -> RunSummary:
    """Re-run every note of these patients and replace their rows, one transaction per patient."""
    source, pipeline = prepare(config)
    target = Target(config.target.url)
    patients = sorted(set(patient_ids) | set(changed_patients(source, target) if changed else ()))
    summary = RunSummary(run_id=target.start_run("reprocess", pipeline.digest, patients))
    started = time.perf_counter()
    status = "failed"
    try:
        for pid, record, notes, results in processed_patients(source, patients, pipeline, config, workers):
            target.replace_patient(summary.run_id, pid, results, record.digest())
            summary.no_record += len(notes) if record == empty_record(pid) else 0
            _count(summary, results)
            if progress:
                progress(1, len(patients))
        status = "done"
    finally:
        summary.seconds = time.perf_counter() - started
        target.finish_run(summary.run_id, status, summary.done, summary.skipped, summary.failed)
    return summary
