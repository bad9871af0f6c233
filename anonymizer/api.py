"""The Python API: one object that anonymizes a text, or a patient's notes, exactly as a run does.

    >>> from anonymizer import Deidentifier, PatientRecord
    >>> deid = Deidentifier.default(lists={"DOCTOR": ["Zhou"]})            # no database needed
    >>> deid.deidentify("Seen by dr Zhou.").text
    'Seen by dr [DOCTOR].'

:meth:`Deidentifier.from_config` builds what ``anonymizer run`` builds from a configuration
(its lists, rules, model, replacement mode); :meth:`Deidentifier.default` the shipped rules and
model with lists given in Python.  Both build the pipeline once: reuse the object.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Iterable, Mapping

from anonymizer.config import Config
from anonymizer.pipeline import Pipeline, anonymize_patient, build_pipeline
from anonymizer.record import Note, NoteResult, PatientRecord, empty_record
from anonymizer.registry import DetectorRegistry
from anonymizer.settings import ClassifierConfig, DetectorsConfig, ReplaceConfig
from anonymizer.spans import MergedSpan


class DeidentificationFailed(Exception):
    """A text could not be anonymized (e.g. ``NoteTimeout``); `reason` never quotes the text."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class Deidentified:
    """An anonymized text and its spans: offsets into `original`, the category, and every
    detector and rule that fired (``sources``, e.g. ``("record:name", "svm")``)."""

    text: str
    spans: tuple[MergedSpan, ...]
    original: str

    def explain(self) -> str:
        """One line a span: offsets, category, what it covered (**PHI**) and what found it."""
        return "\n".join(
            f"{s.start}-{s.end} {s.category} {self.original[s.start:s.end]!r}: {', '.join(s.sources)}" for s in self.spans
        )


class Deidentifier:
    """Detect and replace PHI in notes, given each patient's structured record (or none)."""

    def __init__(self, pipeline: Pipeline) -> None:
        self.pipeline = pipeline

    @classmethod
    def from_config(cls, config: Config | str | os.PathLike[str], *, registry: DetectorRegistry | None = None) -> Deidentifier:
        """As ``anonymizer run`` would anonymize with this configuration (a TOML path or a Config).

        Its ``[[lists]]`` are read from their files and from the source database, whose tables
        are checked against the configuration; nothing is written."""
        from anonymizer.config import load_config
        from anonymizer.worker import load

        source, pipeline = load(config if isinstance(config, Config) else load_config(config), registry)
        source.engine.dispose()
        return cls(pipeline)

    @classmethod
    def default(
        cls,
        lists: Mapping[str, Iterable[str]] | None = None,
        *,
        detectors: DetectorsConfig | None = None,
        classifier: ClassifierConfig | None = None,
        replace: ReplaceConfig | None = None,
        registry: DetectorRegistry | None = None,
    ) -> Deidentifier:
        """The shipped rules and model, no database: `lists` maps a category ("DOCTOR",
        "HOSPITAL", "LOCATION", ...) to its known entries; the other settings default as in a
        configuration file that leaves them out."""
        return cls(
            build_pipeline(
                detectors or DetectorsConfig(),
                {category: list(entries) for category, entries in (lists or {}).items()},
                classifier or ClassifierConfig(),
                replace=replace,
                registry=registry,
            )
        )

    @property
    def digest(self) -> str:
        """Identifies the configuration, rules, lists and model (what a run stores per note)."""
        return self.pipeline.digest

    def deidentify(self, text: str, record: PatientRecord | None = None) -> Deidentified:
        """Anonymize one text, of the patient whose `record` is given (or of no known patient).

        Raises :class:`DeidentificationFailed` where a run would write a ``failures`` row."""
        record = empty_record("") if record is None else record
        (result,) = anonymize_patient(record, [Note("", record.patient_id, text)], self.pipeline)
        if result.error is not None:
            raise DeidentificationFailed(result.error)
        return Deidentified(result.text, result.spans, text)  # type: ignore[arg-type]

    def anonymize_patient(self, record: PatientRecord, notes: Iterable[Note | str]) -> list[NoteResult]:
        """Anonymize one patient's notes together, as a run does (the classifier sees them all).

        A note given as a string gets the id of its position ("1", "2", ...).  A note that fails
        comes back with `error` set and no text, never raising."""
        todo = [note if isinstance(note, Note) else Note(str(i), record.patient_id, note) for i, note in enumerate(notes, 1)]
        strangers = {note.patient_id for note in todo} - {record.patient_id}
        if strangers:
            raise ValueError(f"notes of patient {sorted(strangers)[0]!r} given with the record of {record.patient_id!r}")
        return anonymize_patient(record, todo, self.pipeline)
