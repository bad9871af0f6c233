"""Identifiers, contact numbers, e-mail, URLs, dates and ages found by regular expression (seed 003 §3.2-3.3).

The expressions are data: rules/patterns.toml and rules/dates.toml name them, rules/context.toml
names the exceptions that keep durations, measurements and scores ("vomiting 2/7", "BP 120/70")
from being taken for dates.  The detector expands and compiles them once per run; a hospital adds
an identifier format by adding a [[pattern]] block, without touching this module.

A rule may declare what a note must contain for it to match at all (`requires`, `requires_any`):
most notes hold no month name, e-mail or web address, and a check of that costs far less than the
pass it saves.  The declarations are data, never guessed by the code.

Every search, the exceptions' included, runs within the note's time budget (anonymizer.budget):
a note that makes a pattern run too long raises :class:`~anonymizer.budget.NoteTimeout`, whose
message gives only the note's length.  `regex` enforces it by reading the process clock at every
search and every match, a system call that cost about a sixth of the detector's time; a search
whose work is provably small skips that (see :func:`work_bound`) and checks the deadline before.
"""

from __future__ import annotations

import math
import re
import tomllib
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import regex

from anonymizer.budget import remaining
from anonymizer.record import PatientRecord
from anonymizer.spans import CATEGORIES, Span

try:  # the standard library's own parser, private: without it numeric() says False (see there)
    from re import _constants as sre, _parser as sre_parse
except ImportError:  # pragma: no cover - a Python that moved it
    sre = sre_parse = None  # type: ignore[assignment]

RULE_FILES = ("patterns.toml", "dates.toml", "context.toml")
SECTIONS = frozenset({"components", "pattern", "date_styles", "date_order", "exception"})
CONTEXT_WINDOW = 64  # characters of context an exception reads on each side of a match
PRECHECK_KEYS = frozenset({"requires", "requires_any"})
PATTERN_KEYS = frozenset({"name", "category", "regex", "validate", "ignore_case"}) | PRECHECK_KEYS
EXCEPTION_KEYS = frozenset({"name", "applies_to", "match", "before", "after"})
# A search of at most this many matcher steps (work_bound x positions) runs without regex's clock:
# some milliseconds, checked against the deadline before the next search.
UNTIMED_STEPS = 1_000_000

# "{name}" refers to a component, except after \p \P \N \x, where braces belong to the syntax.
_REFERENCE = regex.compile(r"(?<!\\[pPNx])\{([A-Za-z_]\w*)\}")
_RULE_NAME = regex.compile(r"[a-z][a-z0-9_]*")


# --- Validation hooks, named by `validate` in the rules ----------------------------------------

_NRIC_WEIGHTS = (2, 7, 6, 5, 4, 3, 2)
_NRIC_TABLES = {"S": (0, "JZIHGFEDCBA"), "T": (4, "JZIHGFEDCBA"), "F": (0, "XWUTRQPNMLK"), "G": (4, "XWUTRQPNMLK")}


def nric_checksum(value: str) -> bool:
    """Whether a Singapore NRIC/FIN's check letter matches its digits (S, T, F, G and M series)."""
    value = value.upper()
    if len(value) != 9 or not value[1:8].isdigit():
        return False
    weighted = sum(w * int(d) for w, d in zip(_NRIC_WEIGHTS, value[1:8]))
    if value[0] == "M":
        return value[8] == "KLJNPQRTUWX"[10 - (3 + weighted) % 11]
    if value[0] not in _NRIC_TABLES:
        return False
    offset, letters = _NRIC_TABLES[value[0]]
    return value[8] == letters[(offset + weighted) % 11]


def phone_digit_count(value: str) -> bool:
    """Whether a number has as many digits as a full international number (8 to 15, per E.164)."""
    return 8 <= sum(c.isdigit() for c in value) <= 15


def not_a_range(value: str) -> bool:
    """False for "750-1000": a second number above the first but under twice it reads as a range.

    A phone number's line rarely falls there (about 1 in 100), and never with a leading zero.
    """
    low, high = regex.split(r"\D", value, maxsplit=1)
    return high.startswith("0") or not int(low) < int(high) < 2 * int(low)


