"""Augmented training notes: copies of a note whose gold PHI is replaced by surrogates of the same
category, so that the classifier learns the contexts PHI appears in rather than the development
notes' own names and places.

Each copy is made by the surrogate replacer (:mod:`anonymizer.surrogates`) with a fixed key and a
per-copy patient key (note id and copy number): a name becomes a name of the same shape and case,
a date a date in the same format, a phone a phone; places keep their words (see ``KEPT``).  The gold offsets are
remapped, and the patient's record gets the same substitutions (its names map to the surrogates
used in the note, its dates move by the same offset), so the record features stay consistent.
:meth:`anonymizer.classifier.training.Dataset.augmented` builds a copy's features as a real
note's, with the rules run on the copy's text.

Copies depend on their own note only, so a cross-validation fold may train on the copies of its
training notes while never seeing its test notes' copies (see
:func:`anonymizer.classifier.crossval.held_out`).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Iterable

import regex

from anonymizer.corpora import GoldNote
from anonymizer.record import PatientRecord
from anonymizer.resources import data_dir
from anonymizer.settings import DetectorsConfig, ReplaceConfig
from anonymizer.spans import MergedSpan
from anonymizer.surrogates import SurrogateReplacer
from anonymizer.surrogates.dates import YEAR_RULES

SECRET = b"anonymizer/augment: fixed, so the same notes give the same copies"
# Places and hospitals keep their words in a copy: surrogate places (from the surrogate module's
# lists) taught the classifier that any capitalised word in a place context is a place, which
# halved LOCATION precision in cross-validation on the tuning part (docs/accuracy.md).
KEPT = frozenset({"LOCATION", "HOSPITAL"})
BARE_YEAR = regex.compile(r"'?(?:\d\d|\d{4})")
RECORD_CATEGORIES = {"names": "PATIENT", "relatives": "RELATIVE", "identifiers": "ID", "phones": "PHONE"}


def surrogate_replacer() -> SurrogateReplacer:
    """The run's surrogate replacer with a fixed key and no leak checks (nothing is released)."""
    # The date pattern only serves the leak detectors, of which there are none here.
    return SurrogateReplacer(SECRET, ReplaceConfig(), data_dir("rules"), regex.compile(r"(?!)"), DetectorsConfig().name_threshold, [])


def _merged(text: str, spans: Iterable[tuple[int, int, str]]) -> list[MergedSpan]:
    """Gold spans sorted, overlapping ones joined (the first one's category stands).  A date of two
    or four digits alone is read as a year ("MI in 92"), as the rule that finds those says."""
    out: list[MergedSpan] = []
    for start, end, category in sorted(spans):
        if out and start < out[-1].end:
            last = out[-1]
            out[-1] = MergedSpan(last.start, max(last.end, end), last.category, ())
        else:
            year = category == "DATE" and BARE_YEAR.fullmatch(text, start, end) is not None
            out.append(MergedSpan(start, end, category, tuple(YEAR_RULES) if year else ()))
    return out


def _replace(replacer: SurrogateReplacer, value: str, category: str, key: PatientRecord) -> str:
    """`value` (all of it PHI of `category`) as its surrogate; kept when there is none."""
    new = replacer.surrogates(value, [MergedSpan(0, len(value), category, ())], key)[0]
    return value if new == f"[{category}]" else new


def surrogate_copy(
    replacer: SurrogateReplacer, note: GoldNote, record: PatientRecord, copy: int
) -> tuple[GoldNote, PatientRecord]:
    """Copy number `copy` (from 1) of a note and its patient's record, PHI replaced by surrogates.

    Deterministic: the replacer's patient key is the note id and the copy number."""
    key = dataclasses.replace(record, patient_id=f"{note.note_id}\x1f{copy}")
    spans = _merged(note.text, note.spans)
    found = replacer.surrogates(note.text, spans, key)
    found = [note.text[s.start : s.end] if s.category in KEPT else v for s, v in zip(spans, found)]
    parts: list[str] = []
    new_spans: list[tuple[int, int, str]] = []
    position = length = 0
    for span, value in zip(spans, found):
        if value == f"[{span.category}]":  # no surrogate: the original stays
            value = note.text[span.start : span.end]
        gap = note.text[position : span.start]
        parts += (gap, value)
        length += len(gap)
        new_spans.append((length, length + len(value), span.category))
        length += len(value)
        position = span.end
    parts.append(note.text[position:])
    days = replacer.shifts(key)[0]
    fields = {name: tuple(_replace(replacer, v, category, key) for v in getattr(record, name))
              for name, category in RECORD_CATEGORIES.items()}
    new_record = dataclasses.replace(record, dates=tuple(_shift(d, days) for d in record.dates), **fields)
    return GoldNote(f"{note.note_id}+{copy}", note.patient_id, "".join(parts), tuple(new_spans)), new_record


def _shift(date: dt.date, days: int) -> dt.date:
    try:
        return date - dt.timedelta(days=days)
    except OverflowError:
        return date + dt.timedelta(days=days)
