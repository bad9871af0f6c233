"""Recall heuristics applied after the rules and the classifier, each measured on its own.

Each takes a note's tokens and the category currently assigned to each token (``None`` = not
flagged) and returns the tokens to add, as ``{index: category}``; none ever removes a detection.

* :func:`extend_names` - a flagged name's adjacent initials ("E." before "Nessenson"),
  adjacent capitalised words that are not common English, and the parts joined to it by a hyphen
  or an apostrophe ("Brown-O'Neill", "Sean O'Malley"), and a connector between two parts found
  apart ("Farah binte Mohd Firdaus");
* :func:`extend_places` - a flagged place or hospital across "of", "memorial", "rehab", "beach", ...;
* :func:`relative_cues` - the name right after "son", "wife", "dtr", "hb", "HCP" ... (or before
  "(son)") when it reads as one (capitalised and not common English; in capitals or lower case a
  first name or a word no dictionary knows, or a word after initials), its further words, and the
  names of a list after it; after "friend", "neighbour", "FDW", "maid" ... the same, as NAME;
* :func:`propagate` - words confidently flagged as names in one of a patient's notes, flagged in
  the patient's other notes too.

docs/classifier.md reports what each adds and costs on the development corpus.
"""

from __future__ import annotations

import string
import tomllib
from collections.abc import Mapping, Sequence
from functools import lru_cache

import regex

from anonymizer.classifier.eponyms import eponymous, load_eponyms
from anonymizer.classifier.features import Dictionaries, Tokens, default_dictionaries
from anonymizer.detectors import unit_after_number
from anonymizer.detectors.honorifics import CONTRACTION, entries
from anonymizer.resources import data_dir, read_word_list
from anonymizer.vocabulary import (
    RELATIVE_CUES,
    SOCIAL_CUES,
    SwappedWords,
    chinese_name_parts,
    name_words,
    never_a_name,
    proper_name,
    surrogate_name_words,
)

NAME_CATEGORIES = frozenset({"DOCTOR", "PATIENT", "RELATIVE", "NAME"})
PLACE_CATEGORIES = frozenset({"LOCATION", "HOSPITAL"})
APOSTROPHES = frozenset({"'", "’"})  # between the "O" and the rest of "O'Neill"
# Words that continue a place or hospital's name: "University of Maryland", "Harford Memorial",
# "Baltimore Rehab", "Ocean City", "Daytona Beach", "Tampines Mall", "Changi Airport", "Geylang Bahru".
PLACE_CONNECTORS = frozenset({
    "of", "memorial", "general", "university", "medical", "center", "centre", "hospital", "hosp", "regional",
    "community", "county", "st", "saint", "rehab", "rehabilitation", "clinic", "institute", "campus", "beach",
    "park", "heights", "village", "lake", "falls", "valley", "hills", "island", "city", "mall", "airport", "plaza", "bahru",
    "baru",
})
# Kinship words, proxies and their shorthand: the name of a relative follows ("dtr jenna", "hb bala").
CUES = RELATIVE_CUES | SOCIAL_CUES
# Words that end a name after a cue although no dictionary calls them common, and are never a
# relative's name: "son tan hp 9123", "daughter Lim Pei Shan, Tel: 6789", "Wife's NRIC S7654321A".
NAME_END = frozenset({
    "hp", "tel", "ph", "hse", "mobile", "nok", "re", "at", "and", "to", "in", "on", "with", "from",
    "nric", "ic", "fin", "mrn", "passport", "addr", "email",
})
# Connectors inside a name ("Rahman bin Roslan", "KAMALA D/O GANESH"): rules/name_connectors.txt's, as tokens.
NAME_CONNECTORS = frozenset({"bin", "binte", "binti", "bte", "bt"})
# Particles inside a surname, up to two in a row ("van der Berg", "de la Cruz", "von Holt").
PARTICLES = frozenset({"van", "von", "der", "den", "de", "da", "di", "del", "della", "la", "le", "du", "dos", "das"})
SLASH_CONNECTORS = frozenset({("s", "o"), ("d", "o"), ("a", "l"), ("a", "p")})
# A familiar prefix before a Chinese given name ("son ah zhi", "FDW AH HWEE"): a name with the word after it.
NAME_PREFIXES = frozenset({"ah"})
LETTER, UPPER = regex.compile(r"\p{L}"), regex.compile(r"\p{Lu}")
ASCII_LETTERS, ASCII_UPPER = string.ascii_letters.encode(), string.ascii_uppercase.encode()
COMMON_RANK = 5000  # words among the 5,000 most frequent English words are never added
# What follows a relative's name where a sentence goes on about the relative ("nephew wee to bring
# pt home", "husband brown understand", "friend wood at bedside"): then a surname English uses is
# the name (_surname_before_predicate).
PREDICATE_AFTER = frozenset({"to", "at", "understand", "understands", "aware", "informed", "updated", "called", "visited", "agreeable"})
PREDICATE_RANK = 1000  # a surname among the 1,000 most frequent English words is the word there ("soon", "young")
CONTRACTED = frozenset({"t", "ll", "m", "re", "ve", "d"})  # what follows the apostrophe of a contraction
WORD_LETTERS = frozenset({"a", "i", "I"})  # letters that are words ("son a bit better", "I"), not initials
# Words that join a place's name but never end it: "University of Maryland", not "Grace of Towson".
INNER_CONNECTORS = frozenset({"of"})
ABBREVIATION_LENGTH = 4  # in mixed case, a word of up to 4 capitals that no name list holds (vocabulary.name_words) is an abbreviation


