"""Surrogates: consistent, realistic replacements instead of tags ("hidden in plain sight").

Everything is derived from one key per patient, HMAC-SHA256(secret, patient id), where the secret
comes from an environment variable (``ANONYMIZER_SECRET``).  The same secret gives the same
surrogates in every note of a patient and in every later run; another secret gives others, and
without the secret the mapping cannot be recomputed (nor reversed by trying names).

* Names (PATIENT, RELATIVE, DOCTOR, NAME): word by word.  Each distinct name token of the record
  (names and relatives) maps to one fake token of the same origin (Chinese, Malay, Indian,
  Western: looked up in ``rules/surrogates/names.txt``) and kind (given or family); a misspelled
  word maps to the record token it matches by the names detector's edit-distance ratio, so
  "antonete" and "ANTONETTE" become "jocelyn" and "JOCELYN".  Case, initials, connectors
  ("bin", "s/o") and punctuation are kept.  Words not in the record (doctors, other people) get a
  fake chosen from the word itself and the patient key: consistent per patient.
* Dates: moved back by a per-patient offset (``date_shift_min``..``date_shift_max`` days), so the
  intervals between a patient's dates are kept, and re-rendered in their own format: delimiters,
  order, zero padding, ordinal suffixes, month names (case and abbreviation), weekdays, two- or
  four-digit years.  Day/month dates take their year from the nearest full date of the note;
  month/year dates and months alone move by the offset in whole months, years alone by it in
  whole years (or are kept: ``years = "keep"``).
* Ages over 89: "90+".  Identifiers, phones: same shape, new digits (an NRIC/FIN gets a valid check
  letter; a phone keeps its country code, grouping and leading digit).  E-mail, URLs: same shape
  on example domains.  Hospitals, places, streets: entries of the shipped lists, per patient.

A surrogate never equals the original, and is checked against the patient's whole record with the
very detectors ``audit leaks`` runs (a candidate they would flag is replaced by the next one).  It
is not checked against other patients' records, which the pipeline never sees together: a
surrogate token may happen to be another patient's real name (a common surname is bound to be).
"""

from __future__ import annotations

import calendar
import datetime as dt
import hashlib
import hmac
import os
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Sequence

import regex
from rapidfuzz.distance import Levenshtein

from anonymizer.config import ConfigError, ReplaceConfig
from anonymizer.detectors.names import SHORT, RecordNames
from anonymizer.detectors.values import ADDRESS_WORDS, STREET_AFTER, STREET_BEFORE, RecordValues
from anonymizer.record import PatientRecord, per_record
from anonymizer.resources import read_word_list
from anonymizer.spans import MergedSpan

NAME_CATEGORIES = frozenset({"PATIENT", "RELATIVE", "DOCTOR", "NAME"})
MAX_ATTEMPTS = 12  # candidates tried before a span falls back to its tag
LEAK_ROUNDS = 6  # rounds of leak checks over a note before flagged replacements fall back to tags
WINDOW = 40  # characters around a replacement that the leak check reads (the longest record pattern is shorter)
SEPARATOR = " | "  # between windows: no name, phone, identifier, date or address pattern runs across it
DAYS_PER_MONTH = 365.2425 / 12

WORD = regex.compile(r"[^\W\d_]+")  # as the names detector splits words
TOKEN = regex.compile(r"\d+|[^\W\d_]+|[\W_]+")
MONTH_WORD = regex.compile(
    r"(?i)jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sep(?:t(?:ember)?)?"
    r"|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?"
)
WEEKDAY_WORD = regex.compile(
    r"(?i)mon(?:day)?|tue(?:s(?:day)?)?|wed(?:nesday)?|thu(?:r(?:s(?:day)?)?)?|fri(?:day)?|sat(?:urday)?|sun(?:day)?"
)
MONTHS = tuple(calendar.month_name)[1:]
WEEKDAYS = tuple(calendar.day_name)
ORDINALS = frozenset({"st", "nd", "rd", "th"})
DATE_RULE = regex.compile(r"regex:date_(dmy|mdy|ymd|ydm|dm|md|ym|my)_")
# A location's words that are not names of a place: kept as they are ("Blk", "Avenue", "Singapore").
KEEP_PLACE_WORDS = ADDRESS_WORDS | {"jln", "lor", "apt", "no", "nos", "rm", "room", "ward", "bed"}
# A country code written as one: "+65", "0065", "(65)"; known codes first, so "+6591234567" keeps "+65".
COUNTRY_CODES = "65|60|62|63|66|84|86|852|853|886|91|92|94|880|81|82|61|64|44|353|49|33|31|41|971|966|1|7"
PHONE_PREFIX = regex.compile(rf"^\s*(?:(?:\+|00)[ \t]?(?:{COUNTRY_CODES}|\d{{1,3}})|\(\+?(?:{COUNTRY_CODES}|\d{{1,3}})\))")
IP_ADDRESS = regex.compile(r"\d{1,3}(?:\.\d{1,3}){3}")
URL_HOST = regex.compile(r"(?i)^((?:https?|ftp)://)?(www\.)?([^/\s?#]+)(.*)$", regex.DOTALL)
SECOND_LEVEL = frozenset({"com", "co", "org", "net", "edu", "gov", "ac", "gob", "or", "ne"})

_NRIC_WEIGHTS = (2, 7, 6, 5, 4, 3, 2)
_NRIC_LETTERS = {"S": (0, "JZIHGFEDCBA"), "T": (4, "JZIHGFEDCBA"), "F": (0, "XWUTRQPNMLK"), "G": (4, "XWUTRQPNMLK")}
NRIC = regex.compile(r"[STFGM]\d{7}[A-Z]")


def nric_check_letter(prefix: str, digits: str) -> str:
    """The check letter of a Singapore NRIC/FIN (S, T, F, G and M series) for its seven digits."""
    weighted = sum(w * int(d) for w, d in zip(_NRIC_WEIGHTS, digits))
    prefix = prefix.upper()
    if prefix == "M":
        return "KLJNPQRTUWX"[10 - (3 + weighted) % 11]
    offset, letters = _NRIC_LETTERS[prefix]
    return letters[(offset + weighted) % 11]


