"""Review marks and finished reviews, stored in the target as soon as a reviewer makes them.

A mark (table ``review_spans``) is a span of a note's source text with a verdict: ``missed`` (PHI
the run left, of `category`), ``wrong`` (a detection that is not PHI) or ``category`` (a detection
of another category, `category`).  A reviewer who has looked at the whole note accepts it (table
``review_notes``): its marks are then complete, and the note counts as reviewed.  Each reviewer's
marks and acceptances are their own, so two reviewers of one note are both kept.

Nothing here stores or logs text: offsets, categories, names, times, run ids and a digest of the
text that was reviewed (to notice a note edited or anonymized again since).  Accepting a note also
keeps the run's detections as the reviewer saw them (verdict ``detected``), so that what was
reviewed stays known when a later run (with a retrained model, say) changes the note's spans.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import random
from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import sqlalchemy as sa

from anonymizer.settings import ConfigError, read_text_file
from anonymizer.spans import CATEGORIES
from anonymizer.target import Target

VERDICTS = ("missed", "wrong", "category")  # a reviewer's marks
DETECTED = "detected"  # the run's detections as a reviewer accepted them (a snapshot: a later run changes nothing)
REVIEWER_LENGTH = 100  # review_spans.reviewer, review_notes.reviewer
CHUNK = 1000  # ids per IN (...) clause


@dataclass(frozen=True)
class Mark:
    review_id: int
    note_id: str
    start: int
    end: int
    category: str
    verdict: str
    reviewer: str | None
    marked_at: dt.datetime


@dataclass(frozen=True)
class Acceptance:
    """A reviewer's finished review of a note: the run whose output it reviewed, the text's digest."""

    note_id: str
    reviewer: str
    reviewed_at: dt.datetime
    run_id: int
    text_digest: str
    sampled: bool


def now() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)


def text_digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def check_reviewer(name: str) -> str:
    """A reviewer's name as stored: stripped, 1 to 100 printable characters, else ConfigError."""
    name = " ".join(str(name).split())
    if not name or len(name) > REVIEWER_LENGTH or not name.isprintable():
        raise ConfigError(f"reviewer: a name of 1 to {REVIEWER_LENGTH} printable characters, not {name[:20]!r}")
    return name


def check_span(start: int, end: int, category: str, verdict: str, text_length: int) -> None:
    if verdict not in VERDICTS:
        raise ConfigError(f"verdict: one of {', '.join(VERDICTS)}, not {verdict!r}")
    if category not in CATEGORIES:
        raise ConfigError(f"category: one of {', '.join(CATEGORIES)}, not {category!r}")
    if not 0 <= start < end <= text_length:
        raise ConfigError(f"span {start}-{end} is not inside the note (0-{text_length})")


def chunks(ids: Collection[str]) -> Iterator[list[str]]:
    ordered = sorted(set(ids))
    for first in range(0, len(ordered), CHUNK):
        yield ordered[first : first + CHUNK]


def add_mark(
    target: Target, note_id: str, start: int, end: int, category: str, verdict: str, reviewer: str, text_length: int
) -> tuple[int, bool]:
    """Store one mark now; its id, and whether it is new (a mark the reviewer already made is not
    stored twice).

    A reviewer's ``wrong`` or ``category`` verdict on a span replaces their earlier one on the same
    span (a change of mind, not a second opinion)."""
    check_span(start, end, category, verdict, text_length)
    reviewer = check_reviewer(reviewer)
    r = target.review
    same_span = sa.and_(r.c.note_id == note_id, r.c.start == start, r.c.end == end, r.c.reviewer == reviewer)
    with target.engine.begin() as conn:
        existing = conn.execute(
            sa.select(r.c.review_id).where(same_span, r.c.verdict == verdict, r.c.category == category)
        ).scalar()
        if existing is not None:
            return int(existing), False
        if verdict != "missed":
            conn.execute(r.delete().where(same_span, r.c.verdict.in_(("wrong", "category"))))
        row = dict(note_id=note_id, start=start, end=end, category=category, verdict=verdict, reviewer=reviewer, marked_at=now())
        return int(conn.execute(r.insert().values(**row)).inserted_primary_key[0]), True