def _frequent(word: str, dictionaries: Dictionaries) -> bool:
    rank = dictionaries.english_rank.get(word)
    return rank is not None and rank < COMMON_RANK


def _common(word: str, dictionaries: Dictionaries) -> bool:
    return _frequent(word, dictionaries) and word not in dictionaries.words["first"] and word not in dictionaries.words["last"]


def _common_as_written(word: str, lower: str, dictionaries: Dictionaries) -> bool:
    """:func:`_common`, but a Capitalised word that any of the project's name lists holds is a
    name's in mixed case: "Soon" of "Ong Choo-Soon", "Hong" of "Tan Eng Hong" (in lower case or
    capitals "soon" stays the word)."""
    if word[:1].isupper() and not word.isupper():
        return _frequent(lower, dictionaries) and lower not in name_words()
    return _common(lower, dictionaries)


@lru_cache(maxsize=1)
def titles() -> frozenset[str]:
    """The honorifics of rules/honorifics.toml ("dr", "prof", "mdm"): next to a name, never part of
    it; not those that open a name ("Mohd", the name's first word)."""
    return frozenset(entry["name"].casefold() for entry in entries(_honorific_rules()) if not entry.get("opens"))


@lru_cache(maxsize=1)
def credentials() -> frozenset[str]:
    """The professional credentials of rules/honorifics.toml, after a signature's name ("Jean Tan,
    RN", "R.N.", "RRT"): never a name."""
    return frozenset(_honorific_rules()["credentials"])


@lru_cache(maxsize=1)
def role_titles() -> frozenset[str]:
    """The clinicians' roles of rules/honorifics.toml written as titles, of one word ("nurse",
    "fellow", "clinician"): before a name, never part of it ("Nurse Clinician Jane Ong")."""
    return frozenset(w.casefold() for w in _honorific_rules()["role_titles"] if " " not in w and "-" not in w)


@lru_cache(maxsize=1)
def swapped_stop_words() -> SwappedWords:
    """The stop words of rules/honorifics.toml with two letters swapped ("dr reveiw"): never a name
    unless Capitalised ("Dr Thier")."""
    return SwappedWords(w.casefold() for w in _honorific_rules()["stop_words"])


@lru_cache(maxsize=1)
def _honorific_rules() -> dict:
    return tomllib.loads((data_dir("rules") / "honorifics.toml").read_text(encoding="utf-8"))


def a_title(tokens: Tokens, i: int, category: str) -> bool:
    """Whether token i is a title that the classifier would take for a name ("Prof." before a
    doctor's name): the title stays in the text, as the honorific detector leaves it."""
    return category in NAME_CATEGORIES and tokens.lowers[i] in titles()


def _name_like(text: str, tokens: Tokens, i: int, dictionaries: Dictionaries, all_caps: bool, before_name: bool = False) -> bool:
    """Whether token i, next to a flagged name (`before_name`: right before it), may be part of it."""
    word = tokens.words[i]
    lower = tokens.lowers[i]
    if not word.isalpha() or lower in titles() or lower in role_titles() or lower in credentials():
        return False
    if CONTRACTION.match(text, tokens.ends[i]):
        return False
    if len(word) == 1:
        # an initial: "E." or "E Nessenson", never part of "D/O", "S/P", "A&O", nor the pronoun ("I DON'T";
        # "I." is one, and "I" right before a name after a word in lower case: "friend I Chia")
        after = text[tokens.ends[i] : tokens.ends[i] + 1]
        before = text[tokens.starts[i] - 1 : tokens.starts[i]] if tokens.starts[i] else ""
        if word == "I" and after != "." and not (before_name and after == " " and i > 0 and tokens.words[i - 1].islower()):
            return False
        return word.isupper() and after in ("", ".", " ", ",", "\n") and before in ("", " ", "\n", ".")
    if _common_as_written(word, lower, dictionaries) or lower in dictionaries.words["med"] or never_a_name(lower) or kinship(tokens, i):
        return False
    if not all_caps and word.isupper() and len(word) <= ABBREVIATION_LENGTH and lower not in name_words():
        return False  # in mixed case, capitals of a short word no name list holds: "Prakash NRIC", "TCU Wang", "DrNg MCR"
    if all_caps:
        # no capital tells a name from a word there: a listed given name, or a listed surname that
        # English does not use every day ("GOOD", "SMALL" are surnames too)
        return lower in dictionaries.words["first"] or (lower in dictionaries.words["last"] and not _frequent(lower, dictionaries))
    return word[0].isupper()


