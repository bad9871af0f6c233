"""The regex detector: the rule cases in tests/data/pattern_cases.toml, hooks, rule loading, safety."""

from __future__ import annotations

import dataclasses
import json
import random
import shutil
import tomllib
from collections.abc import Callable
from pathlib import Path

import pytest
import regex
from hypothesis import given, settings
from hypothesis import strategies as st

from anonymizer.budget import NoteBudget, NoteTimeout, spending
from anonymizer.detectors.pattern_rules import (
    RULE_FILES,
    ContextException,
    Precheck,
    Rule,
    expand,
    load_rules,
    not_a_range,
    nric_checksum,
    phone_digit_count,
)
from anonymizer.detectors.patterns import PatternDetector
from anonymizer.detectors.regex_analysis import UNTIMED_STEPS, numeric_runs
from anonymizer.record import empty_record
from anonymizer.resources import data_dir
from anonymizer.spans import CATEGORIES, union

RULES_DIR = data_dir("rules")
CASES = tomllib.loads((Path(__file__).parent / "data" / "pattern_cases.toml").read_text(encoding="utf-8"))
EXCEPTION_CASES = [case for case in CASES["case"] if "exception" in case]
RECORD = empty_record("p1")


@pytest.fixture(scope="module")
def rules() -> list[Rule]:
    return load_rules(RULES_DIR)


@pytest.fixture(scope="module")
def detector(rules: list[Rule]) -> PatternDetector:
    return PatternDetector(rules)


def flagged(detector: PatternDetector, text: str) -> list[str]:
    """What a reader of the merged spans sees: "CATEGORY text" for each."""
    return [f"{m.category} {text[m.start:m.end]}" for m in union(detector(text, RECORD))]


def case_id(case: dict) -> str:
    return case["text"][:50]


def keeping(rules: list[Rule], keep: Callable[[ContextException], bool]) -> PatternDetector:
    """A detector whose rules keep only the exceptions that `keep` selects."""
    return PatternDetector([dataclasses.replace(r, exceptions=tuple(filter(keep, r.exceptions))) for r in rules])


# --- The cases ---------------------------------------------------------------------------------


@pytest.mark.parametrize("case", CASES["case"], ids=case_id)
def test_case(detector: PatternDetector, case: dict) -> None:
    assert flagged(detector, case["text"]) == case["expect"]
    fired = {span.rule for span in detector(case["text"], RECORD)}
    assert set(case.get("rules", ())) <= fired


@pytest.mark.parametrize(
    "case",
    [pytest.param(c, marks=pytest.mark.xfail(reason=c["why"], strict=True)) for c in CASES["known_failure"]],
    ids=case_id,
)
def test_known_failure(detector: PatternDetector, case: dict) -> None:
    assert flagged(detector, case["text"]) == case["expect"]


@pytest.mark.parametrize("case", EXCEPTION_CASES, ids=case_id)
def test_exception_alone_keeps_the_case_unflagged(rules: list[Rule], case: dict) -> None:
    alone = keeping(rules, lambda e: e.name == case["exception"])
    assert flagged(alone, case["text"]) == case["expect"]
    assert flagged(keeping(rules, lambda e: False), case["text"]) != case["expect"], "no rule matches anyway"


