"""Analysis of the rules' regular expressions, for speed: pure functions of an expression's text.

The pattern detector (anonymizer.detectors.patterns) searches every note with every rule; these
functions decide, once per run and never per note, how a search can be made cheaper without
changing what it finds:

* :func:`lowered`: a case-insensitive expression rewritten for the lower-cased copy of an ASCII
  note, which `regex` searches about twice as fast without ignoring case;
* :func:`work_bound`: at most how many matcher steps a search takes from one position, so that a
  provably small search needs no clock for the note's time budget;
* :func:`standard`: a precheck compiled by the standard library's `re`, where that is faster;
* :func:`numeric`: whether a precheck can search the note's numeric runs (:func:`numeric_runs`)
  instead of the whole note;
* :func:`alternation`: a list of words as one group factored as a trie (titles, cues, suffixes).

Each is conservative: syntax outside what it can prove gives the slow, always-correct answer.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable

import regex

# A search of at most this many matcher steps (work_bound x positions) runs without regex's clock:
# some milliseconds, checked against the deadline before the next search.
UNTIMED_STEPS = 1_000_000

_SAME_ESCAPES = frozenset("dDwWsSbBtnrfvKAZ")  # letters after a backslash that mean the same in either case
_GROUPS = ("(?:", "(?=", "(?!", "(?<=", "(?<!", "(?>")


def lowered(source: str) -> regex.Pattern[str] | None:
    """A case-insensitive expression `(?i:...)` rewritten to match the same spans in the lower-cased
    copy of an ASCII note, case-sensitively: its letters lower-cased, escapes and group syntax kept.

    `regex` matches letters case-insensitively about half as fast, and a lower-cased ASCII note
    keeps every offset.  In an ASCII note a letter of either case is its lower case, so a literal
    letter, a set and a range of one case mean the same there.  None (the note itself is then
    searched) for a case-sensitive expression and for syntax outside that proof: escapes such as
    \\x or \\p, inline flags, named groups, nested sets, a range across cases or from an escape,
    a non-ASCII letter or cased character, fuzzy matching.
    """
    if not (source.startswith("(?i:") and source.endswith(")")):
        return None
    body = source[4:-1]
    out: list[str] = []
    in_set = False
    i = 0
    while i < len(body):
        c, following = body[i], body[i + 1 : i + 2]
        if c == "\\":
            if following.isalnum() and following not in _SAME_ESCAPES:
                return None
            out.append(c + following)
            i += 2
            continue
        if not c.isascii() and (c.isalpha() or c.swapcase() != c):
            return None
        if c == "{" and not in_set and following not in tuple("0123456789,"):
            return None  # fuzzy matching, not a repeat
        if in_set:
            opening = out[-1] in ("[", "[^")  # "]" or "-" there is a literal
            if c == "[":
                return None
            if c == "-" and not opening and following != "]":  # a range out[-1]-following
                low = body[i - 1] if len(out[-1]) == 1 else None
                if low is None or ((low.isalpha() or following.isalpha()) and not (
                        low.isalpha() and following.isalpha() and low.isupper() == following.isupper())):
                    return None
            in_set = c != "]" or opening
        elif c == "[":
            in_set = True
            c = "[^" if following == "^" else c
        elif c == "(" and following == "?":
            c = next((group for group in _GROUPS if body.startswith(group, i)), "")
            if not c:
                return None
        out.append(c.lower())
        i += len(c)
    return regex.compile("".join(out))


# What `re` and `regex` read alike in a lower-cased ASCII note: printable ASCII but "\\" and "(",
# escapes \d \D \b \B \t \n and of punctuation, groups (?: (?= (?! (?<= (?<!.  Not \s: `re`'s also
# matches \x1c-\x1f.
_STANDARD_SYNTAX = re.compile(r"(?:\\[dDbBtn]|\\[^\w\s]|\((?:\?(?:[:=!]|<[=!])|(?!\?))|[ -')-\[\]-~])*")
_OPENS_WITH_A_LETTER = re.compile(r"(?:\(\?:)*[a-z]")


def standard(expression: str) -> re.Pattern[str] | None:
    """A `lowered` expression compiled by the standard library's `re`, for a precheck that opens
    with a letter; None for any other and for syntax outside _STANDARD_SYNTAX.

    `re` skips ahead to the first letters of an alternation of words, where `regex` tries them at
    every position: the month-name precheck took 0.010 instead of 0.026 ms a note.  `regex` skips
    to digits faster (half the time for \\d{7}), so an expression opening otherwise stays with it.
    Both are backtracking engines with the same semantics for this syntax; possessive repeats and
    atomic groups are left out all the same, and `re` refuses a lookbehind of varying width.  `re`
    has no timeout: use it only where work_bound proves the search small.
    """
    if not _OPENS_WITH_A_LETTER.match(expression) or not _STANDARD_SYNTAX.fullmatch(expression):
        return None
    if re.search(r"[?*+}]\+|\(\?>", expression):
        return None
    try:
        return re.compile(expression)
    except re.error:
        return None


# A note's numeric runs: from a digit on, digits and what writes numbers out (" 12.5", "07/22/93").
# Linear: the repeat is greedy and nothing follows it.
NUMERIC_RUN = regex.compile(r"\d[\d \t./-]*")
_RUN_CHARACTERS = frozenset("0123456789 \t./-")


def numeric_runs(text: str) -> str:
    """The note's numeric runs (NUMERIC_RUN), one a line: typically a tenth of the note."""
    return "\n".join(NUMERIC_RUN.findall(text))



