#!/usr/bin/env python3
"""Generate the synthetic hospital database that demos, tests and benchmarks run on.

Everything comes from the small lists in sample_db/data/ and one seeded random.Random, so a seed
always yields the same database, lists and gold annotations; only the standard library and
SQLAlchemy are needed (data/world.txt was written once from Faker by build_world.py, so Faker's
version cannot change the output).  Every PHI string is planted through `Doc.phi`, which records
its offsets as the text is written, so gold.jsonl cannot drift from the notes; each planted string
and each non-PHI look-alike also carries the name of the writing convention it exercises, counted
per note for sample_db/README.md.

    python sample_db/generate.py [--out DIR] [--patients N] [--seed S]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import random
import re
from collections import Counter
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable

import sqlalchemy as sa

HERE = Path(__file__).resolve().parent
DATA = HERE / "data"

ORIGINS = {"chinese": 55, "malay": 15, "indian": 15, "western": 15}
PATRONYMIC = ("bin", "binte", "bte", "s/o", "d/o")
# How notes shorten a Malay or Indian connector the record spells out ("Ali b. Hassan", "Siti bt Ahmad")
CONNECTOR_FORMS = {"bin": ("b.", "b", "bin"), "binte": ("bte", "bt", "bt.", "binti"), "bte": ("binte", "bt.", "bt"),
                   "s/o": ("s.o.", "so"), "d/o": ("d.o.", "do")}
STREET_TYPES = {"Avenue": "Ave", "Street": "St", "Road": "Rd", "Drive": "Dr", "Crescent": "Cres", "Close": "Cl",
                "Boulevard": "Blvd", "Lane": "Ln", "Lorong": "Lor", "Jalan": "Jln"}
KIN_WORDS = {"M": ("son", "hb", "husband", "bro", "brother", "nephew", "grandson", "son-in-law"),
             "F": ("dtr", "daughter", "wife", "sis", "sister", "niece", "granddaughter", "dil")}
STAFF_ROLES = ("reg", "MO", "HO", "res", "cons", "SR")
DEPARTMENTS = ("ENT", "gen surg", "GM", "cardio", "ortho", "renal", "resp", "neuro", "O&G", "ID")
HONORIFICS = {"M": ("Mr", "Mr.", "Mr", "MR"), "F": ("Mdm", "Mrs", "Ms", "Miss", "Madam", "Mdm")}
DOCTOR_TITLES = ("Dr", "Dr.", "Dr", "dr", "DR")
SENIOR_TITLES = ("Prof", "Prof.", "A/Prof", "Asst Prof", "Dr")
NURSE_TITLES = ("SN", "SSN", "NC", "Nurse", "S/N")
DOCTOR_ROLES = ("Senior Consultant", "Consultant", "Associate Consultant", "Registrar", "Resident",
                "Medical Officer", "House Officer")
NURSE_ROLES = ("Staff Nurse", "Senior Staff Nurse", "Nurse Clinician", "Enrolled Nurse", "Nurse Manager")
EMAIL_DOMAINS = ("example.com", "example.net", "example.org", "mail.example.com")
US_AREA_CODES = ("410", "443", "617", "206", "512", "312")
NOTE_TYPES = {  # note kind -> (weight, sections in order)
    "discharge": (35, ("header", "ids", "admission", "pmhx", "complaint", "exam", "impression",
                       "course", "social", "meds", "plan", "signoff")),
    "nursing": (30, ("nursing_head", "nursing", "social", "nursing_sign")),
    "clinic": (20, ("clinic_head", "clinic", "exam", "plan", "signoff")),
    "phone": (8, ("phone", "nursing_sign")),
    "referral": (7, ("ref_open", "referral", "ref_close", "signoff")),
}
MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September",
          "October", "November", "December")


def ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


# Date renderings after seed 003 (d/m/y, m/d/y, y/m/d, d/m, m/d, m/y; numeric or named months).
DATE_STYLES: dict[str, Callable[[dt.date], str]] = {
    "dd/mm/yyyy": lambda d: f"{d.day:02d}/{d.month:02d}/{d.year}",
    "d/m/yy": lambda d: f"{d.day}/{d.month}/{d.year % 100:02d}",
    "iso": lambda d: d.isoformat(),
    "yyyy/mm/dd": lambda d: f"{d.year}/{d.month:02d}/{d.day:02d}",
    "m/d/yyyy": lambda d: f"{d.month}/{d.day}/{d.year}",
    "d Mon yyyy": lambda d: f"{d.day} {MONTHS[d.month - 1][:3]} {d.year}",
    "Month d, yyyy": lambda d: f"{MONTHS[d.month - 1]} {d.day}, {d.year}",
    "dd-Mon-yy": lambda d: f"{d.day:02d}-{MONTHS[d.month - 1][:3]}-{d.year % 100:02d}",
    "dth of Month yyyy": lambda d: f"{ordinal(d.day)} of {MONTHS[d.month - 1]} {d.year}",
    "dd.mm.yyyy": lambda d: f"{d.day:02d}.{d.month:02d}.{d.year}",
    "ddMONyyyy": lambda d: f"{d.day:02d}{MONTHS[d.month - 1][:3].upper()}{d.year}",
    "Mon yyyy": lambda d: f"{MONTHS[d.month - 1][:3]} {d.year}",
    "Month dth": lambda d: f"{MONTHS[d.month - 1]} {ordinal(d.day)}",
    "d Month": lambda d: f"{d.day} {MONTHS[d.month - 1]}",
    "d/m": lambda d: f"{d.day}/{d.month}",
}
# Renderings without a year, with dots or dashes, or compact; each written where context says "date"
EXTRA_DATE_STYLES: dict[str, Callable[[dt.date], str]] = {
    "m/d": lambda d: f"{d.month}/{d.day}",  # "seen 10/16", no year
    "d.m": lambda d: f"{d.day}.{d.month}",  # "FU 9.4", "US HBS 27.11"
    "mm.yyyy": lambda d: f"{d.month:02d}.{d.year}",
    "yyyymmdd": lambda d: f"{d.year}{d.month:02d}{d.day:02d}",
    "d-m-yyyy": lambda d: f"{d.day}-{d.month}-{d.year}",
    "d-m-yy": lambda d: f"{d.day}-{d.month}-{d.year % 100:02d}",
}
DOB_STYLES = tuple(name for name in DATE_STYLES if "y" in name or name == "iso")

_NRIC_WEIGHTS = (2, 7, 6, 5, 4, 3, 2)
_NRIC_TABLE = {"S": (0, "JZIHGFEDCBA"), "T": (4, "JZIHGFEDCBA"), "F": (0, "XWUTRQPNMLK"), "G": (4, "XWUTRQPNMLK")}


def nric_check_letter(prefix: str, digits: str) -> str:
    """The check letter of a Singapore NRIC (S/T) or FIN (F/G): weighted digit sum, offset, mod 11."""
    offset, letters = _NRIC_TABLE[prefix]
    return letters[(offset + sum(int(c) * w for c, w in zip(digits, _NRIC_WEIGHTS))) % 11]


def read_sections(path: Path) -> dict[str, list[str]]:
    """Read a data file of '[section]' headers, one entry a line; lines starting with '#' are comments."""
    sections: dict[str, list[str]] = {}
    current = sections.setdefault("", [])
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        header = re.fullmatch(r"\[(.+)\]", line)
        if header:
            current = sections.setdefault(header.group(1), [])
        else:
            current.append(line.rstrip())
    return sections


@dataclass(frozen=True)
class Section:
    """A template section: keep lo..hi of `lines`, under one of `titles` if there are any."""

    lo: int
    hi: int
    titles: tuple[str, ...]
    lines: tuple[str, ...]


def load_templates(path: Path) -> dict[str, Section]:
    sections = {}
    for header, lines in read_sections(path).items():
        if header:
            name, lo, hi = re.fullmatch(r"(\w+) (\d+)-(\d+)", header).groups()  # type: ignore[union-attr]
            titles = tuple(line[2:] for line in lines if line.startswith("> "))
            body = tuple(line for line in lines if not line.startswith("> "))
            sections[name] = Section(int(lo), int(hi), titles, body)
    return sections


@dataclass(frozen=True)
class Person:
    """A synthetic name.  Chinese names are written family first, Malay/Indian ones with bin/s/o."""

    given: str
    family: str | None
    sex: str
    origin: str
    family_first: bool = False

    @property
    def full(self) -> str:
        if not self.family:
            return self.given
        return f"{self.family} {self.given}" if self.family_first else f"{self.given} {self.family}"

    @property
    def addressed(self) -> str:
        """What follows "Mr"/"Dr": the surname, or the first given name where there is none."""
        patronymic = not self.family or self.family.split()[0] in PATRONYMIC
        return self.given.split()[0] if patronymic else self.family  # type: ignore[return-value]

    def forms(self) -> list[str]:
        """The ways notes write this name: full, addressed, given names, initials + surname."""
        forms = [self.full, self.addressed, self.given]
        if self.addressed == self.family:
            forms.append(" ".join(t[0] for t in self.given.replace("-", " ").split()) + " " + self.family)
        return forms


@dataclass
class Patient:
    row: dict
    person: Person
    ethnicity: str
    relatives: list[tuple[str, Person]]
    phones: list[str]  # digits only; 10 digits means a US number
    addr_forms: list[str]  # the stored address first, then partial renderings
    email: str | None


def same_length(change: Callable[[str], str]) -> Callable[[str], str]:
    """A note-wide change of case that keeps every offset: a character whose other case is longer
    ("ß" upper-cased is "SS") stays as it is."""

    def changed(text: str) -> str:
        whole = change(text)
        return whole if len(whole) == len(text) else "".join(c if len(change(c)) != 1 else change(c) for c in text)

    return changed


class Doc:
    """A note under construction and the PHI planted in it, with offsets taken as text is appended."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.length = 0
        self.planted: list[tuple[int, int, str, str]] = []
        self.conventions: set[str] = set()

    def add(self, text: str, convention: str = "") -> None:
        """Append text that is not PHI; `convention` names the look-alike it plants, if any."""
        self.parts.append(text)
        self.length += len(text)
        if convention:
            self.conventions.add(convention)

    def phi(self, text: str, category: str, convention: str = "") -> None:
        self.planted.append((self.length, self.length + len(text), category, text))
        self.add(text, convention)

    def finish(self, case: Callable[[str], str]) -> tuple[str, list[dict]]:
        """Apply the note-wide case (a few notes are all lower or upper case); check every span."""
        text = case("".join(self.parts)).rstrip()
        for start, end, _, planted in self.planted:
            assert text[start:end] == case(planted), (text[start:end], planted)
        return text, [{"start": s, "end": e, "category": c} for s, e, c, _ in self.planted]


