"""The record's own identifiers, phones, dates and addresses, in whatever form a note writes them.

Generic patterns find things that look like an ID or a date; this detector finds the patient's
actual values even when they are written differently from the database ("s 1234567 d",
"+65 9123-4567", "12th March 85", "Ang Mo Kio Ave 3").  Everything it derives from a record is
compiled once per patient through :class:`per_record`.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Iterable

import re

import regex
from dateutil import parser as dateutil_parser

from anonymizer.record import PatientRecord, per_record
from anonymizer.spans import Span

MIN_IDENTIFIER = 4  # shorter "identifiers" would match ordinary words ("ng", "pt")
MIN_ID_DIGITS = 6  # an identifier's digits alone count when they are at least this long
MIN_PHONE_DIGITS = 7  # the shortest tail of a number that still identifies it

NOT_ALNUM_BEFORE = r"(?<![^\W_])"
NOT_ALNUM_AFTER = r"(?![^\W_])"
PHONE_GAP = r"[\s.\-()]*"  # "9123 4567", "9123-4567", "(65) 9123.4567"
COUNTRY_CODE = rf"\d{{1,3}}\)?{PHONE_GAP}"  # "65 ", "65-", "65) "

# Every order dateutil can read a numeric date in: D/M/Y, M/D/Y, Y/M/D and Y/D/M.
PARSE_ORDERS = ((True, False), (False, False), (False, True), (True, True))  # (dayfirst, yearfirst)
# Parsing with two defaults that differ in every field shows which fields the text itself gave.
PARSE_DEFAULTS = (dt.datetime(1904, 1, 1), dt.datetime(1908, 2, 2))
DAY_NUMBER = regex.compile(r"(?<!\d)\d{1,2}(?!\d)")
THREE_DIGITS = regex.compile(r"\d{3}")
NOT_WORD = regex.compile(r"[\W_]+")

# Words removed from an address to leave its street and place names: "Blk 123 Ang Mo Kio Avenue 3
# #05-12 Singapore 560123" leaves "Ang Mo Kio".  In a note, a street word may follow the name
# ("Downing St") or, in Malay street names, come before it ("Jalan Kayu").
STREET_AFTER = frozenset(
    "avenue ave boulevard blvd circle close crescent cres court ct drive dr grove highway hwy lane ln "
    "link place pl rise road rd square sq street st terrace walk way".split()
)
STREET_BEFORE = frozenset("jalan jln lorong lor".split())
ADDRESS_WORDS = STREET_AFTER | STREET_BEFORE | frozenset(
    "apartment apt blk block flat floor level singapore unit uk usa".split()
)


def _any_word(words: frozenset[str]) -> str:
    """A pattern for any of `words` as a whole word, abbreviated or not ("St", "St.")."""
    return rf"(?:{'|'.join(sorted(words, key=len, reverse=True))})\.?(?!\w)"


STREET_NUMBER = r"(?:\s+\d+[a-z]?(?!\w))?"  # "Avenue 3", "Street 81"
SUFFIX = rf"\s+{_any_word(STREET_AFTER)}{STREET_NUMBER}"
PREFIX = rf"{_any_word(STREET_BEFORE)}\s+"
POSTAL_CODE = regex.compile(r"(?<!\d)\d{5,6}(?!\d)")  # Singapore 560123, US ZIP 02139
UNIT = regex.compile(r"#\s*(\d+)\s*-\s*(\d+)")  # "#05-12"
ADDRESS_PART = regex.compile(r"[^,;\n]+")
HAS_NUMBER = regex.compile(r"[\d#]")
EDGE_PUNCTUATION = regex.compile(r"^[\W_]+|[\W_]+$")
MIN_PLACE = 3  # a lone word shorter than this ("Mo") is not worth matching


@dataclass(frozen=True, slots=True)
class _Index:
    """What one record turns into: a compiled pattern per rule, and its dates as numbers."""

    patterns: tuple[tuple[str, str, re.Pattern[str]], ...]  # (rule, category, pattern)
    dates: frozenset[tuple[int, int, int]]  # (year, month, day)
    days: frozenset[int]  # a date candidate that mentions none of these cannot match


class RecordValues:
    """Flags the record's identifiers, phone numbers, dates and addresses in any rendering."""

    def __init__(self, date_pattern: regex.Pattern[str]) -> None:
        self.name = "record"
        self._date_pattern = date_pattern
        self._index = per_record(_build_index)

    def __call__(self, text: str, record: PatientRecord) -> list[Span]:
        index = self._index(record)
        spans = [
            Span(m.start(), m.end(), category, self.name, rule)
            for rule, category, pattern in index.patterns
            for m in pattern.finditer(text)
        ]
        if index.dates:
            for match in self._date_pattern.finditer(text):
                if match.end() > match.start() and _is_record_date(match.group(), index):
                    spans.append(Span(match.start(), match.end(), "DATE", self.name, "date"))
        return spans


def _build_index(record: PatientRecord) -> _Index:
    dates = frozenset((d.year, d.month, d.day) for d in record.dates)
    patterns = []
    for rule, category, alternatives in (
        ("identifier", "ID", [p for value in record.identifiers for form in _identifier_forms(value) if (p := _identifier(form))]),
        ("phone", "PHONE", [p for value in record.phones if (p := _phone(value))]),
        ("date", "DATE", [p for date in dates for p in _compact_dates(*date)]),
        ("address", "LOCATION", [p for value in record.addresses for p in _address(value)]),
    ):
        if alternatives:
            ordered = sorted(set(alternatives), key=len, reverse=True)  # longer renderings first
            # Compiled per patient: the standard library compiles these several times faster than `regex`.
            patterns.append((rule, category, re.compile(f"(?i)(?:{'|'.join(ordered)})")))
    return _Index(tuple(patterns), dates, frozenset(day for _, _, day in dates))


