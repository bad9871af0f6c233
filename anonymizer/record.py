"""The structured record of one patient, the notes written about them, and what becomes of a note.

These are plain values read from the source database; detectors derive what they need from them
(name tokens, digit strings, parsed dates) once per patient through :func:`per_record`.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from dataclasses import asdict, dataclass
from typing import Callable, Generic, TypeVar

from anonymizer.pickling import by_fields
from anonymizer.spans import MergedSpan

FIELDS: tuple[str, ...] = ("names", "relatives", "identifiers", "phones", "dates", "addresses")


@by_fields
@dataclass(frozen=True, slots=True)
class PatientRecord:
    """One patient's structured fields, each a tuple of the non-empty values found."""

    patient_id: str
    names: tuple[str, ...] = ()
    relatives: tuple[str, ...] = ()
    identifiers: tuple[str, ...] = ()
    phones: tuple[str, ...] = ()
    dates: tuple[dt.date, ...] = ()
    addresses: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        """A one-line error for a field of the wrong type (the API takes records built by hand):
        a name given as a string, not a tuple of them, would be read letter by letter, and a date
        of birth as a string never compared.  The message names the field, never its value."""
        for field in FIELDS:
            values = getattr(self, field)
            if not isinstance(values, tuple):
                raise TypeError(f"PatientRecord.{field} must be a tuple (got {type(values).__name__})")
            kind = dt.date if field == "dates" else str
            wrong = next((type(value).__name__ for value in values if not isinstance(value, kind)), None)
            if wrong is not None:
                raise TypeError(f"PatientRecord.{field} must hold {kind.__module__}.{kind.__name__} values (got {wrong})")

    def digest(self) -> str:
        """A stable hash of the record: kept in bookkeeping to notice changed records, never the values."""
        global _last_digest
        last = _last_digest  # every note's source digest needs it: computed once per patient
        if last[0] is self:
            return last[1]
        payload = {k: [str(v) for v in vals] if isinstance(vals, tuple) else str(vals) for k, vals in asdict(self).items()}
        digest = hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()
        _last_digest = (self, digest)  # one tuple: atomic; holding the record keeps its id unique
        return digest


_last_digest: tuple[PatientRecord | None, str] = (None, "")


# A note whose patient has no row in the patients table still gets every detector that needs no
# record; the pipeline hands it this empty record.
def empty_record(patient_id: str) -> PatientRecord:
    return PatientRecord(patient_id=patient_id)


@by_fields
@dataclass(frozen=True, slots=True)
class Note:
    note_id: str
    patient_id: str
    text: str


@by_fields
@dataclass(frozen=True)
class NoteResult:
    """What the unit of work returns for one note: the anonymized text and its spans, or an error."""

    note_id: str
    patient_id: str
    text: str | None
    spans: tuple[MergedSpan, ...]
    source_digest: str
    error: str | None = None


T = TypeVar("T")


class per_record(Generic[T]):
    """Cache what a detector derives from a record for as long as the same record keeps coming.

    Notes arrive grouped by patient, so a one-slot cache keyed on the record object turns
    per-note work into per-patient work without the detector signature changing.
    """

    def __init__(self, build: Callable[[PatientRecord], T]) -> None:
        self._build = build
        self._record: PatientRecord | None = None
        self._value: T | None = None

    def __call__(self, record: PatientRecord) -> T:
        if record is not self._record:
            self._value = self._build(record)
            self._record = record
        return self._value  # type: ignore[return-value]
