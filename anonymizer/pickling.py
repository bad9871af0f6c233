"""Cheap pickling for the values that cross between the main process and the workers."""

from __future__ import annotations

import dataclasses
import operator
from typing import TypeVar

C = TypeVar("C", bound=type)


def by_fields(cls: C) -> C:
    """Pickle a frozen dataclass as its constructor's arguments.

    Every note's input (Note, PatientRecord) and output (NoteResult, MergedSpan) is pickled twice
    on its way through a process pool; a frozen slots dataclass is pickled by default through
    per-field ``__getstate__``/``__setstate__`` functions, three times the cost.  Apply above
    ``@dataclass``."""
    names = [f.name for f in dataclasses.fields(cls)]
    values = operator.attrgetter(*names) if len(names) > 1 else lambda self: (getattr(self, names[0]),)  # a tuple either way
    cls.__reduce__ = lambda self: (cls, values(self))  # type: ignore[method-assign]
    return cls