class Generator:
    """Owns the seeded random stream and the invented world: staff, outside doctors, patients."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.names = read_sections(DATA / "names.txt")
        self.world = read_sections(DATA / "world.txt") | read_sections(DATA / "abroad.txt")
        self.states = [tuple(line.split("|")) for line in self.world["us_states"]]
        self.nicknames = {k: v.split() for k, v in (line.split(": ") for line in self.world["nicknames"])}
        self.streets = read_sections(DATA / "addresses.txt")
        self.templates = load_templates(DATA / "templates.txt")
        self.hospitals = read_sections(DATA / "hospitals.txt")[""]
        self.places = read_sections(DATA / "places.txt")[""]
        # The tool's lists are deliberately incomplete: ~30% of what notes mention is not in them.
        self.known_hospitals = sorted(self.rng.sample(self.hospitals, round(len(self.hospitals) * 0.7)))
        self.known_places = sorted(self.rng.sample(self.places, round(len(self.places) * 0.7)))
        self.hospital_phones = [self.sg_number("6") for _ in range(8)]
        self.used_names: set[str] = set()
        self.used_ids: set[str] = set()
        self.doctors = [(self.unique_person(), role) for role in self.rng.choices(DOCTOR_ROLES, k=40)]
        self.nurses = [(self.unique_person(), role) for role in self.rng.choices(NURSE_ROLES, k=20)]
        self.outside_doctors = [self.unique_person() for _ in range(25)]

    # --- people -------------------------------------------------------------------------------
    def person(self, origin: str | None = None, sex: str | None = None) -> Person:
        rng, names = self.rng, self.names
        origin = origin or rng.choices(list(ORIGINS), weights=list(ORIGINS.values()))[0]
        sex = sex or rng.choice("MF")
        gender = "male" if sex == "M" else "female"
        if origin == "chinese":
            family = rng.choice(names["chinese_surnames"])
            if rng.random() < 0.25:  # "Jason Tan": English given name, western order
                return Person(rng.choice(names[f"western_{gender}"]), family, sex, origin)
            syllables = rng.sample(names["chinese_given"], 2)
            return Person(rng.choice((" ", " ", "-")).join(syllables), family, sex, origin, True)
        if origin in ("malay", "indian"):
            given = rng.choice(names[f"{origin}_{gender}"])
            father = rng.choice(names[f"{origin}_male"])
            link = {"malay": ("bin", "binte", "bte"), "indian": ("s/o", "d/o", "d/o")}[origin]
            roll = rng.random()
            if roll < 0.05:  # single-name patients exist; the family field is then empty
                return Person(given, None, sex, origin)
            if origin == "indian" and roll < 0.45:
                return Person(given, rng.choice(names["indian_surnames"]), sex, origin)
            return Person(given, f"{link[0] if sex == 'M' else rng.choice(link[1:])} {father}", sex, origin)
        family = rng.choice(names["western_surnames"])
        if rng.random() < 0.12:
            family += "-" + rng.choice(names["western_surnames"])
        return Person(rng.choice(names[f"western_{gender}"]), family, sex, origin)

    def unique_person(self) -> Person:
        """Staff and outside doctors get distinct full names so a name maps to one list entry."""
        while (p := self.person()).full in self.used_names:
            pass
        self.used_names.add(p.full)
        return p

    def relative(self, pt: Person, kind: str) -> tuple[str, Person]:
        """A relative with a consistent name: children share a surname or take the father's name."""
        rng = self.rng
        sex = {"M": "F", "F": "M"}[pt.sex] if kind == "spouse" else rng.choice("MF")
        rel = self.person(pt.origin, sex)
        if kind in ("child", "sibling") and pt.family and pt.addressed == pt.family:
            rel = replace(rel, family=pt.family)
        elif kind == "child" and pt.sex == "M" and pt.origin in ("malay", "indian") and rel.family:
            link = {"malay": ("bin", "binte"), "indian": ("s/o", "d/o")}[pt.origin][sex == "F"]
            rel = replace(rel, family=f"{link} {pt.given.split()[0]}")
        words = {"spouse": ("husband", "wife"), "child": ("son", "daughter"), "sibling": ("brother", "sister"),
                 "other": ("nephew", "niece")}[kind]
        return words[sex == "F"], rel

    # --- identifiers, phones, addresses --------------------------------------------------------
    def nric(self, prefix: str) -> str:
        while (nric := prefix + (digits := f"{self.rng.randrange(10**7):07d}")) in self.used_ids:
            pass
        self.used_ids.add(nric)
        return nric + nric_check_letter(prefix, digits)

    def sg_number(self, first: str) -> str:
        return first + f"{self.rng.randrange(10**7):07d}"

    def format_phone(self, digits: str) -> str:
        a, b = digits[:4], digits[4:]
        if len(digits) == 10:  # US: area code + 555-01xx, the range reserved for fiction
            ac, ex, ln = digits[:3], digits[3:6], digits[6:]
            return self.rng.choice((f"({ac}) {ex}-{ln}", f"{ac}-{ex}-{ln}", f"{ac}.{ex}.{ln}",
                                    f"+1 {ac} {ex} {ln}", digits, f"+1 ({ac}) {ex}-{ln}"))
        return self.rng.choice((f"+65 {a} {b}", f"+65-{a}-{b}", f"(65) {a} {b}", f"65 {digits}", f"+65{digits}",
                                f"{a} {b}", f"{a} {b}", f"{a}-{b}", digits, f"{digits[:3]} {digits[3:]}"))

    def address(self, us: bool) -> list[str]:
        """The stored address first, then partial renderings a note might use."""
        rng = self.rng
        if us:
            street = f"{rng.randint(100, 9999)} {rng.choice(self.streets['us_streets'])}"
            city = rng.choice(self.streets["us_cities"])
            return [f"{street}, Apt {rng.randint(1, 20)}{rng.choice('ABCD')}, {city}", street, city]
        postal = f"{rng.randint(1, 82):02d}{rng.randrange(10**4):04d}"
        street = f"{rng.randint(1, 999)} {rng.choice(self.streets['sg_streets'])}"
        if rng.random() < 0.2:  # private housing: no block, no unit
            return [f"{street} Singapore {postal}", street, f"Singapore {postal}", f"S({postal})"]
        unit = f"#{rng.randint(1, 25):02d}-{rng.randint(1, 400):02d}"
        return [f"Blk {street} {unit} Singapore {postal}", f"Blk {street}", f"Blk {street} {unit}",
                f"Singapore {postal}", f"S{postal}", unit]

    def patient(self, patient_id: int) -> Patient:
        rng = self.rng
        person = self.person()
        us = person.origin == "western" and rng.random() < 0.5
        old = rng.random() < 0.08  # born before 1932, so over 89 in some notes: the AGE category
        first, days = (dt.date(1921, 1, 1), 11 * 365) if old else (dt.date(1935, 1, 1), 70 * 365)
        dob = first + dt.timedelta(days=rng.randrange(days))
        foreign = us or rng.random() < 0.12
        prefix = ("F" if dob.year < 2000 else "G") if foreign else ("S" if dob.year < 2000 else "T")
        kinds = rng.sample(("spouse", "child", "child", "sibling", "other"), rng.randint(1, 3))
        relatives = [self.relative(person, kind) for kind in kinds]  # the first is the next of kin
        if us:
            phones = [rng.choice(US_AREA_CODES) + f"55501{rng.randrange(100):02d}" for _ in range(2)]
        else:
            phones = [self.sg_number("6"), self.sg_number(rng.choice("89"))]
        phones = [p if rng.random() < (0.7, 0.85)[i] else "" for i, p in enumerate(phones)]
        addr_forms = self.address(us) if rng.random() < 0.9 else []
        letters = "MRN" if rng.random() < 0.75 else rng.choice("ABHKN") + rng.choice("ACDXZ")
        mrn = f"{letters}{rng.randrange(10**7 if letters == 'MRN' else 10**6):0{7 if letters == 'MRN' else 6}d}"
        row = {
            "patient_id": patient_id,
            "given_name": person.given,
            "family_name": person.family,
            "next_of_kin": relatives[0][1].full if rng.random() < 0.85 else None,
            "nric": self.nric(prefix),
            "mrn": mrn if rng.random() < 0.95 else None,
            "phone": self.format_phone(phones[0]) if phones[0] else None,
            "mobile": self.format_phone(phones[1]) if phones[1] else None,
            "date_of_birth": dob if rng.random() < 0.98 else None,
            "address": addr_forms[0] if addr_forms else None,
        }
        ethnicity = {"chinese": "Chinese", "malay": "Malay", "indian": "Indian"}.get(
            person.origin, rng.choice(("Caucasian", "Eurasian", "Others")))
        email = None
        if rng.random() < 0.3:
            tokens = [re.sub(r"[^a-z]", "", t.lower()) for t in person.full.split() if t not in PATRONYMIC]
            local = rng.choice((".", "_", "")).join(tokens[:2]) + rng.choice(("", str(dob.year % 100), "88"))
            email = f"{local}@{rng.choice(EMAIL_DOMAINS)}"
        return Patient(row, person, ethnicity, relatives, [p for p in phones if p], addr_forms, email)

    # --- notes --------------------------------------------------------------------------------
    def note(self, pt: Patient) -> tuple[str, list[dict], set[str]]:
        rng = self.rng
        kind = rng.choices(list(NOTE_TYPES), weights=[w for w, _ in NOTE_TYPES.values()])[0]
        writer = NoteWriter(self, pt, dt.date(2015, 1, 1) + dt.timedelta(days=rng.randrange(9 * 365)))
        for name in NOTE_TYPES[kind][1]:
            writer.section(self.templates[name])
        case = rng.choices((str, same_length(str.lower), same_length(str.upper)), weights=(85, 10, 5))[0]
        return *writer.doc.finish(case), writer.doc.conventions


