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
from collections.abc import Sequence
from contextvars import ContextVar


class NoteTimeout(Exception):
    """A note spent its time budget; the pipeline records it as a failure row and moves on.

    Built from numbers only, so its message can never quote the note; `safe_message` tells the
    pipeline that it may keep the message.
    """

    def __init__(self, note_length: int, seconds: float) -> None:
        self.safe_message = f"detection exceeded {seconds}s on a note of {note_length} characters"
        super().__init__(self.safe_message)


class NoteBudget:
    """What one note may still spend: `seconds` in all, `left` of it now."""

    __slots__ = ("seconds", "length", "left")

    def __init__(self, seconds: float, length: int) -> None:
        self.seconds = seconds
        self.length = length  # the note's characters, for the message
        self.left = seconds


# (time.monotonic() when the stage must be done, the budget it stands for, the notes' length)
_active: ContextVar[tuple[float, float, int] | None] = ContextVar("note_deadline", default=None)


class spending:  # noqa: N801 - a context manager named for what it does, like contextlib.suppress
    """Run a stage of these notes' work within what they have left together.

    When it succeeds, its time is charged to them in proportion to their length (every stage's
    work is about linear in it), so a note that spent its budget fails its next stage at once.  A
    stage that fails is not charged: the pipeline retries a patient's classifier pass note by
    note, each note then within what it has left.  A `regex` search that timed out (its
    ``timeout=`` was :func:`remaining`) raises NoteTimeout here.  (A class, not a generator: it
    runs a few times per note on the hot path.)
    """

    __slots__ = ("budgets", "start", "deadline", "token")

    def __init__(self, budgets: Sequence[NoteBudget]) -> None:
        self.budgets = budgets

    def __enter__(self) -> None:
        self.start = start = time.monotonic()
        if len(self.budgets) == 1:  # most stages: one note's
            b = self.budgets[0]
            self.deadline = (start + b.left, b.seconds, b.length)
        else:
            budgets = self.budgets
            left = sum(max(b.left, 0.0) for b in budgets)
            self.deadline = (start + left, sum(b.seconds for b in budgets), sum(b.length for b in budgets))
        self.token = _active.set(self.deadline)

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, traceback: object) -> None:
        _active.reset(self.token)
        if kind is None:
            elapsed = time.monotonic() - self.start
            if len(self.budgets) == 1:
                self.budgets[0].left -= elapsed
                return
            weight = sum(b.length + 1 for b in self.budgets)
            for b in self.budgets:
                b.left -= elapsed * (b.length + 1) / weight
        elif issubclass(kind, TimeoutError):
            raise NoteTimeout(self.deadline[2], self.deadline[1]) from None


def remaining() -> float | None:
    """Seconds left in the current stage (None outside one); NoteTimeout when none are."""
    deadline = _active.get()
    if deadline is None:
        return None
    left = deadline[0] - time.monotonic()
    if left <= 0:
        raise NoteTimeout(deadline[2], deadline[1])
    return left


def check() -> None:
    """Raise NoteTimeout if the current stage's deadline has passed."""
    remaining()