def read_secret(variable: str) -> bytes:
    """The surrogate key from the environment; a missing or empty variable is a ConfigError."""
    value = os.environ.get(variable, "")
    if not value:
        raise ConfigError(
            f'replace.mode = "surrogates" needs a secret key in the environment variable {variable} '
            "(keep it safe: the same key gives the same surrogates)"
        )
    return value.encode("utf-8")


# --- Shipped lists ------------------------------------------------------------------------------


@dataclass(frozen=True)
class SurrogateLists:
    """rules/surrogates/*.txt: fake names by origin and kind, hospitals, places and streets."""

    names: dict[tuple[str, str], tuple[str, ...]]  # (origin, "given"|"family") -> names
    kinds: dict[str, frozenset[tuple[str, str]]]  # casefolded name -> (origin, kind) it is listed as
    gendered: dict[tuple[str, str], tuple[str, ...]]  # (origin, "m"|"f") -> given names of that gender only
    genders: dict[str, frozenset[str]]  # casefolded given name -> genders ("m", "f", "-") it is listed with
    hospitals: tuple[str, ...]
    places: tuple[str, ...]
    streets: tuple[str, ...]

    @classmethod
    def load(cls, directory: Path) -> "SurrogateLists":
        names: dict[tuple[str, str], list[str]] = defaultdict(list)
        kinds: dict[str, set[tuple[str, str]]] = defaultdict(set)
        gendered: dict[tuple[str, str], list[str]] = defaultdict(list)
        genders: dict[str, set[str]] = defaultdict(set)
        for line in read_word_list(directory / "names.txt"):
            origin, kind, gender, name = line.split("\t")
            names[(origin, kind)].append(name)
            kinds[name.casefold()].add((origin, kind))
            if kind == "given":
                genders[name.casefold()].add(gender)
                if gender != "-":
                    gendered[(origin, gender)].append(name)
        return cls(
            names={k: tuple(v) for k, v in names.items()},
            kinds={k: frozenset(v) for k, v in kinds.items()},
            gendered={k: tuple(v) for k, v in gendered.items()},
            genders={k: frozenset(v) for k, v in genders.items()},
            hospitals=tuple(read_word_list(directory / "hospitals.txt")),
            places=tuple(read_word_list(directory / "places.txt")),
            streets=tuple(read_word_list(directory / "streets.txt")),
        )

    def gender(self, word: str) -> str | None:
        """"m" or "f" for a given name listed with that gender only, else None."""
        found = self.genders.get(word, frozenset())
        return next(iter(found)) if len(found) == 1 and "-" not in found else None


# --- Keyed draws --------------------------------------------------------------------------------


class Keyed:
    """Deterministic draws from a key: the same parts always give the same number."""

    def __init__(self, key: bytes) -> None:
        self.key = key

    def bytes(self, *parts: object) -> bytes:
        return hmac.new(self.key, "\x1f".join(map(str, parts)).encode("utf-8"), hashlib.sha256).digest()

    def number(self, *parts: object) -> int:
        return int.from_bytes(self.bytes(*parts)[:8], "big")

    def digits(self, count: int, *parts: object) -> str:
        out = ""
        block = 0
        while len(out) < count:
            out += "".join(str(b % 10) for b in self.bytes(*parts, "digits", block) if b < 250)
            block += 1
        return out[:count]

    def letters(self, count: int, *parts: object, alphabet: str = "ABCDEFGHIJKLMNOPQRSTUVWXYZ") -> str:
        data = self.bytes(*parts, "letters")
        while len(data) < count:
            data += self.bytes(*parts, "letters", len(data))
        return "".join(alphabet[b % len(alphabet)] for b in data[:count])

    def pick(self, options: Sequence[str], accept: Callable[[str], bool], *parts: object) -> str | None:
        """The first acceptable option in a keyed probe order (a stride coprime with the length)."""
        n = len(options)
        if not n:
            return None
        start = self.number(*parts, "start") % n
        stride = _coprime_stride(n, self.number(*parts, "stride"))
        for i in range(n):
            option = options[(start + i * stride) % n]
            if accept(option):
                return option
        return None


def _coprime_stride(n: int, draw: int) -> int:
    if n == 1:
        return 1
    stride = 1 + draw % (n - 1)
    while _gcd(stride, n) != 1:
        stride = stride % (n - 1) + 1
    return stride


def _gcd(a: int, b: int) -> int:
    while b:
        a, b = b, a % b
    return a


# --- Case and shape -----------------------------------------------------------------------------


def like(surrogate: str, original: str) -> str:
    """`surrogate` in the case of `original`: "TAN" -> "LIM", "tan" -> "lim", "Tan" -> "Lim"."""
    letters = [c for c in original if c.isalpha()]
    if not letters:
        return surrogate
    if all(c.isupper() for c in letters) and (len(letters) > 1 or len(surrogate) == 1):
        return surrogate.upper()
    if all(c.islower() for c in letters):
        return surrogate.lower()
    if len(letters) == 1:  # a capital initial: the surrogate's first letter stands for the name
        return surrogate[:1].upper() + surrogate[1:]
    return surrogate


# --- Dates --------------------------------------------------------------------------------------


@dataclass
class ParsedDate:
    """A date span cut into tokens, with the token index of each part it writes."""

    tokens: list[str]
    kinds: list[str]  # num, month, weekday, ord, decade, word, sep
    order: str  # the parts written, in text order: "dmy", "my", "y", "d", or "c" (compact digits)
    day: int | None = None
    month: int | None = None
    year: int | None = None  # four digits, two-digit years put in 1931..2030
    at: dict[str, int] = field(default_factory=dict)  # part -> token index
    layout: str = ""  # compact only: "ddmmyyyy", ...

    @property
    def full(self) -> bool:
        return None not in (self.day, self.month, self.year)


def _year(token: str) -> int:
    value = int(token)
    if len(token) == 4:
        return value
    return 2000 + value if value <= 30 else 1900 + value


def _valid(day: int | None, month: int | None, year: int | None) -> bool:
    if month is not None and not 1 <= month <= 12:
        return False
    if day is not None:
        limit = calendar.monthrange(year if year is not None else 2000, month)[1] if month else 31
        if not 1 <= day <= limit:
            return False
    return year is None or 1 <= year <= 9999


