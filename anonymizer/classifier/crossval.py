"""Cross-validating the classifier: K folds grouped by patient, each fold's model trained on the
other patients only, so no note is scored by a model that saw its patient.

:func:`cross_validate` returns a :class:`CVResult`: out-of-fold token scores with the rules'
detections and the gold labels, from which the rows, the threshold curve and the heuristics'
effect are counted (:mod:`anonymizer.scoring`), as the run-time detector would decide
(:mod:`anonymizer.classifier.model`).  Training (:mod:`anonymizer.classifier.training`) is below
this module; the ``train`` and ``evaluate`` commands, which call it, are above.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from anonymizer.classifier import postprocess
from anonymizer.classifier.model import WEAK, Model, strong_spans, vetoed, weakest_part
from anonymizer.classifier.training import TrainingOptions, fit, gazetteer_features, training_notes
from anonymizer.scoring import CURVE_THRESHOLDS, Counts, Predict, overlap_mask, spans_to_pred


@dataclass
class CVResult:
    """Out-of-fold classifier scores per token, with the rules' detections and the gold labels."""

    folds: int
    threshold: float
    notes: list  # NoteData
    scores: list[np.ndarray]  # per note: classifier decision value per token
    categories: list[list[str]]  # per note: classifier category per token
    rule_pred: list[list[str | None]]  # per note: category per token of the rules that stand alone (None = not flagged)
    fold_of_note: list[int]
    seconds: dict[str, float] = field(default_factory=dict)

    post: dict = field(default_factory=dict)  # the recall heuristics (TrainingOptions.postprocess)
    all_rules: list[list[str | None]] | None = None  # the same for every rule, the weak ones too (row "rules")
    excused: Callable[[str, int, int, str], bool] | None = None  # the rules' context exceptions, as at run time
    _vetoes: dict[tuple[int, int], bool] = field(default_factory=dict, repr=False)  # (note, token) -> vetoed

    def predictions(self, which: str, threshold: float | None = None, post: Mapping | None = None) -> list[list[str | None]]:
        """Per note and token: the category predicted by "rules", "classifier" or "union", else None.

        The classifier's recall heuristics (`post`, default: the trained options') are applied
        exactly as :class:`~anonymizer.classifier.model.SvmDetector` applies them at run time."""
        th = self.threshold if threshold is None else threshold
        post = self.post if post is None else post
        out: list[list[str | None]] = []
        scored: list[list[float]] = []
        for k, data in enumerate(self.notes):
            rules = self.rule_pred[k] if which != "classifier" else [None] * len(data.tokens)
            if which == "rules":
                out.append(list((self.all_rules or self.rule_pred)[k]))
                continue
            flagged = [
                r if r is not None else (c if s > th and not self._vetoed(k, i) else None)
                for i, (r, s, c) in enumerate(zip(rules, self.scores[k], self.categories[k]))
            ]
            additions: dict[int, str] = {}
            if post.get("extend_names"):
                for i, cat in postprocess.extend_names(data.note.text, data.tokens, flagged).items():
                    additions.setdefault(i, cat)
            if post.get("relative_cues"):
                for i, cat in postprocess.relative_cues(data.note.text, data.tokens, flagged).items():
                    additions.setdefault(i, cat)
            if post.get("extend_places"):
                for i, cat in postprocess.extend_places(data.note.text, data.tokens, flagged).items():
                    additions.setdefault(i, cat)
            for i, cat in additions.items():
                flagged[i] = cat
            out.append(flagged)
            scored.append([float("-inf") if r is not None else s for r, s in zip(rules, self.scores[k])])
        if which != "rules" and post.get("propagate") is not None:
            by_patient: dict[str, list[int]] = {}
            for k, data in enumerate(self.notes):
                by_patient.setdefault(data.note.patient_id, []).append(k)
            for ks in by_patient.values():
                if len(ks) < 2:
                    continue
                extra = postprocess.propagate([(self.notes[k].tokens, out[k], scored[k]) for k in ks], float(post["propagate"]))
                for k, add in zip(ks, extra):
                    for i, cat in add.items():
                        out[k][i] = cat
        return out

    def _vetoed(self, k: int, i: int) -> bool:
        """Whether note k's token i stays unflagged whatever its score, as at run time."""
        if (k, i) not in self._vetoes:
            data = self.notes[k]
            self._vetoes[k, i] = vetoed(data.note.text, data.tokens, i, self.categories[k][i], self.excused)
        return self._vetoes[k, i]

    def counts(self, which: str, threshold: float | None = None, post: Mapping | None = None) -> Counts:
        """Counts for "rules", "classifier" or "union" at `threshold` (default: the model's)."""
        total = Counts()
        for data, pred in zip(self.notes, self.predictions(which, threshold, post)):
            starts, ends = data.tokens.starts, data.tokens.ends
            gold = overlap_mask(starts, ends, data.note.spans)
            total.add(data.note, gold, pred, starts, ends)
        return total

    def curve(self, thresholds: Sequence[float] = CURVE_THRESHOLDS) -> list[dict]:
        points = []
        for th in thresholds:
            u = self.counts("union", th)
            c = self.counts("classifier", th)
            points.append({
                "threshold": float(th),
                "union_recall": round(u.recall, 4), "union_precision": round(u.precision, 4),
                "classifier_recall": round(c.recall, 4), "classifier_precision": round(c.precision, 4),
            })
        return points

    def summary(self) -> dict:
        rows = {name: self.counts(name) for name in ("rules", "classifier", "union")}
        rows["union without heuristics"] = self.counts("union", post={})
        return {
            "folds": self.folds,
            "threshold": self.threshold,
            "rows": {name: c.row() for name, c in rows.items()},
            "categories": {name: c.categories() for name, c in rows.items()},
            "curve": self.curve(),
            "seconds": self.seconds,
        }


