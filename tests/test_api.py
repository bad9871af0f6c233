"""The Python API at the package top: the README's example runs, and it anonymizes as a run does."""

from __future__ import annotations

import dataclasses
import doctest
import re
import subprocess
import sys
from pathlib import Path

import pytest

import anonymizer
from anonymizer import (
    ClassifierConfig,
    DeidentificationFailed,
    Deidentifier,
    DetectorsConfig,
    MergedSpan,
    Note,
    NoteResult,
    PatientRecord,
    ReplaceConfig,
    load_config,
)
from anonymizer.registry import DETECTORS

ROOT = Path(__file__).resolve().parent.parent
NO_SVM = ClassifierConfig(enabled=False)


def readme_section(title: str) -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end >= 0 else None]


def test_the_readme_python_api_example_runs_as_shown(monkeypatch):
    section = readme_section("Python API")
    blocks = re.findall(r"```pycon\n(.*?)```", section, flags=re.DOTALL)
    assert len(blocks) >= 2 and "from_config" in section and "register_detector" in section
    monkeypatch.chdir(ROOT)  # the example reads ./anonymizer.toml, as the CLI does
    test = doctest.DocTestParser().get_doctest("\n".join(blocks), {}, "README.md: Python API", "README.md", 0)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    try:
        runner.run(test)
    finally:
        for name in set(DETECTORS.names()) - {"record", "honorific", "regex", "phones", "lists", "places", "svm"}:
            DETECTORS.unregister(name)  # what the example registered
    assert runner.summarize(verbose=False).failed == 0
    assert runner.summarize(verbose=False).attempted >= 10


def test_the_package_top_exports_the_api_and_imports_it_only_when_used():
    for name in anonymizer.__all__:
        assert getattr(anonymizer, name) is not None
    assert {"Deidentifier", "PatientRecord", "Note", "Span", "MergedSpan", "register_detector"} <= set(dir(anonymizer))
    with pytest.raises(AttributeError):
        anonymizer.Nothing  # noqa: B018
    from anonymizer import audit  # submodules are still submodules

    assert audit.__name__ == "anonymizer.audit"
    code = (
        "import sys, anonymizer, anonymizer.target; print(sorted(m for m in sys.modules if m in ('anonymizer.pipeline', 'anonymizer.api')))"
    )
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip() == "[]"


@pytest.fixture(scope="module")
def rules_only() -> Deidentifier:
    return Deidentifier.default(lists={"DOCTOR": ["Quiley"]}, classifier=NO_SVM)


RECORD = PatientRecord("1", names=("Marisette Vrabel",), identifiers=("S1234567D",))


def test_deidentify_returns_the_text_and_its_explained_spans(rules_only):
    text = "Pt marisete VRABEL, NRIC S1234567D, seen by Dr. Quiley."
    result = rules_only.deidentify(text, RECORD)
    assert result.text == "Pt [PATIENT], NRIC [ID], seen by Dr. [DOCTOR]."  # touching spans are one
    assert result.original == text
    assert all(isinstance(s, MergedSpan) for s in result.spans)
    assert [(text[s.start : s.end], s.category) for s in result.spans] == [
        ("marisete VRABEL", "PATIENT"),
        ("S1234567D", "ID"),
        ("Quiley", "DOCTOR"),
    ]
    assert result.spans[1].sources == ("record:identifier", "regex:nric")
    assert result.explain().splitlines()[0] == "3-18 PATIENT 'marisete VRABEL': record:name"
    # without a record, only the detectors that need none
    assert rules_only.deidentify("Pt marisete, seen by Dr. Quiley.").text == "Pt marisete, seen by Dr. [DOCTOR]."


def test_anonymize_patient_takes_notes_or_strings_and_refuses_another_patients_notes(rules_only):
    results = rules_only.anonymize_patient(RECORD, [Note("n9", "1", "Marisette well."), "S1234567D"])
    assert all(isinstance(r, NoteResult) for r in results)
    assert [(r.note_id, r.text) for r in results] == [("n9", "[PATIENT] well."), ("2", "[ID]")]
    with pytest.raises(ValueError, match="notes of patient '2'"):
        rules_only.anonymize_patient(RECORD, [Note("n1", "2", "text")])


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"names": "William Tan"}, "PatientRecord.names must be a tuple (got str)"),
        ({"relatives": ["Mary Tan"]}, "PatientRecord.relatives must be a tuple (got list)"),
        ({"dates": ("1950-03-04",)}, "PatientRecord.dates must hold datetime.date values (got str)"),
        ({"phones": (91234567,)}, "PatientRecord.phones must hold builtins.str values (got int)"),
    ],
)
def test_a_record_field_of_the_wrong_type_is_a_one_line_error_without_its_value(fields, message):
    with pytest.raises(TypeError) as error:
        PatientRecord("p1", **fields)
    assert str(error.value) == message
    assert all(str(v) not in message for v in fields.values())


def test_a_failed_note_raises_from_deidentify_and_is_a_result_from_anonymize_patient():
    deid = Deidentifier.default(detectors=DetectorsConfig(note_timeout=1e-9), classifier=NO_SVM)
    with pytest.raises(DeidentificationFailed) as info:
        deid.deidentify("Pt Marisette seen. " * 200, RECORD)
    assert info.value.reason.startswith("NoteTimeout")
    (result,) = deid.anonymize_patient(RECORD, ["Pt Marisette seen. " * 200])
    assert result.text is None and result.error.startswith("NoteTimeout")


def test_from_config_builds_what_a_run_builds(hospital, monkeypatch):
    from anonymizer import worker
    from anonymizer.pipeline import anonymize_patient

    config = load_config(hospital)
    source, pipeline = worker.load(config)  # what a run's prepare() builds, without its gc settings
    by_path, by_config = Deidentifier.from_config(hospital), Deidentifier.from_config(config)
    assert by_path.digest == by_config.digest == pipeline.digest
    for batch in source.batches(100):
        for patient_id, record in batch.records.items():
            notes = [n for n in batch.notes if n.patient_id == patient_id]
            assert by_path.anonymize_patient(record, notes) == anonymize_patient(record, notes, pipeline)
    assert by_path.deidentify("Seen by Dr. Quiley.").text == "Seen by Dr. [DOCTOR]."  # a list read from the source


def test_default_takes_the_replacement_mode(monkeypatch):
    monkeypatch.setenv("ANONYMIZER_SECRET", "0f1e2d3c4b5a69788796a5b4c3d2e1f0")
    deid = Deidentifier.default(classifier=NO_SVM, replace=ReplaceConfig(mode="surrogates"))
    text = "Pt Marisette Vrabel, NRIC S1234567D."
    result = deid.deidentify(text, RECORD)
    assert "[" not in result.text and "Marisette" not in result.text and "S1234567D" not in result.text
    assert deid.deidentify(text, RECORD).text == result.text  # same key, same surrogates
    assert dataclasses.replace(result, text="").spans == Deidentifier.default(classifier=NO_SVM).deidentify(text, RECORD).spans
