"""Detectors: each takes a note's text and its patient's record and returns spans.

Every detector is built once per run from the rules and the configuration by its factory in the
catalogue (:data:`anonymizer.registry.DETECTORS`, whose entry names it: ``name`` is what its spans
are explained, counted and disabled by), then called for every note; anything it derives from a
record it caches with :class:`anonymizer.record.per_record`.
"""

from __future__ import annotations

from typing import Protocol

from anonymizer.record import PatientRecord
from anonymizer.spans import Span


class Detector(Protocol):
    name: str

    def __call__(self, text: str, record: PatientRecord) -> list[Span]: ...
