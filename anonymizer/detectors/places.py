"""Places and institutions missing from the hospital's own lists: towns, states and countries
(each can be switched off in ``rules/places.toml``), institutions named by a suffix, universities
named after a state, and addresses.

A list of the world's towns holds thousands of ordinary English words (Mobile, Reading, Hope,
March), so a town is flagged only where a note announces a place: after a cue word ("lives in",
"transferred from", "resident of"), before ", <state>" ("Dayton, OH") or alone in brackets when it
is Capitalised and no everyday word, or no English word in a note of one case ("Dr Ng
(Clementi)", "(Baltimore)"); after a residence cue
("lives in", "moved to") also a state's postal code ("lives in DC") and a capitalised name that is
no English word, a town too small for the list.  After a cue a name that
is not an English word, or has several words, counts in any case ("lives in rockport", "moved to
white marsh"); a one-word English name must belong to a large town, and be capitalised in a note
not all in capitals when it is an everyday word ("from Reading", never "in reading").  After a
verb of moving or a stay's phrase a smaller town, or one named by an abstract noun, counts
Capitalised ("was in Cape May", "flies to Hope").  An institution is the capitalised
words before a suffix of ``rules/places.toml`` ("Harbor Hospital", "Bedok Polyclinic"), unless the
word before the suffix is a department ("Heart Clinic"), or lower-case words after "at", "from", a
comma or a dash that are not all everyday ones ("harmony nursing home"); everyday words too when
the name is an official one ("National Heart Centre") or right after "at", "from", "to" before a
suffix of two words or joined by "of" ("at prince court medical centre"); the name is flagged with
its suffix, which annotators count as part of it.  A place that is no institution is found the
same way before a place's suffix ("Changi Airport", "Boon Lay MRT") and flagged LOCATION.  A name in
brackets starts at its bracket ("(Bedok Polyclinic)").  A street is capitalised words before a
street type, with the house or block number before and a number after ("Blk 123A Bedok North St
4"); an abbreviated type before a capitalised name only with the house number ("100 Main St.
Boston"); in any case after where someone lives or stays ("stayed at holland dr").  A labelled
address is the words of its line ("Address: Tampines Mall").  An address's last line is a state's
code in capitals and a ZIP code, with the town before it ("Quincy MA 02169"), and an apartment or
suite its number ("Apt 3B").

The per-note path is a few regexes that each start with a literal character (a space, a comma, a
"#"), which the engine finds fast, and set lookups; Python works only on their hits, on a few
words around each.  The lists are read and the patterns compiled once per run (and shared by the
pipelines built from the same, unchanged rules).
"""

from __future__ import annotations

import logging
import re
import tomllib
from dataclasses import dataclass
from functools import lru_cache
from itertools import chain
from operator import itemgetter
from pathlib import Path
from typing import Iterable

import re2
from rapidfuzz.distance import OSA

from anonymizer.detectors import lowered, titlecase
from anonymizer.detectors.regex_analysis import alternation
from anonymizer.record import PatientRecord
from anonymizer.resources import read_word_list
from anonymizer.spans import Span
from anonymizer.vocabulary import ENGLISH, MEDICAL, clinical_word, clinical_words, drug_names, name_words, plain_word, proper_nouns

logger = logging.getLogger(__name__)

_BE_BEFORE = re.compile(r"\b(?:is|was|are|were|be|been|being)\Z")
NEVER = float("inf")  # the population of a state or a country: it always counts
WINDOW = 64  # characters read before an anchor for the name that ends at it
MAX_NAME_WORDS = 4
MAX_INSTITUTION_WORDS = 5  # a Capitalised institution's name before its suffix: "Ang Mo Kio-Thye Hua Kwan Hospital"
# A word of a town's name, on the lower-cased note: letters of any script ("gießen", "são paulo").
TOWN_WORD = r"[^\W\d_](?:[^\W\d_]|['’-])*"
# When, right after a place someone was in or came from: "on 8-6-20", "3/7 ago", "last wk", "in 2019".
WHEN_AFTER = re.compile(
    r"[ \t]+(?:on[ \t]+\d|in[ \t]+(?:19|20)\d\d\b|\d{1,2}/\d{1,2}[ \t]+ago\b|(?:next|last)[ \t]+(?:wk|week|month|mth|yr|year)\b)"
)
CLAUSE_END = re.compile(r"[ \t]*(?:[,.;:)]|$|(?:with|and)\b)", re.MULTILINE)  # after a place's name: its clause ends
POINT_GAP = re.compile(r"\.?[ \t]+(?=[^\W\d_])")  # between an abbreviated point of the compass and a town: "N. Andover"
TOWN_RUN = re.compile(rf"{TOWN_WORD}(?:[ \t]+{TOWN_WORD}){{0,{MAX_NAME_WORDS - 1}}}")  # a town's words, on one line
# A house or block number ("123", "123A", "12-14") and a number after a street type ("Ave 3").
HOUSE_NUMBER = re.compile(r"\d{1,5}[A-Za-z]?(?:-\d{1,5}[A-Za-z]?)?")
AFTER_NUMBER = re.compile(r"[ \t]+\d{1,4}[A-Za-z]?\b(?![/.:]\d)")  # not a duration or a date: "4/7 ago"
# a street's type after a place, and its number
STREET_AFTER = re.compile(r"[ \t]+([a-z]+)(?![\w'’-])(?:[ \t]+(\d{1,4}[a-z]?)\b(?![/.:]\d))?")
ADDRESS_WORD = re.compile(r"[ \t]+([a-z][a-z'’-]*|\d{1,4}[a-z]?)(?![\w#/.-])")  # a street's word or number after a block
UNIVERSITY_WORD = re.compile(r"univ(?:ersity|\.)?(?![\w-])")
# "U of M", as written: a university known by its state's initial (a number before "U" makes it units)
UNIVERSITY_INITIAL = re.compile(r"\bU[ \t]+(?:of|OF)[ \t]+[A-Z](?![\w&'’-]|\.\w)")
ADDRESS_VALUE = re.compile(r"[^\s;]+(?:[ \t]+[^\s;]+){0,9}")  # a labelled address's words, on its line
BLOCK_WORDS = frozenset({"blk", "block"})
STREET_WORDS = frozenset({"dr", "st", "ave", "rd"})  # "Commonwealth Dr" after a block number is a street
CODE_AFTER = re.compile(r",[ \t]?([a-z]{2})(?![\w'’-])")  # a state's code after a town, on the lower-cased note
WORD_AFTER = re.compile(r"[ \t]+([A-Za-z][A-Za-z'’-]*)[,;:]?")  # the words of a name after a prefix
CODE = re.compile(r"[A-Z]{2}(?![\w-])")  # a state's postal code, as written
CAPITALISED = re.compile(r"[ \t]*([A-Z][a-z][A-Za-z'’-]*)(?![\w-])")  # a word of a name, as written
# A town alone in brackets, as a referral names a GP's practice: "Dr Ng (Clementi)", "(Kuala Lumpur)",
# "(Ang Mo Kio)".
BRACKETED = re.compile(r"\(([^\W\d_]{2,}(?:[ \t][^\W\d_]{2,}){0,2})\)")
NAME_AFTER = re.compile(r"[ \t]+[A-Z](?:[a-z]|['’][A-Z])")  # "St John's", "Dr. O'Hara": a capitalised name after an abbreviation
# Each of these starts with a literal, which the engine finds fast; the character before the match
# is checked in Python.  UNIT on the note as written, the others on the lower-cased note.
APARTMENT = re.compile(r"(?:apt|suite)\.?[ \t]{0,2}#?[ \t]{0,2}\d{1,5}[a-z]?(?![\w/.-])")  # "Apt 3B", "Suite #200"
UNIT = re.compile(r"#\d{2,3}-\d{2,5}[A-Za-z]?\b(?![/\d-]|\.\d)")  # "#05-67", "#05-67." ("#05-67.5" is not)
POSTAL = re.compile(r"singapore[ \t]*\(?[ \t]*\d{6}\b\)?|s[ \t]?\(\d{6}\)")  # "Singapore 461123", "S(461123)"
BLOCK = re.compile(r"blk[ \t]*\d{1,4}[a-z]?\b(?![/:%]|\.\d)")  # "Blk 123A", "Blk 678." ("block 2" is a heart block)
# A ZIP code, on the note as written: what PlaceDetector._zip needs (a state's code in capitals after
# a space, then five digits), three times faster to rule out than that pattern; and after a written
# suffix, which makes it a state's code ("NH 03801").
ZIP_SHAPE = re.compile(r" [A-Z]{2}[ \t]{1,2}\d{5}")
ZIP_AFTER = re.compile(r"[ \t]{1,2}\d{5}(?![\w-])")
TRANSFER_PREPOSITIONS = frozenset({"to", "from", "at"})  # the cues after which a verb of moving names a place
CAPITALS_PLACE = 5  # in a note all in capitals, a place after a verb of moving has this many letters ("TO PCU", "IN USOH" stay)


