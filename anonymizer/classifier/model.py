"""The trained classifier at run time: plain-data weights, scored by dictionary lookups.

A model file is gzipped JSON (no pickle: loading it runs no code)::

    {"format": "anonymizer-svm/1", "mode": "binary", "threshold": -0.5,
     "feature_classes": [...], "gazetteers": {"DOCTOR": [...], ...},
     "heads": {"phi":      {"classes": ["O", "PHI"], "intercept": [b], "weights": {feature: [w]}},
               "category": {"classes": ["DATE", ...], "intercept": [...], "weights": {feature: [...]}}},
     "card": {...}}

Weights and vocabulary only: what the run lets the classifier decide (the rules it confirms, the
recall heuristics) is policy, read from rules/classifier.toml (:mod:`anonymizer.classifier.policy`);
``confirm`` and ``postprocess`` fields of a model written before are ignored.

A token's decision value for a class is the intercept plus the sum of the weights of its active
(binary) features - exactly what scikit-learn's ``decision_function`` computes for the fitted
``LinearSVC`` (tests/test_classifier.py checks it).  The sums are cached per feature slot and key
(see :class:`SvmDetector`).
"""

from __future__ import annotations

import bisect
import gzip
import hashlib
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from itertools import accumulate, chain
from pathlib import Path

import numpy as np
import regex
from scipy import sparse

from anonymizer.budget import check
from anonymizer.classifier import postprocess
from anonymizer.classifier.eponyms import eponymous, load_eponyms
from anonymizer.classifier.features import EDGES, GROUPS, HEADING_AT_START, WINDOW, FeatureExtractor, Marks, Tokens, default_dictionaries
from anonymizer.classifier.policy import Policy, load_policy, read_policy, rule_names
from anonymizer.detectors import names_a_colour, unit_after_number
from anonymizer.detectors.honorifics import CONTRACTION
from anonymizer.record import PatientRecord
from anonymizer.settings import ClassifierConfig, ConfigError
from anonymizer.spans import CATEGORIES, Span
from anonymizer.vocabulary import english_rank, name_words, never_a_name, plain_word

FORMAT = "anonymizer-svm/1"
MODELS = Path(__file__).resolve().parent / "models"
DEFAULT_MODEL = MODELS / "default.json.gz"
# the categories an eponym is taken for: a person ("Parkinson's") or a place ("Glasgow coma scale")
EPONYM_CATEGORIES = postprocess.NAME_CATEGORIES | postprocess.PLACE_CATEGORIES
# Words that name a day of the year without a number: what the classifier may take for a date
# besides the month and weekday names (features.py's "month" dictionary).
HOLIDAYS = frozenset({
    "christmas", "xmas", "easter", "thanksgiving", "halloween", "hanukkah", "chanukah", "ramadan", "eid", "diwali", "deepavali",
    "vesak", "passover", "yom", "kippur", "lunar",
})
UNITS = frozenset({"ward", "bed", "room", "rm", "bay", "cubicle", "level", "floor", "unit"})  # before a number: a ward, not a place
# "called x2", "X3 attempts": how many times; "at 0030h", "2145hrs": a time of day; never a place
COUNT = regex.compile(r"x\d{1,2}|(?:[01]\d|2[0-3])[0-5]\dh(?:rs?)?")
ARTICLES = frozenset({"a", "an"})  # "lives in a house": never a place's word
# A section's letter opening a line, then its punctuation: "S:", "O-", "A.", "P)", "D:", "R:".
SECTION_LETTERS = "SOAPIEDR"
SECTION_LETTER = regex.compile(rf"(?m)^[ \t]*([{SECTION_LETTERS}])[ \t]*[:.)-]")
CASED_WORD = regex.compile(r"\b[^\W\d_]{2,}\b")  # a word whose case can say something
CAPITALISING = 0.1  # a note with this share of Capitalised words writes names so (capitalising)
FREQUENT_WORD = 5000  # in lower case there, these most frequent English words are words unless beside a name (lower_case_word)
# Numbers joined by "/", "-" or "." that end with a unit or a time of day: "5am", "7a-7p", "59.2kg", "20-30cc/hr".
# Only a short run is judged ("1/1/1/..." is no quantity), so the check costs a bounded time per token.
QUANTITY_LENGTH = 24
QUANTITY = regex.compile(
    r"(?:\d+(?:am|pm|a|p|hrs?|h)?[-/.])*\d+(?:am|pm|a|p|kg|g|gm|mg|mcg|cc|ml|l|hrs?|h|mins?|cm|mm)(?:/(?:hr|h|min|day|d|kg))?",
    regex.IGNORECASE,
)
# A phone number has at least this many digits; the classifier's PHONE on fewer is a list's number or a dose.
MIN_PHONE_DIGITS, PHONE_REACH, PHONE_CHARACTERS = 7, 20, frozenset("0123456789 ()-.+")
NEG_INF = float("-inf")  # the score of a token the rules flagged
WEAK = "?"  # marks the category of a token only rules the classifier must confirm flagged
BATCH_NOTES = 64  # notes scored together: enough to spread numpy's cost per call, few enough to keep memory small
# (text, start, end, category) -> whether a context exception drops text[start:end] (PatternDetector.excused)
Excused = Callable[[str, int, int, str], bool]
RANK = {c: k for k, c in enumerate(CATEGORIES)}  # a category's priority: lower wins
CACHE_KEYS = 200_000  # cached keys of a group before its cache starts again (at most about 70 MB)


