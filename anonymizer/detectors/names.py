"""Spelling variants of the names in the patient's record (seed 003, section 3.1).

Every word of a note is compared with every name token of the record; a word is a name when the
Levenshtein distance d satisfies d / min(|n|, |w|) < threshold.  Whether a word is a variant
depends only on the word and the record, and a patient's notes share most of their words: each
detector remembers, per patient, the words it has compared (:class:`Variants`), so a word is
compared only in the first of the patient's notes that uses it, in one rapidfuzz ``cdist`` call.
The names and the relatives detectors share one tokenisation of each note (:meth:`RecordNames.pair`).

A one-letter token of the record (an initial, the "O" of O'Neill) is taken only next to another of
its names ("W X Tan") or as the name after a patient's title ("Mrs S.", "mr I has"), never alone:
"c/o", "O/E", "MS S/P".  A name split by a space is the name too, where its parts written
together are a record token but for one edit and closer to it than the first part alone
("Quellmo re" for Quellmore; not "Des more" for Desmond).

A variant that is also a common or a clinical word ("morning" or "running" for Manning, "liver"
for Oliver) is taken only where it is not written in lower case inside a mixed-case note: there
the writer meant the ordinary word.
Exact matches, and variants in all-capitals or all-lower-case notes, are always taken.

A given name's common nicknames and diminutives are the name too, both ways (a William written
"Bill", a record "Peggy" written "Margaret"; rules/nicknames.txt).  They are matched exactly, never
by edit distance (a nickname's variants would be another name's), and one that is also an
ordinary English word ("Will", "Pat", "Sue") only where written as a name: capitalised not at a
sentence's start, or next to another of the record's names ("Bill Tan"); at a line's start too
when it is no frequent English word ("Matt more alert").  The patient's given name's short forms
no list has ("Des" for Desmond, "Liv" and "Livvy" for Olivia) are taken the same way, and any word
a note introduces as the patient's name after one of the record's names ("prefers to be called
X", "goes by X", "known as X", a bracketed "(X)" after the full name) is the patient's name there.

Connectors go with a name as notes write them: "s/o" also as "so", "s.o." or "s o", "b." as "b"
("Vijay so Krishnan"), but only between two of the record's names.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path
from typing import Iterable

import numpy as np
import regex
from rapidfuzz import process
from rapidfuzz.distance import Levenshtein

from anonymizer.detectors import loss_of_weight, names_a_colour, unit_after_number
from anonymizer.detectors.regex_analysis import alternation
from anonymizer.record import PatientRecord, per_record
from anonymizer.resources import read_word_list
from anonymizer.spans import Span
from anonymizer.vocabulary import CLASSIFIER_DATA, calendar_words, clinical_words, english_rank, never_a_name

# Letters only: a name never contains digits, and apostrophes/hyphens split a name into parts.
WORD = regex.compile(r"[^\W\d_]+")
ASCII_WORD = re.compile(r"[a-z]+")  # WORD in a lower-cased ASCII note: the standard library is faster
SHORT = 2  # tokens of this many letters or fewer match exactly, never approximately
EVERYDAY_RANK = 5000  # the English words used every day: the most frequent of english.txt
# An everyday word ("rose", "hope", "may", "will") written in lower case before one of these, in a
# note that Capitalises, is the verb or the noun, not the record's name: "BP rose to 160", "hope
# for d/c", "may need OT", "will be reviewed".
EVERYDAY_USE = regex.compile(r"[ \t]+(?:to|for|from|that|be|need|have|not|on|up|of)\b")
WORD_RANK = 10000  # an English word among this many most frequent ones that is no given name ("bell") is a word
SENTENCE_END = frozenset(".!?:;\n")  # a capital after one of these says nothing about a name
MIN_GIVEN = 5  # a given name this long has short forms: "Desmond" is "Des", "Olivia" "Liv"
CLIPPED_TAIL = 4  # a clipped form ("Dollah" for Abdullah) ends in the given name's last letters
LINE_RANK = 1500  # a nickname rarer than this in English is a name at a line's start too ("Matt more alert")
# After one of the record's names, what introduces the name the patient is called by: any word
# there is that name, listed nickname or not ("Desmond Tan prefers to be called Des", "(Des)").
_S = r"[^\S\r\n]"
NICKNAME_CUE = regex.compile(
    rf"(?i){_S}*,?{_S}*(?:(?:who{_S}+)?(?:(?:prefers|likes|wants|asks){_S}+to{_S}+be{_S}+called|goes{_S}+by|"
    rf"(?:also{_S}+)?known{_S}+as|aka|a\.k\.a\.?){_S}+[\"'“‘]?|\([\"'“‘]?(?=[^\W\d_]+[\"'”’]?\)))"
    r"(?P<name>[^\W\d_]{2,}(?:-[^\W\d_]+)*)"
)
# A line that opens with a word and a patient's state ("Benji c/o pain", "DOLLAH more alert today",
# "rach seen with dtr"): the word is the patient, as nurses write them, when it is a form of the
# record's given name (a listed nickname or its diminutive spelt otherwise, its first letters, its
# clipped end: RecordNames._subjects).  Any other word there is left to the
# classifier: a rule that took every unknown word would flag the surrogates of a released note.
# Matched at each line's start (:func:`_line_starts`): a search for "^" in multi-line mode tries
# every position of the note, four times slower.
STATUS_SUBJECT = regex.compile(
    rf"(?i){_S}*(?P<name>[^\W\d_]{{2,14}}){_S}+(?=(?:c/o|complain(?:s|ed|ing)?|more{_S}+alert|less{_S}+alert|seen{_S}+with|"
    r"refused|feels|felt|slept|tolerated|ambulated|denies|denied|agreeable|comfortable|remains|cooperative|alert{_S}+and)\b)"
)
TITLES = frozenset("mdm mr mrs ms miss dr prof sn ssn rn en pt madam sir".split())  # a title opens a line, not a name
PATIENT_TITLES = frozenset("mdm mr mrs ms miss madam".split())  # a patient's initial follows these ("Mrs S.")
TITLE_GAP = regex.compile(r"\.?[ \t]{1,2}")  # between such a title and the initial
# Whether a note has such a title before a letter at all: the note's words need splitting only then.
TITLED_LETTER = re.compile(rf"(?i)(?:{alternation(PATIENT_TITLES)})\.?[ \t]{{1,2}}[^\W\d_](?![^\W\d_])")
INITIAL_END = frozenset(" \t\r\n.,;:)")  # what may follow the initial: not "/" nor "&" ("MS S/P", "Mr A&O")
SPLIT_START = 3  # the letters a split name's first part has at least ("Quellmo re")
SPLIT_EDITS = 1  # a split name's parts written together are the record's token but for this many edits ("Des more" is no Desmond)


@lru_cache(maxsize=64)
def _diminutives(names: frozenset[str]) -> frozenset[str]:
    """The other spellings of the names' diminutives, once per record (a patient's notes come in a row)."""
    return frozenset(_diminutive(name) for name in names) - {""}


def _diminutive(name: str) -> str:
    """A diminutive's other spelling: "aggie" for "aggy" and back; "" for a name ending otherwise."""
    if name.endswith("ie") and len(name) > 3:
        return name[:-2] + "y"
    if name.endswith("y") and len(name) > 2:
        return name[:-1] + "ie"
    return ""


