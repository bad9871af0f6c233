"""The classifier's veto of words that look like PHI but are not: eponyms, credentials, contractions,
numbers and abbreviations' letters taken for names, labels beside phone numbers, words beside
dates, times and quantities."""

from __future__ import annotations

import pytest

from anonymizer.classifier.eponyms import Eponyms, eponymous, load_eponyms
from anonymizer.classifier.features import Tokens
from anonymizer.classifier.model import vetoed
from anonymizer.classifier.postprocess import titles
from anonymizer.resources import data_dir


def judged(text: str, word: str, category: str = "RELATIVE", nth: int = 0) -> bool:
    tokens = Tokens.of(text)
    i = [k for k, w in enumerate(tokens.words) if w == word][nth]
    return vetoed(text, tokens, i, category, None)


@pytest.mark.parametrize(
    ("text", "word"),
    [
        ("Known Parkinson's disease", "Parkinson"),
        ("Bell's palsy on the left", "Bell"),
        ("Murphy's sign negative", "Murphy"),
        ("Huntington's disease in the family", "Huntington"),
        ("Anyname's syndrome suspected", "Anyname"),  # 's + syndrome: whatever the word
        ("no Kernig sign", "Kernig"),
        ("Foley catheter draining", "Foley"),
        ("foley to gravity", "foley"),
        ("Swan-Ganz in place", "Swan"),
        ("Swan-Ganz in place", "Ganz"),
        ("Glasgow coma scale 14", "Glasgow"),
        ("hx of Alzheimer's, on aricept", "Alzheimer"),
    ],
)
def test_eponyms_are_not_names(text: str, word: str) -> None:
    assert judged(text, word)
    assert judged(text, word, "LOCATION")


@pytest.mark.parametrize(
    ("text", "word", "category"),
    [
        ("Seen by Dr Foley today", "Foley", "DOCTOR"),  # a title before it: a person
        ("Murphy called, updated", "Murphy", "RELATIVE"),  # an eponym that names nothing here
        ("Glasgow trip last year", "Glasgow", "LOCATION"),
        ("Dr. Murphy's team reviewed", "Murphy", "DOCTOR"),  # 's without a disease, palsy, sign or syndrome
        ("son Jackson visited", "Jackson", "RELATIVE"),  # only the compound Jackson-Pratt stands alone
    ],
)
def test_names_that_are_also_eponyms_stay_names(text: str, word: str, category: str) -> None:
    assert not judged(text, word, category)


@pytest.mark.parametrize(("text", "word"), [("son and grandson visited", "grandson"), ("Daughter supportive", "supportive")])
def test_ordinary_words_are_no_names(text: str, word: str) -> None:
    """An English word that no name list holds is not a person's name, whatever the context says."""
    assert judged(text, word)
    assert not judged(text, word, "LOCATION")


def test_the_veto_leaves_other_categories_alone() -> None:
    assert not judged("Parkinson's disease", "Parkinson", "DATE")


@pytest.mark.parametrize(
    ("text", "word", "vetoes"),
    [
        ("Jean Hudson, RN", "RN", True),
        ("Mary Quimby, R.N.", "R", True),
        ("Mary Quimby, R.N.", "N", True),
        ("David Murray RRT", "RRT", True),
        ('"I DON\'T WANT TO"', "DON", True),
        ("I'M TIRED", "I", True),
        ("son Don visited", "Don", False),
        ("O'Neil visited", "Neil", False),
        ("O'Neil visited", "O", False),
    ],
)
def test_credentials_and_contractions_are_not_names(text: str, word: str, vetoes: bool) -> None:
    assert judged(text, word) is vetoes


def test_the_shipped_list_reads_and_marks_the_words_that_stand_alone() -> None:
    eponyms = load_eponyms()
    assert {"kernig", "foley", "swan-ganz", "parkinson"} <= eponyms.words
    assert {"foley", "swan-ganz"} <= eponyms.alone
    assert "kernig" not in eponyms.alone and "murphy" not in eponyms.alone
    assert eponyms == Eponyms.read(data_dir("rules") / "eponyms.txt")


def test_an_empty_list_keeps_only_the_possessive_rule() -> None:
    none = Eponyms(frozenset(), frozenset())
    tokens = Tokens.of("Kernig sign, Bell's palsy")
    assert not eponymous("Kernig sign, Bell's palsy", tokens, 0, none, titles())
    assert eponymous("Kernig sign, Bell's palsy", tokens, 2, none, titles())