def _words(values: Iterable[str]) -> frozenset[str]:
    return frozenset(v.strip().lower() for v in values if v.strip())


@lru_cache(maxsize=2)
def town_names(folder: Path) -> frozenset[str]:
    """The towns of `folder`/cities.txt, lower case: read once, where a detector other than this
    one must tell a town from a name ("Towson, MD" is a state after its town)."""
    return frozenset(name.lower() for name, _ in _read_pairs(folder / "cities.txt"))


def state_codes(folder: Path) -> frozenset[str]:
    """The US states' postal codes of `folder`/states.txt, lower case ("md", "pa")."""
    return frozenset(code.lower() for _, code in _read_pairs(folder / "states.txt"))


def _read_pairs(path: Path) -> list[tuple[str, str]]:
    """Lines ``name<TAB>value`` of a generated place file ('#' lines are its header)."""
    pairs = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.partition("\t")
            pairs.append((name.strip(), value.strip()))
    return pairs


@dataclass(frozen=True)
class PlaceRules:
    """rules/places.toml and rules/places/ as read once per run."""

    places: dict[str, float]  # lower-case name -> population (NEVER for states and countries)
    common: frozenset[str]  # English and clinical words: a name made of them needs case or a cue to tell it
    everyday: frozenset[str]  # the most frequent of them (rules/common_words.txt)
    min_population: int
    min_population_english: int
    misspelled_min_population: int  # a town this large is recognised misspelt by one letter after a cue
    misspelled_min_length: int
    transfer_cues: frozenset[str]  # "transferred to": an unknown Capitalised name after one is a place
    stay_cues: frozenset[str]  # "was in", "works in", "called from": the same, after the whole phrase
    ward: frozenset[str]  # the ward's abbreviations (medical.txt): "to Sicu" is no place
    cues: frozenset[str]
    residence_cues: frozenset[str]  # "lives in": a state's code or an unknown capitalised name follows
    town_nouns: frozenset[str]  # "resident", "police": a listed town right before one, no cue needed
    codes_not_after_town: frozenset[str]  # state codes that are English words: not taken in lower case after a town
    not_places: frozenset[str]  # the abstract towns included
    abstract_towns: frozenset[str]  # "hope", "independence": a place only after a verb of moving or a stay
    abbreviations: frozenset[str]  # towns' short forms ("jb", "kl"), counted as the towns they stand for
    min_population_after_moving: int
    compass_points: dict[str, str]  # "n" -> "north": an abbreviated point before a town after a cue
    states: dict[str, str]  # lower-case state name -> postal code
    states_are_phi: bool  # rules/places.toml's towns.states: a state is flagged, after a town's comma too
    state_regions: frozenset[str]  # "western", "upstate": before a state, a part of it ("western MD")
    suffixes: frozenset[str]  # the place suffixes included
    place_suffixes: frozenset[str]  # "airport": the name before is a place's, not an institution's
    prefixes: frozenset[str]  # "hospital", "institute of": the name follows
    bare_suffixes: frozenset[str]  # left out of the name's span
    named_suffixes: frozenset[str]  # everyday words too: the name needs a word no dictionary holds
    short_states: frozenset[str]  # "Mass": a place before a named suffix, though a dictionary holds it
    written_suffixes: frozenset[str]  # matched as written ("PC")
    departments: frozenset[str]
    jurisdictions: frozenset[str]  # "National Heart Centre": the department is an institution's
    generic: frozenset[str]
    stop_words: frozenset[str]
    street_types: frozenset[str]
    street_types_with_number: frozenset[str]  # everyday words: a street's type only beside a number ("8 Marine Parade Central")
    street_abbreviations: frozenset[str]
    street_abbreviations_in_capitals: frozenset[str]  # taken with a number only
    street_abbreviations_titles: frozenset[str]  # also a title: taken after a name of everyday words only with a number
    street_prefixes: frozenset[str]
    street_cues: frozenset[str]  # "lives", "stayed": before "in" or "at", a street in any case may follow
    street_abbreviations_after_cue: frozenset[str]  # "cl": a street's type only after such a cue
    address_labels: frozenset[str]  # "home address": opening a line before a colon, an address follows
    no_address: frozenset[str]  # "nil", "as above": what a labelled address may say instead of one

    @classmethod
    def load(cls, rules_dir: Path) -> PlaceRules:
        rules = tomllib.loads((rules_dir / "places.toml").read_text(encoding="utf-8"))
        folder = rules_dir / "places"
        towns, addresses, institutions = rules["towns"], rules["addresses"], rules["institutions"]
        places: dict[str, float] = {}
        for name, people in _read_pairs(folder / "cities.txt"):
            places[name] = max(places.get(name, 0), int(people))
        for short, town in towns["abbreviations"].items():  # "JB": Johor Bahru
            if town in places:
                places[short] = places[town]
        # States and countries are PHI for this tool though HIPAA's Safe Harbor keeps them: each
        # can be switched off; a state after a comma is a cue for the town before it either way.
        if towns["countries"]:
            places.update(dict.fromkeys(read_word_list(folder / "countries.txt"), NEVER))
        states = dict(_read_pairs(folder / "states.txt"))
        if towns["states"]:
            places.update(dict.fromkeys(states, NEVER))
            places.update(dict.fromkeys(towns["regions"], NEVER))  # "from Johor"
        # the frequent English words, less those English spells only Capitalised ("marlborough")
        english = [w for w in ENGLISH.read_text(encoding="utf-8").splitlines() if w and not w.startswith("#")]
        common = {w.lower() for w in english[: towns["english_top"]]} - proper_nouns()
        everyday = frozenset(w.lower() for w in read_word_list(rules_dir / "common_words.txt"))
        common |= everyday
        return cls(
            places=places,
            common=frozenset(common),
            everyday=everyday,
            min_population=towns["min_population"],
            min_population_english=towns["min_population_english"],
            misspelled_min_population=towns["misspelled_min_population"],
            misspelled_min_length=towns["misspelled_min_length"],
            transfer_cues=_words(towns["transfer_cues"]),
            stay_cues=_words(towns["stay_cues"]),
            ward=_words(read_word_list(MEDICAL)),
            cues=_words(towns["cues"]),
            residence_cues=_words(towns["residence_cues"]),
            town_nouns=_words(towns["town_nouns"]),
            codes_not_after_town=_words(towns["codes_not_after_town"]),
            not_places=_words(towns["not_places"]) | _words(towns["abstract_towns"]),
            abstract_towns=_words(towns["abstract_towns"]),
            abbreviations=frozenset(short for short, town in towns["abbreviations"].items() if town in places),
            min_population_after_moving=towns["min_population_after_moving"],
            compass_points={k.lower(): v.lower() for k, v in towns["compass_points"].items()},
            states=states,
            states_are_phi=bool(towns["states"]),
            state_regions=_words(towns["state_regions"]),
            suffixes=_words(institutions["suffixes"]) | _words(institutions["place_suffixes"]),
            place_suffixes=_words(institutions["place_suffixes"]),
            prefixes=_words(institutions["prefixes"]),
            bare_suffixes=_words(institutions["bare_suffixes"]),
            named_suffixes=_words(institutions["named_suffixes"]),
            short_states=_words(institutions["short_states"]),
            written_suffixes=frozenset(institutions["written_suffixes"]),
            departments=_words(institutions["departments"]),
            jurisdictions=_words(institutions["jurisdictions"]),
            generic=_words(institutions["generic_words"]),
            stop_words=_words(institutions["stop_words"]),
            street_types=_words(addresses["street_types"]),
            street_types_with_number=_words(addresses["street_types_with_number"]),
            street_abbreviations=frozenset(addresses["street_abbreviations"]),
            street_abbreviations_in_capitals=frozenset(addresses["street_abbreviations_in_capitals"]),
            street_abbreviations_titles=frozenset(addresses["street_abbreviations_titles"]),
            street_prefixes=_words(addresses["street_prefixes"]),
            street_cues=_words(addresses["street_cues"]),
            street_abbreviations_after_cue=_words(addresses["street_abbreviations_after_cue"]),
            address_labels=_words(addresses["address_labels"]),
            no_address=_words(addresses["no_address"]),
        )

    def english(self, name: str) -> bool:
        return all(word in self.common for word in name.split())


