"""The trained classifier at run time: plain-data weights, scored by dictionary lookups.

A model file is gzipped JSON (no pickle: loading it runs no code)::

    {"format": "anonymizer-svm/1", "mode": "binary", "threshold": -0.5,
     "feature_classes": [...], "gazetteers": {"DOCTOR": [...], ...},
     "heads": {"phi":      {"classes": ["O", "PHI"], "intercept": [b], "weights": {feature: [w]}},
               "category": {"classes": ["DATE", ...], "intercept": [...], "weights": {feature: [...]}}},
     "card": {...}}

A token's decision value for a class is the intercept plus the sum of the weights of its active
(binary) features - exactly what scikit-learn's ``decision_function`` computes for the fitted
``LinearSVC`` (tests/test_classifier.py checks it).  The sum over the word-only features is cached
per word type.
"""

from __future__ import annotations

import gzip
import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

from anonymizer.classifier import postprocess
from anonymizer.classifier.features import FeatureExtractor, Tokens
from anonymizer.config import ClassifierConfig, ConfigError
from anonymizer.record import PatientRecord
from anonymizer.spans import Span

FORMAT = "anonymizer-svm/1"
MODELS = Path(__file__).resolve().parent / "models"
DEFAULT_MODEL = MODELS / "default.json.gz"
NAME_CATEGORIES = frozenset({"DOCTOR", "PATIENT", "RELATIVE", "NAME"})


class Head:
    """One linear model: per-class intercepts and per-feature weight vectors."""

    def __init__(self, data: Mapping) -> None:
        self.classes: list[str] = list(data["classes"])
        self.intercept: list[float] = [float(v) for v in data["intercept"]]
        self.weights: dict[str, list[float]] = {k: [float(x) for x in v] for k, v in data["weights"].items()}
        self.width = len(self.intercept)
        self._zero = [0.0] * self.width
        # the same weights as a matrix, for scoring a whole note at once
        self.index: dict[str, int] = {f: j for j, f in enumerate(self.weights)}
        self.matrix = np.array(list(self.weights.values()), dtype=np.float64).reshape(len(self.weights), self.width)
        self.bias = np.array(self.intercept, dtype=np.float64)

    def partial(self, features: Sequence[str]) -> list[float]:
        total = list(self._zero)
        weights = self.weights
        for f in features:
            w = weights.get(f)
            if w is not None:
                for k in range(self.width):
                    total[k] += w[k]
        return total

    def decision(self, features: Sequence[str]) -> list[float]:
        """scikit-learn's decision_function for one example (1 value for a binary head)."""
        partial = self.partial(features)
        return [b + p for b, p in zip(self.intercept, partial)]

    def word_vector(self, features: Sequence[str]) -> np.ndarray:
        ids = [j for j in map(self.index.get, features) if j is not None]
        return self.matrix[ids].sum(axis=0) if ids else np.zeros(self.width)

    def batch(self, word_vectors: np.ndarray, contexts: Sequence[Sequence[str]]) -> np.ndarray:
        """Decision values of a note's tokens (rows): intercept + cached word part + context part."""
        index = self.index
        ids: list[int] = []
        owners: list[int] = []
        for t, ctx in enumerate(contexts):
            for f in ctx:
                j = index.get(f)
                if j is not None:
                    ids.append(j)
                    owners.append(t)
        out = word_vectors + self.bias
        if ids:
            np.add.at(out, np.array(owners), self.matrix[np.array(ids)])
        return out