def kinship(tokens: Tokens, i: int) -> bool:
    """Whether token i is a kinship or social word ("HB ANDREW", "DIL PAMELA", "FDW Siti", "health
    care PROXY"), the "law" of "son-in-law" included: it names the relation, never the person."""
    lower = tokens.lowers[i]
    return lower in CUES or (lower == "law" and i > 0 and tokens.lowers[i - 1] == "in" and tokens.gaps[i] == "-")


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
                # "Choo-Soon"; names joined by a slash, as a list of a team writes them ("Halvorsen/Brackett")
                joined = gap in ("-", "/") and _written_alike(tokens.words[left], tokens.words[left + 1])
                if "\n" in gap or (len(gap.strip(" .")) > 0 and not (joined or _elided(tokens, left))):
                    break
                if "." in gap and len(tokens.words[left]) > 1:
                    break  # a period ends a sentence ("Dr. Okafor. Await PT eval"), unless after an initial ("E. Nessenson")
                k = _connector(tokens, j, step, all_caps)
                if k:  # "Muhammad Firdaus bin Abdullah", "Ravi s/o Kumar": the name goes on past it
                    beyond = j + k * step
                    if not (0 <= beyond < n and tokens.gaps[max(beyond, beyond - step)] == " "):
                        break
                    if flagged[beyond] not in NAME_CATEGORIES and not (
                        flagged[beyond] is None and _name_like(text, tokens, beyond, d, all_caps)
                    ):
                        break
                    added.update(dict.fromkeys(range(j, beyond, step), category))
                    j = beyond
                    continue
                if not (_elided(tokens, j) or _name_like(text, tokens, j, d, all_caps, before_name=step < 0)):
                    break
                added[j] = category
                j += step
        j = _after_and(text, tokens, i)
        if j is not None and flagged[j] is None and j not in added and _name_like(text, tokens, j, d, all_caps):
            added[j] = category  # "Both Imelda and Oswin are his proxies"
    return added


def _connector(tokens: Tokens, j: int, step: int, all_caps: bool) -> int:
    """How many tokens a name's connector at token j takes, read in the direction of `step`: 1 for
    "bin", "binte", "bte" in lower case (in capitals in a note in capitals: "trash Bin" is none), 2
    for "s/o", "d/o", "a/l", "a/p" (its two letters and the slash), 0 for anything else."""
    word = tokens.words[j]
    if not (word.islower() or (all_caps and word.isupper())):
        return 0
    if tokens.lowers[j] in NAME_CONNECTORS:
        return 1
    k = j + step
    first, second = (k, j) if step < 0 else (j, k)
    if not (0 <= first and second < len(tokens) and tokens.gaps[second] == "/"):
        return 0
    return 2 if (tokens.lowers[first], tokens.lowers[second]) in SLASH_CONNECTORS else 0


def _elided(tokens: Tokens, i: int) -> bool:
    """Whether token i is the capital and apostrophe that open a surname ("O'Neill", "D'Souza"):
    one part of the name with the Capitalised word after it, which is no contraction's ending
    ("I'LL", "I'm")."""
    return (
        i + 1 < len(tokens)
        and tokens.gaps[i + 1] in APOSTROPHES
        and len(tokens.words[i]) == 1
        and tokens.words[i].isupper()
        and tokens.words[i + 1][:1].isupper()
        and not contraction_end(tokens, i + 1)
        and tokens.lowers[i + 1] != "s"
    )


def contraction_end(tokens: Tokens, i: int) -> bool:
    """Whether token i ends a contraction after its apostrophe: the "m" of "I'm", the "LL" of "I'LL"."""
    return tokens.lowers[i] in CONTRACTED and i > 0 and tokens.gaps[i] in APOSTROPHES


def _written_alike(first: str, second: str) -> bool:
    """Whether two words are both Capitalised or both in capitals: the parts of one hyphenated
    name ("Choo-Soon", "LENG-LING"), not "tan-coloured"."""
    return (first.istitle() and second.istitle()) or (first.isupper() and second.isupper())


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
                gap = tokens.gaps[min(j, j - step) + 1]
                if "\n" in gap or gap.strip(" .'’"):  # a comma or a bracket ends a name: "London, hosp MRN"
                    break
                added[j] = category
                j += step
            last, beyond = j - step, 0 <= j < n and (flagged[j] in PLACE_CATEGORIES or j in added)
            if last != i and tokens.lowers[last] in INNER_CONNECTORS and not beyond:
                del added[last]  # "of" ends no place: "daughter Grace of Lindqvistown"
    return added


