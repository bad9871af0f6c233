"""Identifiers, contact numbers, e-mail, URLs, dates and ages found by regular expression (seed 003 §3.2-3.3).

This module is the detector's hot loop: it runs every enabled rule over every note.  The rules are
data (rules/patterns.toml, dates.toml, context.toml and a hospital's own folders of them), read and
compiled once per run by anonymizer.detectors.pattern_rules; what each expression allows for speed
is worked out there too, by anonymizer.detectors.regex_analysis.

Every search, the exceptions' included, runs within the note's time budget (anonymizer.budget):
a note that makes a pattern run too long raises :class:`~anonymizer.budget.NoteTimeout`, whose
message gives only the note's length.  `regex` enforces it by reading the process clock at every
search and every match, a system call that cost about a sixth of the detector's time; a search
whose work is provably small skips that (see regex_analysis.work_bound) and checks the deadline before.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from pathlib import Path

import regex

from anonymizer.budget import remaining
from anonymizer.detectors.pattern_rules import (
    Precheck,
    Rule,
    excused,
    load_rules,
)
from anonymizer.detectors.regex_analysis import (
    UNTIMED_STEPS,
    numeric_runs,
)
from anonymizer.detectors.screen import RuleScreen
from anonymizer.record import PatientRecord
from anonymizer.settings import ConfigError
from anonymizer.spans import Span


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
        # one pass for every rule over an ASCII note, ruling rules out (anonymizer.detectors.screen)
        self._screen = RuleScreen.for_rules(self.rules)
        # Candidate dates for detectors that parse them (e.g. to compare with the date of birth):
        # m.lastgroup names the rule, which tells date_dmy_* from date_mdy_*.  Partial dates are
        # included (year, month_alone, date_ordinal); exceptions are not applied.  A rule marked
        # `candidate = false` (whose matches other date rules match too: a date after a cue) is
        # left out, a branch less to try at every position.
        dates = [rule for rule in self.rules if rule.category == "DATE" and rule.candidate]
        self.date_pattern = regex.compile("|".join(f"(?P<{r.name}>{r.source})" for r in dates) or "(?!)")
        # per category, the exceptions guarding all of it (not single patterns): see excused()
        every = {e.name: e for rule in self.rules for e in rule.exceptions}.values()
        self._guards = {c: tuple(e for e in every if c in e.applies_to) for c in {c for e in every for c in e.applies_to}}

    @classmethod
    def from_rules(cls, rules_dir: Path, disabled: Collection[str] = (), extra: Sequence[Path] = ()) -> PatternDetector:
        """Build from the rule files in `rules_dir` and the `extra` folders, leaving out the
        patterns named in `disabled`."""
        rules = load_rules(rules_dir, extra)
        unknown = set(disabled) - {rule.name for rule in rules}
        if unknown:
            raise ConfigError(f"cannot disable unknown patterns {sorted(unknown)}")
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
        In an ASCII note the rules the screen rules out are not searched, and those it lets
        through skip their prechecks; the others (and every rule in other notes) are searched
        after their prechecks.
        """
        lower = text.lower() if text.isascii() else None
        untimed = UNTIMED_STEPS / (len(text) + 1)  # a lowered search of at most so many steps a position needs no clock
        held: list[bool | None] = [None] * len(self._checks)  # rules share prechecks: each is decided once per note
        runs: list[str] = []  # the note's numeric runs, once a numeric precheck needs them
        found: list[tuple[int, int, Rule, int | None]] = []
        may = None if lower is None else self._screen.may_match(text, lower)
        screened = self._screen.screened
        for position, (rule, needs, group) in enumerate(self._plan):
            if may is not None and position in screened:
                if position not in may:
                    continue
                needs = ()  # the screen said more than the prechecks would
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
                    verdicts[key] = excused(rule.exceptions, text, start, end)
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
        return excused(self._guards.get(category, ()), text, start, end)

