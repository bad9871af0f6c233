"""The classifier's veto of words that look like PHI but are not: eponyms, credentials, contractions,
labels beside phone numbers and words beside dates."""

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
        ("Mary Hulse, R.N.", "R", True),
        ("Mary Hulse, R.N.", "N", True),
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
        ("cell# 410-322-1419 Home# 603-960-5357", "Home", "PHONE", True),
        ("W: 858-789-7896", "W", "PHONE", True),
        ("cell# 410-322-1419", "410", "PHONE", False),
        ("d/c'd to nursing home 9/28", "d", "DATE", True),
        ("CULTURE FROM 8/23", "FROM", "DATE", True),
        ("seen Jan 5th", "Jan", "DATE", False),
        ("admitted on Christmas Day", "Christmas", "DATE", False),
        ("on Memorial Day weekend", "Memorial", "DATE", False),
        ("on 7/22", "22", "DATE", False),
    ],
)
def test_a_phone_or_a_date_without_a_digit_is_a_label_or_a_word(text: str, word: str, category: str, vetoes: bool) -> None:
    assert judged(text, word, category) is vetoes