def rule_predictions(notes: Sequence, rules: Predict | None, confirm: frozenset[str] = frozenset()) -> tuple[list, list]:
    """Per note and token, the rules' category (None: not flagged): of all rules, and of the rules
    that stand without the classifier's confirmation (:func:`~anonymizer.classifier.model.strong_spans`)."""
    every, strong = [], []
    for data in notes:
        spans = rules(data.note.text, data.record) if rules is not None else []
        every.append(spans_to_pred(data.tokens.starts, data.tokens.ends, spans))
        strong.append(spans_to_pred(data.tokens.starts, data.tokens.ends, strong_spans(spans, confirm)))
    return every, strong


def cross_validate(
    dataset, options=None, folds: int = 10, rules: Predict | None = None, excused: Callable[[str, int, int, str], bool] | None = None
) -> CVResult:
    """K-fold cross-validation grouped by patient (scikit-learn's GroupKFold: deterministic).

    `dataset` is a :class:`anonymizer.classifier.training.Dataset`; see :func:`held_out`."""
    from sklearn.model_selection import GroupKFold

    splits = list(GroupKFold(folds).split(np.zeros(len(dataset.notes)), groups=dataset.groups))
    return held_out(dataset, splits, options, rules, excused)


def held_out(
    dataset,
    splits: Sequence[tuple[Sequence[int], Sequence[int]]],
    options=None,
    rules: Predict | None = None,
    excused: Callable[[str, int, int, str], bool] | None = None,
) -> CVResult:
    """Each split's test notes scored by a model fitted on its training notes only.

    Each split trains with :func:`anonymizer.classifier.training.fit` (gazetteers included) and
    scores with the run-time arithmetic of :class:`anonymizer.classifier.model.Model`.  With
    ``options.augment``, a split also trains on the surrogate copies of its training notes (never on
    those of the notes it scores).  The result
    holds the test notes of every split: all notes for cross-validation, the lockbox for one split
    that trains on the tuning part."""
    options = options or TrainingOptions()
    tested = [i for _, test_idx in splits for i in test_idx]
    notes = [dataset.notes[i] for i in tested]
    scores: list = [None] * len(notes)
    categories: list = [None] * len(notes)
    fold_of_note = [0] * len(notes)
    seconds = {"fit": 0.0, "score": 0.0}
    classes = frozenset(options.feature_classes)
    k = 0
    for fold, (train_idx, test_idx) in enumerate(splits):
        t0 = time.perf_counter()
        # with options.augment, the training notes' surrogate copies too; never the test notes'
        model = Model(fit(training_notes(dataset, train_idx, options), options, dataset.lists))
        t1 = time.perf_counter()
        test = [dataset.notes[i] for i in test_idx]
        gaz = gazetteer_features(test, model.gazetteers) if model.gazetteers else None
        for j, data in enumerate(test):
            feats = [
                [f for f in row if _feature_class(f) in classes] + (gaz[j][t] if gaz else [])
                for t, row in enumerate(data.base)
            ]
            values, cats = model.score_rows(feats)
            if data.rule_cats is not None:  # as SvmDetector.analyse: a weak match stands whole or not at all
                values = weakest_part(data.note.text, data.tokens, data.rule_cats, values)
            scores[k] = np.array(values)
            categories[k] = cats
            fold_of_note[k] = fold
            k += 1
        seconds["fit"] += t1 - t0
        seconds["score"] += time.perf_counter() - t1
    if rules is None and all(n.rule_cats is not None for n in notes):  # the rules the dataset was built with
        every = [[c.rstrip(WEAK) if c else None for c in n.rule_cats] for n in notes]
        strong = [[None if c and c.endswith(WEAK) else c for c in n.rule_cats] for n in notes]
    else:
        every, strong = rule_predictions(notes, rules, frozenset(options.confirm))
    return CVResult(len(splits), options.threshold, notes, scores, categories, strong, fold_of_note,
                    {k: round(v, 2) for k, v in seconds.items()}, dict(options.postprocess), every, excused)


def _feature_class(feature: str) -> str:
    return feature.split(":", 1)[0].split("=", 1)[0]