def _identifier_forms(value: str) -> list[str]:
    """The identifier, and its digits alone when they are long enough to identify on their own:
    notes often drop a prefix ("(7569215)" for MRN7569215)."""
    digits = max(regex.findall(r"\d+", value), key=len, default="")
    return [value, digits] if len(digits) >= MIN_ID_DIGITS and digits != value else [value]


def _identifier(value: str) -> str | None:
    """"S1234567D" as a pattern that also matches "s 1234567 d" and "S-1234567-D"."""
    chars = [c for c in value if not c.isspace() and c != "-"]
    if len(chars) < MIN_IDENTIFIER:
        return None
    return NOT_ALNUM_BEFORE + r"[\s\-]*".join(regex.escape(c) for c in chars) + NOT_ALNUM_AFTER


def _phone(value: str) -> str | None:
    """The number with any grouping: whole (maybe with a country code added), or a tail of it.

    A tail of at least MIN_PHONE_DIGITS digits, maybe after a trunk "0", covers a note that leaves
    out the record's country code ("9123 4567" or "020 7946 0958" for "+44 20 7946 0958"); a
    country code in front of the whole number covers a note that adds one.
    """
    digits = regex.sub(r"[^0-9]", "", value)
    if len(digits) < MIN_PHONE_DIGITS:
        return None
    whole = PHONE_GAP.join(digits)
    tail_start = len(digits) - MIN_PHONE_DIGITS
    # "(?:(?:6 5)? 9)? 1234567": each optional leading digit needs all the ones after it.
    head = ""
    for digit in digits[:tail_start]:
        head = f"(?:{head}{digit}{PHONE_GAP})?"
    tail = PHONE_GAP.join(digits[tail_start:])
    return rf"{NOT_ALNUM_BEFORE}[+(]{{0,2}}(?:{COUNTRY_CODE}{whole}|(?:0{PHONE_GAP})?{head}{tail}){NOT_ALNUM_AFTER}"


def _compact_dates(year: int, month: int, day: int) -> list[str]:
    """Dates written as one digit run (19850312, 12031985, 120385): no date regex reads these."""
    y, yy, mm, dd = f"{year:04d}", f"{year % 100:02d}", f"{month:02d}", f"{day:02d}"
    renderings = (y + mm + dd, dd + mm + y, mm + dd + y, dd + mm + yy, mm + dd + yy, yy + mm + dd)
    return [rf"(?<!\d){r}(?!\d)" for r in renderings]


def _is_record_date(candidate: str, index: _Index) -> bool:
    """Whether any reading of the candidate gives the day and month (and year, if written) of a
    record date.  Two-digit years are compared modulo 100, as dateutil may put them in either century.
    """
    if not index.days.intersection(int(n) for n in DAY_NUMBER.findall(candidate)):
        return False
    text = NOT_WORD.sub(" ", candidate).strip()
    two_digit_year = THREE_DIGITS.search(text) is None
    for year, month, day in _readings(text):
        if day is None or month is None:
            continue
        for record_year, record_month, record_day in index.dates:
            if (month, day) != (record_month, record_day):
                continue
            if year is None or year == record_year or (two_digit_year and year % 100 == record_year % 100):
                return True
    return False


def _readings(text: str) -> set[tuple[int | None, int | None, int | None]]:
    """Every (year, month, day) dateutil reads in `text`, None for a part the text leaves out."""
    readings = set()
    for dayfirst, yearfirst in PARSE_ORDERS:
        try:
            first, second = (
                dateutil_parser.parse(text, dayfirst=dayfirst, yearfirst=yearfirst, default=default)
                for default in PARSE_DEFAULTS
            )
        except (ValueError, OverflowError):
            continue
        year, month, day = (
            getattr(first, part) if getattr(first, part) == getattr(second, part) else None
            for part in ("year", "month", "day")
        )
        readings.add((year, month, day))
    return readings


def _address(value: str) -> list[str]:
    """Patterns for an address's street and place names, postal code and unit number."""
    patterns = [rf"(?<!\d){code}(?!\d)" for code in POSTAL_CODE.findall(value)]
    patterns += [rf"\#\s*{floor}\s*-\s*{unit}(?!\d)" for floor, unit in UNIT.findall(value)]
    for phrase in _place_names(value):
        name = r"\s+".join(regex.escape(word) for word in phrase) + r"(?!\w)"
        if len(phrase) > 1:
            patterns.append(rf"(?<!\w)(?:{PREFIX})?{name}(?:{SUFFIX})?")
        elif len(phrase[0]) >= MIN_PLACE:
            # One word ("Tampines", "Downing") is too often an ordinary word on its own: only
            # next to a street word ("Tampines St 81", "Jalan Kayu") is it this address.
            patterns.append(rf"(?<!\w)(?:{PREFIX}{name}|{name}{SUFFIX})")
    return patterns


def _place_names(address: str) -> Iterable[list[str]]:
    """Runs of words left when numbers, unit numbers and generic address words are taken out."""
    for part in ADDRESS_PART.findall(address):
        run: list[str] = []
        for word in part.split():
            word = EDGE_PUNCTUATION.sub("", word)
            if not word or word.casefold() in ADDRESS_WORDS or HAS_NUMBER.search(word):
                if run:
                    yield run
                run = []
            else:
                run.append(word)
        if run:
            yield run