def _line_starts(text: str) -> Iterable[int]:
    """Where each line of `text` starts."""
    yield 0
    at = text.find("\n")
    while at >= 0:
        yield at + 1
        at = text.find("\n", at + 1)


class Nicknames:
    """The nicknames of each given name and the given names of each nickname (rules/nicknames.txt),
    and which of them are ordinary English words, read once per run."""

    def __init__(self, lines: Iterable[str], words: Iterable[str]) -> None:
        related: dict[str, set[str]] = {}
        for line in lines:
            name, *nicknames = line.casefold().split()
            related.setdefault(name, set()).update(nicknames)
            for nickname in nicknames:
                related.setdefault(nickname, set()).add(name)
        self._related = {name: frozenset(others) for name, others in related.items()}
        self.words = frozenset(words)
        self.frequent: frozenset[str] = frozenset()  # the English words too frequent to be a name at a line's start
        self.calendar: frozenset[str] = frozenset()  # months and weekdays ("Jan" is no Janet)

    @classmethod
    def from_rules(cls, rules_dir: Path, common: frozenset[str]) -> "Nicknames":
        """rules/nicknames.txt; the ordinary words are rules/common_words.txt's ("bill", "will",
        "sue" are in it, "william", "peggy" are not) and the frequent English words that are no
        given name ("bell", a surname taken out of common_words.txt)."""
        path = rules_dir / "nicknames.txt"
        if not path.is_file():
            return cls([], ())
        given = frozenset(read_word_list(CLASSIFIER_DATA / "first_names.txt"))
        english = [w for w in read_word_list(CLASSIFIER_DATA / "english.txt")[:WORD_RANK] if w not in given]
        nicknames = cls(read_word_list(path), common | frozenset(english))
        nicknames.frequent = frozenset(read_word_list(CLASSIFIER_DATA / "english.txt")[:LINE_RANK])
        nicknames.calendar = calendar_words()
        return nicknames

    def shortened(self, values: Iterable[str], tokens: Iterable[str]) -> frozenset[str]:
        """The short forms of the given name no list has: its first three or four letters ("Des"
        for Desmond), its inner syllable after an initial vowel ("Liv" for Olivia), and their
        diminutives ("Livvy", "Dessie").  Taken only where written as names (:meth:`RecordNames._add_worded`)."""
        first = next((WORD.findall(v) for v in values if WORD.search(v)), [])
        given = first[0].casefold() if first else ""
        if len(given) < MIN_GIVEN:
            return frozenset()
        stems = {given[:k] for k in (3, 4) if len(given) >= k + 2}
        if given[0] in "aeiou":
            stems.add(given[1:4])
        forms = stems | {f"{stem}{end}" for stem in stems for end in ("y", "ie", stem[-1] + "y", stem[-1] + "ie")}
        return frozenset(forms - set(tokens) - self.frequent - self.calendar)

    def of(self, tokens: Iterable[str]) -> tuple[frozenset[str], frozenset[str]]:
        """The names related to `tokens` that are not tokens themselves: those taken wherever
        they occur, and those that are also English words (taken only where written as names)."""
        tokens = frozenset(tokens)
        related = {other for t in tokens for other in self._related.get(t, ()) if len(other) > SHORT} - tokens
        return frozenset(related - self.words), frozenset(related & self.words)


