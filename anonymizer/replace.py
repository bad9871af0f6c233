"""Replacement: each merged span becomes a tag for its category, e.g. ``[PATIENT]``."""

from __future__ import annotations

from typing import Sequence

from anonymizer.spans import MergedSpan


def replace_with_tags(text: str, spans: Sequence[MergedSpan]) -> str:
    """Rebuild the text with every span replaced by ``[CATEGORY]``; spans are sorted and disjoint."""
    parts: list[str] = []
    position = 0
    for span in spans:
        parts.append(text[position : span.start])
        parts.append(f"[{span.category}]")
        position = span.end
    parts.append(text[position:])
    return "".join(parts)
