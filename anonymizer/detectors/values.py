"""The record's own identifiers, phones, dates and addresses, in whatever form a note writes them.

Generic patterns find things that look like an ID or a date; this detector finds the patient's
actual values even when they are written differently from the database ("s 1234567 d",
"+65 9123-4567", "12th March 85", "Ang Mo Kio Ave 3").  What it derives from a record (plain strings and numbers, ranked) is
built once per patient through :class:`per_record`; no pattern is compiled per patient.  Each
rule finds what the alternation of the record's renderings would match (docs/performance.md):
the note is reduced once to a skeleton without the characters a rendering may hold between its
characters (spaces and dashes for identifiers; spaces, dots, dashes and brackets for phones),
with an offset map, and each value is looked up in it by `str.find`, with boundary checks.

A record address also goes whole, house number, block, unit and postal code included, however the
note writes it: the address and the note are compared as sequences of words and numbers, each word
mapped to one form (rules/address_abbreviations.txt: "Ave" is "Avenue", "Blk" is "Block"), with any
punctuation or spacing between them ("16 Kent Rd #05-67" for "16, Kent Road, #05-67").
"""

from __future__ import annotations

import datetime as dt
import re
from bisect import bisect_right
from dataclasses import dataclass
from functools import lru_cache
from itertools import accumulate
from pathlib import Path
from typing import Callable, Iterable, Iterator, Sequence

import regex
from dateutil import parser as dateutil_parser

from anonymizer.record import PatientRecord, per_record
from anonymizer.resources import data_dir, read_word_list
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
ADDRESS_TOKEN = re.compile(r"[^\W\d_]+|\d+")  # an address's words and numbers: "S560123" is "s", "560123"
# What may stand between two words of an address in a note: punctuation and spaces, one line break.
ADDRESS_GAP = re.compile(r"[ \t,.;:#\-/()]*\n?[ \t,.;:#\-/()]*")


# Compiled once per run, whatever the records: no pattern is compiled per patient.
# Captured, so that splitting at them keeps their lengths (_skeleton).
_ID_GAP = re.compile(r"([\s\-]+)")  # what an identifier may have between its characters
_PHONE_GAP = re.compile(r"([\s.\-()]+)")  # what a phone number may have between its digits
_SUFFIX_AT = re.compile(f"(?i){SUFFIX}")  # a street word after a place name, e.g. " Ave 3"
_UNIT_AT = re.compile(r"#\s*(\d+)\s*-\s*(\d+)(?!\d)")  # "#05-12", compared with the record's units
_STREET_BEFORE = tuple(sorted(STREET_BEFORE, key=len, reverse=True))

# A candidate: (start, alternative's rank, end).  Rank orders the alternatives of a rule as the
# per-patient alternation did: longer pattern text first.  _leftmost() then picks matches exactly
# as `finditer` over that alternation would: leftmost start, first alternative, no overlaps.
Candidate = tuple[int, int, int]


@dataclass(frozen=True, slots=True)
class _Phone:
    digits: str
    rank: int
    tail_start: int  # digits[tail_start:] is the shortest tail that still identifies the number


@dataclass(frozen=True, slots=True)
class _Place:
    words: tuple[str, ...]  # lower case
    rank: int
    single: bool  # one word: only next to a street word


@dataclass(frozen=True, slots=True)
class _Index:
    """What one record turns into: plain strings and numbers to look for, ranked; no compiled pattern."""

    identifiers: tuple[tuple[str, int], ...]  # (lower-case characters without spaces and dashes, rank)
    phones: tuple[_Phone, ...]
    compact_dates: tuple[tuple[str, int], ...]  # (digits, rank)
    postal_codes: tuple[tuple[str, int], ...]
    units: dict[tuple[str, str], int]  # (floor, unit) -> rank
    places: tuple[_Place, ...]
    sequences: tuple[tuple[str, ...], ...]  # each address as its words and numbers, in one form each
    anchors: tuple[str, ...]  # the addresses' place words, lower case: a note without any holds no address
    markers: frozenset[str]  # the addresses' numbers and street, block and unit words
    reach: int  # the longest address's length: how far from a place word its address may run
    dates: frozenset[tuple[int, int, int]]  # (year, month, day)
    days: frozenset[int]  # a date candidate that mentions none of these cannot match
    day_strings: tuple[str, ...]  # the days without a leading zero: only lines holding one may hold a date

    @property
    def empty(self) -> bool:
        return not (self.identifiers or self.phones or self.compact_dates or self.postal_codes or self.units or self.places
                    or self.sequences or self.dates)


