"""The surrogate replacer: per-patient state, one maker per category, and the leak check."""

from __future__ import annotations

import datetime as dt
import hashlib
import hmac
import math
import os
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import regex
from rapidfuzz.distance import Levenshtein

from anonymizer.detectors.names import SHORT, RecordNames
from anonymizer.detectors.values import ADDRESS_WORDS, STREET_AFTER, STREET_BEFORE, RecordValues
from anonymizer.normalize import normalize
from anonymizer.record import PatientRecord, per_record
from anonymizer.resources import read_word_list
from anonymizer.settings import ConfigError, ReplaceConfig
from anonymizer.spans import MergedSpan
from anonymizer.surrogates.dates import (
    DAYS_PER_MONTH,
    TOKEN,
    ParsedDate,
    date_orders,
    nearest_date,
    parse_date,
    render_date,
    shift_days,
    valid_date,
)
from anonymizer.surrogates.lists import SurrogateLists
from anonymizer.surrogates.shapes import NRIC, Keyed, example_domain, like, like_phrase, nric_check_letter, scramble

NAME_CATEGORIES = frozenset({"PATIENT", "RELATIVE", "DOCTOR", "NAME"})
MAX_ATTEMPTS = 12  # candidates tried before a span falls back to its tag
LEAK_ROUNDS = 6  # rounds of leak checks over a note before flagged replacements fall back to tags
WINDOW = 40  # characters around a replacement the leak check reads (longer than a record value usually is)
SEPARATOR = " | "  # between windows: no name, phone, identifier, date or address pattern runs across it

WORD = regex.compile(r"[^\W\d_]+")  # as the names detector splits words
# A location's words that are not names of a place: kept as they are ("Blk", "Avenue", "Singapore").
KEEP_PLACE_WORDS = ADDRESS_WORDS | {"jln", "lor", "apt", "no", "nos", "rm", "room", "ward", "bed"}
# A country code written as one: "+65", "0065", "(65)"; known codes first, so "+6591234567" keeps "+65".
COUNTRY_CODES = "65|60|62|63|66|84|86|852|853|886|91|92|94|880|81|82|61|64|44|353|49|33|31|41|971|966|1|7"
PHONE_PREFIX = regex.compile(rf"^\s*(?:(?:\+|00)[ \t]?(?:{COUNTRY_CODES}|\d{{1,3}})|\(\+?(?:{COUNTRY_CODES}|\d{{1,3}})\))")
IP_ADDRESS = regex.compile(r"\d{1,3}(?:\.\d{1,3}){3}")
URL_HOST = regex.compile(r"(?i)^((?:https?|ftp)://)?(www\.)?([^/\s?#]+)(.*)$", regex.DOTALL)


def read_secret(variable: str) -> bytes:
    """The surrogate key from the environment; a missing, empty or guessable one is a ConfigError.

    A weak key is as good as none: with one known date pair, trying every short key recovers it and
    with it every patient's date shift and names.  Hence at least SECRET_BITS bits, estimated from
    the key's length and the smallest alphabet that spells it (32 hex characters, 22 of base64).
    """
    value = os.environ.get(variable, "")
    if not value:
        raise ConfigError(
            f'replace.mode = "surrogates" needs a secret key in the environment variable {variable} '
            f"(make one with `{MAKE_SECRET}` and keep it safe: the same key gives the same surrogates)"
        )
    if secret_bits(value) < SECRET_BITS:
        raise ConfigError(
            f"{variable}: the secret key is too weak (under {SECRET_BITS} bits, e.g. fewer than 32 hex characters); "
            f"make one with `{MAKE_SECRET}`"
        )
    return value.encode("utf-8")