class NameTokens:
    """Splits a record's name fields into the tokens worth matching, dropping connectors."""

    def __init__(self, connectors: Iterable[str]) -> None:
        # Connectors such as "bin", "s/o" are removed as whole tokens before splitting, so that
        # "s/o" does not leave the one-letter tokens "s" and "o" behind.
        ordered = sorted(connectors, key=len, reverse=True)
        # A one-letter abbreviation ("b.") is a connector in lower case only: "John B. Smith" keeps its initial.
        in_record = "|".join(rf"(?-i:{regex.escape(c)})" if sum(ch.isalpha() for ch in c) == 1 else regex.escape(c) for c in ordered)
        self._connector = regex.compile(rf"(?i)(?<![\w/])(?:{in_record})(?![\w/])")
        # What may stand between two parts of one name: "Tan, W.", "Siti bte Ali", "O'Brien", and
        # the connectors as notes also write them, between two of the record's names only:
        # "s/o" as "so", "s.o." or "s o", "b." as "b" ("Vijay so Krishnan", "RASHID B RAHMAN").
        between = "|".join(regex.escape(c) for c in sorted(set(ordered) | _written_forms(ordered), key=len, reverse=True))
        self.gap = regex.compile(rf"(?i)[\s.,'’\-]*(?:(?:{between})[\s.]+)?")

    def __call__(self, values: Iterable[str]) -> tuple[str, ...]:
        tokens: dict[str, None] = {}
        for value in values:
            for word in WORD.findall(self._connector.sub(" ", value)):
                tokens[word.casefold()] = None
        return tuple(tokens)


def _written_forms(connectors: Iterable[str]) -> set[str]:
    """The other ways notes write a connector with a slash or a period: "s/o" as "so", "s.o", "s o"."""
    forms = set()
    for c in connectors:
        if "/" in c:
            forms |= {c.replace("/", ""), c.replace("/", "."), c.replace("/", " ")}
        elif c.endswith(".") and len(c) == 2:
            forms.add(c[0])
    return forms