class Model:
    """A loaded model file: heads, threshold, gazetteers, the feature configuration."""

    def __init__(self, data: Mapping, digest: str = "") -> None:
        if data.get("format") != FORMAT:
            raise ConfigError(f"classifier model: unknown format {data.get('format')!r} (expected {FORMAT})")
        self.data = data
        self.digest = digest
        self.mode: str = data["mode"]
        self.score_kind: str = data.get("score", "max")
        self.threshold: float = float(data["threshold"])
        self.feature_classes: tuple[str, ...] = tuple(data["feature_classes"])
        self.gazetteers: dict[str, list[str]] = {k: list(v) for k, v in data.get("gazetteers", {}).items()}
        self.phi = Head(data["heads"]["phi"])
        self.category = Head(data["heads"]["category"]) if "category" in data["heads"] else None
        self.card: dict = dict(data.get("card", {}))
        self.postprocess: dict = dict(data.get("postprocess", {}))

    @classmethod
    def load(cls, path: str | Path) -> Model:
        path = Path(path)
        try:
            raw = path.read_bytes()
        except OSError as exc:
            raise ConfigError(f"classifier.model: cannot read {path} ({exc.strerror})") from None
        try:
            data = json.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)
        except (OSError, ValueError):
            raise ConfigError(f"classifier.model: {path} is not a gzipped JSON model") from None
        return cls(data, hashlib.sha256(raw).hexdigest())

    def score_note(self, words: Sequence[str], contexts: Sequence[Sequence[str]], word_part) -> tuple[list[float], list[str]]:
        """(PHI score, category) of each token; `word_part(word)` gives the cached word vectors."""
        if not words:
            return [], []
        parts = [word_part(w) for w in words]
        phi = self.phi.batch(np.array([p[0] for p in parts]), contexts)
        if self.mode == "binary":
            scores = phi[:, 0]
            if self.category is None:
                return scores.tolist(), ["NAME"] * len(words)
            cat = self.category.batch(np.array([p[1] for p in parts]), contexts)
            return scores.tolist(), [self.category.classes[k] for k in cat.argmax(axis=1)]
        classes = self.phi.classes
        phi_cols = [k for k, c in enumerate(classes) if c != "O"]
        sub = phi[:, phi_cols]
        best = sub.argmax(axis=1)
        scores = sub[np.arange(len(words)), best]
        if self.score_kind == "margin" and "O" in classes:
            scores = scores - phi[:, classes.index("O")]
        return scores.tolist(), [classes[phi_cols[k]] for k in best]


