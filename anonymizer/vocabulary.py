"""Which words are names and which are ordinary English, for the detectors and the classifier alike.

A word that the project's name lists do not hold and that English uses every day ("visited",
"aunt", "clears") is not taken for a name where only the context suggests one: after a kinship
word, beside a doctor's name, after a title that doubles as an abbreviation ("MS clears").  The
lists: wordfreq's 30,000 most frequent English words (anonymizer/classifier/data/english.txt) and
every name the project knows (:func:`name_words`).  Clinical words are not names either
("Mitral Valve", "Titrated Nitro", "Radiologist phoned"): the lower-case entries of a medical
dictionary (:func:`clinical_word`).  Nor are drug names, generic or brand ("given Ativan"), which
brands write capitalised (:func:`drug_word`).
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import lru_cache
from pathlib import Path

import regex
from rapidfuzz.distance import OSA

from anonymizer.resources import data_dir, read_word_list

CLASSIFIER_DATA = Path(__file__).resolve().parent / "classifier" / "data"  # english.txt, first_names.txt ...
ENGLISH = CLASSIFIER_DATA / "english.txt"
CLINICAL = CLASSIFIER_DATA / "clinical.txt"
DRUGS = CLASSIFIER_DATA / "drugs.txt"
FIRST_NAMES = CLASSIFIER_DATA / "first_names.txt"
MEDICAL = CLASSIFIER_DATA / "medical.txt"  # the ICU's everyday words and abbreviations ("micu", "abg")
PROPER_NOUNS = CLASSIFIER_DATA / "proper_nouns.txt"  # what the English dictionary spells only Capitalised
PLAIN_RANK = 10_000  # the classifier takes no word among the 10,000 most frequent for a name (plain_word)
SWAPPED_LENGTH = 5  # a word this long with two adjacent letters swapped is still that word (SwappedWords)
_TOKEN = regex.compile(r"[^\W_]+")
# Words that announce a relative's name ("dtr jenna", "WIFE MARGO"): never a name, nor initials.
RELATIVE_CUES = frozenset({
    "son", "sons", "daughter", "daughters", "dtr", "dtrs", "wife", "husband", "hubby", "hb", "spouse", "partner",
    "boyfriend", "girlfriend", "fiance", "fiancee", "mother", "mom", "mum", "father", "dad", "brother", "bro", "sister",
    "sis", "niece", "nephew", "aunt", "uncle", "grandson", "granddaughter", "grandaughter", "grandmother", "grandfather",
    "grandma", "grandpa", "cousin", "stepson", "stepdaughter", "dil", "hcp", "nok", "proxy", "guardian",
    "aunty", "auntie", "stepmother", "stepfather", "godmother", "godfather", "godson", "goddaughter", "twin",
    "grandniece", "grandnephew", "grandchild", "grandchildren", "stepsister", "stepbrother",
})
# People around the patient who are neither relatives nor staff: their names are NAME.
SOCIAL_CUES = frozenset({
    "friend", "friends", "neighbour", "neighbor", "neighbours", "neighbors", "fdw", "maid", "helper", "caregiver", "carer",
    "colleague", "landlord", "landlady", "roommate", "housemate", "flatmate",
})


@lru_cache(maxsize=1)
def english_rank() -> dict[str, int]:
    """Each English word's rank by frequency (0: the most frequent)."""
    rank: dict[str, int] = {}
    for position, word in enumerate(read_word_list(ENGLISH)):
        rank.setdefault(word, position)
    return rank


@lru_cache(maxsize=1)
def surrogate_names() -> tuple[tuple[str, str, str], ...]:
    """The surrogate names of rules/surrogates/names.txt as (origin, kind, name): ("chinese",
    "family", "Tan"), ("indian", "given", "Meena")."""
    rows = (line.split("\t") for line in read_word_list(data_dir("rules") / "surrogates" / "names.txt"))
    return tuple((origin, kind, name) for origin, kind, _, name in rows)


@lru_cache(maxsize=1)
def name_words() -> frozenset[str]:
    """Every word of a name the project's lists hold, lower-cased: the classifier's first and last
    names, rules/nicknames.txt, the surrogate names (Chinese, Malay, Indian and Western given names
    and surnames) and the name connectors ("bin", "s/o")."""
    rules = data_dir("rules")
    lines = [
        *read_word_list(FIRST_NAMES),
        *read_word_list(CLASSIFIER_DATA / "last_names.txt"),
        *read_word_list(rules / "nicknames.txt"),
        *(name for _, _, name in surrogate_names()),
        *read_word_list(rules / "name_connectors.txt"),
    ]
    return frozenset(token.lower() for line in lines for token in _TOKEN.findall(line))


def plain_word(word: str, rank: int | None = PLAIN_RANK) -> bool:
    """Whether a lower-cased word is an ordinary English one (among the `rank` most frequent; None:
    any of the list) that no name list holds: "visited", "aunt", "grandson".  An initial is not a word."""
    position = english_rank().get(word)
    if position is None or (rank is not None and position >= rank):
        return False
    return len(word) > 1 and word.isalpha() and word not in name_words()


