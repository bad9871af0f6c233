r"""The view of a note that detectors match: what a reader sees, mapped back to the stored text.

Invisible characters and compatibility forms hide PHI from a matcher and not from a reader:
``Ta\u200bn Wei Ming`` reads "Tan Wei Ming", ``Ｓ１２３４５６７Ｄ`` reads as an NRIC.  :func:`normalize`
removes the characters that render as nothing (format characters, Unicode category Cf: zero-width
spaces, soft hyphens, bidi controls, ...; and the other default-ignorable code points: variation
selectors, the grapheme joiner, fillers) and folds compatibility forms with NFKC (full-width letters
and digits, ligatures, circled digits, ...).  Every character of the view keeps the stretch of the
original it came from, so a span found in the view cuts the original exactly.

A stretch is one character with the combining marks after it (NFKC composes within it) and the
invisible characters after it (so a span ending before them covers them, and two spans touching in
the view touch in the original).  At most ``MAX_MARKS`` marks join one stretch (the stream-safe
limit of UAX #15): NFKC's reordering of marks is quadratic in their number, the stretches keep the
whole linear in the note's length.
"""

from __future__ import annotations

import unicodedata
from array import array
from dataclasses import dataclass
from typing import Sequence

import regex

from anonymizer.spans import Span

_INV = r"[\p{Cf}\p{Default_Ignorable_Code_Point}]"
INVISIBLE = regex.compile(_INV)
_INVISIBLE_RUN = regex.compile(rf"{_INV}+")
MAX_MARKS = 30
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

    `starts[i]:ends[i]` is the stretch of `original` that `text[i]` came from (None when `text` is
    `original`); `removed`: whether invisible characters were taken out.
    """

    original: str
    text: str
    starts: array | None = None
    ends: array | None = None
    removed: bool = False

    def span(self, start: int, end: int) -> tuple[int, int]:
        """The stretch of the original that `text[start:end]` (not empty) came from."""
        if self.starts is None:
            return start, end
        return self.starts[start], self.ends[end - 1]

    def to_original(self, spans: Sequence[Span]) -> Sequence[Span]:
        """The spans, found in `text`, as offsets into `original` (empty spans are dropped)."""
        if self.starts is None:
            return spans
        starts, ends = self.starts, self.ends
        return [Span(starts[s.start], ends[s.end - 1], s.category, s.detector, s.rule) for s in spans if s.end > s.start]

    def widen(self, spans: Sequence[Span]) -> list[Span]:
        """Spans found in `original`, each taking the invisible characters right after it (as the
        view's spans do), so that two spans with only those between them touch."""
        widened = []
        for s in spans:
            after = _INVISIBLE_RUN.match(self.original, s.end)
            widened.append(s if after is None else Span(s.start, after.end(), s.category, s.detector, s.rule))
        return widened


def normalize(text: str) -> NormalizedText:
    """The reader's view of `text`: invisible characters removed, compatibility forms folded (NFKC)."""
    if text.isascii() or (INVISIBLE.search(text) is None and unicodedata.is_normalized("NFKC", text)):
        return NormalizedText(text, text)
    return _fold(text)


def _fold(text: str) -> NormalizedText:
    parts: list[str] = []
    starts, ends = array("q"), array("q")
    begin, removed = 0, False  # begin: where the next stretch starts (invisible characters in front join it)
    for match in _STRETCH.finditer(text):
        i, j = match.span()
        if match.lastgroup == "plain":
            parts.append(match.group())
            starts.extend(range(i, j))
            ends.extend(range(i + 1, j + 1))
            starts[i - j] = begin  # the first of them takes any invisible characters in front
            begin = j
            continue
        piece = match.group()
        kept = INVISIBLE.sub("", piece)
        removed = removed or len(kept) < len(piece)
        if kept:
            folded = unicodedata.normalize("NFKC", kept)
            parts.append(folded)
            starts.extend([begin] * len(folded))
            ends.extend([j] * len(folded))
            begin = j
    return NormalizedText(text, "".join(parts), starts, ends, removed)