class Head:
    """One linear model's classes and intercepts (its weights go into :attr:`Model.matrix`)."""

    def __init__(self, data: Mapping) -> None:
        self.classes: list[str] = list(data["classes"])
        self.intercept: list[float] = [float(v) for v in data["intercept"]]
        self.width = len(self.intercept)


class Model:
    """A loaded model file: heads, threshold, gazetteers, the feature configuration.

    The heads' weights are also kept side by side (``phi`` columns, then ``category`` ones), so a
    token's decision values for every head come from one sum."""

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
        heads = [(self.phi, data["heads"]["phi"]["weights"])]
        if self.category is not None:
            heads.append((self.category, data["heads"]["category"]["weights"]))
        self.width = sum(h.width for h, _ in heads)
        self.bias = np.array([b for h, _ in heads for b in h.intercept])
        self.index: dict[str, int] = {}  # feature -> row of `matrix`
        for _, weights in heads:
            for feature in weights:
                self.index.setdefault(feature, len(self.index))
        self.matrix = np.zeros((len(self.index), self.width))
        offset = 0
        for head, weights in heads:
            for feature, w in weights.items():
                self.matrix[self.index[feature], offset : offset + head.width] = w
            offset += head.width

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

    def weight_sum(self, features: Iterable[str]) -> np.ndarray:
        """The summed weights (all heads) of these features; no intercept."""
        rows = [j for j in map(self.index.get, features) if j is not None]
        return self.matrix[rows].sum(axis=0) if rows else np.zeros(self.width)

    def decide(self, values: np.ndarray) -> tuple[list[float], list[str]]:
        """(PHI score, category) of each row of decision values (intercepts included)."""
        if not len(values):
            return [], []
        phi = values[:, : self.phi.width]
        if self.mode == "binary":
            scores = phi[:, 0]
            if self.category is None:
                return scores.tolist(), ["NAME"] * len(values)
            best = values[:, self.phi.width :].argmax(axis=1)
            return scores.tolist(), [self.category.classes[k] for k in best]
        classes = self.phi.classes
        phi_cols = [k for k, c in enumerate(classes) if c != "O"]
        sub = phi[:, phi_cols]
        best = sub.argmax(axis=1)
        scores = sub[np.arange(len(values)), best]
        if self.score_kind == "margin" and "O" in classes:
            scores = scores - phi[:, classes.index("O")]
        return scores.tolist(), list(map([classes[k] for k in phi_cols].__getitem__, best.tolist()))  # not numpy's scalars one by one

    def score_rows(self, rows: Sequence[Iterable[str]]) -> tuple[list[float], list[str]]:
        """(PHI score, category) of tokens given as feature names (cross-validation's path)."""
        values = np.array([self.bias + self.weight_sum(row) for row in rows]).reshape(len(rows), self.width)
        return self.decide(values)


