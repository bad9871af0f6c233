"""A database-to-database run: stream the source, anonymize each patient's notes, write the target.

Everything is checked (configuration, source schema, lists, rules, model) before the target is
touched.  Notes whose text, record and configuration are unchanged since they were written are
skipped, so a run stopped at any point and started again finishes with every note exactly once.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from typing import Callable, Collection, Mapping, Sequence

import sqlalchemy as sa

from anonymizer.config import Config
from anonymizer.parallel import processed_batches, processed_patients
from anonymizer.record import NoteResult, empty_record
from anonymizer.settings import ConfigError
from anonymizer.source import Batch, Source, _typed
from anonymizer.target import Held, Target
from anonymizer.worker import RunSummary, prepare, settle_ids

log = logging.getLogger(__name__)



def _count(summary: RunSummary, batch: Batch, results: list[NoteResult]) -> None:
    summary.notes += len(batch.notes)
    summary.no_record += sum(batch.records[n.patient_id] == empty_record(n.patient_id) for n in batch.notes)
    for r in results:
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
    if target is not None:
        _check_id_lengths(source, target)
    summary = RunSummary()
    started = time.perf_counter()
    if target is not None:
        summary.run_id = target.start_run(kind, pipeline.digest, sorted(patient_ids) if patient_ids else None)
    total = source.count_notes(patient_ids) if progress else 0
    total = min(total, limit) if limit else total
    status = "failed"
    try:
        batches = source.batches(batch_size or config.run.batch_size, limit, patient_ids)
        for batch, results, held in processed_batches(batches, pipeline, target, config, workers):
            settled, skipped = results, []  # a dry run skips nothing
            if target is not None:
                settled, skipped = _settle_batch(summary, target, batch, results, held)
                digests = {pid: batch.records[pid].digest() for pid in {n.patient_id for n in batch.notes}}
                target.write(summary.run_id, settled, digests, skipped)
            summary.skipped += len(skipped)
            _count(summary, batch, settled)
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


def _settle_batch(
    summary: RunSummary, target: Target, batch: Batch, results: list[NoteResult], held: Mapping[str, Held]
) -> tuple[list[NoteResult], list[str]]:
    """The batch's rows with shared note ids settled (:func:`settle_ids`), and the notes it skips.

    A row this run wrote or skipped in an earlier batch and now joined by another source row
    with its id leaves the summary's count it was in: the failure replacing it is counted instead.
    """
    run_id = summary.run_id
    earlier = {k: h.sources() for k, h in held.items() if h.seen_by(run_id)}
    settled, shared = settle_ids(batch.notes, results, earlier, held, target.key)
    for k in shared & earlier.keys():
        h = held[k]
        if h.digest is None:
            summary.failed -= 1
        elif h.run_id == run_id:
            summary.done -= 1
        else:
            summary.skipped -= 1
    written = {r.note_id for r in results}
    skipped = [n.note_id for n in batch.notes if n.note_id not in written and target.key(n.note_id) not in shared]
    return settled, skipped


# PostgreSQL refuses a btree index entry over 2,704 bytes: 16 of them are the entry's own header.
POSTGRESQL_KEY_BYTES = 2688


def _check_id_lengths(source: Source, target: Target) -> None:
    """Before anything is written: every note and patient id of the source fits the target's keys
    (MySQL/MariaDB: 768 characters; PostgreSQL: 2,688 bytes of UTF-8), or the run stops here."""
    if target.engine.dialect.name == "postgresql":
        # Only an id of more than a quarter as many characters can be that many bytes.
        limit, unit, length, over = POSTGRESQL_KEY_BYTES, "bytes", lambda i: len(i.encode()), POSTGRESQL_KEY_BYTES // 4
    else:
        limit = over = target.notes.c.note_id.type.length  # SQLite: TEXT, no limit
        unit, length = "characters", len
    if limit is None:
        return
    for column, key in ((source.note_id, "notes.id"), (source.note_patient, "notes.patient")):
        longest = max((length(i) for i in source.long_ids(column, over)), default=0)
        if longest > limit:
            raise ConfigError(f"{key}: an id of {longest} {unit} is longer than the {limit} the target database can key")


def changed_patients(source: Source, target: Target, chunk: int = 1000) -> list[str]:
    """Patients anonymized before whose record has changed since (by digest), by the keys their notes carry."""
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
    refuse_unknown: bool = False,
) -> RunSummary:
    """Re-run every note of these patients and replace their rows, one transaction per patient.

    With `refuse_unknown`, an id the source knows neither in its notes nor in its patients table
    (a typing error) stops it with a ConfigError before the target is opened: no run is recorded.
    """
    source, pipeline = prepare(config)
    unknown = unknown_patients(source, patient_ids) if refuse_unknown else []
    if unknown:
        raise ConfigError(f"{len(unknown)} of the {len(set(patient_ids))} given patient ids have neither a note nor a record in the source")
    target = Target(config.target.url)
    patients = sorted(set(patient_ids) | set(changed_patients(source, target) if changed else ()))
    summary = RunSummary(run_id=target.start_run("reprocess", pipeline.digest, patients))
    started = time.perf_counter()
    status = "failed"
    try:
        for pid, batch, results in processed_patients(source, patients, pipeline, config, workers):
            results = _settle_patient(target, pid, batch, results)
            target.replace_patient(summary.run_id, pid, results, {p: r.digest() for p, r in batch.records.items()})
            _count(summary, batch, results)
            if progress:
                progress(1, len(patients))
        status = "done"
    except KeyboardInterrupt:
        status = "interrupted"
        raise
    finally:
        summary.seconds = time.perf_counter() - started
        target.finish_run(summary.run_id, status, summary.done, summary.skipped, summary.failed)
    return summary


def unknown_patients(source: Source, patient_ids: Collection[str], chunk: int = 1000) -> list[str]:
    """The ids among these that the source knows neither in its notes nor in its patients table
    (compared by the database, as the run compares them: '007' is patient 7 of an integer column)."""
    ids = sorted(set(patient_ids))
    found: set[str] = set()
    with source.engine.connect() as conn:
        for start in range(0, len(ids), chunk):
            part = ids[start : start + chunk]
            for column in (source.note_patient, source.patient_id):
                typed = _typed(column, part)
                if typed:
                    values = {str(v) for (v,) in conn.execute(sa.select(column).distinct().where(column.in_(typed)))}
                    found.update(pid for pid, value in zip(part, _typed_each(column, part)) if value in values)
        # Ids the database folds (another spelling, a case-insensitive collation): asked one by one.
        for pid in (p for p in ids if p not in found):
            for column in (source.note_patient, source.patient_id):
                typed = _typed(column, [pid])
                if typed and conn.execute(sa.select(sa.func.count()).where(column == typed[0])).scalar_one():
                    found.add(pid)
                    break
    return [pid for pid in ids if pid not in found]


def _typed_each(column: sa.Column, ids: Sequence[str]) -> list[str | None]:
    """Each id as its column's value would print (None: no such value)."""
    return [str(t[0]) if (t := _typed(column, [pid])) else None for pid in ids]


def _settle_patient(target: Target, pid: str, batch: Batch, results: list[NoteResult]) -> list[NoteResult]:
    """One patient's rows with shared note ids settled: an id the target holds under another
    patient, or as a DuplicateNoteId failure, stays one failure row (the next run recounts it)."""
    held = target.digests(n.note_id for n in batch.notes)
    own = {target.key(p) for p in (pid, *batch.records)}
    sizes = Counter(target.key(n.note_id) for n in batch.notes)
    earlier = {}
    for k, h in held.items():
        if h.sources() > 1:
            earlier[k] = max(0, h.sources() - sizes[k])
        elif target.key(h.patient_id) not in own:
            earlier[k] = 1
    return settle_ids(batch.notes, results, earlier, held, target.key)[0]
