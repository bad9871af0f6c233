"""Known doctors, hospitals and places (seed 003, section 3.4), matched wherever they occur;
a listed institution also without its suffix ("Calvert" of "Calvert Hospital": :func:`short_forms`)
and a listed hospital by its initials ("TTSH" of "Tan Tock Seng Hospital": :func:`acronyms`; three
initials only where a place is named: "f/u at CGH"; an unlisted one of three to six ending in H, or
of four to six in MC, there too, if no word list holds it: "f/u at KTPH", "transferred from BIDMC"), however its
punctuation is written ("St. Lukes", "Women's & Children's", "Bukit-Timah", "Angmokio":
:func:`written_forms`).

Lists can hold tens of thousands of entries, so they are compiled once per run into a single
pattern shaped as a character trie: the regex engine then follows one branch per letter instead of
trying every entry at every position, and nested greedy groups make the longest entry win.  The
pattern is compiled with the standard library's `re`, which searches such a trie about a hundred
times faster than the `regex` module does.  An ASCII note is searched lower-cased, by a copy of
the pattern that need not ignore case: the same matches, in about a third of the time.

The staff directory (the DOCTOR lists) holds full names, while notes sign with one part of a name
next to a title or a role: "Dr Lee", "Lee/reg/ENT", "LIM KH (MO)", "Priya, SN", "DrLim".  So every
part of a DOCTOR entry goes into the same trie, and :class:`StaffDirectory` decides per hit: a part
that is no ordinary word (english.txt, medical.txt, common_words.txt) is taken anywhere, as the
record's names are; one that is ("Hope", "May", "Lee") only next to a title or a role
(rules/lists.toml), or on the note's closing line with nothing but other parts and initials: a
signature ("- HALL", "p hall").  Next to a title or a role a spelling variant of a part is taken
too, by the record matcher's edit-distance ratio.  Titles and roles are found by one more compiled pattern;
words next to them are compared with the directory in one rapidfuzz call per note, and only the
words no earlier note had (the answers are kept for the run).
"""

from __future__ import annotations

import logging
import re
import tomllib
from dataclasses import dataclass
from operator import attrgetter
from pathlib import Path
from typing import Iterable, Iterator, Mapping

import numpy as np
import re2
from rapidfuzz import process
from rapidfuzz.distance import Levenshtein

from anonymizer.classifier.eponyms import load_eponyms
from anonymizer.detectors import names_a_colour
from anonymizer.record import PatientRecord
from anonymizer.resources import data_dir, read_word_list
from anonymizer.settings import DetectorsConfig, read_text_file
from anonymizer.spans import CATEGORIES, Span
from anonymizer.vocabulary import PLAIN_RANK, RELATIVE_CUES, SOCIAL_CUES, clinical_words, english_rank, proper_nouns

logger = logging.getLogger(__name__)

