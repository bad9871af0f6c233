"""Replacement: each merged span becomes a tag for its category, e.g. ``[PATIENT]``.

A replacer is called as ``replace(text, spans, record)``; tags ignore the record, surrogates
(:mod:`anonymizer.surrogates`, ``[replace] mode = "surrogates"``) derive everything from it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

from anonymizer.spans import MergedSpan

if TYPE_CHECKING:
    from anonymizer.record import PatientRecord


def replace_with_tags(text: str, spans: Sequence[MergedSpan], record: "PatientRecord | None" = None) -> str:
    """Rebuild the text with every span replaced by ``[CATEGORY]``; spans are sorted and disjoint."""
    parts: list[str] = []
    position = 0
    for span in spans:
        parts.append(text[position : span.start])
        parts.append(f"[{span.category}]")
        position = span.end
    parts.append(text[position:])
    return "".join(parts)