def relative_cues(text: str, tokens: Tokens, flagged: Sequence[str | None], dictionaries: Dictionaries | None = None) -> dict[int, str]:
    """The relatives named next to a kinship word: "dtr jenna called", "WIFE MARGO AT BEDSIDE",
    "son - tom", "husband (jim)", "daughter Mary Ann Smith", "Sons Oswin and Leopold", "Hank (son)".

    A name right after a kinship word (or before one in brackets) is a relative's, so a name the
    classifier or a list called a clinician's or a bare name there is relabelled RELATIVE, and any
    name found there, or a given name a list or a rule took for a place ("wife Alexandra Chung"),
    goes on over its further words ("friend marcus ho"); what
    follows the kinship word must read as a name (:func:`_relative_word`), so "wife called",
    "son visiting", "dtr in to visit" stay, and only spaces, a comma, a colon, dashes or an opening
    bracket may stand between (a period ends the sentence, a slash is "MOM/LAXATIVES")."""
    lowers = tokens.lowers
    if CUES.isdisjoint(lowers):  # most notes: a set test is cheaper than the scan below
        return {}
    d = dictionaries or default_dictionaries()
    added: dict[int, str] = {}
    n = len(tokens)
    for i in [i for i, lower in enumerate(lowers) if lower in CUES]:
        category = "NAME" if lowers[i] in SOCIAL_CUES else "RELATIVE"
        if tokens.gaps[i].endswith("(") and tokens.gaps[i + 1].startswith(")"):  # gaps: one more than the tokens
            _names_before(text, tokens, flagged, i, d, added, category)  # "Hank Smith (son)"
        j = _after_cue(tokens, i)
        if j is None or eponymous(text, tokens, j, load_eponyms(), titles()):  # "MOTHER - PARKINSON'S"
            continue
        if initials := _initials(tokens, flagged, j, d, added):  # "h s neo", "K H WONG", "r soh", "j l tay" with "tay" found
            for k in initials:
                if _takes(flagged, k, added):
                    added[k] = category
            j = initials[-1]
        elif _chinese_given_pair(tokens, j) and _takes(flagged, j, added) and _takes(flagged, j + 1, added):
            added[j] = added[j + 1] = category  # "wife HOCK SOON": a given name without its surname
            j += 1
        elif flagged[j] in NAME_CATEGORIES or (flagged[j] in PLACE_CATEGORIES and lowers[j] in d.words["first"]):
            # a name already found there, or a given name taken for a place ("wife Alexandra Chung",
            # "son Austin"): its further words and connectors still follow
            if flagged[j] != category and _takes(flagged, j, added):
                added[j] = category  # a clinician's or a bare name right after the cue is the relative's
        elif not _takes(flagged, j, added):
            continue
        elif _relative_word(tokens, j, d, first=lowers[i] == "mom" and tokens.words[i].isupper()):  # MOM: milk of magnesia
            added[j] = category
        elif _surname_before_predicate(tokens, j, d):
            added[j] = category  # "nephew wee to bring pt home"
        elif lowers[j] in NAME_PREFIXES and j + 1 < n and tokens.gaps[j + 1] == " " and _surname_like(tokens, j + 1, d):
            added[j] = added[j + 1] = category  # "son ah zhi"
            j += 1
        elif _surname_like(tokens, j, d) and j + 1 < n and tokens.gaps[j + 1] in (" ", "-") and _surname_like(tokens, j + 1, d):
            added[j] = category  # "husband kok-hui", "fdw lau soon-kow": two words no dictionary calls common
        else:
            continue
        while True:
            j = _extend_relative(tokens, flagged, j, d, added, category)
            if j is None:
                break
            added[j] = category
    return added


def _surname_before_predicate(tokens: Tokens, j: int, d: Dictionaries) -> bool:
    """Whether token j, in lower case or capitals, is a surname a list holds though English uses
    the word too ("wee", "brown", "wood", "neo"), right before what a sentence says of the relative
    (PREDICATE_AFTER: "nephew wee to bring", "husband brown understand"; "son well at home", "wife
    soon to visit" stay)."""
    word, lower = tokens.words[j], tokens.lowers[j]
    if word.istitle() or not word.isalpha() or len(word) < 2 or j + 1 >= len(tokens) or tokens.gaps[j + 1] != " ":
        return False
    if tokens.lowers[j + 1] not in PREDICATE_AFTER or d.english_rank.get(lower, RARE_RANK) < PREDICATE_RANK:
        return False  # "wife soon to visit", "son young at heart": the word
    return lower in d.words["last"] or lower in chinese_name_parts()[0]


