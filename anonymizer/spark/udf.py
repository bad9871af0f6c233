"""What runs in Spark's Python workers: the run's pipeline, built once per worker process, and a
partition of notes (sorted by patient) anonymized batch by batch with the single-machine unit of
work (:func:`anonymizer.worker.process_batch`, hence :func:`anonymizer.pipeline.anonymize_patient`).

A worker gets plain values only (:class:`WorkerSpec`: settings, the lists' entries, the driver's
pipeline digest), inside the function Spark ships to it; PySpark broadcasts that function itself
once it is larger than 1 MiB.  The pipeline is built from them on the worker's first task and kept
for its later tasks (Spark reuses its Python workers), so rules, lists and model are loaded once per
worker process, never per row or batch; no connection is ever pickled.
"""

from __future__ import annotations

import itertools
from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Mapping, Sequence

import pandas as pd

from anonymizer.pipeline import Pipeline, build_pipeline
from anonymizer.record import FIELDS, Note, NoteResult, empty_record
from anonymizer.settings import ClassifierConfig, DetectorsConfig, ReplaceConfig
from anonymizer.source import Batch, DBAPIError, _record, _text, database_error
from anonymizer.spans import MergedSpan
from anonymizer.target import Target, storable
from anonymizer.worker import process_batch, settle_gc

# One row per source note (or per note id that several source rows share: `sources` > 1).
RESULT_COLUMNS = {
    "note_id": "string",
    "patient_id": "string",
    "status": "string",  # DONE, FAILED or SKIPPED (unchanged since the target's row was written)
    "text": "string",  # DONE: the anonymized text
    "source_digest": "string",
    "reason": "string",  # FAILED: why
    "spans": "array<struct<start: int, end: int, category: string, detectors: string>>",  # DONE
    "record_digest": "string",
    "no_record": "boolean",  # the patient has no row in the patients table
    "sources": "int",
}
RESULT_SCHEMA = ", ".join(f"{name} {kind}" for name, kind in RESULT_COLUMNS.items())
DONE, FAILED, SKIPPED = "done", "failed", "skipped"
# Counts of results for the run's summary (anonymizer.spark.job): "notes" (source rows),
# "status:done" (and failed, skipped), "no_record", "category:DATE" (spans) ...
TALLY_SCHEMA = "what string, count long"


@dataclass(frozen=True)
class WorkerSpec:
    """What a Python worker builds its pipeline from, read once on the driver."""

    detectors: DetectorsConfig
    classifier: ClassifierConfig
    replace: ReplaceConfig
    lists: Mapping[str, Sequence[str]]  # category -> entries, from the lists' files and tables
    extra_rules: tuple[str, ...]  # folders of the hospital's own rules (reachable from every worker)
    digest: str  # the driver's pipeline digest: a worker that builds another one refuses to run
    batch_size: int  # notes per call of the unit of work, and per target transaction
    record_fields: Mapping[str, Sequence[int]]  # record field -> positions of its columns in a patient row


_pipelines: dict[str, Pipeline] = {}  # by digest: the worker's own, built on its first task


def worker_pipeline(spec: WorkerSpec) -> Pipeline:
    """This worker's pipeline for `spec`, built on first use and checked against the driver's."""
    pipeline = _pipelines.get(spec.digest)
    if pipeline is None:
        pipeline = build_pipeline(spec.detectors, spec.lists, spec.classifier, replace=spec.replace, extra_rules=spec.extra_rules)
        if pipeline.digest != spec.digest:
            # Another version of the package, or other rules, model or detectors on this worker.
            raise RuntimeError("the Spark worker's pipeline differs from the driver's (package version, rules, model or detectors)")
        settle_gc()
        _pipelines[spec.digest] = pipeline
    return pipeline


