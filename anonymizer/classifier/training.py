"""Training the local-context classifier, deterministically, from annotated corpora.

    model = fit(build_dataset([load_corpus(path)]).notes, TrainingOptions())

(:func:`anonymizer.classifier.train.train` does that and writes the file with its card.)

Every token of every note is one example (label: the category of the gold span overlapping it, or
"O").  The features (see :mod:`anonymizer.classifier.features`) go through scikit-learn's
``DictVectorizer`` into ``LinearSVC`` models with a fixed ``random_state``; the fitted weights are
written as plain data (gzipped JSON, see :mod:`anonymizer.classifier.model`), never as a pickle.

Two heads are trained: ``phi`` (binary: PHI or not; its decision value is thresholded) and
``category`` (one-vs-rest over the PHI categories, trained on the PHI tokens only; its argmax
names a detected token's category).  ``mode="multiclass"`` instead trains one one-vs-rest head over
"O" and the categories, as Stat De-id does; docs/classifier.md compares the two.

Gazetteers of clinicians, places and hospitals are learned from the training annotations and
shipped with the model.  So that the model does not learn to trust them blindly, the training
notes' gazetteer features are cross-fitted: each training patient's notes see only the gazetteers
learned from the other training patients (5 folds grouped by patient).

With ``augment=k``, each training note is also trained on as k copies whose gold PHI is replaced by
surrogates of the same category (:mod:`anonymizer.classifier.augment`; docs/classifier.md
measures it).
"""

from __future__ import annotations

import gzip
import json
import logging
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from sklearn.feature_extraction import DictVectorizer
from sklearn.model_selection import GroupKFold
from sklearn.svm import LinearSVC

from anonymizer.classifier.augment import surrogate_copy, surrogate_replacer
from anonymizer.classifier.features import (
    FEATURE_CLASSES,
    TOKEN,
    FeatureExtractor,
    Tokens,
)
from anonymizer.classifier.model import rule_categories
from anonymizer.classifier.policy import load_policy
from anonymizer.corpora import Corpus, GoldNote, merge_lists
from anonymizer.record import PatientRecord

log = logging.getLogger(__name__)

FORMAT = "anonymizer-svm/1"
GAZETTEER_CATEGORIES = ("DOCTOR", "LOCATION", "HOSPITAL", "NAME")
DEFAULT_C = 0.2
# The highest-recall threshold at which the union's precision stays >= 0.85 in 10-fold cross-validation on
# the PhysioNet tuning part, with DEFAULT_AUGMENT copies, the highest of them where several reach that
# recall: the rule that did best on patients it did not choose on (benchmarks/threshold_rules.py,
# docs/accuracy.md); the lockbox played no part.
DEFAULT_THRESHOLD = -0.65
DEFAULT_AUGMENT = 1
GAZ_INNER_FOLDS = 5



@dataclass
class TrainingOptions:
    c: float = DEFAULT_C
    mode: str = "multiclass"  # or "binary" (docs/classifier.md compares them)
    feature_classes: tuple[str, ...] = FEATURE_CLASSES
    threshold: float = DEFAULT_THRESHOLD
    min_count: int = 1  # features seen fewer times are dropped before fitting
    gazetteers: bool = True
    max_iter: int = 5000
    remainder_only: bool = False  # train on the tokens the rules left only (needs rule_cats)
    phi_weight: float = 1.0  # class weight of the PHI classes ("O" has 1)
    score: str = "max"  # multiclass: "max" (best PHI class) or "margin" (best PHI class minus "O")
    augment: int = DEFAULT_AUGMENT  # surrogate copies of each training note trained on too (anonymizer.classifier.augment)
    augment_weight: float = 1.0  # sample weight of a copy's tokens (an annotated note's have 1)
    # Run-time policy (rules/classifier.toml), not written into the model: the recall heuristics
    # that cross-validation applies as the run does, and the rules the classifier must confirm,
    # whose spans the "rules" features mark weak ("DATE?") as at run time.
    postprocess: dict = field(default_factory=lambda: dict(load_policy().heuristics))
    confirm: tuple[str, ...] = field(default_factory=lambda: tuple(sorted(load_policy().confirm)))

    def as_dict(self) -> dict:
        return {
            "c": self.c,
            "mode": self.mode,
            "feature_classes": list(self.feature_classes),
            "threshold": self.threshold,
            "min_count": self.min_count,
            "gazetteers": self.gazetteers,
            "phi_weight": self.phi_weight,
            "remainder_only": self.remainder_only,
            "score": self.score,
            "augment": self.augment,
            "augment_weight": self.augment_weight,
        }


