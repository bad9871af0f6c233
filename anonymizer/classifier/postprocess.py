"""Recall heuristics applied after the rules and the classifier, each measured on its own.

Each takes a note's tokens and the category currently assigned to each token (``None`` = not
flagged) and returns the tokens to add, as ``{index: category}``; none ever removes a detection.

* :func:`extend_names` - a flagged name's adjacent initials ("E." before "Nessenson") and
  adjacent capitalised words that are not common English;
* :func:`extend_places` - a flagged place or hospital across "of", "memorial", "rehab", "beach", ...;
* :func:`relative_cues` - the word right after "son", "wife", "daughter" ... when it looks like a
  name (capitalised or in the first-name dictionary, not common English);
* :func:`propagate` - words confidently flagged as names in one of a patient's notes, flagged in
  the patient's other notes too.

docs/classifier.md reports what each adds and costs on the development corpus.
"""

from __future__ import annotations

import string
import tomllib
from collections.abc import Sequence
from functools import lru_cache

import regex

from anonymizer.classifier.features import Dictionaries, Tokens, default_dictionaries
from anonymizer.resources import data_dir

NAME_CATEGORIES = frozenset({"DOCTOR", "PATIENT", "RELATIVE", "NAME"})
PLACE_CATEGORIES = frozenset({"LOCATION", "HOSPITAL"})
# Words that continue a place or hospital's name: "University of Maryland", "Harford Memorial",
# "Baltimore Rehab", "Ocean City", "Daytona Beach".
PLACE_CONNECTORS = frozenset({
    "of", "memorial", "general", "university", "medical", "center", "centre", "hospital", "hosp", "regional",
    "community", "county", "st", "saint", "rehab", "rehabilitation", "clinic", "institute", "campus", "beach",
    "park", "heights", "village", "lake", "falls", "valley", "hills", "island", "city",
})
RELATIVE_CUES = frozenset({"son", "daughter", "dtr", "wife", "husband", "spouse", "partner", "friend", "mother", "mom",
                           "father", "dad", "brother", "sister", "niece", "nephew", "aunt", "uncle", "grandson",
                           "granddaughter", "cousin", "fiance", "fiancee", "sons", "daughters"})
LETTER, UPPER = regex.compile(r"\p{L}"), regex.compile(r"\p{Lu}")
ASCII_LETTERS, ASCII_UPPER = string.ascii_letters.encode(), string.ascii_uppercase.encode()
COMMON_RANK = 5000  # words among the 5,000 most frequent English words are never added


def _common(word: str, dictionaries: Dictionaries) -> bool:
    rank = dictionaries.english_rank.get(word)
    return rank is not None and rank < COMMON_RANK and word not in dictionaries.words["first"] and word not in dictionaries.words["last"]


@lru_cache(maxsize=1)
def titles() -> frozenset[str]:
    """The honorifics of rules/honorifics.toml ("dr", "prof", "mdm"): next to a name, never part of it."""
    rules = tomllib.loads((data_dir("rules") / "honorifics.toml").read_text(encoding="utf-8"))
    return frozenset(entry["name"].casefold() for entry in rules["honorific"])


def a_title(tokens: Tokens, i: int, category: str) -> bool:
    """Whether token i is a title that the classifier would take for a name ("Prof." before a
    doctor's name): the title stays in the text, as the honorific detector leaves it."""
    return category in NAME_CATEGORIES and tokens.lowers[i] in titles()


def _name_like(text: str, tokens: Tokens, i: int, dictionaries: Dictionaries, all_caps: bool) -> bool:
    word = tokens.words[i]
    if not word.isalpha() or tokens.lowers[i] in titles():
        return False
    if len(word) == 1:
        # an initial: "E." or "E Nessenson", never part of "D/O", "S/P", "A&O"
        after = text[tokens.ends[i] : tokens.ends[i] + 1]
        before = text[tokens.starts[i] - 1 : tokens.starts[i]] if tokens.starts[i] else ""
        return word.isupper() and after in ("", ".", " ", ",", "\n") and before in ("", " ", "\n", ".")
    if _common(tokens.lowers[i], dictionaries) or tokens.lowers[i] in dictionaries.words["med"]:
        return False
    if all_caps:
        return tokens.lowers[i] in dictionaries.words["first"] or tokens.lowers[i] in dictionaries.words["last"]
    return word[0].isupper()


def _mostly_capitals(text: str) -> bool:
    """Whether more than 80 % of the note's letters are capitals (an all-caps note)."""
    if text.isascii():  # counted by deleting bytes, at C speed
        raw = text.encode("ascii")
        letters, upper = len(raw) - len(raw.translate(None, ASCII_LETTERS)), len(raw) - len(raw.translate(None, ASCII_UPPER))
    else:
        letters, upper = len(LETTER.findall(text)), len(UPPER.findall(text))
    return letters > 0 and upper > 0.8 * letters


