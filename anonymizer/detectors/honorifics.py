"""Names after an honorific (seed 003, section 3.1): "Dr K H Tan", "Mdm Siti binte Ali".

Doctors and other people named in a note are mostly absent from the patient's record, but they are
usually introduced by a title.  The title stays in the text; the name tokens after it are flagged.
How far a name runs is decided token by token (see rules/honorifics.toml): initials, connectors,
Capitalised words and words that are not common English or clinical words continue it; stop words
and common words in lower case or capitals end it, so "dr quiley aware" flags only "quiley" and
"DR QUIMBY RENAL CONSULT" only "QUIMBY".

Signatures name a clinician without a title: before a credential ("Jean Tan, RN"), before a
slashed role ("Lee/reg/ENT") and, on a note's last lines, before a comma and an institution
("oswina, National Cancer Centre").
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from itertools import chain
from pathlib import Path
from typing import Iterable, Iterator, NamedTuple, Sequence

import regex

from anonymizer.detectors import lowered, titlecase, whole_words, word_ends
from anonymizer.detectors.pattern_rules import read_toml
from anonymizer.detectors.places import state_codes, town_names
from anonymizer.detectors.regex_analysis import alternation
from anonymizer.detectors.screen import WordScreen
from anonymizer.detectors.values import read_abbreviations
from anonymizer.record import PatientRecord
from anonymizer.resources import read_word_list
from anonymizer.settings import ConfigError
from anonymizer.spans import CATEGORIES, Span
from anonymizer.vocabulary import (
    ENGLISH,
    FIRST_NAMES,
    MEDICAL,
    RELATIVE_CUES,
    SOCIAL_CUES,
    SwappedWords,
    calendar_words,
    chinese_name_parts,
    clinical_word,
    drug_word,
    inflected_word,
    name_words,
    plain_word,
    surrogate_names,
)

KINSHIP = RELATIVE_CUES | SOCIAL_CUES  # words for the people around a patient ("sis", "friend"): never a given name
# A name does not continue over a line break: the next line of a note is usually a new field.
SPACE = r"[^\S\r\n]"
# SPACE on ASCII text, for `re`: its \s would also take "\x1c" to "\x1f" (tests/test_honorifics.py).
ASCII_SPACE = r"[\t\x0b\x0c ]"
GAP = regex.compile(SPACE + "+")
VOWEL = re.compile("[aeiouy]")
DOTTED_GAP = regex.compile(SPACE + "*")  # "K.H. Tan": after a period the space is optional
# Between the names a plural title governs: "Drs Lee/Tan", "Drs. Smith & Jones", "Drs Ng, Ho and Lim".
NAME_LIST_JOIN = regex.compile(rf"{SPACE}*(?:/|&|\+|,|,?{SPACE}+and(?={SPACE})){SPACE}*")
# Letters with inner apostrophes ("O'Brien", but not the possessive "Tan's") and hyphens
# ("Lee-Wong"), then either a period or a boundary that is not a digit or a slash ("a/prof"),
# or a slash before a word, as signatures write a role or a department ("Dr Lee/reg/ENT"); a
# connector's slash ("s/o") is before a single letter.
NAME_WORD = r"[^\W\d_]+(?:['’][^\W\d_]{2,}|-[^\W\d_]+)*"  # "Quimby", "O'Brien", "Haverford-Lind"; not "Pt's"
WORD = regex.compile(rf"(?P<word>{NAME_WORD})(?:(?P<dot>\.)|(?![\w/])|(?=/[^\W\d_]{{2}}))")
# A word of an English contraction ("DON'T", "I'M", "WE'LL"): a pronoun or a verb, never a name
# ("O'Neil", "D'Costa" go on with letters after the apostrophe's one or two).
CONTRACTION = regex.compile(r"['’](?:t|ll|m|re|ve|d)\b", regex.IGNORECASE)


GLUED_REST = regex.compile(r"[^\W\d_]{0,30}")  # the letters after a title written onto a name
VERB_WINDOW = 64  # characters read back from a verb of contact for the name before it
NAME_PART = rf"(?:{NAME_WORD}|[^\W\d_]/[^\W\d_])"  # a word, an initial or a slashed connector ("d/o") of a name
# A note's signing line: a name of up to four words, initials or connectors, a comma, and an
# institution ("Imelda d/o Quellmore, Mount Elizabeth Hospital"); the institution is checked apart.
SIGNATURE_LINE = regex.compile(
    rf"{SPACE}*(?P<name>{NAME_WORD}\.?(?:{SPACE}+{NAME_PART}\.?){{0,3}}){SPACE}*,{SPACE}*(?P<institution>[^,\n]{{3,80}}?){SPACE}*\.?"
)
SIGNATURE_LINES = 2  # the note's last lines read for SIGNATURE_LINE
# A note's last line that is a name alone, perhaps after a dash: "Mary Quellmore", "--Marybeth".
CLOSING_NAME = regex.compile(rf"{SPACE}*(?P<dash>-{{1,2}}|–)?{SPACE}*(?P<given>{NAME_WORD})(?:{SPACE}+(?P<name>{NAME_WORD}))?{SPACE}*")
SIGNATURE_LENGTH = 160  # a longer line is no signing line
# After a care cue: a name of up to four words, initials or connectors ("z y brackenholt", "Imelda
# d/o Quellmore") before "at" (or "AT") and a place, a comma, a semicolon, the line's end, a bracket or a
# follow-up's interval ("TCU RAO 2/52"): the shortest such ("PAUL at Woodlands Polyclinic" is no name of four
# words before the line's end).
CARED_BY = regex.compile(
    rf"{SPACE}+(?P<name>{NAME_PART}(?:{SPACE}+{NAME_PART}){{0,3}}?)"
    rf"(?={SPACE}+(?i:at){SPACE}+(?!\d)|{SPACE}*[,;(]|{SPACE}*(?:\n|\Z)|{SPACE}+(?:(?i:in){SPACE}+)?\d{{1,2}}/(?:7|12|52)(?![\d/.-]))"
)
SPELLED_ROLE = 4  # a role this long is a word ("nurse", "caseworker"), not an abbreviation ("NP", "RN")
UNLISTED_NAME = 4  # an unlisted name after a role in one case is this long ("hsb" is an abbreviation)
INITIALS = 3  # a surname's given-name initials written as one word in capitals are at most this many ("Tan BH")


class Token(NamedTuple):
    """A word or a connector in the run that follows a title."""

    start: int
    end: int  # excluding a trailing period, which belongs to the sentence rather than the name
    word: str
    dotted: bool
    connector: bool
    numbered: bool = False  # a number follows after spaces ("Dec 2017"): a calendar word there starts a date


@dataclass(frozen=True, slots=True)
class Honorific:
    """One title of rules/honorifics.toml and how much evidence the word after it needs."""

    name: str  # canonical form, lower case without a period: the span's rule
    category: str
    strong: bool  # never an ordinary word, so the next word is a name unless it is a stop word
    not_before: frozenset[str] = frozenset()  # words after which this title is an ordinary word
    origin: str = ""  # the file that defines it
    glued: bool = False  # also written onto the name: "drTan", "DRNEO", "drchua"
    word: bool = False  # a whole English word ("general", "miss"): a period after it ends a sentence
    plural: bool = False  # names a list ("Drs Lee/Tan"): each name after the first must look like one
    role: bool = False  # a clinician's role ("NP", "fellow"): only a Capitalised word that no dictionary holds is a name after it
    cue: bool = False  # a verb of contact ("paged", "spoke with"): as a role's abbreviation
    given: bool = False  # a preposition of contact ("with", "per"): only a listed given name after it, Capitalised in mixed-case text
    capitalised: bool = False  # a verb of contact that takes only a Capitalised name, even in a note of one case ("called")
    opens: bool = False  # the title is the name's first word ("Muhd Hafiz"): the span starts at it


class HonorificDetector:
    """Flags the name tokens that follow a title such as "Dr", "Mdm" or "A/Prof"."""

    def __init__(
        self,
        honorifics: Iterable[Honorific],
        stop_words: Iterable[str],
        common_words: Iterable[str],
        connectors: Iterable[str],
        max_tokens: int,
        english: Iterable[str] = (),
        medical: Iterable[str] = (),
        given_names: Iterable[str] = (),
        verbs_after_name: Iterable[str] = (),
        credentials: Iterable[str] = (),
        slash_roles: Iterable[str] = (),
        places: Path | None = None,
        institution_suffixes: Iterable[str] = (),
        care_cues: Iterable[str] = (),
        care_cues_capitalised: Iterable[str] = (),
        admission_words: Iterable[str] = (),
        departments: Iterable[str] = (),
        name_abbreviations: Iterable[str] = (),
    ) -> None:
        self.name = "honorific"
        self._honorifics = {h.name: h for h in honorifics}
        # the titles that end a name when they follow one: all but those that open one ("Dr. Mohd. Faizal")
        self._titles = frozenset(name for name, h in self._honorifics.items() if not h.opens)
        self._stop = frozenset(w.casefold() for w in stop_words)
        self._swapped_stop = SwappedWords(self._stop)  # "dr reveiw": a typist's swapped pair
        self._common = frozenset(w.casefold() for w in common_words) | self._stop
        self._swapped_common = SwappedWords(self._common, UNLISTED_NAME)  # "tema notified": the team, not a name
        # The ward's abbreviations that no name list holds ("MICU", "CCU"), never a name after a role or a verb
        ward_words = frozenset(w.casefold() for w in medical)
        self._units = ward_words - name_words()
        # Given names that are no everyday, ward, clinical or drug word ("Aline" is an arterial line): a name after "with" or "per"
        self._given = frozenset(
            key
            for key in (w.casefold() for w in given_names)
            if key not in self._common and key not in ward_words and not clinical_word(key) and not drug_word(key)
        )
        self._max_tokens = max_tokens
        # A name before a verb of contact ("Haverford aware", "Marie Quimby notified"): Capitalised in
        # mixed-case text, in any case in a note of one case; the verbs are looked for first, as
        # most notes hold none.  By their first word: "from" opens thirty of them, found once.
        self._verbs_after_name: dict[str, list[str]] = {}
        for verb in dict.fromkeys(v.casefold() for v in verbs_after_name):
            self._verbs_after_name.setdefault(verb.split()[0], []).append(verb)
        # (in one case, not the end of a hyphenated word: "son-in-law jason called")
        self._name_before_verb, self._one_case_name_before_verb = (
            regex.compile(rf"{edge}(?:(?P<given>{word}){SPACE}+)?(?P<name>{word}){SPACE}+\Z")
            for edge, word in ((r"\b", r"\p{Lu}\p{Ll}+"), (r"(?<![\w'’-])", r"[^\W\d_]+"))
        )
        # A signature's name before a credential ("Philippa Quellmore, RN", "IMELDA C. QUIMBY, RRT"), found
        # as the verbs are: the credential first, then the name read back from it; of two letters also
        # dotted ("R.N.", "M.D.").
        self._credential_words = frozenset(c.casefold() for c in credentials)
        words = sorted(self._credential_words)
        self._credentials = (*words, *(".".join(c) for c in words if len(c) == 2))
        # A credential that is also a state's code ("MD") after a town is the state ("Towson, MD")
        self._places = places
        self._states = state_codes(places) if places is not None else frozenset()
        # A connector of two letters or more may join the given name to the surname ("Anand s/o Pandian, MCR").
        joins = alternation(c.casefold() for c in connectors if sum(ch.isalpha() for ch in c) > 1)
        signature = (
            rf"(?<![\w'’.-])(?:(?P<given>{NAME_WORD}){SPACE}+(?:(?i:{joins}){SPACE}+)?)?"
            rf"(?:(?P<initial>[^\W\d_])\.{SPACE}*)?(?P<name>{NAME_WORD})"
        )
        self._name_before_credential = regex.compile(rf"{signature}(?:{SPACE}*,{SPACE}*|{SPACE}+)\Z")
        # The surname first, then a comma and the initials: "Quellmore, J RN", "QUELLMORE, J.A., RN".
        self._surname_before_credential = regex.compile(
            rf"(?<![\w'’.-])(?P<name>{NAME_WORD}){SPACE}*,{SPACE}*(?P<initials>(?:[^\W\d_]\.?{SPACE}?){{1,2}}(?<!{SPACE}))(?:{SPACE}*,{SPACE}*|{SPACE}+)\Z"
        )
        # A signature's name before a slash and a role ("Imelda Quimby / Registrar / Gen Surg",
        # "Quimby/reg"): the slash and the role are found first (a pattern that starts with a literal).
        self._roles = frozenset(r.casefold() for r in slash_roles)
        roles = alternation(self._roles)
        self._slash_role = regex.compile(rf"/{SPACE}*(?:{roles})(?![\w'’-])") if roles else None
        self._name_before_slash = regex.compile(rf"{signature}{SPACE}*\Z")
        # The same roles in brackets, after their service's words or not, after a surname and its
        # initials or a name alone: "HARRIS M (SR)", "Quimby J.A. (MO)", "Lindqvist (ENT reg)".
        self._bracketed_role = regex.compile(rf"\({SPACE}*(?:[^\W\d_]{{2,10}}{SPACE}+){{0,2}}(?:{roles}){SPACE}*\)") if roles else None
        self._name_and_initials = regex.compile(
            rf"(?<![\w'’.-])(?P<name>{NAME_WORD}){SPACE}+(?P<initials>(?:[^\W\d_]\.?{SPACE}?){{1,3}}(?<!{SPACE})){SPACE}*\Z"
        )
        self._name_alone = regex.compile(rf"(?<![\w'’.-])(?P<name>{NAME_WORD}){SPACE}*\Z")
        # A role with its holder's name in brackets after it: "resident (Quellmore)", "NP (Greta Lindqvist)".
        # The bracket first, the role looked for behind it: the engine skips to each "(" instead of
        # trying the roles at every position (a tenth of the cost).
        held = alternation(h.name for h in self._honorifics.values() if h.role and not h.cue and h.name.isalpha())
        self._role_bracket = regex.compile(
            rf"\((?<=(?<![\w'’-])(?:{held}){SPACE}*\(){SPACE}*(?P<given>{NAME_WORD})(?:{SPACE}+(?P<name>{NAME_WORD}))?{SPACE}*\)"
        )
        # An institution's name ends with its suffix, or with a town of up to two words after it
        # ("Woodlands Polyclinic", "National Cancer Centre Singapore"): on the lower-cased line.
        suffixes = alternation(" ".join(s.casefold().split()) for s in institution_suffixes)
        self._institution_end = regex.compile(rf"(?:^|{SPACE})(?:{suffixes})(?:{SPACE}+[^\W\d_]+){{0,2}}\Z") if suffixes else None
        # An institution named after a role or a verb of contact: up to three words and its suffix
        # ("report to bumrungrad hospital", "spoke with Ren Ci Community Hospital"), on the lower-cased note.
        self._institution_named = (
            regex.compile(rf"(?:{SPACE}*(?!(?:at|in|on|from|to|with|and|re)(?![^\W\d_]))[^\W\d_]+){{1,3}}{SPACE}+(?:{suffixes})(?![^\W\d_])")
            if suffixes
            else None
        )
        # "with", "per" before a name, looked for apart (they are frequent words, each found by str.find).
        self._given_cues = tuple(h.name for h in self._honorifics.values() if h.given)
        titles = alternation(h for h in self._honorifics if h not in self._given_cues)  # a trie: one branch per letter, not one per title
        glued = [h.name for h in self._honorifics.values() if h.glued]
        # A glued title in one case with its name ("drchua", "DRNEO") is told from a word it
        # begins ("drain", "DROWSY") by the word's start: none of the English words that begin
        # with the title goes on with the same two letters.
        self._word_starts = frozenset(w[: len(t) + 2] for w in english for t in glued if w.casefold().startswith(t))
        glued_titles = alternation(glued)
        # A glued title before a Capitalised name, which a signature's name read back from its
        # credential or role starts with ("DrEvans MCR", "DRO'Connor MCR"): the name starts after it.
        self._glued_title = regex.compile(rf"(?i:{glued_titles})(?=\p{{Lu}}[\p{{Ll}}'’])") if glued else None
        self._glued_any_case = regex.compile(rf"(?i:{glued_titles})(?=[^\W\d_]{{3}})") if glued else None
        self._title = regex.compile("(?i)" + _title_pattern(titles, SPACE, glued_titles, r"[^\W\d_]"))
        # The titles are case-folded: in a lower-cased ASCII note (same offsets) they match without
        # ignoring case, and the standard library's `re` finds them in under half the time `regex` takes.
        ascii_titles = all(t.isascii() for t in self._honorifics)
        self._title_lower = re.compile(_title_pattern(titles, ASCII_SPACE, glued_titles, "[a-z]")) if ascii_titles else None
        joins = "|".join(regex.escape(c) for c in sorted(connectors, key=len, reverse=True)) or "(?!)"
        self._connector = regex.compile(rf"(?i)(?P<word>{joins})(?![\w/])")
        self._connectors = frozenset(c.casefold().rstrip(".") for c in connectors)
        capitalised = {c.casefold() for c in care_cues_capitalised}
        # per cue: whether it needs Capitalised names, and the category: a verb of contact's
        # ("d/w": NAME, a clinician or a relative), else DOCTOR
        self._care_cues = tuple(
            (c, c in capitalised, self._honorifics[c].category if c in self._honorifics else "DOCTOR")
            for c in (c.casefold() for c in care_cues)
        )
        # the words the loops above look for one by one with whole_words: which a note holds, in one pass
        verbs = (v for vs in self._verbs_after_name.values() for v in vs)
        self._cue_words = WordScreen([*verbs, *self._credentials, *self._given_cues, *(c for c, _, _ in self._care_cues)])
        admissions = "|".join(re.escape(w.casefold()) for w in admission_words) or "(?!)"
        self._admission = re.compile(rf"(?<![\w/])(?:{admissions})(?![\w/])")
        self._name_abbreviations = frozenset(w.casefold() for w in name_abbreviations)  # "Mohd.": its period ends no name
        # A department alone in brackets after who saw the patient ("seen by S G Quek (cardio)"), on the lower-cased note
        self._department = regex.compile(rf"\({SPACE}*(?:{alternation(departments)}){SPACE}*\)") if departments else None

    @property
    def honorifics(self) -> tuple[Honorific, ...]:
        return tuple(self._honorifics.values())

    @classmethod
    def from_rules(cls, rules_dir: Path, extra: Sequence[Path] = ()) -> "HonorificDetector":
        """Build from rules/honorifics.toml, common_words.txt and name_connectors.txt, and the
        same files where the `extra` folders have them: their titles, stop words and words are
        added (a title defined twice is an error naming both files; max_tokens is the packaged one)."""
        path = rules_dir / "honorifics.toml"
        rules = tomllib.loads(path.read_text(encoding="utf-8"))
        honorifics: dict[str, Honorific] = {}
        stop_words = list(rules["stop_words"])
        verbs_after_name = list(rules.get("verbs_after_name", ()))
        _add_honorifics(honorifics, entries(rules), path)
        for folder in extra:
            path = folder / "honorifics.toml"
            if path.is_file():
                added = read_toml(path)
                if set(added) - EXTRA_HONORIFIC_KEYS:
                    raise ConfigError(
                        f"{path}: unknown keys {sorted(set(added) - EXTRA_HONORIFIC_KEYS)}"
                        f" (an extra file adds {', '.join(sorted(EXTRA_HONORIFIC_KEYS))})"
                    )
                _add_honorifics(honorifics, entries(added), path)
                stop_words += added.get("stop_words", [])
                verbs_after_name += added.get("verbs_after_name", [])

        def words(name: str) -> list[str]:  # the packaged list, then the extra folders' ones
            files = [rules_dir / name, *(folder / name for folder in extra if (folder / name).is_file())]
            return [word for file in files for word in read_word_list(file)]

        return cls(
            honorifics.values(),
            stop_words=stop_words,
            verbs_after_name=verbs_after_name,
            common_words=words("common_words.txt"),
            connectors=words("name_connectors.txt"),
            max_tokens=rules["max_tokens"],
            english=read_word_list(ENGLISH),
            medical=read_word_list(MEDICAL),
            # the classifier's given names are Western: the surrogate lists' Chinese, Malay and Indian ones too
            given_names=[*read_word_list(FIRST_NAMES), *(n for _, kind, n in surrogate_names() if kind == "given" and " " not in n)],
            places=rules_dir / "places",
            # "RD" (a dietitian) is also a road: a street's abbreviation is no signature's credential
            credentials=set(rules.get("credentials", ())) - read_abbreviations(rules_dir / "address_abbreviations.txt").keys(),
            slash_roles=rules.get("slash_roles", ()),
            institution_suffixes=tomllib.loads((rules_dir / "places.toml").read_text(encoding="utf-8"))["institutions"]["suffixes"],
            care_cues=rules.get("care_cues", ()),
            care_cues_capitalised=rules.get("care_cues_capitalised", ()),
            admission_words=rules.get("admission_words", ()),
            name_abbreviations=rules.get("name_abbreviations", ()),
            departments=tomllib.loads((rules_dir / "lists.toml").read_text(encoding="utf-8"))["departments"],
        )

    def __call__(self, text: str, record: PatientRecord) -> list[Span]:
        spans = []
        all_caps = text.isupper()
        single_case = all_caps or text.islower()
        low = lowered(text)
        lower = self._title_lower is not None and text.isascii()
        for match in self._title_lower.finditer(low) if lower else self._title.finditer(text):
            if match.group("glued") is not None:
                span = self._glued(text, match)
                if span is not None:
                    spans.append(span)
                continue
            title = text[match.start("title") : match.end("title")]
            honorific = self._honorifics[title.casefold()]
            if match.group("colon") is not None and not honorific.role:
                continue  # "MS: alert", "Dr: " : a colon after a title labels a section, not a name
            if honorific.role and match.group("dot") is not None:
                continue  # "by RN and RT. Transfused": a period after a role ends its sentence
            capitalised_after = not all_caps and text[match.end() : match.end() + 1].isupper()
            one_case = single_case and not honorific.capitalised
            if honorific.role and (len(title) < SPELLED_ROLE or honorific.cue) and not (capitalised_after or one_case):
                continue  # after a role's abbreviation or a verb in mixed-case text only a Capitalised word is a name (_looks_like_name)
            tokens = self._tokens(text, match.end())
            first = next(tokens, None)
            # In mixed-case text an all-capitals title is more likely an abbreviation ("mild MR" is
            # mitral regurgitation), so it needs a name-like word after it, as a weak title does.
            # A period after it ("Gen.", "PROF.") makes a title strong, but not a weak one written as
            # an abbreviation ("changes in MS. Aspiration precautions" is mental status), nor a
            # whole word, which it ends ("in general. Will ...").
            abbreviation = title.isupper() and not all_caps
            dotted = match.group("dot") is not None and not honorific.word
            if abbreviation:  # ... or a listed name Capitalised after it ("informed DR Low", not "MS Worsening")
                listed = first is not None and titlecase(first.word) and first.word.casefold() in name_words()
                strong = honorific.strong and (dotted or listed)
            else:
                strong = honorific.strong or dotted
            if abbreviation and first is not None and first.word.islower():
                continue  # "MS worsening": after an abbreviation a name is not written in lower case
            end = self._name_end(first, tokens, honorific, strong, title, one_case)
            if end is not None and first is not None:
                if honorific.role and self._institution_named is not None and self._institution_named.match(low, first.start):
                    continue  # "send the report to Obrien Medical Centre", "spoke with quellmore clinic": a place
                start = match.start("title") if honorific.opens else first.start
                spans.append(Span(start, end, honorific.category, self.name, honorific.name))
                if honorific.plural:
                    spans += self._more_names(text, end, honorific, title)
        present = self._cue_words.present(low)
        spans += self._given_names(text, low, single_case, present)
        spans += self._names_before_verbs(text, low, single_case, present)
        spans += self._names_before_credentials(text, low, single_case, present)
        if self._slash_role is not None and "/" in text:
            for m in self._slash_role.finditer(low):
                spans += self._signature(text, self._name_before_slash, m.start(), single_case, "before_role")
        if self._bracketed_role is not None and "(" in text:
            for m in self._bracketed_role.finditer(low):
                spans += self._initialled_signature(text, m.start(), single_case)
        if "(" in text:
            spans += self._names_after_role(text, low, single_case)
            if self._department is not None and "by" in low:
                spans += self._seen_by(text, low)
        if self._institution_end is not None:
            spans += self._signing_lines(text, low)
        spans += self._closing_name(text)
        for cue, capitalised, category in self._care_cues:
            if present is not None and cue not in present:
                continue
            for at in whole_words(low, cue):
                any_case = capitalised and self._admitted(low, at)
                spans += self._cared_by(text, at + len(cue), capitalised and not any_case, category)
        return spans

    def _seen_by(self, text: str, low: str) -> list[Span]:
        """The clinician between "by" and a department alone in brackets, read as after a care cue
        (_cared_by: "seen by S G QUEK (CARDIO)", "seen by shan jun (cardio)"; "seen by team
        (ortho)" stays), category DOCTOR."""
        spans = []
        for m in self._department.finditer(low):  # type: ignore[union-attr]
            by = low.rfind("by ", max(0, m.start() - VERB_WINDOW), m.start())
            if by < 0 or (by and low[by - 1].isalnum()):
                continue
            found = self._cared_by(text, by + 2, False, "DOCTOR", "seen_by")
            if found and not text[found[0].end : m.start()].strip():
                spans += found
        return spans

    def _admitted(self, low: str, at: int) -> bool:
        """Whether an admission word (rules/honorifics.toml) stands before `at` in its sentence."""
        start = max(low.rfind("\n", 0, at), low.rfind(". ", 0, at), low.rfind(";", 0, at)) + 1
        return self._admission.search(low, start, at) is not None

    def _cared_by(self, text: str, at: int, capitalised: bool, category: str, rule: str = "care_cue") -> list[Span]:
        """The name after a care cue ending at `at` (rules/honorifics.toml's care_cues): up to
        four words, initials or connectors before "at" and a place, a comma or the line's end, no
        stop word, title or role among them nor an everyday word no name list holds, and one a
        word in no dictionary or of a name list; each word Capitalised after a `capitalised` cue."""
        match = CARED_BY.match(text, at)
        if match is None:
            return []
        named = False
        for word in match["name"].split():
            key = word.casefold()
            if len(key) == 1 or key in self._connectors:
                continue  # an initial, "d/o"
            if capitalised and not _capitalised(word):
                return []
            if key in self._stop or key in self._titles or key in self._credential_words or key in self._units:
                return []
            listed = key in name_words()
            if key in self._common and not listed:
                return []
            named = named or listed or self._unknown_word(key)
        return [Span(match.start("name"), match.end("name"), category, self.name, rule)] if named else []

    def _signing_lines(self, text: str, low: str) -> list[Span]:
        """The name that signs a note on one of its last lines before a comma and an institution
        ("Imelda d/o Quellmore, Mount Elizabeth Hospital", "oswina, National Cancer Centre",
        "Ng, Alexandra Hospital"), category DOCTOR: no word of it a stop word or a title, and one
        a listed given name or a word in no dictionary, or a lone Capitalised word that is no
        frequent English one ("Plan, Bedok Polyclinic", "Records sent, Harwick Hospital" stay)."""
        spans = []
        end = len(text)
        while end and text[end - 1].isspace():  # the note's end, without copying it
            end -= 1
        for _ in range(SIGNATURE_LINES):
            start = text.rfind("\n", max(0, end - SIGNATURE_LENGTH), end) + 1
            line = SIGNATURE_LINE.fullmatch(text, start, end) if end - start < SIGNATURE_LENGTH else None
            if line is not None and self._institution_end.search(low, line.start("institution"), line.end("institution")):
                words = [w.rstrip(".").casefold() for w in line["name"].split()]
                named = [w for w in words if len(w) > 1 and "/" not in w and w not in self._connectors]
                alone = len(words) == 1 and titlecase(line["name"].rstrip(".")) and not plain_word(words[0], rank=None)
                # an initial is no stop word there ("A Nair, Alexandra Hospital")
                if named and not any(len(w) > 1 and (w in self._stop or w in self._titles) for w in words) and (
                    alone or any(w in self._given or self._unknown_word(w) for w in named)
                ):
                    spans.append(Span(line.start("name"), line.end("name"), "DOCTOR", self.name, "before_institution"))
            if start == 0:
                break
            end = start - 1
        return spans

    def _closing_name(self, text: str) -> list[Span]:
        """The writer's name alone on a note's last line, category DOCTOR: a Capitalised listed
        given name and a surname that may be one ("Mary Quellmore"), or the given name alone after
        a dash ("--Marybeth"); not "Will Continue", "Pain Controlled", "--Plan"."""
        end = len(text)
        while end and text[end - 1].isspace():
            end -= 1
        start = text.rfind("\n", max(0, end - SIGNATURE_LENGTH), end) + 1
        line = CLOSING_NAME.fullmatch(text, start, end) if 0 < end - start < SIGNATURE_LENGTH else None
        if line is None or not titlecase(line["given"]) or line["given"].casefold() not in self._given:
            return []
        if line["name"] is None:
            return [Span(line.start("given"), line.end("given"), "DOCTOR", self.name, "closing_name")] if line["dash"] else []
        if not (titlecase(line["name"]) and self._name_like(line["name"], False)):
            return []
        return [Span(line.start("given"), line.end("name"), "DOCTOR", self.name, "closing_name")]

    def _names_before_verbs(self, text: str, low: str, single_case: bool, present: frozenset[str] | None) -> list[Span]:
        """A Capitalised word in no dictionary before a verb of contact ("Haverford aware"), with a
        listed given name before it ("Marie Quimby notified"); not "Neuro aware", "Micu paged".  In
        a note of one case, an unlisted name in any case ("QUELLMORE AWARE", "w. kowalczyk notified").
        `present`: the words of :attr:`_cue_words` the note may hold (None: any)."""
        spans = []
        pattern = self._one_case_name_before_verb if single_case else self._name_before_verb
        for first, verbs in self._verbs_after_name.items():
            if present is not None and present.isdisjoint(verbs):
                continue
            for at in whole_words(low, first):
                if len(verbs) > 1 or verbs[0] != first:
                    if not any(low.startswith(verb, at) and word_ends(low, at + len(verb)) for verb in verbs):
                        continue
                match = pattern.search(text, max(0, at - VERB_WINDOW), at)
                if match is None or not self._unknown_word(key := match["name"].casefold()):
                    continue
                if single_case and (not self._one_case_name(key) or key in self._titles):
                    continue
                given = match["given"] and match["given"].casefold()
                listed = given is not None and given in name_words() and self._unknown_word(given, listed=True)
                if single_case and given in KINSHIP:
                    listed = False  # "sis connie called": in one case a kinship word may look like a given name
                start = match.start("given") if listed else match.start("name")
                spans.append(Span(start, match.end("name"), "NAME", self.name, "before_verb"))
        return spans

    def _names_after_role(self, text: str, low: str, single_case: bool) -> list[Span]:
        """The name in brackets after a role ("resident (Quellmore)", "NP (Greta Lindqvist)"),
        each word name-like as a signature's (_name_like; "attending (MICU)", "fellow (cards)" stay)."""
        spans = []
        for m in self._role_bracket.finditer(low):
            words = [group for group in ("given", "name") if m.start(group) >= 0]
            if all(self._name_like(text[m.start(g) : m.end(g)], single_case) for g in words):
                spans.append(Span(m.start("given"), m.end(words[-1]), "DOCTOR", self.name, "after_role"))
        return spans

    def _names_before_credentials(self, text: str, low: str, single_case: bool, present: frozenset[str] | None) -> list[Span]:
        """A signature's name before a credential in capitals ("Philippa Quellmore, RN", "J. Okafor,
        MD"; in any case in a lower-case note: "greta lindqvist np"): a surname in no dictionary or
        a listed given name, with the given name or initial before it, Capitalised in mixed-case
        text, category DOCTOR ("Charge RN", "Renal MD", "Pt's RN", "Towson, MD" stay)."""
        spans = []
        for credential in self._credentials if present is None else [c for c in self._credentials if c in present]:
            for at in whole_words(low, credential):
                if not (single_case or text[at : at + len(credential)].isupper()):
                    continue  # in capitals ("RN", "R.N."), not "Md Ali" (Mohamed) nor "rn" in a note that Capitalises
                state = credential in self._states
                found = self._signature(text, self._name_before_credential, at, single_case, "before_credential", state)
                spans += found or self._surname_signature(text, at, single_case)
        return spans

    def _surname_signature(self, text: str, at: int, single_case: bool) -> list[Span]:
        """A name-like surname, a comma and its initials before a credential at `at` ("Quellmore, J
        RN"): the initials in capitals unless the note is of one case ("Pain, a RN" stays)."""
        match = self._surname_before_credential.search(text, max(0, at - VERB_WINDOW), at)
        if match is None or not self._name_like(match["name"], single_case) or not (single_case or match["initials"].isupper()):
            return []
        return [Span(match.start("name"), match.end("initials"), "DOCTOR", self.name, "before_credential")]

    def _signature(
        self, text: str, pattern: regex.Pattern[str], at: int, single_case: bool, rule: str, state: bool = False
    ) -> list[Span]:
        """The signature's name that `pattern` reads back from `at` (a credential or a role after
        it): a name-like surname, with its given name when that is name-like too, else its initial;
        none where the credential is a state's code after a town (`state`)."""
        match = pattern.search(text, max(0, at - VERB_WINDOW), at)
        if match is None or not self._name_like(match["name"], single_case) or (state and self._a_town(match)):
            return []
        given = match["given"]
        if given is not None and self._name_like(given, single_case):
            start = match.start("given")
        else:
            start = match.start("initial") if match["initial"] is not None else match.start("name")
        return [Span(self._after_glued_title(text, start, match.end("name"), single_case), match.end("name"), "DOCTOR", self.name, rule)]

    def _after_glued_title(self, text: str, start: int, end: int, single_case: bool) -> int:
        """Where a signature's name starts when a title is glued onto it: after the title before a
        Capitalised name ("DrEvans MCR"), or in a note of one case before a listed name that the
        whole word is not ("drfernandez mcr"; "drake, rn" stays whole)."""
        if self._glued_title is None:
            return start
        if (title := self._glued_title.match(text, start)) is not None:
            return title.end()
        if single_case and (title := self._glued_any_case.match(text, start, end)) is not None:
            if text[title.end() : end].casefold() in name_words() and text[start:end].casefold() not in name_words():
                return title.end()
        return start

    def _initialled_signature(self, text: str, at: int, single_case: bool) -> list[Span]:
        """A surname and its initials before a role in brackets at `at` ("HARRIS M (SR)", "Quimby
        J.A. (MO)"): the initials in capitals unless the note is of one case, the surname a listed
        name or a word in no dictionary ("Pain B (MO)" stays); or a name alone, as before a
        credential (_name_like: "Lindqvist (ENT reg)", "Priya (resp MO)"; "Renal (MO)" stays)."""
        match = self._name_and_initials.search(text, max(0, at - VERB_WINDOW), at)
        if match is None or not (single_case or match["initials"].isupper()):
            alone = self._name_alone.search(text, max(0, at - VERB_WINDOW), at)
            if alone is None or alone["name"].casefold() in self._stop or not self._name_like(alone["name"], single_case):
                return []
            return [Span(alone.start("name"), alone.end("name"), "DOCTOR", self.name, "before_role")]
        word = match["name"]
        key = word.casefold()
        if not (single_case or word[:1].isupper()) or key in self._stop or key in self._titles:
            return []
        if not (self._unknown_word(key) or (key in name_words() and key not in self._common)):
            return []
        return [Span(match.start("name"), match.end("initials"), "DOCTOR", self.name, "before_role")]

    def _a_town(self, match: regex.Match[str]) -> bool:
        """Whether the words before a state's code name a town: the last, or the last two."""
        towns = town_names(self._places) if self._places is not None else frozenset()
        name = match["name"].casefold()
        return name in towns or (match["given"] is not None and f"{match['given'].casefold()} {name}" in towns)

    def _name_like(self, word: str, single_case: bool) -> bool:
        """A word that may be a name where a signature stands: Capitalised unless the note is of
        one case, and a listed given name or a word in no dictionary."""
        key = word.casefold()
        return (single_case or word[:1].isupper()) and (key in self._given or self._unknown_word(key))

    def _unknown_word(self, key: str, listed: bool = False) -> bool:
        """Whether a case-folded word is in none of the everyday, ward, English, clinical and drug
        word lists, nor a participle of their words (with `listed`, the English list may hold it
        where a name list does too: "Marie")."""
        if key in self._common or key in self._units or clinical_word(key) or drug_word(key) or inflected_word(key):
            return False
        return listed or not plain_word(key, rank=None)

    def _given_names(self, text: str, low: str, single_case: bool, present: frozenset[str] | None) -> list[Span]:
        """The names after "with", "per", "by": a listed given name, Capitalised in mixed-case
        text, and the name's further words as after a weak title ("met with martin quellmore";
        "Pt with amber urine" stays)."""
        spans = []
        for cue in self._given_cues if present is None else [c for c in self._given_cues if c in present]:
            for at in whole_words(low, cue):
                gap = GAP.match(text, at + len(cue))
                if gap is None or not (single_case or text[gap.end() : gap.end() + 1].isupper()):
                    continue
                tokens = self._tokens(text, gap.end())
                first = next(tokens, None)
                if first is None or first.start != gap.end() or first.word.casefold() not in self._given:
                    continue
                if not (single_case or _capitalised(first.word)):
                    continue
                title = text[at : at + len(cue)]
                end = self._name_end(first, tokens, self._honorifics[cue], False, title)
                if end is not None:
                    spans.append(Span(first.start, end, "NAME", self.name, cue))
        return spans

    def _more_names(self, text: str, end: int, honorific: Honorific, title: str) -> list[Span]:
        """The further names of a plural title's list, joined by "/", "&", "," or "and": each
        taken as after a weak title ("Drs Okafor/Pemberton"; not "Drs Lee and colleagues")."""
        spans = []
        while (join := NAME_LIST_JOIN.match(text, end)) is not None:
            tokens = self._tokens(text, join.end())
            first = next(tokens, None)
            name_end = self._name_end(first, tokens, honorific, False, title)
            if name_end is None or first is None:
                break
            spans.append(Span(first.start, name_end, honorific.category, self.name, honorific.name))
            end = name_end
        return spans

    def _glued(self, text: str, match: re.Match[str] | regex.Match[str]) -> Span | None:
        """The name a title is written onto: Capitalised after it ("drTan", "DRNeo", "DRO'Brien"),
        a listed name in the title's case (_listed_after_glued: "DRNG", "drong"), or in the title's
        case and neither a common word nor the start of an English word that begins with the title
        ("drchua", "DRNEO"; not "drain", "DROWSY", "drsg")."""
        title = text[match.start("glued") : match.end("glued")]
        after = text[match.end() : match.end() + 2]
        if (
            not (after[:1].isupper() and after[1:2].islower())
            and (title + after).casefold() in self._word_starts
            and not self._listed_after_glued(title, GLUED_REST.match(text, match.end())[0])
        ):
            return None  # "drain", "Dressing", "DROWSY": most glued matches, refused before reading tokens
        tokens = self._tokens(text, match.end())
        first = next(tokens, None)
        if first is None or first.connector or first.start != match.end():
            return None
        word = first.word
        if not _capitalised(word) and not self._listed_after_glued(title, word):
            key = word.casefold()
            glued = (title + word[:2]).casefold()
            if (
                len(word) < 3
                or title.isupper() != word.isupper()
                or key in self._common
                or glued in self._word_starts
                or not VOWEL.search(key)
            ):
                return None
        honorific = self._honorifics[title.casefold()]
        end = self._name_end(first, tokens, honorific, True, title)
        return Span(first.start, end, honorific.category, self.name, honorific.name) if end is not None else None

    def _listed_after_glued(self, title: str, word: str) -> bool:
        """A listed name of three letters or more in the title's case, glued into a word that no
        dictionary holds ("drong", "DRLIM" for Dr Ong, Dr Lim; not "drip", "DRAIN", nor "drng",
        which is draining more often than Dr Ng)."""
        whole = (title + word).casefold()
        return (
            len(word) > 2
            and title.isupper() == word.isupper()
            and word.casefold() in name_words()
            and not (plain_word(whole, rank=None) or clinical_word(whole) or drug_word(whole))
        )

    def _tokens(self, text: str, pos: int) -> Iterator[Token]:
        """The run of words and connectors from `pos`, separated by spaces on the same line: read
        one by one, as most names end after a word or two."""
        for _ in range(self._max_tokens):
            match = self._connector.match(text, pos) or WORD.match(text, pos)
            if match is None:
                break
            connector = match.re is self._connector
            if not connector and (CONTRACTION.match(text, match.end("word")) or CONTRACTION.search(match["word"])):
                break  # a contraction ends a name: "Dr Quimby I'm aware", "WITH JOHN I'LL CALL"
            dotted = not connector and match.group("dot") is not None
            gap = (DOTTED_GAP if dotted else GAP).match(text, match.end())
            numbered = gap is not None and text[gap.end() : gap.end() + 1].isdigit()
            yield Token(match.start(), match.end("word"), match.group("word"), dotted, connector, numbered)
            if gap is None:
                break
            pos = gap.end()

    def _name_end(
        self, first: Token | None, rest: Iterator[Token], honorific: Honorific, strong: bool, title: str, one_case: bool = False
    ) -> int | None:
        """Where the name starting at `first` (then `rest`) ends, or None if the title is not followed
        by one; `one_case`: the note is all in capitals or all in lower case, and the title takes a
        name written so there (not "called": Honorific.capitalised)."""
        end = None
        has_word = False  # initials alone are a name only after a strong title ("Mr K.")
        if first is None:
            return None
        after_connector = after_initial = cased = False
        last = ""  # the last word taken
        tokens = _Lookahead(chain((first,), rest))  # read one ahead where a word is everyday
        for i, token in enumerate(tokens):
            previous_connector, after_connector = after_connector, token.connector
            if token.connector:
                continue  # kept only if the word after it is taken
            key = token.word.casefold()
            if self._is_initial(token, key, after_initial or (i == 0 and strong)):
                end, after_initial = token.end, True
                continue
            after_initial = False
            if key in self._stop or key in self._titles or key.partition("-")[0] in self._stop:
                break  # "DR. QUIMBY AWARE-ORDER FOR ...": a hyphenated stop word ends the name too
            if not token.word.istitle() and key in self._swapped_stop:
                break  # "wait for dr reveiw", "dr quiley awaer"; "Dr Thier" is a name
            if has_word and key in self._credential_words and token.word.isupper():
                break  # "Oswin Brackenholt RRT": a credential in capitals follows the name
            if has_word and token.numbered and key in calendar_words():
                break  # "Signed: Nurse Pang Dec 2017", "Dr Lim July 19th": a date follows the name
            if previous_connector:
                taken = True  # "binte Ali": a connector announces a name, common word or not
            elif not has_word:
                taken = strong or self._looks_like_name(token, key, honorific, title, one_case, initialled=i > 0)
            elif _capitalised(token.word):
                taken = True
            elif cased and token.word.isupper() and len(key) <= INITIALS and self._initials(key):
                end, last = token.end, key
                break  # "Dr Tan BH", "A/Prof Quek CS": the given names' initials end the name
            elif cased and len(key) > 2:
                taken = False  # "Dr Nakagawa recs vanco": a name begun Capitalised goes on Capitalised
            else:  # "DR QUIMBY RENAL CONSULT", "mr I remained", "Mr Tan prefers": an English or clinical word ends it
                taken = self._inner_word(key) or self._syllable_before_name(key, tokens.peek()) or _given_pair(last, key)
            if not taken:
                break
            if not has_word:
                cased = token.word.istitle()
            end, has_word, last = token.end, True, key
            if token.dotted and key not in self._name_abbreviations:
                break  # a period after a whole word ends the sentence, and the name with it ("Mohd." does not)
        return end if has_word or strong else None

    def _inner_word(self, key: str) -> bool:
        """A word that goes on with a name begun: no everyday, English or clinical word."""
        return key not in self._common and not plain_word(key, rank=None) and not clinical_word(key)

    def _syllable_before_name(self, key: str, after: Token | None) -> bool:
        """An everyday word that a name list holds, inside a name of three parts where the word
        after it goes on with the name ("dr kwek soon jun", "DR. LIM HOCK BENG"; "Dr Tan soon to
        review", "DR KWEK WILL REVIEW" end at it)."""
        if after is None or after.connector or key in self._stop or key not in name_words():
            return False
        following = after.word.casefold()
        return following not in self._stop and following not in self._titles and self._inner_word(following)

    def _is_initial(self, token: Token, key: str, opening: bool) -> bool:
        """One letter; a lower-case "a" or "i" counts only straight after a strong title or
        another initial (`opening`: "mr a tan", "dr m a quellmore")."""
        if len(key) != 1:
            return False
        return token.dotted or token.word.isupper() or key not in self._stop or opening

    def _looks_like_name(
        self, token: Token, key: str, honorific: Honorific, title: str, one_case: bool = False, initialled: bool = False
    ) -> bool:
        """Whether the word after a weak title ("ms", "general"), or after a title in capitals in
        mixed-case text ("DR"), is a name rather than a noun: Capitalised after a Capitalised
        title ("Ms Low"), a name of the lists in the title's capitals ("DR LOW", "MS NG"), or
        else neither a common word nor an English word that no name list holds ("MS clears").
        After a clinician's role only a Capitalised word in no dictionary is ("NP Calloway"), or
        after a role spelled out a name a list holds in any case ("CASEWORKER MIRIAM") or a word in
        no dictionary written in the role's case ("paged resident kaminski", "ATTENDING KAMINSKI");
        in a note all in one case, where case says nothing, such a word after a role's abbreviation
        or a verb of contact too ("MD QUELLMORE NOTIFIED", "spoke with quellmore re plan"), as
        after a verb of contact a word in capitals after initials in capitals (`initialled`:
        "informed J QUELLMORE re BP")."""
        if key in honorific.not_before:
            return False
        if honorific.role:  # "NP Calloway", "fellow Lindqvist"; never "NP CRACKLES", "Attending Rounds", "MD Lasix"
            if not self._unknown_word(key):
                return False
            if honorific.cue:  # "Paged Lindqvist"; not "spoke with MDs"
                return titlecase(token.word) or ((one_case or initialled and token.word.isupper()) and self._one_case_name(key))
            # in one case only after a role spelled out: a name a list holds ("CASEWORKER MIRIAM",
            # "nurse jane"), or in the role's own case an unlisted name ("resident kaminski")
            if _capitalised(token.word):
                return True
            if len(title) < SPELLED_ROLE:
                return one_case and self._one_case_name(key)
            as_title = (title.islower() and token.word.islower()) or (title.isupper() and token.word.isupper())
            return key in name_words() or (as_title and self._unlisted_name(key))
        if _capitalised(title) and _capitalised(token.word):
            return True
        if title.isupper() and token.word.isupper() and key in name_words():
            return True
        return key not in self._common and not plain_word(key, rank=None)

    def _initials(self, key: str) -> bool:
        """Whether a short word in capitals after a Capitalised surname may be its given names'
        initials: no everyday, ward or clinical word, credential or role ("Tan BH"; not "Tan BP",
        "Lim RN", "Ng MO").  The English list is not asked: it holds most pairs of letters."""
        return not (
            key in self._common or key in self._units or key in self._credential_words or key in self._roles or clinical_word(key)
        )

    @staticmethod
    def _unlisted_name(key: str) -> bool:
        """Whether a word in no dictionary may be a name no list holds: four letters or more, no
        compound of English words (not "hsb", "co-signature")."""
        return len(key) >= UNLISTED_NAME and not ("-" in key and any(plain_word(part, rank=None) for part in key.split("-")))

    def _one_case_name(self, key: str) -> bool:
        """Whether a word in no dictionary, in a note of one case, may be an unlisted name: nor an
        everyday word with two letters swapped ("tema", "pateint")."""
        return self._unlisted_name(key) and key not in self._swapped_common


def _given_pair(last: str, key: str) -> bool:
    """Whether `key` is the second of a Chinese given name's two syllables after `last`, the
    first, though an English word ("prof hong min", "dr sim xin lay", "DR LIAN AH")."""
    given = chinese_name_parts()[1]
    return last in given and key in given


class _Lookahead:
    """An iterator of tokens that can show the next one without taking it."""

    def __init__(self, tokens: Iterator[Token]) -> None:
        self._tokens = tokens
        self._next: Token | None = None

    def __iter__(self) -> "_Lookahead":
        return self

    def __next__(self) -> Token:
        if self._next is not None:
            token, self._next = self._next, None
            return token
        return next(self._tokens)

    def peek(self) -> Token | None:
        if self._next is None:
            self._next = next(self._tokens, None)
        return self._next


def entries(rules: dict) -> list[dict]:
    """The [[honorific]] blocks of a parsed honorifics.toml, then one block per word of its
    `role_titles` (a clinician's role written as a title: weak, a whole word, category DOCTOR)
    and of its `contact_cues` (a verb of contact: the same, category NAME; those of
    `contact_cues_capitalised` take Capitalised names only) and `given_name_cues` (a preposition
    of contact: weak, category NAME, a listed given name only)."""
    roles = [{"name": r, "category": "DOCTOR", "strong": False, "word": True, "role": True} for r in rules.get("role_titles", ())]
    capitalised = set(rules.get("contact_cues_capitalised", ()))
    cues = [
        {"name": c, "category": "NAME", "strong": False, "word": True, "role": True, "cue": True, "capitalised": c in capitalised}
        for c in rules.get("contact_cues", ())
    ]
    given = [{"name": c, "category": "NAME", "strong": False, "word": True, "given": True} for c in rules.get("given_name_cues", ())]
    return [*rules.get("honorific", ()), *roles, *cues, *given]


EXTRA_HONORIFIC_KEYS = frozenset(
    {"honorific", "role_titles", "contact_cues", "contact_cues_capitalised", "given_name_cues", "verbs_after_name", "stop_words"}
)


def _add_honorifics(honorifics: dict[str, Honorific], entries: Iterable[dict], path: Path) -> None:
    """Add the [[honorific]] blocks of the file at `path`; a title already defined is an error."""
    for entry in entries:
        if entry["category"] not in CATEGORIES:
            raise ConfigError(f"{path}: honorific '{entry['name']}' has unknown category '{entry['category']}'")
        name = entry["name"].casefold()
        if name in honorifics:
            first = honorifics[name].origin
            raise ConfigError(
                f"honorific '{name}' is defined twice: " + (f"in {path}" if first == str(path) else f"in {first} and in {path}")
            )
        not_before = frozenset(w.casefold() for w in entry.get("not_before", ()))
        honorifics[name] = Honorific(
            name, entry["category"], entry["strong"], not_before, str(path), entry.get("glued", False), entry.get("word", False),
            entry.get("plural", False), entry.get("role", False), entry.get("cue", False), entry.get("given", False),
            entry.get("capitalised", False), entry.get("opens", False),
        )


def _title_pattern(titles: str, space: str, glued: str, letter: str) -> str:
    """A title not inside a word nor after a plus, then a period, a colon or a space: "Dr.Tan",
    "Dr. Tan", "Dr Tan", "Attending: Quimby" (a colon only after a role, as a sign-out labels its
    clinicians); or a glued title right before a letter ("drTan"), which
    :meth:`HonorificDetector._glued` checks.  After a plus it is a grade's finding ("3-4+MR").
    After a slash it is a title after a word or "w/" ("Dr Tan/Dr Lim", "w/dr Lim"), not inside a
    slashed abbreviation ("a/prof", "s/n")."""
    edge = r"(?<![\w+])(?<!(?<!\w)[^\W\dw]/)"
    return rf"{edge}(?:(?P<title>{titles})(?:(?P<dot>\.){space}*|(?P<colon>:){space}*|{space}+)|(?P<glued>{glued})(?={letter}))"


def _capitalised(word: str) -> bool:
    """ "Tan", "McDonald", "O'Brien": case carries information, unlike "TAN" in an all-caps note."""
    return word[:1].isupper() and not word.isupper()