def numeric(expression: str) -> bool:
    """Whether `expression` matches in a note exactly when it matches in the note's numeric runs,
    which a precheck then searches instead: true when every match starts with a digit and holds
    only digits and the characters of NUMERIC_RUN ("\\d{7}", "\\d{3}[.-]?\\d{4}"), no assertion.

    Such a match lies inside one run: it starts at a digit and cannot leave the run's characters,
    and a run reaches from its first digit to its last such character.  The newlines joining the
    runs are not among those characters.  Read off a small parse of the expression (:func:`_parse`)
    that knows literals, escapes, sets, groups and counted repeats; anything else (assertions, ".",
    a lookaround, a syntax error) reads as a character outside the runs, and the answer is False:
    the note is searched."""
    try:
        items, end = _parse(expression, 0)
    except IndexError:  # an unterminated set or group
        return False
    return end == len(expression) and _within_runs(items) and _opens_with_digit(items)


# The parse: a sequence is a list of items, each one of
#   ("char", c)                      one literal character
#   ("digit",)                       \d
#   ("set", members)                 [...] not negated; members are ("char", c), ("range", a, b), ("digit",)
#   ("repeat", low, body)            body (a sequence) repeated at least `low` times
#   ("branch", alternatives)         a group: a list of sequences
#   ("other",)                       anything else: ".", \w, \s, \b, anchors, lookarounds, [^...]
_CHAR = ("char", None)
_OTHER = ("other",)
_ESCAPED = {"t": "\t", "n": "\n", "r": "\r", "f": "\f", "v": "\v"}
_FLAG_GROUP = regex.compile(r"\(\?(?:[a-zA-Z]*:|>)")  # (?:, scoped flags such as (?i:, atomic (?>
COUNT = regex.compile(r"(?:([?*+])|\{(\d*)(,?)(\d*)\})[?+]?")  # a repeat: its symbol or its bounds, then lazy or possessive


def _parse(expression: str, i: int) -> tuple[list, int]:
    """The alternatives from position i, as a one-item sequence if there are several."""
    alternatives = []
    while True:
        sequence, i = _parse_sequence(expression, i)
        alternatives.append(sequence)
        if not expression.startswith("|", i):
            return (alternatives[0] if len(alternatives) == 1 else [("branch", alternatives)]), i
        i += 1


def _parse_sequence(expression: str, i: int) -> tuple[list, int]:
    items: list = []
    while i < len(expression) and expression[i] not in "|)":
        item, i = _parse_atom(expression, i)
        count = COUNT.match(expression, i)
        if count and (count[1] or count[2] or count[4]):
            symbol, low = count[1], count[2]
            item = ("repeat", 1 if symbol == "+" else 0 if symbol else int(low or 0), [item])
            i = count.end()
        items.append(item)
    return items, i


