"""Spans: what every detector returns, and the union that merges them.

A span never carries the PHI string itself, only offsets into the source text, so spans can be
logged, stored and audited without leaking what they point at.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

import regex

from anonymizer.pickling import by_fields

# A token: a run of letters and digits, the unit in which spans are scored and features counted.
TOKEN = regex.compile(r"[^\W_]+")

# Replacement tags, and the priority used when merged spans disagree on a category: the first
# category in this tuple wins.  The patient's own identity comes first (it is what a re-identifier
# looks for), then the record's exact identifiers, then other people, then dates and places.
CATEGORIES: tuple[str, ...] = (
    "PATIENT",
    "RELATIVE",
    "ID",
    "PHONE",
    "EMAIL",
    "URL",
    "DOCTOR",
    "NAME",
    "AGE",
    "DATE",
    "HOSPITAL",
    "LOCATION",
)
_PRIORITY = {category: rank for rank, category in enumerate(CATEGORIES)}


@dataclass(frozen=True, slots=True, order=True)
class Span:
    """One detection: text[start:end] is PHI of `category`, found by `detector` using `rule`."""

    start: int
    end: int
    category: str
    detector: str
    rule: str = ""

    @property
    def source(self) -> str:
        """The explanation kept for audits, e.g. ``regex:date_dmy_long`` or ``honorific``."""
        return f"{self.detector}:{self.rule}" if self.rule else self.detector


@by_fields
@dataclass(frozen=True, slots=True)
class MergedSpan:
    """A union of overlapping or touching spans, with every detector and rule that fired."""

    start: int
    end: int
    category: str
    sources: tuple[str, ...]


def union(spans: Iterable[Span]) -> list[MergedSpan]:
    """Merge overlapping and touching spans; the category is the highest-priority one present.

    The result is sorted, non-overlapping, and independent of the order of the input.
    """
    ordered = sorted(spans, key=lambda s: (s.start, s.end))
    merged: list[MergedSpan] = []
    group: list[Span] = []
    group_end = -1
    for span in ordered:
        if span.end <= span.start:
            continue
        if group and span.start <= group_end:
            group.append(span)
            group_end = max(group_end, span.end)
            continue
        if group:
            merged.append(_merge(group, group_end))
        group, group_end = [span], span.end
    if group:
        merged.append(_merge(group, group_end))
    return merged


def _merge(group: list[Span], end: int) -> MergedSpan:
    category = min((s.category for s in group), key=lambda c: _PRIORITY.get(c, len(_PRIORITY)))
    sources = tuple(sorted({s.source for s in group}))
    return MergedSpan(group[0].start, end, category, sources)