class NoteWriter:
    """Fills templates for one note; each `ph_<name>` method writes one {name} placeholder."""

    def __init__(self, gen: Generator, pt: Patient, date: dt.date) -> None:
        self.gen, self.rng, self.pt, self.date, self.doc = gen, gen.rng, pt, date, Doc()

    def section(self, section: Section) -> None:
        k = self.rng.randint(section.lo, min(section.hi, len(section.lines)))
        if k == 0:
            return
        if section.titles:
            self.render(self.rng.choice(section.titles) + "\n")
        for i in sorted(self.rng.sample(range(len(section.lines)), k)):
            self.render(section.lines[i] + "\n")
        self.doc.add(self.rng.choice(("\n", "")))

    def render(self, template: str) -> None:
        pos = 0
        for m in re.finditer(r"\{(\w+)\}", template):
            self.doc.add(template[pos : m.start()])
            if m.group(1) in FILLERS:
                self.doc.add(FILLERS[m.group(1)](self), LOOK_ALIKES.get(m.group(1), ""))
            else:
                getattr(self, "ph_" + m.group(1))()
            pos = m.end()
        self.doc.add(template[pos:])

    def name(self, person: Person, category: str, titles: tuple[str, ...], p_title: float,
             misspell: float = 0.0) -> None:
        """Plant a name in some form and case, maybe after a title (the title itself is not PHI)."""
        rng = self.rng
        text = rng.choice(person.forms())
        if rng.random() < misspell:
            text = self.misspell(text)
        style = rng.choices((str, str.upper, str.lower), weights=(70, 15, 15))[0]
        if titles and rng.random() < p_title:
            title = rng.choice(titles)
            self.doc.add(style(title) + ("" if title.endswith(".") and rng.random() < 0.3 else " "))
        self.doc.phi(style(text), category)

    def misspell(self, name: str) -> str:
        """One slip in one token, kept below seed 003's ratio: distance / min(len) < 0.33.

        Substitution and insertion cost 1 (tokens of 4+ letters), deletion 1 but shortens the token
        (5+), a transposition costs 2 in plain Levenshtein (7+).  The first letter is left alone.
        """
        rng = self.rng
        tokens = name.split(" ")
        eligible = [i for i, t in enumerate(tokens) if t.isalpha() and len(t) >= 4 and t.lower() not in PATRONYMIC]
        if not eligible:
            return name
        i = rng.choice(eligible)
        t = tokens[i]
        k = rng.randrange(1, len(t) - 1)
        letter = rng.choice([c for c in "aeiouhlnrst" if c != t[k].lower()])
        op = rng.choice(("sub", "ins") + ("del",) * (len(t) >= 5) + ("swap",) * (len(t) >= 7 and t[k] != t[k + 1]))
        tokens[i] = {"sub": t[:k] + letter + t[k + 1 :], "ins": t[:k] + letter + t[k:], "del": t[:k] + t[k + 1 :],
                     "swap": t[:k] + t[k + 1] + t[k] + t[k + 2 :]}[op]
        return " ".join(tokens)

    def relative_phrase(self, relation: str, person: Person) -> None:
        if self.rng.random() < 0.8:
            self.doc.add(relation + " ")
            self.name(person, "RELATIVE", HONORIFICS[person.sex], 0.2)
        else:
            self.name(person, "RELATIVE", HONORIFICS[person.sex], 0.2)
            self.doc.add(f" ({relation})")

    @property
    def age(self) -> int:
        dob = self.pt.row["date_of_birth"] or dt.date(1960, 6, 1)
        return self.date.year - dob.year - ((self.date.month, self.date.day) < (dob.month, dob.day))

    # --- PHI placeholders ---------------------------------------------------------------------
    def ph_pt(self) -> None:
        person = self.pt.person
        if person.family and person.family.split()[0] in CONNECTOR_FORMS and self.rng.random() < 0.3:
            return self.ph_ptconnector()
        self.name(person, "PATIENT", HONORIFICS[person.sex], 0.5, misspell=0.2)

    def ph_ptconnector(self) -> None:
        """The full name with the connector shortened or respelled: "Ali b. Hassan", "Siti bt Ahmad"."""
        person = self.pt.person
        if not (person.family and person.family.split()[0] in CONNECTOR_FORMS):
            return self.ph_pt()
        link, father = person.family.split(" ", 1)
        text = f"{person.given} {self.rng.choice(CONNECTOR_FORMS[link])} {father}"
        style = self.rng.choices((str, str.upper), weights=(75, 25))[0]
        if self.rng.random() < 0.4:
            self.doc.add(style(self.rng.choice(HONORIFICS[person.sex])) + " ")
        self.doc.phi(style(text), "PATIENT", "patient name with a shortened connector")

    def ph_nick(self) -> None:
        """What the patient is called: a diminutive of the record's first given name ("Bill" for William)."""
        given = self.pt.person.given.split()[0]
        options = self.gen.nicknames.get(given)
        if not options:
            return self.doc.phi(given, "PATIENT")
        text = self.rng.choice(options)
        self.doc.phi(text.upper() if self.rng.random() < 0.15 else text, "PATIENT", "patient nickname")

    def ph_ptname(self) -> None:
        self.name(self.pt.person, "PATIENT", (), 0.0, misspell=0.05)

    def ph_nok(self) -> None:
        self.relative_phrase(*self.pt.relatives[0])

    def ph_rel(self) -> None:
        self.relative_phrase(*self.rng.choice(self.pt.relatives))

    def ph_dr(self) -> None:
        rng, gen = self.rng, self.gen
        if rng.random() < 0.75:
            person, role = rng.choice(gen.doctors)
            titles = SENIOR_TITLES if "Consultant" in role else DOCTOR_TITLES
        else:  # doctors outside the hospital, absent from the staff table
            person, titles = rng.choice(gen.outside_doctors), DOCTOR_TITLES
        self.name(person, "DOCTOR", titles, 0.9)

    def ph_nurse(self) -> None:
        self.name(self.rng.choice(self.gen.nurses)[0], "DOCTOR", NURSE_TITLES, 0.7)

    def ph_other(self) -> None:
        person = self.gen.person()
        self.name(person, "NAME", HONORIFICS[person.sex], 0.4)

    def ph_nric(self) -> None:
        nric = self.pt.row["nric"]
        p, digits, c = nric[0], nric[1:8], nric[8]
        forms = (nric, nric, nric.lower(), f"{p} {digits} {c}".lower(), f"{p}-{digits}-{c}", f"{p} {digits} {c}",
                 f"{p}{digits} {c}")
        self.doc.phi(self.rng.choice(forms), "ID")

    def ph_mrn(self) -> None:
        mrn = self.pt.row["mrn"]
        if not mrn:
            return self.ph_nric()
        letters, digits = re.fullmatch(r"([A-Z]+)(\d+)", mrn).groups()  # type: ignore[union-attr]
        forms = (mrn, mrn, mrn.lower(), f"{letters} {digits}", f"{letters}-{digits}", digits)
        self.doc.phi(self.rng.choice(forms), "ID")

    def ph_id(self) -> None:
        self.rng.choice((self.ph_nric, self.ph_mrn))()

    def ph_phone(self) -> None:
        self.doc.phi(self.gen.format_phone(self.rng.choice(self.pt.phones or [self.gen.sg_number("9")])), "PHONE")

    def ph_relphone(self) -> None:
        self.doc.phi(self.gen.format_phone(self.gen.sg_number(self.rng.choice("89"))), "PHONE")

    def ph_hospphone(self) -> None:
        self.doc.phi(self.gen.format_phone(self.rng.choice(self.gen.hospital_phones)), "PHONE")

    def ph_date(self) -> None:
        day = self.date - dt.timedelta(days=self.rng.randint(-30, 90))
        # "3/12" or "2/7" would read as a duration even to a human annotator, so d/m skips those months
        styles = [s for s in DATE_STYLES if s != "d/m" or day.month not in (7, 12)]
        self.doc.phi(DATE_STYLES[self.rng.choice(styles)](day), "DATE")

    def ph_dob(self) -> None:
        dob = self.pt.row["date_of_birth"]
        if not dob:
            return self.ph_date()
        self.doc.phi(DATE_STYLES[self.rng.choice(DOB_STYLES)](dob), "DATE")

    def ph_hosp(self) -> None:
        self.doc.phi(self.rng.choice(self.gen.hospitals), "HOSPITAL")

    def ph_place(self) -> None:
        self.doc.phi(self.rng.choice(self.gen.places), "LOCATION")

    def ph_addr(self) -> None:
        if not self.pt.addr_forms:
            return self.ph_place()
        text = self.rng.choice(self.pt.addr_forms[:1] * 2 + self.pt.addr_forms[1:])
        convention = ""
        if text == self.pt.addr_forms[0] and self.rng.random() < 0.7:
            variant = self.abbreviate(text).replace(",", "")
            if variant != text:
                text, convention = variant, "patient address without commas or with the street type abbreviated"
        self.doc.phi(text.upper() if self.rng.random() < 0.15 else text, "LOCATION", convention)

    def abbreviate(self, text: str) -> str:
        """Shorten the street type words ("Avenue" to "Ave"), some or all of them."""
        for long, short in STREET_TYPES.items():
            if self.rng.random() < 0.8:
                text = re.sub(rf"\b{long}\b", short, text)
        return text

    def ph_otheraddr(self) -> None:
        """An address that is not the patient's: a full one with a lettered block, or a street alone."""
        rng = self.rng
        street = rng.choice(self.gen.streets["sg_streets"])
        if rng.random() < 0.6:
            block = f"{rng.randint(1, 999)}{rng.choice(('', '', 'A', 'B', 'C'))}"
            text = (f"Blk {block} {street} #{rng.randint(1, 25):02d}-{rng.randint(1, 400):02d} "
                    f"Singapore {rng.randint(1, 82):02d}{rng.randrange(10**4):04d}")
        else:
            text = street
        self.doc.phi(self.abbreviate(text) if rng.random() < 0.5 else text, "LOCATION", "address not the patient's")

    # --- PHI that is not in the record, and the record's values in looser forms ----------------
    def kin(self, sex: str) -> str:
        return self.rng.choice(KIN_WORDS[sex])

    def ph_relgiven(self) -> None:
        """A relative's given name written once, lower case or capitals, after a kinship word."""
        rng = self.rng
        relation, person = rng.choice(self.pt.relatives)
        given = person.given.split()[0]
        if person.origin == "chinese" and person.family_first or rng.random() < 0.5:
            given = rng.choice(self.gen.world["given_" + ("male" if person.sex == "M" else "female")])
        word = self.kin(person.sex) if rng.random() < 0.7 else relation
        style = rng.choice((str.lower, str.upper))
        self.doc.add(style(word) + " ")
        self.doc.phi(style(given), "RELATIVE", "relative's given name after a kinship word")

    def ph_relfull(self) -> None:
        """A relative's full name after a kinship word, not always the one in the record."""
        rng = self.rng
        sex = rng.choice("MF")
        given = rng.choice(self.gen.world["given_" + ("male" if sex == "M" else "female")])
        family = self.pt.person.family if self.pt.person.addressed == self.pt.person.family and rng.random() < 0.6 \
            else rng.choice(self.gen.world["surnames"])
        style = rng.choices((str, str.upper, str.lower), weights=(60, 25, 15))[0]
        self.doc.add(style(self.kin(sex)) + " ")
        self.doc.phi(style(f"{given} {family}"), "RELATIVE", "relative's full name after a kinship word")

    def ph_abroad(self) -> None:
        """A place off the hospital's lists: a city, a US state, a country, a town named by ordinary words."""
        rng, world = self.rng, self.gen.world
        kind = rng.choice(("world", "us", "state", "country", "word", "town"))
        if kind == "world":
            text = rng.choice(world["world_cities"])
        elif kind == "us":
            city = rng.choice(world["us_cities"])
            name, code = rng.choice(self.gen.states)
            text = rng.choice((city, f"{city}, {code}", f"{city} {name}"))
        elif kind == "state":
            text = rng.choice(self.gen.states)[0]
        elif kind == "country":
            text = rng.choice(world["countries"])
        elif kind == "word":
            text = rng.choice(world["word_towns"])
            text = text.lower() if rng.random() < 0.5 else text
        else:
            text = rng.choice(world["towns"])
        self.doc.phi(text, "LOCATION", "place off the lists")

    def ph_univ(self) -> None:
        name, code = self.rng.choice(self.gen.states)
        text = self.rng.choice((f"University of {name}", f"U of {code}", f"Univ of {name}", f"U of {name}"))
        self.doc.phi(text, "HOSPITAL", "university as a hospital")

    def ph_inst(self) -> None:
        """An institution named by its suffix, or a hospital abroad."""
        rng, world = self.rng, self.gen.world
        kind = rng.choice(("home", "poly", "group", "abroad"))
        if kind == "home":
            text = f"{rng.choice(world['institution_names'])} Nursing Home"
        elif kind == "poly":
            town = rng.choice(self.gen.places[:24])  # the Singapore towns
            text = f"{town} {rng.choice(('poly', 'poly', 'Polyclinic', 'PC'))}"
        elif kind == "group":
            name = rng.choice(world["institution_names"] + world["surnames"][:15])
            text = f"{name} {rng.choice(('Medical Group', 'Clinic', 'Medical Centre', 'Family Clinic'))}"
        else:
            text = rng.choice(world["hospitals_abroad"])
        self.doc.phi(text, "HOSPITAL", "institution by suffix or abroad")

    def ph_usphone(self) -> None:
        rng = self.rng
        ac, ln = rng.choice(US_AREA_CODES), f"01{rng.randrange(100):02d}"
        text = rng.choice((f"{ac}/555-{ln}", f"({ac})555-{ln}", f"{ac} 555 {ln}", f"{ac}-555-{ln} x{rng.randint(100, 9999)}",
                           f"({ac}) 555-{ln} ext {rng.randint(10, 999)}", f"{ac}/555 {ln}"))
        self.doc.phi(text, "PHONE", "US phone: slash, parenthesis, space, extension")

    def ph_fmobile(self) -> None:
        """A foreign mobile written without its country code (PH, JP, AU, MY, UK)."""
        rng = self.rng
        d = lambda n: f"{rng.randrange(10**n):0{n}d}"  # noqa: E731
        text = rng.choice((f"09{rng.randint(10, 99)} 555 {d(4)}", f"0{rng.choice('789')}0-5555-{d(4)}",
                           f"04{d(2)} 555 {d(3)}", f"01{rng.randint(2, 9)}-555 {d(4)}", f"07700 900{d(3)}"))
        self.doc.phi(text, "PHONE", "foreign mobile without country code")

    def extra_date(self, style: str) -> None:
        day = self.date - dt.timedelta(days=self.rng.randint(-30, 120))
        if style in ("m/d", "d.m"):  # "3/12" or "2/7" would read as a duration: move off such days
            while (day.day if style == "m/d" else day.month) in (7, 12) or (style == "d.m" and day.day in (7, 12)):
                day += dt.timedelta(days=1)
        if style == "iso-ts":
            clock = f"{self.rng.randrange(24):02d}:{self.rng.randrange(60):02d}"
            text = self.rng.choice((f"{day.isoformat()}T{clock}:{self.rng.randrange(60):02d}", f"{day.isoformat()} {clock}",
                                    f"{day.isoformat()}T{clock}:00Z"))
        else:
            text = EXTRA_DATE_STYLES[style](day)
        self.doc.phi(text, "DATE", f"date {style}")

    def ph_mdnoyear(self) -> None:
        self.extra_date("m/d")

    def ph_ddot(self) -> None:
        self.extra_date("d.m")

    def ph_monthyear(self) -> None:
        self.extra_date("mm.yyyy")

    def ph_dcompact(self) -> None:
        self.extra_date("yyyymmdd")

    def ph_ddash(self) -> None:
        self.extra_date(self.rng.choice(("d-m-yyyy", "d-m-yy")))

    def ph_timestamp(self) -> None:
        self.extra_date("iso-ts")

    def ph_mcr(self) -> None:
        """A doctor's Medical Council registration number, after its label."""
        self.doc.add(self.rng.choice(("MCR ", "MCR no. ", "MCR: ")))
        self.doc.phi(f"M{self.rng.randrange(10**5):05d}{self.rng.choice('ABCDEFGHJKXZ')}", "ID", "MCR number")

    def ph_labno(self) -> None:
        rng = self.rng
        text = rng.choice((f"{rng.randint(14, 24)}-{rng.randrange(10**7):07d}",
                           f"{rng.choice('HSC')}{rng.randint(14, 24)}-{rng.randrange(10**5):05d}",
                           f"{rng.randint(2014, 2024)}/{rng.randrange(10**6):06d}"))
        self.doc.phi(text, "ID", "lab, case or specimen number")

    def ph_othermrn(self) -> None:
        """Another hospital's record number in a labelled sentence ("MRN is 40021987")."""
        self.doc.add(self.rng.choice(("MRN is ", "MRN there is ", "hosp no. ", "case no: ")))
        self.doc.phi(f"{self.rng.randrange(10**7, 10**8)}", "ID", "labelled number not the patient's")

    def ph_ssn(self) -> None:
        rng = self.rng
        area = rng.choice([a for a in range(1, 900) if a != 666][:: 7])
        a, b, c = f"{area:03d}", f"{rng.randint(1, 99):02d}", f"{rng.randint(1, 9999):04d}"
        self.doc.phi(rng.choice((f"{a} {b} {c}", f"{a}.{b}.{c}", f"{a}-{b}-{c}")), "ID", "SSN")

    def ph_card(self) -> None:
        """A payment card (valid Luhn digit) or a bank account number."""
        rng = self.rng
        if rng.random() < 0.5:
            digits = [4] + [rng.randrange(10) for _ in range(14)]
            total = sum(d if i % 2 else sum(divmod(d * 2, 10)) for i, d in enumerate(reversed(digits)))
            number = "".join(map(str, digits + [(10 - total % 10) % 10]))
            groups = [number[i : i + 4] for i in range(0, 16, 4)]
            text = rng.choice((" ".join(groups), number, "-".join(groups)))
        else:
            text = f"{rng.randrange(1000):03d}-{rng.randrange(10**6):06d}-{rng.randrange(10)}"
        self.doc.phi(text, "ID", "card or account number")

    def ph_net(self) -> None:
        """A network address from the documentation ranges: IPv4 with prefix length, IPv6, MAC."""
        rng = self.rng
        kind = rng.choice(("v4", "v6", "mac"))
        if kind == "v4":
            text = f"{rng.choice(('192.0.2', '198.51.100', '203.0.113'))}.{rng.randrange(256)}/{rng.choice((24, 28, 32))}"
        elif kind == "v6":
            text = f"2001:db8:{rng.randrange(16**4):x}::{rng.randrange(16**4):x}"
        else:
            text = ":".join(["02"] + [f"{rng.randrange(256):02X}" for _ in range(5)])
        self.doc.phi(text, "ID", "IP with prefix, IPv6 or MAC")

    def ph_domain(self) -> None:
        text = self.rng.choice(("example.org", "careplan.example.com", "portal.example.net", "myhealth.example.com.sg"))
        self.doc.phi(text, "URL", "bare domain")

    def ph_sig(self) -> None:
        """A staff signature as written by hand: "Dr Lee/reg/ENT", "LIM KH (MO)", "Priya (resp MO)", "DrLim"."""
        rng = self.rng
        person, _ = rng.choice(self.gen.doctors)
        surname, given = person.addressed, person.given if person.family_first else person.given.split()[0]
        initials = "".join(t[0] for t in person.given.replace("-", " ").split()).upper()
        kind = rng.choice(("slash", "caps", "given", "glued"))
        if kind == "slash":
            self.doc.add(rng.choice(("Dr ", "dr ", "Dr. ")))
            self.doc.phi(surname, "DOCTOR", "staff signature")
            self.doc.add(f"/{rng.choice(STAFF_ROLES)}/{rng.choice(DEPARTMENTS)}")
        elif kind == "caps" and surname == person.family:
            self.doc.phi(f"{surname.upper()} {initials}", "DOCTOR", "staff signature")
            self.doc.add(f" ({rng.choice(STAFF_ROLES)})")
        elif kind == "glued":
            self.doc.add(rng.choice(("Dr", "dr", "DR")))
            self.doc.phi(surname, "DOCTOR", "staff signature")
        else:
            self.doc.phi(given, "DOCTOR", "staff signature")
            self.doc.add(f" ({rng.choice(('resp', 'gen med', 'ortho', 'onco', 'surg'))} {rng.choice(STAFF_ROLES)})")

    def ph_oldage(self) -> None:
        """An elderly relative's age, over 89: "mother (94)"."""
        self.doc.phi(str(self.rng.randint(90, 104)), "AGE", "age over 89 in compact form")

    def ph_agesx(self) -> None:
        """The patient's age and sex run together: "93M" is PHI, "61/F" or "61F" is not."""
        sx = self.pt.person.sex
        if self.age > 89:
            self.doc.phi(str(self.age), "AGE", "age over 89 in compact form")
            self.doc.add(sx)
        else:
            self.doc.add(f"{self.age}{self.rng.choice(('/', ''))}{sx}", "look-alike: age 89 or under")

    def ph_email(self) -> None:
        if self.pt.email and self.rng.random() < 0.7:
            self.doc.phi(self.pt.email, "EMAIL")
        else:  # the writing doctor's address
            doctor = self.rng.choice(self.gen.doctors)[0]
            local = re.sub(r"[^a-z]", "", doctor.addressed.lower()) + "_" + doctor.given[0].lower()
            self.doc.phi(f"{local}@{self.rng.choice(EMAIL_DOMAINS)}", "EMAIL")

    def ph_url(self) -> None:
        n = self.rng.randrange(10**5, 10**6)
        forms = (f"https://www.example.org/patients/{n}", f"http://portal.example.com/appt?id={n}",
                 f"www.example.net/careplan/{n}")
        self.doc.phi(self.rng.choice(forms), "URL")

    def ph_age(self) -> None:
        if self.age > 89:  # HIPAA: only ages over 89 are identifying
            self.doc.phi(str(self.age), "AGE")
        else:
            self.doc.add(str(self.age))