class RecordValues:
    """Flags the record's identifiers, phone numbers, dates and addresses in any rendering."""

    def __init__(
        self,
        date_pattern: regex.Pattern[str],
        abbreviations: dict[str, str] | None = None,
        excused: Callable[[str, int, int, str], bool] | None = None,
    ) -> None:
        self.name = "record"
        self._date_pattern = date_pattern
        # the rules' context exceptions ("fever 4/7", "x 1/12" are durations): PatternDetector.excused
        self._excused = excused
        self._line_local = _line_local(date_pattern)
        self._forms = read_abbreviations() if abbreviations is None else abbreviations
        self._index = per_record(lambda record: _build_index(record, self._forms))

    def __call__(self, text: str, record: PatientRecord) -> list[Span]:
        index = self._index(record)
        if index.empty or not text:
            return []
        spans = []
        low = None
        if index.identifiers or index.places or index.anchors:
            low = _lower(text)
        for rule, category, candidates in (
            ("identifier", "ID", _identifier_candidates(text, low, index.identifiers) if index.identifiers else None),
            ("phone", "PHONE", _phone_candidates(text, index.phones) if index.phones else None),
            ("date", "DATE", _digit_candidates(text, index.compact_dates) if index.compact_dates else None),
            ("address", "LOCATION", _address_candidates(text, low, index) if index.postal_codes or index.units or index.places else None),
        ):
            if candidates:
                spans += [Span(start, end, category, self.name, rule) for start, end in _leftmost(candidates)]
        if index.anchors and (windows := _address_windows(text, low, index)):
            parts = [(s.start, s.end) for s in spans if s.rule == "address"]
            spans += [
                Span(start, end, "LOCATION", self.name, "address")
                for window in windows
                for start, end in _whole_addresses(text, low, window, index, self._forms)
                if not any(a <= start and end <= b for a, b in parts)  # adds what the parts left
            ]
        if index.dates:
            for start, end in self._date_regions(text, index.day_strings):
                for match in self._date_pattern.finditer(text, start, end):
                    if match.end() > match.start() and _is_record_date(match.group(), index):
                        if self._excused is None or not self._excused(text, match.start(), match.end(), "DATE"):
                            spans.append(Span(match.start(), match.end(), "DATE", self.name, "date"))
        return spans

    def _date_regions(self, text: str, day_strings: Sequence[str]) -> list[tuple[int, int]]:
        """Where the date regex, the costliest part, must search: a record date holds one of the
        record's day numbers, which in an ASCII note are written with these ASCII digits.  When no
        match of the pattern can contain a line break, the search starts afresh at each line (a
        match found from there is one found from the note's start), so only the lines with a day
        number are searched, up to and including their line break (which lookarounds may read)."""
        if not text.isascii():
            return [(0, len(text))]
        if not self._line_local:
            return [(0, len(text))] if any(day in text for day in day_strings) else []
        lines = set()
        for day in day_strings:
            i = text.find(day)
            while i >= 0:
                end = text.find("\n", i) + 1 or len(text)
                lines.add((text.rfind("\n", 0, i) + 1, end))
                i = text.find(day, end)
        return sorted(lines)


