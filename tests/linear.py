"""A check that a detector's cost grows linearly with the note, whatever the machine's speed."""

from __future__ import annotations

import time
from typing import Callable

from anonymizer.record import PatientRecord

RECORD = PatientRecord("1")


def grows_linearly(detector: Callable[[str, PatientRecord], object], unit: str) -> bool:
    """Whether the detector takes well under 64 times as long on 1,600 copies of `unit` as on 200
    (8 times the text: linear with room for noise, far from quadratic), each the best of 5 runs."""
    def seconds(text: str) -> float:
        started = time.process_time()
        detector(text, RECORD)
        return time.process_time() - started

    small, large = unit * 200, unit * 1600
    best_small = min(seconds(small) for _ in range(5))
    best_large = min(seconds(large) for _ in range(5))
    return best_large < 8 * best_small * 3