# Placeholders that are not PHI, several of them the look-alikes seed 003 warns about: durations
# "2/7" (days), "3/52" (weeks), "1/12" (months), times "1500H", blood pressure "120/70".
FILLERS: dict[str, Callable[[NoteWriter], str]] = {
    "eth": lambda w: w.pt.ethnicity,
    "sx": lambda w: w.pt.person.sex,
    "sex": lambda w: w.rng.choice({"M": ("male", "gentleman", "M"), "F": ("female", "lady", "F")}[w.pt.person.sex]),
    "dur": lambda w: f"{w.rng.randint(1, 6)}/{w.rng.choice(('7', '52', '12'))}",
    "time": lambda w: f"{w.rng.randrange(24):02d}{w.rng.choice(('00', '15', '30', '45'))}"
                      f"{w.rng.choice(('H', 'h', 'hrs', ' hrs'))}",
    "bp": lambda w: f"{w.rng.randint(95, 180)}/{w.rng.randint(55, 100)}",
    "hr": lambda w: str(w.rng.randint(55, 120)),
    "vent": lambda w: w.rng.choice((f"PS {w.rng.choice((8, 10, 12, 15))}/{w.rng.choice((5, 6, 8))}",
                                    f"flowby {w.rng.randint(2, 8)}/{w.rng.randint(2, 4)}",
                                    f"IPAP/EPAP {w.rng.randint(10, 18)}/{w.rng.randint(4, 8)}")),
    "dose": lambda w: w.rng.choice(("fluticasone/salmeterol 25/250", "seretide 25/125", "symbicort 160/4.5",
                                    "co-amoxiclav 875/125", "sinemet 25/100", "augmentin 500/125")),
    "clock": lambda w: f"{w.rng.randrange(24):02d}{w.rng.choice(('00', '10', '20', '30', '45'))}",
    "eponym": lambda w: w.rng.choice(("Parkinson's disease", "Bell's palsy", "Alzheimer's dementia", "Graves' disease",
                                      "Crohn's disease", "Cushing's syndrome", "Hashimoto's thyroiditis",
                                      "Down syndrome", "Raynaud's", "Parkinson's")),
    "namelike": lambda w: w.rng.choice((f"BP rose to {w.rng.randint(160, 200)}/{w.rng.randint(90, 110)}",
                                        "hope for d/c tmr if afebrile", "tan-coloured sputum", "will review in am",
                                        "rose from chair unaided", "may need OT input", "grace period for appt",
                                        "mark on L shin, ?bruise", "sterling effort by pt with physio")),
}
# Which fillers are the non-PHI look-alikes a detector must leave alone, counted per note
LOOK_ALIKES = {"dur": "look-alike: duration", "vent": "look-alike: ventilator or pressure setting",
               "dose": "look-alike: dose or ratio", "clock": "look-alike: 4-digit clock time",
               "eponym": "look-alike: eponym", "namelike": "look-alike: name word in non-name use"}