@pytest.mark.parametrize(
    ("text", "word", "category", "vetoes"),
    [
        ("cell# 410-555-0142 Home# 603-555-0119", "Home", "PHONE", True),
        ("W: 858-789-7896", "W", "PHONE", True),
        ("cell# 410-555-0142", "410", "PHONE", False),
        ("d/c'd to nursing home 9/28", "d", "DATE", True),
        ("CULTURE FROM 8/23", "FROM", "DATE", True),
        ("seen Jan 5th", "Jan", "DATE", False),
        ("admitted on Christmas Day", "Christmas", "DATE", False),
        ("on Memorial Day weekend", "Memorial", "DATE", False),
        ("on 7/22", "22", "DATE", False),
        ("vent checked at 4:30am, abg at 1700", "30am", "DOCTOR", True),
        ("vent checked at 4:30am, abg at 1700", "1700", "DOCTOR", True),
        ("GIVEN MS 4MG IV", "4MG", "PATIENT", True),
        ("seen before D/C home", "D", "DOCTOR", True),
        ("seen before D/C home", "C", "DOCTOR", True),
        ("edema d/t CHF", "d", "PATIENT", True),
        ("urine dark W/ sediment", "W", "DOCTOR", True),
        ('S: "I DON\'T KNOW"', "I", "DOCTOR", True),
        ("social: pt's wife called", "s", "RELATIVE", True),
        ("Lactate's 2.1", "s", "LOCATION", True),
        ("seen by E. Nessenson", "E", "DOCTOR", False),  # an initial
        ("to return to St Mary's after", "s", "LOCATION", False),  # a name's possessive stays with it
        ("extubated 3pm 9/18, shift 7a-7p", "3pm", "DATE", True),
        ("extubated 3pm 9/18, shift 7a-7p", "7p", "DATE", True),
        ("WT 10/8 61.4kg today", "61", "DATE", True),
        ("U/O from 40-60cc/hr", "40", "DATE", True),
        ("10/26: CABGX3 done", "CABGX3", "DATE", True),
        ("1) wife: 555-0143\n2) son: 555-0199", "2", "PHONE", True),
        ("admitted 9/18 for CABG", "9", "DATE", False),
        ("on the 3rd of May", "3rd", "DATE", False),
        ("call 410-555-0143 after 5pm", "410", "PHONE", False),
        ("dr Ng/cons/O&G reviewed", "O", "DOCTOR", True),
        ("dr Ng/cons/O&G reviewed", "G", "DOCTOR", True),
        ("Admitted to Ward 7A Bed 12 on Monday", "Ward", "LOCATION", True),
        ("Admitted to Ward 7A Bed 12 on Monday", "Bed", "LOCATION", True),
        ("Moved to Ward Street last year", "Ward", "LOCATION", False),
        ("Seen by Dr Tan. Mr Wood resides at Bedok, prefers tea", "resides", "PATIENT", True),
        ("Seen by Dr Tan. Mr Wood resides at Bedok, prefers tea", "prefers", "PATIENT", True),
        ("Seen by Dr Tan. BP rose to 190, grace period for Appt", "rose", "DOCTOR", True),  # frequent, nothing of a name beside it
        ("Seen by Dr Tan. BP rose to 190, grace period for Appt", "grace", "DOCTOR", True),
        ("Seen by Dr Tan. Nephew john called, Daughter Mary aware", "john", "RELATIVE", False),  # a kinship word before it
        ("Seen by Dr Tan. Discussed with z y lee, Daughter Mary aware", "lee", "DOCTOR", False),  # initials before it
        ("Seen by Dr Tan. Contact: mary ann rodrigues, Daughter", "mary", "RELATIVE", False),  # a listed name after it
        ("Seen by Dr Tan. NOK: Mary\nrose from chair unaided", "rose", "DOCTOR", True),  # its neighbours on another line
        ("seen by dr tan. wood resides at bedok", "resides", "PATIENT", False),  # a note in lower case says nothing
    ],
)
def test_what_cannot_be_a_phone_a_date_or_a_name_is_vetoed(text: str, word: str, category: str, vetoes: bool) -> None:
    """A label beside a phone, a word beside a date, a time or a quantity, a number too short for a
    phone; a number, a pronoun, an abbreviation's letter or an ordinary word's possessive for a name."""
    assert judged(text, word, category) is vetoes

