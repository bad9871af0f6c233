"""One pass over a note for every pattern rule: which rules can match in it at all.

The pattern detector searches a note once per rule; in a typical note four rules of the sixteen
its prechecks let through find something.  RE2 (a finite automaton, linear in the note) matches a
set of expressions in one pass and says which of them matched; a rule it rules out needs no search.

RE2 has no lookarounds, so each rule enters a set rewritten by :func:`screen_expression` into
an expression that matches in an ASCII note wherever the rule does: a lookbehind that opens the
rule (or each branch of the group that opens it) and a lookahead that closes it are matched as
text (what they read is there, just outside the match), every other lookaround and anchor is left
out.  A case-insensitive rule enters the set matched in the lower-cased note (its `lowered`
expression), any other the set matched in the note as written.  The sets therefore answer
"maybe" more often than the rules match, never "no" where one would: the rules themselves still
decide every span.  A rule whose syntax the rewriting does not know, or that RE2 refuses, is
searched as before (its prechecks first).

:class:`WordScreen` does the same for words a detector looks for one by one.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence

import re2
import regex

from anonymizer.detectors.pattern_rules import Rule
from anonymizer.detectors.regex_analysis import COUNT

logger = logging.getLogger(__name__)

SPACE = r"\t\n\x0b\x0c\r "  # what `regex`'s \s matches in an ASCII note (RE2's \s lacks \x0b)
RE2_MAX_REPEAT = 1000  # RE2 refuses a count above this
MEMORY = 64 << 20  # bytes for the set's automaton; a note that needs more is not screened

_LOOKAROUNDS = {"(?<=": (True, False), "(?<!": (True, True), "(?=": (False, False), "(?!": (False, True)}
# A group that only groups, and what it becomes: atomic groups match a subset of what (?: does;
# RE2 reads a case-insensitive group as `regex` does in an ASCII note.
_GROUPS = {"(?:": "(?:", "(?>": "(?:", "(?i:": "(?i:"}
_KEPT_ESCAPES = frozenset("dDwWbBtnrfv")  # mean the same to RE2 in an ASCII note
_DROPPED_ESCAPES = frozenset("KAZ")  # \K only moves a match's start; \A and \Z are anchors

# An item of a sequence: ("atom", RE2 text) for what consumes characters (a group not repeated:
# ("atom", RE2 text, its opening, its alternatives)), ("zero", RE2 text) for \b and \B, ("look",
# behind, negative, RE2 text of its body), or ("drop",): an anchor or \K, which only narrows where
# a match may be.
Item = tuple


class _Unsupported(Exception):
    """Syntax the rewriting does not know: the rule is not screened."""


def screen_expression(expression: str) -> str | None:
    """An RE2 expression that matches in an ASCII note wherever `expression` (`regex` syntax)
    matches there; None for syntax outside what this knows.

    Per top-level alternative: one positive lookbehind before its first character becomes text
    matched before it, one positive lookahead after its last becomes text matched after it (both
    were read there, whatever other assertions stand at the same point); where the alternative
    opens (or closes) with a group instead, the same holds in each of the group's alternatives,
    and the assertions before (or after) the group are left out, as the point they stood at moves.
    Every other lookaround, anchor and \\K is left out, which can only let more through.
    Possessive repeats and atomic groups become plain ones (they match a subset of those); a
    count RE2 refuses (above 1,000) is left open.  \\s is spelled out as `regex` reads it."""
    try:
        alternatives, end = _alternatives(expression, 0)
    except (_Unsupported, IndexError):
        return None
    if end != len(expression):
        return None  # an unbalanced ")"
    return "|".join(_edged(items, lead=True, trail=True)[0] for items in alternatives)


def _edged(items: list[Item], lead: bool, trail: bool) -> tuple[str, bool, bool]:
    """An alternative whose match may be widened at its start (`lead`) and end (`trail`), its
    lookarounds at those edges matched as text (see screen_expression); and whether it widened
    at its start and at its end."""
    atoms = [k for k, item in enumerate(items) if item[0] == "atom"]
    first, last = (atoms[0], atoms[-1]) if atoms else (len(items), -1)
    before = next((item[3] for item in items[:first] if _positive(item, behind=True)), None) if lead else None
    # with no character at all, the looks before and after are the same: the point where both read
    after = next((item[3] for item in items[last + 1 :] if _positive(item, behind=False)), None) if trail else None
    groups: dict[int, str] = {}  # the edge groups, their alternatives widened
    widened = [before is not None, after is not None]
    edges = [(first, lead and before is None, trail and after is None and first == last)]
    if first != last:
        edges.append((last, False, trail and after is None))
    for k, into_lead, into_trail in edges if atoms else ():
        if (into_lead or into_trail) and len(items[k]) == 4:
            edged = [_edged(alternative, into_lead, into_trail) for alternative in items[k][3]]
            groups[k] = items[k][2] + "|".join(text for text, _, _ in edged) + ")"
            widened[0] |= into_lead and any(w for _, w, _ in edged)
            widened[1] |= into_trail and any(w for _, _, w in edged)
    # a lookahead between characters, where the match may end anywhere: what it reads is matched
    # instead of what follows it (written to narrow that, it says more)
    ahead = next((j for j in range(last - 1, first, -1) if _positive(items[j], behind=False)), None) if trail else None
    parts = []
    for k, item in enumerate(items[:ahead]):
        if item[0] == "zero" and ((widened[0] and before is None and k < first) or (widened[1] and after is None and k > last)):
            continue  # asserted where the match started (or ended) before a group widened it
        if item[0] in ("atom", "zero"):
            parts.append(groups.get(k, item[1]))
    if ahead is not None:
        after, widened[1] = items[ahead][3], True
    text = (f"(?:{before})" if before is not None else "") + "".join(parts) + (f"(?:{after})" if after is not None else "")
    return text, widened[0], widened[1]


def _positive(item: Item, behind: bool) -> bool:
    """Whether `item` is a positive lookbehind (`behind`) or lookahead."""
    return item[0] == "look" and item[1] == behind and not item[2]


def _plain(items: list[Item]) -> str:
    """A sequence with its lookarounds and anchors left out: it matches every span it matched."""
    return "".join(item[1] for item in items if item[0] in ("atom", "zero"))


def _alternatives(expression: str, i: int) -> tuple[list[list[Item]], int]:
    """The alternatives from position i up to a ")" or the end, each a list of items."""
    alternatives = []
    while True:
        items, i = _sequence(expression, i)
        alternatives.append(items)
        if not expression.startswith("|", i):
            return alternatives, i
        i += 1


def _sequence(expression: str, i: int) -> tuple[list[Item], int]:
    items: list[Item] = []
    while i < len(expression) and expression[i] not in "|)":
        item, i = _item(expression, i)
        quantifier = COUNT.match(expression, i)
        if quantifier:
            if item[0] != "atom":
                raise _Unsupported("a repeated assertion")
            item = ("atom", item[1] + _count(quantifier))  # a repeated group: its edges are inside the repeat
            i = quantifier.end()
        items.append(item)
    return items, i


def _count(quantifier: regex.Match[str]) -> str:
    """The repeat in RE2's syntax: greedy (which span a repeat prefers does not change whether it
    matches), possessive ones plain, "{,n}" as "{0,n}", a bound RE2 refuses left open."""
    symbol, low, comma, high = quantifier.groups()
    if symbol:
        return symbol
    if not (low or high):
        raise _Unsupported("{} or {,}")
    low_n = min(int(low or 0), RE2_MAX_REPEAT)
    if not comma:
        return f"{{{low_n}}}" if int(low) <= RE2_MAX_REPEAT else f"{{{low_n},}}"
    if not high or int(high) > RE2_MAX_REPEAT:
        return f"{{{low_n},}}"
    return f"{{{low_n},{high}}}"


def _item(expression: str, i: int) -> tuple[Item, int]:
    c = expression[i]
    if c == "\\":
        following = expression[i + 1]
        if following in _DROPPED_ESCAPES:
            return ("drop",), i + 2
        if following in "bB":
            return ("zero", "\\" + following), i + 2
        return ("atom", _escape(following, in_set=False, negated=False)), i + 2
    if c == "[":
        return _set(expression, i)
    if c == "(":
        look = next((prefix for prefix in _LOOKAROUNDS if expression.startswith(prefix, i)), None)
        opening = look or next((group for group in _GROUPS if expression.startswith(group, i)), None)
        if opening is None:
            raise _Unsupported("a capturing, named or flag group")
        alternatives, i = _alternatives(expression, i + len(opening))
        if not expression.startswith(")", i):
            raise _Unsupported("an unclosed group")
        body = "|".join(_plain(items) for items in alternatives)
        if look:
            behind, negative = _LOOKAROUNDS[look]
            return ("look", behind, negative, body), i + 1
        return ("atom", f"{_GROUPS[opening]}{body})", _GROUPS[opening], alternatives), i + 1
    if c in "^$":
        return ("drop",), i + 1
    if c in "?*+{":
        raise _Unsupported("a repeat of nothing or a brace that is not a count")
    return ("atom", c), i + 1


def _escape(following: str, in_set: bool, negated: bool) -> str:
    if following == "s":
        return SPACE if in_set else f"[{SPACE}]"
    if following == "S":
        if negated:
            raise _Unsupported(r"\S in a negated set")  # RE2's \S holds \x0b: negated, it would hold less
        return r"\S" if in_set else f"[^{SPACE}]"
    if following in _KEPT_ESCAPES or not following.isalnum():
        return "\\" + following
    raise _Unsupported(f"\\{following}")


def _set(expression: str, i: int) -> tuple[Item, int]:
    """A character set from its "[", escapes translated; a "]" first in it is a literal."""
    negated = expression.startswith("^", i + 1)
    i += 1 + negated
    out = ["[^" if negated else "["]
    if expression[i] == "]":
        out.append(r"\]")
        i += 1
    while expression[i] != "]":
        if expression[i] == "\\":
            out.append(_escape(expression[i + 1], in_set=True, negated=negated))
            i += 2
        elif expression[i] == "[":
            raise _Unsupported("a nested set")
        else:
            out.append(expression[i])
            i += 1
    return ("atom", "".join(out) + "]"), i + 1


class _Set:
    """Expressions in one RE2 set, matched against one subject: which of them match somewhere."""

    def __init__(self, expressions: Sequence[str | None], memory: int) -> None:
        options = re2.Options()
        options.max_mem = memory
        options.log_errors = False
        self._set = re2.Set.SearchSet(options)
        positions: list[int] = []  # per member of the set, the rule's position
        for position, expression in enumerate(expressions):
            rewritten = None if expression is None else screen_expression(expression)
            if rewritten is None:
                continue
            try:
                self._set.Add(rewritten)
            except re2.error:
                logger.debug("member %d is not screened: RE2 refuses its rewriting", position)
                continue
            positions.append(position)
        # Matches everywhere: a match that fails part way (the automaton out of memory) reports
        # nothing, this included, and the note is then searched unscreened.
        self._sentinel = self._set.Add("")
        try:
            self._set.Compile()
        except re2.error:
            logger.warning("a screen screens nothing: it needs more than %d bytes", memory)
            positions = []
        self.positions = positions

    def matching(self, subject: str) -> set[int] | None:
        """The positions of the members that match in `subject`, None if undecided (and always
        for a set that could not be built: RE2 cannot match with it)."""
        if not self.positions:
            return None
        found = self._set.Match(subject.encode())
        if self._sentinel not in found:
            return None
        positions = self.positions
        return {positions[k] for k in found if k != self._sentinel}


class RuleScreen:
    """The rules' screen expressions in two RE2 sets: the `lowered` expressions of the
    case-insensitive rules, matched in the lower-cased note, and the `cased` ones of the others,
    matched in the note as written (each list holds None for a rule it leaves to the other or to
    no screen).  :meth:`may_match` gives the positions (in those lists) of the rules that may
    match in an ASCII note."""

    def __init__(self, lowered: Sequence[str | None], cased: Sequence[str | None] = (), memory: int = MEMORY) -> None:
        self._sets = [(members, is_lowered) for members, is_lowered in ((_Set(lowered, memory), True), (_Set(cased, memory), False))
                      if members.positions]
        self.screened = frozenset(position for members, _ in self._sets for position in members.positions)

    @classmethod
    def for_rules(cls, rules: Sequence[Rule], memory: int = MEMORY) -> RuleScreen:
        """The screen of `rules`, positions as in that list: the lowered expression of a
        case-insensitive rule, the expression itself of the others."""
        return cls([None if rule.lowered is None else rule.lowered.pattern for rule in rules],
                   [rule.source if rule.lowered is None else None for rule in rules], memory)

    def may_match(self, text: str, lower: str) -> set[int] | None:
        """The positions of the screened rules that may match in `text` (an ASCII note) and
        `lower` (the same, lower-cased), or None when a set could not decide: every rule is then
        searched."""
        if not self._sets:
            return None
        found: set[int] = set()
        for members, is_lowered in self._sets:
            matched = members.matching(lower if is_lowered else text)
            if matched is None:
                return None
            found |= matched
        return found


class WordScreen:
    """Which of some words (or phrases) may stand as whole words in a note, in one RE2 pass: a
    detector that looks for each of them by str.find then tests the characters around it
    (anonymizer.detectors.whole_words) looks only for those.  A word's edges that are letters or
    digits must be word boundaries there; RE2 reads its boundaries in ASCII, so in other text it
    lets more through, never less."""

    def __init__(self, words: Iterable[str], memory: int = MEMORY) -> None:
        self._words = list(dict.fromkeys(words))
        self._set = _Set([_bounded(word) for word in self._words], memory)
        self._unscreened = frozenset(self._words) - {self._words[k] for k in self._set.positions}

    def present(self, low: str) -> frozenset[str] | None:
        """The words that may stand whole in `low`; None when the set could not decide."""
        found = self._set.matching(low)
        return None if found is None else self._unscreened.union(self._words[k] for k in found)


def _bounded(word: str) -> str:
    """`word` as an expression, between word boundaries where its edges are ASCII letters or digits."""
    edge = r"\b" if word[:1].isascii() and word[:1].isalnum() else ""
    end = r"\b" if word[-1:].isascii() and word[-1:].isalnum() else ""
    return edge + re2.escape(word) + end
