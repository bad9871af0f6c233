"""The analysis of the rules' expressions for speed (anonymizer.detectors.regex_analysis): each
function on its own, on expressions written for the test.  That the shipped rules keep their spans
under it is tested in tests/test_patterns.py."""

from __future__ import annotations

import math

import pytest

from anonymizer.detectors.regex_analysis import NUMERIC_RUN, lowered, numeric, numeric_runs, standard, work_bound


@pytest.mark.parametrize(
    "expression, steps",
    [
        ("a", 1),
        ("\\d{7}", 14),  # a step per character and per round
        ("(?:a|bc)d", 5),  # d is tried after each way the branch can match
        ("a?b", 4),
        ("a?+b", 3),  # possessive: b after one way only
        ("(?=ab)c", 3),
        ("[^]a-z\\]]b", 2),
        ("[\\]|]b", 2),  # the "|" is in the set
        ("(?:a|a){0,15}[\\]|](?:a|a){0,15}", math.inf),  # 2^30 ways, not 2^15 on either side of a "|"
        ("ab\\Kc", 4),
        ("(?:a|b){0,3}", 21),  # a round for each way the rounds before can match
        ("a*", math.inf),
        ("(?:ab)+", math.inf),
        ("a{2,}", math.inf),
        ("(?:a|a){0,40}", math.inf),  # alternatives are not merged: 2^40 ways, beyond UNTIMED_STEPS
    ],
)
def test_work_bound_counts_the_worst_case_steps_at_one_position(expression: str, steps: float) -> None:
    assert work_bound(expression) == steps


@pytest.mark.parametrize(
    "expression, runs_only",
    [
        ("(?i:\\d{7})", True),
        ("\\d(?:[ \\t.-]?\\d){5}", True),
        ("(?:19|20)\\d\\d", True),
        ("[0-9][.-/]", True),  # the range . to / is inside a run's characters
        ("[0-9][ -/]", False),  # the range space to / is not
        ("\\d?1", False),  # may open with "1", but the check looks only at the first item
        ("-\\d", False),  # a run starts at its first digit
        ("a\\d", False),
        ("\\d\\b", False),  # an assertion reads beyond the run
        ("\\d.", False),  # "." is any character
        ("\\d\\s", False),
        ("(?:\\d|x)", False),
        ("\\d{e<=1}", False),  # regex's fuzzy matching: not the standard library's syntax
    ],
)
def test_numeric_admits_only_expressions_whose_matches_lie_in_a_run(expression: str, runs_only: bool) -> None:
    assert numeric(expression) == runs_only


@pytest.mark.parametrize(
    "expression, compiled",
    [
        ("(?:ma(?:r|y)|jan)(?![a-z])", True),
        ("a[ \\t.-]?\\d{2}\\b(?<=\\d)", True),
        ("\\d{7}", False),  # regex skips to digits faster
        ("\\bmrn", False),
        ("a\\s", False),  # re's \s also matches \x1c-\x1f
        ("a\\Kb", False),
        ("a(?<=b{1,2})", False),  # a lookbehind of varying width
        ("a++", False),
        ("(?>a)b", False),
        ("a\u2019", False),  # not ASCII
        ("a(?i:b)", False),
    ],
)
def test_standard_compiles_only_what_reads_alike(expression: str, compiled: bool) -> None:
    assert (standard(expression) is not None) == compiled


@pytest.mark.parametrize(
    "source, expected",
    [
        ("(?i:\\bMRN[ \\t]?\\K[A-Z0-9-]{3,20}\\b)", "\\bmrn[ \\t]?\\K[a-z0-9-]{3,20}\\b"),
        ("(?i:[^]A-Z](?<![\\w+])\\d{2}(?=x))", "[^]a-z](?<![\\w+])\\d{2}(?=x)"),
        ("(?i:[-A-Z][A-Z-])", "[-a-z][a-z-]"),
        ("\\bAB\\d", None),  # case-sensitive
        ("(?i:[A-z])", None),  # a range across cases holds [ \\ ] ^ _ `
        ("(?i:[+-z])", None),
        ("(?i:[\\t-z])", None),
        ("(?i:\\x41)", None),
        ("(?i:\\p{Lu})", None),
        ("(?i:(?P<x>a))", None),
        ("(?i:(?-i:a))", None),
        ("(?i:[[:alpha:]])", None),
        ("(?i:\u017f)", None),  # the long s matches s and S when ignoring case
        ("(?i:(?:ab){e<=1})", None),
    ],
)
def test_lowered_rewrites_only_what_it_can_prove(source: str, expected: str | None) -> None:
    pattern = lowered(source)
    assert (pattern and pattern.pattern) == expected


@pytest.mark.parametrize(
    "expression",
    ["(?:\\d", "[0-9", "\\d)", "(?<=x)\\d", "(?P<n>\\d)", "\\d(?#c)", "(?:)\\d"],
)
def test_numeric_refuses_what_it_cannot_read(expression: str) -> None:
    assert not numeric(expression)


def test_numeric_reads_groups_flags_and_atomic_groups() -> None:
    assert numeric("(?i:(?:\\d{1,2}[/.-]){2}\\d{2,4})")
    assert numeric("(?>\\d\\d)[ \\t]?\\d")
    assert not numeric("(?:\\d{1,2}[/.-]){0,2}\\d")  # conservative: the first item, a repeat, may be empty
    assert numeric("\\d(?:[/.-]\\d{1,2}){0,2}")


def test_numeric_runs_keep_the_numbers_one_a_line() -> None:
    assert numeric_runs("BP 120/70, HR 88 on 12.03.2019 x") == "120/70\n88 \n12.03.2019 "
    assert all(NUMERIC_RUN.fullmatch(run) for run in numeric_runs("a 1-2 b 3 c").split("\n"))
