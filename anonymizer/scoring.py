"""Scoring detections against a gold standard, token by token: the arithmetic, and nothing above it.

A token is a run of letters and digits (``[^\\W_]+``, :data:`TOKEN`; the classifier's features
use the same unit).  A token is PHI when a gold span overlaps it and detected when a predicted span
overlaps it; precision, recall and F1 count tokens.  Recall is also given per gold category,
precision per predicted category.  A gold phrase is found when all its tokens are detected
(phrase-level recall); the phrases not found are listed for the operator (they quote the note, so
only the ``evaluate`` command prints them, never a log).

* :func:`score_notes` - score any ``(text, record) -> list[Span]`` callable on gold notes;
* :func:`evaluate` - rules alone, classifier alone and their union for a corpus (the classifier
  is any callable; its ``patient_spans`` and ``combine`` are used when it has them).

This module imports nothing of the classifier: cross-validation
(:mod:`anonymizer.classifier.crossval`) is built on it, the commands
(:mod:`anonymizer.evaluate`, :mod:`anonymizer.classifier.train`) on both.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from anonymizer.corpora import Corpus, GoldNote
from anonymizer.record import PatientRecord, empty_record
from anonymizer.spans import TOKEN, Span

Predict = Callable[[str, PatientRecord], list[Span]]
CURVE_THRESHOLDS = tuple(round(float(t), 2) for t in np.arange(-1.0, 0.01, 0.05)) + (0.2, 0.4)


def tokenize(text: str) -> tuple[list[int], list[int]]:
    """The offsets of the text's tokens: starts, ends."""
    starts, ends = [], []
    for m in TOKEN.finditer(text):
        starts.append(m.start())
        ends.append(m.end())
    return starts, ends


def overlap_mask(starts: Sequence[int], ends: Sequence[int], spans: Iterable[tuple[int, int, str]]) -> list[str | None]:
    """For each token, the category of the first span (in sorted order) overlapping it, else None."""
    out: list[str | None] = [None] * len(starts)
    for start, end, category in sorted(spans):
        i = bisect.bisect_right(ends, start)
        while i < len(starts) and starts[i] < end:
            if out[i] is None:
                out[i] = category
            i += 1
    return out


@dataclass
class Counts:
    """Token and phrase tallies; add notes with :meth:`add`, read figures with :meth:`row`."""

    tp: int = 0
    fp: int = 0
    fn: int = 0
    gold_by_cat: dict[str, int] = field(default_factory=dict)
    found_by_cat: dict[str, int] = field(default_factory=dict)
    pred_by_cat: dict[str, int] = field(default_factory=dict)
    correct_by_cat: dict[str, int] = field(default_factory=dict)
    phrases: int = 0
    phrases_found: int = 0
    phrases_by_cat: dict[str, list[int]] = field(default_factory=dict)
    missed: list[tuple[str, str, str]] = field(default_factory=list)  # (note_id, category, text)
    notes: int = 0

    def add(self, note: GoldNote, gold: Sequence[str | None], pred: Sequence[str | None], starts, ends) -> None:
        self.notes += 1
        for g, p in zip(gold, pred):
            if g is not None:
                self.gold_by_cat[g] = self.gold_by_cat.get(g, 0) + 1
                if p is not None:
                    self.tp += 1
                    self.found_by_cat[g] = self.found_by_cat.get(g, 0) + 1
                else:
                    self.fn += 1
            elif p is not None:
                self.fp += 1
            if p is not None:
                self.pred_by_cat[p] = self.pred_by_cat.get(p, 0) + 1
                if g is not None:
                    self.correct_by_cat[p] = self.correct_by_cat.get(p, 0) + 1
        for start, end, category in note.spans:
            i = bisect.bisect_right(ends, start)
            indices = []
            while i < len(starts) and starts[i] < end:
                indices.append(i)
                i += 1
            if not indices:
                continue
            self.phrases += 1
            tally = self.phrases_by_cat.setdefault(category, [0, 0])
            tally[0] += 1
            if all(pred[k] is not None for k in indices):
                self.phrases_found += 1
                tally[1] += 1
            else:
                self.missed.append((note.note_id, category, note.text[start:end]))

    def merge(self, other: Counts) -> None:
        self.tp += other.tp
        self.fp += other.fp
        self.fn += other.fn
        self.notes += other.notes
        self.phrases += other.phrases
        self.phrases_found += other.phrases_found
        for mine, theirs in (
            (self.gold_by_cat, other.gold_by_cat),
            (self.found_by_cat, other.found_by_cat),
            (self.pred_by_cat, other.pred_by_cat),
            (self.correct_by_cat, other.correct_by_cat),
        ):
            for k, v in theirs.items():
                mine[k] = mine.get(k, 0) + v
        for k, (n, f) in other.phrases_by_cat.items():
            tally = self.phrases_by_cat.setdefault(k, [0, 0])
            tally[0] += n
            tally[1] += f
        self.missed.extend(other.missed)

    @property
    def precision(self) -> float:
        return self.tp / (self.tp + self.fp) if self.tp + self.fp else 0.0

    @property
    def recall(self) -> float:
        return self.tp / (self.tp + self.fn) if self.tp + self.fn else 0.0

    @property
    def f1(self) -> float:
        p, r = self.precision, self.recall
        return 2 * p * r / (p + r) if p + r else 0.0

    @property
    def phrase_recall(self) -> float:
        return self.phrases_found / self.phrases if self.phrases else 0.0

    def row(self) -> dict:
        return {
            "precision": round(self.precision, 4),
            "recall": round(self.recall, 4),
            "f1": round(self.f1, 4),
            "phrase_recall": round(self.phrase_recall, 4),
            "tp": self.tp,
            "fp": self.fp,
            "fn": self.fn,
        }

    def categories(self) -> dict[str, dict]:
        table = {}
        for cat in sorted(set(self.gold_by_cat) | set(self.pred_by_cat)):
            gold = self.gold_by_cat.get(cat, 0)
            pred = self.pred_by_cat.get(cat, 0)
            phr = self.phrases_by_cat.get(cat, [0, 0])
            table[cat] = {
                "gold_tokens": gold,
                "recall": round(self.found_by_cat.get(cat, 0) / gold, 4) if gold else None,
                "phrases": phr[0],
                "phrase_recall": round(phr[1] / phr[0], 4) if phr[0] else None,
                "predicted_tokens": pred,
                "precision": round(self.correct_by_cat.get(cat, 0) / pred, 4) if pred else None,
            }
        return table


