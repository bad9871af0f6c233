"""Which words are names and which are ordinary English (anonymizer.vocabulary)."""

from __future__ import annotations

import pytest

from anonymizer.vocabulary import (
    SwappedWords,
    calendar_words,
    clinical_word,
    drug_word,
    english_rank,
    inflected_word,
    name_words,
    never_a_name,
    plain_word,
    proper_name,
)


@pytest.mark.parametrize("word", ["visited", "aunt", "supportive", "grandson"])
def test_ordinary_words(word: str) -> None:
    assert plain_word(word)


@pytest.mark.parametrize("word", ["hank", "bill", "tan", "soon", "bin", "siti", "smith"])
def test_names_of_any_list_are_no_plain_words(word: str) -> None:
    """First and last names, nicknames, surrogate names of every origin and name connectors."""
    assert word in name_words()
    assert not plain_word(word, rank=None)


def test_initials_rare_words_and_numbers_are_no_plain_words() -> None:
    assert not plain_word("a") and not plain_word("xqzv") and not plain_word("12")


def test_rank_bounds_the_list() -> None:
    rare = max((w for w in english_rank() if w.isalpha() and w not in name_words()), key=english_rank().get)
    assert not plain_word(rare) and plain_word(rare, rank=None)


@pytest.mark.parametrize("word", ["mitral", "angioplasty", "radiologist", "milrinone", "valves", "secretions", "humidifier"])
def test_clinical_words(word: str) -> None:
    """Words of the medical dictionary, their forms ("secretions" of "secrete") and plurals,
    beyond the English list's ranks."""
    assert clinical_word(word)


@pytest.mark.parametrize("word", ["allegra", "parkinson", "tan", "a", "5mg"])
def test_names_eponyms_and_non_words_are_no_clinical_words(word: str) -> None:
    """A name of any list (a drug's brand "Allegra" is a given name too), an eponym (a capitalised
    entry of the dictionary), an initial, a dose."""
    assert not clinical_word(word)


@pytest.mark.parametrize("word", ["ativan", "lorazepam", "valium", "ambien"])
def test_drug_names(word: str) -> None:
    assert drug_word(word)


@pytest.mark.parametrize("word", ["allegra", "tan", "visited"])
def test_names_and_other_words_are_no_drug_names(word: str) -> None:
    """A brand that a name list holds ("Allegra") stays a possible name."""
    assert not drug_word(word)


@pytest.mark.parametrize(("word", "never"), [("filipino", True), ("indonesian", True), ("dutch", False), ("philippine", False)])
def test_a_nationality_is_never_a_name_unless_a_name_list_holds_it(word: str, never: bool) -> None:
    """"FDW (Filipino)", "Indonesian helper"; "Dutch" is a surname too, "Philippine" a given name."""
    assert never_a_name(word) is never


@pytest.mark.parametrize("word", ["suctioned", "extubated", "turning"])
def test_participles_of_dictionary_words(word: str) -> None:
    assert inflected_word(word)


@pytest.mark.parametrize("word", ["ahmed", "hughes", "brennan", "okonjo", "reed", "sterling"])
def test_names_and_short_stems_are_no_participles(word: str) -> None:
    assert not inflected_word(word)


def test_calendar_words_hold_months_weekdays_and_their_abbreviations() -> None:
    assert {"december", "dec", "thurs", "sun"} <= calendar_words()
    assert "tan" not in calendar_words()


def test_swapped_words_are_words_with_two_adjacent_letters_swapped() -> None:
    swapped = SwappedWords(["review", "informed", "aware", "their"])
    assert "reveiw" in swapped and "infromed" in swapped and "awaer" in swapped
    assert "review" not in swapped  # the word itself is no typo
    assert "rewiev" not in swapped  # letters swapped that are not adjacent
    assert "reviw" not in swapped and "aware2" not in swapped  # a letter missing or added
    assert "wera" not in SwappedWords(["wear"])  # shorter than SwappedWords' minimum


def test_swapped_words_spare_the_names_of_any_list() -> None:
    assert "aaron" in name_words()
    assert "aaron" not in SwappedWords(["aaorn"])


@pytest.mark.parametrize("word", ["evans", "thompson", "hussein"])
def test_a_name_the_dictionary_spells_only_capitalised_is_a_proper_name(word: str) -> None:
    """However often English text writes it (wordfreq ranks "evans" among its 5,000 commonest)."""
    assert proper_name(word)


@pytest.mark.parametrize("word", ["brown", "smith", "january", "boston", "english"])
def test_words_and_proper_nouns_no_name_list_holds_are_no_proper_names(word: str) -> None:
    """A name that is a word too ("brown"), or a proper noun that names no person ("boston")."""
    assert not proper_name(word)