MIN_LENGTH = 3  # shorter entries ("Dr", "SG") would match all over ordinary text
MAX_LENGTH = 200  # longer lines are not names, and would nest the pattern too deeply
_SPACES = re.compile(r"\s+")
_APOSTROPHES = re.compile(r"['’]")
_INVISIBLE = "\u200b\u200c\u200d\u2060\ufeff"  # zero-width characters a copy and paste leaves between words
_SEPARATORS = re.compile(rf"[.\-{_INVISIBLE}]")
# Between an entry's words: spaces or a hyphen ("Bukit-Timah"); after a word of ABBREVIATION
# letters or fewer also a period, with spaces or without ("St. Luke's", "St.Luke's"), where after
# a longer one a period ends a sentence ("Changi. General condition").  (Invisible characters are
# gone from the view the detectors read: "Bukit\u200bTimah" is read as the words run together.)
_GAP = r"[\s-]+"
_ABBREVIATED_GAP = r"[\s.-]+"
ABBREVIATION = 3
_SHORT_WORD_SPACE = re.compile(rf"(?<![^\W\d_])([^\W\d_]{{1,{ABBREVIATION}}}) ")
_AFTER_SHORT = "\x01"  # in the trie, a space after a short word
_CHARS = {" ": _GAP, _AFTER_SHORT: _ABBREVIATED_GAP, "'": "['’]?"}  # what a key's characters match in the trie
JOINED_LENGTH = 8  # an entry's words run together are taken from this many letters ("angmokio")
_PRIORITY = {category: rank for rank, category in enumerate(CATEGORIES)}
_START = attrgetter("start")
STAFF = "DOCTOR"  # the category whose entries are people's full names, matched part by part
WORDS = Path(__file__).resolve().parents[1] / "classifier" / "data"  # english.txt, medical.txt
_PART = re.compile(r"[^\W\d_]+")  # a name part: letters; apostrophes and hyphens split a name
_DANGLING = re.compile(r"(?:[\s,&]|\band\b|\bof\b)+\Z")  # what an institution's name never ends with: "Health &"
ACRONYM_SKIPS = frozenset({"of", "and", "the", "for", "&"})  # words that give an acronym no letter
SHORT_ACRONYM = 3  # a hospital's acronym has at least these many initials
ACRONYM_LENGTH = 4  # fewer initials are as often clinical abbreviations: taken only where a place is named (AcronymCues)
# A hospital no list holds, by its initials: three to six letters ending in H(ospital) ("IMH",
# "TTSH", "NTFGH") or four to six in M(edical) C(entre) ("UMMC", "BIDMC"), taken only where a place
# is named and when no word list holds it ("TRACH", "CVVH", "OSH" stay).
_HOSPITAL_ACRONYM = re.compile(r"(?<![\w/&])(?:[a-z]{2,5}h|[a-z]{2,4}mc)(?![\w/&])")
# The same words in capitals, for an ASCII note not all in lower case (where only those count):
# RE2 scans for them about three times as fast; it has no lookbehind, so its ASCII word boundaries
# stand for the lookarounds' letters and digits, and a slash or "&" beside the word is checked after.
_HOSPITAL_ACRONYM_CAPS = re2.compile(r"\b(?:[A-Z]{2,5}H|[A-Z]{2,4}MC)\b")
SHORT = 2  # parts this short ("Ng", "Oh") are taken only next to a title or a role, and exactly
CACHE_LIMIT = 200_000  # words whose comparison with the directory is remembered (then forgotten)
# A word beside a title or a role: letters with inner apostrophes ("O'Brien", not the possessive
# "Lim's") and hyphens, as honorifics.py reads a name; before a role, also initials ("Lim K.H. (MO)").
_JOINED = re.compile(r"[^\W\d_]+(?:['’-][^\W\d_]+)+")  # "o'brien", "lay-kiat": a name part written whole
# Initials between a title and the surname: "SN C Neo", "nurse l m koh", "S/N E. Ng".
_TITLE_INITIALS = re.compile(r"(?:[^\W\d_]\.?[^\S\r\n]+){1,3}(?=[^\W\d_]{2})")
_NEXT_WORD = re.compile(r"[^\W\d_]+(?:['’][^\W\d_]{2,}|-[^\W\d_]+)*")
# What stands between a name and its role: a space, a comma, a slash or a bracket.
_ROLE_GAP = re.compile(r"(?:[^\S\r\n]*(?P<mark>[(/,])[^\S\r\n]*|[^\S\r\n]+)\Z")
_TITLE_GAP = re.compile(r"\.?:?[^\S\r\n]*")  # "Dr Lee", "Dr. Lee", "Dr.Lee", "on call: Lee"
# A closing line that may be a signature: up to three words (initials with or without a period),
# after a dash or a bullet.
_CLOSING_LINE = re.compile(r"[^\S\n]*(?:[-–~*][^\S\n]*)?(?P<name>[^\W\d_]+(?:\.?[^\S\n]+[^\W\d_]+){0,2})\.?[^\S\n]*")
_PART_KINDS = frozenset({"name", "ambiguous", "cased"})  # what StaffDirectory._kinds calls a directory part
_LAST_TOKEN = re.compile(r"((?:[^\W\d_]\.){1,3}|(?<![^\W\d_])[^\W\d_]+(?:['’][^\W\d_]{2,}|-[^\W\d_]+)*)[^\S\r\n]*\Z")
# Initials written after a surname ("Lim K.H.", "LIM KH", "Lim KH") or before it ("K.H. Lim", "KH Lim").
_INITIALS_AFTER = re.compile(r"[^\S\r\n]*(?:[A-Z]\.[^\S\r\n]?){1,3}|[^\S\r\n]+[A-Z]{1,3}(?![\w.])")
# Before a name, initials never follow a slash (the "N" of "S/N Tan" is a title's); undotted
# initials are two capitals at most: three are an abbreviation far more
# often ("TCU Anitha", "NOK Mary", "ICU Tan") than a person's initials ("KH Lim", "K.H.B. Lim").
_INITIALS_BEFORE = re.compile(r"(?:(?<![\w./])(?:[A-Z]\.[^\S\r\n]?){1,3}|(?<![\w./])[A-Z]{1,2})[^\S\r\n]*\Z")
# Initials of any case before a surname: "x w quek", "c.j. sng", "cj sng" (see StaffDirectory.initials).
_ANY_INITIALS_BEFORE = re.compile(r"(?<![\w./])(?:[^\W\d_]\.?[^\S\r\n]?){1,3}[^\S\r\n]*\Z|(?<![\w./])[^\W\d_]{2,3}[^\S\r\n]+\Z")
_LONE_WORDS = frozenset({"a", "i"})  # a single letter that is a word, never an initial alone
# Initials of any case after a surname: "ho bk", "HO B.K." (see StaffDirectory._beside_own_initials).
_ANY_INITIALS_AFTER = re.compile(r"[^\S\r\n]+((?:[^\W\d_]\.?[^\S\r\n]?){1,3})(?![^\W\d_])")