def _cue_words(cue: re.Match[str]) -> str:
    """The cue of a match of PlaceDetector._cue, without the space, line break or bracket before it."""
    return cue[0].lstrip(" \t\n(")


class PlaceDetector:
    """Flags towns after a cue, before a state or in brackets, institutions before a suffix, universities
    named after a state, and addresses (streets, blocks, unit numbers, Singapore postcodes)."""

    def __init__(self, rules: PlaceRules) -> None:
        self.name = "places"
        self._rules = rules
        # Towns by the case they may be written in: any case when not an English word or of
        # several words ("rockport", "new haven"), capitalised when one English word ("Reading").
        self._towns: dict[str, bool] = {}  # name -> whether it must be capitalised
        for town, people in rules.places.items():
            if town in rules.not_places or town.split()[0] in FUNCTION_WORDS:
                continue
            one_english_word = " " not in town and rules.english(town)
            if people >= (rules.min_population_english if one_english_word else rules.min_population):
                # Only an everyday word must be capitalised: "from Reading", but "to manila".
                self._towns[town] = one_english_word and town in rules.everyday
        # What a town's name starts with: its one word, or its first word when that is not an
        # English one ("bel air"), else its first two words ("white marsh").
        self._first_words = frozenset(
            town.split()[0] for town in self._towns if " " not in town or not rules.english(town.split()[0])
        )
        self._first_pairs = frozenset(" ".join(town.split()[:2]) for town in self._towns if " " in town)
        # Large towns of one word, which a note may misspell by a letter ("Baltimor", "Worchester"),
        # by their forms with one letter deleted: a word one edit from a town shares such a form with it.
        self._large_towns: dict[str, list[str]] = {}
        for town in sorted(self._towns):
            if " " not in town and len(town) >= rules.misspelled_min_length and rules.places[town] >= rules.misspelled_min_population:
                for form in _deletions(town):
                    self._large_towns.setdefault(form, []).append(town)
        self._long_pairs = frozenset(" ".join(town.split()[:2]) for town in self._towns if town.count(" ") >= 2)
        # Towns of one or two words that count only Capitalised after a verb of moving or a stay:
        # smaller ones and abstract nouns ("was in Cape May", "flies to Hope"), not the everyday
        # words ("in time", "to come") nor those a cue alone takes.
        # the towns of an everyday word that a cue takes only Capitalised ("from Reading", "in Mobile")
        self._cased_towns = frozenset(town for town, capitalised in self._towns.items() if capitalised)
        self._moving_towns = frozenset(
            town
            for town, people in rules.places.items()
            if town.count(" ") <= 1
            and town.split()[0] not in FUNCTION_WORDS
            and people >= rules.min_population_after_moving
            and town not in self._towns
            and (town in rules.abstract_towns or not (town in rules.not_places or town in rules.everyday))
        )
        # On the lower-cased note: a cue and the two words after it.  A note is read further only
        # when they start a town's name (set lookups, no pattern of thousands of names).
        # The words are read ahead, so that "in" leaves "from new haven" to the cue "from".  The cue
        # follows a space, a tab, a line break or a bracket ("Social:\nfrom ipoh", "(from ipoh)"),
        # or opens the note (_cue_opening): a character set first, which the engine skips to.
        word = f"({TOWN_WORD})"
        cue = rf"(?:{alternation(rules.cues)})(?=[ \t]+{word}(?:[ \t]+{word})?)"
        self._cue = re.compile(rf"[ \t\n(]{cue}")
        self._cue_opening = re.compile(cue)
        # The same with "the" before the word: an institution called by its name alone ("transferred
        # to the Brigham", "admitted to the Deaconess").
        self._cue_the = re.compile(rf" (?:{alternation(rules.cues)})[ \t]+the(?=[ \t]+{word})")
        # ", " then a state's postal code in capitals or its name in any case: the town before it.
        variants = [v for n in rules.states for v in (n, n.title(), n.upper())]
        self._state = re.compile(rf",[ \t]?{alternation([*rules.states.values(), *variants])}(?![\w-])")
        # A state's code in capitals after a space and a ZIP code ("Quincy MA 02169", "Boston, MA
        # 02114-2696"): an address's last line, with or without the comma, in any note; not the
        # codes that are words ("IN 25000 UNITS") nor before a unit.
        codes = [c for c in rules.states.values() if c.lower() not in rules.codes_not_after_town]
        unit = r"(?![ \t]*(?i:units?|u|mg|mcg|ml|cc|iu)\b)"
        self._zip = re.compile(rf" ({alternation(codes)})[ \t]{{1,2}}\d{{5}}(?:-\d{{4}})?(?![\w-]){unit}")
        # A part of a state: "western MD", "upstate New York" (the region's word in any case, a
        # code in capitals but not one that is a word, nor after "central": "central PA line"),
        # where states are PHI; most notes hold no region's word before a space (_region_words).
        pointed = alternation(rules.state_regions - {"central"})
        self._state_region = re.compile(
            rf"(?<![\w-])(?:(?i:{alternation(rules.state_regions)})[ \t]+(?i:{alternation(rules.states)})"
            rf"|(?i:{pointed})[ \t]+{alternation(codes)})(?![\w-])"
        ) if rules.states_are_phi and rules.state_regions and rules.states else None
        # whether a note holds a region's word at all, in one pass of a finite automaton (most hold none)
        self._region_word = re2.compile(rf"(?:{alternation(rules.state_regions)})[ \t]")
        # In capitals a code is as often an abbreviation (", OR", ", IN"): the state's name only.
        self._state_name = re.compile(rf",[ \t]?{alternation(n.upper() for n in rules.states)}(?![\w-])")
        # A suffix, a street type or an abbreviated type after a space or at a line's start (on the
        # lower-cased note): a name before it is on the same line, and a prefix may open a line
        # ("Hospital Kuala Lumpur outpt clinic"); a pattern that starts with one of two literal
        # characters is searched fast, and the note's start is tried apart.
        self._written_suffixes = rules.written_suffixes
        self._lower_written_suffixes = frozenset(w.lower() for w in rules.written_suffixes)
        anchors = (
            rules.suffixes | rules.prefixes | self._lower_written_suffixes | rules.street_types | rules.street_types_with_number
            | rules.street_prefixes
        )
        anchors |= rules.town_nouns  # "a Worcester resident": the name before is looked up as before a suffix
        abbreviations = {a.lower() for a in rules.street_abbreviations | rules.street_abbreviations_in_capitals}
        self._street_words = rules.street_types | rules.street_types_with_number | abbreviations | rules.street_abbreviations_after_cue
        anchors |= self._street_words
        anchor = rf"(?P<anchor>{alternation(anchors)})\.?(?![\w'’-])"
        self._anchor, self._opening_anchor = re.compile(rf"[ \n]{anchor}"), re.compile(anchor)
        # After "Jalan", "Lorong": capitalised words or a number, and a number ("Lorong 4 Toa Payoh").
        self._street_prefix = re.compile(
            r"[A-Za-z]+[ \t]+(?:[A-Z][\w'-]*|\d{1,4}[A-Za-z]?\b)(?:[ \t]+[A-Z][\w'-]*){0,2}(?:[ \t]+\d{1,4}[A-Za-z]?\b)?"
        )
        # In a note of one case, on the lower-cased note: any words or numbers, up to a stop word.
        self._street_prefix_any = re.compile(r"[a-z]+((?:[ \t]+(?:[a-z][a-z'-]*|\d{1,4}[a-z]?)(?![\w'-])){1,4})")
        # Universities named after a state (hospitals of their own), on the lower-cased note;
        # "U of <code>" as written.
        state_names = alternation([*rules.states, *(c.lower() for c in rules.states.values())])
        # " of <state>" starts with a literal; the word before it is read in Python.
        self._of_state = re.compile(rf" of[ \t]+(?:{state_names})(?![\w-])")
        # After "lives in" (on the lower-cased note): a state's code in capitals, or capitalised names (_residence).
        self._residence = re.compile(rf"(?<![\w-]){alternation(rules.residence_cues)}[ \t]+")
        self._residence_stems = frozenset(cue[:4] for cue in rules.residence_cues)  # most notes hold none: no pass
        # The words after a cue that are no unknown place, in one set (every cue's word is looked up).
        names = name_words()
        clinical = frozenset(w for w in clinical_words() if len(w) > 1 and w.isalpha()) - names
        self._not_towns = rules.not_places | rules.ward | clinical  # never a town alone in brackets
        self._known = frozenset(self._towns) | rules.common | self._not_towns | (drug_names() - names)
        # A verb of moving someone right before a cue's space ("transferred" of "transferred to").
        # Per cue, the words right before it that make an unknown Capitalised name after it a
        # place: a verb of moving before "to", "from", "at"; a stay's phrase before its last word.
        self._moving = _words_before({cue: set(rules.transfer_cues) for cue in TRANSFER_PREPOSITIONS}, rules.stay_cues)
        # Where someone stays, works or lives, without the verbs of moving: a word no dictionary
        # holds that ends the phrase's clause is a place, however it is written ("works in
        # wertingen, contactable", "lives in dunmarrow with wife"; "went to bathrm." stays).
        self._staying = _words_before({}, rules.stay_cues | rules.residence_cues)
        self._codes = frozenset(rules.states.values())
        self._codes_after_town = frozenset(c.lower() for c in self._codes) - rules.codes_not_after_town
        self._not_street_names = rules.departments | rules.generic  # words a street's name leaves out
        self._address_label = re.compile(rf"(?:^|\n)[ \t]*(?:{alternation(rules.address_labels)})[ \t]*:[ \t]*")
        self._street_cue = re.compile(rf"(?<![\w'’-]){alternation(rules.street_cues)}(?![\w'’-])", re.IGNORECASE)


    @classmethod
    def from_rules(cls, rules_dir: Path) -> PlaceDetector:
        return _build(rules_dir.resolve(), _stamp(rules_dir))

    def __call__(self, text: str, record: PatientRecord) -> list[Span]:
        low = lowered(text)
        caps = text.isupper()
        name = self.name
        spans: list[Span] = []
        cues = list(self._cue.finditer(low))
        if (opening := self._cue_opening.match(low)) is not None:
            cues.insert(0, opening)
        found = [m.groups("") for m in cues]
        if found and not (self._first_words.isdisjoint(map(_first, found)) and self._first_pairs.isdisjoint(map(" ".join, found))):
            towns = self._towns
            for m in cues:
                one, two = m[1], f"{m[1]} {m[2]}"
                if two in self._long_pairs:  # a name of three or four words may follow
                    self._town_after_cue(text, low, caps, m.start(1), spans)
                elif m[2] and two in towns:  # names of two words are never English-only-when-capitalised
                    spans.append(Span(m.start(1), self._town_end(text, low, m.end(2)), "LOCATION", name, "town_after_cue"))
                elif (capitalised := towns.get(one)) is not None and not (capitalised and (caps or not text[m.start(1)].isupper())):
                    spans.append(Span(m.start(1), self._town_end(text, low, m.end(1)), "LOCATION", name, "town_after_cue"))
        if not self._rules.compass_points.keys().isdisjoint(map(_first, found)):
            for m in cues:
                if m[1] in self._rules.compass_points:
                    self._town_after_point(text, low, caps, m, spans)
        firsts = set(map(_first, found))
        moving = not (firsts.isdisjoint(self._moving_towns) and firsts.isdisjoint(self._cased_towns))
        if moving or not self._moving_towns.isdisjoint(map(" ".join, found)):
            for m in cues:
                self._town_after_moving(text, low, caps, m, spans)
        # the words after a cue that no list or dictionary holds (most notes: none)
        unknown = {word for word in set(chain.from_iterable(found)).difference(self._known) if word and self._unknown(word)}
        if not caps and any(two in unknown or two in self._towns for _, two in found if two):
            for m in cues:
                if m[2] is not None and (m[2] in unknown or m[2] in self._towns):
                    self._qualified_town(text, low, m, spans)
        if not unknown.isdisjoint(firsts):
            one_case = caps or text.islower()  # where case says nothing, a place needs CAPITALS_PLACE letters
            for m in cues:
                if m[1] not in unknown:
                    continue
                capitalised = titlecase(text[m.start(1) : m.end(1)])
                if not (one_case or capitalised):
                    continue
                if (caps or capitalised) and len(m[1]) >= self._rules.misspelled_min_length and self._misspelt_town(m[1]):
                    spans.append(Span(m.start(1), m.end(1), "LOCATION", name, "misspelled_town"))
                    continue
                # where case says nothing, a second such word goes with the first ("works in longone sabino,")
                last = m.end(2) if one_case and m[2] in unknown and len(m[2]) >= CAPITALS_PLACE else m.end(1)
                if (not one_case or len(m[1]) >= CAPITALS_PLACE) and (
                    # "was in wertingen on 3/2", or at a clause's end after a stay: "works in wertingen, contactable"
                    ((caps or capitalised or WHEN_AFTER.match(low, last) is not None) and self._after_moving(low, m))
                    or (one_case and CLAUSE_END.match(low, last) is not None and self._after(self._staying, low, m))
                ):
                    end = last if one_case else self._capitalised_run(text, m.start(1))
                    spans.append(Span(m.start(1), end, "LOCATION", name, "after_transfer"))
        if not caps and " the " in low:  # "transferred to the Brigham": Capitalised, after a verb of moving
            for m in self._cue_the.finditer(low):
                if self._unknown(m[1]) and titlecase(text[m.start(1) : m.end(1)]) and self._after_moving(low, m):
                    spans.append(Span(m.start(1), self._capitalised_run(text, m.start(1)), "LOCATION", name, "after_transfer"))
        if self._state_region is not None and self._region_word.search(low) is not None:
            spans += [Span(m.start(), m.end(), "LOCATION", name, "state_region") for m in self._state_region.finditer(text)]
        for m in (self._state_name if caps else self._state).finditer(text):
            self._town_before_state(text, m.start(), m.end(), spans)
            if not caps:  # it may have more words than a listed town ("Cape Elizabeth")
                self._unlisted_town_before_state(text, m, spans)
        if ZIP_SHAPE.search(text):
            for m in self._zip.finditer(text):
                spans.append(Span(m.start(1), m.end(), "LOCATION", name, "zip_code"))
                before = m.start() - (text[m.start() - 1 : m.start()] == ",")  # the town ends before the comma
                if not self._town_before_state(text, before, m.start(1), spans):
                    self._town_before_zip(text, before, spans)
        if (opening := self._opening_anchor.match(low)) is not None:
            self._anchored(text, caps, opening, spans)
        for m in self._anchor.finditer(low):
            self._anchored(text, caps, m, spans)
        if any(stem in low for stem in self._residence_stems):
            for m in self._residence.finditer(low):
                self._residence_place(text, caps, m.end(), spans)
        if "(" in text:
            one_case = caps or text.islower()
            for m in BRACKETED.finditer(text):
                if self._bracketed_town(m[1], one_case):
                    spans.append(Span(m.start(1), m.end(1), "LOCATION", name, "town_in_brackets"))
        if "addr" in low:
            for m in self._address_label.finditer(low):
                self._labelled_address(low, m.end(), spans)
        if "#" in text:
            spans += [Span(m.start(), m.end(), "LOCATION", name, "unit") for m in UNIT.finditer(text) if _starts_word(text, m.start())]
        if "apt" in low or "suite" in low:
            found = [m for m in APARTMENT.finditer(low) if _starts_word(low, m.start())]
            spans += [Span(m.start(), m.end(), "LOCATION", name, "apartment") for m in found]
        if "singapore" in low or "s(" in low:
            for m in POSTAL.finditer(low):
                if _starts_word(low, m.start()):
                    spans.append(Span(self._house_before(low, m.start()), m.end(), "LOCATION", name, "postcode"))
        if "blk" in low:
            for m in BLOCK.finditer(low):
                if _starts_word(low, m.start()):
                    spans.append(Span(m.start(), self._street_after_block(low, m.end()), "LOCATION", name, "block"))
        if "u of" in low or "univ" in low:  # "University of Maine", "Univ of Indiana", "U of MD", "u of il"
            for m in self._of_state.finditer(low):
                before = low[max(0, m.start() - 11) : m.start()].rsplit(None, 1)
                start = m.start() - len(before[-1]) if before else m.start()
                if before and low[start : m.start()] in UNIVERSITY and _starts_word(low, start):
                    spans.append(Span(start, m.end(), "HOSPITAL", name, "university"))
            for m in UNIVERSITY_INITIAL.finditer(text):
                if not text[max(0, m.start() - 4) : m.start()].rstrip()[-1:].isdigit():
                    spans.append(Span(m.start(), m.end(), "HOSPITAL", name, "university"))
            at = low.find("univ")
            while at > 0:  # "Ohio State University": the state's name read back from the word
                if (m := UNIVERSITY_WORD.match(low, at)) is not None and low[at - 1] in " \t":
                    self._state_before(text, low, at, m.end(), spans)
                at = low.find("univ", at + 4)
        return spans

    def _lived_in(self, low: str, cue: re.Match[str]) -> bool:
        """Whether "in" follows a stay that is no form of "be" ("followed up in japan", "lives in
        china"; not "was in turkey")."""
        return _BE_BEFORE.search(low, max(0, cue.start() - 8), cue.start()) is None

    def _after_moving(self, low: str, cue: re.Match[str]) -> bool:
        """Whether a verb of moving or a stay's phrase stands right before the cue ("transferred to", "was in")."""
        return self._after(self._moving, low, cue)

    @staticmethod
    def _after(phrases: dict[str, re.Pattern[str]], low: str, cue: re.Match[str]) -> bool:
        """Whether one of the words that `phrases` gives for the cue stands right before it."""
        before = phrases.get(_cue_words(cue).split()[0])
        return before is not None and before.search(low, max(0, cue.start() - 16), cue.start()) is not None

    def _town_after_moving(self, text: str, low: str, caps: bool, cue: re.Match[str], spans: list[Span]) -> None:
        """A town of `_moving_towns` after a verb of moving or a stay's phrase and its cue:
        Capitalised if it has one word, in any case if two, in lower case before when ("was in Cape
        May", "was in cape may", "flies to Hope", "was in hope on 8-6-20", "back from Mason
        Vicentino": a smaller place of that name; not "was in hope"); and a town of an everyday
        word that the cue takes Capitalised, in lower case before when ("back from reading 3/7
        ago"), or a country or a state so named in any case after "from" or "to" ("called from
        china"), or after "in" but for a form of "be" ("followed up in japan"; "was in turkey"
        stays).  In a note all in capitals, any of them before when, and such a country ("WAS IN
        HOPE ON 3/2", "CALLED FROM JAPAN").  At its clause's end after a stay that is no form of
        "be" as before when ("works in reading, contactable", "WORKS IN HOPE."; "was in hope, "
        stays).  Not where a suffix or a street type is among its words or right after them: "seen
        at Harbor Hospital" is an institution's name (_anchored)."""
        names = [(cue[1], cue.end(1))]
        if cue[2] is not None:
            names.insert(0, (f"{cue[1]} {cue[2]}", cue.end(2)))  # the longer name first
        for name, end in names:
            written = text[cue.start(1) : end]
            one_case = caps or written.islower()
            # bounded: before when, or at its clause's end after a stay that is no form of "be" ("works in reading, contactable")
            bounded = one_case and (
                WHEN_AFTER.match(low, end) is not None
                or (CLAUSE_END.match(low, end) is not None and self._after(self._staying, low, cue) and self._lived_in(low, cue))
            )
            # a country or a state of an everyday word after "from", "to" or a stay's "in" ("called from
            # china", "flew back from turkey", "followed up in japan"; "was in turkey and chips queue" stays)
            nation = name in self._cased_towns and self._rules.places.get(name) == NEVER
            nation = nation and (_cue_words(cue) != "in" or self._lived_in(low, cue))
            if caps:
                cased = nation or (bounded and (name in self._moving_towns or name in self._cased_towns))
            elif name in self._moving_towns:
                cased = " " in name or titlecase(written) or bounded
            else:  # a large town of an everyday word, which the cue takes Capitalised: in lower case before when
                cased = nation or (name in self._cased_towns and bounded)
            if cased and self._after_moving(low, cue):
                end = max(self._town_end(text, low, end), self._capitalised_run(text, cue.start(1)))
                if self._anchor.search(low, cue.start(1), end) is None and self._anchor.match(low, end) is None:
                    spans.append(Span(cue.start(1), end, "LOCATION", self.name, "town_after_moving"))
                return

    def _qualified_town(self, text: str, low: str, cue: re.Match[str], spans: list[Span]) -> None:
        """A Capitalised word before a listed town or country, or before a Capitalised word that
        no list or dictionary holds (the caller tests the second word), after a verb of moving or
        a stay and its cue: the two one place's name ("travel to Little India", "back from Old
        Delhi", "was in Bad Freienwalde"; not "transferred to Mass General", "transferred to Step
        Down", "sent to Cardiac Cath")."""
        if cue[1] in FUNCTION_WORDS:
            return
        first, second = text[cue.start(1) : cue.end(1)], text[cue.start(2) : cue.end(2)]
        if titlecase(first) and titlecase(second) and self._after_moving(low, cue):
            spans.append(Span(cue.start(1), self._town_end(text, low, cue.end(2)), "LOCATION", self.name, "town_after_moving"))

    def _prefixed_street(self, text: str, low: str, caps: bool, at: int, spans: list[Span]) -> None:
        """The street a prefix at `at` opens: Capitalised words or a number after it ("Jalan Besar",
        "Lorong 4 Toa Payoh"); in a note of one case, up to four words or numbers before a stop word
        ("stayed at jalan bukit merah with son", "JALAN TENTERAM WITH")."""
        if not (caps or text.islower()):
            if (street := self._street_prefix.match(text, at)) is not None:
                spans.append(Span(at, street.end(), "LOCATION", self.name, "street"))
            return
        if (street := self._street_prefix_any.match(low, at)) is None:
            return
        end = street.start(1)
        for word in re.finditer(r"\S+", street[1]):
            if word[0] in self._rules.stop_words:
                break
            end = street.start(1) + word.end()
        if end > street.start(1):
            spans.append(Span(at, end, "LOCATION", self.name, "street"))

    def _bracketed_town(self, written: str, one_case: bool) -> bool:
        """Whether the words alone in brackets are a town: a town's short form in capitals ("(JB)"),
        Capitalised and no everyday word
        ("(Clementi)", "(Baltimore)"; not "(Reading)", "(Bell)"), or in a note of one case no
        English word but one the dictionary spells only Capitalised ("(jurong east)", "(perth)" in
        a lower-case note; not "(reading)"), and no ward or
        clinical word ("(MICU)"); a town of two or three words also in lower case and though its
        words are English ones ("(Kuala Lumpur)", "(pasir ris)", "(ang mo kio)")."""
        key = written.lower()
        if key not in self._towns:
            return False
        if key in self._rules.abbreviations:  # "GP Dr Ng (JB)"; in a note of one case "(jb)"
            return written.isupper() or one_case
        words = written.split()
        if len(words) > 1:
            return one_case or written.islower() or all(titlecase(w) for w in words)
        if key in self._not_towns:
            return False
        if titlecase(written) and not one_case:
            return key not in self._rules.everyday
        return one_case and (not self._rules.english(key) or key in proper_nouns())

    def _unknown(self, word: str) -> bool:
        """Whether a lower-cased word after a cue is no known town and in no English, ward,
        clinical or drug dictionary ("in Lasix", "to Bedside", "to Sicu" stay): a town misspelt, or
        a place the lists lack."""
        if word in self._known:
            return False
        return not (word.endswith("s") and clinical_word(word))  # "to Vitals": a clinical word's plural

    def _capitalised_run(self, text: str, start: int) -> int:
        """Where the run of up to three Capitalised words from `start` ends ("Caritas Carney")."""
        end = start
        for _ in range(3):
            word = CAPITALISED.match(text, end)
            if word is None or word[1].lower() in self._rules.not_places:
                break
            end = word.end(1)
        return end

    def _misspelt_town(self, word: str) -> bool:
        """Whether a word is one edit (a letter added, dropped or changed, or two swapped) from a large town."""
        towns = {town for form in _deletions(word) for town in self._large_towns.get(form, ())}
        return any(OSA.distance(word, town, score_cutoff=1) <= 1 for town in towns)

    def _town_end(self, text: str, low: str, end: int) -> int:
        """Where a place's name after a cue ends: with the street type after it, when a street is
        named after the place ("stayed at Commonwealth Dr", "PASIR RIS DR 3"), and its number; else
        with the state after it (_state_after)."""
        street = STREET_AFTER.match(low, end)
        if street is not None:
            written, rules = text[street.start(1) : street.end(1)], self._rules
            typed = street[1] in rules.street_types or written in rules.street_abbreviations  # "Drive", "Dr"
            # in capitals "DR" and "ST" are a title and a segment but for the street's number
            shouted = written.isupper() and written.capitalize() in rules.street_abbreviations
            if typed or (shouted and (written in rules.street_abbreviations_in_capitals or street[2] is not None)):
                return street.end()
        return self._state_after(low, end)

    def _state_after(self, low: str, end: int) -> int:
        """Where a town's name ends with the state written after it with no comma ("from Atlanta
        Georgia", "to Kansas City Missouri"), or with its state's code after a comma in any case
        ("in atlanta, wa", "IN DENVER, IA")."""
        if (code := CODE_AFTER.match(low, end)) is not None and code[1] in self._codes_after_town:
            return code.end(1)
        if (first := WORD_AFTER.match(low, end)) is None:
            return end
        if first[1] in self._rules.states:
            return first.end(1)
        if first[0][-1] in ",;:" or (second := WORD_AFTER.match(low, first.end())) is None:
            return end
        return second.end(1) if f"{first[1]} {second[1]}" in self._rules.states else end

    def _state_before(self, text: str, low: str, at: int, end: int, spans: list[Span]) -> None:
        tokens = _tokens_before(low, at, 4)
        if tokens and low[tokens[0][0] : tokens[0][1]] == "state":
            tokens = tokens[1:]
        for n in range(min(len(tokens), 3), 0, -1):
            start = tokens[n - 1][0]
            if " ".join(low[start : tokens[0][1]].split()) in self._rules.states:
                spans.append(Span(start, end, "HOSPITAL", self.name, "university"))
                return

    def _street_after_block(self, low: str, end: int) -> int:
        """Where the street after "Blk 123" ends, in any case ("blk 367c hougang ave 8",
        "Blk 690A Commonwealth Dr"): up to five words or numbers on the line, before punctuation,
        a stop word, a unit number or "Singapore"."""
        stop_words = self._rules.stop_words
        for _ in range(5):
            match = ADDRESS_WORD.match(low, end)
            if match is None or match[1] == "singapore" or (match[1] in stop_words and match[1] not in STREET_WORDS):
                break
            end = match.end()
        return end

    def _labelled_address(self, low: str, at: int, spans: list[Span]) -> None:
        """The address after a label at `at`: up to ten words on the line, before a semicolon or
        a sentence's end, unless they say there is none ("Address: nil", "address: as above")."""
        words = ADDRESS_VALUE.match(low, at)
        if words is None:
            return
        value = words[0].split(". ", 1)[0].rstrip(" \t.,")
        if value and value not in self._rules.no_address:
            spans.append(Span(at, at + len(value), "LOCATION", self.name, "labelled_address"))

    def _house_before(self, low: str, postcode: int) -> int:
        """Where the address before "Singapore 123456" starts: at its house or block number, up to
        six words back on the line ("759 bishan street 13 singapore 609131"); else the postcode."""
        tokens = _tokens_before(low, postcode, 7)
        stop_words = self._rules.stop_words
        for n, (start, stop) in enumerate(tokens):
            word = low[start:stop]
            if word[-1] in ",;:" and n:
                break
            if word in stop_words or word.startswith("#") and n > 1:
                break
            if n and HOUSE_NUMBER.fullmatch(word) is not None and n + 1 < len(tokens):
                before = low[tokens[n + 1][0] : tokens[n + 1][1]]
                if before in stop_words or before in BLOCK_WORDS or before[-1] == ":":
                    return start - (len(before) + 1 if before in BLOCK_WORDS else 0)
        return postcode

    def _residence_place(self, text: str, caps: bool, at: int, spans: list[Span]) -> None:
        """After "lives in": a state's postal code in capitals ("DC"), or in a note not all in
        capitals up to three capitalised words on the line of which one is no English word."""
        code = CODE.match(text, at)
        if code is not None and code[0] in self._codes:
            spans.append(Span(at, code.end(), "LOCATION", self.name, "residence"))
            return
        if caps:
            return
        end, unknown = at, False
        for _ in range(3):
            word = CAPITALISED.match(text, end)
            if word is None or word[1].lower() in self._rules.not_places:
                break
            unknown = unknown or word[1].lower() not in self._rules.common
            end = word.end(1)
        if unknown:
            spans.append(Span(at, end, "LOCATION", self.name, "residence"))

    def _town_after_point(self, text: str, low: str, caps: bool, cue: re.Match[str], spans: list[Span]) -> None:
        """A town of one or two words after a cue and a point of the compass abbreviated ("in N.
        Andover", "from So. Boston"), with the point spelt out or not, written in a case it may be."""
        after = POINT_GAP.match(low, cue.end(1))
        if after is None:
            return
        words = TOWN_RUN.match(low, after.end())[0].split()[:2]
        point = self._rules.compass_points[cue[1]]
        for n in range(len(words), 0, -1):
            name = " ".join(words[:n])
            for key in (f"{point} {name}", name):
                capitalised = self._towns.get(key)
                if capitalised is None or capitalised and (caps or not text[after.end()].isupper()):
                    continue
                end = after.end() + len(name)
                spans.append(Span(cue.start(1), self._town_end(text, low, end), "LOCATION", self.name, "town_after_cue"))
                return

    def _town_after_cue(self, text: str, low: str, caps: bool, start: int, spans: list[Span]) -> None:
        """The longest town name of up to four words from `start`, written in a case it may be."""
        run = TOWN_RUN.match(low, start)
        words: list[tuple[int, int]] = []
        position = start
        for word in run[0].split():  # a name does not run over punctuation or a line break
            position = low.find(word, position)
            words.append((position, position + len(word)))
            position += len(word)
        for n in range(len(words), 0, -1):
            end = words[n - 1][1]
            key = " ".join(low[s:e] for s, e in words[:n])
            capitalised = self._towns.get(key)
            if capitalised is None:
                continue
            if capitalised and (caps or not all(text[s].isupper() for s, _ in words[:n])):
                continue
            spans.append(Span(start, self._town_end(text, low, end), "LOCATION", self.name, "town_after_cue"))
            return

    def _town_before_state(self, text: str, comma: int, state_end: int, spans: list[Span]) -> bool:
        """"Dayton, OH", "Rockport, Maine": the town before a state, with the state where states
        are PHI (rules/places.toml's `states`).  Whether there was one."""
        rules = self._rules
        tokens = _tokens_before(text, comma, 3)
        for n in range(len(tokens), 0, -1):
            start, end = tokens[n - 1][0], tokens[0][1]
            key = text[start:end].lower()
            people = rules.places.get(key)
            if people is not None and people >= rules.min_population and key not in rules.not_places:
                spans.append(Span(start, state_end if rules.states_are_phi else end, "LOCATION", self.name, "town_before_state"))
                return True
        return False

    def _town_before_noun(self, text: str, caps: bool, at: int, spans: list[Span]) -> None:
        """"a Worcester resident", "Quincy police", "the Boston area": the longest listed town of
        up to three words right before a noun it qualifies, no English word, each word Capitalised
        in a note not all in capitals."""
        tokens = _tokens_before(text, at, 3)
        for n in range(len(tokens), 0, -1):
            start, end = tokens[n - 1][0], tokens[0][1]
            capitalised = self._towns.get(text[start:end].lower())
            if capitalised is not False or not (caps or all(titlecase(text[s:e]) for s, e in tokens[:n])):
                continue  # with no cue a town that is an English word is that word ("Male resident")
            spans.append(Span(start, end, "LOCATION", self.name, "town_before_noun"))
            return

    def _unlisted_town_before_state(self, text: str, state: re.Match, spans: list[Span]) -> None:
        """"in Bar Harbor, Maine": Capitalised words between a cue and a comma before a state's
        name spelt out (not its code: "Jones, MD" is a doctor) are a town the lists lack, ordinary
        words or not: the state's name vouches for them."""
        if text[state.start() + 1 : state.end()].strip().lower() not in self._rules.states:
            return
        run: list[tuple[int, int]] = []
        for start, end in _tokens_before(text, state.start(), 4):
            word = text[start:end]
            if word.lower() in self._rules.cues:
                if run:
                    end = state.end() if self._rules.states_are_phi else run[0][1]
                    spans.append(Span(run[-1][0], end, "LOCATION", self.name, "town_before_state"))
                return
            if not (word.isalpha() and titlecase(word)):
                return
            run.append((start, end))

    def _town_before_zip(self, text: str, at: int, spans: list[Span]) -> None:
        """The capitalised words before a state and its ZIP code that no list has ("Smalltown, NH
        03801"): a town for the address's last line, unless they are everyday words ("Box 12")."""
        words = []
        for start, end in _tokens_before(text, at, 3):
            word = text[start:end]
            if not (word[0].isupper() and word.isalpha()) or word.lower() in self._rules.everyday:
                break
            words.append((start, end))
        if words:
            spans.append(Span(words[-1][0], words[0][1], "LOCATION", self.name, "town_before_zip"))

    def _town_before_suffix(self, text: str, caps: bool, at: int, end: int, spans: list[Span]) -> None:
        """A written suffix in any case right after a town's name ("choa chu kang pc", "BEDOK
        PC"): the town and the suffix are an institution, as "Bedok PC" is."""
        tokens = _tokens_before(text, at, 3)
        for n in range(len(tokens), 0, -1):
            start = tokens[n - 1][0]
            key = text[start : tokens[0][1]].lower()
            capitalised = self._towns.get(key)
            if capitalised is None or (capitalised and (caps or not text[start].isupper())):
                continue
            spans.append(Span(start, end, "HOSPITAL", self.name, "town_suffix"))
            return

    # ---------------------------------------------------------------- institutions and streets

    def _anchored(self, text: str, caps: bool, m: re.Match[str], spans: list[Span]) -> None:
        rules = self._rules
        found = len(spans)
        at = m.start("anchor")
        anchor = m["anchor"]
        if " " in anchor or "\t" in anchor:
            anchor = " ".join(anchor.split())
        if anchor in rules.town_nouns:
            self._town_before_noun(text, caps, at, spans)
            return
        if anchor in rules.street_prefixes:  # "Jalan Besar", "Lorong 4 Toa Payoh"
            self._prefixed_street(text, m.string, caps, at, spans)  # m: a match on the lower-cased note
        elif anchor in rules.suffixes or anchor in rules.prefixes:
            found = anchor in rules.suffixes and self._institution(text, caps, at, m.end("anchor"), anchor in rules.bare_suffixes, spans)
            if not found and anchor in rules.prefixes:  # "Hospital Kuala Lumpur", "Institute of Mental Health"
                self._name_after(text, caps, at, m.end("anchor"), anchor in rules.suffixes, spans)
        elif anchor in self._lower_written_suffixes and not ZIP_AFTER.match(text, m.end("anchor")):  # "NH 03801": the state
            if not caps and text[at : m.end("anchor")] in self._written_suffixes:  # "Bedok PC", never "pc" or "PT ON PC"
                self._institution(text, caps, at, m.end("anchor"), False, spans)
            elif text[at : m.end("anchor")].upper() not in self._codes:  # "concord nh" is a town and its state
                self._town_before_suffix(text, caps, at, m.end("anchor"), spans)  # "tampines pc", "HOUGANG PC"
        elif anchor in rules.street_types or anchor in rules.street_types_with_number:
            if caps or text[at].isupper():  # the type is part of a street's name: "Main Street"
                self._street(text, caps, at, m.end(), spans, needs_house=anchor in rules.street_types_with_number)
        elif not caps and (written := text[at : m.end("anchor")]) in rules.street_abbreviations:
            # "Elm St", but not "St John's wort", "ST elevation"; "Holland Dr", but not "Dear Dr,".
            # Before a capitalised name only with a house number ("100 Main St. Boston"), and never a title.
            titled = written in rules.street_abbreviations_titles
            if not (named := NAME_AFTER.match(text, m.end()) is not None) or not titled:
                self._street(text, caps, at, m.end(), spans, titled=titled, needs_house=named)
        elif text[at : m.end("anchor")] in rules.street_abbreviations_in_capitals:
            self._street(text, True, at, m.end(), spans, titled=True)  # with a number only ("TAMPINES AVE 4")
        if len(spans) == found and anchor in self._street_words:
            self._cued_street(text, at, m.end(), spans)  # "stayed at holland dr", "IN ORCHARD ROAD"

    def _name_before(self, text: str, caps: bool, end: int) -> list[tuple[int, int, str]]:
        """The capitalised words that end at `end`, nearest first, on one line and with no
        punctuation between, as (start, end, the word lower-cased without a possessive)."""
        rules = self._rules
        lo = max(0, end - WINDOW)
        line = text.rfind("\n", lo, end)
        segment = text[line + 1 if line >= 0 else lo : end]
        base = end - len(segment)
        position = len(segment)
        name: list[tuple[int, int, str]] = []
        for token in reversed(segment.rsplit(None, MAX_INSTITUTION_WORDS + 2)[-MAX_INSTITUTION_WORDS - 2 :]):
            position = segment.rfind(token, 0, position)
            opening = token[0] == "(" and len(token) > 1  # "(Bedok Polyclinic)": the bracket opens the name
            if opening:
                token, position = token[1:], position + 1
            first, last = token[0], token[-1]
            if last in ",;:()" or (name and last == "."):
                break
            key = token.lower()
            if key in CONNECTORS:
                if not name:
                    break
                name.append((base + position, base + position + len(token), key))
                continue
            bare = key.rstrip(".").removesuffix("'s").removesuffix("’s").rstrip("'’")  # "St Thomas' Hospital"
            if not first.isupper() or bare in rules.stop_words or key in rules.stop_words or not bare[:1].isalpha():
                break
            shouting = caps or token.isupper()
            if shouting and (len(bare) < 2 or not bare.replace("-", "").isalpha() or (name and bare in rules.departments)):
                break  # in capitals every word looks like a name: "CON'T REHAB", "MET C HOSPICE"
            name.append((base + position, base + position + len(token), bare))
            if len(name) >= MAX_INSTITUTION_WORDS or opening:
                break
        while name and name[-1][2] in CONNECTORS:
            name.pop()
        return name

    def _name_after(self, text: str, caps: bool, at: int, end: int, named: bool, spans: list[Span]) -> None:
        """Up to three words after a prefix, in its case, before punctuation or a stop word.  After
        a word that is a suffix too ("Hospital Kuala Lumpur") no word may be an everyday one
        ("Hospital Course"), and in lower case the words must be a town ("hospital kuala lumpur")."""
        rules = self._rules
        upper = text[at].isupper()
        words: list[str] = []
        ends = [end]
        while len(words) < 3 and (match := WORD_AFTER.match(text, ends[-1])) is not None:
            word = match[1].lower()
            if word in rules.stop_words or (not caps and match[1][0].isupper() != upper):
                break
            if named and (word in rules.everyday or word in rules.departments):
                break
            words.append(word)
            ends.append(match.end())
            if match[0][-1] in ",;:":
                break
        if named and not upper:
            while words and " ".join(words) not in self._towns:
                words.pop()
        if words:
            stop = ends[len(words)]
            while text[stop - 1] in ",;:":
                stop -= 1
            spans.append(Span(at, stop, "HOSPITAL", self.name, "institution"))

    def _institution(self, text: str, caps: bool, end: int, stop: int, bare: bool, spans: list[Span]) -> bool:
        """The name before the suffix at `end`, flagged with the suffix up to `stop` ("Bedok
        Polyclinic" is one name as a whole) unless the suffix is a bare one ("[Harbor] Hospital")."""
        rules = self._rules
        name = self._name_before(text, caps, end)
        if not name and not caps:
            name = self._lower_name_before(text, end, stop)
        if not name:
            return False
        departments, generic = rules.departments, rules.generic
        official = self._official(name)
        if not official and (name[0][2] in departments or all(w in departments or w in generic or w in CONNECTORS for _, _, w in name)):
            return False  # "Heart Clinic", "Outside Hospital", "General Hospital"
        words = [w for _, _, w in name if w not in CONNECTORS]
        if (
            not (official or self._placed(text, name, end, stop))
            and all(text[s:e].isupper() or w in CONNECTORS for s, e, w in name)
            and all(w in rules.everyday for w in words)
        ):
            return False  # in capitals a name of ordinary words cannot be told from the words: "PLAN REHAB"
        suffix = " ".join(text[end:stop].lower().split())
        if suffix in rules.named_suffixes and not any(
            (
                w in self._towns
                or (w in rules.short_states and text[s].isupper())
                or not (w in rules.everyday or plain_word(w, rank=None) or clinical_word(w))
            )
            and (caps or not text[s:e].isupper())
            for s, e, w in name
        ):
            return False  # "Surgeon General", "MICU General", "NONTENDER GENERAL MALAISE"; "Lowell General" stays
        after = WORD_AFTER.match(text, stop)
        second = WORD_AFTER.match(text, after.end()) if after is not None and after[0][-1] not in ",;:" else None
        if after is not None and second is not None and f"{after[1]} {second[1]}".lower() in self._towns:
            stop = second.end(1)  # a town of two words: "Pantai Hospital Kuala Lumpur, fax"
        elif after is not None and (town := self._towns.get(after[1].lower().rstrip(",;:"))) is not None:
            if caps or after[1][0].isupper() == text[name[-1][0]].isupper() and not (town and not after[1][0].isupper()):
                stop = after.end()  # the town of a hospital abroad: "Apollo Hospital Chennai"
            elif bare:
                stop = name[0][1]
        elif bare:
            stop = name[0][1]  # "[Calvert] Hospital"
        while stop > end and text[stop - 1] in ".,;:'\"":
            stop -= 1
        place = suffix in rules.place_suffixes  # "Changi Airport": a place, not an institution
        spans.append(Span(name[-1][0], stop, "LOCATION" if place else "HOSPITAL", self.name, "place" if place else "institution"))
        return True

    def _lower_name_before(self, text: str, end: int, stop: int) -> list[tuple[int, int, str]]:
        """A name typed in lower case before the suffix from `end` to `stop` ("harmony nursing
        home", "choa chu kang poly", "prince of wales hospital", "kk women's and children's
        hospital"): up to three lower-case words and their connectors after a stop word ("at",
        "from"), a comma or a dash, not all of them everyday words ("at
        the busy clinic", "a regular clinic" stay) unless they name a place by a suffix of two
        words (_placed), nor a department unless an official name ("national cancer centre")."""
        rules = self._rules
        name: list[tuple[int, int, str]] = []
        for start, finish in _tokens_before(text, end, MAX_NAME_WORDS + 1):  # three words, connectors and the boundary
            opening = text[start] == "(" and finish - start > 1  # "(boon lay mrt)": the bracket opens the name
            start += opening
            token = text[start:finish]
            key = token.lower()
            bare = key.rstrip("'’").removesuffix("'s").removesuffix("’s")
            if key in CONNECTORS and name:  # "prince of wales", "women's and children's"
                name.append((start, finish, key))
                continue
            if key in rules.stop_words or bare in rules.stop_words or (key in rules.suffixes and key not in rules.named_suffixes):
                break
            if token[-1] in ",;:()" or not any(c.isalnum() for c in token):  # "visit - clementi polyclinic"
                break
            if sum(w not in CONNECTORS for _, _, w in name) == 3:
                # the name runs on: its last three words, if two are no English word ("ang mo
                # [kio-thye hua kwan] hospital"; "rehab placement vs community hospital" stays)
                if sum(not self._rules.english(w) for _, _, w in name) < 2:
                    return []
                break
            if not token.islower() or not bare.replace("-", "").isalpha():
                return []  # a word of another kind: no boundary found
            name.append((start, finish, bare))
            if opening:
                break
        while name and name[-1][2] in CONNECTORS:
            name.pop()
        if not name or self._official(name):
            return name
        ordinary = all(w in rules.everyday or w in rules.generic or w in CONNECTORS for _, _, w in name)
        if ordinary and not self._placed(text, name, end, stop):
            return []
        if any(w in rules.departments for _, _, w in name):
            return []
        return name

    def _official(self, name: list[tuple[int, int, str]]) -> bool:
        """Whether a name (nearest word first) opens with a jurisdiction, which makes the
        department after it an institution's: "National Heart Centre", "National University Hospital"."""
        return len(name) > 1 and name[-1][2] in self._rules.jurisdictions

    def _placed(self, text: str, name: list[tuple[int, int, str]], end: int, stop: int) -> bool:
        """Whether a name of ordinary words is an institution's all the same: two words or more
        right after "at", "from" or "to", before a suffix of two words, joined by "of" or after a
        verb of moving ("at prince court medical centre", "FROM SILVER SPRINGS NURSING HOME", "to
        prince of wales hospital", "transferred to silver brook hospital"; not "at home", "to rehab
        clinic", "at the end of clinic", "went to a bigger hospital")."""
        before = _tokens_before(text, name[-1][0], 1) if len(name) > 1 else []
        if not before or (cue := text[before[0][0] : before[0][1]].lower()) not in TRANSFER_PREPOSITIONS:
            return False
        if len(text[end:stop].split()) > 1 or any(w in CONNECTORS for _, _, w in name):
            return True
        at = before[0][0] - 1  # the space before the cue, where a verb of moving ends
        return self._moving[cue].search(text[max(0, at - 16) : at].lower()) is not None

    def _street(self, text: str, caps: bool, at: int, end: int, spans: list[Span], titled: bool = False, needs_house: bool = False) -> None:
        """The street whose type or abbreviation is at `at`, with its house or street number; with
        `titled` (an abbreviation that is also a title or an abbreviation in capitals) a name of
        everyday words needs a street number after it; with `needs_house`, a house number before it."""
        words = [word for word in self._name_before(text, caps, at) if word[2] not in self._not_street_names]
        after = AFTER_NUMBER.match(text, end)
        if not words or (titled and after is None and all(w in self._rules.everyday for *_, w in words)):
            return
        start = words[-1][0]
        segment = text[max(0, start - 16) : start]
        before = segment.rstrip(" \t")
        last = before.rsplit(None, 1)[-1] if before.strip() else ""
        house = bool(last) and HOUSE_NUMBER.fullmatch(last) is not None
        if (caps or needs_house) and not house and after is None:
            return  # in capitals "FLUIDS ROAD" could be anything; "St John's" is a saint
        if house:
            start -= len(segment) - len(before) + len(last)
        if after is not None:
            end = after.end()
        spans.append(Span(start, end, "LOCATION", self.name, "street"))

    def _cued_street(self, text: str, at: int, end: int, spans: list[Span]) -> None:
        """The street whose type is at `at` in any case, with its numbers, when up to three words
        before the type follow "in" or "at" (and a house number) and a cue of where someone lives
        or stays is on the line before ("stayed at holland dr", "LIVES WITH SON IN ORCHARD ROAD",
        "home in boon lay mrt", "stays with daughter at 8731 park avenue")."""
        tokens = _tokens_before(text, at, 5)  # nearest first: the name's words, a house number, then "in" or "at"
        words = 0
        for k, (start, stop) in enumerate(tokens):
            word = text[start:stop].lower()
            if word in ("in", "at"):
                break
            if k and k + 1 < len(tokens) and HOUSE_NUMBER.fullmatch(word):
                before = tokens[k + 1]
                if text[before[0] : before[1]].lower() in ("in", "at"):
                    words += 1  # the house number, read with the street's name
                    continue
            if words == 3 or word in self._rules.stop_words or not word.replace("-", "").replace("'", "").isalpha():
                return
            words += 1
        else:
            return
        preposition = tokens[words][0]
        line = text.rfind("\n", max(0, preposition - WINDOW), preposition)
        if not words or self._street_cue.search(text, max(line + 1, preposition - WINDOW), preposition) is None:
            return
        after = AFTER_NUMBER.match(text, end)
        spans.append(Span(tokens[words - 1][0], end if after is None else after.end(), "LOCATION", self.name, "street_after_cue"))