class RecordNames:
    """Flags the patient's names (or their relatives') and their spelling variants."""

    def __init__(
        self,
        field: str,
        category: str,
        threshold: float,
        tokens: NameTokens,
        words: NoteWordCache | None = None,
        common: frozenset[str] = frozenset(),
        nicknames: Nicknames | None = None,
    ) -> None:
        self.name = "record"
        self._field = field
        self._rule = field.rstrip("s")  # "name" or "relative": what audits show
        self._category = category
        self._threshold = threshold
        self._tokens = tokens
        self._words = words or NoteWordCache()
        self._common = common
        self._ordinary = common | clinical_words()  # variants only where not written in lower case (module docstring)
        self._nicknames = nicknames
        self._index = per_record(self._build_index)

    @classmethod
    def from_rules(cls, rules_dir: Path, field: str, category: str, threshold: float) -> "RecordNames":
        return cls.pair(rules_dir, threshold, ((field, category),))[0]

    @classmethod
    def pair(
        cls, rules_dir: Path, threshold: float, fields: Iterable[tuple[str, str]] = (("names", "PATIENT"), ("relatives", "RELATIVE"))
    ) -> list["RecordNames"]:
        """The patient's names (PATIENT) and the relatives' (RELATIVE), sharing one split of each note."""
        tokens, words = NameTokens(read_word_list(rules_dir / "name_connectors.txt")), NoteWordCache()
        common = frozenset(w.casefold() for w in read_word_list(rules_dir / "common_words.txt"))
        nicknames = Nicknames.from_rules(rules_dir, common)
        return [cls(field, category, threshold, tokens, words, common, nicknames) for field, category in fields]

    def _build_index(self, record: PatientRecord) -> _Index:
        """The record's tokens, the short ones (matched exactly), a matcher of the long ones, the
        initials, and the nicknames (matched exactly: anywhere, and only where written as names)."""
        tokens = self._tokens(getattr(record, self._field))
        short = frozenset(t for t in tokens if 1 < len(t) <= SHORT)  # one letter: only next to a name (_add_initials)
        long = [t for t in tokens if len(t) > SHORT]
        nicknames, worded = self._nicknames.of(tokens) if self._nicknames is not None else (frozenset(), frozenset())
        if self._field == "names" and self._nicknames is not None:
            worded |= self._nicknames.shortened(getattr(record, self._field), tokens)
        variants = Variants(long, self._threshold) if long else None
        starts = frozenset(t[:k] for t in long for k in range(SPLIT_START, len(t)))
        return frozenset(tokens), short | nicknames, variants, frozenset(t[0] for t in tokens), worded, starts

    def __call__(self, text: str, record: PatientRecord) -> list[Span]:
        spans = self._matched(text, record)
        if self._field != "names" or "\n" not in text or not record.names:
            return spans
        tokens, exact, _, _, worded, _ = self._index(record)
        subjects = self._subjects(text, record, tokens, exact | worded)
        return spans + [s for s in subjects if not any(t.start <= s.start < t.end for t in spans)] if subjects else spans

    def _matched(self, text: str, record: PatientRecord) -> list[Span]:
        tokens, exact, variants, initials, worded, starts = self._index(record)
        if not exact and variants is None:
            return []
        words = self._words.words(text)
        hits = exact.intersection(words)
        if variants is not None:
            hits |= variants.among(words)
        cased = worded.intersection(words)
        heads = (hits - tokens) | starts.intersection(words)  # a split name's first part: a variant or a token's start
        titled = (
            self._field == "names"
            and not initials.isdisjoint(words)
            and not PATIENT_TITLES.isdisjoint(words)
            and TITLED_LETTER.search(text) is not None
        )
        if not hits and not cased and not heads and not titled:
            return []
        matches = self._words.spans(text)
        flagged = [w in hits for _, _, w in matches]
        if heads:
            self._add_split(text, matches, flagged, heads, tokens)
        if titled:
            self._add_titled_initials(text, matches, flagged, initials)
        if cased:
            self._add_worded(text, matches, flagged, cased)
        ordinary = hits.intersection(self._ordinary).difference(tokens)  # approximate matches only
        if ordinary and not text.isupper() and not text.islower():
            flagged = [hit and not (w in ordinary and text[start:end].islower()) for (start, end, w), hit in zip(matches, flagged)]
        rank = english_rank()
        everyday = {w for w in hits if rank.get(w, EVERYDAY_RANK) < EVERYDAY_RANK} if not text.isupper() and not text.islower() else None
        if everyday:  # "BP rose to 160" for a patient named Rose
            flagged = [
                hit and not (w in everyday and text[start:end].islower() and EVERYDAY_USE.match(text, end))
                for (start, end, w), hit in zip(matches, flagged)
            ]
        if "olo" in text or "OLO" in text:  # "tan-coloured sputum", "Tan-Coloured" for a patient named Tan
            flagged = [hit and not names_a_colour(text, end) for (_, end, _), hit in zip(matches, flagged)]
        if "/" in text:  # "PR 103/min" for a patient named Min: a unit after a number and a slash; "LOW 3/7"
            flagged = [
                hit and not (unit_after_number(text, start) or loss_of_weight(text, start, end))
                for (start, end, _), hit in zip(matches, flagged)
            ]
        if not initials.isdisjoint(words):  # initials are single letters: the note's one-letter words
            self._add_initials(text, matches, flagged, initials)
        spans = self._join(text, matches, flagged)
        return spans + self._called(text, spans, matches) if spans and self._field == "names" else spans

    def _subjects(self, text: str, record: PatientRecord, tokens: Iterable[str], related: frozenset[str]) -> list[Span]:
        """The word opening a line about the patient's state (STATUS_SUBJECT) where it is the
        record's given name in another form: listed, or listed but for its diminutive's ending
        ("Aggie" for the listed "Aggy"), its start, or a word that shares its first three letters or
        is its end but for one letter (a Malay name's clipped form: "Dollah" for Abdullah, "Minah"
        for Aminah) and is no English or clinical word."""
        given = next((WORD.findall(v)[0].casefold() for v in record.names if WORD.search(v)), "")
        # Most notes hold no form of the given name at all, which the note's words show at once:
        # none of them is listed or a start of the name, and no word starts or ends as the name does.
        forms = related | {given[:k] for k in range(2, len(given) + 1)} | _diminutives(related)
        if self._words.words(text).isdisjoint(forms) and not (
            len(given) >= MIN_GIVEN and (given[:3] in (low := text.casefold()) or given[-CLIPPED_TAIL:] in low)
        ):
            return []
        out = []
        for m in filter(None, (STATUS_SUBJECT.match(text, start) for start in _line_starts(text))):
            word = m["name"].casefold()
            if word in TITLES or word in tokens:
                continue
            listed = word in related or _diminutive(word) in related
            # a word sharing only the name's start or end is a form of it unless English has it:
            # "Patty", not "Patient", for Patricia
            long_enough = len(given) >= MIN_GIVEN and len(word) >= 3
            shared = long_enough and given.startswith(word[:3])
            clipped = (
                long_enough
                and len(word) >= CLIPPED_TAIL
                and word.endswith(given[-CLIPPED_TAIL:])
                and Levenshtein.distance(word, given[-len(word) :], score_cutoff=1) <= 1
            )
            if listed or given.startswith(word) or ((shared or clipped) and not never_a_name(word)):
                out.append(Span(m.start("name"), m.end("name"), self._category, "record", "status_subject"))
        return out

    def _ordinary_in_brackets(self, text: str, cue: regex.Match[str], one_word: bool) -> bool:
        """A bracket after a name holds a role, a kinship or a place as often as a nickname ("Tan
        (nephew)", "(cardio)", "(BEDOK)"): there only a Capitalised word that is not a common one
        counts, after a full name (a surname alone is as often a clinician's: "prof. tan (Tampines)")."""
        if not text[cue.start() : cue.start("name")].lstrip().startswith("("):
            return False
        word = cue.group("name")
        return one_word or word.casefold() in self._common or not word[0].isupper() or word.isupper()

    def _called(self, text: str, spans: list[Span], matches: list[tuple[int, int, str]]) -> list[Span]:
        """The name the patient goes by, introduced after one of the record's names (NICKNAME_CUE),
        and that word wherever else the note writes it as a name (capitalised, or in a note of one case)."""
        found: dict[str, None] = {}
        taken: list[Span] = []
        for span in spans:
            cue = NICKNAME_CUE.match(text, span.end)
            if cue is not None and not self._ordinary_in_brackets(text, cue, " " not in text[span.start : span.end]):
                found[cue.group("name").casefold()] = None
                taken.append(Span(cue.start("name"), cue.end("name"), self._category, "record", "called"))
        if not found:
            return taken
        uniform = text.isupper() or text.islower()
        covered = {(s.start, s.end) for s in spans} | {(s.start, s.end) for s in taken}
        for start, end, word in matches:
            if word in found and (start, end) not in covered and (uniform or text[start].isupper()):
                if not any(s.start <= start < s.end for s in spans):
                    taken.append(Span(start, end, self._category, "record", "called"))
        return taken

    def _add_initials(self, text: str, matches: list[tuple[int, int, str]], flagged: list[bool], initials: frozenset[str]) -> None:
        """Flag one-letter initials of the record's names written next to a flagged name ("W X Tan")."""
        for order in (range(len(matches)), range(len(matches) - 1, -1, -1)):
            previous = None
            for i in order:
                start, end, word = matches[i]
                if (
                    not flagged[i]
                    and previous is not None
                    and len(word) == 1
                    and word in initials
                    and "/" not in text[max(start - 1, 0) : end + 1]  # the "s" of "s/o" is no initial
                    and text[start].isupper() == text[matches[previous][0]].isupper()
                    and self._adjacent(text, matches[min(i, previous)], matches[max(i, previous)])
                ):
                    flagged[i] = True
                previous = i if flagged[i] else None

    def _add_split(
        self, text: str, matches: list[tuple[int, int, str]], flagged: list[bool], heads: set[str], tokens: frozenset[str]
    ) -> None:
        """Flag a record name split by a space ("Quellmo re", "Quel lmore"): a word that starts a
        long token of the record or is a variant of one, and the next word, where the two written
        together are the token but for one edit, pass the ratio test and come closer to it than
        the first word alone."""
        long = [t for t in tokens if len(t) > SHORT]
        for i in [i for i, (_, _, word) in enumerate(matches[:-1]) if word in heads]:
            (_, end, first), (after, _, second) = matches[i], matches[i + 1]
            if first in tokens or flagged[i + 1] or text[end:after] != " ":
                continue
            joined = first + second
            for token in long:
                together = Levenshtein.distance(joined, token)
                if (
                    together <= SPLIT_EDITS
                    and together / min(len(joined), len(token)) < self._threshold
                    and together < Levenshtein.distance(first, token)
                ):
                    flagged[i] = flagged[i + 1] = True
                    break

    def _add_titled_initials(self, text: str, matches: list[tuple[int, int, str]], flagged: list[bool], initials: frozenset[str]) -> None:
        """Flag an initial of the record's names written as the name after a patient's title
        ("Mrs S.", "mr I has"), not one opening an abbreviation ("MS S/P", "Mr A&O") nor one
        before another initial or a Capitalised name ("Mr H S Zhang" may be a relative)."""
        uniform = text.islower() or text.isupper()
        for i in [i for i, (_, _, word) in enumerate(matches) if word in initials and i and matches[i - 1][2] in PATIENT_TITLES]:
            start, end, _ = matches[i]
            if flagged[i]:
                continue
            if not (text[start].isupper() or uniform) or not TITLE_GAP.fullmatch(text, matches[i - 1][1], start):
                continue
            if end < len(text) and text[end] not in INITIAL_END:
                continue
            following = matches[i + 1] if i + 1 < len(matches) else None  # another initial or a name: someone else's
            if following is None or not (len(following[2]) == 1 or (not uniform and text[following[0]].isupper())):
                flagged[i] = True

    def _add_worded(self, text: str, matches: list[tuple[int, int, str]], flagged: list[bool], cased: frozenset[str]) -> None:
        """Flag the nicknames that are also English words where written as names: capitalised, not
        at a sentence's start and not in a capitals-only stretch ("Will", not "WILL" nor a
        sentence's "Will"), or next to another name of the record ("bill tan").  At a line's start
        a capitalised nickname is taken when it is no frequent English word ("Matt more alert",
        not "Will review"): a note's lines often open with the patient's name."""
        frequent = self._nicknames.frequent if self._nicknames is not None else frozenset()
        for i, (start, end, word) in enumerate(matches):
            if flagged[i] or word not in cased:
                continue
            before = text[:start].rstrip(" \t\"'(")
            capitalised = text[start].isupper() and not text[start:end].isupper()
            written = capitalised and (
                (bool(before) and before[-1] not in SENTENCE_END) or ((not before or before[-1] == "\n") and word not in frequent)
            )
            beside = (i > 0 and flagged[i - 1] and self._adjacent(text, matches[i - 1], matches[i])) or (
                i + 1 < len(matches) and flagged[i + 1] and self._adjacent(text, matches[i], matches[i + 1])
            )
            if written or beside:
                flagged[i] = True

    def _adjacent(self, text: str, left: tuple[int, int, str], right: tuple[int, int, str]) -> bool:
        return self._tokens.gap.fullmatch(text, left[1], right[0]) is not None

    def _join(self, text: str, matches: list[tuple[int, int, str]], flagged: list[bool]) -> list[Span]:
        """One span per run of flagged words joined only by spaces, initials' periods or connectors."""
        spans: list[Span] = []
        current: list[int] | None = None  # the run's start and end, and where its last word starts
        held = 0  # where the run ended before its last word
        for (start, end, _), hit in zip(matches, flagged):
            if not hit:
                continue
            if current is not None and (
                self._tokens.gap.fullmatch(text, current[1], start)
                # a connector's letter taken for an initial: "subramaniam s.o. ramesh"
                or (current[1] - current[2] == 1 and self._tokens.gap.fullmatch(text, held, start))
            ):
                held, current[1:] = current[1], [end, start]
                continue
            if current is not None:
                spans.append(Span(current[0], current[1], self._category, "record", self._rule))
            current = [start, end, start]
        if current is not None:
            spans.append(Span(current[0], current[1], self._category, "record", self._rule))
        return spans