@dataclass
class NoteData:
    note: GoldNote
    record: PatientRecord
    tokens: Tokens
    labels: list[str]
    base: list[list[str]]  # features without the gazetteer class
    rule_cats: list[str | None] | None = None  # per token: the rules' category (None: not flagged)
    copy: int = 0  # 0: the annotated note itself; k: its k-th surrogate copy (anonymizer.classifier.augment)


@dataclass
class Dataset:
    notes: list[NoteData]
    lists: dict[str, list[str]]
    corpus_names: list[str] = field(default_factory=list)
    feature_classes: tuple[str, ...] = FEATURE_CLASSES
    rules: Callable | None = None  # what the "rules" features were built from (augmented copies need it too)
    confirm: frozenset[str] = frozenset()
    copies: dict[int, list[list[NoteData]]] = field(default_factory=dict, repr=False)  # k -> per note, its k copies

    def augmented(self, k: int) -> list[list[NoteData]]:
        """Per note, its first `k` surrogate copies (made once per dataset, for every note: a copy
        depends on its own note only, so which of them a fold trains on is the caller's choice)."""
        if k < 1:
            return [[] for _ in self.notes]
        if k not in self.copies:
            more = max(self.copies, default=0)
            if more > k:
                return [c[:k] for c in self.copies[more]]
            self.copies = {k: augmented_notes(self.notes, k, self.lists, self.feature_classes, self.rules, self.confirm)}
        return self.copies[k]

    @property
    def groups(self) -> list[str]:
        return [n.note.patient_id for n in self.notes]


def label_tokens(tokens: Tokens, spans: Iterable[tuple[int, int, str]]) -> list[str]:
    """Each token's gold category ("O" when no gold span overlaps it)."""
    labels = ["O"] * len(tokens)
    import bisect

    for start, end, category in sorted(spans):
        i = bisect.bisect_right(tokens.ends, start)  # first token ending after the span's start
        while i < len(tokens) and tokens.starts[i] < end:
            labels[i] = category
            i += 1
    return labels


def build_dataset(
    corpora: Sequence[Corpus], feature_classes: Iterable[str] = FEATURE_CLASSES, rules=None, confirm: Iterable[str] | None = None
) -> Dataset:
    """Tokens, labels and base features of every note of the corpora (lists of all corpora merged).

    `rules` (``(text, record) -> list[Span]``) gives the "rules" feature class its input, the
    spans of the `confirm` rules marked weak, as at run time (default: rules/classifier.toml's)."""
    confirm = load_policy().confirm if confirm is None else frozenset(confirm)
    feature_classes = tuple(feature_classes)
    lists = merge_lists(*(c.lists for c in corpora))
    classes = [c for c in feature_classes if c != "gaz"]
    extractor = FeatureExtractor(lists, classes=classes)
    notes = []
    for corpus in corpora:
        prefix = f"{corpus.name}:" if len(corpora) > 1 else ""
        for note in corpus.notes:
            record = corpus.record(note.patient_id)
            if prefix:
                note = GoldNote(note.note_id, prefix + note.patient_id, note.text, note.spans)
            tokens = Tokens.of(note.text)
            rule_cats = rule_categories(tokens, rules(note.text, record), confirm) if rules is not None else None
            tokens, feats = extractor.features(note.text, record, tokens, rule_cats)
            notes.append(NoteData(note, record, tokens, label_tokens(tokens, note.spans), feats, rule_cats))
    return Dataset(notes, lists, [c.name for c in corpora], tuple(feature_classes), rules, frozenset(confirm))