_first = itemgetter(0)


def _words_before(before: dict[str, set[str]], phrases: Iterable[str]) -> dict[str, re.Pattern[str]]:
    """Per cue, a pattern of the words that may stand right before it: those given, and each
    phrase's words before its last word, the cue ("works" of "works in")."""
    for phrase in phrases:
        words, _, cue = phrase.rpartition(" ")
        before.setdefault(cue, set()).add(words)
    return {cue: re.compile(rf"(?<![\w'/]){alternation(words)}$") for cue, words in before.items()}


def _tokens_before(text: str, end: int, most: int) -> list[tuple[int, int]]:
    """The last `most` words before `end` on its line, nearest first, as (start, end)."""
    lo = max(0, end - WINDOW)
    line = text.rfind("\n", lo, end)
    segment = text[line + 1 if line >= 0 else lo : end]
    base = end - len(segment)
    tokens = []
    position = len(segment)
    for word in segment.rsplit(None, most)[-most:][::-1]:
        position = segment.rfind(word, 0, position)
        tokens.append((base + position, base + position + len(word)))
    return tokens


def _deletions(word: str) -> list[str]:
    """The word and its forms with one letter deleted."""
    return [word, *(word[:i] + word[i + 1 :] for i in range(len(word)))]


def _starts_word(text: str, at: int) -> bool:
    return at == 0 or not (text[at - 1].isalnum() or text[at - 1] in "_#")
FUNCTION_WORDS = frozenset({"the", "a", "an", "of", "and", "in", "on", "at", "by", "to", "for", "with"})
CONNECTORS = frozenset({"of", "&", "and", "de", "la", "du"})
UNIVERSITY = frozenset({"u", "univ", "univ.", "university"})


def _stamp(rules_dir: Path) -> tuple[int, ...]:
    files = [rules_dir / "places.toml", rules_dir / "common_words.txt", *sorted((rules_dir / "places").glob("*.txt"))]
    return tuple(f.stat().st_mtime_ns for f in files if f.is_file())


@lru_cache(maxsize=4)
def _build(rules_dir: Path, stamp: tuple[int, ...]) -> PlaceDetector:
    """Reading the town lists takes a moment: pipelines built from the same, unchanged rules share one."""
    detector = PlaceDetector(PlaceRules.load(rules_dir))
    logger.info("places: %d town names read from %s", len(detector._towns), rules_dir / "places")
    return detector
