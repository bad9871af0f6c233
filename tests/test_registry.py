"""The detector catalogue: one ordered list of named factories that every pipeline is built from."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import anonymizer
from anonymizer import ClassifierConfig, ConfigError, Deidentifier, DetectorsConfig, PatientRecord, ReplaceConfig, Span
from anonymizer.audit import leak_detectors
from anonymizer.detectors.patterns import PatternDetector
from anonymizer.pipeline import build_pipeline
from anonymizer.registry import DETECTORS, SHIPPED, DetectorEntry, DetectorRegistry, record_detectors
from anonymizer.resources import data_dir

ROOT = Path(__file__).resolve().parent.parent
SHIPPED_NAMES = ("record", "honorific", "regex", "phones", "lists", "places", "svm")
NO_SVM = ClassifierConfig(enabled=False)
RECORD = PatientRecord("1", names=("Marisette Vrabel",))


class BedNumbers:
    """A toy detector, as a module of its own would hold it: "bed 12A" is a LOCATION."""

    name = "beds"

    def __call__(self, text: str, record: PatientRecord) -> list[Span]:
        return [Span(m.start(), m.end(), "LOCATION", self.name, "bed") for m in re.finditer(r"\bbed \d+[A-Z]?\b", text)]


def beds(context) -> list[BedNumbers]:
    return [BedNumbers()]


@pytest.fixture
def registered():
    """Register the toy detector through the public API, and take it out again afterwards."""
    entry = anonymizer.register_detector("beds", beds, finds="ward bed numbers", before="svm")
    try:
        yield entry
    finally:
        DETECTORS.unregister("beds")
    assert DETECTORS.signature() == SHIPPED


def test_the_catalogue_names_the_shipped_detectors_in_the_order_they_run():
    assert DETECTORS.names() == SHIPPED_NAMES
    assert DETECTORS.classifier_names() == ("svm",)
    assert all(entry.finds for entry in DETECTORS)
    # the README's table of detectors is the catalogue's
    table = (ROOT / "README.md").read_text(encoding="utf-8").split("## Detectors and their rules", 1)[1].split("\n\n")[1]
    assert tuple(re.findall(r"^\| `(\w+)` \|", table, flags=re.MULTILINE)) == SHIPPED_NAMES


def test_a_detector_registered_through_the_public_api_runs_is_explained_and_can_be_disabled(registered):
    assert DETECTORS.names() == ("record", "honorific", "regex", "phones", "lists", "places", "beds", "svm")
    text = "Marisette moved to bed 12A."
    result = Deidentifier.default(classifier=NO_SVM).deidentify(text, RECORD)
    assert result.text == "[PATIENT] moved to [LOCATION]."
    assert [(text[s.start : s.end], s.sources) for s in result.spans] == [("Marisette", ("record:name",)), ("bed 12A", ("beds:bed",))]
    off = Deidentifier.default(detectors=DetectorsConfig(disabled=("beds",)), classifier=NO_SVM).deidentify(text, RECORD)
    assert off.text == "[PATIENT] moved to bed 12A."
    with pytest.raises(ConfigError, match=r"unknown detector 'bed' \(one of record, honorific, regex, phones, lists, places, beds, svm\)"):
        build_pipeline(DetectorsConfig(disabled=("bed",)), {}, NO_SVM)


def test_a_registered_detector_changes_the_digest_and_the_shipped_catalogue_does_not(registered):
    with_beds = build_pipeline(DetectorsConfig(), {}, NO_SVM).digest
    DETECTORS.unregister("beds")
    try:
        shipped = build_pipeline(DetectorsConfig(), {}, NO_SVM).digest
        assert build_pipeline(DetectorsConfig(), {}, NO_SVM, registry=DETECTORS.copy()).digest == shipped
    finally:
        DETECTORS.add(registered)
    assert with_beds != shipped
    bumped = DETECTORS.copy()
    bumped.unregister("beds")
    bumped.register("beds", beds, version="2")
    assert build_pipeline(DetectorsConfig(), {}, NO_SVM, registry=bumped).digest not in (shipped, with_beds)


def test_a_private_catalogue_leaves_the_shared_one_alone():
    mine = DETECTORS.copy()
    mine.register("beds", beds)
    mine.unregister("honorific")
    pipeline = build_pipeline(DetectorsConfig(), {}, NO_SVM, registry=mine)
    assert [d.name for d in pipeline.detectors] == ["record", "record", "record", "regex", "phones", "lists", "places", "beds"]
    assert DETECTORS.names() == SHIPPED_NAMES
    with pytest.raises(ConfigError, match="unknown detector 'honorific'"):
        build_pipeline(DetectorsConfig(disabled=("honorific",)), {}, NO_SVM, registry=mine)


def test_the_catalogue_refuses_what_would_make_spans_unexplainable():
    mine = DETECTORS.copy()
    with pytest.raises(ValueError, match="already registered"):
        mine.register("regex", beds)
    with pytest.raises(ValueError, match="there is a classifier already"):
        mine.register("crf", lambda context: None, stage="classifier")
    with pytest.raises(ValueError, match="stage"):
        DetectorEntry("beds", beds, stage="later")
    with pytest.raises(ValueError, match="letters, digits"):
        DetectorEntry("bed:numbers", beds)  # a span's source is "detector:rule"
    with pytest.raises(KeyError, match="no detector 'nothing'"):
        mine.register("beds", beds, before="nothing")
    mine.register("misnamed", beds)  # its detectors are named "beds"
    with pytest.raises(ValueError, match="detector 'misnamed' built a detector named 'beds'"):
        build_pipeline(DetectorsConfig(), {}, NO_SVM, registry=mine)


def test_the_run_audit_leaks_and_the_replacer_build_the_record_detectors_alike(monkeypatch):
    rules = data_dir("rules")
    date_pattern = PatternDetector.from_rules(rules).date_pattern
    shape = [(type(d), d.name) for d in record_detectors(rules, 0.33, date_pattern)]
    assert [(type(d), d.name) for d in leak_detectors(rules, 0.33)] == shape
    pipeline = build_pipeline(DetectorsConfig(), {}, NO_SVM)
    assert [(type(d), d.name) for d in pipeline.detectors if d.name == "record"] == shape
    monkeypatch.setenv("ANONYMIZER_SECRET", "0f1e2d3c4b5a69788796a5b4c3d2e1f0")
    from anonymizer.surrogates import build_replacer

    replacer = build_replacer(ReplaceConfig(mode="surrogates"), rules, date_pattern, 0.33)
    assert [(type(d), d.name) for d in replacer._leak_detectors] == shape
    # in a run, the replacer checks its surrogates with the run's own record detectors
    surrogates = build_pipeline(DetectorsConfig(), {}, NO_SVM, replace=ReplaceConfig(mode="surrogates"))
    assert surrogates.replace._leak_detectors == [d for d in surrogates.detectors if d.name == "record"]
    alone = build_pipeline(DetectorsConfig(disabled=("record",)), {}, NO_SVM, replace=ReplaceConfig(mode="surrogates"))
    assert [(type(d), d.name) for d in alone.replace._leak_detectors] == shape
    assert all(d.name != "record" for d in alone.detectors)


def test_a_registry_is_built_from_entries():
    mine = DetectorRegistry([DETECTORS["regex"]])
    mine.register("beds", beds, before="regex")
    assert mine.names() == ("beds", "regex") and len(mine) == 2 and "beds" in mine
    pipeline = build_pipeline(DetectorsConfig(), {}, ClassifierConfig(), registry=mine)
    assert pipeline.classifier is None  # no classifier in this catalogue
    assert {s.source for s in pipeline.rule_spans("bed 3 on 12/03/2019", RECORD)} == {"beds:bed", "regex:date_cued_numeric"}