# What a record turns into: its tokens, the words matched exactly (short tokens and nicknames),
# the matcher of spelling variants, the initials, the nicknames that are English words, and the
# starts of its long tokens (a name split by a space).
_Index = tuple[frozenset[str], frozenset[str], "Variants | None", frozenset[str], frozenset[str], frozenset[str]]


class Variants:
    """The words within the edit-distance ratio of a record's long tokens, learnt note by note.

    Built afresh for each patient (:func:`per_record`): the words compared so far and those found
    close are kept for the patient's next notes, which mostly repeat them.
    """

    def __init__(self, tokens: list[str], threshold: float) -> None:
        self._tokens = tokens
        self._lengths = [len(t) for t in tokens]
        self._threshold = threshold
        # No distance above this bound can pass the ratio test, so rapidfuzz may stop early.
        self._cutoff = int(threshold * max(self._lengths))
        self._seen: set[str] = set()
        self._close: set[str] = set()

    def among(self, words: frozenset[str]) -> set[str]:
        """The variants among a note's words; only the words no earlier note had are compared."""
        new = words.difference(self._seen)
        if new:
            self._seen |= new
            self._compare([w for w in new if len(w) > SHORT])
        return self._close.intersection(words)

    def _compare(self, words: list[str]) -> None:
        """Keep the words within the ratio of any token: one rapidfuzz pass, then the ratio test
        for the few pairs within the cutoff (in Python: numpy's overhead costs more here)."""
        if not words:
            return
        distances = process.cdist(words, self._tokens, scorer=Levenshtein.distance, score_cutoff=self._cutoff, dtype=np.int32)
        for i, j in zip(*(axis.tolist() for axis in np.nonzero(distances <= self._cutoff))):
            if int(distances[i, j]) / min(len(words[i]), self._lengths[j]) < self._threshold:
                self._close.add(words[i])


