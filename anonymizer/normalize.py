r"""The view of a note that detectors match: what a reader sees, mapped back to the stored text.

Invisible characters and compatibility forms hide PHI from a matcher and not from a reader:
``Ta\u200bn Wei Ming`` reads "Tan Wei Ming", ``Ｓ１２３４５６７Ｄ`` reads as an NRIC.  :func:`normalize`
removes the characters that render as nothing (format characters, Unicode category Cf: zero-width
spaces, soft hyphens, bidi controls, ...; and the other default-ignorable code points: variation
selectors, the grapheme joiner, fillers) and folds compatibility forms with NFKC (full-width letters
and digits, ligatures, circled digits, ...).  Every character of the view keeps the stretch of the
original it came from, so a span found in the view cuts the original exactly.  Typographic dashes
and quotes ("–", "’") are read as the ASCII ones, one character for one.

A stretch is one character with the combining marks after it (NFKC composes within it) and the
invisible characters after it (so a span ending before them covers them, and two spans touching in
the view touch in the original).  At most ``MAX_MARKS`` marks join one stretch (the stream-safe
limit of UAX #15): NFKC's reordering of marks is quadratic in their number, the stretches keep the
whole linear in the note's length.
"""

from __future__ import annotations

import unicodedata
from bisect import bisect_right
from dataclasses import dataclass
from typing import Sequence

import regex

from anonymizer.spans import Span

_INV = r"[\p{Cf}\p{Default_Ignorable_Code_Point}]"
INVISIBLE = regex.compile(_INV)
_INVISIBLE_RUN = regex.compile(rf"{_INV}+")
MAX_MARKS = 30
# Part of every note's source digest (the pipeline's): a change to the view changes what the
# detectors see, so the next run redoes every note written under the previous one.
VERSION = 2
# Typographic dashes and quotes read as the ASCII ones the rules are written with: "9123–4567" is a
# phone as "9123-4567" is, "O’Brien" a name as "O'Brien" (one character for one: offsets hold).
TYPOGRAPHIC = str.maketrans(
    {"\u2010": "-", "\u2011": "-", "\u2012": "-", "\u2013": "-", "\u2014": "-", "\u2212": "-",
     "\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"'}
)
# What NFKC may join to the character before it: combining marks, and the few others it composes.
_JOINS = r"(?:\P{Canonical_Combining_Class=0}|\p{NFKC_Quick_Check=Maybe})"
# Characters NFKC leaves alone whatever surrounds them, and that are not invisible.
_STABLE = rf"[[\p{{NFKC_Quick_Check=Yes}}&&\p{{Canonical_Combining_Class=0}}]--{_INV}]"
_STRETCH = regex.compile(
    rf"(?V1s)(?P<plain>{_STABLE}+(?!{_INV}|{_JOINS}))"  # a run of stretches of one character each
    rf"|.{_INV}*+(?:{_JOINS}{_INV}*+){{0,{MAX_MARKS}}}+"
)


@dataclass(frozen=True, slots=True)
class NormalizedText:
    """`text`, what detectors match, and where each of its characters came from in `original`.

    `removed`: whether invisible characters were taken out.  The map (None when `text` is
    `original`) is piecewise, one piece per run of characters copied as they are and one per
    folded stretch: piece k begins at `text[at[k]]` and at `original[origin[k]]`; a copied piece
    (`end[k]` is -1) maps one character to one, every character of a folded one came from
    `original[origin[k]:end[k]]`.  A span is mapped with two binary searches.
    """

    original: str
    text: str
    removed: bool = False
    at: tuple[int, ...] | None = None
    origin: tuple[int, ...] | None = None
    end: tuple[int, ...] | None = None

    def stretch(self, i: int) -> tuple[int, int]:
        """The stretch of `original` that `text[i]` came from."""
        if self.at is None:
            return i, i + 1
        k = bisect_right(self.at, i) - 1
        if self.end[k] < 0:
            start = self.origin[k] + i - self.at[k]
            return start, start + 1
        return self.origin[k], self.end[k]

    def span(self, start: int, end: int) -> tuple[int, int]:
        """The stretch of `original` that `text[start:end]` (not empty) came from."""
        if self.at is None:
            return start, end
        return self.stretch(start)[0], self.stretch(end - 1)[1]

    def to_original(self, spans: Sequence[Span]) -> Sequence[Span]:
        """The spans, found in `text`, as offsets into `original` (empty spans are dropped)."""
        if self.at is None:
            return spans
        return [Span(*self.span(s.start, s.end), s.category, s.detector, s.rule) for s in spans if s.end > s.start]

    def widen(self, spans: Sequence[Span]) -> list[Span]:
        """Spans found in `original`, each taking the invisible characters right after it (as the
        view's spans do), so that two spans with only those between them touch."""
        widened = []
        for s in spans:
            after = _INVISIBLE_RUN.match(self.original, s.end)
            widened.append(s if after is None else Span(s.start, after.end(), s.category, s.detector, s.rule))
        return widened


def normalize(text: str) -> NormalizedText:
    """The reader's view of `text`: invisible characters removed, compatibility forms folded (NFKC),
    typographic dashes and quotes as ASCII ones."""
    if text.isascii():
        return NormalizedText(text, text)
    if INVISIBLE.search(text) is None and unicodedata.is_normalized("NFKC", text):
        return NormalizedText(text, text.translate(TYPOGRAPHIC))
    return _fold(text)


def _fold(text: str) -> NormalizedText:
    parts: list[str] = []
    pieces: list[tuple[int, int, int]] = []  # (at, origin, end) as in NormalizedText
    length, begin, removed = 0, 0, False  # begin: where the next stretch starts (invisible characters in front join it)
    for match in _STRETCH.finditer(text):
        i, j = match.span()
        if match.lastgroup == "plain":
            if begin < i:  # the first character takes the invisible characters in front of it
                pieces.append((length, begin, i + 1))
                length, i = length + 1, i + 1
            if i < j:
                pieces.append((length, i, -1))
                length += j - i
            parts.append(match.group())
            begin = j
            continue
        piece = match.group()
        kept = INVISIBLE.sub("", piece)
        removed = removed or len(kept) < len(piece)
        if kept:
            folded = unicodedata.normalize("NFKC", kept)
            parts.append(folded)
            pieces.append((length, begin, j))
            length += len(folded)
            begin = j
    at, origin, end = zip(*pieces) if pieces else ((), (), ())
    return NormalizedText(text, "".join(parts).translate(TYPOGRAPHIC), removed, at, origin, end)