def _surname_like(tokens: Tokens, j: int, d: Dictionaries, initialled: bool = False) -> bool:
    """Whether token j may continue a name already begun: letters, not common English, not a
    clinical word, a title, a cue or a verb form ("hui lay", "jun-min"; not "at", "checks", "hp"),
    nor a ward's abbreviation unless Capitalised and listed as a name ("Neo") or after two
    initials (`initialled`: "K S NEO", "k s neo")."""
    word, lower = tokens.words[j], tokens.lowers[j]
    return (
        len(word) > 1
        and word.isalpha()
        and lower not in NAME_END
        and lower not in CUES
        and not _common_as_written(word, lower, d)
        and (lower not in d.words["med"] or initialled or _ward_word_as_name(word, lower))  # "S L Neo", not "on neo"
        and lower not in titles()
        and not VERB_FORM.search(lower)
        and not _third_person(lower, d)
    )


def _ward_word_as_name(word: str, lower: str) -> bool:
    """Whether a ward's abbreviation is written as a name: Capitalised and listed ("Neo"), for the
    ward writes its abbreviations in capitals or lower case ("NG tube", "on neo")."""
    return word.istitle() and lower in name_words()


def _chinese_given_name(tokens: Tokens, flagged: Sequence[str | None], j: int, k: int, added: dict[int, str]) -> int | None:
    """Where a Chinese name that token j has begun ends when its given name's two syllables
    follow the surname (vocabulary.chinese_name_parts), k the token after j, all three written
    in one case: "yeo lian min", "QUEK HOCK SOON", "Tan Ah Kow"; None for "tan soon to visit"."""
    surnames, syllables = chinese_name_parts()
    lowers, gaps = tokens.lowers, tokens.gaps
    if lowers[k] not in syllables:
        return None
    if j > 0 and gaps[j] == " " and lowers[j - 1] in surnames and lowers[j] in syllables and (j - 1 in added or flagged[j - 1]):
        first, last = j - 1, k  # the surname and a syllable found: "yeo lian" + "min"
    elif lowers[j] in surnames and k + 1 < len(tokens) and gaps[k + 1] == " " and lowers[k + 1] in syllables:
        first, last = j, k + 1  # the surname found: "quek" + "hock soon"
    else:
        return None
    if not all(_takes(flagged, i, added) for i in range(k, last + 1)):
        return None
    return last if _one_case(tokens.words[first : last + 1]) else None


def _chinese_given_pair(tokens: Tokens, j: int) -> bool:
    """Whether tokens j and j + 1 are the two syllables of a Chinese given name written in one
    case (vocabulary.chinese_name_parts), apart or hyphenated: "HOCK SOON", "mei ling", "KENG-LAY";
    not "soon to"."""
    if j + 1 >= len(tokens) or tokens.gaps[j + 1] not in (" ", "-"):
        return False
    syllables = chinese_name_parts()[1]
    return _one_case(tokens.words[j : j + 2]) and tokens.lowers[j] in syllables and tokens.lowers[j + 1] in syllables


def _one_case(words: Sequence[str]) -> bool:
    """Whether the words are all in lower case, all in capitals or all Capitalised."""
    return all(w.islower() for w in words) or all(w.isupper() for w in words) or all(w.istitle() for w in words)


def _syllable(tokens: Tokens, k: int) -> bool:
    """Whether token k may be a syllable of a hyphenated given name: two to six letters, no
    kinship word, title or word that ends a name ("kim-min", "kow-hong"; not "son-in-law")."""
    word, lower = tokens.words[k], tokens.lowers[k]
    return 2 <= len(word) <= SYLLABLE_LENGTH and word.isalpha() and lower not in CUES and lower not in NAME_END and lower not in titles()


def _named(tokens: Tokens, flagged: Sequence[str | None], k: int, d: Dictionaries, added: dict[int, str]) -> bool:
    """Whether token k, after a connector, is a name: one found already, or a word that may be a surname."""
    return flagged[k] in NAME_CATEGORIES or (_takes(flagged, k, added) and _surname_like(tokens, k, d))


def _letter(word: str) -> bool:
    """One letter: an initial, or one of WORD_LETTERS."""
    return len(word) == 1 and word.isalpha()