class SvmDetector:
    """Scores the tokens the rule detectors left and flags those above the threshold (name "svm")."""

    name = "svm"

    def __init__(self, model: Model, lists: Mapping[str, Sequence[str]], threshold: float | None = None) -> None:
        self.model = model
        self.threshold = model.threshold if threshold is None else float(threshold)
        self.digest = f"{model.digest}:{self.threshold!r}"
        self.extractor = FeatureExtractor(lists, model.gazetteers, model.feature_classes)
        self._word_parts: dict[str, tuple[list[float], list[float]]] = {}

    def _word_part(self, word: str) -> tuple[np.ndarray, np.ndarray | None]:
        part = self._word_parts.get(word)
        if part is None:
            feats = self.extractor.word_features(word)
            cat = self.model.category.word_vector(feats) if self.model.category is not None else None
            part = (self.model.phi.word_vector(feats), cat)
            if len(self._word_parts) > 300_000:
                self._word_parts.clear()
            self._word_parts[word] = part
        return part

    def score_tokens(
        self, text: str, record: PatientRecord | None, tokens: Tokens | None = None, rule_spans: Sequence[Span] = ()
    ) -> tuple[Tokens, list[tuple[float, str]]]:
        """Every token's (score, category), rule-covered ones included; the threshold is not applied."""
        tokens = tokens or Tokens.of(text)
        context = self.extractor.context_features(text, tokens, record, _covered(tokens, rule_spans))
        scores, categories = self.model.score_note(tokens.words, context, self._word_part)
        return tokens, list(zip(scores, categories))

    def analyse(self, text: str, record: PatientRecord, rule_spans: Sequence[Span] = ()) -> NoteAnalysis:
        """Score the tokens the rules left, apply the threshold and the per-note recall heuristics."""
        tokens = Tokens.of(text)
        n = len(tokens)
        rule_cats = _covered(tokens, rule_spans)
        scores = [float("-inf")] * n
        flagged: list[str | None] = list(rule_cats)
        spans: list[Span] = []
        if n:
            context = self.extractor.context_features(text, tokens, record, rule_cats)
            threshold = self.threshold
            todo = [i for i in range(n) if rule_cats[i] is None]
            values, cats = self.model.score_note([tokens.words[i] for i in todo], [context[i] for i in todo], self._word_part)
            for i, score, category in zip(todo, values, cats):
                scores[i] = score
                if score > threshold:
                    flagged[i] = category
                    spans.append(Span(tokens.starts[i], tokens.ends[i], category, "svm"))
            post = self.model.postprocess
            additions: dict[int, tuple[str, str]] = {}
            if post.get("extend_names"):
                for i, cat in postprocess.extend_names(text, tokens, flagged, self.extractor.dictionaries).items():
                    additions.setdefault(i, (cat, "extend"))
            if post.get("relative_cues"):
                for i, cat in postprocess.relative_cues(text, tokens, flagged, self.extractor.dictionaries).items():
                    additions.setdefault(i, (cat, "relative_cue"))
            if post.get("extend_places"):  # measured, off by default (docs/classifier.md)
                for i, cat in postprocess.extend_places(text, tokens, flagged).items():
                    additions.setdefault(i, (cat, "extend_place"))
            for i, (cat, rule) in sorted(additions.items()):
                flagged[i] = cat
                spans.append(Span(tokens.starts[i], tokens.ends[i], cat, "svm", rule))
        return NoteAnalysis(tokens, flagged, scores, spans)

    def __call__(self, text: str, record: PatientRecord, rule_spans: Sequence[Span] = ()) -> list[Span]:
        """Spans for the tokens the rule spans did not cover whose score is above the threshold."""
        return self.analyse(text, record, rule_spans).spans

    def patient_spans(self, record: PatientRecord, notes: Sequence[tuple[str, Sequence[Span]]]) -> list[list[Span]]:
        """The classifier's spans for all of one patient's notes, given each note's rule spans.

        Besides what :meth:`__call__` finds note by note, a word the classifier flagged as a name
        with a score above the model's ``postprocess.propagate`` level in one note is flagged in
        the patient's other notes too (rule "propagated")."""
        analyses = [self.analyse(text, record, rules) for text, rules in notes]
        level = self.model.postprocess.get("propagate")
        if level is None or len(analyses) < 2:
            return [a.spans for a in analyses]
        extra = postprocess.propagate([(a.tokens, a.flagged, a.scores) for a in analyses], float(level), self.extractor.dictionaries)
        out = []
        for a, add in zip(analyses, extra):
            out.append(a.spans + [Span(a.tokens.starts[i], a.tokens.ends[i], cat, "svm", "propagated") for i, cat in sorted(add.items())])
        return out


@dataclass
class NoteAnalysis:
    tokens: Tokens
    flagged: list[str | None]  # per token: category from the rules or the classifier, else None
    scores: list[float]  # per token: classifier score (-inf where the rules had flagged it)
    spans: list[Span]  # the classifier's spans (threshold and per-note heuristics applied)


def _covered(tokens: Tokens, spans: Sequence[Span]) -> list[str | None]:
    """Per token: the category of a rule span overlapping it (highest priority), else None."""
    import bisect

    from anonymizer.spans import CATEGORIES

    rank = {c: k for k, c in enumerate(CATEGORIES)}
    covered: list[str | None] = [None] * len(tokens)
    for span in spans:
        i = bisect.bisect_right(tokens.ends, span.start)
        while i < len(tokens) and tokens.starts[i] < span.end:
            old = covered[i]
            if old is None or rank.get(span.category, 99) < rank.get(old, 99):
                covered[i] = span.category
            i += 1
    return covered


@lru_cache(maxsize=4)
def _load_cached(path: str, mtime: float) -> Model:  # mtime: a rewritten file is loaded again
    return Model.load(path)


def load_model(path: str | Path | None = None) -> Model:
    """The model at `path`, or the one shipped in the package; loaded once per process."""
    target = Path(path) if path else DEFAULT_MODEL
    if not target.is_file():
        raise ConfigError(f"classifier.model: model file not found: {target}")
    return _load_cached(str(target.resolve()), target.stat().st_mtime)


def load_detector(config: ClassifierConfig, lists: Mapping[str, Sequence[str]]) -> SvmDetector:
    """The detector the pipeline runs after the rules: `config.model` or the shipped model."""
    return SvmDetector(load_model(config.model), lists, config.threshold)
