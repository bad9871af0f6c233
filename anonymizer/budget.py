"""The time budget of a note: every detection stage and the replacement share one allowance.

A hostile or unlucky note (a catastrophic backtrack, a megabyte of dates) must end as a failure
row, never hang the run.  :func:`spending` opens a deadline for a stage of some notes' work; the
code of the stages reads it through :func:`remaining` (the ``timeout=`` of a `regex` search) and
:func:`check` (at stage boundaries and every so often in a loop that scales with the note), which
raise :class:`NoteTimeout` once it has passed.  Outside :func:`spending` there is no deadline:
both return at once, so detectors called on their own (tests, audits) behave as before.

The deadline lives in a context variable: a pipeline runs one note at a time per process (the
run's workers are processes), and a thread that starts its own stage gets its own.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass


class NoteTimeout(Exception):
    """A note spent its time budget; the pipeline records it as a failure row and moves on.

    Built from numbers only, so its message can never quote the note; `safe_message` tells the
    pipeline that it may keep the message.
    """

    def __init__(self, note_length: int, seconds: float) -> None:
        self.safe_message = f"detection exceeded {seconds}s on a note of {note_length} characters"
        super().__init__(self.safe_message)


@dataclass(slots=True)
class NoteBudget:
    """What one note may still spend: `seconds` in all, `left` of it now."""

    seconds: float
    length: int  # the note's characters, for the message
    left: float = 0.0

    def __post_init__(self) -> None:
        self.left = self.seconds


@dataclass(frozen=True, slots=True)
class _Deadline:
    at: float  # time.monotonic() when the stage must be done
    seconds: float  # the budget it stands for, for the message
    length: int


_active: ContextVar[_Deadline | None] = ContextVar("note_deadline", default=None)


@contextmanager
def spending(budgets: Sequence[NoteBudget]) -> Iterator[None]:
    """Run a stage of these notes' work within what they have left together.

    When it succeeds, its time is charged to them in proportion to their length (every stage's
    work is about linear in it), so a note that spent its budget fails its next stage at once.  A
    stage that fails is not charged: the pipeline retries a patient's classifier pass note by
    note, each note then within what it has left.  A `regex` search that timed out (its
    ``timeout=`` was :func:`remaining`) raises NoteTimeout here.
    """
    start = time.monotonic()
    deadline = _Deadline(start + sum(max(b.left, 0.0) for b in budgets), sum(b.seconds for b in budgets), sum(b.length for b in budgets))
    token = _active.set(deadline)
    try:
        yield
    except TimeoutError:
        raise NoteTimeout(deadline.length, deadline.seconds) from None
    finally:
        _active.reset(token)
    elapsed = time.monotonic() - start
    weight = sum(b.length + 1 for b in budgets)
    for b in budgets:
        b.left -= elapsed * (b.length + 1) / weight


def remaining() -> float | None:
    """Seconds left in the current stage (None outside one); NoteTimeout when none are."""
    deadline = _active.get()
    if deadline is None:
        return None
    left = deadline.at - time.monotonic()
    if left <= 0:
        raise NoteTimeout(deadline.length, deadline.seconds)
    return left


def check() -> None:
    """Raise NoteTimeout if the current stage's deadline has passed."""
    remaining()