class SvmDetector:
    """Scores the tokens the rule detectors left and flags those above the threshold (name "svm").

    A token's decision values are the intercepts plus, for each feature slot, the summed weights
    of the features its key gives (features.GROUPS), plus the weights of its marks (features.Marks).
    The slot sums are cached per group and key, one row of slot vectors per key, so scoring a note
    is one dictionary lookup per key and a few numpy gathers."""

    name = "svm"

    def __init__(
        self,
        model: Model,
        lists: Mapping[str, Sequence[str]],
        threshold: float | None = None,
        excused: Excused | None = None,
        policy: Policy | None = None,
    ) -> None:
        self.model = model
        # the rules it confirms and the heuristics after it: rules/classifier.toml (the shipped rules' by default)
        self.policy = load_policy() if policy is None else policy
        self.confirm: frozenset[str] = self.policy.confirm  # rule spans (by source) kept only where the classifier agrees
        self.postprocess: Mapping[str, object] = self.policy.heuristics
        self.threshold = model.threshold if threshold is None else float(threshold)
        self.excused = excused
        self.digest = f"{model.digest}:{self.threshold!r}"
        self.extractor = FeatureExtractor(lists, model.gazetteers, model.feature_classes)
        self._rows: dict[str, dict] = {}
        self._sums: dict[str, np.ndarray] = {}
        # Bigrams: the model weighs only those it was trained on, so all their sums are known up
        # front (row 0 stays zero for every other bigram) and this group's cache never grows.  A
        # note's bigrams are found from its word keys' rows, without a key of their own: each word
        # row holds the number of its lower-cased word among the bigrams' words (`_word_numbers`,
        # -1 for none), a bigram is coded from its two numbers, and the known codes are sorted.
        known = [tuple(f[len("window:b-=") :].split("|")) for f in model.index if f.startswith(("window:b-=", "window:b+="))]
        self._numbers = {w: k for k, w in enumerate(sorted({w for bigram in known for w in bigram} | set(EDGES)))}
        for group in GROUPS:
            self._reset(group)
        self._add("pair", known)
        pairs = self._rows["pair"]
        codes = {self._code(self._numbers[a], self._numbers[b]): row for (a, b), row in zip(known, map(pairs.get, known))}
        self._codes = np.array(sorted(codes), dtype=np.int64)
        self._code_rows = np.array([codes[c] for c in sorted(codes)], dtype=np.intp)

    def _code(self, first: np.ndarray | int, second: np.ndarray | int) -> np.ndarray | int:
        return first * len(self._numbers) + second

    def _reset(self, group: str) -> None:
        self._rows[group] = {}
        # slot-major: each slot's rows are one contiguous table, which `take` gathers fast
        self._sums[group] = np.zeros((len(GROUPS[group]), 256, self.model.width))
        if group == "pair":
            self._rows[group]["(unknown)"] = 0  # row 0, zero: a bigram the model does not know (keys are tuples)
        if group == "word":
            self._word_numbers = np.zeros(256, dtype=np.int64)

    def _add(self, group: str, keys: Iterable[object]) -> None:
        """Cache the slot sums of the keys not cached yet, all in one sparse product."""
        rows = self._rows[group]
        new = [key for key in dict.fromkeys(keys) if key not in rows]
        if not new:
            return
        slots = GROUPS[group]
        first, index = len(rows), self.model.index
        while first + len(new) > self._sums[group].shape[1]:
            self._sums[group] = np.concatenate([self._sums[group], np.zeros_like(self._sums[group])], axis=1)
        columns: list[int] = []
        ends: list[int] = [0]  # one row per key and slot: its features' columns
        for key in new:
            for slot in slots:
                columns += [j for j in map(index.get, self.extractor.slot_features(slot, key)) if j is not None]
                ends.append(len(columns))
        features = sparse.csr_matrix(
            (np.ones(len(columns)), np.array(columns, dtype=np.intp), np.array(ends, dtype=np.intp)),
            shape=(len(ends) - 1, len(index)),
        )
        sums = (features @ self.model.matrix).reshape(len(new), len(slots), -1)
        self._sums[group][:, first : first + len(new)] = sums.transpose(1, 0, 2)
        rows.update(zip(new, range(first, first + len(new))))
        if group == "word":
            numbers = self._word_numbers
            if len(numbers) < first + len(new):
                padding = np.zeros(self._sums[group].shape[1] - len(numbers), dtype=np.int64)
                numbers = self._word_numbers = np.concatenate([numbers, padding])
            numbers[first : first + len(new)] = [-1 if w is None else self._numbers.get(w.lower(), -1) for w in new]

    def values(self, slots: Mapping[str, Sequence]) -> np.ndarray:
        """Decision values (intercepts included) of every token of one note, one row per token."""
        return self.values_many([slots])

    def values_many(self, notes: Sequence[Mapping[str, Sequence]]) -> np.ndarray:
        """Decision values of every token of several notes' slots, stacked in note order.

        A patient's notes are scored together: one lookup pass and one gather per slot for all of
        them, since numpy's cost per call outweighs its cost per row at a note's size."""
        notes = [slots for slots in notes if slots]  # a note without tokens has no slots
        sizes = [len(slots["word"]) - 4 for slots in notes]
        total = sum(sizes)
        out = np.tile(self.model.bias, (total, 1))
        if not total:
            return out
        for group, offsets in GROUPS.items():
            if group not in notes[0]:
                continue  # its feature classes are off (the pair group comes with the word group)
            pad = len(notes[0][group]) - sizes[0]  # keys beyond the tokens (the edges), the same in every note
            rows = self._rows[group]
            if len(rows) > CACHE_KEYS:  # keep memory flat on an endless vocabulary
                self._reset(group)
                rows = self._rows[group]
            count = sum(len(slots[group]) for slots in notes)
            try:
                ids = np.fromiter(map(rows.get, chain.from_iterable(slots[group] for slots in notes)), dtype=np.intp, count=count)
            except TypeError:  # a key not cached yet (rows.get gave None)
                keys = list(chain.from_iterable(slots[group] for slots in notes))
                self._add(group, keys)
                ids = np.fromiter(map(rows.get, keys), dtype=np.intp, count=count)
            # token t of note j sits at t + j * pad in the stacked keys (plus the slot's offset)
            at = np.arange(total) + np.repeat(np.arange(len(notes)) * pad, sizes) if pad else np.arange(total)
            self._gather(out, group, ids, at)
            if group == "word" and "window" in self.extractor.classes:
                self._gather(out, "pair", self._pair_rows(ids, sizes), at)
        self._add_marks(out, [slots["extra"] for slots in notes], sizes)
        return out

    def _gather(self, out: np.ndarray, group: str, ids: np.ndarray, at: np.ndarray) -> None:
        """Add to `out` the slot sums of `group` for the stacked keys' rows `ids`."""
        sums = self._sums[group]
        for k, offset in enumerate(GROUPS[group].values()):
            out += sums[k].take(ids[at + offset], axis=0)

    def _pair_rows(self, word_ids: np.ndarray, sizes: Sequence[int]) -> np.ndarray:
        """The pair group's rows, laid out as the word group's keys (bigram j is keys j and j + 1),
        from those keys' rows: features.bigrams without a bigram made or looked up."""
        numbers = self._word_numbers[word_ids]
        firsts = np.cumsum([0, *(size + 2 * WINDOW for size in sizes[:-1])])  # each note's first key
        for edge in range(WINDOW):  # the note's edges (the None keys) are the edge words
            numbers[firsts + edge] = self._numbers[EDGES[0]]
            numbers[firsts + np.asarray(sizes) + 2 * WINDOW - 1 - edge] = self._numbers[EDGES[1]]
        codes = self._code(numbers[:-1], numbers[1:])
        if not len(self._codes):
            return np.zeros(len(numbers), dtype=np.intp)
        at = np.searchsorted(self._codes, codes).clip(max=len(self._codes) - 1)
        known = (numbers[:-1] >= 0) & (numbers[1:] >= 0) & (self._codes[at] == codes)
        return np.append(np.where(known, self._code_rows[at], 0), 0)

    def _add_marks(self, out: np.ndarray, marks: Sequence[Marks], sizes: Sequence[int]) -> None:
        """Add to `out` the weights of each note's marks (features.Marks): one row of weights per
        mark, spread over its positions."""
        index = self.model.index
        rows: list[int] = []
        counts: list[int] = []  # per mark, its positions
        at: list[int] = []  # the marks' positions, each note's from 0
        totals: list[int] = []  # per note, its marks' positions
        for note in marks:
            before = len(at)
            for feature, positions in note:
                row = index.get(feature)
                if row is not None and positions:
                    rows.append(row)
                    counts.append(len(positions))
                    at += positions
            totals.append(len(at) - before)
        if not rows:
            return
        rows_at = np.array(at, dtype=np.intp) + np.repeat(list(accumulate(sizes[:-1], initial=0)), totals)  # rows of `out`
        weights = self.model.matrix[np.repeat(rows, counts)]
        for k in range(out.shape[1]):
            out[:, k] += np.bincount(rows_at, weights[:, k], minlength=len(out))

    def score_tokens(
        self, text: str, record: PatientRecord | None, tokens: Tokens | None = None, rule_spans: Sequence[Span] = ()
    ) -> tuple[Tokens, list[tuple[float, str]]]:
        """Every token's (score, category), rule-covered ones included; the threshold is not applied."""
        tokens = tokens or Tokens.of(text)
        slots = self.extractor.slots(text, tokens, record, rule_categories(tokens, rule_spans, self.confirm))
        scores, categories = self.model.decide(self.values(slots))
        return tokens, list(zip(scores, categories))

    def analyse(self, text: str, record: PatientRecord, rule_spans: Sequence[Span] = ()) -> NoteAnalysis:
        """Score the tokens the rules left, apply the threshold and the per-note recall heuristics."""
        return self.analyse_many(record, [(text, rule_spans)])[0]

    def analyse_many(self, record: PatientRecord, notes: Sequence[tuple[str, Sequence[Span]]]) -> list[NoteAnalysis]:
        """:meth:`analyse` for several notes of one patient, scored in batches of BATCH_NOTES.

        The note's time budget (anonymizer.budget) is checked between the steps of each note."""
        analyses = []
        for first in range(0, len(notes), BATCH_NOTES):
            batch = [(text, Tokens.of(text), rule_spans) for text, rule_spans in notes[first : first + BATCH_NOTES]]
            self.extractor.prime(record, chain.from_iterable(tokens.lowers for _, tokens, _ in batch))
            prepared = []
            for text, tokens, rule_spans in batch:
                check()
                rule_cats = rule_categories(tokens, rule_spans, self.confirm)
                prepared.append((text, tokens, rule_cats, self.extractor.slots(text, tokens, record, rule_cats)))
            check()
            values, cats = self.model.decide(self.values_many([slots for *_, slots in prepared]))
            start = 0
            for text, tokens, rule_cats, _ in prepared:
                check()
                end = start + len(tokens)
                analyses.append(self._flag(text, tokens, rule_cats, values[start:end], cats[start:end]))
                start = end
        return analyses

    def _flag(self, text: str, tokens: Tokens, rule_cats: list[str | None], values: list[float], cats: list[str]) -> NoteAnalysis:
        """Apply the threshold to one note's scores, then the per-note recall heuristics."""
        if any(c is not None and c.endswith(WEAK) for c in set(rule_cats)):  # a few distinct categories
            flagged: list[str | None] = [None if c is None or c.endswith(WEAK) else c for c in rule_cats]
        else:  # no weak category: the rules' categories as they are
            flagged = list(rule_cats)
        spans: list[Span] = []
        values = weakest_part(text, tokens, rule_cats, values)
        scores = [value if f is None else NEG_INF for value, f in zip(values, flagged)]
        threshold = self.threshold
        excused = _once_per_run(self.excused) if self.excused is not None else None
        runs: dict[int, tuple[int, int]] = {}
        for i in [i for i, score in enumerate(scores) if score > threshold]:  # the few above it
            if not vetoed(text, tokens, i, cats[i], excused, runs):
                flagged[i] = cats[i]
                spans.append(Span(tokens.starts[i], tokens.ends[i], cats[i], "svm"))
        post = self.postprocess
        additions: dict[int, tuple[str, str]] = {}
        if post.get("extend_names"):
            for i, cat in postprocess.extend_names(text, tokens, flagged, self.extractor.dictionaries).items():
                additions.setdefault(i, (cat, "extend"))
        if post.get("relative_cues"):
            for i, cat in postprocess.relative_cues(text, tokens, flagged, self.extractor.dictionaries).items():
                additions.setdefault(i, (cat, "relative_cue"))
        if post.get("extend_places"):
            for i, cat in postprocess.extend_places(text, tokens, flagged).items():
                additions.setdefault(i, (cat, "extend_place"))
        for i, (cat, rule) in sorted(additions.items()):
            flagged[i] = cat
            spans.append(Span(tokens.starts[i], tokens.ends[i], cat, "svm", rule))
        return NoteAnalysis(tokens, flagged, scores, spans)

    def __call__(self, text: str, record: PatientRecord, rule_spans: Sequence[Span] = ()) -> list[Span]:
        """Spans for the tokens the rule spans did not cover whose score is above the threshold."""
        return self.analyse(text, record, rule_spans).spans

    def combine(self, rule_spans: Sequence[Span], own: Sequence[Span]) -> list[Span]:
        """A note's spans: the rule spans and the classifier's own, less the spans of the rules the
        classifier must confirm (the policy's ``confirm`` list: weak patterns such as a day/month without a year,
        which also match ranges and ratios) that none of its own spans overlaps."""
        confirm, overlaps = self.confirm, None
        kept = []
        for span in rule_spans:
            if span.source in confirm:
                overlaps = overlaps or overlap_test(own)  # made for the notes with such a span only
                if not overlaps(span.start, span.end):
                    continue
            kept.append(span)
        return kept + list(own)

    def patient_spans(self, record: PatientRecord, notes: Sequence[tuple[str, Sequence[Span]]]) -> list[list[Span]]:
        """The classifier's spans for all of one patient's notes, given each note's rule spans.

        Besides what :meth:`__call__` finds note by note, a word the classifier flagged as a name
        with a score above the policy's ``propagate`` level in one note is flagged in
        the patient's other notes too (rule "propagated"), and so is a name a note says the patient
        or a relative goes by (the record detector's rule "called"; rule "called_elsewhere")."""
        analyses = self.analyse_many(record, notes)
        level = self.postprocess.get("propagate")
        if level is None or len(analyses) < 2:
            return [a.spans for a in analyses]
        extra = postprocess.propagate([(a.tokens, a.flagged, a.scores) for a in analyses], float(level), self.extractor.dictionaries)
        called = {text[s.start : s.end].casefold(): s.category for text, spans in notes for s in spans if s.rule == "called"}
        spread = postprocess.spread_called([(text, a.tokens, a.flagged) for (text, _), a in zip(notes, analyses)], called) if called else []
        out = []
        for k, a in enumerate(analyses):
            found = {i: (cat, "propagated") for i, cat in extra[k].items()}
            for i, cat in spread[k].items() if spread else ():
                found.setdefault(i, (cat, "called_elsewhere"))
            out.append(a.spans + [Span(a.tokens.starts[i], a.tokens.ends[i], cat, "svm", rule) for i, (cat, rule) in sorted(found.items())])
        return out


