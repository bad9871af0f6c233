#!/usr/bin/env python3
"""Generate the synthetic hospital database that demos, tests and benchmarks run on.

Everything comes from the small lists in sample_db/data/ and one seeded random.Random, so a seed
always yields the same database, lists and gold annotations; only the standard library and
SQLAlchemy are needed.  Every PHI string is planted through `Doc.phi`, which records its offsets as
the text is written, so gold.jsonl cannot drift from the notes.

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


class Doc:
    """A note under construction and the PHI planted in it, with offsets taken as text is appended."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.length = 0
        self.planted: list[tuple[int, int, str, str]] = []

    def add(self, text: str) -> None:
        self.parts.append(text)
        self.length += len(text)

    def phi(self, text: str, category: str) -> None:
        self.planted.append((self.length, self.length + len(text), category, text))
        self.add(text)

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
        old = rng.random() < 0.06  # born before 1932, so over 89 in some notes: the AGE category
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
    def note(self, pt: Patient) -> tuple[str, list[dict]]:
        rng = self.rng
        kind = rng.choices(list(NOTE_TYPES), weights=[w for w, _ in NOTE_TYPES.values()])[0]
        writer = NoteWriter(self, pt, dt.date(2015, 1, 1) + dt.timedelta(days=rng.randrange(9 * 365)))
        for name in NOTE_TYPES[kind][1]:
            writer.section(self.templates[name])
        case = rng.choices((str, str.lower, str.upper), weights=(85, 10, 5))[0]
        return writer.doc.finish(case)


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
                self.doc.add(FILLERS[m.group(1)](self))
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
        self.name(self.pt.person, "PATIENT", HONORIFICS[self.pt.person.sex], 0.5, misspell=0.2)

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
        self.doc.phi(text.upper() if self.rng.random() < 0.15 else text, "LOCATION")

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
}


def generate(out: Path, patients: int = 200, seed: int = 2016) -> Counter:
    """Write hospital.db, lists/ and gold.jsonl under `out`; return the gold span counts per category."""
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
                                        for i, (pid, body, _) in enumerate(notes, 1)])
        conn.execute(staff_t.insert(), [{"staff_id": i, "full_name": p.full, "role": role}
                                        for i, (p, role) in enumerate(gen.doctors + gen.nurses, 1)])
    engine.dispose()

    (out / "lists").mkdir(exist_ok=True)
    (out / "lists" / "hospitals.txt").write_text("\n".join(gen.known_hospitals) + "\n", encoding="utf-8")
    (out / "lists" / "places.txt").write_text("\n".join(gen.known_places) + "\n", encoding="utf-8")
    counts: Counter = Counter()
    with (out / "gold.jsonl").open("w", encoding="utf-8") as gold:
        for i, (pid, _, spans) in enumerate(notes, 1):
            gold.write(json.dumps({"note_id": i, "patient_id": pid, "spans": spans}) + "\n")
            counts.update(s["category"] for s in spans)
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=HERE, help="output directory (default: sample_db/)")
    parser.add_argument("--patients", type=int, default=200)
    parser.add_argument("--seed", type=int, default=2016)
    args = parser.parse_args()
    counts = generate(args.out, args.patients, args.seed)
    print(f"wrote {args.out}: {sum(counts.values())} gold spans", dict(sorted(counts.items())))


if __name__ == "__main__":
    main()