def undo(target: Target, note_id: str, reviewer: str, review_id: int | None = None) -> Mark | None:
    """Remove the reviewer's mark `review_id` on the note, or their latest one; None when there is none."""
    r = target.review
    mine = sa.and_(r.c.note_id == note_id, r.c.reviewer == check_reviewer(reviewer), r.c.verdict.in_(VERDICTS))
    with target.engine.begin() as conn:
        if review_id is None:
            review_id = conn.execute(sa.select(sa.func.max(r.c.review_id)).where(mine)).scalar()
        row = conn.execute(sa.select(r).where(mine, r.c.review_id == review_id)).mappings().first()
        if row is None:
            return None
        conn.execute(r.delete().where(r.c.review_id == review_id))
    return Mark(**row)


def marks(target: Target, note_ids: Collection[str], verdicts: Sequence[str] = VERDICTS) -> dict[str, list[Mark]]:
    """Every reviewer's marks on these notes (or, with ``verdicts=(DETECTED,)``, the detections
    they accepted), oldest first."""
    r = target.review
    found: dict[str, list[Mark]] = {note_id: [] for note_id in note_ids}
    with target.engine.connect() as conn:
        for ids in chunks(note_ids):
            query = sa.select(r).where(r.c.note_id.in_(ids), r.c.verdict.in_(verdicts))
            for row in conn.execute(query.order_by(r.c.review_id)).mappings():
                found.setdefault(row["note_id"], []).append(Mark(**row))
    return found


def accept(target: Target, note_id: str, reviewer: str, text: str, sampled: bool) -> Acceptance:
    """Record that the reviewer finished the note as the target holds it now, with its detections
    (replacing their earlier acceptance of it)."""
    reviewer = check_reviewer(reviewer)
    n, a, r, s = target.notes, target.review_notes, target.review, target.spans
    with target.engine.begin() as conn:
        run_id = conn.execute(sa.select(n.c.run_id).where(n.c.note_id == note_id)).scalar()
        if run_id is None:
            raise ConfigError(f"note {note_id} is not among the target's anonymized notes")
        row = dict(note_id=note_id, reviewer=reviewer, reviewed_at=now(), run_id=int(run_id), text_digest=text_digest(text),
                   sampled=sampled)
        conn.execute(a.delete().where(a.c.note_id == note_id, a.c.reviewer == reviewer))
        conn.execute(a.insert().values(**row))
        conn.execute(r.delete().where(r.c.note_id == note_id, r.c.reviewer == reviewer, r.c.verdict == DETECTED))
        snapshot = dict(note_id=note_id, verdict=DETECTED, reviewer=reviewer, marked_at=row["reviewed_at"])
        seen = [
            dict(snapshot, start=start, end=end, category=category)
            for start, end, category in conn.execute(sa.select(s.c.start, s.c.end, s.c.category).where(s.c.note_id == note_id))
        ]
        if seen:
            conn.execute(r.insert(), seen)
    return Acceptance(**row)


def acceptances(target: Target, note_ids: Collection[str] | None = None) -> dict[str, list[Acceptance]]:
    """The finished reviews of these notes (of every note with one, when None), by note."""
    a = target.review_notes
    columns = [a.c.note_id, a.c.reviewer, a.c.reviewed_at, a.c.run_id, a.c.text_digest, a.c.sampled]
    found: dict[str, list[Acceptance]] = {}
    with target.engine.connect() as conn:
        query = sa.select(*columns)
        queries = [query] if note_ids is None else [query.where(a.c.note_id.in_(ids)) for ids in chunks(note_ids)]
        for query in queries:
            for row in conn.execute(query.order_by(a.c.review_id)).mappings():
                found.setdefault(row["note_id"], []).append(Acceptance(**{**row, "sampled": bool(row["sampled"])}))
    return found


def detections(target: Target, note_ids: Collection[str]) -> dict[str, list[tuple[int, int, str, str]]]:
    """The run's spans of these notes: (start, end, category, detectors), in text order."""
    s = target.spans
    found: dict[str, list[tuple[int, int, str, str]]] = {note_id: [] for note_id in note_ids}
    with target.engine.connect() as conn:
        for ids in chunks(note_ids):
            query = sa.select(s.c.note_id, s.c.start, s.c.end, s.c.category, s.c.detectors).where(s.c.note_id.in_(ids))
            for note_id, start, end, category, detectors in conn.execute(query.order_by(s.c.note_id, s.c.start)):
                found.setdefault(note_id, []).append((start, end, category, detectors))
    return found


def run_ids(target: Target, note_ids: Collection[str]) -> dict[str, int]:
    """The run that wrote each of these anonymized notes (failed and unknown notes absent)."""
    n = target.notes
    with target.engine.connect() as conn:
        return {
            note_id: run_id
            for ids in chunks(note_ids)
            for note_id, run_id in conn.execute(sa.select(n.c.note_id, n.c.run_id).where(n.c.note_id.in_(ids)))
        }