@dataclass
class NoteAnalysis:
    tokens: Tokens
    flagged: list[str | None]  # per token: category from the rules or the classifier, else None
    scores: list[float]  # per token: classifier score (-inf where the rules had flagged it)
    spans: list[Span]  # the classifier's spans (threshold and per-note heuristics applied)


def strong_spans(spans: Iterable[Span], confirm: frozenset[str]) -> list[Span]:
    """The rule spans that stand without the classifier: all but those of the `confirm` rules."""
    return [s for s in spans if s.source not in confirm]


WEAK_JOINS = frozenset("/-.")


def _once_per_run(excused: Excused) -> Excused:
    """`excused` remembering its verdicts within one note: the tokens of a run ("3/12") above the
    threshold are each judged on the whole run."""
    verdicts: dict[tuple[int, int, str], bool] = {}

    def judge(text: str, start: int, end: int, category: str) -> bool:
        key = (start, end, category)
        if key not in verdicts:
            verdicts[key] = excused(text, start, end, category)
        return verdicts[key]

    return judge


def overlap_test(spans: Sequence[Span]) -> Callable[[int, int], bool]:
    """Whether start, end overlaps one of `spans`, by bisection: of the spans that start before
    `end`, the furthest end must pass `start` (linear in the spans, where a test of each against
    each grew with the square of a note of dense dates)."""
    ordered = sorted((s.start, s.end) for s in spans)
    starts = [start for start, _ in ordered]
    reach = list(accumulate((end for _, end in ordered), max))

    def overlaps(start: int, end: int) -> bool:
        k = bisect.bisect_left(starts, end)
        return k > 0 and reach[k - 1] > start

    return overlaps