def load_list_file(path: Path | str) -> list[str]:
    """Read one entry per line; blank lines and lines starting with '#' are skipped.

    Only whole-line comments: a '#' inside an entry ("Blk 5 #02-01") is part of it.  A file that
    is not UTF-8 text (Latin-1, binary) is refused naming its first bad line, never quoting it:
    guessing its encoding would miss the entries it garbles.
    """
    text = read_text_file(path, "list file")
    return [line.rstrip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def _key(entry: str) -> str:
    """The form entries are compared in: lower case (as `re` ignores case), single spaces."""
    return _SPACES.sub(" ", entry.strip()).lower()


def _apart(key: str) -> str:
    """An entry's words apart, with single spaces where a period, a hyphen or an invisible
    character stood ("st. luke's" as "st luke's", "bukit-timah" as "bukit timah")."""
    return _SPACES.sub(" ", _SEPARATORS.sub(" ", key)).strip()


def _plain(key: str) -> str:
    """An entry as notes also write it, reduced to letters, digits and single spaces: without
    apostrophes, "&" as "and", a period, a hyphen or an invisible character as a space ("St.
    Luke’s", "Women's & Children's", "Bukit-Timah" as "st lukes", "womens and childrens", "bukit timah")."""
    return _apart(_APOSTROPHES.sub("", key.lower()).replace("&", " and "))


def written_forms(categories: Mapping[str, str], everyday: frozenset[str]) -> dict[str, str]:
    """The institutions' and places' entries by their :func:`_plain` form and, for an entry of
    several words, by its words run together ("angmokio" for Ang Mo Kio; not when that is an
    English or everyday word): what a match written otherwise is looked up by.  The trie finds
    the plain forms with the entries' own keys (:data:`_CHARS`); the run-together ones are keys of
    their own."""
    ranks = english_rank()
    forms: dict[str, str] = {}
    for key, category in categories.items():
        if category == STAFF:
            continue
        plain = _plain(key)
        joined = plain.replace(" ", "")
        forms.setdefault(plain, category)
        if joined != plain and len(joined) >= JOINED_LENGTH and joined not in ranks and joined not in everyday:
            forms.setdefault(joined, category)
    return forms


class ListDetector:
    """Flags every occurrence, on word boundaries and ignoring case, of an entry of any list, and
    the parts of the staff directory's names where a note signs with them (module docstring)."""

    def __init__(
        self,
        entries: Mapping[str, Iterable[str]],
        rules_dir: Path | None = None,
        threshold: float = DetectorsConfig.name_threshold,
    ) -> None:
        self.name = "lists"
        rules = rules_dir or data_dir("rules")
        # Short staff entries ("Yi", "Ng") are kept: a part that short is taken only beside a title or a role.
        staff = [e for e in entries.get(STAFF, ()) if SHORT <= len(_key(e)) <= MAX_LENGTH]
        self._staff = StaffDirectory.from_rules(rules, staff, threshold) if staff else None
        # A one-word staff entry is a part like any other: taken by the directory's rules, not anywhere.
        single = {_key(e) for e in staff if " " not in _key(e)}
        self._category = {k: c for k, c in _categorise(entries).items() if not (c == STAFF and k in single)}
        everyday = _everyday(rules)
        initials = acronyms(self._category, everyday)
        long = {key: category for key, category in initials.items() if len(key) >= ACRONYM_LENGTH}
        for key, category in {**short_forms(self._category, rules, everyday), **long}.items():
            self._category.setdefault(key, category)
        # hospitals' acronyms of three letters: taken only where a place is named
        self._short_acronyms = {key: category for key, category in initials.items() if key not in long and key not in self._category}
        self._acronym_cues = AcronymCues.read(rules / "lists.toml")
        # what an acronym no list holds is not, if a word list or rules/lists.toml holds it
        medical = {w.casefold() for w in read_word_list(WORDS / "medical.txt")}
        self._words = frozenset(english_rank()) | everyday | clinical_words() | medical | self._acronym_cues.not_hospitals
        # The institutions and places as notes also write them ("St. Lukes", "Women's & Children's",
        # "Bukit-Timah"): the trie matches an entry's words across any gap (_GAP) and with or without
        # apostrophes, so each needs one key, its words apart ("st luke's"), and one more run together
        # ("angmokio").
        self._written = written_forms(self._category, everyday)
        keys = {key if category == STAFF else _apart(key) for key, category in self._category.items()}
        keys |= {form for form in self._written if " " not in form} | set(self._short_acronyms)
        keys |= {key.replace(" and ", " & ") for key in keys if " and " in key}
        keys |= self._staff.keys() if self._staff else set()
        keys.discard("")  # an entry of invisible characters and spaces: nothing to find
        self._pattern: re.Pattern[str] | None = None
        self._lower: re.Pattern[str] | None = None  # for lower-cased ASCII notes
        self._fallback = ""
        if keys:
            # A number may be glued after an entry, as a ward's or a floor's ("Quartermain7").
            body = rf"(?<!\w){_trie_pattern(keys)}(?![^\W\d])"
            self._pattern, self._lower = re.compile("(?i)" + body), re.compile(body)
            # A match whose lower case differs from its entry's ("ſ" matches "s" ignoring case)
            # still gets a category: the highest-priority one of the lists.
            self._fallback = min(self._category.values(), key=_rank) if self._category else STAFF

    def __call__(self, text: str, record: PatientRecord) -> list[Span]:
        if self._pattern is None:
            return []
        hits: list[tuple[int, int, str]] = []  # the staff directory's keys
        # On ASCII text lower-casing keeps every offset, and ignoring case means lower-casing.
        lower = text.lower()
        ascii_text = text.isascii()
        spans = self._unlisted_acronyms(text, lower) if ascii_text else []
        matches = self._lower.finditer(lower) if ascii_text else self._pattern.finditer(text)  # type: ignore[union-attr]
        one_case: bool | None = None  # whether the note is all in lower case, worked out once if needed
        for match in matches:
            key = match.group()
            if not (ascii_text and key.isalpha()):  # only then lower case with single spaces already
                key = _key(key)
            category = self._category.get(key)
            if category is None:  # a key of letters alone is its plain form already (most staff parts)
                category = self._written.get(key if key.isalpha() else _plain(key))
            if category is None and key in self._short_acronyms:
                if one_case is None:
                    one_case = text.islower()
                if self._acronym_cues.name_a_place(text, lower, match.start(), match.end(), one_case):
                    spans.append(Span(match.start(), match.end(), self._short_acronyms[key], self.name, "acronym"))
                continue
            if category is None and self._staff is not None:
                hits.append((match.start(), match.end(), key))
                continue
            category = category or self._fallback
            spans.append(Span(match.start(), match.end(), category, self.name, category.lower()))
        if hits and len(lower) == len(text):  # offsets of the lower case are the text's
            staff = self._staff.spans(text, lower, hits, self.name)  # type: ignore[union-attr]
            if not spans:
                return staff
            spans += staff
        spans.sort(key=_START)
        return spans

    def _unlisted_acronyms(self, text: str, lower: str) -> list[Span]:
        """Hospitals no list holds, by initials ending in H or MC, in capitals (in a note all in lower
        case, as written) where a place is named ("f/u at TTSH", "TCU SOC ntfgh", "at IMH"); `text` is ASCII."""
        one_case = text.islower()
        spans = []
        for start, end in _acronym_spans(text, lower, one_case):
            key = lower[start:end]
            if key in self._words or key in self._category or key in self._written:
                continue
            if self._acronym_cues.name_a_place(text, lower, start, end, one_case):
                spans.append(Span(start, end, "HOSPITAL", self.name, "unlisted_acronym"))
        return spans


def _acronym_spans(text: str, lower: str, one_case: bool) -> Iterator[tuple[int, int]]:
    """Where an ASCII note may name a hospital by its initials (_HOSPITAL_ACRONYM): in a note all
    in lower case, as written; in any other, in capitals."""
    if one_case:
        yield from (match.span() for match in _HOSPITAL_ACRONYM.finditer(lower))
        return
    for match in _HOSPITAL_ACRONYM_CAPS.finditer(text):
        start, end = match.span()
        if text[start - 1 : start] not in ("/", "&") and text[end : end + 1] not in ("/", "&"):
            yield start, end


@dataclass(frozen=True)
class StaffVocabulary:
    """rules/lists.toml: the titles and roles that show a word beside them is a clinician's name."""

    titles: tuple[str, ...]
    glued_titles: tuple[str, ...]
    roles: tuple[str, ...]
    bracketed_roles: tuple[str, ...]
    departments: tuple[str, ...]
    registrations: tuple[str, ...]  # "MCR": a registration number's label, never initials
    english_rank: int  # a part among this many most frequent English words is an ordinary word

    @classmethod
    def read(cls, path: Path) -> "StaffVocabulary":
        rules = tomllib.loads(path.read_text(encoding="utf-8"))
        kinds = ("titles", "glued_titles", "roles", "bracketed_roles", "departments", "registrations")
        groups = (tuple(w.casefold() for w in rules[k]) for k in kinds)
        return cls(*groups, english_rank=rules["english_rank"])

    def words(self) -> frozenset[str]:
        """Every word of the vocabulary: never a name part itself ("reg", "MO", "ENT", "MCR")."""
        groups = (self.titles, self.roles, self.bracketed_roles, self.departments, self.registrations)
        return frozenset(w for group in groups for phrase in group for w in _PART.findall(phrase))

    def keys(self) -> dict[str, str]:
        """Titles, roles and registration labels as keys of the lists' trie, each with its kind,
        "title" or "role".  Bracketed roles and departments are no keys: "pt", "resp", "gi" are in
        most notes, so they are looked for only after a directory part (:meth:`after_pattern`)."""
        keys = {w: "role" for w in (*self.roles, *self.registrations)}  # "LOW, MCR M12345A": a role's evidence
        keys.update({w: "title" for w in self.titles})  # "rn", "sn": a title before a name, a role after one
        return keys

    def after_pattern(self) -> re.Pattern[str]:
        """After a name in the lower-cased note: its initials, then a role or a department after
        a comma, a slash or a bracket ("lim kh (pt)", "lee/ent", "tan, resp reg")."""

        def alternation(words: Iterable[str]) -> str:
            return "|".join(re.escape(w).replace(r"\ ", r"[ \t]+") for w in sorted(words, key=len, reverse=True))

        every = alternation({*self.roles, *self.bracketed_roles, *self.departments})
        return re.compile(
            rf"(?P<initials>[ \t]+[a-z]{{1,3}}(?![a-z])|[ \t]*(?:[a-z]\.[ \t]?){{1,3}})?[ \t]*[(/,][ \t]*"
            rf"(?:(?:{alternation(self.departments)})[ \t]+)?(?:{every})(?![a-z])"
        )


class StaffDirectory:
    """The parts of the staff directory's names, indexed once per run, and the rules that decide
    where a note's word is one of them (module docstring)."""

    def __init__(
        self,
        entries: Iterable[str],
        vocabulary: StaffVocabulary,
        ordinary: Iterable[str],
        abbreviations: Iterable[str],
        threshold: float,
        lower_case_words: Iterable[str] = (),
    ) -> None:
        vocabulary_words = vocabulary.words()
        self._entries = frozenset(_key(e) for e in entries)  # a part that is a whole entry keeps the entry's rule
        # What two or three capitals beside a name may be other than initials: "HR", "ICU", "MO".
        self._abbreviations = frozenset(w.casefold() for w in abbreviations) | vocabulary_words
        # A part with an apostrophe or a hyphen is also a part whole ("O'Brien", "Lay-Kiat"): its
        # pieces ("O", "Lay") are too short or too ordinary to be taken alone.
        split = [_PART.findall(e.casefold()) for e in entries]
        self.parts: set[str] = {p for words in split for p in words if len(p) > 1} - vocabulary_words
        # Parts that are also a title or a role ("Ho", a house officer), of a name with other parts:
        # a name only after a title, or with its entry's own initials ("SSN Ho", "L P Ho", "HO BK"
        # for Ho Ling Peng, Ho Bee Kai).
        self._role_parts = {p for words in split if len(words) > 1 for p in words if p in vocabulary_words}
        self.parts |= {p for e in entries for p in _JOINED.findall(e.casefold())}
        # Parts that are also ordinary words ("Hope", "May"), short ones ("Ng") and the vocabulary:
        # a name only beside a title or a role.
        self._ordinary = frozenset(w.casefold() for w in ordinary) | vocabulary_words
        self._ambiguous = frozenset(p for p in self.parts if p in self._ordinary or len(p) <= SHORT)
        # Parts that are names when Capitalised and words in lower case ("Mary", "Mark", "Grace").
        self._cased = frozenset(w.casefold() for w in lower_case_words) & self.parts
        self.anchors = vocabulary.keys()  # found by the lists' trie, like the parts
        self._roles = frozenset(vocabulary.roles)
        self._departments = frozenset(vocabulary.departments)
        self._after = vocabulary.after_pattern()
        # "DrLim", "SNPriya": a glued title with each part is a key too, taken only as a Capitalised part.
        self.glued = {title + part: len(title) for title in vocabulary.glued_titles for part in self.parts - self._ambiguous}
        # What each of the trie's keys is, for one lookup per hit: a title, a role, a glued title,
        # or a part: ambiguous, a name unless written in lower case ("cased"), or a name.
        self._kinds = {p: "ambiguous" if p in self._ambiguous else "cased" if p in self._cased else "name" for p in self.parts}
        self._kinds.update(dict.fromkeys(self.glued, "glued"))
        self._kinds.update(self.anchors)
        # Per part, the initials of the rest of each entry that holds it ("Quek Xiang Wen": "xw" and
        # "x" for "quek"): initials in lower case are taken only where they are the entry's own.
        self.initials: dict[str, set[str]] = {}
        # Per part, the other parts of the entries that hold it: an ambiguous part written beside
        # one of them is that name's ("DR SWEE HONG" for Ng Swee Hong, though "hong" is a word).
        self.neighbours: dict[str, set[str]] = {}
        for entry in entries:
            words = _PART.findall(entry.casefold())
            for k, part in enumerate(words):
                rest = "".join(w[0] for j, w in enumerate(words) if j != k)
                if rest:
                    self.initials.setdefault(part, set()).update({rest, rest[0]} - _LONE_WORDS)
                self.neighbours.setdefault(part, set()).update(w for j, w in enumerate(words) if j != k)
        self._long = sorted(p for p in self.parts if len(p) > SHORT)  # compared approximately
        self._lengths = [len(p) for p in self._long]
        self._threshold = threshold
        self._cutoff = int(threshold * max(self._lengths, default=0))
        self._variants: dict[str, bool] = {}  # word -> within the ratio of a part; kept for the run

    @classmethod
    def from_rules(cls, rules_dir: Path, entries: Iterable[str], threshold: float) -> "StaffDirectory":
        vocabulary = StaffVocabulary.read(rules_dir / "lists.toml")
        common = read_word_list(rules_dir / "common_words.txt") + read_word_list(WORDS / "medical.txt")
        # A frequent English word that is also a given name ("Mary", "Anne") is a name unless it
        # is written in lower case; one that is not ("May", "Hope", "Bell") needs a title or a role,
        # but for one the dictionary spells only Capitalised, a surname the word list counts among its
        # words ("Roberts"), that is not a disease's name too ("Wilson disease"): that is a name anywhere.
        given = {w.casefold() for w in read_word_list(WORDS / "first_names.txt")}
        frequent = [w.casefold() for w in read_word_list(WORDS / "english.txt")[: vocabulary.english_rank]]
        names = proper_nouns() - load_eponyms(str(rules_dir)).words
        ordinary = common + [w for w in frequent if w not in given and w not in names]
        connectors = {c.casefold() for c in read_word_list(rules_dir / "name_connectors.txt")}
        entries = [" ".join(w for w in e.split() if w.casefold() not in connectors) for e in entries]
        abbreviations = [*common, *RELATIVE_CUES, *SOCIAL_CUES]  # "FDW Maria", "NOK Tan": no initials
        return cls(entries, vocabulary, ordinary, abbreviations, threshold, [w for w in frequent if w in given])

    def keys(self) -> set[str]:
        """What the lists' trie must find for the directory: its parts, titles, roles and glued titles."""
        return self.parts | set(self.anchors) | set(self.glued)

    def spans(self, text: str, lower: str, hits: list[tuple[int, int, str]], source: str) -> list[Span]:
        """DOCTOR spans for the note: `hits` are the directory's keys the lists' trie found in it."""
        names: list[tuple[int, int, str]] = []  # start, end, rule
        candidates: list[tuple[int, int, str, int, bool]] = []  # words beside a title or a role, where their name begins, after a title
        taken: dict[int, tuple[int, str]] = {}  # the unambiguous parts taken: start -> end, part
        pending: list[tuple[int, int, str]] = []  # ambiguous parts with no title, role or initials beside them
        mixed = not text.isupper()
        for start, end, key in hits:
            kind = self._kinds.get(key)
            if kind is None:  # a match that lower-cases to no key but case-folds to one ("ſam" for "sam")
                key = key.casefold()
                kind = self._kinds.get(key)
                if kind is None:
                    continue
            if kind == "title" or kind == "role":
                named = self._beside_own_initials(lower, start, end, key) if key in self._role_parts else None
                if named is not None:
                    names.append((*named, "staff"))
                else:
                    self._anchored(text, start, end, key, kind, candidates)
            elif kind == "glued":
                at = start + self.glued[key]  # "DrLim", "DRO'Hara": capitals at the title's start and at the name's
                after = text[at + 1 : at + 2]
                if text[start].isupper() and text[at].isupper() and (after.islower() or after in ("'", "’")):
                    names.append((at, end, "staff"))
            elif lower.startswith(("'s", "’s"), end):
                continue  # "Parkinson's", "PARKINSON'S": an eponym; the name only beside a title or a role
            elif names_a_colour(lower, end):
                continue  # "tan-coloured sputum"
            elif kind != "ambiguous":
                if kind != "cased" or not text[start].islower() or text.islower():
                    names.append((start, end, "doctor" if key in self._entries else "staff"))
                    taken[start] = (end, key)
            elif self._after.match(lower, end) is not None:
                names.append((start, end, "staff"))  # "Lee/ENT", "Lee (PT)", "LEE KH, resp"
                taken[start] = (end, key)  # its entry's other parts beside it follow: "LAY SOON (CONS)"
            elif text[start].isupper() and self._initials(text, start, end, mixed) != (start, end):
                names.append((start, end, "staff"))  # "Lim K.H.", "K.H. Lee", "Tan KH": initials show a person
            else:
                pending.append((start, end, key))
        if pending and taken:
            names += self._beside_own_parts(text, pending, taken)
        signature = self._signature(lower)
        if signature is not None:
            names.append((*signature, "signature"))
        if candidates:
            close = self._close({w.casefold() for _, _, w, _, _ in candidates})
            parts = self.parts
            names += [
                (begin, end, "staff")
                for _, end, word, begin, titled in candidates
                # after a title, a part that is also a role's word is the name too ("SSN Ho", "NC HO"; not "Dr. Pang/HO/renal")
                if word.casefold() in parts or word.casefold() in close or (titled and word.casefold() in self._role_parts)
            ]
            widest = {}  # one span per name: a part found both alone and beside a role is one name
            for start, end, rule in sorted(names, key=lambda name: name[2] != "staff"):
                widest[start, end] = rule
            names = [(start, end, rule) for (start, end), rule in sorted(widest.items())]
        spans = []
        for start, end, rule in names:
            start += self.glued.get(lower[start:end], 0)  # a name read back from a role with its title glued on: "DrEvans MCR"
            start, end = self._initials(text, start, end, mixed)
            start = self._own_initials(lower, start, end)
            near = lower[end : end + 9]  # a role's mark is within initials' reach, or there is none
            role = self._after.match(lower, end) if "(" in near or "/" in near or "," in near else None
            if role is not None and role.group("initials"):  # "toh lk (sr)", "LIEW M (cons)": the initials before the role
                end = role.end("initials")
            spans.append(Span(start, end, STAFF, source, rule))
        return spans

    def _signature(self, lower: str) -> tuple[int, int] | None:
        """The note's closing line when it is a name alone, of directory parts and initials ("- HALL",
        "p hall", "H Wilson"): a signature, whatever else its words may be ("hall", "wilson").  At
        least one part longer than SHORT; the note's first line is never its signature."""
        end = len(lower.rstrip())
        start = lower.rfind("\n", 0, end) + 1
        line = _CLOSING_LINE.fullmatch(lower, start, end) if start else None
        if line is None:
            return None
        words = _PART.findall(line.group("name"))
        kinds = [self._kinds.get(w) for w in words]
        if all(k in _PART_KINDS or len(w) == 1 for k, w in zip(kinds, words)) and any(
            k in _PART_KINDS and len(w) > SHORT for k, w in zip(kinds, words)
        ):
            return line.span("name")
        return None

    def _beside_own_parts(
        self, text: str, pending: list[tuple[int, int, str]], taken: dict[int, tuple[int, str]]
    ) -> list[tuple[int, int, str]]:
        """The ambiguous parts written next to an unambiguous part of the same entry, across one
        space or hyphen ("SWEE HONG", "NG SWEE"), as the record's names are taken together."""
        ends = {end: (start, key) for start, (end, key) in taken.items()}
        found = []
        for start, end, key in pending:
            near = self.neighbours.get(key, ())
            after, before = taken.get(end + 1), ends.get(start - 1)
            joined_after = after is not None and text[end] in " -" and after[1] in near
            joined_before = before is not None and text[start - 1] in " -" and before[1] in near
            if joined_after or joined_before:
                found.append((start, end, "staff"))
        return found

    def _anchored(self, text: str, start: int, end: int, key: str, kind: str, words: list[tuple[int, int, str, int, bool]]) -> None:
        """Add the word a title or a role stands beside: after "Dr", "RN", "Staff Nurse"; before
        "(MO)", "/reg", ", SN", " MO", "(resp MO)" (skipping the initials in "LIM KH (MO)")."""
        if kind == "title":
            gap = _TITLE_GAP.match(text, end)
            at = gap.end()  # type: ignore[union-attr]
            initials = _TITLE_INITIALS.match(text, at) if at > end else None
            word = _NEXT_WORD.match(text, initials.end() if initials is not None else at) if at > end else None
            if word is not None:  # the name begins at its initials: "SN E Ng", "nurse l m koh"
                words.append((word.start(), word.end(), word.group(), initials.start() if initials is not None else word.start(), True))
            if key not in self._roles:
                return
        before = _ROLE_GAP.search(text, max(0, start - 6), start)
        if before is None:
            return
        last = _LAST_TOKEN.search(text, max(0, before.start() - 40), before.start())
        if last is not None and before.group("mark") is None and last.group(1).lower() in self._departments:
            before = _ROLE_GAP.search(text, max(0, last.start() - 6), last.start())  # "(resp MO)": skip the department
            last = _LAST_TOKEN.search(text, max(0, before.start() - 40), before.start()) if before is not None else None
        if last is None:
            return
        words.append((last.start(1), last.end(1), last.group(1), last.start(1), False))
        if self._are_initials(last.group(1), not text.isupper()):  # "Lim KH (MO)": the name is before the initials
            previous = _LAST_TOKEN.search(text, max(0, last.start() - 40), last.start())
            if previous is not None:
                words.append((previous.start(1), previous.end(1), previous.group(1), previous.start(1), False))

    def _close(self, words: set[str]) -> set[str]:
        """The words within the edit-distance ratio of a directory part: one rapidfuzz call for the
        words no earlier note had; ordinary words and short ones are never variants."""
        new = [w for w in words if w not in self._variants and w not in self.parts]
        if new:
            if len(self._variants) > CACHE_LIMIT:
                self._variants.clear()
            compared = [w for w in new if len(w) > SHORT and w not in self._ordinary and self._long]
            for w in new:
                self._variants[w] = False
            if compared:
                distances = process.cdist(compared, self._long, scorer=Levenshtein.distance, score_cutoff=self._cutoff, dtype=np.int32)
                # The ratio test for the few pairs within the cutoff, in Python: numpy's overhead costs more here.
                for i, j in zip(*(axis.tolist() for axis in np.nonzero(distances <= self._cutoff))):
                    if int(distances[i, j]) / min(len(compared[i]), self._lengths[j]) < self._threshold:
                        self._variants[compared[i]] = True
        return {w for w in words if self._variants.get(w)}

    def _initials(self, text: str, start: int, end: int, mixed: bool) -> tuple[int, int]:
        """A name widened over the initials written beside it: "Lim K.H.", "LIM KH", "K.H. Lim".
        Initials without periods count only in mixed-case text, and never when they are an
        abbreviation of a note ("Lee HR 80", "Tan ICU")."""
        # Initials are capitals: where the next or previous characters are lower case there are none.
        after = None if text[end : end + 3].islower() else _INITIALS_AFTER.match(text, end)
        if after is not None and self._are_initials(after.group(), mixed):
            end += len(after.group().rstrip())
        around = text[start - 3 if start > 3 else 0 : start]
        before = None if not around or around.islower() else _INITIALS_BEFORE.search(text, start - 12 if start > 12 else 0, start)
        if before is not None and self._are_initials(before.group(), mixed):
            start = before.start()
        return start, end

    def _own_initials(self, lower: str, start: int, end: int) -> int:
        """Where a name begins once the initials of its own entry written before it are taken, in
        any case: "x w quek", "c.j. sng" for Quek Xiang Wen and Sng Cheng Jia ("a quek" stays)."""
        own = self.initials.get(lower[start:end])
        if not own or start == 0:
            return start
        before = _ANY_INITIALS_BEFORE.search(lower, start - 12 if start > 12 else 0, start)
        if before is None:
            return start
        at = [before.start() + k for k, c in enumerate(before.group()) if c.isalpha()]
        for k, position in enumerate(at):  # "d/w c j sng": the longest run of letters that is the entry's
            if "".join(lower[p] for p in at[k:]) in own and (k == 0 or lower[position - 1] in " \t."):
                return position
        return start

    def _beside_own_initials(self, lower: str, start: int, end: int, key: str) -> tuple[int, int] | None:
        """The name a title's or a role's word is, with the initials of its entry's other parts
        before or after it, two letters at least ("l p ho", "ho bk", "HO B.K."; not "ho at 0230"
        for Ho Ah Teck: see _own): else None."""
        own = {initials for initials in self.initials.get(key, ()) if len(initials) > 1}
        if not own:
            return None
        begin = self._own_initials(lower, start, end)
        if begin < start and self._own(lower[begin:start], own):
            return begin, end
        after = _ANY_INITIALS_AFTER.match(lower, end)
        if after is not None and self._own(after.group(1), own):
            return start, start + len(lower[start : after.end(1)].rstrip())
        return None

    def _own(self, written: str, own: set[str]) -> bool:
        """Whether `written` (lower case) is initials among `own`, and, written as one word
        without periods, no word of a note ("at", "lp")."""
        letters = "".join(c for c in written if c.isalpha())
        return letters in own and (letters != written.strip() or letters not in self._abbreviations)

    def _are_initials(self, written: str, mixed: bool) -> bool:
        if "." in written:
            return True
        letters = written.strip()
        return mixed and len(letters) > 1 and letters.casefold() not in self._abbreviations


class AcronymCues:
    """Where a listed hospital's acronym of three letters names the hospital (rules/lists.toml's
    [acronyms]): patterns on the lower-cased note, compiled once per run."""

    def __init__(self, rules: Mapping) -> None:
        def words(key: str) -> str:
            return "|".join(re.escape(w).replace(r"\ ", r"[ \t]+") for w in sorted(rules[key], key=len, reverse=True))

        self._before = re.compile(rf"\b(?:{words('before')})[ \t]+\Z")
        self._after = re.compile(rf"[ \t]+(?:{words('after')})\b")
        # the line's start, then a clinician's title and name and a comma, or a visit and a dash
        self._line = re.compile(
            rf"(?:^|\n)[ \t]*(?:(?:{words('line_titles')})\b[^\n,]{{1,48}},|(?:{words('visits')})\b[^\n]{{1,40}}[ \t]-)[ \t]*\Z"
        )
        self.not_hospitals = frozenset(rules["not_hospitals"])  # clinical abbreviations no word list holds

    @classmethod
    def read(cls, path: Path) -> "AcronymCues":
        return cls(tomllib.loads(path.read_text(encoding="utf-8"))["acronyms"])

    def name_a_place(self, text: str, lower: str, start: int, end: int, one_case: bool) -> bool:
        """Whether the acronym at `start`:`end`, written in capitals (in a note all in lower case, as
        written), stands after a cue, before one, or ends a clinician's line or a visit's."""
        if len(lower) != len(text) or not (text[start:end].isupper() or one_case):
            return False
        if self._before.search(lower, max(0, start - 24), start) is not None or self._after.match(lower, end) is not None:
            return True
        line_end = end == len(lower) or lower[end] in "\r\n"
        return line_end and self._line.search(lower, max(0, start - 64), start) is not None


def _rank(category: str) -> int:
    return _PRIORITY.get(category, len(_PRIORITY))


def short_forms(categories: Mapping[str, str], rules_dir: Path, everyday: frozenset[str]) -> dict[str, str]:
    """Institutions without their suffix ("Calvert" of "Calvert Hospital", "Tan Tock Seng" of "Tan
    Tock Seng Hospital"): notes name a hospital so ("transferred from Calvert", "CALVERT HOSPIATAL"),
    as the list seldom does.  The suffixes are rules/places.toml's; a short form made only of
    frequent English or clinical words ("Holy Cross", "General", "Harbor": anonymizer.vocabulary's
    PLAIN_RANK, or `everyday`) is left out: it would match ordinary text."""
    suffixes = tomllib.loads((rules_dir / "places.toml").read_text(encoding="utf-8"))["institutions"]["suffixes"]
    suffix = re.compile(" (?:" + "|".join(re.escape(_key(s)) for s in sorted(suffixes, key=len, reverse=True)) + r")\Z")
    ranks = english_rank()

    def ordinary(word: str) -> bool:
        return ranks.get(word, PLAIN_RANK) < PLAIN_RANK or word in everyday or word in clinical_words()

    forms: dict[str, str] = {}
    for key, category in categories.items():
        if category == STAFF:
            continue
        ending = suffix.search(key)
        short = _DANGLING.sub("", key[: ending.start()]) if ending else ""
        if len(short) >= MIN_LENGTH and not all(ordinary(w) for w in _PART.findall(short)):
            forms.setdefault(short, category)
    return forms


def acronyms(categories: Mapping[str, str], everyday: frozenset[str]) -> dict[str, str]:
    """Hospitals by their initials, as clinicians write them: "TTSH" for Tan Tock Seng Hospital,
    "GBMC" for Greater Baltimore Medical Center, "NTFGH" for Ng Teng Fong General Hospital ("of",
    "and", "the" give no letter), three initials or more.  Three are as often a clinical
    abbreviation that no word list holds ("SAH" would be St Anne's Hospital and subarachnoid
    haemorrhage, "BMS" bowel movements): the detector takes those only where a place is named
    (:class:`AcronymCues`).  An acronym that is an English, clinical or everyday word is
    left out."""
    ranks = english_rank()
    forms: dict[str, str] = {}
    for key, category in categories.items():
        if category != "HOSPITAL":
            continue
        initials = "".join(w[0] for w in key.split() if w not in ACRONYM_SKIPS and w[0].isalpha())
        if len(initials) >= SHORT_ACRONYM and initials not in ranks and initials not in everyday and initials not in clinical_words():
            forms.setdefault(initials, category)
    return forms


def _everyday(rules_dir: Path) -> frozenset[str]:
    """rules/common_words.txt: everyday English and clinical abbreviations ("abg", "ccf")."""
    return frozenset(w.casefold() for w in read_word_list(rules_dir / "common_words.txt"))


def _categorise(entries: Mapping[str, Iterable[str]]) -> dict[str, str]:
    """Map each usable entry's key to its category; log how many entries were unusable."""
    categories: dict[str, str] = {}
    for category, values in entries.items():
        ignored = 0
        for value in values:
            key = _key(value)
            if not MIN_LENGTH <= len(key) <= MAX_LENGTH:
                ignored += 1
            elif key not in categories or _rank(category) < _rank(categories[key]):
                # An entry in two lists keeps the category that wins when spans are merged.
                categories[key] = category
        if ignored:
            logger.info(
                "lists: ignored %d %s entries shorter than %d or longer than %d characters",
                ignored, category, MIN_LENGTH, MAX_LENGTH,
            )
    return categories


def _trie_pattern(keys: Iterable[str]) -> str:
    """One regex matching any of `keys`, longest first; a space in a key matches a gap between
    words (_GAP, after a short word _ABBREVIATED_GAP), an apostrophe either apostrophe or none."""
    trie: dict[str, dict] = {}
    for key in keys:
        node = trie
        for char in _SHORT_WORD_SPACE.sub(rf"\1{_AFTER_SHORT}", key):
            node = node.setdefault(char, {})
        node[""] = {}  # an entry ends here
    return _node_pattern(trie)


def _node_pattern(node: dict[str, dict]) -> str:
    branches = [(_CHARS.get(char) or re.escape(char)) + _node_pattern(child) for char, child in sorted(node.items()) if char]
    if not branches:
        return ""
    body = branches[0] if len(branches) == 1 else f"(?:{'|'.join(branches)})"
    # Greedy: try to go on to a longer entry first, and fall back to the one ending here.
    return f"(?:{body})?" if "" in node else body