def _initials(tokens: Tokens, flagged: Sequence[str | None], j: int, d: Dictionaries, added: dict[int, str]) -> list[int]:
    """Up to three one-letter initials from token j and the word after them, if that word may be a
    surname: "h s neo", "K H WONG", "w a chua"; a first letter that is also a word ("a", "I") only
    before a surname a name list holds ("son a reyes", "daughter I Rajan"; not "son a bit better",
    "son I think").  An initial or the surname may be a name found already ("j l tay" with the
    patient's surname)."""
    n, words = len(tokens), tokens.words
    k = j
    while k < n and k - j < 3 and _letter(words[k]):
        if not (_takes(flagged, k, added) or flagged[k] in NAME_CATEGORIES) or (k > j and tokens.gaps[k] not in (" ", ". ", ".")):
            return []
        k += 1
    found = k < n and flagged[k] in NAME_CATEGORIES  # "husband s singh" with "singh" found already
    if k == j or k >= n or tokens.gaps[k] not in (" ", ". ") or not (found or _takes(flagged, k, added)):
        return []
    if not _surname_like(tokens, k, d, initialled=k - j > 1):
        return []
    if words[j] in WORD_LETTERS and not (found or tokens.lowers[k] in name_words() or tokens.lowers[k] in surrogate_name_words()):
        return []
    return list(range(j, k + 1))


SYLLABLE_LENGTH = 6  # a syllable of a hyphenated given name is this long at most ("kim-min", "soon-guan")
# What may stand between a kinship word and the name ("son: Tom", "(FDW) Siti").
RELATIVE_GAP = regex.compile(r" *(?:[,:=]|-+|\(\?\)|\(|\)[,:]?|['’])? *")
RELATIVE_SKIP = frozenset({"name", "named", "is", "was"})  # "wife's name is", "son named", "daughter is"
# Titles a relative's name may carry ("son mr tan"); not a doctor's: "husband, Dr Quiley" names two people.
COURTESY_TITLES = frozenset({"mr", "mrs", "miss", "ms", "mdm", "madam"})
RELABEL = frozenset({"DOCTOR", "NAME"})  # a name after a kinship word is a relative's, not a clinician's


def _after_cue(tokens: Tokens, i: int) -> int | None:
    """The token where the name after kinship word i would start, past "'s", "named", "in-law"."""
    n, lowers = len(tokens), tokens.lowers
    j = i + 1
    while j < n:
        gap = tokens.gaps[j]
        if gap and RELATIVE_GAP.fullmatch(gap) is None:
            return None
        possessive = lowers[j] == "s" and gap in ("'", "’")  # the "s" of "wife's", not the initial of "husband s singh"
        if possessive or lowers[j] in RELATIVE_SKIP or lowers[j] in COURTESY_TITLES:  # "daughter miss ho jun-min"
            j += 1
        elif lowers[j] == "in" and j + 1 < n and lowers[j + 1] == "law":
            j += 2
        else:
            return j
    return None


def _takes(flagged: Sequence[str | None], j: int, added: dict[int, str]) -> bool:
    """Whether token j may become RELATIVE: unflagged, or a name taken for a clinician's."""
    return j not in added and (flagged[j] is None or flagged[j] in RELABEL)


@lru_cache(maxsize=1)
def short_nicknames() -> frozenset[str]:
    """Two-letter diminutives ("al", "ed", "jo"; rules/short_nicknames.txt): names only where
    written as one right after a kinship word ("Son, Ed, visited")."""
    return frozenset(read_word_list(data_dir("rules") / "short_nicknames.txt"))


def _relative_word(tokens: Tokens, j: int, d: Dictionaries, first: bool = False, strict: bool = False) -> bool:
    """Whether token j reads as a relative's name.  Capitalised ("Mary", "Ed"): a two-letter
    diminutive (short_nicknames), a listed name that is also a ward's abbreviation ("Neo"), or in
    mixed case a word that is not common English or clinical.
    In capitals or lower case, which say nothing: a first name that is not a function word
    ("jenna", "DON"), a surname that is not common English or that English spells only
    Capitalised ("EVANS", "hussein": vocabulary.proper_name), or a word rare in English ("margo")
    that is neither as short as an abbreviation (three letters: "poa", "PCP") nor has a verb's
    ending ("trached", "resides").
    `first`: in capitals or lower case, first names only (a list's later names, after MOM);
    `strict`: first names and surnames only (a name's later words)."""
    word, lower = tokens.words[j], tokens.lowers[j]
    if word.istitle() and lower in short_nicknames():
        return True  # "Ed", where "ED" and "ed" are the department
    if not word.isalpha() or len(word) < 2 or lower in CUES or lower in NAME_END or lower in titles():
        return False
    if lower in d.words["med"]:
        return _ward_word_as_name(word, lower)  # "wife Neo", "son Ng"
    if word[0].isupper() and not word.isupper():
        return not _common_as_written(word, lower, d)
    rank = d.english_rank.get(lower, RARE_RANK)
    if lower in d.words["first"]:
        return rank >= FUNCTION_RANK
    if first:
        return False
    if lower in d.words["last"]:
        return rank >= COMMON_RANK or proper_name(lower)
    _, syllables = chinese_name_parts()
    if lower in surrogate_name_words() and lower not in syllables:
        return rank >= COMMON_RANK  # "neighbour foo", "niece nur"; a Chinese given syllable alone is none ("son mei")
    return (
        not strict
        and (rank >= RARE_RANK or proper_name(lower))
        and len(word) > 3
        and not VERB_FORM.search(lower)
        and not _third_person(lower, d)
    )