# Pattern syntax that cannot match a line break nor the end of the text, so that a match of a
# pattern written only with these never contains a line break or reads past one: escapes of
# digits, word characters, boundaries, \K, tab and punctuation; classes of those and of printable
# characters, not negated; groups, lookarounds, the (?i) flag, alternation and quantifiers.
_ESCAPE = r"\\[dwbBKt]|\\[^A-Za-z0-9\s]"
_PRINTABLE = r"[^\]\[\\\-^\x00-\x1f]"  # in a class: not a line break, nor special there
_CLASS = rf"\[-?(?:{_ESCAPE}|{_PRINTABLE}(?:-{_PRINTABLE})?)+-?\]"
_GROUP = r"\((?!\?)|\(\?(?:[:=!]|<[=!]|P<\w+>|i[:)])|\)"
_LINE_LOCAL = re.compile(rf"(?:{_ESCAPE}|{_CLASS}|{_GROUP}|\||[?*+]|\{{\d+(?:,\d*)?\}}|[^\\\[\]().^$|?*+{{}}\x00-\x1f])*")


def _line_local(pattern: regex.Pattern[str]) -> bool:
    """Whether no match of `pattern` can contain a line break or depend on what follows one."""
    return not pattern.flags & (regex.VERBOSE | regex.WORD) and _LINE_LOCAL.fullmatch(pattern.pattern) is not None


def read_abbreviations(path: Path | None = None) -> dict[str, str]:
    """Each form of an address word mapped to its one form (rules/address_abbreviations.txt)."""
    forms: dict[str, str] = {}
    for line in read_word_list(path or data_dir("rules") / "address_abbreviations.txt"):
        first, *others = line.casefold().split()
        for word in (first, *others):
            forms.setdefault(word, first)
    return forms


def _address_words(text: str, forms: dict[str, str], start: int = 0, end: int | None = None) -> list[tuple[int, int, str]]:
    """(start, end, one form) of each word and number of a lower-case text (between `start` and
    `end`); numbers without leading zeros."""
    return [
        (m.start(), m.end(), str(int(w)) if w.isdecimal() and w.isascii() else forms.get(w, w))
        for m in ADDRESS_TOKEN.finditer(text, start, len(text) if end is None else end)
        for w in (m.group(),)
    ]


def _address_windows(text: str, low: str, index: _Index) -> list[tuple[int, int]]:
    """The stretches of the note around a place word of the addresses written as a whole word,
    as long as an address on either side: only there can a record address be (most notes: none)."""
    reach = index.reach
    windows: list[list[int]] = []
    for anchor in index.anchors:
        for a in _occurrences(low, anchor):
            b = a + len(anchor)
            if (a and _is_word(text[a - 1])) or (b < len(text) and _is_word(text[b])):
                continue
            windows.append([max(a - reach, 0), min(b + reach, len(text))])
    if not windows:
        return []
    windows.sort()
    merged = [windows[0]]
    for start, end in windows[1:]:
        if start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    out = []
    for start, end in merged:  # never cut a word in two
        while start > 0 and _is_word(text[start - 1]):
            start -= 1
        while end < len(text) and _is_word(text[end]):
            end += 1
        out.append((start, end))
    return out


def _whole_addresses(text: str, low: str, window: tuple[int, int], index: _Index, forms: dict[str, str]) -> list[tuple[int, int]]:
    """Where a note writes two or more consecutive words of a record address, one of them a place
    word and one a number or a street, block or unit word (a place name alone is :func:`_place_candidates`'),
    with only punctuation and spacing between them: from the first to the last, with a unit's
    "#" before it.  Each of the note's words is compared with the few places its form has in the
    addresses, so the work grows with the note's length times the addresses' length."""
    words = _address_words(low, forms, *window)
    places = {w for sequence in index.sequences for w in sequence if w in index.anchors}
    at: dict[str, list[tuple[int, int]]] = {}
    for s, sequence in enumerate(index.sequences):
        for p, word in enumerate(sequence):
            at.setdefault(word, []).append((s, p))
    found = []
    i, n = 0, len(words)
    while i < n:
        best = 0
        for s, p in at.get(words[i][2], ()):
            sequence, k = index.sequences[s], 1
            while (
                i + k < n
                and p + k < len(sequence)
                and words[i + k][2] == sequence[p + k]
                and ADDRESS_GAP.fullmatch(text, words[i + k - 1][1], words[i + k][0])
            ):
                k += 1
            run = sequence[p : p + k]
            if k >= 2 and k > best and any(w in places for w in run) and any(w in index.markers for w in run):
                best = k
        if best:
            start = words[i][0]
            if start > 0 and text[start - 1] == "#":
                start -= 1
            found.append((start, words[i + best - 1][1]))
            i += best
        else:
            i += 1
    return found