def _parse_atom(expression: str, i: int) -> tuple[tuple, int]:
    c = expression[i]
    if c == "\\":
        return _escape(expression[i + 1]), i + 2
    if c == "[":
        return _parse_set(expression, i + 1)
    if c == "(":
        group = _FLAG_GROUP.match(expression, i)
        if group is None and expression.startswith("(?", i):  # lookarounds, atomic and named groups...
            return _OTHER, _skip_group(expression, i)
        inner, i = _parse(expression, group.end() if group else i + 1)
        if not expression.startswith(")", i):
            raise IndexError(i)
        return ("branch", [inner]), i + 1
    if c in "?*+{.^$":  # ".", anchors, a repeat of nothing, braces that are not a count ({e<=1})
        return _OTHER, i + 1
    return ("char", c), i + 1


def _escape(c: str) -> tuple:
    if c == "d":
        return ("digit",)
    if c in _ESCAPED:
        return ("char", _ESCAPED[c])
    if c.isalnum():  # \w \s \b \D \x... and back references
        return _OTHER
    return ("char", c)


def _skip_group(expression: str, i: int) -> int:
    """The position after the group opening at i, counting nested parentheses, sets and escapes."""
    depth, in_set = 0, False
    while True:
        c = expression[i]
        if c == "\\":
            i += 2
            continue
        if in_set:
            in_set = c != "]"
        elif c == "[":
            in_set = True
            i += 1 + expression.startswith("]", i + 1)
            continue
        elif c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1


def _parse_set(expression: str, i: int) -> tuple[tuple, int]:
    """A set from just after its "[": its members, or ("other",) for a negated set."""
    negated = expression.startswith("^", i)
    i += negated
    members: list[tuple] = []
    first = True
    while expression[i] != "]" or first:
        c = expression[i]
        member, i = (_escape(expression[i + 1]), i + 2) if c == "\\" else (("char", c), i + 1)
        first = False
        if member[0] == "char" and expression[i] == "-" and expression[i + 1] != "]":
            high, i = (_escape(expression[i + 2]), i + 3) if expression[i + 1] == "\\" else (("char", expression[i + 1]), i + 2)
            member = ("range", member[1], high[1]) if high[0] == "char" else _OTHER
        members.append(member)
    return (_OTHER if negated else ("set", members)), i + 1


def _within_runs(items: list) -> bool:
    return all(_item_within(item, _RUN_CHARACTERS) for item in items)


def _item_within(item: tuple, characters: frozenset[str] | str) -> bool:
    kind = item[0]
    if kind == "char":
        return item[1] in characters
    if kind == "digit":
        return True
    if kind == "range":
        return all(chr(c) in characters for c in range(ord(item[1]), ord(item[2]) + 1))
    if kind == "set":
        return all(_item_within(member, characters) for member in item[1])
    if kind == "repeat":
        return _within_runs(item[2])
    if kind == "branch":
        return all(_within_runs(alternative) for alternative in item[1])
    return False


def _opens_with_digit(items: list) -> bool:
    if not items:
        return False
    item = items[0]
    kind = item[0]
    if kind == "char":
        return item[1].isascii() and item[1].isdigit()
    if kind in ("digit", "set", "range"):
        return _item_within(item, "0123456789")
    if kind == "repeat":
        return item[1] >= 1 and _opens_with_digit(item[2])
    if kind == "branch":
        return all(_opens_with_digit(alternative) for alternative in item[1])
    return False


def work_bound(expression: str) -> float:
    """At most how many steps a backtracking matcher takes to try a `lowered` expression at one
    position, whatever the text; infinite beyond UNTIMED_STEPS and for a repeat without bound
    (*, +, {n,}).

    With it, a search of an n-character note takes at most (n + 1) x bound steps: the time budget
    needs no clock inside such a search.  Counted on the syntax that :func:`lowered` lets through,
    as written (no alternatives merged): a character, set, escape or anchor is one step; a sequence
    tries the rest once for every way its first part can match; a branch tries each alternative; a
    repeat {m,n} is its body n times over, plus one step a round; a lookaround, an atomic group and
    a possessive repeat match in one way.  `regex` skips ahead and prunes, so it does less.
    """
    try:
        steps, _, end = _alternation(expression, 0)
    except (_Unbounded, IndexError):
        return math.inf
    return steps if end == len(expression) else math.inf


