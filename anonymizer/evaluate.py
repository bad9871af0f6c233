"""Scoring detections against a gold standard, token by token, and cross-validating the classifier.

A token is a run of letters and digits (``[^\\W_]+``).  A token is PHI when a gold span overlaps
it and detected when a predicted span overlaps it; precision, recall and F1 count tokens.  Recall
is also given per gold category, precision per predicted category.  A gold phrase is found when all
its tokens are detected (phrase-level recall); the phrases not found are listed for the operator
(they quote the note, so only the ``evaluate`` command prints them, never a log).

Entry points:

* :func:`score_notes` - score any ``(text, record) -> list[Span]`` callable on gold notes;
* :func:`evaluate` - rules alone, classifier alone and their union for a corpus;
* :func:`cross_validate` - K folds grouped by patient: each fold's model is trained on the other
  patients only, so no note is scored by a model that saw its patient.
"""

from __future__ import annotations

import bisect
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from anonymizer.corpora import Corpus, GoldNote
from anonymizer.record import PatientRecord
from anonymizer.spans import Span

Predict = Callable[[str, PatientRecord], list[Span]]
CURVE_THRESHOLDS = tuple(round(float(t), 2) for t in np.arange(-1.0, 0.01, 0.05)) + (0.2, 0.4)


def tokenize(text: str) -> tuple[list[int], list[int]]:
    from anonymizer.classifier.features import TOKEN

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
    from anonymizer.record import empty_record

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


def classifier_cost(corpus: Corpus, detector, rules: Predict | None = None, limit: int | None = None) -> dict:
    """CPU milliseconds per note (process time, so other load on the machine does not count) for
    the classifier's feature extraction and for the whole classifier (features + scoring +
    heuristics), after warm-up of the per-word cache on the same notes, as in a long run."""
    from anonymizer.classifier.features import Tokens

    notes = corpus.notes[:limit] if limit else corpus.notes
    prepared = [(n.text, corpus.record(n.patient_id), rules(n.text, corpus.record(n.patient_id)) if rules else []) for n in notes]
    for text, record, spans in prepared:  # warm-up
        detector(text, record, spans)
    t0 = time.process_time()
    for text, record, _ in prepared:
        detector.extractor.slots(text, Tokens.of(text), record)
    t1 = time.process_time()
    for text, record, spans in prepared:
        detector(text, record, spans)
    t2 = time.process_time()
    n = max(len(prepared), 1)
    return {
        "notes": len(prepared),
        "features_ms_per_note": round(1000 * (t1 - t0) / n, 3),
        "classifier_ms_per_note": round(1000 * (t2 - t1) / n, 3),
        "prediction_ms_per_note": round(1000 * max((t2 - t1) - (t1 - t0), 0.0) / n, 3),
    }


def run_evaluation(corpus: Corpus, pipeline=None, cv: int = 0, options=None, timing: bool = True) -> dict:
    """What ``anonymizer evaluate`` reports: rows, per-category tables, missed phrases, and with
    ``cv`` > 1 the cross-validated rows and threshold curve (the model is retrained per fold with
    `options`, default :class:`~anonymizer.classifier.train.TrainingOptions`).

    `pipeline` is an :class:`anonymizer.pipeline.Pipeline` (its rule detectors and classifier)."""
    rules = pipeline.rule_spans if pipeline is not None else None
    classifier = getattr(pipeline, "classifier", None)
    report: dict = {"corpus": corpus.name, "notes": len(corpus.notes), "patients": len({n.patient_id for n in corpus.notes})}
    if cv and cv > 1:
        from anonymizer.classifier.train import TrainingOptions, build_dataset

        options = options or TrainingOptions()
        dataset = build_dataset([corpus], options.feature_classes, rules, options.confirm)
        result = cross_validate(dataset, options, folds=cv, rules=rules, excused=pipeline.excused if pipeline is not None else None)
        summary = result.summary()
        report.update({"cv": cv, "threshold": summary["threshold"], "rows": summary["rows"],
                       "categories": summary["categories"], "curve": summary["curve"]})
        if rules is not None:
            # the recall heuristics one by one, on the union at the model's threshold
            one_by_one = {"none": {}, **{k: {k: v} for k, v in options.postprocess.items() if v is not None}, "all (as shipped)": None}
            report["heuristics"] = {name: result.counts("union", post=post).row() for name, post in one_by_one.items()}
        report["missed"] = result.counts("union" if rules else "classifier").missed
        return report
    rows = evaluate(corpus, rules, classifier)
    report["rows"] = {name: c.row() for name, c in rows.items()}
    report["categories"] = {name: c.categories() for name, c in rows.items()}
    last = rows.get("union") or rows.get("classifier") or rows.get("rules")
    report["missed"] = last.missed if last else []
    if timing and classifier is not None:
        report["cost"] = classifier_cost(corpus, classifier, rules, limit=300)
    return report