def _build_index(record: PatientRecord, forms: dict[str, str] | None = None) -> _Index:
    dates = frozenset((d.year, d.month, d.day) for d in record.dates)
    # The rank of every alternative is its place in the alternation the detector used to compile
    # per patient (longer pattern text first; ties, which that order left to chance, by the text).
    identifiers = {
        pattern: "".join(_lower(c) for c in form if not c.isspace() and c != "-")
        for value in record.identifiers
        for form in _identifier_forms(value)
        if (pattern := _identifier(form))
    }
    phones = {pattern: digits for value in record.phones if (digits := regex.sub(r"[^0-9]", "", value)) and (pattern := _phone(value))}
    compact = {p: p.removeprefix("(?<!\\d)").removesuffix("(?!\\d)") for date in dates for p in _compact_dates(*date)}
    postal, units, places = {}, {}, {}
    forms = forms or {}
    generic = ADDRESS_WORDS | set(forms.values())  # street, block and unit words in every form
    sequences, anchors = [], set()
    for value in record.addresses:
        sequence = tuple(w for _, _, w in _address_words(_lower(value), forms))
        sequences.append(sequence)
        anchors |= {w for w in sequence if w.isalpha() and len(w) >= MIN_PLACE and w not in generic}
        for code in POSTAL_CODE.findall(value):
            postal[rf"(?<!\d){code}(?!\d)"] = code
        for floor, unit in UNIT.findall(value):
            units[rf"\#\s*{floor}\s*-\s*{unit}(?!\d)"] = (floor, unit)
        for phrase in _place_names(value):
            if pattern := _place_pattern(phrase):
                places[pattern] = phrase
    ranks = {rule: {p: k for k, p in enumerate(sorted(found, key=lambda p: (-len(p), p)))}
             for rule, found in (("identifier", identifiers), ("phone", phones), ("date", compact),
                                 ("address", {**postal, **units, **places}))}
    return _Index(
        identifiers=tuple((chars, ranks["identifier"][p]) for p, chars in identifiers.items()),
        phones=tuple(_Phone(d, ranks["phone"][p], len(d) - MIN_PHONE_DIGITS) for p, d in phones.items()),
        compact_dates=tuple((digits, ranks["date"][p]) for p, digits in compact.items()),
        postal_codes=tuple((code, ranks["address"][p]) for p, code in postal.items()),
        units={key: ranks["address"][p] for p, key in units.items()},
        places=tuple(_Place(tuple(_lower(w) for w in words), ranks["address"][p], len(words) == 1) for p, words in places.items()),
        sequences=tuple(sequences),
        anchors=tuple(sorted(anchors)),
        markers=frozenset(w for sequence in sequences for w in sequence if w.isdecimal() or w in generic),
        reach=2 * max((len(value) for value in record.addresses), default=0) + 16,  # abbreviations spelled out, wider spacing
        dates=dates,
        days=frozenset(day for _, _, day in dates),
        day_strings=tuple(sorted({str(day) for _, _, day in dates})),
    )


def _lower(text: str) -> str:
    """Lower case, one character for one (so offsets stay valid), as `re` compares ignoring case."""
    low = text.lower()
    if len(low) == len(text):
        return low
    return "".join(c if len(c.lower()) != 1 else c.lower() for c in text)


def _is_word(c: str) -> bool:
    return c.isalnum() or c == "_"