# (text, the part the classifier flagged, whether an exception drops it, which one): exceptions
# that matter for the classifier's single tokens ("04" of "04:00"), which no date rule matches.
JUDGED = [
    ("gout, last flare 3/12 ago", "3/12", True, "duration_shorthand"),
    ("GCS 15/15 on rounds", "15/15", True, "score"),
    ("seen on 3/12 by ortho", "3/12", False, None),
    ("admitted to Ward 7 04:00 w/ confusion", "04", True, "clock"),
    ("admitted to Ward 7 04:00 w/ confusion", "00", True, "clock"),
    ("seen 7/22 at 10:30", "7/22", False, None),
    ("PA 45-66/22-32 on dobutamine", "45-66/22-32", True, "reading_shape"),
    ("K 3.8, Hct 27.9", "3.8", True, "reading_shape"),
    ("K 3.8, Hct 27.9 on 7/22.93", "7/22.93", False, None),
    ("61/F with CAP", "61/F", True, "reading_shape"),
    ("79/Chinese/F  MRN: S2771445E", "79/Chinese/F", True, "age_ethnicity_sex"),
    ("seen 7/12/2019", "7/12/2019", False, None),
    ("turned q 2-3 overnight", "2-3", True, "range"),
    ("s/p appy age 12, TAH 1975", "12", True, "age_number"),
    ("aged 45 at diagnosis", "45", True, "age_number"),
    ("s/p appy age 12, TAH 1975", "1975", False, None),
    ("f/u 2022-11-19, E Chen 87yo", "87yo", True, "compact_age"),
    ("73M, Smith, adm 2019-06-07", "73M", True, "compact_age"),
]


@pytest.mark.parametrize(("text", "part", "expected", "exception"), JUDGED)
def test_the_exceptions_of_a_category_judge_any_text(detector: PatternDetector, text: str, part: str, expected: bool, exception) -> None:
    """What the classifier asks of a date it found: the same exceptions as the date rules'."""
    start = text.index(part)
    assert detector.excused(text, start, start + len(part), "DATE") is expected
    assert not detector.excused(text, start, start + len(part), "DOCTOR")


def test_every_rule_has_a_positive_case(rules: list[Rule]) -> None:
    covered = {name for case in CASES["case"] for name in case.get("rules", ())}
    assert {rule.name for rule in rules} == covered


def test_every_exception_has_a_case() -> None:
    context = tomllib.loads((RULES_DIR / "context.toml").read_text(encoding="utf-8"))
    judged = {exception for *_, exception in JUDGED if exception}
    assert {e["name"] for e in context["exception"]} == {case["exception"] for case in EXCEPTION_CASES} | judged


@pytest.mark.parametrize("text", ["vomiting 2/7", "LOW 1/12", "BP 120/70", "5/325", "percocet 5/325", "1500H"])
def test_seed_003_false_positives_are_not_dates(detector: PatternDetector, text: str) -> None:
    assert [span for span in detector(text, RECORD) if span.category == "DATE"] == []


def test_date_pattern_finds_every_date_of_the_cases(detector: PatternDetector, rules: list[Rule]) -> None:
    """Every date of a case but those only rules left out of the candidates explain ("FU 9.4")."""
    date_rules = {rule.name for rule in rules if rule.category == "DATE"}
    left_out = {rule.name for rule in rules if not rule.candidate}
    for case in CASES["case"]:
        text = case["text"]
        if case.get("rules") and left_out.issuperset(case["rules"]):
            continue
        for expected in case["expect"]:
            category, value = expected.split(" ", 1)
            if category != "DATE":
                continue
            start = text.index(value)
            found = [m for m in detector.date_pattern.finditer(text) if m.start() <= start < m.end()]
            assert found and found[0].lastgroup in date_rules, expected


def holds(check: Precheck, text: str) -> bool:
    if check.pattern is not None:
        return check.pattern.search(text) is not None
    return any(literal in text.lower() for literal in check.literals)


def test_the_prechecks_hold_wherever_their_rule_matches(rules: list[Rule]) -> None:
    """A precheck is declared, not derived: a wrong one would silently lose matches."""
    texts = [case["text"] for case in CASES["case"] + CASES["known_failure"]]
    assert any(rule.prechecks for rule in rules)
    for rule in rules:
        for text in filter(rule.pattern.search, texts):
            assert all(holds(check, text) for check in rule.prechecks), (rule.name, text)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("0123456789 -/.:@+#'abcjmnoprstwyAMS\n")), max_size=80))
def test_the_prechecks_change_no_span(detector: PatternDetector, rules: list[Rule], text: str) -> None:
    unchecked = PatternDetector([dataclasses.replace(r, prechecks=()) for r in rules])
    assert detector(text, RECORD) == unchecked(text, RECORD)


