"""The catalogue of detectors: every detector the pipeline can run, by name, in the order it runs.

:data:`DETECTORS` is the one list of them.  :func:`anonymizer.pipeline.build_pipeline` loops over
it, ``[detectors] disabled`` names its entries, and the spans a detector returns carry its entry's
name (``record:name``, ``regex:date_dmy``), which is what ``audit summary`` counts.  An entry is a
factory: called once per run with what the rules and the configuration give
(:class:`BuildContext`), it returns the detectors that then run on every note.

Adding a detector is one module with its factory and one line here (or, from outside the package,
one call of :func:`register_detector`)::

    DETECTORS.register("toy", lambda context: [ToyDetector()], finds="toy words")

Entries of stage ``"rules"`` run note by note and their spans are unioned; the one entry of stage
``"classifier"`` (``svm``) runs after them, on what they left (see ``pipeline.Classifier``).

The record detectors are built by :func:`record_detectors` for the run, for ``audit leaks``
(:func:`anonymizer.audit.leak_detectors`) and for the surrogate replacer's leak check alike.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator, Mapping, Sequence

from anonymizer.detectors import Detector
from anonymizer.detectors.honorifics import HonorificDetector
from anonymizer.detectors.lists import ListDetector
from anonymizer.detectors.names import RecordNames
from anonymizer.detectors.places import PlaceDetector
from anonymizer.detectors.values import RecordValues
from anonymizer.settings import ClassifierConfig, DetectorsConfig

if TYPE_CHECKING:
    import regex

    from anonymizer.detectors.patterns import PatternDetector

RULES = "rules"  # run note by note; their spans are unioned
CLASSIFIER = "classifier"  # runs after the rules on what they left; at most one is enabled
STAGES = (RULES, CLASSIFIER)


@dataclass(frozen=True)
class BuildContext:
    """What a detector factory may build from: read once per run, shared by every factory."""

    rules_dir: Path
    detectors: DetectorsConfig
    lists: Mapping[str, Sequence[str]]
    classifier: ClassifierConfig
    patterns: PatternDetector  # rules/patterns.toml compiled (less disabled_patterns): dates, context exceptions
    extra_rules: tuple[Path, ...] = ()  # a hospital's own folders of rules, read after rules_dir (anonymizer.rules)


@dataclass(frozen=True)
class DetectorEntry:
    """One line of the catalogue: a name, the factory of its detectors, and what they find.

    `build(context)` returns a list of detectors, each named `name` (stage "rules"), or one
    classifier or None (stage "classifier").  `version`: change it when a detector added from
    outside the package changes its output, so notes written with the old one are redone."""

    name: str
    build: Callable[[BuildContext], Any]
    finds: str = ""
    stage: str = RULES
    version: str = ""

    def __post_init__(self) -> None:
        if not self.name or not self.name.isidentifier():
            raise ValueError(f"detector name {self.name!r}: a word of letters, digits and underscores")
        if self.stage not in STAGES:
            raise ValueError(f"detector {self.name!r}: stage {self.stage!r} is not one of {', '.join(STAGES)}")

    def signature(self) -> tuple[str, ...]:
        build = self.build
        return (self.name, self.stage, self.version, f"{getattr(build, '__module__', '')}.{getattr(build, '__qualname__', repr(build))}")


class DetectorRegistry:
    """An ordered, named catalogue of detector factories."""

    def __init__(self, entries: Sequence[DetectorEntry] = ()) -> None:
        self._entries = {}
        for entry in entries:
            self.add(entry)

    def add(self, entry: DetectorEntry, *, before: str | None = None) -> DetectorEntry:
        if entry.name in self._entries:
            raise ValueError(f"detector {entry.name!r} is already registered")
        if entry.stage == CLASSIFIER and any(e.stage == CLASSIFIER for e in self):
            raise ValueError(f"detector {entry.name!r}: there is a classifier already ({self.classifier_names()[0]})")
        if before is None:
            self._entries[entry.name] = entry
        else:
            self[before]  # an unknown name raises
            items = list(self._entries.items())
            at = [name for name, _ in items].index(before)
            self._entries = dict([*items[:at], (entry.name, entry), *items[at:]])
        return entry

    def register(
        self,
        name: str,
        build: Callable[[BuildContext], Any],
        *,
        finds: str = "",
        stage: str = RULES,
        version: str = "",
        before: str | None = None,
    ) -> DetectorEntry:
        """Add a detector factory under `name` (last, or before the entry named `before`)."""
        return self.add(DetectorEntry(name, build, finds, stage, version), before=before)

    def unregister(self, name: str) -> DetectorEntry:
        self[name]
        return self._entries.pop(name)

    def copy(self) -> DetectorRegistry:
        return DetectorRegistry(list(self))

    def __getitem__(self, name: str) -> DetectorEntry:
        try:
            return self._entries[name]
        except KeyError:
            raise KeyError(f"no detector {name!r} (one of {', '.join(self.names())})") from None

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[DetectorEntry]:
        return iter(list(self._entries.values()))

    def __len__(self) -> int:
        return len(self._entries)

    def names(self) -> tuple[str, ...]:
        return tuple(self._entries)

    def classifier_names(self) -> tuple[str, ...]:
        return tuple(e.name for e in self if e.stage == CLASSIFIER)

    def signature(self) -> tuple[tuple[str, ...], ...]:
        """Identifies the catalogue (names, order, factories, versions) for the pipeline's digest."""
        return tuple(entry.signature() for entry in self)

    def build(self, context: BuildContext, disabled: Sequence[str] = ()) -> tuple[dict[str, list[Detector]], Any]:
        """The enabled entries' detectors by entry name, in catalogue order, and the classifier (or None).

        Each detector must carry its entry's name: its spans are explained, counted and disabled by it."""
        rules: dict[str, list[Detector]] = {}
        classifier = None
        for entry in self:
            if entry.name in disabled:
                continue
            built = entry.build(context)
            if entry.stage == CLASSIFIER:
                classifier = built
                built = [] if built is None else [built]
            else:
                rules[entry.name] = built = list(built)
            for detector in built:
                if getattr(detector, "name", None) != entry.name:
                    raise ValueError(f"detector {entry.name!r} built a detector named {getattr(detector, 'name', None)!r}")
        return rules, classifier