class NoteWordCache:
    """The last note's words, shared by the detectors of one pipeline (:meth:`RecordNames.pair`):
    the names and the relatives passes see the same note one after the other.  Keyed on the text
    object, which the cache holds, so its identity stays unique while cached."""

    def __init__(self) -> None:
        self._words: tuple[str | None, frozenset[str] | None] = (None, None)
        self._spans: tuple[str | None, list[tuple[int, int, str]]] = (None, [])

    def words(self, text: str) -> frozenset[str]:
        """The note's distinct words (WORD, case-folded)."""
        if self._words[0] is not text:
            if text.isascii():  # there WORD is [A-Za-z]+ and case-folding is lower-casing
                words = frozenset(ASCII_WORD.findall(text.lower()))
            else:
                words = frozenset(w.casefold() for w in WORD.findall(text))
            self._words = (text, words)
        return self._words[1]  # type: ignore[return-value]

    def spans(self, text: str) -> list[tuple[int, int, str]]:
        """(start, end, case-folded word) of each word: needed only for a note where a name was found."""
        if self._spans[0] is not text:
            if text.isascii():
                spans = [(*m.span(), m.group()) for m in ASCII_WORD.finditer(text.lower())]
            else:
                spans = [(m.start(), m.end(), m.group().casefold()) for m in WORD.finditer(text)]
            self._spans = (text, spans)
        return self._spans[1]