VALIDATORS: dict[str, Callable[[str], bool]] = {
    "nric_checksum": nric_checksum,
    "phone_digit_count": phone_digit_count,
    "not_a_range": not_a_range,
}


# --- Rules --------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ContextException:
    """Drops a match whose text and surroundings show it is not PHI (see rules/context.toml)."""

    name: str
    applies_to: frozenset[str]  # categories and pattern names
    match: regex.Pattern[str] | None
    before: regex.Pattern[str] | None
    after: regex.Pattern[str] | None
    timed: tuple[bool, bool, bool] = (True, True, True)  # whether a search of match, before, after needs regex's clock

    def guards(self, rule_name: str, category: str) -> bool:
        return rule_name in self.applies_to or category in self.applies_to

    def excuses(self, text: str, start: int, end: int) -> bool:
        """Whether text[start:end] fits `match` and its context fits `before` or `after`.

        Within the note's time budget: an exception's expression is data too.  The deadline is
        checked once a call; a search whose work is provably small (see _exception) runs without
        regex's clock, the others with the time left."""
        left = remaining()
        match_timed, before_timed, after_timed = self.timed
        if self.match is not None and self.match.fullmatch(text, start, end, timeout=left if match_timed else None) is None:
            return False
        if self.before is None and self.after is None:
            return True
        return bool(
            (self.before is not None and self.before.search(text, max(0, start - CONTEXT_WINDOW), start, timeout=left if before_timed else None))
            or (self.after is not None and self.after.match(text, end, end + CONTEXT_WINDOW, timeout=left if after_timed else None))
        )


@dataclass(frozen=True, slots=True)
class Precheck:
    """Something every match of a rule contains, so a note without it needs no pass of the rule.

    Either one of `literals` (lower case) occurs in the note ignoring case, or `pattern` matches in
    it.  Literals are decided only on ASCII notes, where lower-casing the note is exactly what the
    rules' case-insensitive matching does; any other note passes.
    """

    literals: tuple[str, ...] = ()
    pattern: regex.Pattern[str] | None = None
    lowered: regex.Pattern[str] | None = None  # `pattern` for the lower-cased ASCII note (see lowered)
    steps: float = math.inf  # at most this many steps of `lowered` from one position (see work_bound)
    standard: re.Pattern[str] | None = None  # `lowered` for the standard library, where faster (see standard)
    numeric: bool = False  # `pattern` matches only within a note's numeric runs (see numeric)


@dataclass(frozen=True, slots=True)
class Rule:
    """One named pattern, expanded and compiled, with the checks a match must pass."""

    name: str
    category: str
    source: str  # the expanded expression, case flag included
    pattern: regex.Pattern[str]
    validate: Callable[[str], bool] | None = None
    exceptions: tuple[ContextException, ...] = ()
    prechecks: tuple[Precheck, ...] = ()  # all hold in any note the pattern matches in
    lowered: regex.Pattern[str] | None = None  # `pattern` for the lower-cased ASCII note (see lowered)
    steps: float = math.inf  # at most this many steps of `lowered` from one position (see work_bound)


def load_rules(rules_dir: Path) -> list[Rule]:
    """Read, expand and compile every rule in RULE_FILES, in file order, exceptions attached."""
    components: dict[str, str] = {}
    raw_rules: list[RawRule] = []
    raw_exceptions: list[tuple[Path, Mapping]] = []
    for filename in RULE_FILES:
        path = rules_dir / filename
        data = tomllib.loads(path.read_text(encoding="utf-8"))
        unknown = set(data) - SECTIONS
        if unknown:
            raise ValueError(f"{path}: unknown sections {sorted(unknown)}")
        for key, value in data.get("components", {}).items():
            if key in components:
                raise ValueError(f"{path}: component '{key}' is defined twice")
            components[key] = value
        raw_rules += [(path, entry, slots, declared) for entry, slots, declared in _date_rules(data)]
        raw_rules += [(path, entry, {}, (entry,)) for entry in data.get("pattern", [])]
        raw_exceptions += [(path, entry) for entry in data.get("exception", [])]

    names = [raw[1]["name"] for raw in raw_rules]
    duplicates = {n for n in names if names.count(n) > 1}
    if duplicates:
        raise ValueError(f"{rules_dir}: patterns defined twice: {sorted(duplicates)}")
    exceptions = [_exception(path, entry, components, set(names)) for path, entry in raw_exceptions]
    return [_rule(*raw, components, exceptions) for raw in raw_rules]


