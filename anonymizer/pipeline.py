"""The pipeline: named detectors, then the classifier on what they left, then union and replacement.

:func:`anonymize_patient` is the unit of work: one patient's record and notes in, anonymized notes
and their spans out, with no I/O.  The run, reprocessing and evaluation all call it.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Mapping, Protocol, Sequence

from anonymizer.budget import NoteBudget, check, spending
from anonymizer.detectors import Detector
from anonymizer.detectors.patterns import PatternDetector
from anonymizer.normalize import VERSION as VIEW_VERSION
from anonymizer.normalize import NormalizedText, normalize
from anonymizer.record import Note, NoteResult, PatientRecord
from anonymizer.registry import DETECTORS, SHIPPED, BuildContext, DetectorRegistry
from anonymizer.replace import replace_with_tags
from anonymizer.resources import data_dir
from anonymizer.rules import extra_files, extra_folders
from anonymizer.settings import ClassifierConfig, ConfigError, DetectorsConfig, ReplaceConfig
from anonymizer.spans import MergedSpan, Span, union
from anonymizer.vocabulary import CLASSIFIER_DATA

log = logging.getLogger(__name__)

class Classifier(Protocol):
    """Labels what the rules left; it sees their spans to skip (and use as context) what they found,
    and decides which spans of the weak rules stand (`combine`)."""

    name: str

    def __call__(self, text: str, record: PatientRecord, rule_spans: Sequence[Span]) -> list[Span]: ...

    def patient_spans(self, record: PatientRecord, notes: Sequence[tuple[str, Sequence[Span]]]) -> list[list[Span]]: ...

    def combine(self, rule_spans: Sequence[Span], own: Sequence[Span]) -> list[Span]: ...

@dataclass
class Pipeline:
    detectors: list[Detector]
    classifier: Classifier | None = None
    digest: str = ""  # identifies configuration, rules and model: a change reprocesses every note
    # replace(text, merged spans, record): tags, or surrogates derived from the patient's record.
    replace: Callable[[str, Sequence[MergedSpan], PatientRecord], str] = field(default=replace_with_tags)
    # (text, start, end, category) -> whether the rules' context exceptions drop that text
    excused: Callable[[str, int, int, str], bool] | None = None
    note_timeout: float = DetectorsConfig.note_timeout  # seconds per note, all stages (anonymizer.budget)

    def rule_spans(self, text: str, record: PatientRecord) -> list[Span]:
        return [span for detector in self.detectors for span in detector(text, record)]

    def source_digest(self, text: str, record: PatientRecord) -> str:
        """What a note's output depends on: its text, its patient's record and the pipeline."""
        return hashlib.sha256("\x1f".join((self.digest, record.digest(), text)).encode()).hexdigest()


def anonymize_patient(
    record: PatientRecord, notes: Iterable[Note], pipeline: Pipeline, digests: Sequence[str] | None = None
) -> list[NoteResult]:
    """Anonymize one patient's notes. A note whose detection fails is returned with its error.

    The rules run note by note; the classifier then sees all of the patient's notes at once, so a
    name it is confident about in one note is also removed where the same patient's notes repeat it.
    `digests`: the notes' source digests, if the caller has worked them out already.  Each note
    has `pipeline.note_timeout` seconds for all its stages (anonymizer.budget); a note past it
    fails with NoteTimeout.
    """
    notes = list(notes)
    if digests is None:
        digests = [pipeline.source_digest(note.text, record) for note in notes]
    budgets = [NoteBudget(pipeline.note_timeout, len(note.text)) for note in notes]
    # Detection runs on what a reader sees (anonymizer.normalize); replacement on the stored text.
    views: list[NormalizedText | Exception] = [_attempt(_within, [b], normalize, n.text) for n, b in zip(notes, budgets)]
    found: list[list[Span] | Exception] = [
        v if isinstance(v, Exception) else _attempt(_within, [b], pipeline.rule_spans, v.text, record) for v, b in zip(views, budgets)
    ]
    if pipeline.classifier is not None:  # (a failed note's view is never read)
        _classify(pipeline.classifier, record, [getattr(v, "text", "") for v in views], found, budgets)
    results = []
    for note, view, spans, digest, budget in zip(notes, views, found, digests, budgets):
        done = spans if isinstance(spans, Exception) else _attempt(_within, [budget], _replace, pipeline, view, spans, record)
        if isinstance(done, Exception):
            log.warning("note %s failed: %s", note.note_id, type(done).__name__)
            results.append(NoteResult(note.note_id, note.patient_id, None, (), digest, _reason(done)))
        else:
            merged, text = done
            results.append(NoteResult(note.note_id, note.patient_id, text, merged, digest))
    return results


def _classify(classifier: Classifier, record: PatientRecord, texts: list[str], found: list, budgets: list[NoteBudget]) -> None:
    """Add the classifier's spans to each note's rule spans (less the weak rule spans it does not
    confirm), in place; a failure fails its note only.  The patient's pass has what the notes have
    left together; on a failure (or that running out) each note is redone within its own."""
    ok = [i for i, spans in enumerate(found) if not isinstance(spans, Exception)]
    try:
        with spending([budgets[i] for i in ok]):
            extra = classifier.patient_spans(record, [(texts[i], found[i]) for i in ok])
            combined = [classifier.combine(found[i], spans) for i, spans in zip(ok, extra)]
    except Exception:  # noqa: BLE001 - retry note by note, so one bad note cannot fail the others
        combined = [_attempt(_within, [budgets[i]], _classify_one, classifier, texts[i], record, found[i]) for i in ok]
    for i, spans in zip(ok, combined):
        found[i] = spans


def _classify_one(classifier: Classifier, text: str, record: PatientRecord, rule_spans: list[Span]) -> list[Span]:
    """One note's rule spans and the classifier's, less the weak rule spans it does not confirm."""
    return classifier.combine(rule_spans, classifier(text, record, rule_spans))


def _within(budgets: list[NoteBudget], function: Callable, *args: object) -> object:
    """Call within what these notes have left of their time budget."""
    with spending(budgets):
        return function(*args)


def _replace(
    pipeline: Pipeline, view: NormalizedText, spans: list[Span], record: PatientRecord
) -> tuple[tuple[MergedSpan, ...], str]:
    """The view's spans as offsets into the stored text, merged, and the stored text replaced.

    Removing invisible characters can also join two words the stored text kept apart ("Tan", a
    zero-width space, "Wei"): then the rules run on the stored text too."""
    extra = view.widen(pipeline.rule_spans(view.original, record)) if view.removed else []
    merged = tuple(union([*view.to_original(spans), *extra]))
    check()
    return merged, pipeline.replace(view.original, merged, record)


def _attempt(function: Callable, *args: object) -> object:
    """Call, returning the exception instead of raising: every failure must become a failure row."""
    try:
        return function(*args)
    except Exception as exc:  # noqa: BLE001
        return exc


def _reason(exc: Exception) -> str:
    # Exception messages may quote the text they failed on; only our own messages are safe to keep.
    safe = getattr(exc, "safe_message", None)
    return f"{type(exc).__name__}: {safe}" if safe else type(exc).__name__


def build_pipeline(
    detectors: DetectorsConfig,
    lists: Mapping[str, Sequence[str]],
    classifier: ClassifierConfig,
    rules_dir: Path | None = None,
    replace: ReplaceConfig | None = None,
    registry: DetectorRegistry | None = None,
    extra_rules: Sequence[str | Path] = (),
) -> Pipeline:
    """Compile the rules once and build the enabled detectors of the catalogue, in its order.

    `registry`: the catalogue (anonymizer.registry); by default the one every run uses.
    `extra_rules`: a hospital's own folders of rules (``[rules] extra``), added to the packaged ones."""
    registry = DETECTORS if registry is None else registry
    unknown = set(detectors.disabled) - set(registry.names())
    if unknown:
        raise ConfigError(f"detectors.disabled: unknown detector {sorted(unknown)[0]!r} (one of {', '.join(registry.names())})")
    rules = rules_dir or data_dir("rules")
    surrogates = replace is not None and replace.mode == "surrogates"
    if surrogates:
        from anonymizer.surrogates import read_secret

        read_secret(replace.secret_env)  # no secret: stop before anything is loaded or written
    extra = extra_folders(extra_rules)
    patterns = PatternDetector.from_rules(rules, disabled=detectors.disabled_patterns, extra=extra)
    context = BuildContext(rules, detectors, lists, classifier, patterns, extra)
    built, svm = registry.build(context, detectors.disabled)
    enabled = [d for group in built.values() for d in group]
    # The model is named by its own content digest, never by the object (whose repr varies).
    model = getattr(svm, "digest", None)
    catalogue = () if registry.signature() == SHIPPED else (registry.signature(),)  # the shipped one: as before it existed
    entries = sorted((k, sorted(v)) for k, v in lists.items())
    digest = _digest(rules, detectors, entries, classifier, model, VIEW_VERSION, *catalogue, extra=extra)
    if not surrogates:
        return Pipeline(enabled, svm, digest, excused=patterns.excused, note_timeout=detectors.note_timeout)
    from anonymizer.surrogates import build_replacer

    # The replacer checks its surrogates with the run's own record detectors (built anew if disabled).
    replacer = build_replacer(replace, rules, patterns.date_pattern, detectors.name_threshold, built.get("record"))
    # The replacer's digest covers its settings and a keyed fingerprint of the secret (never the secret).
    return Pipeline(
        enabled, svm, hashlib.sha256(f"{digest}:{replacer.digest}".encode()).hexdigest(), replacer, patterns.excused, detectors.note_timeout
    )


def _digest(rules: Path, *parts: object, extra: Sequence[Path] = ()) -> str:
    """The packaged rule files and word lists (the vocabulary the detectors and the classifier's
    vetoes read, anonymizer/classifier/data), the parts, then the extra folders' rule files, each
    named by its folder's position and its own name."""
    h = hashlib.sha256()
    for path in [*sorted(rules.rglob("*")), *sorted(CLASSIFIER_DATA.glob("*.txt"))]:
        if path.is_file() and path.suffix in (".toml", ".txt"):
            h.update(path.name.encode())
            h.update(path.read_bytes())
    for part in parts:
        h.update(repr(part).encode())
    for position, folder in enumerate(extra):  # by position and file name: moving a folder changes nothing
        for path in extra_files([folder]):
            h.update(f"extra {position} {path.name}".encode())
            h.update(path.read_bytes())
    return h.hexdigest()
