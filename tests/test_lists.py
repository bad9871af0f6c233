import logging

import pytest
from hypothesis import given
from hypothesis import strategies as st

from anonymizer.detectors.lists import _HOSPITAL_ACRONYM, ListDetector, _acronym_spans, acronyms, load_list_file
from anonymizer.record import PatientRecord
from anonymizer.spans import Span

RECORD = PatientRecord("1")
LISTS = {
    "DOCTOR": ["Quiley", "Tan Wei Ming"],
    "HOSPITAL": ["Tan Tock Seng Hospital", "TTSH", "SGH"],
    "LOCATION": ["Tan Tock Seng", "Ang Mo Kio", "Ang Mo Kio Avenue 3", "Novena   "],
}


@pytest.fixture(scope="module")
def lists():
    return ListDetector(LISTS)


def found(detector, text):
    return [(text[s.start : s.end], s.category, s.source) for s in detector(text, RECORD)]


def test_entries_match_ignoring_case_and_whitespace(lists):
    text = "Seen at tan  tock\nseng HOSPITAL by dr QUILEY; lives near Novena."
    assert found(lists, text) == [
        ("tan  tock\nseng HOSPITAL", "HOSPITAL", "lists:hospital"),
        ("QUILEY", "DOCTOR", "lists:doctor"),
        ("Novena", "LOCATION", "lists:location"),
    ]


def test_longest_entry_wins(lists):
    text = "Ang Mo Kio Avenue 3 and Ang Mo Kio Avenue 9; Tan Tock Seng area"
    assert [t for t, _, _ in found(lists, text)] == ["Ang Mo Kio Avenue 3", "Ang Mo Kio", "Tan Tock Seng"]


def test_only_whole_words(lists):
    assert found(lists, "TTSHx, sghospital, Quileys, xTanWeiMing") == []


def test_a_listed_hospital_is_found_by_its_initials_from_three():
    """Three initials or more (of, and, the give none), three only where a place is named (the
    cases of tests/data/cases/lists.toml): they are clinical abbreviations as often ("SAH"); a word
    is a word; places and people give no acronym."""
    everyday = frozenset({"icu"})
    categories = {
        "tan tock seng hospital": "HOSPITAL",
        "institute of the mental health hospital": "HOSPITAL",  # "imhh"
        "st anne's hospital": "HOSPITAL",  # "sah": three
        "intensive care unit": "HOSPITAL",  # "icu": an everyday abbreviation, and three
        "children and teens hospital": "HOSPITAL",  # "cth"
        "care and teaching hospital": "HOSPITAL",  # "cth" again: three
        "ang mo kio avenue": "LOCATION",
        "lee kok hua tan": "DOCTOR",
    }
    assert acronyms(categories, everyday) == {"ttsh": "HOSPITAL", "imhh": "HOSPITAL", "sah": "HOSPITAL", "cth": "HOSPITAL"}
    detector = ListDetector({"HOSPITAL": ["Tan Tock Seng Hospital"]})
    assert found(detector, "from TTSH, seen at ttsh") == [("TTSH", "HOSPITAL", "lists:hospital"), ("ttsh", "HOSPITAL", "lists:hospital")]


def test_an_entry_in_two_lists_keeps_the_higher_priority_category():
    detector = ListDetector({"LOCATION": ["Farrer Park"], "HOSPITAL": ["farrer  park"]})
    assert found(detector, "at Farrer Park") == [("Farrer Park", "HOSPITAL", "lists:hospital")]


def test_short_entries_are_ignored_and_counted_without_their_text(caplog):
    with caplog.at_level(logging.INFO, logger="anonymizer.detectors.lists"):
        detector = ListDetector({"LOCATION": ["SG", "  ", "Bedok"]})
    assert found(detector, "SG Bedok") == [("Bedok", "LOCATION", "lists:location")]
    assert "ignored 2 LOCATION entries" in caplog.text
    assert "SG" not in caplog.text


def test_no_entries_means_no_spans():
    assert ListDetector({})("anything", RECORD) == []
    assert ListDetector({"DOCTOR": ["Dr"]})("Dr Dr", RECORD) == []


