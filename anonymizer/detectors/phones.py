"""Phone numbers written without a country code, judged by each configured region's numbering plan.

The regex rules know Singapore's and North America's shapes, and any number after "+" or a phone
label.  A Philippine mobile "0918 555 2044", an Indian landline "080-5555-0199" or a US number
"617/555/0143" has no shape a regular expression can tell from a fluid balance ("750 800 1000");
libphonenumber (the ``phonenumbers`` package) knows each region's plan.  A candidate is a phone
when, for one region of ``[detectors] phone_regions``, it is a valid fixed, mobile, toll-free or
pager number whose digits are exactly the region's national rendering of it (North America's
trunk "1" allowed; a mobile's trunk "0" may be left out when the rest is grouped as the region
groups it).  Premium, shared-cost, personal and VoIP ranges are left out: they are where fluid
balances and counts fall, and hardly anyone's own number.

Cost, on the hot path: a note passes a byte-level precheck (nine digits in a row once spaces, dots,
dashes and brackets are deleted: one ``bytes.translate`` and two ``find``, a few µs; 2 % of nursing
notes pass)
before one compiled expression finds the candidates, and each distinct candidate is judged once
per process (a cache).  libphonenumber's own PhoneNumberMatcher scans at about 0.4 ms per region
and window, twenty times this detector's budget per note, so the candidates are found here and
judged with ``phonenumbers.parse`` and ``is_valid_number``, the checks the matcher applies, with the
national rendering standing for its grouping check.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from functools import lru_cache

import phonenumbers
import regex
from phonenumbers import NumberParseException, PhoneNumberFormat, PhoneNumberType

from anonymizer.record import PatientRecord
from anonymizer.settings import ConfigError
from anonymizer.spans import Span

log = logging.getLogger(__name__)

# Digits to "0"; spaces, dots, dashes and brackets deleted: every candidate leaves nine zeros in a
# row in the translated note, or "000/000/0000" (a slash is kept: the chains of readings that
# hold most of a note's digits, "7.35/40/80", "120-150/60-80", break at it).
_DIGITS = bytes.maketrans(b"0123456789", b"0000000000")
_SEPARATORS = b" \t.-()"
_NINE = b"0" * 9
_SLASHED = b"000/000/0000"
# The separators to one byte (NUL, itself made \x01), to count those deleted before a position.
_MARK = bytes.maketrans(b"\x00" + _SEPARATORS, b"\x01" + b"\x00" * len(_SEPARATORS))
# Characters searched around a hit: before it an opening bracket and the lookbehind's two; after
# its nine digits the rest of the longest candidate, an extension and the lookahead's two.
_BEFORE, _AFTER = 4, 48

# National numbers: groups split by one space, tab or dash ("0918 555 2044", "012-345 6789"), by
# dots alone ("617.555.0143"), by slashes in the US 3/3/4 shape only ("617/555/0143"), an area
# code in brackets ("(02) 9876 5432", "(617) 555-0143"; not a country code, "(65) 6123 4567",
# which is phone_sg's) or no separator at all ("09185552044"); then an optional
# extension.  Not inside a longer chain of numbers ("100 200 300 400 500", "7.35/40/80") nor
# glued to a word, a "+" (phone_international's) or a decimal point.
CANDIDATE = regex.compile(
    r"""
    (?=[\d(])(?<![\w+./:-]|\d[ \t-]|\d\)[ \t]?)
    (?:
        \d{3}/\d{3}/\d{4}
      | \((?:0\d{1,3}|\d{3})\)[ \t]?\d{3,4}[ \t-]?\d{3,4}
      | \d{2,5}(?:\.\d{2,5}){2,3}
      | (?:1[ \t.-])?\d{2,5}(?:[ \t-]\d{2,5}){1,3}
      | \d{9,12}
    )
    (?:[ \t]{0,2}(?:x|ext\.?|extn\.?|extension)[ \t]{0,2}\d{1,5}\b)?
    (?!\w|[./:]\d|[ \t-]{1,2}\d|/\d)
    """,
    regex.IGNORECASE | regex.VERBOSE,
)
_EXTENSION = regex.compile(r"(?i)[ \t]*(?:x|ext|extn|extension)")
_GROUP = regex.compile(r"\d+")

# National numbers hold 9 to 13 digits in these plans (Singapore's eight are phone_sg's).
MIN_DIGITS, MAX_DIGITS = 9, 13
KINDS = frozenset(
    {
        PhoneNumberType.FIXED_LINE,
        PhoneNumberType.MOBILE,
        PhoneNumberType.FIXED_LINE_OR_MOBILE,
        PhoneNumberType.TOLL_FREE,
        PhoneNumberType.PAGER,
    }
)


def check_regions(regions: Sequence[str]) -> tuple[str, ...]:
    """The regions, each one libphonenumber knows (a ConfigError names the first it does not)."""
    for region in regions:
        if region not in phonenumbers.SUPPORTED_REGIONS:
            raise ConfigError(f"detectors.phone_regions: {region!r} is not a region libphonenumber knows (ISO 3166 alpha-2, e.g. 'SG')")
    return tuple(dict.fromkeys(regions))


class PhoneDetector:
    """Flags national phone numbers that are valid in one of the configured regions."""

    def __init__(self, regions: Sequence[str]) -> None:
        self.name = "phones"
        self.regions = check_regions(regions)
        for region in self.regions:  # load each plan now, not on a note: a first parse costs milliseconds
            example = phonenumbers.example_number(region)
            if example is not None:
                phonenumbers.format_number(example, PhoneNumberFormat.NATIONAL)
                phonenumbers.number_type(example)
        # one cache per detector: its verdicts depend on its regions
        self.judge = lru_cache(maxsize=4096)(self._judge)

    def __call__(self, text: str, record: PatientRecord) -> list[Span]:
        """The candidates near the precheck's hits, each judged once per process."""
        if not self.regions:
            return []
        encoded = text.encode("utf-8", "surrogatepass")
        digits = encoded.translate(_DIGITS, _SEPARATORS)
        if digits.find(_NINE) < 0 and digits.find(_SLASHED) < 0:
            return []
        spans = []
        for start, end in _windows(text, encoded, digits):
            for match in CANDIDATE.finditer(text, start, end):
                region = self.judge(match.group())
                if region is not None:
                    spans.append(Span(match.start(), match.end(), "PHONE", self.name, region.lower()))
        return spans

    def _judge(self, candidate: str) -> str | None:
        """The first configured region in whose plan `candidate` is a phone number, or None."""
        main = _EXTENSION.split(candidate, maxsplit=1)[0]
        groups = _GROUP.findall(main)
        digits = "".join(groups)
        if not MIN_DIGITS <= len(digits) <= MAX_DIGITS:
            return None
        for region in self.regions:
            try:
                number = phonenumbers.parse(candidate, region)
            except NumberParseException:
                continue
            if not phonenumbers.is_valid_number(number):
                continue
            kind = phonenumbers.number_type(number)
            if kind not in KINDS:
                continue
            number.extension = None
            national = phonenumbers.format_number(number, PhoneNumberFormat.NATIONAL)
            rendered = _GROUP.findall(national)
            written = "".join(rendered)
            if digits == written or (number.country_code == 1 and digits == "1" + written):
                return region
            if kind == PhoneNumberType.MOBILE and written == "0" + digits and _without_trunk(rendered) == [len(g) for g in groups]:
                return region
        return None