@lru_cache(maxsize=1)
def chinese_name_parts() -> tuple[frozenset[str], frozenset[str]]:
    """The Chinese surnames and the syllables of Chinese given names that the surrogate names
    hold (rules/surrogates/names.txt), lower-cased: ("tan", "yeo", ...), ("hock", "soon", "min", ...)."""
    parts: dict[str, set[str]] = {"family": set(), "given": set()}
    for origin, kind, name in surrogate_names():
        if origin == "chinese":
            parts[kind].update(token.lower() for token in _TOKEN.findall(name))
    return frozenset(parts["family"]), frozenset(parts["given"])


@lru_cache(maxsize=1)
def surrogate_name_words() -> frozenset[str]:
    """Every word of the surrogate names, lower-cased: Chinese, Malay, Indian and Western given
    names and surnames ("foo", "nur", "raju"), which the classifier's name lists (Western) lack."""
    return frozenset(token.lower() for _, _, name in surrogate_names() for token in _TOKEN.findall(name))


@lru_cache(maxsize=1)
def proper_nouns() -> frozenset[str]:
    """The words hunspell-en-us spells only Capitalised, lower-cased (rules/build_common_words.py)."""
    return frozenset(read_word_list(PROPER_NOUNS))


def proper_name(word: str) -> bool:
    """Whether a lower-cased word is a name however often English text writes it: a name list
    holds it and the English dictionary spells it only Capitalised ("evans", "hussein"; not
    "brown", "smith", which are words too)."""
    return word in proper_nouns() and word in name_words()


@lru_cache(maxsize=1)
def clinical_words() -> frozenset[str]:
    """The lower-case words of the OpenMedSpel medical dictionary (anonymizer/classifier/data/clinical.txt)."""
    return frozenset(read_word_list(CLINICAL))


def clinical_word(word: str) -> bool:
    """Whether a lower-cased word, or its singular, is a clinical word ("mitral", "valves",
    "radiologist") that no name list holds."""
    words = clinical_words()
    known = word in words or (word.endswith("s") and word[:-1] in words)
    return known and len(word) > 1 and word.isalpha() and word not in name_words()


@lru_cache(maxsize=1)
def drug_names() -> frozenset[str]:
    """Drug names of one word, generic and brand (anonymizer/classifier/data/drugs.txt)."""
    return frozenset(read_word_list(DRUGS))


def drug_word(word: str) -> bool:
    """Whether a lower-cased word is a drug's name ("ativan", "lorazepam") that no name list holds."""
    return word in drug_names() and word not in name_words()


@lru_cache(maxsize=1)
def calendar_words() -> frozenset[str]:
    """Month and weekday names and their abbreviations, lower-cased (anonymizer/classifier/data/months.txt)."""
    return frozenset(w.casefold() for w in read_word_list(CLASSIFIER_DATA / "months.txt"))


INFLECTIONS = ("ed", "d", "ing")  # what a verb adds to its stem ("suctioned", "extubated", "turning")
MIN_STEM = 4


def inflected_word(word: str) -> bool:
    """Whether a lower-cased word no name list holds is an English or clinical word's past or
    present participle ("suctioned", "extubated"), which no dictionary lists as such."""
    if word in name_words():
        return False
    for suffix in INFLECTIONS:
        stem = word[: -len(suffix)]
        if word.endswith(suffix) and len(stem) >= MIN_STEM and (plain_word(stem, rank=None) or clinical_word(stem)):
            return True
    return False


class SwappedWords:
    """Words written with two adjacent letters swapped, as a typist does ("reveiw", "infromed"):
    found by their letters, so a word is checked against only the words it could be."""

    def __init__(self, words: Iterable[str], min_length: int = SWAPPED_LENGTH) -> None:
        self.min_length = min_length
        self._by_letters: dict[str, list[str]] = {}
        for word in words:
            if len(word) >= min_length:
                self._by_letters.setdefault("".join(sorted(word)), []).append(word)

    def __contains__(self, word: object) -> bool:
        """Whether a lower-cased word that no name list holds is one of the words with a pair swapped."""
        if not isinstance(word, str) or len(word) < self.min_length:
            return False
        candidates = self._by_letters.get("".join(sorted(word)))
        return bool(candidates) and word not in name_words() and any(OSA.distance(word, c) == 1 for c in candidates)


@lru_cache(maxsize=1)
def demonyms() -> frozenset[str]:
    """Nationalities and peoples, lower-cased (anonymizer/classifier/data/demonyms.txt)."""
    return frozenset(read_word_list(CLASSIFIER_DATA / "demonyms.txt"))


@lru_cache(maxsize=1)
def ward_words() -> frozenset[str]:
    """The rules' everyday words and ward abbreviations (rules/common_words.txt: "adls", "pmhx",
    "physio") that no name list holds."""
    return frozenset(w.casefold() for w in read_word_list(data_dir("rules") / "common_words.txt") if len(w) > 1) - name_words()


def never_a_name(word: str) -> bool:
    """Whether the classifier may never take a lower-cased word for a name: an ordinary English,
    clinical or drug word, a ward's word, or a nationality ("Filipino"), that no name list holds."""
    if plain_word(word) or clinical_word(word) or drug_word(word) or word in ward_words():
        return True
    return word in demonyms() and word not in name_words()
