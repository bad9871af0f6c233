"""The pattern rules as data: reading, validating, expanding and compiling the rule files.

rules/patterns.toml and rules/dates.toml name the expressions, rules/context.toml the exceptions
that keep durations, measurements and scores ("vomiting 2/7", "BP 120/70") from being taken for
dates.  A hospital's own folders of rules (``[rules] extra`` in the configuration) are read after
the packaged ones, file by file in the same order: their components, patterns and exceptions join
the packaged ones, and a name defined twice is an error naming both files.

A rule may declare what a note must contain for it to match at all (`requires`, `requires_any`):
most notes hold no month name, e-mail or web address, and a check of that costs far less than the
pass it saves.  The declarations are data, never guessed by the code.  What each expression allows
for speed (a lower-cased copy, no clock, the standard library's `re`, the numeric runs) is worked
out here once per run by anonymizer.detectors.regex_analysis.
"""

from __future__ import annotations

import datetime
import math
import re
import tomllib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import regex

from anonymizer.budget import remaining
from anonymizer.detectors.regex_analysis import UNTIMED_STEPS, lowered, numeric, standard, work_bound
from anonymizer.settings import ConfigError
from anonymizer.spans import CATEGORIES

RULE_FILES = ("patterns.toml", "dates.toml", "context.toml")
SECTIONS = frozenset({"components", "pattern", "date_styles", "date_order", "exception"})
CONTEXT_WINDOW = 64  # characters of context an exception reads on each side of a match
PRECHECK_KEYS = frozenset({"requires", "requires_any"})
PATTERN_KEYS = frozenset({"name", "category", "regex", "validate", "ignore_case", "candidate"}) | PRECHECK_KEYS
EXCEPTION_KEYS = frozenset({"name", "applies_to", "match", "before", "after"})

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


def ssn_issuable(value: str) -> bool:
    """Whether a US social security number could be issued (area not 000, 666 or 900-999, group
    not 00, serial not 0000) and is not three round numbers: volumes and counts in a row, "500 50
    1000", are round; one number in a thousand the SSA issues is."""
    digits = "".join(c for c in value if c.isdigit())
    area, group, serial = digits[:3], digits[3:5], digits[5:]
    round_numbers = area[-1] == group[-1] == serial[-1] == "0"
    return area not in ("000", "666") and area[0] != "9" and group != "00" and serial != "0000" and not round_numbers


def luhn_checksum(value: str) -> bool:
    """Whether a card number's last digit is its Luhn check digit (ISO/IEC 7812)."""
    digits = [int(c) for c in value if c.isdigit()]
    total = sum(digits[-1::-2]) + sum(sum(divmod(2 * d, 10)) for d in digits[-2::-2])
    return total % 10 == 0


def date_range_ascending(value: str) -> bool:
    """Whether four numbers read as two dates without a year, the second one to 31 days after the
    first, month first ("10/03/10/04") or day first ("30/12/02/01"): a range of treatment days, not
    a ventilator's settings ("10/5/10/5") or a row of readings."""
    a, b, c, d = (int(n) for n in regex.findall(r"\d+", value))
    return any(0 < _days_between(first, second) <= 31 for first, second in (((a, b), (c, d)), ((b, a), (d, c))))


def _days_between(first: tuple[int, int], second: tuple[int, int]) -> int:
    """Days from one (month, day) to the next (month, day) on or after it; 0 when either is no date."""
    try:
        start, end = (datetime.date(2001, month, day) for month, day in (first, second))
    except ValueError:
        return 0
    return (end - start).days % 365