def test_an_entry_of_invisible_characters_finds_nothing():
    assert ListDetector({"LOCATION": ["\u200b \u200b"]})("", RECORD) == []
    assert ListDetector({"LOCATION": ["\u200b \u200b", "Bedok"]})("at Bedok", RECORD) == [Span(3, 8, "LOCATION", "lists", "location")]


def test_load_list_file(tmp_path):
    path = tmp_path / "places.txt"
    path.write_text("\ufeff# places in Singapore\nBedok  \n\n  Blk 5 #02-01\nTampines\n", encoding="utf-8")
    assert load_list_file(path) == ["Bedok", "  Blk 5 #02-01", "Tampines"]


ENTRIES = st.lists(st.text(min_size=1, max_size=15), max_size=8)


@given(st.text(max_size=200), ENTRIES, ENTRIES)
def test_never_fails_and_stays_in_bounds(text, doctors, places):
    detector = ListDetector({"DOCTOR": doctors, "LOCATION": places + [text[:10]]})
    for span in detector(text, RECORD):
        assert 0 <= span.start < span.end <= len(text)
        assert span.category in ("DOCTOR", "LOCATION")


def test_a_staff_part_that_lower_cases_to_no_key_is_read_case_folded():
    """"ſ" matches "s" ignoring case but lower-cases to itself: the part is found by its case-folded form."""
    detector = ListDetector({"DOCTOR": ["Sebastiano Bo"]})
    assert [(s.start, s.end) for s in detector("Dr Sebaſtiano", RECORD)] == [(3, 13)]


@given(st.text(alphabet="TanTockSengHOSPITALquileyAngMoKio ,.-\n3ſK", max_size=80))
def test_ascii_notes_searched_lower_cased_find_what_ignoring_case_finds(text):
    """ASCII notes take the lower-cased search; it must match exactly what the case-insensitive
    pattern matches (the others, with "ſ" or the Kelvin sign, take that pattern itself)."""
    detector = ListDetector({category: entries for category, entries in LISTS.items() if category != "DOCTOR"})
    expected = [(m.start(), m.end()) for m in detector._pattern.finditer(text)]
    assert [(s.start, s.end) for s in detector(text, RECORD)] == expected


STAFF = {"DOCTOR": ["Lee Kok Hua", "Priya Raman", "Chandrasekaran"], "LOCATION": ["Raman Road"]}


def test_staff_names_are_matched_part_by_part_beside_roles():
    detector = ListDetector(STAFF)
    text = "Seen by Priya (resp MO) and Lee/reg/ENT; LEE KH aware. Lives off Raman Road."
    assert found(detector, text) == [
        ("Priya", "DOCTOR", "lists:staff"),
        ("Lee", "DOCTOR", "lists:staff"),
        ("LEE KH", "DOCTOR", "lists:staff"),
        ("Raman Road", "LOCATION", "lists:location"),
    ]


def test_staff_spelling_variants_are_compared_once_per_run(monkeypatch):
    import anonymizer.detectors.lists as lists_module

    detector = ListDetector(STAFF)
    calls = []
    cdist = lists_module.process.cdist
    monkeypatch.setattr(lists_module.process, "cdist", lambda words, *a, **k: calls.append(list(words)) or cdist(words, *a, **k))
    for _ in range(3):
        assert found(detector, "Reviewed by Chandrasekeran (MO).") == [("Chandrasekeran", "DOCTOR", "lists:staff")]
    assert calls == [["chandrasekeran"]]


@given(st.text(alphabet="abhmcHMCABx /&1_-\n", max_size=40))
def test_acronym_search_in_capitals_finds_what_the_lower_case_search_keeps(text: str) -> None:
    """A note not all in lower case is searched for hospital acronyms in capitals only (RE2, with
    the slash and "&" beside the word checked after): the same spans as the lower-cased search's
    matches written in capitals."""
    lower, one_case = text.lower(), text.islower()
    expected = [m.span() for m in _HOSPITAL_ACRONYM.finditer(lower) if one_case or text[m.start() : m.end()].isupper()]
    assert list(_acronym_spans(text, lower, one_case)) == expected