def _third_person(lower: str, d: Dictionaries) -> bool:
    """Whether a word is a verb's -s form whose stem English uses ("resides", "accompanies",
    "manages finances" after "son"), which a note's subject takes, not a name: none that a name
    list holds ("Williams", "Roberts")."""
    if not lower.endswith("s") or lower in d.words["first"] or lower in d.words["last"]:
        return False
    return any(d.english_rank.get(stem, RARE_RANK) < RARE_RANK for stem in (lower[:-1], lower[:-2], lower[:-3] + "y"))


FUNCTION_RANK = 500  # first names among the 500 most frequent English words ("guy", "else") are words there
# A rare word with a verb's ending, or an adjective's made of a verb, is a clinical verb or its
# adjective ("trached", "ambulating", "contactable"), not a name ("Ming" keeps its name: only
# -ing words of six letters or more; a listed given name such as "Mable" is read before).
VERB_FORM = regex.compile(r"(?:ed|..ing|..able)$")
RARE_RANK = 20000  # a word rarer than this in English, after a kinship word, is taken for a name


def _extend_relative(
    tokens: Tokens, flagged: Sequence[str | None], j: int, d: Dictionaries, added: dict[int, str], category: str = "RELATIVE"
) -> int | None:
    """The token continuing the relative's name at token j: its next word on the same line
    ("Mary Ann Smith", "don reid", "seah hui lay", "ho jun-min", "Brown-O'Neill"), past a connector ("nadia binte
    salleh", "KAMALA D/O GANESH": the connector is added too) or up to two particles ("imelda van
    der quist"), or the next name of a list
    ("David and Theodore", "Smokey, Morris")."""
    k = j + 1
    n = len(tokens)
    if k >= n:
        return None
    gap = tokens.gaps[k]
    if flagged[k] in NAME_CATEGORIES and k not in added and gap in (" ", "-"):
        return k  # a further word found already ("png xin hwee" with "xin" found): the name goes on past it
    if not _takes(flagged, k, added):
        return None
    if gap == " " and (last := _chinese_given_name(tokens, flagged, j, k, added)) is not None:
        if last > k:
            added[k] = category
        return last  # "yeo lian min", "QUEK HOCK SOON": the given name's syllables, English words or not
    if gap in (" ", "-") and _elided(tokens, k) and _takes(flagged, k + 1, added):
        added[k] = category
        return k + 1  # "Brown-O'Neill", "Sean O'Malley"
    if gap in (" ", "-") and (_relative_word(tokens, k, d, strict=True) or _surname_like(tokens, k, d)):
        return k
    if gap == "-" and _syllable(tokens, k):
        return k  # "kim-min": a hyphenated given name's syllable, a word of English or not
    if gap == " " and k + 1 < n:
        lowers = tokens.lowers
        if lowers[k] in NAME_CONNECTORS and tokens.gaps[k + 1] == " " and _named(tokens, flagged, k + 1, d, added):
            added[k] = category
            return k + 1
        m = k  # "kelvin van der berg": the particles, then the surname
        while m < n and m - k < 2 and lowers[m] in PARTICLES and tokens.gaps[m] == " " and _takes(flagged, m, added):
            m += 1
        if k < m < n and tokens.gaps[m] == " " and _named(tokens, flagged, m, d, added):
            for particle in range(k, m):
                added[particle] = category
            return m
        if (
            k + 2 < n
            and (lowers[k], lowers[k + 1]) in SLASH_CONNECTORS
            and tokens.gaps[k + 1] == "/"
            and tokens.gaps[k + 2] == " "
            and _named(tokens, flagged, k + 2, d, added)
        ):
            added[k] = added[k + 1] = category
            return k + 2
    if gap in (", ", " & ") and _relative_word(tokens, k, d, first=True):
        return k
    if tokens.lowers[k] == "and" and gap == " " and k + 1 < len(tokens) and tokens.gaps[k + 1] == " ":
        if _takes(flagged, k + 1, added) and _relative_word(tokens, k + 1, d, first=True):
            return k + 1
    return None


