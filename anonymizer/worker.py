"""The unit of work of a run, with what it needs and nothing above it: the pipeline built from the
configuration (:func:`prepare`), a batch anonymized patient by patient (:func:`process_batch`), a
batch's rows sharing a note id settled (:func:`settle_ids`), and the run's tally (:class:`RunSummary`).

:mod:`anonymizer.run` (one process) and :mod:`anonymizer.parallel` (its pool's workers) both call
these; neither is imported here, so the imports go one way: ``run -> parallel -> worker``.
"""

from __future__ import annotations

import gc
import itertools
import logging
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping, Sequence

from anonymizer.config import Config
from anonymizer.detectors.lists import load_list_file
from anonymizer.pipeline import Pipeline, anonymize_patient, build_pipeline
from anonymizer.record import Note, NoteResult
from anonymizer.registry import DetectorRegistry
from anonymizer.settings import ConfigError
from anonymizer.source import Batch, Source
from anonymizer.target import DUPLICATE_REASON, Held

log = logging.getLogger("anonymizer.run")  # the run's own lines, as before the worker had a module

# A note leaves about a hundred container objects alive until its batch is written: at Python's
# default (700, 10, 10) the collector ran every few notes, about 3 % of a run's CPU.  (50_000, 20,
# 20) saved a little more but let the main process's peak memory grow with the source (159 MiB at
# 100,000 notes, 179 at 200,000); at (10_000, 10, 10) it stays flat (152, 155): docs/performance.md.
GC_THRESHOLD = (10_000, 10, 10)


@dataclass
class RunSummary:
    run_id: int | None = None
    notes: int = 0  # source rows read; done + skipped + failed are the target's rows (rows sharing an id: one)
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


def load(config: Config, registry: DetectorRegistry | None = None) -> tuple[Source, Pipeline]:
    """Validate the source against the configuration and build the pipeline, writing nothing."""
    source = Source(config)
    lists = load_lists(config, source)
    return source, build_pipeline(
        config.detectors, lists, config.classifier, replace=config.replace, registry=registry, extra_rules=config.rules.extra
    )


def prepare(config: Config) -> tuple[Source, Pipeline]:
    """:func:`load`, then the process's collector settled (:func:`settle_gc`): a run's start."""
    source, pipeline = load(config)
    settle_gc()
    return source, pipeline


def settle_gc() -> None:
    """Keep the loaded rules, lists and model out of every later collection (they live as long as
    the process), and collect the notes' short-lived objects less often (GC_THRESHOLD)."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLD)


def process_batch(batch: Batch, pipeline: Pipeline, skip: Callable[[str, str], bool]) -> list[NoteResult]:
    """Anonymize a batch patient by patient; `skip(note_id, digest)` says a note is already done (no result)."""
    results: list[NoteResult] = []
    for patient_id, group in itertools.groupby(batch.notes, key=lambda n: n.patient_id):
        record = batch.records[patient_id]
        todo, digests = [], []
        for note in group:
            digest = pipeline.source_digest(note.text, record)
            if not skip(note.note_id, digest):
                todo.append(note)
                digests.append(digest)
        results.extend(anonymize_patient(record, todo, pipeline, digests))
    return results


def settle_ids(
    notes: Sequence[Note], results: list[NoteResult], earlier: Mapping[str, int], held: Mapping[str, Held], key: Callable[[str], str]
) -> tuple[list[NoteResult], set[str]]:
    """One row per note id as the target keys it: the source rows sharing one (in this batch, or
    `earlier[key]` rows the target holds) become one DuplicateNoteId failure, never an overwrite.

    The failure is named by the first of those rows: the one `held` under the key, or else the
    batch's first.  Returns the results to write and the keys that became such a failure.
    """
    rows = Counter(key(n.note_id) for n in notes)
    for k, n in earlier.items():
        rows[k] += n
    shared = {k for k, n in rows.items() if n > 1}
    if not shared:
        return results, shared
    settled = [r for r in results if key(r.note_id) not in shared]
    first = {k: (held[k].note_id, held[k].patient_id) for k in shared if earlier.get(k) and k in held}
    for note in notes:
        first.setdefault(key(note.note_id), (note.note_id, note.patient_id))
    for k in shared:
        note_id, patient_id = first[k]
        log.warning("note %s: %d source rows share this note id", note_id, rows[k])
        settled.append(NoteResult(note_id, patient_id, None, (), "", DUPLICATE_REASON.format(rows[k])))
    return settled, shared