def tokenize_date(text: str) -> tuple[list[str], list[str]]:
    tokens = TOKEN.findall(text)
    kinds: list[str] = []
    for i, token in enumerate(tokens):
        if token.isdigit():
            kinds.append("num")
        elif token[0].isalpha():
            low = token.casefold()
            if i and kinds[i - 1] == "num" and low in ORDINALS:
                kinds.append("ord")
            elif low == "s" and i and (kinds[i - 1] == "num" or tokens[i - 1] in ("'", "’")):
                kinds.append("decade")
            elif MONTH_WORD.fullmatch(token):
                kinds.append("month")
            elif WEEKDAY_WORD.fullmatch(token):
                kinds.append("weekday")
            else:
                kinds.append("word")
        else:
            kinds.append("sep")
    return tokens, kinds


def _month_number(token: str) -> int:
    return [m[:3].casefold() for m in MONTHS].index(token[:3].casefold()) + 1


COMPACT_LAYOUTS = {8: ("yyyymmdd", "ddmmyyyy", "mmddyyyy"), 6: ("ddmmyy", "mmddyy", "yymmdd")}
SHAPE_ORDERS = {3: ("dmy", "mdy", "ymd", "ydm"), 2: ("dm", "md", "my", "ym"), 1: ("y", "m", "d")}


def parse_date(text: str, preferred: Sequence[str] = (), record_dates: Iterable[dt.date] = ()) -> ParsedDate | None:
    """Read a detected date span: which tokens are its day, month and year.

    Orders named by the rules that matched (`preferred`) are tried first, then the others in the
    Singapore preference (day first).  A reading that gives one of the record's dates wins, so a
    date of birth written month first is read as such.
    """
    tokens, kinds = tokenize_date(text)
    comps = [i for i, k in enumerate(kinds) if k in ("num", "month")]
    if not comps or len(comps) > 3 or sum(k == "month" for k in kinds) > 1:
        return None
    readings: list[ParsedDate] = []
    if len(comps) == 1 and kinds[comps[0]] == "num" and len(tokens[comps[0]]) in COMPACT_LAYOUTS:
        token = tokens[comps[0]]
        for layout in COMPACT_LAYOUTS[len(token)]:
            parts = {c: token[layout.index(c * 2) : layout.index(c * 2) + layout.count(c)] for c in "dmy"}
            day, month, year = int(parts["d"]), int(parts["m"]), _year(parts["y"])
            if _valid(day, month, year):
                readings.append(ParsedDate(tokens, kinds, "c", day, month, year, {"c": comps[0]}, layout))
    else:
        orders = list(dict.fromkeys([o for o in preferred if len(o) == len(comps)] + list(SHAPE_ORDERS[len(comps)])))
        for order in orders:
            reading = _read(tokens, kinds, comps, order)
            if reading is not None:
                readings.append(reading)
                if not record_dates:
                    break  # nothing to prefer: the first reading stands
    if not readings:
        return None
    wanted = {(d.year, d.month, d.day) for d in record_dates}
    for reading in readings:
        if reading.full and (reading.year, reading.month, reading.day) in wanted:
            return reading
    return readings[0]


def _read(tokens: list[str], kinds: list[str], comps: list[int], order: str) -> ParsedDate | None:
    parts: dict[str, int] = {}
    for part, index in zip(order, comps):
        token, kind = tokens[index], kinds[index]
        if kind == "month":
            if part != "m":
                return None
            parts["m"] = _month_number(token)
        elif part == "y":
            apostrophe = index > 0 and tokens[index - 1].endswith(("'", "’"))
            decade = index + 1 < len(kinds) and kinds[index + 1] == "decade"
            if len(token) == 4 and token[:2] in ("19", "20"):
                parts["y"] = int(token)
            elif len(token) == 2 and (len(order) > 1 or apostrophe or decade):
                parts["y"] = _year(token)
            else:
                return None
        elif len(token) > 2:
            return None
        else:
            parts[part] = int(token)
    if order == "d" and not (comps[0] + 1 < len(kinds) and kinds[comps[0] + 1] == "ord"):
        return None  # a bare number is no date: only "the 11th" is a day on its own
    if order == "m" and kinds[comps[0]] != "month":
        return None
    day, month, year = parts.get("d"), parts.get("m"), parts.get("y")
    if not _valid(day, month, year):
        return None
    return ParsedDate(tokens, kinds, order, day, month, year, {p: i for p, i in zip(order, comps)})


def _pad(parsed: ParsedDate) -> bool:
    """Whether numeric days and months are written with two digits ("03/04/2019", "12/11/2019")."""
    numeric = [parsed.at[p] for p in "dm" if p in parsed.at and parsed.kinds[parsed.at[p]] == "num"]
    widths = [len(parsed.tokens[i]) for i in numeric]
    if any(len(parsed.tokens[i]) == 2 and parsed.tokens[i].startswith("0") for i in numeric):
        return True
    if len(numeric) == 1 and widths[0] == 2:  # "13MAY2000": a day glued to its month name is fixed-width
        i = numeric[0]
        return any(0 <= j < len(parsed.kinds) and parsed.kinds[j] == "month" for j in (i - 1, i + 1))
    return len(numeric) == 2 and all(w == 2 for w in widths)


def _month_word(month: int, original: str) -> str:
    full = MONTHS[month - 1]
    low = original.casefold()
    abbreviated = len(low) == 3 or len(low) < len(MONTHS[_month_number(original) - 1])  # "May" reads as "Mar"
    if abbreviated:
        word = "Sept" if low == "sept" and month == 9 else full[:3]
    else:
        word = full
    return like(word, original)


def _suffix(day: int, original: str) -> str:
    suffix = "th" if 11 <= day % 100 <= 13 else {1: "st", 2: "nd", 3: "rd"}.get(day % 10, "th")
    return like(suffix, original)