def _leftmost(candidates: list[Candidate]) -> list[tuple[int, int]]:
    """The matches `finditer` over the ranked alternation finds: leftmost, first-ranked, disjoint."""
    candidates.sort()
    found = []
    position = 0
    for start, _, end in candidates:
        if start >= position:
            found.append((start, end))
            position = end
    return found


class _Offsets:
    """Each skeleton character's offset in the text, looked up from the pieces between the gaps:
    a note has hundreds of gaps, but only the characters of a found value are looked up."""

    def __init__(self, parts: list[str]) -> None:
        # parts: the text split at its gaps, pieces kept and gaps alternating (piece, gap, ..., piece)
        self._starts = list(accumulate(map(len, parts[0::2]), initial=0))  # each piece's start in the skeleton
        self._origins = list(accumulate(map(len, parts), initial=0))[0::2]  # and in the text

    def __getitem__(self, j: int) -> int:
        piece = bisect_right(self._starts, j) - 1  # the last piece starting at or before j: not an empty one
        return self._origins[piece] + j - self._starts[piece]


def _skeleton(text: str, gap: re.Pattern[str]) -> tuple[str, _Offsets]:
    """The text without its gap characters, and each remaining character's offset in the text."""
    parts = gap.split(text)
    return "".join(parts[0::2]), _Offsets(parts)


def _occurrences(haystack: str, needle: str) -> Iterator[int]:
    """Every start of `needle` in `haystack`, overlapping ones included."""
    i = haystack.find(needle)
    while i >= 0:
        yield i
        i = haystack.find(needle, i + 1)


def _identifier_candidates(text: str, low: str, identifiers: Sequence[tuple[str, int]]) -> list[Candidate]:
    """Each identifier's characters with only spaces and dashes between them, not inside a longer
    run of letters and digits: "s 1234567 d", "S-1234567-D"."""
    skeleton = _ID_GAP.sub("", low)
    if not any(chars in skeleton for chars, _ in identifiers):
        return []
    skeleton, offsets = _skeleton(low, _ID_GAP)
    n = len(text)
    out = []
    for chars, rank in identifiers:
        for j in _occurrences(skeleton, chars):
            start, end = offsets[j], offsets[j + len(chars) - 1] + 1
            if (start == 0 or not text[start - 1].isalnum()) and (end == n or not text[end].isalnum()):
                out.append((start, rank, end))
    return out


def _phone_candidates(text: str, phones: Sequence[_Phone]) -> list[Candidate]:
    """Every way a phone's pattern (see _phone) matches, found from the occurrences of its last
    MIN_PHONE_DIGITS digits in the note's digits with the grouping characters taken out."""
    skeleton = _PHONE_GAP.sub("", text)
    if not any(p.digits[p.tail_start :] in skeleton for p in phones):
        return []
    skeleton, offsets = _skeleton(text, _PHONE_GAP)
    n = len(text)
    out = []
    for phone in phones:
        digits, tail_start = phone.digits, phone.tail_start
        tail = digits[tail_start:]
        for t in _occurrences(skeleton, tail):
            last = offsets[t + len(tail) - 1] + 1
            if last < n and text[last].isalnum():
                continue
            cores: list[tuple[int, int]] = []  # (core start in the skeleton, order within the phone)
            whole = t - tail_start
            if whole >= 0 and skeleton.startswith(digits, whole):  # a country code, then the whole number
                for order, width in enumerate((3, 2, 1)):  # the code's digits are written together
                    code = whole - width
                    if code >= 0 and skeleton[code:whole].isdecimal() and offsets[whole - 1] - offsets[code] == width - 1:
                        cores.append((code, order))
            for k in range(tail_start + 1):  # maybe a trunk "0", then a tail of at least MIN_PHONE_DIGITS
                j = t - (tail_start - k)
                if j < 0 or not skeleton.startswith(digits[k:tail_start], j):
                    continue
                if j >= 1 and skeleton[j - 1] == "0":
                    cores.append((j - 1, 3 + k))
                cores.append((j, 4 + tail_start + k))
            for j, order in cores:
                rank = phone.rank * 1_000_000 + order
                for start in _phone_starts(text, offsets[j]):
                    out.append((start, rank, last))
    return out


