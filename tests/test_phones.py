"""The phones detector: its regions as configuration, and what it leaves to the regex rules.

Its cases (numbers found and numbers that are not phones) are in tests/data/cases/phones.toml."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from anonymizer import ClassifierConfig, Deidentifier, DetectorsConfig
from anonymizer.config import parse_config
from anonymizer.detectors.phones import CANDIDATE, PhoneDetector
from anonymizer.pipeline import build_pipeline
from anonymizer.record import empty_record
from anonymizer.settings import ConfigError

RECORD = empty_record("p1")
MINIMAL = {
    "source": {"url": "sqlite:///x.db"},
    "patients": {"table": "p", "id": "id", "names": ["n"]},
    "notes": {"table": "n", "id": "id", "patient": "p", "text": "t"},
    "target": {"url": "sqlite:///y.db"},
}


def found(detector: PhoneDetector, text: str) -> list[tuple[str, str]]:
    return [(text[s.start : s.end], s.rule) for s in detector(text, RECORD)]


def test_a_number_is_judged_by_the_configured_regions_only() -> None:
    text = "Niece 0918 555 2044; son 617/555/0143."
    assert found(PhoneDetector(["US"]), text) == [("617/555/0143", "us")]
    assert found(PhoneDetector(["PH"]), text) == [("0918 555 2044", "ph")]
    assert found(PhoneDetector([]), text) == []


def test_the_first_region_that_knows_the_number_explains_it() -> None:
    assert found(PhoneDetector(["PH", "IN"]), "0918 555 2044") == [("0918 555 2044", "ph")]
    assert found(PhoneDetector(["IN", "PH"]), "0918 555 2044") == [("0918 555 2044", "in")]


def test_a_note_without_nine_digits_in_a_row_is_not_searched() -> None:
    detector = PhoneDetector(["US"])
    assert found(detector, "BP 120/80, HR 72, 555-0143") == []
    assert detector.judge.cache_info().misses == 0


def test_regions_come_from_the_configuration_file() -> None:
    config = parse_config({**MINIMAL, "detectors": {"phone_regions": ["GB", "AU"]}})
    assert config.detectors.phone_regions == ("GB", "AU")
    assert parse_config(MINIMAL).detectors.phone_regions == DetectorsConfig().phone_regions
    with pytest.raises(ConfigError, match="detectors.phone_regions: 'sg' is out of range"):
        parse_config({**MINIMAL, "detectors": {"phone_regions": ["sg"]}})
    with pytest.raises(ConfigError, match="detectors.phone_regions: expected a list"):
        parse_config({**MINIMAL, "detectors": {"phone_regions": "SG"}})


def test_a_region_libphonenumber_does_not_know_stops_the_build() -> None:
    with pytest.raises(ConfigError, match="'XQ' is not a region libphonenumber knows"):
        build_pipeline(DetectorsConfig(phone_regions=("SG", "XQ")), {}, ClassifierConfig(enabled=False))


def test_the_detector_runs_in_the_pipeline_and_can_be_disabled() -> None:
    text = "Sister 080-5555-0199."  # an Indian landline: no regex rule's shape
    rules_only = ClassifierConfig(enabled=False)
    assert Deidentifier.default(classifier=rules_only).deidentify(text, RECORD).text == "Sister [PHONE]."
    off = DetectorsConfig(disabled=("phones",))
    assert Deidentifier.default(detectors=off, classifier=rules_only).deidentify(text, RECORD).text == text


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("0123456789 -./()x+:\tab\n")), max_size=120))
def test_the_windows_find_what_a_search_of_the_whole_note_finds(text: str) -> None:
    detector = PhoneDetector(DetectorsConfig().phone_regions)
    whole = [(m.start(), m.end()) for m in CANDIDATE.finditer(text) if detector.judge(m.group())]
    assert [(s.start, s.end) for s in detector(text, RECORD)] == whole