def record_detectors(
    rules_dir: Path, name_threshold: float, date_pattern: regex.Pattern[str], excused: Callable[[str, int, int, str], bool] | None = None
) -> list[Detector]:
    """The detectors of the patient's own record: names (and relatives') with their spelling
    variants and nicknames, then its IDs, phones, dates and addresses (whole, and in parts).  The
    run, ``audit leaks`` and the surrogate replacer's leak check all use these; with `excused`
    (the rules' context exceptions, as the run and the audit pass them) a date the exceptions drop
    is no record date ("fever 4/7" is a duration)."""
    return [*RecordNames.pair(rules_dir, name_threshold), RecordValues(date_pattern=date_pattern, excused=excused)]


def _record(c: BuildContext) -> list[Detector]:
    return record_detectors(c.rules_dir, c.detectors.name_threshold, c.patterns.date_pattern, c.patterns.excused)


def _honorific(c: BuildContext) -> list[Detector]:
    return [HonorificDetector.from_rules(c.rules_dir, c.extra_rules)]


def _regex(c: BuildContext) -> list[Detector]:
    return [c.patterns]


def _phones(c: BuildContext) -> list[Detector]:
    from anonymizer.detectors.phones import PhoneDetector  # phonenumbers: only when enabled

    return [PhoneDetector(c.detectors.phone_regions)]


def _lists(c: BuildContext) -> list[Detector]:
    return [ListDetector(c.lists)]


def _places(c: BuildContext) -> list[Detector]:
    return [PlaceDetector.from_rules(c.rules_dir)]


def _svm(c: BuildContext) -> Any:
    if not c.classifier.enabled:
        return None
    from anonymizer.classifier.model import build_detector  # numpy and the model: only when enabled

    return build_detector(c)  # its policy (rules/classifier.toml) checked against c's rules


# The catalogue, in the order the detectors run.  One line a detector.
DETECTORS = DetectorRegistry(
    [
        DetectorEntry(
            "record", _record, "the patient's and relatives' names, variants and nicknames; the record's IDs, phones, dates, addresses"
        ),
        DetectorEntry("honorific", _honorific, "names after mr, mdm, dr, prof, ..."),
        DetectorEntry("regex", _regex, "IDs, phones, e-mail, URLs, dates, ages over 89 (rules/patterns.toml)"),
        DetectorEntry("phones", _phones, "phone numbers without a country code, valid in [detectors] phone_regions (phonenumbers)"),
        DetectorEntry("lists", _lists, "configured doctors, hospitals, places ([[lists]])"),
        DetectorEntry("places", _places, "towns after a cue, institutions by suffix, universities, addresses (rules/places.toml)"),
        DetectorEntry("svm", _svm, "what the rules left: a linear SVM over each word's context", stage=CLASSIFIER),
    ]
)

# The shipped catalogue's signature: while the catalogue is this one, it adds nothing to the
# pipeline's digest (so notes written before the catalogue existed are not redone).
SHIPPED = DETECTORS.signature()


# Add a detector factory to the catalogue every pipeline is built from (DETECTORS.register).  A
# process pool's workers build their own pipeline: under ``spawn`` they must register the same
# detectors (in a module they import), or the run stops at the digest check.
register_detector = DETECTORS.register