def augmented_notes(
    notes: Sequence[NoteData],
    copies: int,
    lists: Mapping[str, Sequence[str]],
    feature_classes: Iterable[str] = FEATURE_CLASSES,
    rules: Callable | None = None,
    confirm: Iterable[str] = (),
) -> list[list[NoteData]]:
    """For each note, its `copies` surrogate copies (:mod:`anonymizer.classifier.augment`) with
    tokens, labels and base features built as :func:`build_dataset` builds a note's.

    `rules` and `confirm` are those the notes were built with (the "rules" feature class)."""
    if copies < 1:
        return [[] for _ in notes]
    replacer = surrogate_replacer()
    confirm = frozenset(confirm)
    extractor = FeatureExtractor(lists, classes=[c for c in feature_classes if c != "gaz"])
    out: list[list[NoteData]] = []
    for data in notes:
        made = []
        for copy in range(1, copies + 1):
            note, record = surrogate_copy(replacer, data.note, data.record, copy)
            tokens = Tokens.of(note.text)
            rule_cats = rule_categories(tokens, rules(note.text, record), confirm) if rules is not None else None
            tokens, feats = extractor.features(note.text, record, tokens, rule_cats)
            made.append(NoteData(note, record, tokens, label_tokens(tokens, note.spans), feats, rule_cats, copy=copy))
        out.append(made)
    log.info("%d notes augmented with %d surrogate copies each", len(notes), copies)
    return out


def learn_gazetteers(notes: Iterable[NoteData]) -> dict[str, list[str]]:
    """Words annotated as clinicians, places and hospitals in these notes (lower-cased, >= 2 letters)."""
    found: dict[str, set[str]] = {}
    for data in notes:
        for start, end, category in data.note.spans:
            if category not in GAZETTEER_CATEGORIES:
                continue
            for word in TOKEN.findall(data.note.text[start:end]):
                if len(word) >= 2 and word.isalpha():
                    found.setdefault(category, set()).add(word.lower())
    return {c: sorted(v) for c, v in sorted(found.items())}


def gazetteer_features(notes: Sequence[NoteData], gazetteers: Mapping[str, Sequence[str]]) -> list[list[list[str]]]:
    extractor = FeatureExtractor(gazetteers=gazetteers, classes=("gaz",))
    return [extractor.features(n.note.text, None, n.tokens)[1] for n in notes]


def cross_fitted_gazetteers(notes: Sequence[NoteData], folds: int = GAZ_INNER_FOLDS) -> list[list[list[str]]]:
    """Gazetteer features of training notes, each from the gazetteers of the other patients
    (learned from their annotated notes, not from surrogate copies)."""
    out: list[list[list[str]]] = [[] for _ in notes]
    groups = [n.note.patient_id for n in notes]
    k = min(folds, len(set(groups)))
    if k < 2:
        return [[[] for _ in n.tokens.words] for n in notes]
    for fit_idx, apply_idx in GroupKFold(k).split(np.zeros(len(notes)), groups=groups):
        gaz = learn_gazetteers(notes[i] for i in fit_idx if not notes[i].copy)
        feats = gazetteer_features([notes[i] for i in apply_idx], gaz)
        for i, f in zip(apply_idx, feats):
            out[i] = f
    return out


def _rows(notes: Sequence[NoteData], gaz: Sequence[list[list[str]]] | None, classes: frozenset[str]) -> list[dict[str, int]]:
    rows = []
    for k, data in enumerate(notes):
        for i, feats in enumerate(data.base):
            row = dict.fromkeys((f for f in feats if _class_of(f) in classes), 1)
            if gaz is not None:
                row.update(dict.fromkeys(gaz[k][i], 1))
            rows.append(row)
    return rows


def _class_of(feature: str) -> str:
    head = feature.split(":", 1)[0]
    return head.split("=", 1)[0]


@dataclass
class Fitted:
    """The scikit-learn objects of one training run (kept for tests and analysis, never saved)."""

    vectorizer: DictVectorizer
    estimators: dict[str, LinearSVC]
    rows: list[dict[str, int]]
    gazetteers: dict[str, list[str]]