def _without_trunk(groups: list[str]) -> list[int]:
    """The group lengths of a national rendering without its leading trunk "0"."""
    lengths = [len(g) for g in groups]
    if lengths and lengths[0] > 1:
        return [lengths[0] - 1, *lengths[1:]]
    return lengths[1:]


def _windows(text: str, encoded: bytes, digits: bytes) -> list[tuple[int, int]]:
    """The stretches of `text` around the precheck's hits, merged: a candidate lies within one.

    A hit's place in `digits` (the note less its separators) is moved to its place in the note
    by adding the separators deleted before it, counted again until the count stands (a few
    C-level counts).  A note that is not ASCII is searched whole: its bytes are not its characters."""
    if len(encoded) != len(text):
        return [(0, len(text))]
    marked = encoded.translate(_MARK)
    hits = []
    for needle in (_NINE, _SLASHED):
        at = digits.find(needle)
        while at >= 0:
            hits.append(at)
            at = digits.find(needle, at + len(needle))
    windows: list[tuple[int, int]] = []
    for at in sorted(hits):
        place, moved = at, -1
        while place != moved:
            moved, place = place, at + marked.count(0, 0, place + 1)
        start, end = max(0, place - _BEFORE), min(len(text), place + _AFTER)
        if windows and start <= windows[-1][1]:
            windows[-1] = (windows[-1][0], end)
        else:
            windows.append((start, end))
    return windows