# ------------------------------------------------------------------------------------------ queue


@dataclass(frozen=True)
class Queue:
    """The notes to review, in order; `sampled`: a random sample (its reviews count for the estimate)."""

    note_ids: tuple[str, ...]
    sampled: bool
    description: str


def sample_ids(conn: sa.Connection, target: Target, n: int, seed: int) -> list[str]:
    """The ids of a reproducible random sample of `n` anonymized notes (all of them when fewer),
    as `anonymizer audit sample` and `anonymizer review --sample` take it."""
    ids = sorted(conn.execute(sa.select(target.notes.c.note_id)).scalars())
    return sorted(random.Random(seed).sample(ids, min(n, len(ids))))


def sample_queue(target: Target, n: int, seed: int) -> Queue:
    """The random sample `anonymizer audit sample --n N --seed S` takes: the same notes."""
    with target.engine.connect() as conn:
        ids = sample_ids(conn, target, n, seed)
    return Queue(tuple(ids), True, f"a random sample of {len(ids)} notes (seed {seed})")


def file_queue(target: Target, path: Path) -> Queue:
    """The note ids of a file, one a line, each of them an anonymized note of the target."""
    ids = list(dict.fromkeys(line.strip() for line in read_text_file(path, "--notes").splitlines() if line.strip()))
    if not ids:
        raise ConfigError(f"--notes: {path} holds no note id")
    unknown = [i for i in ids if i not in run_ids(target, ids)]
    if unknown:
        raise ConfigError(f"--notes: {len(unknown)} id(s) of {path} are not anonymized notes of the target, the first {unknown[0]!r}")
    return Queue(tuple(ids), False, f"{len(ids)} notes chosen in {path.name}")


def resumed_queue(target: Target) -> Queue:
    """The notes reviewed or marked so far: where an earlier review left off."""
    r, a = target.review, target.review_notes
    with target.engine.connect() as conn:
        ids = sorted({note_id for table in (r, a) for note_id in conn.execute(sa.select(table.c.note_id).distinct()).scalars()})
        sampled = conn.execute(sa.select(sa.func.min(a.c.sampled))).scalar()
    if not ids:
        raise ConfigError("no review in the target yet: give --sample N --seed S or --notes FILE")
    return Queue(tuple(ids), bool(sampled), f"the {len(ids)} notes reviewed or marked so far")


@dataclass
class QueueRow:
    """A note of the queue as the queue page lists it."""

    note_id: str
    detections: int = 0
    categories: set[str] = field(default_factory=set)
    detectors: set[str] = field(default_factory=set)  # detector names ("record", "svm"), not rules
    marks: int = 0
    reviewers: list[str] = field(default_factory=list)  # who accepted it

    @property
    def state(self) -> str:
        if self.reviewers:
            return "reviewed by " + ", ".join(self.reviewers)
        return "in progress" if self.marks else "not started"


def queue_rows(target: Target, queue: Queue) -> list[QueueRow]:
    rows = {note_id: QueueRow(note_id) for note_id in queue.note_ids}
    for note_id, spans in detections(target, queue.note_ids).items():
        row = rows[note_id]
        row.detections = len(spans)
        row.categories = {category for _, _, category, _ in spans}
        row.detectors = {source.split(":", 1)[0] for *_, sources in spans for source in sources.split(",")}
    for note_id, found in marks(target, queue.note_ids).items():
        rows[note_id].marks = len(found)
    for note_id, found in acceptances(target, queue.note_ids).items():
        rows[note_id].reviewers = [a.reviewer for a in found]
    return [rows[note_id] for note_id in queue.note_ids]


def filter_rows(rows: Sequence[QueueRow], category: str = "", detector: str = "", undetected: bool = False) -> list[QueueRow]:
    """The rows with a detection of `category`, by `detector`, or (`undetected`) with none."""
    return [
        r for r in rows
        if (not category or category in r.categories) and (not detector or detector in r.detectors) and (not undetected or not r.detections)
    ]


def text_changed(acceptance: Acceptance, texts: dict[str, str]) -> bool:
    """Whether the note's source text is no longer the text that was reviewed (its offsets are void)."""
    text = texts.get(acceptance.note_id)
    return text is None or text_digest(text) != acceptance.text_digest


def anonymized_again(acceptance: Acceptance, runs: dict[str, int]) -> bool:
    """Whether a later run rewrote the note: the review no longer describes what is released."""
    return runs.get(acceptance.note_id) != acceptance.run_id