def test_a_valid_nric_is_explained_by_the_checksum_rule_alone(detector: PatternDetector) -> None:
    assert [(s.rule, s.detector) for s in detector("S8076606H", RECORD)] == [("nric", "regex")]


# --- Validation hooks --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value", ["S8076606H", "S1234567D", "T0123456G", "F1234567N", "G4549883U", "M1234567K", "M3960741N", "s8076606h"]
)
def test_nric_checksum_accepts(value: str) -> None:
    assert nric_checksum(value)


@pytest.mark.parametrize("value", ["S1179607H", "M1234567N", "X1234567D", "S123456D", "S12345678"])
def test_nric_checksum_rejects(value: str) -> None:
    assert not nric_checksum(value)


@pytest.mark.parametrize(
    ("value", "valid"), [("+65 6123 4567", True), ("+1 23", False), ("+12 3456 7890 1234 56", False)]
)
def test_phone_digit_count(value: str, valid: bool) -> None:
    assert phone_digit_count(value) is valid


@pytest.mark.parametrize(
    ("value", "valid"), [("555-0167", True), ("555-0999", True), ("750-1000", False), ("900.1000", False)]
)
def test_not_a_range(value: str, valid: bool) -> None:
    assert not_a_range(value) is valid


# --- Loading the rules -------------------------------------------------------------------------


def rules_dir_with(tmp_path: Path, filename: str, extra: str) -> Path:
    """A copy of the shipped rules with `extra` appended to `filename`."""
    for name in RULE_FILES:
        shutil.copy(RULES_DIR / name, tmp_path / name)
    with (tmp_path / filename).open("a", encoding="utf-8") as file:
        file.write(extra)
    return tmp_path


def block(table: str, **fields: str | list[str]) -> str:
    """A TOML [[table]] block; JSON strings and lists are valid TOML values."""
    return f"\n[[{table}]]\n" + "".join(f"{key} = {json.dumps(value)}\n" for key, value in fields.items())


def test_a_hospital_adds_its_own_identifier_format(tmp_path: Path) -> None:
    extra = block("pattern", name="hospital_case_number", category="ID", regex=r"\bCN-\d{4}-\d{5}\b")
    detector = PatternDetector.from_rules(rules_dir_with(tmp_path, "patterns.toml", extra))
    assert flagged(detector, "case CN-2019-00042 reviewed") == ["ID CN-2019-00042"]
    assert "hospital_case_number" in {span.rule for span in detector("case CN-2019-00042", RECORD)}


