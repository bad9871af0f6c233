import datetime as dt

import pytest
import regex
from hypothesis import given
from hypothesis import strategies as st

from anonymizer.detectors.patterns import PatternDetector
from anonymizer.detectors.values import _PHONE_GAP, RecordValues, _skeleton
from anonymizer.record import PatientRecord
from anonymizer.resources import data_dir

# A stand-in for PatternDetector.date_pattern: numeric dates and dates with a month name.
MONTH = r"(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.?"
DATE_PATTERN = regex.compile(
    rf"(?i)(?<!\w)(?:\d{{1,4}}[/.\-]\d{{1,2}}(?:[/.\-]\d{{2,4}})?"
    rf"|\d{{1,2}}(?:st|nd|rd|th)?\s+{MONTH},?(?:\s+\d{{2,4}})?"
    rf"|{MONTH}\s+\d{{1,2}}(?:st|nd|rd|th)?,?\s+\d{{2,4}})(?!\w)"
)

RECORD = PatientRecord(
    "1",
    identifiers=("S1234567D",),
    phones=("+65 9876 5432", "6777 1234"),
    dates=(dt.date(1985, 3, 12),),
    addresses=("Blk 123 Ang Mo Kio Avenue 3 #05-12 Singapore 560123", "10 Downing Street, London SW1A 2AA"),
)


@pytest.fixture
def values():
    return RecordValues(DATE_PATTERN)


def found(detector, text, record=RECORD, rule=None):
    return [text[s.start : s.end] for s in detector(text, record) if rule is None or s.rule == rule]


def test_identifier_ignoring_case_spaces_and_dashes(values):
    text = "NRIC S1234567D, s 1234567 d, S-1234567-D; not XS1234567D or S1234567DX"
    assert found(values, text, rule="identifier") == ["S1234567D", "s 1234567 d", "S-1234567-D"]
    assert {s.category for s in values(text, RECORD) if s.rule == "identifier"} == {"ID"}


def test_identifier_negatives(values):
    assert found(values, "no ng tube", PatientRecord("1")) == []
    assert found(values, "no ng tube, S7654321D", RECORD) == []
    # Identifiers too short to tell from ordinary words are not searched for.
    assert found(values, "no ng tube", PatientRecord("1", identifiers=("NG",))) == []


@pytest.mark.parametrize(
    "text",
    ["98765432", "9876 5432", "9876-5432", "+65 9876 5432", "(+65) 9876.5432", "6598765432", "+6598765432",
     "876 5432", "1 65 9876 5432", "065-9876-5432"],
)
def test_phone_in_any_grouping(values, text):
    assert found(values, f"call {text} now", rule="phone") == [text]


def test_phone_digits_inside_another_code_are_not_the_phone(values):
    record = PatientRecord("1", identifiers=("S1234567D",), phones=("+65 9123 4567",))
    assert found(values, "NRIC S1234567D", record) == ["S1234567D"]


def test_phone_with_a_country_code_the_record_lacks(values):
    assert found(values, "tel +65 6777-1234.", rule="phone") == ["+65 6777-1234"]


@pytest.mark.parametrize("text", ["98765433", "9876 5431", "19876543", "198765432", "987 654", "677 1234"])
def test_other_numbers_are_not_the_phone(values, text):
    assert found(values, f"call {text} now", rule="phone") == []


@pytest.mark.parametrize(
    "text",
    ["12/03/1985", "12 Mar 1985", "March 12, 1985", "1985-03-12", "12.03.85", "12th March 85", "03/12/1985",
     "19850312", "12031985", "120385", "12 March"],
)
def test_date_of_birth_in_any_rendering(values, text):
    spans = values(f"DOB {text} ok", RECORD)
    assert [(s.start, s.end, s.category, s.rule) for s in spans] == [(4, 4 + len(text), "DATE", "date")]


@pytest.mark.parametrize("text", ["15/06/2020", "12/03/2020", "13/03/1985", "12 Apr 1985", "March 1985", "1985"])
def test_other_dates_are_not_the_record_date(values, text):
    assert found(values, f"seen {text}", rule="date") == []


def test_two_digit_years_match_in_either_century(values):
    record = PatientRecord("1", dates=(dt.date(1930, 3, 12),))
    assert found(values, "DOB 12/03/30", record) == ["12/03/30"]


def test_address_street_names_unit_and_postal_code(values):
    text = "Lives at Blk 123 ang mo kio ave 3 #05-12, S(560123); moved from Downing St; Mo Kio; kio"
    # the parts, then the runs of the address's words with a number or a street word: block and house number included
    assert found(values, text, rule="address") == [
        "ang mo kio ave 3", "#05-12", "560123", "Downing St", "Blk 123 ang mo kio ave 3 #05-12"
    ]
    assert {s.category for s in values(text, RECORD)} == {"LOCATION"}


