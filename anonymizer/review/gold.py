"""What reviewed notes say is PHI: the training notes of ``anonymizer train --reviews`` and the
sample of ``anonymizer audit estimate``.

A reviewed note's gold is the run's detections as each reviewer accepted them, less those that
reviewer marked wrong (with the category they gave instead, where they changed it), plus every span
any reviewer marked missed.  With two reviewers the union stands: a detection stops being PHI only
when every reviewer who accepted the note marked it wrong, since a missed name is a breach and an
over-removed word only costs a little data.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from anonymizer.config import Config
from anonymizer.corpora import Corpus, GoldNote
from anonymizer.review.marks import DETECTED, Mark, acceptances, anonymized_again, marks, run_ids, text_changed
from anonymizer.source import Source
from anonymizer.target import Target

log = logging.getLogger(__name__)

Spans = tuple[tuple[int, int, str], ...]


def reviewed_gold(found: Iterable[Mark], reviewers: Iterable[str]) -> tuple[Spans, Spans]:
    """A note's (detections, gold) from its rows in ``review_spans``, for the reviewers who accepted it."""
    found = list(found)
    detected, gold = set(), set()
    for reviewer in set(reviewers):
        own = [m for m in found if m.reviewer == reviewer]
        wrong = [m for m in own if m.verdict == "wrong"]
        changed = {(m.start, m.end): m.category for m in own if m.verdict == "category"}
        for m in own:
            if m.verdict != DETECTED:
                continue
            detected.add((m.start, m.end, m.category))
            if not any(w.start <= m.start and m.end <= w.end for w in wrong):
                gold.add((m.start, m.end, changed.get((m.start, m.end), m.category)))
    gold.update((m.start, m.end, m.category) for m in found if m.verdict == "missed")
    return tuple(sorted(detected)), tuple(sorted(gold))


@dataclass(frozen=True)
class ReviewedNote:
    note_id: str
    patient_id: str
    text: str
    detections: Spans  # the run's spans as reviewed
    gold: Spans  # what the reviewers say is PHI
    sampled: bool  # from a random sample
    reviewers: tuple[str, ...]


@dataclass
class Reviews:
    notes: list[ReviewedNote]
    changed: list[str] = field(default_factory=list)  # reviewed notes whose text changed since: left out
    rerun: list[str] = field(default_factory=list)  # left out of a release estimate: anonymized again since


def reviewed_notes(config: Config, target: Target, release: bool = False, source: Source | None = None) -> Reviews:
    """The notes reviewers accepted, with their gold, texts read through the configured source.

    A note whose source text changed since it was reviewed is left out (its marks point nowhere).
    With `release` (the estimate), only reviews of the notes as released now: of a random sample,
    and not anonymized again since."""
    accepted = acceptances(target)
    ids = sorted(accepted)
    source = source or Source(config)
    notes = source.notes_by_id(ids)
    texts = {note_id: note.text for note_id, note in notes.items()}
    runs = run_ids(target, ids)
    rows = marks(target, ids, verdicts=("missed", "wrong", "category", DETECTED))
    reviews = Reviews([])
    for note_id in ids:
        current = [a for a in accepted[note_id] if not text_changed(a, texts)]
        if not current:
            reviews.changed.append(note_id)
            continue
        if release:
            if not any(a.sampled for a in current):
                continue
            current = [a for a in current if not anonymized_again(a, runs)]
            if not current:
                reviews.rerun.append(note_id)
                continue
        names = tuple(sorted({a.reviewer for a in current}))
        detected, gold = reviewed_gold(rows[note_id], names)
        sampled = any(a.sampled for a in current)
        reviews.notes.append(ReviewedNote(note_id, notes[note_id].patient_id, texts[note_id], detected, gold, sampled, names))
    for what, left in (("edited since their review", reviews.changed), ("anonymized again since their review", reviews.rerun)):
        if left:
            log.warning("%d reviewed note(s) %s left out; review them again", len(left), what)
    return reviews


def reviewed_corpus(config: Config, target: Target, name: str = "reviews") -> Corpus:
    """The reviewed notes as a training corpus: texts, records and lists through the configuration."""
    from anonymizer.worker import load_lists

    source = Source(config)
    reviews = reviewed_notes(config, target, source=source)
    notes = [GoldNote(n.note_id, n.patient_id, n.text, n.gold) for n in reviews.notes]
    records = source.records({n.patient_id for n in notes})
    return Corpus(name, notes, records, load_lists(config, source))


def note_counts(notes: Sequence[ReviewedNote]) -> list[tuple[int, int]]:
    """Per note: (PHI tokens, of them missed by the run): a token is PHI when a gold span overlaps
    it, missed when no detection does (anonymizer.scoring's unit)."""
    from anonymizer.scoring import overlap_mask, tokenize

    counts = []
    for note in notes:
        starts, ends = tokenize(note.text)
        gold = overlap_mask(starts, ends, note.gold)
        found = overlap_mask(starts, ends, note.detections)
        phi = [f for g, f in zip(gold, found) if g is not None]
        counts.append((len(phi), sum(1 for f in phi if f is None)))
    return counts
