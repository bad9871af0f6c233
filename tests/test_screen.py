"""The one-pass screen of the pattern rules (anonymizer.detectors.screen): the rewriting on
expressions written for the test, and on the shipped rules the promise the detector relies on:
wherever a rule matches in an ASCII note, the screen lets it through."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from anonymizer.detectors import lowered, whole_words
from anonymizer.detectors.pattern_rules import Rule, load_rules
from anonymizer.detectors.screen import SPACE, RuleScreen, WordScreen, screen_expression
from anonymizer.resources import data_dir
from tests.test_patterns import CASES


@pytest.mark.parametrize(
    "expression, rewritten",
    [
        ("abc", "abc"),
        ("(?<=dr )\\w+", "(?:dr )\\w+"),  # a lookbehind opening the rule is read as text before it
        ("\\d+(?= yo)", "\\d+(?: yo)"),  # a lookahead closing it, as text after it
        ("(?=\\d)\\b(?<!\\d[./:])(?<=mi )\\d\\d", "(?:mi )\\b\\d\\d"),  # across the other assertions at that point
        ("(?<!\\d)\\d{7}(?!\\d)", "\\d{7}"),  # negative ones are left out
        ("a(?<=xa)b", "ab"),  # in the middle too
        ("(?<=a)(?=b)", "(?:a)(?:b)"),  # no character: both read at one point
        ("^mrn:\\K\\d+$", "mrn:\\d+"),  # anchors and \K narrow only where a match may be
        ("\\s", f"[{SPACE}]"),
        ("[^\\s,]", f"[^{SPACE},]"),
        ("\\S", f"[^{SPACE}]"),
        ("[\\S,]", "[\\S,]"),
        ("[]a]", "[\\]a]"),
        ("a{,3}b{2,5000}c{7}", "a{0,3}b{2,}c{7}"),
        ("a*+(?>b|c)d?+", "a*(?:b|c)d?"),  # possessive and atomic matches are among the plain ones
        ("a(?:b(?<=xb)|c)", "a(?:b|c)"),  # inside a group after a character a lookaround is only left out
        ("x|(?<=y)z", "x|(?:y)z"),  # per top-level alternative
        # a group that opens (closes) the rule: per branch of it, and the assertions before
        # (after) it left out, as the match's edge moved
        ("(?=\\d)\\b(?<!x)(?:(?<=on )\\d+|(?<=dob )\\d)(?!\\w)", "(?:(?:on )\\d+|(?:dob )\\d)"),
        ("\\b(?:a|b(?= c))\\b", "\\b(?:a|b(?: c))"),
        ("\\b(?:a|b)\\b", "\\b(?:a|b)\\b"),  # no branch widened: the assertions stay
        ("\\b(?:(?<=y)a)(?:b|c(?=d))\\b", "(?:(?:y)a)(?:b|c(?:d))"),
        ("(?:(?<=y)a)+", "(?:a)+"),  # a repeated group is no edge
        ("mrn:\\K(?=\\d{3})\\w+\\b", "mrn:(?:\\d{3})"),  # a lookahead between characters, read instead of what follows
        ("(?i:ab)c", "(?i:ab)c"),
    ],
)
def test_screen_expression_rewrites_for_re2(expression: str, rewritten: str) -> None:
    assert screen_expression(expression) == rewritten


@pytest.mark.parametrize(
    "expression", ["(a)", "(?P<n>a)", "(?s:a)", "(?i)a", "\\p{L}", "\\x41", "[^\\S]", "[[a]]", "(?=a)+", "a)", "(?:a", "*a", "a{}"]
)
def test_screen_expression_leaves_out_what_it_does_not_know(expression: str) -> None:
    assert screen_expression(expression) is None


@pytest.fixture(scope="module")
def rules() -> list[Rule]:
    return load_rules(data_dir("rules"))


@pytest.fixture(scope="module")
def screen(rules: list[Rule]) -> RuleScreen:
    return RuleScreen.for_rules(rules)


def test_nearly_every_rule_is_screened(rules: list[Rule], screen: RuleScreen) -> None:
    assert len(screen.screened) >= len(rules) - 2


def let_through(rules: list[Rule], screen: RuleScreen, text: str) -> None:
    lower = text.lower()
    may = screen.may_match(text, lower)
    assert may is not None
    for k in screen.screened:
        found = rules[k].pattern.search(text) if rules[k].lowered is None else rules[k].lowered.search(lower)
        if found:
            assert k in may, (rules[k].name, text)


def test_the_screen_lets_every_rule_through_where_it_matches_a_case(rules: list[Rule], screen: RuleScreen) -> None:
    texts = [case["text"] for case in CASES["case"] + CASES["known_failure"] if case["text"].isascii()]
    for text in texts:
        let_through(rules, screen, text)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("0123456789 -/.:@+#'(),abcdjmnoprstuwyACFHMSTX\n\t\x0b\x1c")), max_size=80))
def test_the_screen_lets_every_rule_through_where_it_matches(rules: list[Rule], screen: RuleScreen, text: str) -> None:
    let_through(rules, screen, text)


def test_the_screen_rules_out_what_cannot_match(rules: list[Rule], screen: RuleScreen) -> None:
    text = "Pt comfortable overnight, no complaints"
    may = screen.may_match(text, text.lower())
    assert may is not None and not {rules[k].category for k in may} & {"PHONE", "ID", "EMAIL"}


def test_a_screen_that_cannot_be_built_screens_nothing(rules: list[Rule]) -> None:
    screen = RuleScreen.for_rules(rules, memory=1024)
    assert screen.screened == frozenset()
    assert screen.may_match("MRN 1234567", "mrn 1234567") is None


CUE_WORDS = ["in", "from pt", "w/", "to:", "m.d", "rn", "f/u with", "/x"]


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("inromptwdfux/:.RNI \t\n_-+'é")), max_size=40))
def test_the_word_screen_holds_every_word_that_stands_whole(text: str) -> None:
    low = lowered(text)
    present = WordScreen(CUE_WORDS).present(low)
    assert present is not None
    for word in CUE_WORDS:
        if next(whole_words(low, word), None) is not None:
            assert word in present, (word, text)


def test_the_word_screen_rules_out_words_inside_others() -> None:
    assert WordScreen(CUE_WORDS).present("morning turn, f/u within") == frozenset()
    assert WordScreen(CUE_WORDS).present("seen in clinic w/ rn") == {"in", "w/", "rn"}


def test_a_word_screen_that_cannot_be_built_lets_every_word_through() -> None:
    assert WordScreen(CUE_WORDS, memory=1024).present("morning") is None
