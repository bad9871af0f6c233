import re

import pytest
import regex
from hypothesis import given
from hypothesis import strategies as st

from anonymizer.detectors.honorifics import ASCII_SPACE, SPACE, Honorific, HonorificDetector
from anonymizer.record import PatientRecord
from anonymizer.resources import data_dir
from tests.linear import grows_linearly

RECORD = PatientRecord("1")


@pytest.fixture(scope="module")
def honorifics():
    return HonorificDetector.from_rules(data_dir("rules"))


def found(detector, text):
    """The distinct stretches flagged, in order (two rules may flag one name: "DR QUILEY AWARE")."""
    return [text[start:end] for start, end in sorted({(s.start, s.end) for s in detector(text, RECORD)})]


@pytest.mark.parametrize(
    "text, names",
    [
        ("Dr. K H Tan", ["K H Tan"]),
        ("Dr. K. H. Tan reviewed", ["K. H. Tan"]),
        ("seen by Dr. K.H. Tan.", ["K.H. Tan"]),
        ("Mdm Siti binte Ali", ["Siti binte Ali"]),
        ("Mr. Ravi s/o Kumar", ["Ravi s/o Kumar"]),
        ("dr o'brien", ["o'brien"]),
        ("Prof Lee-Wong", ["Lee-Wong"]),
        ("A/Prof Tan Wei Ming", ["Tan Wei Ming"]),
        ("mr a tan", ["a tan"]),
        ("Dr.Tan", ["Tan"]),
        ("Mr K.", ["K"]),
    ],
)
def test_name_tokens_after_a_title(honorifics, text, names):
    assert found(honorifics, text) == names


@pytest.mark.parametrize(
    "text, names",
    [
        ("dr quiley aware", ["quiley"]),
        ("Dr Smith to see pt", ["Smith"]),
        ("DR QUILEY AWARE", ["QUILEY"]),
        ("Seen by Dr. James Low today", ["James Low"]),
        ("Dr Tan's clinic", ["Tan"]),
        ("Dr Tan\nPlan: review", ["Tan"]),
        ("Dr Tan. Plan", ["Tan"]),
        ("Mr and Mrs Tan", ["Tan"]),
        ("spoke to Dr Tan Mr Lim", ["Tan", "Lim"]),
        ("DR. QUIMBY AWARE-ORDER FOR LOPRESSOR", ["QUIMBY"]),
        ("Dr Okafor pronounced pt at 0730", ["Okafor"]),
    ],
)
def test_name_stops_at_ordinary_words(honorifics, text, names):
    assert found(honorifics, text) == names


@pytest.mark.parametrize(
    "text, names",
    [
        ("general anaesthesia", []),
        ("under General Anaesthesia", []),
        ("Gen Surg", []),
        ("ms improving, MS flare", []),
        ("ms tan seen", ["tan"]),
        ("Ms Low came", ["Low"]),
        ("gen. tan", ["tan"]),
        ("Col. Lim", ["Lim"]),
        ("mild MR grade 2, MS noted", []),
        ("MILD MR NOTED; MR TAN SEEN", ["TAN"]),
        ("seen by DR TAN", ["TAN"]),
        ("Monitor changes in MS. tolerating feeds; MS worsening", []),  # mental status, period or not
        ("Dr on call: PROF.AH YAN", ["AH YAN"]),  # a strong title stays strong with its period
    ],
)
def test_weak_titles_need_a_name_like_word(honorifics, text, names):
    assert found(honorifics, text) == names


@pytest.mark.parametrize("text", ["Dr", "Dr 5", "dr123", "mri", "drive to", "Mr\nTan", "Dr. to see"])
def test_no_name(honorifics, text):
    assert found(honorifics, text) == []


def test_category_rule_and_that_the_title_stays(honorifics):
    text = "A/Prof. Goh and Mdm Lim"
    spans = honorifics(text, RECORD)
    assert [(text[s.start : s.end], s.category, s.source) for s in spans] == [
        ("Goh", "DOCTOR", "honorific:a/prof"),
        ("Lim", "NAME", "honorific:mdm"),
    ]


def test_rules_come_from_the_constructor():
    detector = HonorificDetector(
        [Honorific("capt", "NAME", strong=True)], stop_words=["aware"], common_words=[], connectors=[], max_tokens=2
    )
    assert found(detector, "capt haddock archibald x aware; dr who") == ["haddock archibald"]


TITLE_HEAVY = st.lists(
    st.sampled_from(["Dr", "dr.", "MR", "Ms", "gen", "Tan", "K.", "H", "binte", "s/o", "aware", ".", "\n"])
)


@given(st.one_of(st.text(max_size=200), TITLE_HEAVY.map(" ".join)))
def test_never_fails_and_stays_in_bounds(honorifics, text):
    for span in honorifics(text, RECORD):
        assert 0 <= span.start < span.end <= len(text)


@given(st.one_of(st.text(st.characters(max_codepoint=127), max_size=200), TITLE_HEAVY.map(" ".join)))
def test_the_lower_cased_search_of_an_ascii_note_finds_the_same_titles(honorifics, text):
    text = text.encode("ascii", "replace").decode()
    assert [m.span() for m in honorifics._title_lower.finditer(text.lower())] == [m.span() for m in honorifics._title.finditer(text)]


def test_the_ascii_search_reads_every_ascii_character_as_regex_does(honorifics):
    ascii = [chr(i) for i in range(128)]
    assert [c for c in ascii if re.fullmatch(ASCII_SPACE, c)] == [c for c in ascii if regex.fullmatch(SPACE, c)]
    for c in ascii:  # before the title, between it and the name, after its period
        for text in (f"{c}dr tan", f"dr{c}tan", f"dr.{c}tan"):
            assert [m.span() for m in honorifics._title_lower.finditer(text.lower())] == [
                m.span() for m in honorifics._title.finditer(text)
            ]


@pytest.mark.parametrize("case", ["as written", "lower case"])
def test_the_cost_grows_linearly_with_the_note(honorifics, case):
    unit = (
        "Dr K H Quellmore aware. d/w z y brackenholt, agreeable. to see Oswina at Harwick Polyclinic in 1/12. "
        "Admitted under Imelda Quimby\nPhilippa Quellmore, RN. Lee/reg/ENT. met with martin quellmore. Haverford aware.\n"
        "oswina, Wexcombe General Hospital\n"
        "Dear imelda,\nseen by HARRIS M (SR). Quellmore, J RN. wait for dr reveiw. Rabbi Lindqvist visited.\n"
        "Dr Quembley recs vanco. Care endorsed to Tamsiel.\nMary Quellmore\n"
    )
    if case == "lower case":
        unit = unit.lower()
    assert grows_linearly(honorifics, unit)