# Chosen once from the clock (`date +%s`) when the note conventions were last extended; never tuned on.
SEED = 1795617074


def generate(out: Path, patients: int = 200, seed: int = SEED) -> tuple[Counter, Counter]:
    """Write hospital.db, lists/ and gold.jsonl under `out`.

    Returns the gold span counts per category and, per writing convention, the number of notes using it.
    """
    gen = Generator(seed)
    people = [gen.patient(i) for i in range(1, patients + 1)]
    # 1 to 25 notes a patient, about 10 on average
    notes = [(pt.row["patient_id"], *gen.note(pt)) for pt in people
             for _ in range(min(25, max(1, round(gen.rng.gammavariate(2.5, 4)))))]
    gen.rng.shuffle(notes)  # note_id order is unrelated to the patient, as in a real notes table

    out.mkdir(parents=True, exist_ok=True)
    (out / "hospital.db").unlink(missing_ok=True)
    meta = sa.MetaData()
    patients_t = sa.Table("patients", meta, sa.Column("patient_id", sa.Integer, primary_key=True),
                          *(sa.Column(c, sa.Text) for c in ("given_name", "family_name", "next_of_kin", "nric",
                                                            "mrn", "phone", "mobile")),
                          sa.Column("date_of_birth", sa.Date), sa.Column("address", sa.Text))
    notes_t = sa.Table("notes", meta, sa.Column("note_id", sa.Integer, primary_key=True),
                       sa.Column("patient_id", sa.Integer), sa.Column("body", sa.Text))
    staff_t = sa.Table("staff", meta, sa.Column("staff_id", sa.Integer, primary_key=True),
                       sa.Column("full_name", sa.Text), sa.Column("role", sa.Text))
    engine = sa.create_engine(f"sqlite:///{out / 'hospital.db'}")
    meta.create_all(engine)
    with engine.begin() as conn:
        conn.execute(patients_t.insert(), [pt.row for pt in people])
        conn.execute(notes_t.insert(), [{"note_id": i, "patient_id": pid, "body": body}
                                        for i, (pid, body, _, _) in enumerate(notes, 1)])
        conn.execute(staff_t.insert(), [{"staff_id": i, "full_name": p.full, "role": role}
                                        for i, (p, role) in enumerate(gen.doctors + gen.nurses, 1)])
    engine.dispose()

    (out / "lists").mkdir(exist_ok=True)
    (out / "lists" / "hospitals.txt").write_text("\n".join(gen.known_hospitals) + "\n", encoding="utf-8")
    (out / "lists" / "places.txt").write_text("\n".join(gen.known_places) + "\n", encoding="utf-8")
    counts: Counter = Counter()
    with (out / "gold.jsonl").open("w", encoding="utf-8") as gold:
        for i, (pid, _, spans, _) in enumerate(notes, 1):
            gold.write(json.dumps({"note_id": i, "patient_id": pid, "spans": spans}) + "\n")
            counts.update(s["category"] for s in spans)
    return counts, Counter(c for *_, conventions in notes for c in conventions)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=HERE, help="output directory (default: sample_db/)")
    parser.add_argument("--patients", type=int, default=200)
    parser.add_argument("--seed", type=int, default=SEED)
    args = parser.parse_args()
    counts, conventions = generate(args.out, args.patients, args.seed)
    print(f"wrote {args.out}: {sum(counts.values())} gold spans", dict(sorted(counts.items())))
    print("notes per convention:")
    for name, n in sorted(conventions.items()):
        print(f"  {n:5d}  {name}")


if __name__ == "__main__":
    main()