def fit_estimators(notes: Sequence[NoteData], options: TrainingOptions) -> Fitted:
    """Vectorize the training tokens and fit the LinearSVC head(s)."""
    classes = frozenset(options.feature_classes)
    use_gaz = options.gazetteers and "gaz" in classes
    gaz_train = cross_fitted_gazetteers(notes) if use_gaz else None
    rows = _rows(notes, gaz_train, classes)
    labels = np.array([label for data in notes for label in data.labels])
    weights = None
    if options.augment_weight != 1.0 and any(data.copy for data in notes):
        weights = np.array([options.augment_weight if data.copy else 1.0 for data in notes for _ in data.labels])
    if options.remainder_only:
        keep = [data.rule_cats is None or data.rule_cats[i] is None for data in notes for i in range(len(data.labels))]
        rows = [r for r, k in zip(rows, keep) if k]
        labels = labels[np.array(keep, dtype=bool)]
        weights = weights[np.array(keep, dtype=bool)] if weights is not None else None
    if options.min_count > 1:
        counts = Counter(f for row in rows for f in row)
        rows = [{f: 1 for f in row if counts[f] >= options.min_count} for row in rows]
    vectorizer = DictVectorizer(dtype=np.float64, sort=True)
    X = _as_int32(vectorizer.fit_transform(rows))
    estimators: dict[str, LinearSVC] = {}
    is_phi = labels != "O"
    if options.mode == "binary":
        estimators["phi"] = _svm(options, labels).fit(X, np.where(is_phi, "PHI", "O"), sample_weight=weights)
        if len(set(labels[is_phi])) > 1:
            estimators["category"] = _svm(options, labels[is_phi]).fit(
                X[is_phi], labels[is_phi], sample_weight=None if weights is None else weights[is_phi])
    elif options.mode == "multiclass":
        estimators["phi"] = _svm(options, labels).fit(X, labels, sample_weight=weights)
    else:
        raise ValueError(f"unknown mode {options.mode!r}")
    # Gazetteers are learned from the annotated notes only: a copy's surrogates are nobody's names.
    return Fitted(vectorizer, estimators, rows, learn_gazetteers(n for n in notes if not n.copy) if use_gaz else {})


def _as_int32(X):
    X = X.tocsr()
    # liblinear takes 32-bit indices only; DictVectorizer may hand out 64-bit ones.
    X.indices = X.indices.astype(np.int32)
    X.indptr = X.indptr.astype(np.int32)
    return X


def _svm(options: TrainingOptions, y: np.ndarray) -> LinearSVC:
    weights = None
    if options.phi_weight != 1.0:
        weights = {c: (1.0 if c == "O" else options.phi_weight) for c in np.unique(y)}
    return LinearSVC(C=options.c, random_state=0, max_iter=options.max_iter, dual=True, class_weight=weights)


def training_notes(dataset: Dataset, indexes: Iterable[int], options: TrainingOptions) -> list[NoteData]:
    """The notes at `indexes`, then (with ``options.augment``) their surrogate copies, and theirs only."""
    indexes = list(indexes)
    notes = [dataset.notes[i] for i in indexes]
    if options.augment:
        copies = dataset.augmented(options.augment)
        notes += [c for i in indexes for c in copies[i]]
    return notes


def fit(notes: Sequence[NoteData], options: TrainingOptions, lists: Mapping[str, Sequence[str]] | None = None) -> dict:
    """Fit the heads on these notes; returns the model as plain data (see model.py).

    `lists` is accepted for symmetry with the run time; the list features are already in the notes."""
    fitted = fit_estimators(notes, options)
    names = fitted.vectorizer.get_feature_names_out()
    heads = {name: _head(est, names) for name, est in fitted.estimators.items()}
    if options.mode == "binary" and "category" not in heads:
        labels = sorted({label for data in notes for label in data.labels if label != "O"}) or ["NAME"]
        heads["category"] = {"classes": labels[:1], "intercept": [0.0], "weights": {}}
    return {
        "format": FORMAT,
        "mode": options.mode,
        "score": options.score,
        "feature_classes": [c for c in FEATURE_CLASSES if c in options.feature_classes],
        "threshold": options.threshold,
        "gazetteers": fitted.gazetteers,
        "heads": heads,
        "training": options.as_dict(),
    }


def _head(svm: LinearSVC, names: np.ndarray) -> dict:
    coef = np.atleast_2d(svm.coef_)
    intercept = np.atleast_1d(svm.intercept_)
    weights = {}
    for j in np.flatnonzero(np.any(coef != 0, axis=0)):
        weights[str(names[j])] = [float(v) for v in coef[:, j]]
    return {"classes": [str(c) for c in svm.classes_], "intercept": [float(v) for v in intercept], "weights": weights}


def save_model(model: Mapping, out: Path) -> bytes:
    """Write the model as gzipped JSON with a fixed gzip timestamp, so equal models give equal bytes."""
    payload = json.dumps(model, sort_keys=True, separators=(",", ":")).encode()
    data = gzip.compress(payload, compresslevel=9, mtime=0)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(data)
    return data


def rule_pipeline(lists: Mapping[str, Sequence[str]]):
    """The rule detectors of the default configuration with these lists (classifier off)."""
    from anonymizer.pipeline import build_pipeline
    from anonymizer.settings import ClassifierConfig, DetectorsConfig

    return build_pipeline(DetectorsConfig(), lists, ClassifierConfig(enabled=False))