def vetoed(
    text: str, tokens: Tokens, i: int, category: str, excused: Excused | None, runs: dict[int, tuple[int, int]] | None = None
) -> bool:
    """Whether token i stays unflagged whatever its score: a title taken for a name ("Prof."), a
    credential, a contraction, a number or an abbreviation's letter taken for one ("RN", "DON'T",
    "2MG", "d/t", "O&G": not_a_name), an ordinary English, clinical or ward word that no name list
    holds taken for a name ("son visited", "Mitral Valve", "helps with ADLs": anonymizer.vocabulary; in lower case in a
    note that Capitalises names, such a word of any frequency: "Tan prefers"), a stop word with two
    letters swapped, not Capitalised ("dr reveiw": postprocess.swapped_stop_words), a colour's name
    ("tan-coloured"), a kinship word
    ("health care PROXY", the "law" of "son-in-law": postprocess.kinship), an eponym or a
    possessive's "s" taken for a name or a place ("Bell's palsy", "Foley catheter":
    anonymizer.classifier.eponyms; "pt's"), a ward, a bed, a count, a time, an article or a
    heading's word taken for a place ("Ward 7A", "called x2", "at 0030h", "in a house", "Past
    Medical Hx:": in_heading), what cannot be a date or a phone (not_a_number), or a number the
    rules' context exceptions drop ("3/12 ago", "GCS 15/15").  `runs`: joined_run's memory for the note."""
    return (
        postprocess.a_title(tokens, i, category)
        or (
            category in postprocess.NAME_CATEGORIES
            and (
                never_a_name(tokens.lowers[i])
                or (not tokens.words[i].istitle() and tokens.lowers[i] in postprocess.swapped_stop_words())
                or names_a_colour(text, tokens.ends[i])
                or postprocess.kinship(tokens, i)
                or not_a_name(text, tokens, i, runs)
            )
        )
        or (category in ("DATE", "PHONE") and not_a_number(text, tokens, i, category, runs))
        or (category in EPONYM_CATEGORIES and (possessive(tokens, i) or eponymous(text, tokens, i, load_eponyms(), postprocess.titles())))
        or (
            category in postprocess.PLACE_CATEGORIES
            and (
                a_unit(tokens, i)
                or COUNT.fullmatch(tokens.lowers[i]) is not None
                or tokens.lowers[i] in ARTICLES
                or in_heading(text, tokens.starts[i])
            )
        )
        or bool(excused and excused(text, *joined_run(text, tokens, i, runs), category))
    )