def extend_names(text: str, tokens: Tokens, flagged: Sequence[str | None], dictionaries: Dictionaries | None = None) -> dict[int, str]:
    if NAME_CATEGORIES.isdisjoint(flagged):  # most notes: a set test is cheaper than the scan below
        return {}
    d = dictionaries or default_dictionaries()
    all_caps = None  # worked out for the notes that have a flagged name only
    added: dict[int, str] = {}
    n = len(tokens)
    for i in [i for i, category in enumerate(flagged) if category in NAME_CATEGORIES]:
        category = flagged[i]
        if all_caps is None:
            all_caps = _mostly_capitals(text)
        for step in (-1, 1):
            j = i + step
            while 0 <= j < n and flagged[j] is None and j not in added:
                left = min(j, j - step)
                gap = tokens.gaps[left + 1]
                if "\n" in gap or len(gap.strip(" .")) > 0:
                    break
                if "." in gap and len(tokens.words[left]) > 1:
                    break  # a period ends a sentence ("Dr. Vasquez. Await PT eval"), unless after an initial ("E. Nessenson")
                if not _name_like(text, tokens, j, d, all_caps):
                    break
                added[j] = category
                j += step
        j = _after_and(text, tokens, i)
        if j is not None and flagged[j] is None and j not in added and _name_like(text, tokens, j, d, all_caps):
            added[j] = category  # "Both Suzette and Hank are his proxies"
    return added


def _after_and(text: str, tokens: Tokens, i: int) -> int | None:
    """The token after "and" or "&" that follows token i on the same line, if any."""
    if i + 1 < len(tokens) and tokens.gaps[i + 1].strip() == "&":
        return i + 1
    if i + 2 < len(tokens) and tokens.lowers[i + 1] == "and" and tokens.gaps[i + 1] == " " and tokens.gaps[i + 2] == " ":
        return i + 2
    return None


def extend_places(text: str, tokens: Tokens, flagged: Sequence[str | None]) -> dict[int, str]:
    if PLACE_CATEGORIES.isdisjoint(flagged):  # most notes: a set test is cheaper than the scan below
        return {}
    added: dict[int, str] = {}
    n = len(tokens)
    for i in [i for i, category in enumerate(flagged) if category in PLACE_CATEGORIES]:
        category = flagged[i]
        for step in (-1, 1):
            j = i + step
            while 0 <= j < n and flagged[j] is None and j not in added and tokens.lowers[j] in PLACE_CONNECTORS:
                if "\n" in tokens.gaps[min(j, j - step) + 1]:
                    break
                added[j] = category
                j += step
    return added


def relative_cues(text: str, tokens: Tokens, flagged: Sequence[str | None], dictionaries: Dictionaries | None = None) -> dict[int, str]:
    if RELATIVE_CUES.isdisjoint(tokens.lowers):  # most notes: a set test is cheaper than the scan below
        return {}
    d = dictionaries or default_dictionaries()
    added: dict[int, str] = {}
    for i in [i for i, lower in enumerate(tokens.lowers[:-1]) if lower in RELATIVE_CUES]:
        j = i + 1
        if tokens.lowers[j] in ("s", "named", "is", "was"):  # "wife's", "son named"
            j += 1
        if j >= len(tokens) or flagged[j] is not None:
            continue
        if "\n" in text[tokens.ends[i] : tokens.starts[j]]:
            continue
        word, lower = tokens.words[j], tokens.lowers[j]
        if not word.isalpha() or len(word) < 2 or _common(lower, d) or lower in d.words["med"]:
            continue
        if word[0].isupper() or lower in d.words["first"]:
            added[j] = "RELATIVE"
    return added


def propagate(
    notes: Sequence[tuple[Tokens, Sequence[str | None], Sequence[float]]],
    confident: float,
    dictionaries: Dictionaries | None = None,
) -> list[dict[int, str]]:
    """Across one patient's notes: words flagged as names with a score above `confident` somewhere
    are flagged wherever else they occur (not common English, at least three letters)."""
    d = dictionaries or default_dictionaries()
    words: dict[str, str] = {}
    for tokens, flagged, scores in notes:
        for i in [i for i, category in enumerate(flagged) if category in NAME_CATEGORIES]:
            lower = tokens.lowers[i]
            if scores[i] > confident and len(lower) >= 3 and lower.isalpha() and not _common(lower, d) and lower not in d.words["med"]:
                words.setdefault(lower, flagged[i])
    out = []
    for tokens, flagged, _ in notes:
        if words.keys().isdisjoint(tokens.lowers):
            out.append({})
        else:
            out.append({i: words[w] for i, w in enumerate(tokens.lowers) if flagged[i] is None and w in words})
    return out
