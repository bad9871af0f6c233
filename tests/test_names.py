import pytest
from hypothesis import given
from hypothesis import strategies as st

from anonymizer.detectors.names import RecordNames
from anonymizer.record import PatientRecord
from anonymizer.resources import data_dir


@pytest.fixture(scope="module")
def names():
    return RecordNames.from_rules(data_dir("rules"), "names", "PATIENT", 0.33)


def found(detector, text, record):
    return [text[s.start : s.end] for s in detector(text, record)]


def test_exact_case_insensitive_and_misspelled_names(names):
    record = PatientRecord("1", names=("Marisette", "Vrabel"))
    # Unit-cost Levenshtein: a transposition costs 2, so "Vrable" (2/6) misses and "Vrabe" (1/5) hits.
    text = "MARISETTE seen; marisete (sic) and Mairsette; VRABEL, Vrable. Vrabe is her doctor."
    assert found(names, text, record) == ["MARISETTE", "marisete", "Mairsette", "VRABEL", "Vrabe"]


def test_a_common_word_in_lower_case_is_no_misspelt_name_in_a_mixed_case_note(names):
    record = PatientRecord("1", names=("Manning", "Rose"))
    # "morning" is within the ratio of Manning, but written as the ordinary word; "rose" is the name itself
    text = "Labs repleted this morning. Mrs Manning and Morning (sic) seen; rose"
    assert found(names, text, record) == ["Manning", "Morning", "rose"]
    # all capitals or all lower case say nothing about how a word was meant: recall first
    assert found(names, "LABS THIS MORNING", record) == ["MORNING"]
    assert found(names, "labs this morning", record) == ["morning"]


def test_ratio_threshold_follows_seed_003(names):
    # "Tans" vs "tan": d = 1, min length 3, ratio 0.333 is not below 0.33.
    record = PatientRecord("1", names=("Tan",))
    assert found(names, "Tan Tans tam", record) == ["Tan"]


def test_connectors_are_not_names_and_short_tokens_match_exactly(names):
    record = PatientRecord("1", names=("Siti binte Ali", "Ravi s/o Kumar", "Ng"))
    text = "binte bin s o Siti Ali; kumr; NG tube, nag"
    assert found(names, text, record) == ["Siti Ali", "kumr", "NG"]


def test_a_name_is_one_span_across_connectors_and_initials(names):
    record = PatientRecord("1", names=("Wei-Xin", "Tan"), relatives=())
    text = "consent by W X Tan; TAN W.X. seen; Tan, W. ok; Mdm Siti bte Ali; a tan w"
    assert found(names, text, record) == ["W X Tan", "TAN W.X", "Tan, W", "tan w"]
    record = PatientRecord("2", names=("Siva", "s/o Bala"))
    assert found(names, "siva s/o bala; SIVA S/O BALA", record) == ["siva s/o bala", "SIVA S/O BALA"]
    record = PatientRecord("2", names=("Siti", "binte Ali"))
    assert found(names, "Mdm Siti bte Ali came", record) == ["Siti bte Ali"]


def test_a_one_letter_token_is_taken_only_next_to_a_name(names):
    """The "O" of O'Neill and a record's initial are no names alone: "c/o", "O/E", "a b c"."""
    record = PatientRecord("1", names=("Mary", "O'Neill", "J"))
    text = "c/o pain, O/E soft, plan a b c j; Mary O'Neill seen, J O'Neill aware"
    assert found(names, text, record) == ["Mary O'Neill", "J O'Neill"]


def test_relatives_get_their_own_category():
    relatives = RecordNames.from_rules(data_dir("rules"), "relatives", "RELATIVE", 0.33)
    record = PatientRecord("1", names=("John",), relatives=("Mary Lim",))
    spans = relatives("daughter mary called, john ok", record)
    assert [(s.category, s.source) for s in spans] == [("RELATIVE", "record:relative")]


def test_no_record_names_means_no_spans(names):
    assert names("Anything at all", PatientRecord("1")) == []


@given(st.text(max_size=200), st.lists(st.text(max_size=12), max_size=3))
def test_never_fails_and_stays_in_bounds(text, values):
    detector = RecordNames.from_rules(data_dir("rules"), "names", "PATIENT", 0.33)
    for span in detector(text, PatientRecord("1", names=tuple(values))):
        assert 0 <= span.start < span.end <= len(text)


def test_nicknames_relate_both_ways_and_set_apart_english_words():
    from anonymizer.detectors.names import Nicknames

    nicknames = Nicknames(["william bill will liam", "margaret peggy"], words=["will", "bill", "the"])
    free, worded = nicknames.of(["william", "tan"])
    assert free == {"liam"} and worded == {"bill", "will"}
    assert nicknames.of(["peggy"]) == ({"margaret"}, frozenset())
    assert nicknames.of(["liam"]) == ({"william"}, frozenset())  # a nickname gives its given name, not its siblings


def test_nicknames_match_exactly_never_by_edit_distance(names):
    record = PatientRecord("1", names=("Margaret Lim",))
    assert found(names, "Peggy seen; Pegy and Peggie not.", record) == ["Peggy"]