def _phone_starts(text: str, digit: int) -> list[int]:
    """Where a match whose digits start at `digit` may start: up to two of "+(" before it, and no
    letter or digit before that."""
    starts = []
    for start in (digit - 2, digit - 1, digit):
        if start < 0 or any(c not in "+(" for c in text[start:digit]):
            continue
        if start == 0 or not text[start - 1].isalnum():
            starts.append(start)
    return starts


def _digit_candidates(text: str, numbers: Sequence[tuple[str, int]]) -> list[Candidate]:
    """Each digit string where it is a whole run of digits."""
    n = len(text)
    out = []
    for digits, rank in numbers:
        for i in _occurrences(text, digits):
            end = i + len(digits)
            if (i == 0 or not text[i - 1].isdecimal()) and (end == n or not text[end].isdecimal()):
                out.append((i, rank, end))
    return out


def _address_candidates(text: str, low: str, index: _Index) -> list[Candidate]:
    out = _digit_candidates(text, index.postal_codes) if index.postal_codes else []
    if index.units and "#" in text:
        for m in _UNIT_AT.finditer(text):
            rank = index.units.get((m.group(1), m.group(2)))
            if rank is not None:
                out.append((m.start(), rank, m.end()))
    for place in index.places:
        out += _place_candidates(text, low, place)
    return out


def _place_candidates(text: str, low: str, place: _Place) -> list[Candidate]:
    """A street or place name, words separated by whitespace, maybe after "Jalan", "Lorong" and
    maybe before a street word ("Ave 3"); a single word only with one of them."""
    n = len(text)
    out = []
    first, rest = place.words[0], place.words[1:]
    for a in _occurrences(low, first):
        if a > 0 and _is_word(text[a - 1]):
            continue
        b = a + len(first)
        for word in rest:
            gap = b
            while gap < n and text[gap].isspace():
                gap += 1
            if gap == b or not low.startswith(word, gap):
                break
            b = gap + len(word)
        else:
            if b < n and _is_word(text[b]):
                continue
            suffix = _SUFFIX_AT.match(text, b)
            prefix = _prefix_start(text, low, a)
            if prefix is not None:
                out.append((prefix, place.rank, b if place.single or suffix is None else suffix.end()))
            if suffix is not None:
                out.append((a, place.rank, suffix.end()))
            elif not place.single:
                out.append((a, place.rank, b))
    return out


def _prefix_start(text: str, low: str, name: int) -> int | None:
    """Where "Jalan " (or "Jln. ", "Lorong ", "Lor ") ending right before `name` starts, if it does."""
    i = name
    while i > 0 and text[i - 1].isspace():
        i -= 1
    if i == name:
        return None
    if i > 0 and text[i - 1] == ".":
        i -= 1
    for word in _STREET_BEFORE:
        start = i - len(word)
        if start >= 0 and low.startswith(word, start) and (start == 0 or not _is_word(text[start - 1])):
            return start
    return None


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


@lru_cache(maxsize=8192)  # dates recur ("7/22"): each is parsed eight times
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


def _place_pattern(phrase: list[str]) -> str | None:
    """The pattern a place name stands for (what _place_candidates matches), None if too short."""
    name = r"\s+".join(regex.escape(word) for word in phrase) + r"(?!\w)"
    if len(phrase) > 1:
        return rf"(?<!\w)(?:{PREFIX})?{name}(?:{SUFFIX})?"
    if len(phrase[0]) >= MIN_PLACE:
        # One word ("Tampines", "Downing") is too often an ordinary word on its own: only
        # next to a street word ("Tampines St 81", "Jalan Kayu") is it this address.
        return rf"(?<!\w)(?:{PREFIX}{name}|{name}{SUFFIX})"
    return None


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