# (file, [[pattern]] entry, date style slots, the tables declaring the rule's prechecks)
RawRule = tuple[Path, Mapping, Mapping[str, str], Sequence[Mapping]]


def _date_rules(data: Mapping) -> Iterable[tuple[dict, Mapping[str, str], Sequence[Mapping]]]:
    """Each date order in each style: template "{D}{sep}{M}{sep}{year}" x style "name" -> date_dmy_name.

    The rule has the prechecks of both its style and its order.
    """
    for order in data.get("date_order", []):
        for style_name, style in data.get("date_styles", {}).items():
            slots = {key: value for key, value in style.items() if key not in PRECHECK_KEYS}
            entry = {"name": f"date_{order['name']}_{style_name}", "category": "DATE", "regex": order["template"]}
            yield entry, slots, (style, order)


def _rule(
    path: Path,
    entry: Mapping,
    slots: Mapping[str, str],
    declared: Sequence[Mapping],
    components: Mapping[str, str],
    exceptions: Sequence[ContextException],
) -> Rule:
    name, category = entry["name"], entry["category"]
    where = f"{path}: pattern '{name}'"
    if set(entry) - PATTERN_KEYS:
        raise ValueError(f"{where}: unknown keys {sorted(set(entry) - PATTERN_KEYS)}")
    if not _RULE_NAME.fullmatch(name):
        raise ValueError(f"{where}: a name is lower_snake_case")
    if category not in CATEGORIES:
        raise ValueError(f"{where}: unknown category '{category}'")
    validate = entry.get("validate")
    if validate is not None and validate not in VALIDATORS:
        raise ValueError(f"{where}: unknown validation hook '{validate}' (known: {sorted(VALIDATORS)})")
    if set(slots) & set(components):
        raise ValueError(f"{where}: style slots {sorted(set(slots) & set(components))} shadow components")
    case = "(?i:{})" if entry.get("ignore_case", True) else "{}"
    source = case.format(expand(entry["regex"], {**components, **slots}, where))
    pattern = _compile(source, where)
    if pattern.groups:
        raise ValueError(f"{where}: capturing groups are not allowed, use (?:...)")
    return Rule(
        name=name,
        category=category,
        source=source,
        pattern=pattern,
        **_lower(source),
        validate=VALIDATORS[validate] if validate else None,
        exceptions=tuple(e for e in exceptions if e.guards(name, category)),
        prechecks=tuple(check for table in declared for check in _prechecks(table, {**components, **slots}, case, where)),
    )


def _prechecks(table: Mapping, components: Mapping[str, str], case: str, where: str) -> list[Precheck]:
    """The table's `requires_any` (first: a substring test is the cheapest) and `requires`."""
    prechecks = []
    literals = table.get("requires_any")
    if literals is not None:
        if not literals or not all(isinstance(s, str) and s and s.isascii() and s == s.lower() for s in literals):
            raise ValueError(f"{where}: requires_any is a list of non-empty lower-case ASCII strings")
        prechecks.append(Precheck(literals=tuple(literals)))
    if "requires" in table:
        source = case.format(expand(table["requires"], components, where))
        fields = _lower(source)
        plain = standard(fields["lowered"].pattern) if isinstance(fields["lowered"], regex.Pattern) else None
        prechecks.append(Precheck(pattern=_compile(source, f"{where} (requires)"), standard=plain, numeric=numeric(source), **fields))
    return prechecks


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