def render_date(parsed: ParsedDate, day: int | None, month: int | None, year: int | None) -> str:
    """The parsed date's text with its parts replaced by these values, in the same format."""
    tokens = list(parsed.tokens)
    if parsed.order == "c":
        values = {"d": f"{day:02d}", "m": f"{month:02d}", "y": f"{year:04d}"}
        out, layout = "", parsed.layout
        for part in dict.fromkeys(layout):
            width = layout.count(part)
            out += values[part][-width:]
        tokens[parsed.at["c"]] = out
        return "".join(tokens)
    pad = _pad(parsed)
    for part, value in (("d", day), ("m", month), ("y", year)):
        if part not in parsed.at or value is None:
            continue
        index = parsed.at[part]
        original = tokens[index]
        if parsed.kinds[index] == "month":
            tokens[index] = _month_word(value, original)
        elif part == "y":
            tokens[index] = f"{value:04d}" if len(original) == 4 else f"{value % 100:02d}"
        else:
            tokens[index] = f"{value:02d}" if pad or (len(original) == 2 and original.startswith("0")) else str(value)
        if part == "d" and index + 1 < len(tokens) and parsed.kinds[index + 1] == "ord":
            tokens[index + 1] = _suffix(value, parsed.tokens[index + 1])
    if None not in (day, month, year):
        weekday = dt.date(year, month, day).weekday()
        for index, kind in enumerate(parsed.kinds):
            if kind == "weekday":
                tokens[index] = _weekday_word(weekday, parsed.tokens[index])
    return "".join(tokens)


def _weekday_word(weekday: int, original: str) -> str:
    full = WEEKDAYS[weekday]
    low = original.casefold()
    if low == full.casefold() or len(low) > 4:
        word = full
    elif len(low) == 4:  # "Tues", "Thur": four-letter forms exist for Tuesday and Thursday only
        word = {"Tuesday": "Tues", "Thursday": "Thur"}.get(full, full[:3])
    else:
        word = full[:3]
    return like(word, original)


# --- Per patient --------------------------------------------------------------------------------


@dataclass
class PatientState:
    """Everything derived once per patient: the key, the shifts and the record's name map."""

    keyed: Keyed
    days: int  # every full date moves back this many days
    months: int  # month/year dates and months alone move back this many months
    years: int  # years alone move back this many years (0: kept)
    tokens: tuple[str, ...]  # the record's name tokens (names, then relatives), casefolded
    names: dict[str, str]  # record token -> surrogate token (as listed, e.g. "Tay")
    initials: dict[str, str]  # first letter of a record token -> first letter of its surrogate
    origin: str  # the record's main name origin, for words of unknown origin
    forbidden: tuple[str, ...]  # record values (casefolded) no place/hospital surrogate may contain
    value_words: frozenset[str]  # words of the record's addresses and identifiers, casefolded
    initial_letters: frozenset[str]  # first letters of the record's name tokens
    dates: tuple[dt.date, ...]
    other: dict[tuple, object] = field(default_factory=dict)  # memo of keyed choices, parses and surrogates