PLACE_CUES = frozenset({"in", "from", "to", "at", "of"})  # words before a place


def in_heading(text: str, start: int) -> bool:
    """Whether the word at `start` is in the label opening its line, as a section's heading
    writes it ("Past Medical Hx:", "Social:"): a heading names a section, never a place; but a
    label with a place's preposition may name one ("Lives in Quimby:", "Transferred from Mercy:")."""
    line = text.rfind("\n", 0, start) + 1
    heading = HEADING_AT_START.match(text, line)
    return heading is not None and start < heading.end(1) and PLACE_CUES.isdisjoint(heading[1].lower().split())


def not_a_number(text: str, tokens: Tokens, i: int, category: str, runs: dict[int, tuple[int, int]] | None = None) -> bool:
    """Whether token i, taken for a phone number or a date, cannot be one: a label beside a number
    ("cell", "Home", "W:") or a word beside a date ("FROM", "d" of "d/c"); a word with a number
    ("CABGX4"), a time of day or a quantity with its unit ("5am", "7p", "59.2kg", "20-30cc/hr"), an
    item's number or a decimal fraction ("#4", ".48"); a number too short to be a phone with the
    digits around it ("2)" of a list).  Month and weekday names, holidays, "... day"/"... eve" and
    ordinals ("3rd") stay dates."""
    word = tokens.lowers[i]
    if not word.isalpha():
        if category == "DATE":
            start, end = joined_run(text, tokens, i, runs)
            return (
                word[0].isalpha()
                or _numbered_or_decimal(text, start)
                or (end - start <= QUANTITY_LENGTH and QUANTITY.fullmatch(text, start, end) is not None)
            )
        return category == "PHONE" and _phone_digits(text, tokens.starts[i], tokens.ends[i]) < MIN_PHONE_DIGITS
    if category == "PHONE":
        return True
    if word in default_dictionaries().words["month"] or word in HOLIDAYS:
        return False
    return not (i + 1 < len(tokens) and tokens.lowers[i + 1] in ("day", "days", "eve", "s") and len(tokens.gaps[i + 1]) <= 2)


def _numbered_or_decimal(text: str, start: int) -> bool:
    """Whether the number starting at `start` follows a number sign ("scale #4") or is a decimal
    fraction without its leading zero ("from .431"): an item or a reading, never a date."""
    before = text[max(0, start - 2) : start]
    return before[-1:] == "#" or (before[-1:] == "." and not before[:1].isdigit())


