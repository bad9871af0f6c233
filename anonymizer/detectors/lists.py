"""Known doctors, hospitals and places (seed 003, section 3.4), matched wherever they occur.

Lists can hold tens of thousands of entries, so they are compiled once per run into a single
pattern shaped as a character trie: the regex engine then follows one branch per letter instead of
trying every entry at every position, and nested greedy groups make the longest entry win.  The
pattern is compiled with the standard library's `re`, which searches such a trie about a hundred
times faster than the `regex` module does.  An ASCII note is searched lower-cased, by a copy of
the pattern that need not ignore case: the same matches, in about a third of the time.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Iterable, Mapping

from anonymizer.record import PatientRecord
from anonymizer.settings import read_text_file
from anonymizer.spans import CATEGORIES, Span

logger = logging.getLogger(__name__)

MIN_LENGTH = 3  # shorter entries ("Dr", "SG") would match all over ordinary text
MAX_LENGTH = 200  # longer lines are not names, and would nest the pattern too deeply
_SPACES = re.compile(r"\s+")
_PRIORITY = {category: rank for rank, category in enumerate(CATEGORIES)}


def load_list_file(path: Path | str) -> list[str]:
    """Read one entry per line; blank lines and lines starting with '#' are skipped.

    Only whole-line comments: a '#' inside an entry ("Blk 5 #02-01") is part of it.  A file that
    is not UTF-8 text (Latin-1, binary) is refused naming its first bad line, never quoting it:
    guessing its encoding would miss the entries it garbles.
    """
    text = read_text_file(path, "list file")
    return [line.rstrip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def _key(entry: str) -> str:
    """The form entries are compared in: lower case (as `re` ignores case), single spaces."""
    return _SPACES.sub(" ", entry.strip()).lower()


class ListDetector:
    """Flags every occurrence, on word boundaries and ignoring case, of an entry of any list."""

    def __init__(self, entries: Mapping[str, Iterable[str]]) -> None:
        self.name = "lists"
        self._category = _categorise(entries)
        self._pattern: re.Pattern[str] | None = None
        self._lower: re.Pattern[str] | None = None  # for lower-cased ASCII notes
        self._fallback = ""
        if self._category:
            body = rf"(?<!\w){_trie_pattern(self._category)}(?!\w)"
            self._pattern, self._lower = re.compile("(?i)" + body), re.compile(body)
            # A match whose lower case differs from its entry's ("ſ" matches "s" ignoring case)
            # still gets a category: the highest-priority one of the lists.
            self._fallback = min(self._category.values(), key=_rank)

    def __call__(self, text: str, record: PatientRecord) -> list[Span]:
        if self._pattern is None:
            return []
        spans = []
        # On ASCII text lower-casing keeps every offset, and ignoring case means lower-casing.
        matches = self._lower.finditer(text.lower()) if text.isascii() else self._pattern.finditer(text)
        for match in matches:
            category = self._category.get(_key(match.group()), self._fallback)
            spans.append(Span(match.start(), match.end(), category, self.name, category.lower()))
        return spans


def _rank(category: str) -> int:
    return _PRIORITY.get(category, len(_PRIORITY))


def _categorise(entries: Mapping[str, Iterable[str]]) -> dict[str, str]:
    """Map each usable entry's key to its category; log how many entries were unusable."""
    categories: dict[str, str] = {}
    for category, values in entries.items():
        ignored = 0
        for value in values:
            key = _key(value)
            if not MIN_LENGTH <= len(key) <= MAX_LENGTH:
                ignored += 1
            elif key not in categories or _rank(category) < _rank(categories[key]):
                # An entry in two lists keeps the category that wins when spans are merged.
                categories[key] = category
        if ignored:
            logger.info(
                "lists: ignored %d %s entries shorter than %d or longer than %d characters",
                ignored, category, MIN_LENGTH, MAX_LENGTH,
            )
    return categories


def _trie_pattern(keys: Iterable[str]) -> str:
    """One regex matching any of `keys`, longest first; a space in a key matches any whitespace."""
    trie: dict[str, dict] = {}
    for key in keys:
        node = trie
        for char in key:
            node = node.setdefault(char, {})
        node[""] = {}  # an entry ends here
    return _node_pattern(trie)


def _node_pattern(node: dict[str, dict]) -> str:
    branches = [(r"\s+" if char == " " else re.escape(char)) + _node_pattern(child)
                for char, child in sorted(node.items()) if char]
    if not branches:
        return ""
    body = branches[0] if len(branches) == 1 else f"(?:{'|'.join(branches)})"
    # Greedy: try to go on to a longer entry first, and fall back to the one ending here.
    return f"(?:{body})?" if "" in node else body