def _lower(source: str) -> dict[str, regex.Pattern[str] | float | None]:
    """The `lowered` and `steps` fields of a rule or precheck for the expression `source`."""
    pattern = lowered(source)
    return {"lowered": pattern, "steps": math.inf if pattern is None else work_bound(pattern.pattern)}


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
    runs are not among those characters.  Read off the standard library's parse of the expression
    (its syntax and `regex`'s agree on what is allowed here); anything else, or a parse failure, is
    False and the note is searched."""
    if sre_parse is None:
        return False
    try:
        tree = sre_parse.parse(expression)
    except Exception:  # noqa: BLE001 - `regex` syntax `re` does not know: not provably numeric
        return False
    return _within_runs(tree) and _opens_with_digit(list(tree))


def _within_runs(items: Iterable) -> bool:
    for op, arg in items:
        if op is sre.LITERAL:
            ok = chr(arg) in _RUN_CHARACTERS
        elif op is sre.IN:
            ok = all(_set_member_within(member, value, _RUN_CHARACTERS) for member, value in arg)
        elif op in (sre.MAX_REPEAT, sre.MIN_REPEAT, sre.POSSESSIVE_REPEAT):
            ok = _within_runs(arg[2])
        elif op is sre.SUBPATTERN:
            ok = _within_runs(arg[3])
        elif op is sre.BRANCH:
            ok = all(_within_runs(branch) for branch in arg[1])
        elif op is sre.ATOMIC_GROUP:
            ok = _within_runs(arg)
        else:  # assertions, anchors, ".", back references...
            ok = False
        if not ok:
            return False
    return True


def _opens_with_digit(items: Sequence) -> bool:
    if not items:
        return False
    op, arg = items[0]
    if op is sre.LITERAL:
        return chr(arg).isascii() and chr(arg).isdigit()
    if op is sre.IN:
        return all(_set_member_within(member, value, "0123456789") for member, value in arg)
    if op in (sre.MAX_REPEAT, sre.MIN_REPEAT, sre.POSSESSIVE_REPEAT):
        return arg[0] >= 1 and _opens_with_digit(list(arg[2]))
    if op is sre.SUBPATTERN:
        return _opens_with_digit(list(arg[3]))
    if op is sre.BRANCH:
        return all(_opens_with_digit(list(branch)) for branch in arg[1])
    if op is sre.ATOMIC_GROUP:
        return _opens_with_digit(list(arg))
    return False


def _set_member_within(member: object, value: object, characters: Collection[str]) -> bool:
    """Whether a member of a set ([...]) matches only `characters`; \\d counts as digits."""
    if member is sre.LITERAL:
        return chr(value) in characters  # type: ignore[arg-type]
    if member is sre.RANGE:
        low, high = value  # type: ignore[misc]
        return all(chr(c) in characters for c in range(low, high + 1))
    return member is sre.CATEGORY and value is sre.CATEGORY_DIGIT


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


def _exception(path: Path, entry: Mapping, components: Mapping[str, str], rule_names: set[str]) -> ContextException:
    name = entry["name"]
    where = f"{path}: exception '{name}'"
    if set(entry) - EXCEPTION_KEYS:
        raise ValueError(f"{where}: unknown keys {sorted(set(entry) - EXCEPTION_KEYS)}")
    applies_to = frozenset(entry["applies_to"])
    unknown = applies_to - set(CATEGORIES) - rule_names
    if unknown:
        raise ValueError(f"{where}: applies to unknown categories or patterns {sorted(unknown)}")
    if not {"match", "before", "after"} & set(entry):
        raise ValueError(f"{where}: needs at least one of match, before, after")

    def part(key: str, wrap: str) -> regex.Pattern[str] | None:
        if key not in entry:
            return None
        return _compile(wrap.format(expand(entry[key], components, where)), f"{where} ({key})")

    def timed(key: str, positions: int) -> bool:
        """Whether a search of `key` from up to `positions` positions may pass UNTIMED_STEPS: the
        bound counts the expression's structure, the same whatever the case or direction."""
        steps = _lower(f"(?i:{expand(entry[key], components, where)})")["steps"] if key in entry else 0
        return positions * (steps + 1) > UNTIMED_STEPS

    return ContextException(
        name=name,
        applies_to=applies_to,
        match=part("match", "(?i:{})"),
        before=part("before", r"(?ri:{})\Z"),  # ends where the match starts; searched backwards, twice as fast
        after=part("after", "(?i:{})"),
        # match is tried at the match's start, after at its end, before at the window's positions
        timed=(timed("match", 1), timed("before", CONTEXT_WINDOW + 1), timed("after", 1)),
    )


def expand(source: str, components: Mapping[str, str], where: str = "rule", _seen: tuple[str, ...] = ()) -> str:
    """Replace every {name} by its component, recursively; unknown names and cycles are errors."""

    def substitute(reference: regex.Match[str]) -> str:
        name = reference[1]
        if name not in components:
            raise ValueError(f"{where}: unknown component {{{name}}}")
        if name in _seen:
            raise ValueError(f"{where}: component {{{name}}} refers to itself")
        return expand(components[name], components, where, (*_seen, name))

    return _REFERENCE.sub(substitute, source)


def _compile(source: str, where: str) -> regex.Pattern[str]:
    try:
        return regex.compile(source)
    except regex.error as error:
        raise ValueError(f"{where}: invalid expression: {error}") from None


# --- Detector -------------------------------------------------------------------------------------


class PatternDetector:
    """Flags every match of the enabled rules that passes its validation hook and exceptions."""

    def __init__(self, rules: Sequence[Rule]) -> None:
        self.name = "regex"
        self.rules = tuple(rules)
        # the distinct prechecks, and per rule the positions of its own among them
        self._checks: list[Precheck] = list(dict.fromkeys(check for rule in self.rules for check in rule.prechecks))
        # rules guarded by the same exceptions share their verdicts on a span (see _longest)
        groups = {exceptions: k for k, exceptions in enumerate(dict.fromkeys(rule.exceptions for rule in self.rules))}
        self._plan = [
            (rule, tuple(self._checks.index(check) for check in rule.prechecks), groups[rule.exceptions] if rule.exceptions else None)
            for rule in self.rules
        ]
        # Candidate dates for detectors that parse them (e.g. to compare with the date of birth):
        # m.lastgroup names the rule, which tells date_dmy_* from date_mdy_*.  Partial dates are
        # included (year, month_alone, date_ordinal); exceptions are not applied.
        dates = [rule for rule in self.rules if rule.category == "DATE"]
        self.date_pattern = regex.compile("|".join(f"(?P<{r.name}>{r.source})" for r in dates) or "(?!)")
        # per category, the exceptions guarding all of it (not single patterns): see excused()
        every = {e.name: e for rule in self.rules for e in rule.exceptions}.values()
        self._guards = {c: tuple(e for e in every if c in e.applies_to) for c in {c for e in every for c in e.applies_to}}

    @classmethod
    def from_rules(cls, rules_dir: Path, disabled: Collection[str] = ()) -> PatternDetector:
        """Build from the rule files in `rules_dir`, leaving out the patterns named in `disabled`."""
        rules = load_rules(rules_dir)
        unknown = set(disabled) - {rule.name for rule in rules}
        if unknown:
            raise ValueError(f"cannot disable unknown patterns {sorted(unknown)}")
        return cls([rule for rule in rules if rule.name not in disabled])

    def __call__(self, text: str, record: PatientRecord) -> list[Span]:
        """One pass per rule; where spans of one category overlap, the longest stands for them.

        Separate passes rather than one alternation: `regex` tries an alternation branch by
        branch at every position, but skips ahead to a lone pattern's first character, which
        measured about four times faster on nursing notes.  An ASCII note is searched lower-cased
        with each rule's `lowered` expression where it has one (:func:`lowered`).  The loop is
        inlined: with ~20 passes and ~35 precheck tests per note, a generator or method call each
        cost a quarter of the detector's time.  A match must be non-empty (an expression that can
        match nothing must not yield empty spans), pass the rule's hook and escape its exceptions
        (asked last, in _longest).  Outside a note's budget (anonymizer.budget) nothing is timed.
        """
        lower = text.lower() if text.isascii() else None
        untimed = UNTIMED_STEPS / (len(text) + 1)  # a lowered search of at most so many steps a position needs no clock
        held: list[bool | None] = [None] * len(self._checks)  # rules share prechecks: each is decided once per note
        runs: list[str] = []  # the note's numeric runs, once a numeric precheck needs them
        found: list[tuple[int, int, Rule, int | None]] = []
        for rule, needs, group in self._plan:
            for k in needs:
                if not (held[k] if held[k] is not None else self._decide(k, held, text, lower, untimed, runs)):
                    break
            else:
                timeout = remaining()
                if rule.lowered is None or lower is None:
                    pattern, subject = rule.pattern, text
                else:
                    pattern, subject, timeout = rule.lowered, lower, None if rule.steps <= untimed else timeout
                for match in pattern.finditer(subject, timeout=timeout):
                    start, end = match.span()
                    if end > start and (rule.validate is None or rule.validate(text[start:end])):
                        found.append((start, end, rule, group))
        return self._longest(text, found)

    def _longest(self, text: str, found: list[tuple[int, int, Rule, int | None]]) -> list[Span]:
        """The spans of the matches (start, end, rule, exception group) that no exception excuses,
        but where spans of one category overlap, only the longest (or equal, earlier) one.

        "12 Mar 2019" matches date_dmy_name, date_dm_name, date_my_name and year; the audit needs
        only the rule that explains the whole date.  Categories are kept apart so that the union
        can still choose between them.  A match inside a longer kept one is dropped whatever the
        exceptions say, so they are asked only about a match that would be kept: the same spans as
        asking first, with 40 % fewer exception checks ("12/03" in "12/03/2019" is never judged).
        Rules guarded by the same exceptions share their verdict on a span ("3/4" is day/month and
        month/day).
        """
        kept = []
        reach: dict[str, int] = {}  # per category, the furthest end of the spans kept so far
        verdicts: dict[tuple[int, int, int], bool] = {}  # (start, end, exception group) -> excused
        for start, end, rule, group in sorted(found, key=lambda m: (m[0], -m[1])):
            if end <= reach.get(rule.category, -1):
                continue
            if group is not None:
                key = (start, end, group)
                if key not in verdicts:
                    verdicts[key] = any(e.excuses(text, start, end) for e in rule.exceptions)
                if verdicts[key]:
                    continue
            kept.append(Span(start, end, rule.category, self.name, rule.name))
            reach[rule.category] = end
        return kept

    def _decide(self, k: int, held: list[bool | None], text: str, lower: str | None, untimed: float, runs: list[str]) -> bool:
        """Whether precheck `k` holds in the note, searched as in __call__, or in the note's
        numeric runs (made once, into `runs`) for a numeric one."""
        check = self._checks[k]
        if check.pattern is not None:
            timeout = remaining()
            if check.numeric:
                if not runs:
                    runs.append(numeric_runs(text))
                pattern = check.pattern if check.lowered is None else check.lowered
                held[k] = pattern.search(runs[0], timeout=None if check.steps <= untimed else timeout) is not None
            elif check.lowered is None or lower is None:
                held[k] = check.pattern.search(text, timeout=timeout) is not None
            elif check.standard is not None and check.steps <= untimed:
                held[k] = check.standard.search(lower) is not None
            else:
                held[k] = check.lowered.search(lower, timeout=None if check.steps <= untimed else timeout) is not None
        else:
            held[k] = lower is None or any(map(lower.__contains__, check.literals))
        return held[k]  # type: ignore[return-value]

    def excused(self, text: str, start: int, end: int, category: str) -> bool:
        """Whether the context exceptions of `category` drop text[start:end] ("3/12 ago" is three
        months, "GCS 15/15" a score): the classifier's detections obey them as the rules' do."""
        return any(e.excuses(text, start, end) for e in self._guards.get(category, ()))