def _phone_digits(text: str, start: int, end: int) -> int:
    """The digits of the phone-shaped stretch around text[start:end] (digits, spaces, brackets,
    dashes, dots, a plus), looking at most PHONE_REACH characters either way: bounded, so a note
    of digits stays linear."""
    left = start
    while left > max(0, start - PHONE_REACH) and text[left - 1] in PHONE_CHARACTERS:
        left -= 1
    right = end
    while right < min(len(text), end + PHONE_REACH) and text[right] in PHONE_CHARACTERS:
        right += 1
    return sum(c.isdigit() for c in text[left:right])


def not_a_name(text: str, tokens: Tokens, i: int, runs: dict[int, tuple[int, int]] | None = None) -> bool:
    """Whether token i, taken for a name, is a credential ("RN", "R.N."), a word of a contraction
    ("DON'T", the "m" of "I'm"), a word with a digit ("30am", "2MG": no name has one), the pronoun "I" (an initial
    has its period: "I."), a letter of an abbreviation written with a slash or an ampersand ("d/t",
    "D/C", "w/", "O&G"), a unit after a number and a slash ("103/min"), a heading's letter in a
    note written in SOAP or DAR sections ("O: see
    flowsheet", "A: Bronch done"), or an English word in lower case in a Capitalising note
    (lower_case_word)."""
    word = tokens.words[i]
    if CONTRACTION.match(text, tokens.ends[i]) or postprocess.contraction_end(tokens, i) or not word.isalpha():
        return True
    if len(word) == 1 and (
        word == "I" and text[tokens.ends[i] : tokens.ends[i] + 1] != "." or _slashed(tokens, i) or _heading(text, tokens, i)
    ):
        return True
    if word.islower() and capitalising(text) and lower_case_word(tokens, i):
        return True
    if unit_after_number(text, tokens.starts[i]):
        return True  # "PR 103/min", "2L/min"
    start, end = joined_run(text, tokens, i, runs)
    return text[start:end].replace(".", "").lower() in postprocess.credentials()


def _slashed(tokens: Tokens, i: int) -> bool:
    """Whether one-letter token i is part of an abbreviation with a slash or an ampersand: a slash
    right after it ("w/", "d/t"), or one of them between it and another single letter ("D/C",
    "s/p", "O&G", "A&E")."""
    if i + 1 < len(tokens.gaps) and tokens.gaps[i + 1].startswith("/"):
        return True
    joined = [k for k in (i - 1, i + 1) if 0 <= k < len(tokens.words) and tokens.gaps[max(i, k)] in ("/", "&")]
    return any(len(tokens.words[k]) == 1 and tokens.words[k].isalpha() for k in joined)


def _heading(text: str, tokens: Tokens, i: int) -> bool:
    """Whether one-letter token i opens a line as a section's heading: a letter of SOAP, SOAPIE or
    DAR notes in a note that opens lines with two such letters or more, each with its punctuation
    ("S:", "O-", "A.", "P)"); there the letter is a heading whatever follows it ("O PLS SEE
    FLOWSHEET").  In other notes a letter opening a line may be an initial ("A. Smith")."""
    return tokens.words[i] in SECTION_LETTERS and (i == 0 or "\n" in tokens.gaps[i]) and sectioned(text)


@lru_cache(maxsize=64)
def sectioned(text: str) -> bool:
    """Whether a note opens lines with two different section letters or more (:func:`_heading`)."""
    return len(set(SECTION_LETTER.findall(text))) > 1


def a_unit(tokens: Tokens, i: int) -> bool:
    """Whether token i names a part of the hospital by its number: "Ward 7A", "Bed 12", "Rm 304"."""
    return tokens.lowers[i] in UNITS and i + 1 < len(tokens) and tokens.gaps[i + 1] == " " and any(c.isdigit() for c in tokens.words[i + 1])


@lru_cache(maxsize=64)
def capitalising(text: str) -> bool:
    """Whether a note Capitalises words ("Seen by Dr Tan", "Daughter Mary"), at least one in
    CAPITALISING of its words: there a name is written Capitalised, and a word in lower case is a
    word.  A note in lower case or in capitals says nothing.  (Cached: the few tokens a note has
    above the threshold ask about the same text.)"""
    words = CASED_WORD.findall(text)
    return bool(words) and sum(w[0].isupper() and not w.isupper() for w in words) >= CAPITALISING * len(words)


def lower_case_word(tokens: Tokens, i: int) -> bool:
    """Whether token i, written in lower case in a Capitalising note, is the word, not a name: an
    English word that no name list holds (vocabulary.plain_word, of any rank: "prefers", "resides",
    "contactable"), or one of the FREQUENT_WORD most frequent that one does ("BP rose to", "grace
    period") unless a neighbour on its line reads as part of a name: an initial, a title, a kinship
    word or another listed name ("nephew john", "d/w z y lee", "mary ann rodrigues", "Jamal bin
    Salleh"; not "NOK\nrose from chair")."""
    lower = tokens.lowers[i]
    if plain_word(lower, rank=None):
        return True
    rank = english_rank().get(lower)
    frequent = rank is not None and rank < FREQUENT_WORD and len(lower) > 1
    neighbours = [k for k in (i - 1, i + 1) if 0 <= k < len(tokens) and "\n" not in tokens.gaps[max(i, k)]]
    return frequent and not any(_name_cue(tokens, k) for k in neighbours)