def format_report(report: Mapping, missed: bool = True) -> str:
    """The report as text for the terminal (missed phrases quote the notes: operator's eyes only)."""
    head = f"{report['corpus']}: {report['notes']} notes, {report['patients']} patients"
    if report.get("cv"):
        head += f"; {report['cv']}-fold cross-validation grouped by patient, threshold {report['threshold']}"
    parts = [head, "", format_rows(report["rows"])]
    for name, table in report["categories"].items():
        parts += ["", f"{name}:", format_categories(table)]
    if report.get("heuristics"):
        parts += ["", "union with the recall heuristics one by one:", format_rows(report["heuristics"])]
    if report.get("curve"):
        parts += ["", format_curve(report["curve"])]
    if report.get("cost"):
        parts += ["", "classifier cost: " + ", ".join(f"{k} {v}" for k, v in report["cost"].items())]
    if missed and report.get("missed"):
        parts += ["", f"missed phrases ({len(report['missed'])}):"]
        parts += [f"  {nid}\t{cat}\t{text!r}" for nid, cat, text in report["missed"]]
    return "\n".join(parts)


# ------------------------------------------------------------------------------ cross-validation


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
        from anonymizer.classifier import postprocess

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
            from anonymizer.classifier.model import vetoed

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
    from anonymizer.classifier.model import strong_spans

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

    `dataset` is a :class:`anonymizer.classifier.train.Dataset`.  Each fold trains with
    :func:`anonymizer.classifier.train.fit` on the other folds' patients (gazetteers included) and
    scores its own notes with the run-time arithmetic of :class:`anonymizer.classifier.model.Model`.
    """
    from sklearn.model_selection import GroupKFold

    from anonymizer.classifier.model import WEAK, Model, weakest_part
    from anonymizer.classifier.train import TrainingOptions, fit, gazetteer_features

    options = options or TrainingOptions()
    notes = dataset.notes
    groups = [n.note.patient_id for n in notes]
    scores: list = [None] * len(notes)
    categories: list = [None] * len(notes)
    fold_of_note = [0] * len(notes)
    seconds = {"fit": 0.0, "score": 0.0}
    classes = frozenset(options.feature_classes)
    for fold, (train_idx, test_idx) in enumerate(GroupKFold(folds).split(np.zeros(len(notes)), groups=groups)):
        t0 = time.perf_counter()
        model = Model(fit([notes[i] for i in train_idx], options, dataset.lists))
        t1 = time.perf_counter()
        test = [notes[i] for i in test_idx]
        gaz = gazetteer_features(test, model.gazetteers) if model.gazetteers else None
        for j, i in enumerate(test_idx):
            feats = [
                [f for f in row if _feature_class(f) in classes] + (gaz[j][t] if gaz else [])
                for t, row in enumerate(notes[i].base)
            ]
            values, cats = model.score_rows(feats)
            if notes[i].rule_cats is not None:  # as SvmDetector.analyse: a weak match stands whole or not at all
                values = weakest_part(notes[i].note.text, notes[i].tokens, notes[i].rule_cats, values)
            scores[i] = np.array(values)
            categories[i] = cats
            fold_of_note[i] = fold
        seconds["fit"] += t1 - t0
        seconds["score"] += time.perf_counter() - t1
    if rules is None and all(n.rule_cats is not None for n in notes):  # the rules the dataset was built with
        every = [[c.rstrip(WEAK) if c else None for c in n.rule_cats] for n in notes]
        strong = [[None if c and c.endswith(WEAK) else c for c in n.rule_cats] for n in notes]
    else:
        every, strong = rule_predictions(notes, rules, frozenset(options.confirm))
    return CVResult(folds, options.threshold, notes, scores, categories, strong, fold_of_note,
                    {k: round(v, 2) for k, v in seconds.items()}, dict(options.postprocess), every, excused)


def _feature_class(feature: str) -> str:
    return feature.split(":", 1)[0].split("=", 1)[0]


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
    fmt = lambda v: "-" if v is None else f"{v:.3f}"
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