class SurrogateReplacer:
    """The pipeline's replacer in surrogate mode: ``replacer(text, spans, record) -> text``."""

    def __init__(
        self,
        secret: bytes,
        config: ReplaceConfig,
        rules_dir: Path,
        date_pattern: regex.Pattern[str],
        name_threshold: float,
        lists: SurrogateLists | None = None,
        leak_detectors: Sequence | None = None,
    ) -> None:
        self._secret = secret
        self.config = config
        self.threshold = name_threshold
        self.lists = lists or SurrogateLists.load(rules_dir / "surrogates")
        connectors = read_word_list(rules_dir / "name_connectors.txt")
        alternatives = "|".join(regex.escape(c) for c in sorted(connectors, key=len, reverse=True))
        self._connector = regex.compile(rf"(?i)(?<![\w/])(?:{alternatives})(?![\w/])")
        # What `audit leaks` runs over the released text: a candidate they flag is not used.  The
        # pipeline passes its own record detectors, whose per-patient indexes are then built once.
        self._leak_detectors = list(leak_detectors) if leak_detectors is not None else [
            RecordNames.from_rules(rules_dir, "names", "PATIENT", name_threshold),
            RecordNames.from_rules(rules_dir, "relatives", "RELATIVE", name_threshold),
            RecordValues(date_pattern=date_pattern),
        ]
        self._name_detectors = [d for d in self._leak_detectors if isinstance(d, RecordNames)]
        self._value_detectors = [d for d in self._leak_detectors if isinstance(d, RecordValues)]
        self._other_detectors = [d for d in self._leak_detectors if not isinstance(d, (RecordNames, RecordValues))]
        self._split = regex.compile(f"({self._connector.pattern})")
        self._state = per_record(self._build_state)
        fingerprint = hmac.new(secret, b"anonymizer/fingerprint", hashlib.sha256).hexdigest()
        self.digest = hashlib.sha256(repr((config, name_threshold, fingerprint)).encode()).hexdigest()

    def shifts(self, record: PatientRecord) -> tuple[int, int, int]:
        """The patient's (days, months, years) dates move back by (years 0: kept)."""
        state = self._state(record)
        return state.days, state.months, state.years

    # The pipeline calls this once per note.
    def __call__(self, text: str, spans: Sequence[MergedSpan], record: PatientRecord | None = None) -> str:
        replacements = self.surrogates(text, spans, record)
        parts: list[str] = []
        position = 0
        for span, replacement in zip(spans, replacements):
            parts.append(text[position : span.start])
            parts.append(replacement)
            position = span.end
        parts.append(text[position:])
        return "".join(parts)

    def surrogates(self, text: str, spans: Sequence[MergedSpan], record: PatientRecord | None) -> list[str]:
        """The replacement of each span, in order."""
        if record is None:
            raise ValueError("surrogate replacement needs the patient's record")
        state = self._state(record)
        dates = {i: self._parse(state, text[s.start : s.end], s.sources) for i, s in enumerate(spans) if s.category == "DATE"}
        anchors = [(spans[i].start, p) for i, p in dates.items() if p is not None and p.month and p.year]
        makers = [self._maker(s, text[s.start : s.end], state, dates.get(i), anchors) for i, s in enumerate(spans)]
        attempts = [0] * len(spans)
        out = [self._candidate(makers[i], text[s.start : s.end], attempts, i, s.category) for i, s in enumerate(spans)]
        # What `audit leaks` would flag in the released note is replaced by the next candidate: one
        # scan of the whole note per round (a scan per candidate would cost ten times more).
        for _ in range(LEAK_ROUNDS):
            bad = self._leaking(text, spans, out, record)
            if not bad:
                return [value for value, _ in out]
            for i in bad:
                attempts[i] += 1
                out[i] = self._candidate(makers[i], text[spans[i].start : spans[i].end], attempts, i, spans[i].category)
        for i in self._leaking(text, spans, out, record):
            out[i] = (f"[{spans[i].category}]", False)
        return [value for value, _ in out]

    @staticmethod
    def _parse(state: PatientState, text: str, sources: Sequence[str]) -> ParsedDate | None:
        key = ("parsed", text, *_orders(sources))
        if key not in state.other:
            state.other[key] = parse_date(text, key[2:], state.dates)
        return state.other[key]

    @staticmethod
    def _candidate(make, original: str, attempts: list[int], i: int, category: str) -> tuple[str, bool]:
        """(replacement, whether to check it): the first candidate from attempts[i] that differs."""
        while attempts[i] < MAX_ATTEMPTS:
            candidate, must_differ = make(attempts[i])
            if candidate is None:
                break
            if not must_differ:
                return candidate, False
            if candidate.casefold() != original.casefold():
                return candidate, True
            attempts[i] += 1
        return f"[{category}]", False  # no usable surrogate: the tag (which audits ignore)

    def _leaking(self, text: str, spans: Sequence[MergedSpan], out: list[tuple[str, bool]], record: PatientRecord) -> set[int]:
        """Indexes of the replacements that the leak detectors flag in the note as it would be released."""
        parts: list[str] = []
        regions: list[tuple[int, int, int]] = []  # (start, end, span index) in the released text
        position = length = 0
        for i, (span, (value, checked)) in enumerate(zip(spans, out)):
            gap = text[position : span.start]
            parts.append(gap)
            length += len(gap)
            parts.append(value if checked else " " * len(value))  # tags and kept values are not ours to check
            if checked:
                regions.append((length, length + len(value), i))
            length += len(value)
            position = span.end
        if not regions:
            return set()
        parts.append(text[position:])
        released = "".join(parts)
        state = self._state(record)
        # Only the text around a replacement can change what the detectors find, and only if the
        # replacement holds something they could take for the record: a word close to a name token,
        # a digit, or a word of the record's addresses and identifiers.  The rest is not scanned.
        bad: set[int] = set()
        for detectors, relevant in (
            (self._name_detectors, lambda value: self._may_be_name(state, value)),
            (self._value_detectors, lambda value: self._may_be_value(state, value)),
            (self._other_detectors, lambda value: True),
        ):
            chosen = [r for r in regions if relevant(released[r[0] : r[1]])]
            if detectors and chosen:
                bad |= self._flagged(detectors, released, chosen, record)
        return bad

    def _may_be_name(self, state: PatientState, value: str) -> bool:
        for word in WORD.findall(value):
            word = word.casefold()
            key = ("name?", word)
            if key not in state.other:
                if len(word) == 1:
                    state.other[key] = word in state.initial_letters
                else:
                    state.other[key] = any(word == t if len(t) <= SHORT or len(word) <= SHORT else self._close(word, t)
                                           for t in state.tokens)
            if state.other[key]:
                return True
        return False

    @staticmethod
    def _may_be_value(state: PatientState, value: str) -> bool:
        return any(c.isdigit() for c in value) or any(w.casefold() in state.value_words for w in WORD.findall(value))

    @staticmethod
    def _flagged(detectors, released: str, regions: list[tuple[int, int, int]], record: PatientRecord) -> set[int]:
        """Regions the detectors flag, scanning windows around them joined by a separator no pattern crosses."""
        windows: list[list[int]] = []
        for start, end, _ in regions:
            low, high = max(0, start - WINDOW), min(len(released), end + WINDOW)
            if windows and low <= windows[-1][1]:
                windows[-1][1] = max(windows[-1][1], high)
            else:
                windows.append([low, high])
        probe_parts, offsets = [], []  # offsets: (start in the probe, start in the released text)
        at = 0
        for low, high in windows:
            offsets.append((at, low))
            probe_parts.append(released[low:high])
            at += high - low + len(SEPARATOR)
        probe = SEPARATOR.join(probe_parts)
        bad = set()
        for detector in detectors:
            for found in detector(probe, record):
                base = next(b for b in reversed(offsets) if b[0] <= found.start)
                start, end = found.start - base[0] + base[1], found.end - base[0] + base[1]
                bad.update(i for low, high, i in regions if start < high and end > low)
        return bad

    # --- per patient ---

    def _build_state(self, record: PatientRecord) -> PatientState:
        key = hmac.new(self._secret, b"anonymizer/patient\x1f" + record.patient_id.encode("utf-8"), hashlib.sha256).digest()
        keyed = Keyed(key)
        span = self.config.date_shift_max - self.config.date_shift_min + 1
        days = self.config.date_shift_min + keyed.number("date offset") % span
        months = max(1, round(days / DAYS_PER_MONTH))
        years = 0 if self.config.years == "keep" else max(1, round(days / 365.2425))
        plan = self._name_plan(record)
        tokens = tuple(dict.fromkeys(t for t, *_ in plan))
        origin = self._context_origin([t for t, *_ in plan], "western")
        state = PatientState(
            keyed=keyed, days=days, months=months, years=years, tokens=tokens, names={}, initials={},
            origin=origin,
            forbidden=tuple(v.casefold() for v in (*record.names, *record.relatives, *record.addresses, *record.identifiers)),
            value_words=frozenset(w.casefold() for v in (*record.addresses, *record.identifiers) for w in WORD.findall(v)),
            initial_letters=frozenset(t[0] for t in tokens),
            dates=record.dates,
        )
        used: set[str] = set()
        for token, kind, token_origin, gender in plan:
            if token in state.names:
                continue
            choice = self._pick_name(state, token, _origin(token_origin, origin), kind, used, ("record", token), gender)
            if choice is not None:
                state.names[token] = choice
                used.add(choice.casefold())
                state.initials.setdefault(token[0], choice[0].casefold())
        return state

    def _name_plan(self, record: PatientRecord) -> list[tuple[str, str, frozenset[str], str | None]]:
        """(token, given|family, origins it is listed under, gender) for each name token of the record."""
        plan = []
        for field_name in ("names", "relatives"):
            values = getattr(record, field_name)
            for position, value in enumerate(values):
                words: list[tuple[str, bool]] = []  # (word, follows a connector)
                after = False
                for piece in self._split.split(value):
                    if piece and self._connector.fullmatch(piece):
                        after = True
                        continue
                    for word in WORD.findall(piece):
                        words.append((word.casefold(), after))
                        after = False
                known = [g for w, p in words if not p and (g := self.lists.gender(w))]
                value_gender = known[0] if known and all(g == known[0] for g in known) else None
                for index, (word, patronym) in enumerate(words):
                    listed = self.lists.kinds.get(word, frozenset())
                    kinds = {k for _, k in listed}
                    if patronym:
                        kind = "family"
                    elif len(kinds) == 1:
                        kind = next(iter(kinds))
                    elif field_name == "names" and len(values) > 1:
                        kind = "family" if position == len(values) - 1 else "given"
                    elif len(words) == 1:
                        kind = "given"
                    elif ("chinese", "family") in self.lists.kinds.get(words[0][0], frozenset()):
                        kind = "family" if index == 0 else "given"
                    else:
                        kind = "family" if index == len(words) - 1 else "given"
                    gender = (self.lists.gender(word) or value_gender) if kind == "given" else None
                    plan.append((word, kind, _origins_as(listed, kind), gender))
        return plan

    def _context_origin(self, words: Sequence[str], default: str) -> str:
        """The origin most words are listed under (a word listed under one origin counts most)."""
        counts: dict[str, float] = defaultdict(float)
        for word in words:
            origins = {o for o, _ in self.lists.kinds.get(word, ())}
            for o in origins:
                counts[o] += 1.0 if len(origins) == 1 else 0.5 if o != "western" else 0.25
        return max(sorted(counts), key=counts.__getitem__) if counts else default

    def _pick_name(
        self,
        state: PatientState,
        word: str,
        origin: str,
        kind: str,
        used: set[str],
        parts: tuple[str, ...],
        gender: str | None = None,
    ) -> str | None:
        options = self.lists.names.get((origin, kind)) or self.lists.names.get(("western", kind), ())
        if kind == "given" and gender:  # Siti stays a woman's name, Ahmad a man's
            options = self.lists.gendered.get((origin, gender)) or options

        def accept(candidate: str, initial: bool) -> bool:
            low = candidate.casefold()
            if low == word or low in used or (initial and low[0] == word[0]):
                return False
            return not any(self._close(low, token) for token in state.tokens)

        return state.keyed.pick(options, lambda c: accept(c, True), *parts) or state.keyed.pick(
            options, lambda c: accept(c, False), *parts
        )

    def _close(self, a: str, b: str) -> bool:
        """Whether the names detector would take one word for the other."""
        if a == b:
            return True
        if len(a) <= SHORT or len(b) <= SHORT:
            return False
        return Levenshtein.distance(a, b) / min(len(a), len(b)) < self.threshold

    def _record_token(self, state: PatientState, word: str) -> str | None:
        """The record token a word of a note stands for (itself, or a spelling variant)."""
        if word in state.names:
            return word
        if len(word) <= SHORT:
            return None
        best = None
        for token in state.tokens:
            if len(token) > SHORT and token in state.names:
                ratio = Levenshtein.distance(word, token) / min(len(word), len(token))
                if ratio < self.threshold and (best is None or ratio < best[0]):
                    best = (ratio, token)
        return best[1] if best else None

    # --- makers: attempt -> (candidate, must differ from the original) ---

    def _maker(self, span: MergedSpan, original: str, state: PatientState, parsed: ParsedDate | None, anchors):
        make = self._make(span, original, state, parsed, anchors)
        if span.category == "DATE" and parsed is not None and parsed.order in ("d", "dm", "md"):
            return make  # depends on the other dates of the note
        memo = state.other

        def remembered(attempt: int):  # a patient's notes repeat their names and dates
            key = ("made", span.category, original, parsed.order if parsed else "", attempt)
            if key not in memo:
                memo[key] = make(attempt)
            return memo[key]

        return remembered

    def _make(self, span: MergedSpan, original: str, state: PatientState, parsed: ParsedDate | None, anchors):
        category = span.category
        if category in NAME_CATEGORIES:
            return lambda attempt: (self._name(original, state, attempt), True)
        if category == "DATE":
            return lambda attempt: self._date(parsed, span.start, state, anchors, attempt)
        if category == "AGE":
            return lambda attempt: _age(original)
        if category == "ID":
            return lambda attempt: (self._identifier(original, state, attempt), True)
        if category == "PHONE":
            return lambda attempt: (self._phone(original, state, attempt), True)
        if category == "EMAIL":
            return lambda attempt: (self._email(original, state, attempt), True)
        if category == "URL":
            return lambda attempt: (self._url(original, state, attempt), True)
        if category == "HOSPITAL":
            return lambda attempt: (self._hospital(original, state, attempt), True)
        if category == "LOCATION":
            return lambda attempt: (self._location(original, state, attempt), True)
        return lambda attempt: (None, True)

    def _name(self, original: str, state: PatientState, attempt: int) -> str:
        pieces = self._split.split(original)
        words = [m.group().casefold() for p in pieces if not self._connector.fullmatch(p or "-") for m in WORD.finditer(p)]
        count = len(words)
        origin = self._context_origin(words, state.origin)
        out: list[str] = []
        seen = 0
        for piece in pieces:
            if not piece:
                continue
            if self._connector.fullmatch(piece):
                out.append(piece)
                continue
            tokens = TOKEN.findall(piece)
            for i, token in enumerate(tokens):
                if not token:
                    continue
                if token.isdigit():
                    out.append(state.keyed.digits(len(token), "name digits", token, attempt))
                elif token[0].isalpha():
                    seen += 1
                    if len(token) == 1 and tokens[i + 1 : i + 2] in (["'"], ["’"]) and tokens[i + 2 : i + 3]:
                        tokens[i + 1] = ""  # "O'Brien": the surrogate of "Brien" stands for the whole name
                        continue
                    out.append(self._name_word(token, state, seen - 1, count, attempt, origin))
                else:
                    out.append(token)
        return "".join(out)

    def _name_word(self, word: str, state: PatientState, index: int, count: int, attempt: int, origin: str = "") -> str:
        key = word.casefold()
        if len(key) == 1:
            letter = state.initials.get(key)
            if letter is None or attempt:
                letter = state.keyed.letters(1, "initial", key, attempt, alphabet="abcdefghijklmnopqrstuvwxyz")
                if letter == key:
                    letter = chr((ord(letter) - 97 + 1) % 26 + 97)
            return like(letter, word)
        token = self._record_token(state, key)
        if token is not None and not attempt:
            return like(state.names[token], word)
        memo = ("other", key, str(attempt))
        if memo not in state.other:
            listed = self.lists.kinds.get(key, frozenset())
            kinds = {k for _, k in listed}
            if len(kinds) == 1:
                kind = next(iter(kinds))
            else:
                kind = "family" if count > 1 and index == count - 1 else "given"
            origin = _origin(_origins_as(listed, kind), origin or state.origin)
            used = {v.casefold() for v in state.names.values()}
            gender = self.lists.gender(key) if kind == "given" else None
            state.other[memo] = self._pick_name(state, key, origin, kind, used, ("other", key, attempt), gender) or "X"
        return like(state.other[memo], word)

    def _date(self, parsed: ParsedDate | None, start: int, state: PatientState, anchors, attempt: int):
        if parsed is None:
            return None, True
        days = state.days + attempt
        if parsed.full:
            new = _shift_days(parsed.year, parsed.month, parsed.day, days)
            return render_date(parsed, new.day, new.month, new.year), True
        if parsed.order in ("dm", "md"):
            year = _anchor(anchors, start, lambda p: p.year) or (2000 if (parsed.month, parsed.day) == (2, 29) else 2001)
            if not _valid(parsed.day, parsed.month, year):
                year = 2000
            new = _shift_days(year, parsed.month, parsed.day, days)
            return render_date(parsed, new.day, new.month, None), True
        if parsed.order == "d":
            anchor = _anchor(anchors, start, lambda p: (p.year, p.month)) or (2001, 1)
            year, month = anchor if _valid(parsed.day, anchor[1], anchor[0]) else (2001, 1)
            new = _shift_days(year, month, parsed.day, days)
            return render_date(parsed, new.day, None, None), True
        months = state.months + attempt
        if parsed.order in ("my", "ym"):
            total = parsed.year * 12 + parsed.month - 1 - months
            return render_date(parsed, None, total % 12 + 1, total // 12), True
        if parsed.order == "m":
            return render_date(parsed, None, (parsed.month - 1 - months) % 12 + 1, None), True
        if parsed.order == "y":
            if not state.years:
                return "".join(parsed.tokens), False
            year = parsed.year - state.years - attempt
            decade = any(k == "decade" for k in parsed.kinds)
            if decade:
                year = year // 10 * 10 if year // 10 != parsed.year // 10 else year // 10 * 10 - 10
            return render_date(parsed, None, None, year), True
        return None, True

    def _identifier(self, original: str, state: PatientState, attempt: int) -> str:
        if "://" in original or original.casefold().startswith("www."):
            return self._url(original, state, attempt)  # "http://portal/appt?id=570950": an ID inside a URL
        compact = "".join(c for c in original if c.isalnum()).upper()
        digits = "".join(c for c in compact if c.isdigit())
        key = digits if len(digits) >= 6 else compact
        if NRIC.fullmatch(compact):
            new_digits = state.keyed.digits(7, "nric", key, attempt)
            letters = iter([compact[0], nric_check_letter(compact[0], new_digits)])
            stream = iter(new_digits)
            out = []
            for c in original:
                if c.isdigit():
                    out.append(next(stream))
                elif c.isalpha():
                    out.append(like(next(letters), c))
                else:
                    out.append(c)
            return "".join(out)
        if not digits:
            return _scramble(original, state.keyed, ("id letters", compact, attempt))
        stream = iter(state.keyed.digits(len(digits), "id", key, attempt))
        out = []
        first = True
        for c in original:
            if c.isdigit():
                d = next(stream)
                if first and c != "0" and d == "0":
                    d = str(1 + int(state.keyed.digits(1, "id first", key, attempt)) % 9)
                out.append(d)
                first = False
            else:
                out.append(c)
        return "".join(out)

    def _phone(self, original: str, state: PatientState, attempt: int) -> str:
        prefix = PHONE_PREFIX.match(original)
        head = prefix.group() if prefix else ""
        body = original[len(head) :]
        digits = [c for c in body if c.isdigit()]
        n = len(digits)
        tail_key = "".join(digits[-7:])
        fake = state.keyed.digits(n, "phone", tail_key, attempt)[::-1]  # read from the end: tails agree
        new = list(fake[-n:]) if n else []
        if n >= 8:
            new[0] = digits[0]  # the kind of number (Singapore 6/8/9, a US area code's first digit)
        stream = iter(new)
        return head + "".join(next(stream) if c.isdigit() else c for c in body)

    def _email(self, original: str, state: PatientState, attempt: int) -> str:
        local, _, domain = original.rpartition("@")
        new_local = "".join(
            self._name_word(t, state, 0, 1, attempt) if t[0].isalpha() and self._record_token(state, t.casefold())
            else _scramble(t, state.keyed, ("email", t.casefold(), attempt)) if t[0].isalnum() else t
            for t in TOKEN.findall(local)
        )
        return f"{new_local}@{_example_domain(domain)}"

    def _url(self, original: str, state: PatientState, attempt: int) -> str:
        if IP_ADDRESS.fullmatch(original):
            n = state.keyed.bytes("ip", original, attempt)
            return f"10.{n[0]}.{n[1]}.{max(1, n[2] % 255)}"
        match = URL_HOST.match(original)
        scheme, www, host, rest = match.groups() if match else ("", "", original, "")
        rest = "".join(
            _scramble(t, state.keyed, ("url", t.casefold(), attempt)) if t[0].isalnum() else t for t in TOKEN.findall(rest)
        )
        return f"{scheme or ''}{www or ''}{like_phrase(_example_domain(host), host)}{rest}"

    def _hospital(self, original: str, state: PatientState, attempt: int) -> str | None:
        key = " ".join(original.casefold().split())
        letters = [c for c in original if c.isalpha()]
        if " " not in original.strip() and letters and all(c.isupper() for c in letters) and len(letters) <= 6:
            out = state.keyed.letters(len(original), "acronym", key, attempt)
            if original.endswith("H"):
                out = out[:-1] + "H"
            return out
        choice = self._pick_from(state, self.lists.hospitals, ("hospital", key, attempt), key)
        return like_phrase(choice, original) if choice else None

    def _location(self, original: str, state: PatientState, attempt: int) -> str | None:
        tokens = TOKEN.findall(original)
        out: list[str] = []
        i = 0
        changed = False
        while i < len(tokens):
            token = tokens[i]
            if token.isdigit():
                out.append(state.keyed.digits(len(token), "place digits", token, attempt))
                changed = True
                i += 1
                continue
            if not token[0].isalpha() or token.casefold() in KEEP_PLACE_WORDS:
                out.append(token)
                i += 1
                continue
            j = i  # a run of place words joined by spaces
            while j + 2 < len(tokens) and tokens[j + 1].isspace() and tokens[j + 2][0].isalpha() and tokens[j + 2].casefold() not in KEEP_PLACE_WORDS:
                j += 2
            phrase = "".join(tokens[i : j + 1])
            before = tokens[i - 2].casefold() if i >= 2 else ""
            after = tokens[j + 2].casefold().rstrip(".") if j + 2 < len(tokens) else ""
            street = before in STREET_BEFORE or after in STREET_AFTER
            options = self.lists.streets if street else self.lists.places
            key = " ".join(phrase.casefold().split())
            choice = self._pick_from(state, options, ("street" if street else "place", key, attempt), key)
            out.append(like_phrase(choice, phrase) if choice else phrase)
            changed = changed or choice is not None
            i = j + 1
        result = "".join(out)
        if not changed or result.casefold() == original.casefold():
            choice = self._pick_from(state, self.lists.places, ("place", original.casefold(), attempt), original.casefold())
            return like_phrase(choice, original) if choice else None
        return result

    def _pick_from(self, state: PatientState, options: Sequence[str], parts: tuple, original: str) -> str | None:
        def accept(candidate: str) -> bool:
            low = candidate.casefold()
            return low != original and not any(low in value or value in low for value in state.forbidden if value)

        return state.keyed.pick(options, accept, *parts)


def _origins_as(listed: frozenset[tuple[str, str]], kind: str) -> frozenset[str]:
    """The origins a word is listed under as this kind (given/family), else under any kind."""
    return frozenset(o for o, k in listed if k == kind) or frozenset(o for o, _ in listed)


def _origin(listed: frozenset[str], context: str) -> str:
    """A word's origin: the context's if the word is listed under it (or nowhere), else its own."""
    if not listed or context in listed:
        return context
    others = sorted(listed - {"western"})
    return others[0] if others else "western"


def like_phrase(surrogate: str, original: str) -> str:
    letters = [c for c in original if c.isalpha()]
    if letters and all(c.isupper() for c in letters):
        return surrogate.upper()
    if letters and all(c.islower() for c in letters):
        return surrogate.lower()
    return surrogate


def _age(original: str) -> tuple[str | None, bool]:
    match = regex.search(r"\d+", original)
    if match is None:
        return None, True
    if int(match.group()) < 90:
        return original, False  # not PHI under HIPAA: kept
    return original[: match.start()] + "90+" + original[match.end() :], True


def _scramble(token: str, keyed: Keyed, parts: tuple) -> str:
    """Letters and digits replaced by keyed ones of the same kind and case; the rest kept."""
    letters = keyed.letters(len(token), *parts, alphabet="abcdefghijklmnopqrstuvwxyz")
    digits = keyed.digits(len(token), *parts)
    return "".join(
        (letters[i].upper() if c.isupper() else letters[i]) if c.isalpha() else digits[i] if c.isdigit() else c
        for i, c in enumerate(token)
    )


def _example_domain(host: str) -> str:
    """"mail.hospital.com.sg" -> "example.com.sg": the reserved example domain, same ending."""
    labels = host.split(".")
    if len(labels) >= 3 and labels[-2].casefold() in SECOND_LEVEL and len(labels[-1]) == 2:
        ending = labels[-2:]
    else:
        ending = labels[-1:] if len(labels) > 1 else ["com"]
    domain = ".".join(["example", *ending])
    if domain.casefold() == host.casefold():  # already an example domain: still change it
        domain = "example.net" if ending != ["net"] else "example.org"
    return domain


def _orders(sources: Sequence[str]) -> list[str]:
    return [m.group(1) for source in sources if (m := DATE_RULE.match(source))]


def _shift_days(year: int, month: int, day: int, days: int) -> dt.date:
    try:
        return dt.date(year, month, day) - dt.timedelta(days=days)
    except OverflowError:
        return dt.date(year, month, day) + dt.timedelta(days=days)


def _anchor(anchors: list[tuple[int, ParsedDate]], start: int, value: Callable[[ParsedDate], object]):
    """The value of the nearest date before `start` that has it (else the nearest after)."""
    before = [p for s, p in anchors if s < start]
    after = [p for s, p in anchors if s > start]
    for group in (reversed(before), after):
        for parsed in group:
            return value(parsed)
    return None


def build_replacer(
    config: ReplaceConfig,
    rules_dir: Path,
    date_pattern: regex.Pattern[str],
    name_threshold: float,
    leak_detectors: Sequence | None = None,
) -> SurrogateReplacer:
    """The surrogate replacer for a run; raises ConfigError (nothing written yet) without the secret."""
    secret = read_secret(config.secret_env)
    return SurrogateReplacer(secret, config, rules_dir, date_pattern, name_threshold, leak_detectors=leak_detectors)