PATTERN = {"name": "x", "category": "ID", "regex": "a"}


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"validate": "luhn"}, "unknown validation hook"),
        ({"validat": "nric_checksum"}, "unknown keys"),
        ({"regex": "(a)"}, "capturing groups"),
        ({"category": "PLACE"}, "unknown category"),
        ({"regex": "{nope}"}, "unknown component"),
        ({"regex": "(?:"}, "invalid expression"),
        ({"name": "Bad-Name"}, "lower_snake_case"),
        ({"name": "nric"}, "defined twice"),
    ],
)
def test_pattern_errors_name_the_problem(tmp_path: Path, fields: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        load_rules(rules_dir_with(tmp_path, "patterns.toml", block("pattern", **{**PATTERN, **fields})))


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (block("exception", name="x", applies_to=["DATES"], after="a"), "unknown categories"),
        (block("exception", name="x", applies_to=["DATE"]), "needs at least one"),
        (block("exception", name="x", applies_to=["DATE"], after="a", why="b"), "unknown keys"),
        (block("exceptions", name="x"), "unknown sections"),
    ],
)
def test_exception_errors_name_the_problem(tmp_path: Path, extra: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        load_rules(rules_dir_with(tmp_path, "context.toml", extra))


def test_expand_resolves_nested_components_and_leaves_regex_braces_alone() -> None:
    assert expand(r"{a}\p{L}\d{2}", {"a": "x{b}", "b": "y"}) == r"xy\p{L}\d{2}"


@pytest.mark.parametrize(("source", "message"), [("{a}", "refers to itself"), ("{c}", "unknown component")])
def test_expand_rejects_cycles_and_unknown_names(source: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        expand(source, {"a": "{b}", "b": "{a}"})


def test_the_year_pattern_can_be_switched_off() -> None:
    detector = PatternDetector.from_rules(RULES_DIR, disabled=["year"])
    assert detector("S/P MI 1992", RECORD) == []
    assert detector.date_pattern.search("S/P MI 1992") is None


def test_disabling_an_unknown_pattern_is_an_error() -> None:
    with pytest.raises(ValueError, match="yaer"):
        PatternDetector.from_rules(RULES_DIR, disabled=["yaer"])


# --- Safety: time budget, adversarial input, arbitrary text ------------------------------------


def test_timeout_is_reported_without_the_note_text(detector: PatternDetector) -> None:
    text = "NRIC S8076606H seen 12/03/2019 " * 30_000
    with pytest.raises(NoteTimeout) as raised, spending([NoteBudget(0.0, len(text))]):
        detector(text, RECORD)
    assert raised.value.safe_message == str(raised.value)
    assert str(len(text)) in str(raised.value)
    assert "S8076606H" not in str(raised.value)


def test_a_short_note_past_its_deadline_times_out_though_its_searches_need_no_clock(detector: PatternDetector) -> None:
    with pytest.raises(NoteTimeout), spending([NoteBudget(0.0, 15)]):
        detector("seen 12/03/2019", RECORD)


def test_a_catastrophic_exception_expression_is_stopped_by_the_note_budget(tmp_path: Path) -> None:
    """An exception's expression is data like a pattern's: its searches run within the budget
    (one of about 1.6^60 steps, which no budget can wait for, ends as NoteTimeout)."""
    extra = block("exception", name="hostile", applies_to=["DATE"], after=r"[ ](?:a|aa)+\d")
    detector = PatternDetector.from_rules(rules_dir_with(tmp_path, "context.toml", extra))
    text = "seen 12/03/2019 " + "a" * 60 + "!1"
    with pytest.raises(NoteTimeout), spending([NoteBudget(0.5, len(text))]):
        detector(text, RECORD)
    assert "DATE 12/03/2019" not in flagged(detector, "seen 12/03/2019 aa1")  # and it excuses what it should


def test_the_rules_searched_in_every_note_mostly_need_no_clock_in_a_short_note(rules: list[Rule]) -> None:
    """The regex clock costs a system call per search and match: the rules without a precheck
    should stay cheap enough to search a 1,000-character note without it."""
    timed = [rule.name for rule in rules if not rule.prechecks and rule.steps * 1_001 > UNTIMED_STEPS]
    assert timed == ["id_labelled"]


def test_the_shipped_exceptions_mostly_need_no_clock(rules: list[Rule]) -> None:
    """An exception is asked about most kept matches: only its searches that may be long read
    regex's clock (each costs two system calls)."""
    exceptions = {e.name: e for rule in rules for e in rule.exceptions}.values()
    timed = sorted(f"{e.name}.{part}" for e in exceptions for part, flag in zip(("match", "before", "after"), e.timed) if flag)
    assert timed == [
        "duration_after_a_month_word.before", "duration_shorthand.before", "follow_up_with_whom.before", "measurement_in_clause.before",
        "quantity.after", "score.before", "visit_in.before",
    ]


ADVERSARIAL = {
    "digits": "1" * 100_000,
    "digits and spaces": "1 " * 50_000,
    "digits and slashes": "1/" * 50_000,
    "date chain": "12/03/" * 17_000,
    "random digits, spaces, slashes": "".join(random.Random(0).choices("0123456789 /.-:\t", k=100_000)),
    "plus signs": "+1 " * 34_000,
    "dotted words": "a." * 50_000,
    "word run": "a" * 100_000,
    "labels": "MRN: " * 20_000,
    "month names": "mar 1 " * 17_000,
}


@pytest.mark.parametrize("text", ADVERSARIAL.values(), ids=ADVERSARIAL.keys())
def test_adversarial_100kb_notes_finish_within_the_budget(detector: PatternDetector, text: str) -> None:
    """About a second at most on two busy cores; a pass growing with the square of the note takes
    hours and a catastrophic one forever, so a ten-minute budget tells them apart on any machine."""
    with spending([NoteBudget(600.0, len(text))]):
        detector(text, RECORD)  # raises NoteTimeout otherwise


TOKENS = ["12", "3", "2019", "/", "-", ".", ":", " ", "\t", "\n", "Mar", "march", "the", "3rd", "'", "+65", "@",
          "www.", "yo", "age", "95", "MRN", "S8076606H", "x", "BP", "fever", "at", "ml"]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(TOKENS) | st.text(max_size=4), max_size=40).map("".join))
