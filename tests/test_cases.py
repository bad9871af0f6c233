"""Regression cases as data: tests/data/cases/<detector>.toml, one file per detector of the catalogue.

Each file is run through the public API with only its detector enabled (one pipeline per file).
A case fails when a span it must find is not found or a span it must avoid is flagged; the test
asserts that the set of failing case ids equals the file's `known_failures`.  So a regression
fails the test, and so does a fix until its case is moved out of `known_failures`.

The format is described at the top of tests/data/cases/record.toml.  The regex detector's rule
by rule cases stay in tests/data/pattern_cases.toml (tests/test_patterns.py); regex.toml holds
cases of the whole pipeline with only that detector on.
"""

from __future__ import annotations

import datetime as dt
import re
import tomllib
from pathlib import Path

import pytest

from anonymizer import CATEGORIES, DETECTORS, ClassifierConfig, Deidentifier, DetectorsConfig, PatientRecord

CASES_DIR = Path(__file__).parent / "data" / "cases"
FILES = sorted(CASES_DIR.glob("*.toml"))
RECORD_FIELDS = ("names", "relatives", "identifiers", "phones", "dates", "addresses")
NTH = re.compile(r"(?P<part>.+) @(?P<nth>[1-9]\d*)", re.DOTALL)
CASE_KEYS = {"id", "text", "record", "find", "avoid"}


def load(path: Path) -> dict:
    return tomllib.loads(path.read_text(encoding="utf-8"))


def pipeline(detector: str, lists: dict[str, list[str]]) -> Deidentifier:
    """The shipped rules and model with every detector of the catalogue but `detector` disabled."""
    disabled = tuple(name for name in DETECTORS.names() if name != detector)
    classifier = ClassifierConfig(enabled=detector in DETECTORS.classifier_names())
    return Deidentifier.default(lists, detectors=DetectorsConfig(disabled=disabled), classifier=classifier)


def record(case: dict) -> PatientRecord:
    fields = case.get("record", {})
    values = {field: tuple(fields.get(field, ())) for field in RECORD_FIELDS}
    return PatientRecord("p1", **values)


def locate(text: str, part: str) -> tuple[int, int]:
    """`part` in `text`: its first occurrence, or its n-th when written "part @n"."""
    nth = 1
    if (match := NTH.fullmatch(part)) is not None:
        part, nth = match["part"], int(match["nth"])
    start = -1
    for _ in range(nth):
        start = text.find(part, start + 1)
        if start < 0:
            raise ValueError(f"{part!r} (occurrence {nth}) is not in {text!r}")
    return start, start + len(part)


def problems(deid: Deidentifier, case: dict) -> list[str]:
    """What is wrong with the case's result today: [] when it passes."""
    text = case["text"]
    spans = deid.deidentify(text, record(case)).spans
    wrong = []
    for item in case.get("find", ()):
        category, part = item.split(" ", 1)
        start, end = locate(text, part)
        covered = [False] * (end - start)
        for span in spans:
            if span.category == category:
                for i in range(max(start, span.start), min(end, span.end)):
                    covered[i - start] = True
        if not all(c or text[start + i].isspace() for i, c in enumerate(covered)):
            wrong.append(f"missed {item!r}")
    for part in case.get("avoid", ()):
        start, end = locate(text, part)
        hit = [f"{s.category} {text[s.start:s.end]!r}" for s in spans if s.start < end and start < s.end]
        if hit:
            wrong.append(f"flagged {part!r} ({', '.join(hit)})")
    return wrong


@pytest.fixture(scope="module", params=FILES, ids=lambda path: path.stem)
def cases(request: pytest.FixtureRequest) -> tuple[str, dict, Deidentifier]:
    path: Path = request.param
    data = load(path)
    return path.stem, data, pipeline(path.stem, data.get("lists", {}))


def test_a_file_for_every_detector() -> None:
    assert {path.stem for path in FILES} == set(DETECTORS.names())


@pytest.mark.parametrize("path", FILES, ids=lambda path: path.stem)
def test_the_file_is_well_formed(path: Path) -> None:
    data = load(path)
    assert set(data) <= {"case", "known_failures", "lists"}
    ids = [case["id"] for case in data["case"]]
    assert len(ids) == len(set(ids)), "case ids are unique"
    assert set(data.get("known_failures", ())) <= set(ids), "every known failure is a case"
    assert len(data.get("known_failures", ())) == len(set(data.get("known_failures", ())))
    for case in data["case"]:
        assert set(case) <= CASE_KEYS, case["id"]
        assert case.get("find") or case.get("avoid"), f"{case['id']}: nothing to check"
        assert set(case.get("record", {})) <= set(RECORD_FIELDS), case["id"]
        assert all(isinstance(d, dt.date) for d in case.get("record", {}).get("dates", ())), case["id"]
        for item in case.get("find", ()):
            category, part = item.split(" ", 1)
            assert category in CATEGORIES, f"{case['id']}: {category}"
            locate(case["text"], part)
        for part in case.get("avoid", ()):
            locate(case["text"], part)


def test_the_failing_cases_are_the_known_failures(cases: tuple[str, dict, Deidentifier]) -> None:
    name, data, deid = cases
    failing = {}
    for case in data["case"]:
        wrong = problems(deid, case)
        if wrong:
            failing[case["id"]] = wrong
    known = set(data.get("known_failures", ()))
    regressed = {case: why for case, why in failing.items() if case not in known}
    fixed = sorted(known - set(failing))
    assert not regressed and not fixed, (
        f"{name}.toml: newly failing {regressed}; "
        f"passing now, to move out of known_failures: {fixed}"
    )