SECRET_BITS = 128
MAKE_SECRET = "openssl rand -hex 32"
_ALPHABETS = (  # smallest first: a key is credited with the first one that spells it
    (10, frozenset("0123456789")),
    (16, frozenset("0123456789abcdef")),
    (16, frozenset("0123456789ABCDEF")),
    (26, frozenset("abcdefghijklmnopqrstuvwxyz")),
    (26, frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZ")),
    (36, frozenset("0123456789abcdefghijklmnopqrstuvwxyz")),
    (36, frozenset("0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ")),
    (64, frozenset("0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ+/=-_")),
    (95, frozenset(chr(c) for c in range(32, 127))),
)


def secret_bits(value: str) -> float:
    """An upper bound on a key's strength: its length times the bits of the smallest alphabet that
    spells it; a key of fewer than 8 distinct characters ("aaaa…", "abab…") is not random: 0."""
    chars = set(value)
    if len(chars) < 8:
        return 0.0
    size = next((n for n, alphabet in _ALPHABETS if chars <= alphabet), 2**16)
    return len(value) * math.log2(size)


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
        leak_detectors: Sequence,
        lists: SurrogateLists | None = None,
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
        self._leak_detectors = list(leak_detectors)
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
        # Each span as a reader sees it (and as the detectors found it): "Ta\u200bn" is "Tan".
        found = [normalize(text[s.start : s.end]).text for s in spans]
        dates = {i: self._parse(state, found[i], s.sources) for i, s in enumerate(spans) if s.category == "DATE"}
        anchors = [(spans[i].start, p) for i, p in dates.items() if p is not None and p.month and p.year]
        makers = [self._maker(s, found[i], state, dates.get(i), anchors) for i, s in enumerate(spans)]
        attempts = [0] * len(spans)
        out = [self._candidate(makers[i], found[i], attempts, i, s.category) for i, s in enumerate(spans)]
        # What `audit leaks` would flag in the released note is replaced by the next candidate: one
        # scan of the note per round, of the windows around the replacements that could leak.
        for _ in range(LEAK_ROUNDS):
            bad = self._leaking(text, spans, out, record)
            if not bad:
                return [value for value, _ in out]
            for i in bad:
                attempts[i] += 1
                out[i] = self._candidate(makers[i], found[i], attempts, i, spans[i].category)
        for i in self._leaking(text, spans, out, record):
            out[i] = (f"[{spans[i].category}]", False)
        return [value for value, _ in out]

    @staticmethod
    def _parse(state: PatientState, text: str, sources: Sequence[str]) -> ParsedDate | None:
        key = ("parsed", text, *date_orders(sources))
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
        simple = {
            "ID": self._identifier,
            "PHONE": self._phone,
            "EMAIL": self._email,
            "URL": self._url,
            "HOSPITAL": self._hospital,
            "LOCATION": self._location,
        }.get(category)
        if simple is not None:
            return lambda attempt: (simple(original, state, attempt), True)
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
            new = shift_days(parsed.year, parsed.month, parsed.day, days)
            return render_date(parsed, new.day, new.month, new.year), True
        if parsed.order in ("dm", "md"):
            year = nearest_date(anchors, start, lambda p: p.year) or (2000 if (parsed.month, parsed.day) == (2, 29) else 2001)
            if not valid_date(parsed.day, parsed.month, year):
                year = 2000
            new = shift_days(year, parsed.month, parsed.day, days)
            return render_date(parsed, new.day, new.month, None), True
        if parsed.order == "d":
            near = nearest_date(anchors, start, lambda p: (p.year, p.month)) or (2001, 1)
            year, month = near if valid_date(parsed.day, near[1], near[0]) else (2001, 1)
            new = shift_days(year, month, parsed.day, days)
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
            return scramble(original, state.keyed, ("id letters", compact, attempt))
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
            else scramble(t, state.keyed, ("email", t.casefold(), attempt)) if t[0].isalnum() else t
            for t in TOKEN.findall(local)
        )
        return f"{new_local}@{example_domain(domain)}"

    def _url(self, original: str, state: PatientState, attempt: int) -> str:
        if IP_ADDRESS.fullmatch(original):
            n = state.keyed.bytes("ip", original, attempt)
            return f"10.{n[0]}.{n[1]}.{max(1, n[2] % 255)}"
        match = URL_HOST.match(original)
        scheme, www, host, rest = match.groups() if match else ("", "", original, "")
        rest = "".join(
            scramble(t, state.keyed, ("url", t.casefold(), attempt)) if t[0].isalnum() else t for t in TOKEN.findall(rest)
        )
        return f"{scheme or ''}{www or ''}{like_phrase(example_domain(host), host)}{rest}"

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
            while (
                j + 2 < len(tokens)
                and tokens[j + 1].isspace()
                and tokens[j + 2][0].isalpha()
                and tokens[j + 2].casefold() not in KEEP_PLACE_WORDS
            ):
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


def _age(original: str) -> tuple[str | None, bool]:
    match = regex.search(r"\d+", original)
    if match is None:
        return None, True
    if int(match.group()) < 90:
        return original, False  # not PHI under HIPAA: kept
    return original[: match.start()] + "90+" + original[match.end() :], True


def build_replacer(
    config: ReplaceConfig,
    rules_dir: Path,
    date_pattern: regex.Pattern[str],
    name_threshold: float,
    leak_detectors: Sequence | None = None,
) -> SurrogateReplacer:
    """The surrogate replacer for a run; raises ConfigError (nothing written yet) without the secret.

    `leak_detectors`: the record detectors its surrogates are checked with; by default built by
    :func:`anonymizer.registry.record_detectors`, as the run and ``audit leaks`` build them."""
    secret = read_secret(config.secret_env)
    if leak_detectors is None:
        from anonymizer.registry import record_detectors

        leak_detectors = record_detectors(rules_dir, name_threshold, date_pattern)
    return SurrogateReplacer(secret, config, rules_dir, date_pattern, name_threshold, leak_detectors)
