"""The settings the detection core takes: plain values, checked when they are made.

The pipeline, the detectors, the classifier and the surrogates know these and nothing of the
configuration file (:mod:`anonymizer.config` reads that file into them), so a notebook or another
program can build them directly.  A value out of its range is a one-line :class:`ConfigError`:
a value that switched a safeguard off must never run.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path


class ConfigError(ValueError):
    """The configuration, or the schema it describes, is not usable. The message is one line."""


def check_range(ok: bool, key: str, value: object, expected: str) -> None:
    """Refuse an out-of-range value at load: a value that switches a safeguard off must not run.

    (A zero name threshold turns name matching off, a zero batch size ends a run with no notes.)
    """
    if not ok:
        raise ConfigError(f"{key}: {value!r} is out of range (must be {expected})")


@dataclass(frozen=True)
class DetectorsConfig:
    disabled: tuple[str, ...] = ()  # detector names: record, honorific, regex, phones, lists
    disabled_patterns: tuple[str, ...] = ()  # names of [[pattern]] blocks in rules/
    name_threshold: float = 0.33  # edit-distance ratio d / min(|n|, |w|) below which a word is a name
    note_timeout: float = 5.0  # seconds one note may spend in all detection and replacement (anonymizer.budget)
    # regions whose national phone numbers (no country code) the phones detector knows: ISO 3166 codes
    phone_regions: tuple[str, ...] = ("SG", "US", "GB", "MY", "IN", "CN", "PH", "ID", "AU")

    def __post_init__(self) -> None:
        check_range(0 < self.name_threshold < 1, "detectors.name_threshold", self.name_threshold, "between 0 and 1, exclusive")
        check_range(
            math.isfinite(self.note_timeout) and self.note_timeout > 0,
            "detectors.note_timeout",
            self.note_timeout,
            "a positive number of seconds",
        )
        for region in self.phone_regions:
            check_range(
                isinstance(region, str) and len(region) == 2 and region.isalpha() and region.isupper(),
                "detectors.phone_regions",
                region,
                "a region's two capital letters, e.g. 'SG'",
            )


@dataclass(frozen=True)
class ClassifierConfig:
    enabled: bool = True
    model: str | None = None  # path to a trained model; None means the model shipped in the package
    threshold: float | None = None  # decision threshold; None means the one stored with the model

    def __post_init__(self) -> None:
        check_range(self.threshold is None or math.isfinite(self.threshold), "classifier.threshold", self.threshold, "a finite number")


REPLACE_MODES = ("tags", "surrogates")
YEAR_MODES = ("keep", "shift")
MAX_DATE_SHIFT = 36_500  # days (a century): further back, shifted dates leave the calendar's range


@dataclass(frozen=True)
class ReplaceConfig:
    """How spans are replaced: by tags ("[PATIENT]") or by consistent surrogates (anonymizer.surrogates)."""

    mode: str = "tags"  # "tags" or "surrogates"
    date_shift_min: int = 100  # days every date of a patient moves back: at least this many ...
    date_shift_max: int = 1000  # ... and at most this many (a per-patient offset from the keyed hash)
    years: str = "shift"  # a year on its own ("s/p MI 1992"): "keep" it or "shift" it with the dates
    secret_env: str = "ANONYMIZER_SECRET"  # environment variable holding the key of the surrogates

    def __post_init__(self) -> None:
        if self.mode not in REPLACE_MODES:
            raise ConfigError(f"replace.mode: '{self.mode}' is not one of {', '.join(REPLACE_MODES)}")
        if self.years not in YEAR_MODES:
            raise ConfigError(f"replace.years: '{self.years}' is not one of {', '.join(YEAR_MODES)}")
        if not 1 <= self.date_shift_min <= self.date_shift_max:
            raise ConfigError("replace: need 1 <= date_shift_min <= date_shift_max")
        check_range(self.date_shift_max <= MAX_DATE_SHIFT, "replace.date_shift_max", self.date_shift_max, f"at most {MAX_DATE_SHIFT} days")
        if not self.secret_env:
            raise ConfigError("replace.secret_env: empty variable name")


def read_text_file(path: str | Path, what: str) -> str:
    """A user's file as UTF-8 text, or a one-line ConfigError naming its first bad line, never
    quoting it: a Latin-1 or binary file (a NUL byte) would be read wrong, or quote PHI."""
    try:
        raw = Path(path).read_bytes()
    except OSError as exc:
        raise ConfigError(f"{what}: cannot read {path} ({exc.strerror})") from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        bad = exc.start
    else:
        bad = raw.find(b"\x00")
    if bad >= 0:
        line = raw[:bad].count(b"\n") + 1
        raise ConfigError(f"{what}: {path}: line {line} is not UTF-8 text; save it as UTF-8")
    return text