def anonymize_partition(
    spec: WorkerSpec, url: str | None = None, run_id: int | None = None
) -> Callable[[Iterator[pd.DataFrame]], Iterator[pd.DataFrame]]:
    """The function of ``mapInPandas`` over notes sorted by patient, each patient's row (its record
    rows, `record`, and the source digests the target holds for its notes, `held`) before its notes.

    It returns the results (RESULT_SCHEMA); with a SQL target's `url`, it writes each batch there
    instead, in one transaction (as :func:`write_partition`), and returns their counts (TALLY_SCHEMA):
    the results then never travel back through the JVM."""

    def run(frames: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        pipeline = worker_pipeline(spec)
        target = worker_target(url) if url else None
        for rows in patient_batches(frames, spec.batch_size):
            results = _anonymize_rows(rows, pipeline, spec.record_fields)
            if target is None:
                yield results
            else:
                _write_rows(target, run_id, results)
                yield _tally(results)

    return run


def patient_batches(frames: Iterator[pd.DataFrame], size: int) -> Iterator[list[Any]]:
    """Rows in batches of at least `size` (the last one aside) that never split a patient's notes
    (Arrow hands the partition over in chunks that may)."""
    pending: list[Any] = []
    for frame in frames:
        pending.extend(frame.itertuples(index=False))
        if len(pending) < size:
            continue
        last = pending[-1].patient_id
        cut = len(pending)
        while cut and pending[cut - 1].patient_id == last:
            cut -= 1
        if cut:
            yield pending[:cut]
            pending = pending[cut:]
    if pending:
        yield pending


def _anonymize_rows(rows: list[Any], pipeline: Pipeline, fields: Mapping[str, Sequence[int]]) -> pd.DataFrame:
    """One batch: each patient's row (record rows, held digests) first, then its notes."""
    notes, records, held, without = [], {}, {}, set()
    for patient_id, group in itertools.groupby(rows, key=lambda r: r.patient_id):
        first = next(group)
        header = first if first.note_id is None else None  # a patient's row has no note id
        record = None if header is None else header.record
        records[patient_id] = record_of(patient_id, record, fields)
        if record is None or len(record) == 0:
            without.add(patient_id)
        if header is not None and header.held:
            held.update(header.held)
        notes.extend(Note(r.note_id, patient_id, _text(r.text)) for r in (group if header is not None else [first, *group]))
    results = {r.note_id: r for r in process_batch(Batch(notes, records), pipeline, lambda note_id, digest: held.get(note_id) == digest)}
    out = defaultdict(list)
    for note in notes:
        result = results.get(note.note_id)
        status = SKIPPED if result is None else DONE if result.error is None else FAILED
        out["note_id"].append(note.note_id)
        out["patient_id"].append(note.patient_id)
        out["status"].append(status)
        out["text"].append(storable(result.text) if status == DONE else None)
        out["source_digest"].append(held[note.note_id] if result is None else result.source_digest)
        out["reason"].append(result.error[:255] if status == FAILED else None)
        out["spans"].append([dict(start=s.start, end=s.end, category=s.category, detectors=",".join(s.sources)[:255])
                             for s in result.spans] if status == DONE else None)
        out["record_digest"].append(records[note.patient_id].digest())
        out["no_record"].append(note.patient_id in without)
        out["sources"].append(1)
    return pd.DataFrame(out, columns=list(RESULT_COLUMNS))


def record_of(patient_id: str, rows: Sequence[Mapping[str, Any]] | None, fields: Mapping[str, Sequence[int]]):
    """The record from the patient's rows (columns ``c0``, ``c1``, ... in `fields`' positions), as
    the source reader merges them: every row's values count."""
    if rows is None or len(rows) == 0:
        return empty_record(patient_id)
    values: dict[str, list[Any]] = defaultdict(list)
    for row in rows:
        for field in FIELDS:
            values[field].extend(row[f"c{i}"] for i in fields.get(field, ()))
    return _record(patient_id, values)


# --- the SQL target's writer ------------------------------------------------------------------

_targets: dict[str, Target] = {}  # by URL: the worker's own connection pool to the target


def worker_target(url: str) -> Target:
    """This worker's target, opened on first use (the driver created and migrated it).

    A module-level function: the functions Spark ships are pickled with copies of the globals they
    name, so a cache they held themselves would start empty in every task."""
    target = _targets.get(url)
    if target is None:
        target = _targets[url] = Target(url, create=False)
    return target


def write_partition(url: str, run_id: int, batch_size: int) -> Callable[[Iterator[pd.DataFrame]], Iterator[pd.DataFrame]]:
    """The function of ``mapInPandas`` that writes results (RESULT_SCHEMA, e.g. the failure rows of
    note ids that several source rows share) into a SQL target.

    Each batch is one transaction of :meth:`anonymizer.target.Target.write`, which replaces the
    rows of its notes: a task that Spark retries, or a rerun after a kill, writes the same rows again
    instead of adding to them.  Returns the written results' counts (TALLY_SCHEMA)."""

    def run(frames: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        target = worker_target(url)
        for frame in frames:
            for start in range(0, len(frame), batch_size):
                _write_rows(target, run_id, frame.iloc[start : start + batch_size])
            yield _tally(frame)

    return run


def tally(frames: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
    """The function of ``mapInPandas`` that counts results (TALLY_SCHEMA)."""
    for frame in frames:
        yield _tally(frame)


def _tally(frame: pd.DataFrame) -> pd.DataFrame:
    counts = Counter({"notes": int(frame["sources"].sum()), "no_record": int(frame["no_record"].sum())})
    counts.update(f"status:{status}" for status in frame["status"])
    counts.update(f"category:{s['category']}" for spans in frame["spans"] if spans is not None for s in spans)
    return pd.DataFrame({"what": list(counts), "count": list(counts.values())})


def _write_rows(target: Target, run_id: int, frame: pd.DataFrame) -> None:
    results, skipped, digests = [], [], {}
    for r in frame.itertuples(index=False):
        if r.record_digest is not None:
            digests[r.patient_id] = r.record_digest
        if r.status == SKIPPED:
            skipped.append(r.note_id)
            continue
        spans = () if r.spans is None else tuple(
            MergedSpan(s["start"], s["end"], s["category"], tuple(s["detectors"].split(","))) for s in r.spans
        )
        results.append(NoteResult(r.note_id, r.patient_id, r.text, spans, r.source_digest or "", r.reason))
    try:
        target.write(run_id, results, digests, skipped)
    except DBAPIError as exc:  # one line without data: the driver's message would quote a row
        raise database_error(exc, "writing the target failed") from None