def spans_to_pred(starts, ends, spans: Iterable[Span]) -> list[str | None]:
    return overlap_mask(starts, ends, ((s.start, s.end, s.category) for s in spans))


def score_notes(notes: Iterable[GoldNote], records: Mapping[str, PatientRecord], predict: Predict) -> Counts:
    """Score `predict` on every note: token and phrase counts (see :class:`Counts`)."""
    counts = Counts()
    for note in notes:
        record = records.get(note.patient_id) or empty_record(note.patient_id)
        starts, ends = tokenize(note.text)
        gold = overlap_mask(starts, ends, note.spans)
        pred = spans_to_pred(starts, ends, predict(note.text, record))
        counts.add(note, gold, pred, starts, ends)
    return counts


def evaluate(
    corpus: Corpus,
    rules: Predict | None = None,
    classifier: Callable[[str, PatientRecord, list[Span]], list[Span]] | None = None,
) -> dict[str, Counts]:
    """Rows "rules", "classifier" (alone, on every token) and "union" (classifier on what rules left).

    `rules` is e.g. ``Pipeline.rule_spans``; `classifier` an :class:`SvmDetector` (whose
    ``patient_spans`` is used when it has one, so the patient-level heuristics count too).
    """
    rows: dict[str, Counts] = {}
    if rules is not None:
        rows["rules"] = score_notes(corpus.notes, corpus.records, rules)
    if classifier is not None:
        rows["classifier"] = _score_classifier(corpus, classifier, None)
    if rules is not None and classifier is not None:
        rows["union"] = _score_classifier(corpus, classifier, rules)
    return rows


def _score_classifier(corpus: Corpus, classifier, rules: Predict | None) -> Counts:
    counts = Counts()
    by_patient: dict[str, list[GoldNote]] = {}
    for note in corpus.notes:
        by_patient.setdefault(note.patient_id, []).append(note)
    for pid, notes in by_patient.items():
        record = corpus.record(pid)
        rule_spans = [rules(n.text, record) if rules else [] for n in notes]
        if hasattr(classifier, "patient_spans"):
            found = classifier.patient_spans(record, [(n.text, r) for n, r in zip(notes, rule_spans)])
        else:
            found = [classifier(n.text, record, r) for n, r in zip(notes, rule_spans)]
        for note, r, f in zip(notes, rule_spans, found):
            starts, ends = tokenize(note.text)
            spans = classifier.combine(r, f) if hasattr(classifier, "combine") else list(r) + list(f)
            counts.add(note, overlap_mask(starts, ends, note.spans), spans_to_pred(starts, ends, spans), starts, ends)
    return counts



# ------------------------------------------------------------------------------------ reporting


def format_rows(rows: Mapping[str, Counts | dict]) -> str:
    lines = [f"{'':30} {'precision':>9} {'recall':>7} {'F1':>6} {'phrase R':>8} {'TP':>6} {'FP':>6} {'FN':>5}"]
    for name, counts in rows.items():
        r = counts.row() if isinstance(counts, Counts) else counts
        lines.append(
            f"{name:30} {r['precision']:9.4f} {r['recall']:7.4f} {r['f1']:6.4f} {r['phrase_recall']:8.4f} "
            f"{r['tp']:6d} {r['fp']:6d} {r['fn']:5d}"
        )
    return "\n".join(lines)


def format_categories(table: Mapping[str, dict]) -> str:
    lines = [f"{'category':10} {'gold tok':>8} {'recall':>7} {'phrases':>7} {'phr R':>6} {'pred tok':>8} {'precision':>9}"]

    def fmt(v: float | None) -> str:
        return "-" if v is None else f"{v:.3f}"

    for cat, r in table.items():
        lines.append(
            f"{cat:10} {r['gold_tokens']:8d} {fmt(r['recall']):>7} {r['phrases']:7d} {fmt(r['phrase_recall']):>6} "
            f"{r['predicted_tokens']:8d} {fmt(r['precision']):>9}"
        )
    return "\n".join(lines)


def format_curve(points: Sequence[dict]) -> str:
    lines = ["threshold  union R  union P  classifier R  classifier P"]
    for p in points:
        lines.append(
            f"{p['threshold']:9.2f}  {p['union_recall']:7.4f}  {p['union_precision']:7.4f}  "
            f"{p['classifier_recall']:12.4f}  {p['classifier_precision']:12.4f}"
        )
    return "\n".join(lines)