@pytest.mark.parametrize(
    "text",
    [
        "Address: 123 Ang Mo Kio Ave 3 #05-12 Singapore 560123",
        "Address: Block 123, Ang Mo Kio Avenue 3, #5-12, Singapore 560123",
        "Address: blk 123 ang mo kio ave. 3\n#05-12 singapore 560123",
    ],
)
def test_a_record_address_goes_whole_in_any_rendering(values, text):
    assert text[9:] in found(values, text, rule="address")


def test_address_words_apart_or_alone_are_no_address(values):
    text = "Mo Kio; took 123 steps; Avenue 3; Street; Singapore 560124"
    assert found(values, text, rule="address") == []


def test_single_word_street_names_need_a_street_word(values):
    assert found(values, "downing is not London", rule="address") == []
    record = PatientRecord("1", addresses=("5 Tan Road", "Jalan Kayu"))
    text = "Dr Tan lives on Tan Rd. near jalan kayu; tan, kayu"
    assert found(values, text, record) == ["Tan Rd.", "jalan kayu"]


def test_an_empty_record_finds_nothing(values):
    assert values("S1234567D 98765432 12/03/1985 Ang Mo Kio", PatientRecord("1")) == []


def test_per_record_patterns_are_built_once_per_patient(monkeypatch):
    import anonymizer.detectors.values as module

    calls = []
    original = module._build_index
    monkeypatch.setattr(module, "_build_index", lambda record, forms=None: calls.append(record) or original(record, forms))
    detector = RecordValues(DATE_PATTERN)
    other = PatientRecord("2", identifiers=("T0123456G",))
    for record in (RECORD, RECORD, RECORD, other, other):
        detector("S1234567D", record)
    assert calls == [RECORD, other]


RECORDS = st.builds(
    PatientRecord,
    st.just("1"),
    identifiers=st.lists(st.text(max_size=12), max_size=2).map(tuple),
    phones=st.lists(st.text(alphabet="0123456789 +-()", max_size=16), max_size=2).map(tuple),
    dates=st.lists(st.dates(), max_size=2).map(tuple),
    addresses=st.lists(st.text(max_size=40), max_size=2).map(tuple),
)


@given(st.text(max_size=200), RECORDS)
def test_never_fails_and_stays_in_bounds(text, record):
    for span in RecordValues(DATE_PATTERN)(text, record):
        assert 0 <= span.start < span.end <= len(text)


@pytest.fixture(scope="module")
def rule_dates():
    """The pipeline's own date pattern, which no match can carry over a line break."""
    return PatternDetector.from_rules(data_dir("rules")).date_pattern


def test_a_date_pattern_is_searched_line_by_line_only_when_no_match_can_cross_a_line(rule_dates):
    assert RecordValues(rule_dates)._line_local
    assert not RecordValues(DATE_PATTERN)._line_local  # its \s may match a line break
    for pattern in (r"\d.\d", r"[^a]\d", r"\d$", r"\W\d", r"(?s)\d", r"(?x)\d", r"[\t-~]\d", r"\d\n"):
        assert not RecordValues(regex.compile(pattern))._line_local, pattern
    record = PatientRecord("1", dates=(dt.date(1985, 3, 12),))
    text = "seen 11/3\n12/3/85 and 3/12 and\nthe 12th; March 12, 1985\n12 Mar"
    assert found(RecordValues(rule_dates), text, record) == ["12/3/85", "3/12", "March 12, 1985", "12 Mar"]


DATE_LINES = st.lists(
    st.sampled_from(["12", "3", "03", "/", "-", ".", " ", "\n", "\t", "Mar", "march", "1985", "85", "the", "12th", "'", ":", "x"])
).map("".join)


@given(st.one_of(st.text(st.characters(max_codepoint=127), max_size=120), DATE_LINES), st.lists(st.dates(), min_size=1, max_size=2))
def test_the_line_by_line_date_search_finds_what_the_whole_note_search_finds(rule_dates, text, dates):
    by_line, whole = RecordValues(rule_dates), RecordValues(rule_dates)
    whole._line_local = False
    record = PatientRecord("1", dates=tuple(dates))
    assert by_line(text, record) == whole(text, record)


@given(st.text(alphabet="ab1 -.()\n\t", max_size=40))
def test_a_skeleton_maps_each_of_its_characters_back_to_its_place(text):
    skeleton, offsets = _skeleton(text, _PHONE_GAP)
    places = [offsets[j] for j in range(len(skeleton))]
    assert places == sorted(set(places)) and [text[i] for i in places] == list(skeleton)
    assert "".join(c for i, c in enumerate(text) if i not in places) == "".join(_PHONE_GAP.findall(text))
