"""Dates of a note read into day, month and year, shifted, and written back in their own format."""

from __future__ import annotations

import calendar
import datetime as dt
from dataclasses import dataclass, field
from typing import Callable, Iterable, Sequence

import regex

from anonymizer.surrogates.shapes import like

DAYS_PER_MONTH = 365.2425 / 12
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
YEAR_RULES = frozenset({"regex:year_after_event"})  # their match is a year even as two bare digits ("MI 92")


@dataclass
class ParsedDate:
    """A date span cut into tokens, with the token index of each part it writes."""

    tokens: list[str]
    kinds: list[str]  # num, month, weekday, ord, decade, word, sep, time (a timestamp's, kept)
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


def valid_date(day: int | None, month: int | None, year: int | None) -> bool:
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
    if "T" in tokens:  # an ISO 8601 timestamp ("2023-11-02T08:15:00Z"): its time is kept as written
        at = tokens.index("T")
        if 0 < at < len(kinds) - 1 and kinds[at - 1] == kinds[at + 1] == "num":
            kinds[at:] = ["time"] * (len(kinds) - at)
    comps = [i for i, k in enumerate(kinds) if k in ("num", "month")]
    if not comps or len(comps) > 3 or sum(k == "month" for k in kinds) > 1:
        return None
    readings: list[ParsedDate] = []
    if len(comps) == 1 and kinds[comps[0]] == "num" and len(tokens[comps[0]]) in COMPACT_LAYOUTS:
        token = tokens[comps[0]]
        for layout in COMPACT_LAYOUTS[len(token)]:
            parts = {c: token[layout.index(c * 2) : layout.index(c * 2) + layout.count(c)] for c in "dmy"}
            day, month, year = int(parts["d"]), int(parts["m"]), _year(parts["y"])
            if valid_date(day, month, year):
                readings.append(ParsedDate(tokens, kinds, "c", day, month, year, {"c": comps[0]}, layout))
    else:
        orders = list(dict.fromkeys([o for o in preferred if len(o) == len(comps)] + list(SHAPE_ORDERS[len(comps)])))
        for order in orders:
            reading = _read(tokens, kinds, comps, order, bare_year=order == "y" and "y" in preferred)
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


def _read(tokens: list[str], kinds: list[str], comps: list[int], order: str, bare_year: bool = False) -> ParsedDate | None:
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
            elif len(token) == 2 and (len(order) > 1 or apostrophe or decade or bare_year):
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
    if not valid_date(day, month, year):
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



def date_orders(sources: Sequence[str]) -> list[str]:
    return [m.group(1) for source in sources if (m := DATE_RULE.match(source))] + ["y" for source in sources if source in YEAR_RULES]


def shift_days(year: int, month: int, day: int, days: int) -> dt.date:
    try:
        return dt.date(year, month, day) - dt.timedelta(days=days)
    except OverflowError:
        return dt.date(year, month, day) + dt.timedelta(days=days)


def nearest_date(anchors: list[tuple[int, ParsedDate]], start: int, value: Callable[[ParsedDate], object]):
    """The value of the nearest date before `start` that has it (else the nearest after)."""
    before = [p for s, p in anchors if s < start]
    after = [p for s, p in anchors if s > start]
    for group in (reversed(before), after):
        for parsed in group:
            return value(parsed)
    return None