def test_any_text_gives_spans_within_bounds(detector: PatternDetector, text: str) -> None:
    names = {rule.name for rule in detector.rules}
    for span in detector(text, RECORD):
        assert 0 <= span.start < span.end <= len(text)
        assert span.category in CATEGORIES and span.detector == "regex" and span.rule in names


# --- The lower-cased search of ASCII notes ----------------------------------------------------


def _spans(pattern: regex.Pattern[str], text: str) -> list[tuple[int, int]]:
    return [m.span() for m in pattern.finditer(text)]


def test_a_lowered_pattern_finds_the_same_spans_in_every_case_text(rules: list[Rule]) -> None:
    texts = [case["text"] for case in CASES["case"] + CASES["known_failure"] if case["text"].isascii()]
    for text in texts + [t.upper() for t in texts]:
        for rule in rules:
            if rule.lowered is not None:
                assert _spans(rule.lowered, text.lower()) == _spans(rule.pattern, text), (rule.name, text)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(TOKENS) | st.text(st.characters(max_codepoint=127), max_size=4), max_size=40).map("".join))
def test_a_lowered_pattern_finds_the_same_spans_in_the_lower_cased_note(rules: list[Rule], text: str) -> None:
    """The detector searches an ASCII note lower-cased with `Rule.lowered` (faster than ignoring case)."""
    assert any(rule.lowered for rule in rules)
    for rule in rules:
        if rule.lowered is not None:
            assert _spans(rule.lowered, text.lower()) == _spans(rule.pattern, text), rule.name
        for check in rule.prechecks:
            if check.lowered is not None:
                assert bool(check.lowered.search(text.lower())) == bool(check.pattern.search(text)), rule.name
            if check.standard is not None:
                assert bool(check.standard.search(text.lower())) == bool(check.pattern.search(text)), rule.name


@settings(max_examples=300, deadline=None)
@given(st.text(st.sampled_from("0123456789 \t./-:\nx١"), max_size=60) | st.lists(st.sampled_from(TOKENS), max_size=30).map(" ".join))
def test_a_numeric_precheck_holds_in_the_numeric_runs_where_it_does_in_the_note(rules: list[Rule], text: str) -> None:
    """The detector searches a numeric precheck in the note's numeric runs only (a tenth of it)."""
    checks = [check for rule in rules for check in rule.prechecks if check.numeric]
    assert len(checks) >= 8  # the ID, phone and numeric date prechecks
    for check in checks:
        assert bool(check.pattern.search(numeric_runs(text))) == bool(check.pattern.search(text)), check.pattern.pattern  # type: ignore[union-attr]


def test_a_standard_precheck_holds_where_its_pattern_does_in_every_case_text(rules: list[Rule]) -> None:
    checks = [check for rule in rules for check in rule.prechecks if check.standard is not None]
    assert checks  # the month-name precheck
    texts = [case["text"] for case in CASES["case"] + CASES["known_failure"] if case["text"].isascii()]
    for text in texts + [t.upper() for t in texts]:
        for check in checks:
            assert bool(check.standard.search(text.lower())) == bool(check.pattern.search(text)), text  # type: ignore[union-attr]


def test_every_case_insensitive_rule_is_lowered_and_the_case_sensitive_one_is_not(rules: list[Rule]) -> None:
    for rule in rules:
        assert (rule.lowered is not None) == rule.source.startswith("(?i:"), rule.name