class _Unbounded(Exception):
    """The count passed UNTIMED_STEPS, or met a repeat without bound or syntax it does not know."""


_QUANTIFIER = regex.compile(r"(?:([?*+])|\{(\d*)(,?)(\d*)\})([?+]?)")


def _alternation(expression: str, i: int) -> tuple[int, int, int]:
    """(steps, ways, where it ends) for the alternatives from position i: the worst-case steps from
    one position of the text, and how many ways (end positions, counted with repetition) match."""
    steps = ways = 0
    while True:
        more, options, i = _sequence(expression, i)
        steps, ways = steps + more, ways + options
        if not expression.startswith("|", i):
            return steps, ways, i
        i += 1


def _sequence(expression: str, i: int) -> tuple[int, int, int]:
    steps, ways = 0, 1
    while i < len(expression) and expression[i] not in "|)":
        more, options, i = _atom(expression, i)
        quantifier = _QUANTIFIER.match(expression, i)
        if quantifier:
            more, options = _repeat(more, options, quantifier)
            i = quantifier.end()
        steps, ways = steps + ways * more, ways * options
        if steps > UNTIMED_STEPS or ways > UNTIMED_STEPS:
            raise _Unbounded
    return steps, ways, i


def _atom(expression: str, i: int) -> tuple[int, int, int]:
    c = expression[i]
    if c == "(":
        kind = next((group for group in _GROUPS if expression.startswith(group, i)), "(")
        steps, ways, i = _alternation(expression, i + len(kind))
        if not expression.startswith(")", i):
            raise _Unbounded
        return steps, ways if kind in ("(", "(?:") else 1, i + 1
    if c == "[":
        i += 2 if expression.startswith("^", i + 1) else 1
        i += expression.startswith("]", i)  # a "]" first in a set is a literal
        while expression[i] != "]":
            i += 2 if expression[i] == "\\" else 1
        return 1, 1, i + 1
    if c in "?*+":
        raise _Unbounded
    return 1, 1, i + (2 if c == "\\" else 1)


def _repeat(each: int, options: int, quantifier: regex.Match[str]) -> tuple[int, int]:
    """(steps, ways) for an atom of `each` steps and `options` ways under `quantifier`."""
    symbol, low, comma, high, mode = quantifier.groups()
    if symbol:
        low, high = (0, 1) if symbol == "?" else (0 if symbol == "*" else 1, None)
    elif low or high:
        low, high = int(low or 0), int(high) if high else None if comma else int(low)
    else:
        raise _Unbounded  # "{}" or "{,}"
    if high is None:
        raise _Unbounded
    steps, ways, reach = 0, 0, 1  # reach: the ways of matching the first k rounds
    for k in range(high + 1):
        ways += reach if k >= low else 0
        if k < high:
            steps += reach * (each + 1)
            if steps > UNTIMED_STEPS:
                raise _Unbounded
        reach *= options
    return steps, 1 if mode == "+" else ways


def alternation(words: Iterable[str]) -> str:
    """One group matching any of `words`, factored as a trie so that the engine tries each
    position's letter once rather than every word; longest first; a space matches spaces or tabs."""
    trie: dict[str, dict] = {}
    for word in set(words):
        node = trie
        for char in word:
            node = node.setdefault(char, {})
        node[""] = {}
    return _trie_node(trie) or "(?!)"


def _trie_node(node: dict[str, dict]) -> str:
    branches = [("[ \t]+" if char == " " else re.escape(char)) + _trie_node(child) for char, child in sorted(node.items()) if char]
    if not branches:
        return ""
    body = branches[0] if len(branches) == 1 else f"(?:{'|'.join(branches)})"
    return f"(?:{body})?" if "" in node else body