def _name_cue(tokens: Tokens, k: int) -> bool:
    """Whether token k, beside a word in lower case, shows that word is a name's."""
    lower = tokens.lowers[k]
    return len(lower) == 1 or lower in name_words() or lower in postprocess.CUES or lower in postprocess.titles()


def possessive(tokens: Tokens, i: int) -> bool:
    """Whether token i is the "s" of an ordinary or clinical word's possessive ("pt's",
    "Troponin's"); a name's stays with the name ("St. Mary's")."""
    return tokens.lowers[i] == "s" and tokens.gaps[i] in ("'", "’") and i > 0 and never_a_name(tokens.lowers[i - 1])


def joined_run(text: str, tokens: Tokens, i: int, runs: dict[int, tuple[int, int]] | None = None) -> tuple[int, int]:
    """The offsets of token i with its neighbours joined to it by a single "/", "-" or "." ("3/12",
    "15/15", "10-12"): what a context exception judges, as it judges a rule's whole match.

    With `runs` (per token, its run's offsets, filled here) each run is walked once, not once per
    token of it: a note of "1/1/1/..." stays linear."""
    if runs is not None and i in runs:
        return runs[i]
    left = right = i
    while left > 0 and tokens.gaps[left] in WEAK_JOINS:
        left -= 1
    while right + 1 < len(tokens) and tokens.gaps[right + 1] in WEAK_JOINS:
        right += 1
    bounds = tokens.starts[left], tokens.ends[right]
    if runs is not None:
        runs.update(dict.fromkeys(range(left, right + 1), bounds))
    return bounds


def weakest_part(text: str, tokens: Tokens, rule_cats: Sequence[str | None], scores: Sequence[float]) -> Sequence[float]:
    """The scores with each weak match's parts given the lowest of their scores, so that a weak
    rule's match ("12/18", "7/22/93") is confirmed whole or not at all: its parts are runs of
    tokens only weak rules flagged, joined by a single "/", "-" or ".".  (Confirming a match when
    any of its parts scored above the threshold let ranges such as "12-18" through on one part;
    docs/classifier.md.)"""
    weak = [i for i, c in enumerate(rule_cats) if c is not None and c.endswith(WEAK)]
    if len(weak) < 2:
        return scores
    out = list(scores)
    run = [weak[0]]
    for i in weak[1:] + [-1]:  # -1 closes the last run
        if i == run[-1] + 1 and tokens.gaps[i] in WEAK_JOINS:
            run.append(i)
            continue
        if len(run) > 1:
            low = min(out[k] for k in run)
            for k in run:
                out[k] = low
        run = [i]
    return out


def rule_categories(tokens: Tokens, spans: Sequence[Span], confirm: frozenset[str] = frozenset()) -> list[str | None]:
    """Per token: the category of a rule span overlapping it (highest priority), else None.  A
    token only spans of the `confirm` rules cover gets their category marked weak ("DATE?"): the
    classifier scores it, with that as a feature."""
    n, starts = len(tokens), tokens.starts
    covered: list[str | None] = [None] * n
    weak: list[str | None] | None = None  # made for the notes with a span of the `confirm` rules only
    for span in spans:
        if span.source in confirm:
            if weak is None:
                weak = [None] * n
            into = weak
        else:
            into = covered
        i = bisect.bisect_right(tokens.ends, span.start)
        while i < n and starts[i] < span.end:
            old = into[i]
            if old is None or RANK.get(span.category, 99) < RANK.get(old, 99):
                into[i] = span.category
            i += 1
    if weak is None:
        return covered
    return [c if c is not None or w is None else w + WEAK for c, w in zip(covered, weak)]


@lru_cache(maxsize=4)
def _load_cached(path: str, mtime: float) -> Model:  # mtime: a rewritten file is loaded again
    return Model.load(path)


def load_model(path: str | Path | None = None) -> Model:
    """The model at `path`, or the one shipped in the package; loaded once per process."""
    target = Path(path) if path else DEFAULT_MODEL
    if not target.is_file():
        raise ConfigError(f"classifier.model: model file not found: {target}")
    return _load_cached(str(target.resolve()), target.stat().st_mtime)


def load_detector(
    config: ClassifierConfig, lists: Mapping[str, Sequence[str]], excused: Excused | None = None, policy: Policy | None = None
) -> SvmDetector:
    """The detector the pipeline runs after the rules: `config.model` or the shipped model, its
    detections subject to the rules' context exceptions (`excused`) when given, under `policy`
    (default: the shipped rules/classifier.toml)."""
    return SvmDetector(load_model(config.model), lists, config.threshold, excused, policy)


def build_detector(context) -> SvmDetector:
    """The detector of a pipeline being built (an :class:`anonymizer.registry.BuildContext`): its
    policy read from the context's rules directory and checked against its rules (the enabled
    patterns, the disabled ones, the honorifics) before any note is read."""
    patterns = [rule.name for rule in context.patterns.rules] + list(context.detectors.disabled_patterns)
    policy = read_policy(context.rules_dir, rule_names(context.rules_dir, patterns))
    return load_detector(context.classifier, context.lists, context.patterns.excused, policy)