def _names_before(
    text: str, tokens: Tokens, flagged: Sequence[str | None], i: int, d: Dictionaries, added: dict[int, str], category: str = "RELATIVE"
) -> None:
    """Up to three names right before a bracketed kinship word on its line, with the initials and
    a connector before them: "Hank Smith (son)", "neo ling mei (brother)", "choo-leng (husband)",
    "quek hock soon (wife)",
    "K H Rao (son)", "Jamal bin Salleh (son)", "Nur Hakim bin Kamal (son)", "Anand s/o Quellmore (son)"; a name found already
    among them goes on the same ("l l khoo (brother)" where Khoo is the patient's surname too)."""
    if tokens.gaps[i].strip() != "(":
        return
    j = i - 1
    if j >= 1 and _chinese_given_pair(tokens, j - 1) and _takes(flagged, j - 1, added) and _takes(flagged, j, added):
        added[j - 1] = added[j] = category  # "hock soon (wife)": a given name of everyday words
        if tokens.gaps[j - 1] not in (" ", "-"):
            return
        j -= 2
    if j == i - 1 and j >= 0 and _takes(flagged, j, added) and _listed_before_bracket(tokens, j):
        added[j] = category  # "GERALD NEO (HUSBAND)": a listed name, though a ward's abbreviation too
        if tokens.gaps[j] not in (" ", "-"):
            return
        j -= 1
    while j >= 0 and i - j <= 3 and _name_at(tokens, flagged, j, d, added, strict=i - j > 1):
        if _takes(flagged, j, added):
            added[j] = category
        if tokens.gaps[j] not in (" ", "-"):
            return
        j -= 1
    if j + 1 == i:
        return  # no name before the bracket
    lowers, words = tokens.lowers, tokens.words
    if j >= 1 and lowers[j] in NAME_CONNECTORS and tokens.gaps[j] == " ":
        connector = 1  # "Jamal bin Salleh"
    elif j >= 2 and (lowers[j - 1], lowers[j]) in SLASH_CONNECTORS and tokens.gaps[j] == "/" and tokens.gaps[j - 1] == " ":
        connector = 2  # "Anand s/o Quellmore"
    else:
        connector = 0
    if connector:
        first = j - connector
        if all(_takes(flagged, k, added) for k in range(first + 1, j + 1)) and _name_at(tokens, flagged, first, d, added):
            if first >= 1 and tokens.gaps[first] == " " and _name_at(tokens, flagged, first - 1, d, added, strict=True):
                first -= 1  # a given name of two words: "Nur Hakim bin Kamal (son)"
            for k in range(first, j + 1):
                if _takes(flagged, k, added):
                    added[k] = category
        return
    for k in range(j, max(j - 3, -1), -1):  # "K H Rao", "y t zhang"
        if not (_letter(words[k]) and words[k] not in WORD_LETTERS and _takes(flagged, k, added)):
            return
        added[k] = category
        if tokens.gaps[k] not in (" ", ". ", "."):
            return


def _listed_before_bracket(tokens: Tokens, j: int) -> bool:
    """Whether token j, right before a bracketed kinship word, is a name a list holds written in
    capitals or lower case, where a ward's abbreviation of that spelling is no name elsewhere
    ("NEO (HUSBAND)"; "on neo" stays a ward's)."""
    word = tokens.words[j]
    return len(word) > 1 and word.isalpha() and (word.isupper() or word.islower()) and tokens.lowers[j] in name_words()


def _name_at(tokens: Tokens, flagged: Sequence[str | None], j: int, d: Dictionaries, added: dict[int, str], strict: bool = False) -> bool:
    """Whether token j is a name: one found already, or a word that may be a relative's name."""
    if flagged[j] in NAME_CATEGORIES:
        return True
    return _takes(flagged, j, added) and (_relative_word(tokens, j, d, strict=strict) or _surname_like(tokens, j, d))


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


def spread_called(notes: Sequence[tuple[str, Tokens, Sequence[str | None]]], called: Mapping[str, str]) -> list[dict[int, str]]:
    """Across one patient's notes: the names a note says the patient (or a relative) goes by
    (`called`: word -> category, the record detector's rule "called": "Doris prefers to be
    called Dottie") wherever else the notes write them as names, Capitalised or in a note of one
    case, as that detector takes them within its note, three letters at least ("Dottie seen with
    wife"; not "a dot", nor in capitals in a mixed-case note, "to ED" for a patient called Ed, nor a
    unit after a number, "PR 110/MIN")."""
    out = []
    for text, tokens, flagged in notes:
        uniform = text.isupper() or text.islower()
        words, lowers = tokens.words, tokens.lowers
        near = [] if called.keys().isdisjoint(lowers) else [i for i, lower in enumerate(lowers) if lower in called and flagged[i] is None]
        out.append({
            i: called[lowers[i]]
            for i in near
            if len(lowers[i]) > 2 and (uniform or words[i].istitle()) and not unit_after_number(text, tokens.starts[i])
        })
    return out
