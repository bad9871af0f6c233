"""Detectors: each takes a note's text and its patient's record and returns spans.

Every detector is built once per run from the rules and the configuration by its factory in the
catalogue (:data:`anonymizer.registry.DETECTORS`, whose entry names it: ``name`` is what its spans
are explained, counted and disabled by), then called for every note; anything it derives from a
record it caches with :class:`anonymizer.record.per_record`.
"""

from __future__ import annotations

import re
from typing import Iterator, Protocol

from anonymizer.record import PatientRecord
from anonymizer.spans import Span


class Detector(Protocol):
    name: str

    def __call__(self, text: str, record: PatientRecord) -> list[Span]: ...


COLOURED = re.compile(r"[- ]?colou?r(?:ed)?\b", re.IGNORECASE)  # after a colour's name: "tan-coloured", "Rose colour"


def names_a_colour(text: str, end: int) -> bool:
    """Whether the word ending at `end` names a colour ("tan-coloured sputum", "rose coloured"):
    a surname or a given name that is also a colour is then no name."""
    return COLOURED.match(text, end) is not None


UNIT_REACH = 12  # how far back a unit's number is looked for
NUMBER_BEFORE_SLASH = re.compile(r"\d[^\W_]*/\Z")  # "103/", "2L/": a word with a digit, then the slash


def unit_after_number(text: str, start: int) -> bool:
    """Whether the word at `start` follows a number and a slash, as a unit does ("PR 103/min",
    "2L/min"): a record's name or one the classifier found ("Min") is then no name."""
    return text[start - 1 : start] == "/" and NUMBER_BEFORE_SLASH.search(text, max(0, start - UNIT_REACH), start) is not None


# After "LOW" (loss of weight): its duration in the clinic's shorthand, or "/LOA" (loss of appetite).
_LOSS_OF_WEIGHT_AFTER = re.compile(r"[ \t]*/[ \t]*loa\b|[ \t]+(?:over[ \t]+|for[ \t]+|x[ \t]*)?\d{1,2}/(?:7|12|52)\b", re.IGNORECASE)


def loss_of_weight(text: str, start: int, end: int) -> bool:
    """Whether the word at `start`:`end` is "LOW", loss of weight, before its duration or "/LOA"
    ("LOW 3/7", "LOW over 4/12", "no LOW/LOA"): the surname Low is then no name."""
    return end - start == 3 and text[start:end].lower() == "low" and _LOSS_OF_WEIGHT_AFTER.match(text, end) is not None


def lowered(text: str) -> str:
    """The text in lower case with the same offsets: a letter whose lower case is longer ("İ")
    stays as it is, so that a position found in the copy is the same in the text."""
    low = text.lower()
    if len(low) != len(text):
        low = "".join(c.lower() if len(c.lower()) == 1 else c for c in text)
    return low


def titlecase(word: str) -> bool:
    """ "Lindqvist", "Baltimor": a capital, then lower case only (not "MDs", "McDonald")."""
    return word[:1].isupper() and word[1:].islower()


def whole_words(low: str, word: str) -> Iterator[int]:
    """Where `word` stands in the lower-cased `low` as a whole word, not inside another nor after
    a slash or a plus: found by str.find, a search in C, where a pattern per note would cost more."""
    at = low.find(word)
    while at >= 0:
        end = at + len(word)
        before = low[at - 1] if at else " "
        if not (before.isalnum() or before in "/+_") and word_ends(low, end):
            yield at
        at = low.find(word, end)


def word_ends(low: str, end: int) -> bool:
    """Whether a word of `low` may end at `end`: no letter, digit, hyphen or underscore follows."""
    after = low[end] if end < len(low) else " "
    return not (after.isalnum() or after in "-_")