VALIDATORS: dict[str, Callable[[str], bool]] = {
    "nric_checksum": nric_checksum,
    "phone_digit_count": phone_digit_count,
    "not_a_range": not_a_range,
    "ssn_issuable": ssn_issuable,
    "luhn_checksum": luhn_checksum,
    "date_range_ascending": date_range_ascending,
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
    origin: str = ""  # the file that defines it

    def guards(self, rule_name: str, category: str) -> bool:
        return rule_name in self.applies_to or category in self.applies_to


def excused(exceptions: Sequence[ContextException], text: str, start: int, end: int) -> bool:
    """Whether one of `exceptions` drops text[start:end]: its `match` fits the span and its
    `before` or `after` the context around it (an exception with neither: the match alone).

    Within the note's time budget: an exception's expression is data too.  The deadline is read
    once a question (a rule has some twenty exceptions, each asked in a plain loop, no call each);
    a search whose work is provably small (see _exception) runs without regex's clock, the others
    with the time left."""
    left = remaining()
    for e in exceptions:
        match_timed, before_timed, after_timed = e.timed
        if e.match is not None and e.match.fullmatch(text, start, end, timeout=left if match_timed else None) is None:
            continue
        if e.before is None and e.after is None:
            return True
        if e.before is not None and e.before.search(text, max(0, start - CONTEXT_WINDOW), start, timeout=left if before_timed else None):
            return True
        if e.after is not None and e.after.match(text, end, end + CONTEXT_WINDOW, timeout=left if after_timed else None):
            return True
    return False


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
    origin: str = ""  # the file that defines it
    candidate: bool = True  # among the candidate dates the record detector parses (PatternDetector.date_pattern)


def load_rules(rules_dir: Path, extra: Sequence[Path] = ()) -> list[Rule]:
    """Read, expand and compile every rule in RULE_FILES, in file order, exceptions attached:
    those of `rules_dir` (all required), then those of each folder of `extra` (each optional)."""
    components: dict[str, str] = {}
    raw_rules: list[RawRule] = []
    raw_exceptions: list[tuple[Path, Mapping]] = []
    defined: dict[tuple[str, str], Path] = {}  # (kind, name) -> the file that defined it first
    seen: set[tuple[str, str]] = set()

    def define(kind: str, name: str, path: Path) -> None:
        first = defined.setdefault((kind, name), path)
        if first is not path or (kind, name) in seen:
            where = f"in {path}" if first is path else f"in {first} and in {path}"
            raise ConfigError(f"{kind} '{name}' is defined twice: {where}")
        seen.add((kind, name))

    for path in rule_files(rules_dir, extra):
        data = read_toml(path)
        unknown = set(data) - SECTIONS
        if unknown:
            raise ConfigError(f"{path}: unknown sections {sorted(unknown)}")
        for key, value in data.get("components", {}).items():
            define("component", key, path)
            components[key] = value
        for entry, slots, declared in _date_rules(data):
            define("pattern", entry["name"], path)
            raw_rules.append((path, entry, slots, declared))
        for entry in data.get("pattern", []):
            _require(entry, ("name", "category", "regex"), "pattern", path)
            define("pattern", entry["name"], path)
            raw_rules.append((path, entry, {}, (entry,)))
        for entry in data.get("exception", []):
            _require(entry, ("name", "applies_to"), "exception", path)
            define("exception", entry["name"], path)
            raw_exceptions.append((path, entry))

    names = {raw[1]["name"] for raw in raw_rules}
    exceptions = [_exception(path, entry, components, names) for path, entry in raw_exceptions]
    return [_rule(*raw, components, exceptions) for raw in raw_rules]


def read_toml(path: Path) -> dict:
    """A rule file's tables; a file that is not UTF-8 TOML is a one-line ConfigError naming it."""
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: not valid TOML ({exc})") from None


def _require(entry: Mapping, keys: Sequence[str], kind: str, path: Path) -> None:
    missing = [key for key in keys if key not in entry]
    if missing:
        raise ConfigError(f"{path}: a [[{kind}]] block {entry.get('name', '')!r} lacks {', '.join(missing)}")


def rule_files(rules_dir: Path, extra: Sequence[Path] = ()) -> list[Path]:
    """The rule files read, in order: RULE_FILES of `rules_dir`, then those present in each extra folder."""
    return [rules_dir / name for name in RULE_FILES] + [
        folder / name for folder in extra for name in RULE_FILES if (folder / name).is_file()
    ]


# (file, [[pattern]] entry, date style slots, the tables declaring the rule's prechecks)
RawRule = tuple[Path, Mapping, Mapping[str, str], Sequence[Mapping]]


def _date_rules(data: Mapping) -> Iterable[tuple[dict, Mapping[str, str], Sequence[Mapping]]]:
    """Each date order in each style: template "{D}{sep}{M}{sep}{year}" x style "name" -> date_dmy_name.

    The rule has the prechecks of both its style and its order.  An order's `styles` lists the
    only styles it is made in, where the others would repeat what other rules find.
    """
    styles = data.get("date_styles", {})
    for order in data.get("date_order", []):
        chosen = order.get("styles", list(styles))
        unknown = set(chosen) - set(styles)
        if unknown:
            raise ConfigError(f"date order '{order.get('name')}': unknown styles {sorted(unknown)}")
        for style_name in chosen:
            style = styles[style_name]
            slots = {key: value for key, value in style.items() if key not in PRECHECK_KEYS}
            entry = {"name": f"date_{order['name']}_{style_name}", "category": "DATE", "regex": order["template"]}
            if "candidate" in order:
                entry["candidate"] = order["candidate"]
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
        raise ConfigError(f"{where}: unknown keys {sorted(set(entry) - PATTERN_KEYS)}")
    if not _RULE_NAME.fullmatch(name):
        raise ConfigError(f"{where}: a name is lower_snake_case")
    if category not in CATEGORIES:
        raise ConfigError(f"{where}: unknown category '{category}'")
    validate = entry.get("validate")
    if validate is not None and validate not in VALIDATORS:
        raise ConfigError(f"{where}: unknown validation hook '{validate}' (known: {sorted(VALIDATORS)})")
    if set(slots) & set(components):
        raise ConfigError(f"{where}: style slots {sorted(set(slots) & set(components))} shadow components")
    case = "(?i:{})" if entry.get("ignore_case", True) else "{}"
    source = case.format(expand(entry["regex"], {**components, **slots}, where))
    pattern = _compile(source, where)
    if pattern.groups:
        raise ConfigError(f"{where}: capturing groups are not allowed, use (?:...)")
    return Rule(
        name=name,
        category=category,
        source=source,
        pattern=pattern,
        **_lower(source),
        validate=VALIDATORS[validate] if validate else None,
        exceptions=tuple(e for e in exceptions if e.guards(name, category)),
        prechecks=tuple(check for table in declared for check in _prechecks(table, {**components, **slots}, case, where)),
        origin=str(path),
        candidate=bool(entry.get("candidate", True)),
    )


def _prechecks(table: Mapping, components: Mapping[str, str], case: str, where: str) -> list[Precheck]:
    """The table's `requires_any` (first: a substring test is the cheapest) and `requires`."""
    prechecks = []
    literals = table.get("requires_any")
    if literals is not None:
        if not literals or not all(isinstance(s, str) and s and s.isascii() and s == s.lower() for s in literals):
            raise ConfigError(f"{where}: requires_any is a list of non-empty lower-case ASCII strings")
        prechecks.append(Precheck(literals=tuple(literals)))
    if "requires" in table:
        source = case.format(expand(table["requires"], components, where))
        fields = _lower(source)
        plain = standard(fields["lowered"].pattern) if isinstance(fields["lowered"], regex.Pattern) else None
        prechecks.append(Precheck(pattern=_compile(source, f"{where} (requires)"), standard=plain, numeric=numeric(source), **fields))
    return prechecks


def _lower(source: str) -> dict[str, regex.Pattern[str] | float | None]:
    """The `lowered` and `steps` fields of a rule or precheck for the expression `source`."""
    pattern = lowered(source)
    return {"lowered": pattern, "steps": math.inf if pattern is None else work_bound(pattern.pattern)}


def _exception(path: Path, entry: Mapping, components: Mapping[str, str], rule_names: set[str]) -> ContextException:
    name = entry["name"]
    where = f"{path}: exception '{name}'"
    if set(entry) - EXCEPTION_KEYS:
        raise ConfigError(f"{where}: unknown keys {sorted(set(entry) - EXCEPTION_KEYS)}")
    applies_to = frozenset(entry["applies_to"])
    unknown = applies_to - set(CATEGORIES) - rule_names
    if unknown:
        raise ConfigError(f"{where}: applies to unknown categories or patterns {sorted(unknown)}")
    if not {"match", "before", "after"} & set(entry):
        raise ConfigError(f"{where}: needs at least one of match, before, after")

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
        origin=str(path),
    )


def expand(source: str, components: Mapping[str, str], where: str = "rule", _seen: tuple[str, ...] = ()) -> str:
    """Replace every {name} by its component, recursively; unknown names and cycles are errors."""

    def substitute(reference: regex.Match[str]) -> str:
        name = reference[1]
        if name not in components:
            raise ConfigError(f"{where}: unknown component {{{name}}}")
        if name in _seen:
            raise ConfigError(f"{where}: component {{{name}}} refers to itself")
        return expand(components[name], components, where, (*_seen, name))

    return _REFERENCE.sub(substitute, source)


def _compile(source: str, where: str) -> regex.Pattern[str]:
    try:
        return regex.compile(source)
    except regex.error as error:
        raise ConfigError(f"{where}: invalid expression: {error}") from None
