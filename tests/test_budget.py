"""The per-note time budget (anonymizer.budget) and how the pipeline spends it.

Nothing here times the machine: a note over budget is one whose work provably outlasts any
budget (a search of about 1.6^60 steps, a stage that only checks the deadline), or a budget that
no stage can meet.
"""

from __future__ import annotations

import dataclasses
import shutil

import pytest
import regex

from anonymizer.budget import NoteBudget, NoteTimeout, check, remaining, spending
from anonymizer.pipeline import anonymize_patient, build_pipeline
from anonymizer.record import Note, PatientRecord
from anonymizer.resources import data_dir
from anonymizer.settings import ClassifierConfig, DetectorsConfig

RECORD = PatientRecord("1", names=("José", "O'Brien"))
ENDLESS = regex.compile(r"(?:a|aa)+\d")  # about 1.6^n steps on n a's followed by no digit
ENDLESS_TEXT = "a" * 60 + "!1"


def test_outside_a_stage_nothing_is_timed() -> None:
    assert remaining() is None
    check()


def test_a_stage_that_succeeds_is_charged_to_its_notes_in_proportion_to_their_length() -> None:
    short, long = NoteBudget(5.0, 0), NoteBudget(5.0, 999)
    with spending([short, long]):
        sum(range(10_000))
    assert short.left < 5.0 and long.left < 5.0
    assert (5.0 - long.left) == pytest.approx(1000 * (5.0 - short.left))


def test_a_stage_that_fails_is_not_charged() -> None:
    budget = NoteBudget(5.0, 10)
    with pytest.raises(ZeroDivisionError), spending([budget]):
        1 / 0
    assert budget.left == 5.0


def test_a_regex_search_past_the_deadline_is_a_note_timeout_with_numbers_only() -> None:
    with pytest.raises(NoteTimeout) as raised, spending([NoteBudget(0.05, 1234)]):
        ENDLESS.search(ENDLESS_TEXT, timeout=remaining())
    assert str(raised.value) == raised.value.safe_message == "detection exceeded 0.05s on a note of 1234 characters"


def test_a_budget_no_stage_can_meet_fails_every_note_and_loses_none() -> None:
    pipeline = build_pipeline(DetectorsConfig(note_timeout=1e-9), {}, ClassifierConfig())
    notes = [Note(str(k), "1", text) for k, text in enumerate(["", "José seen 12/03/2019", "é " + "1/" * 1000])]
    results = anonymize_patient(RECORD, notes, pipeline)
    assert [r.note_id for r in results] == ["0", "1", "2"]
    assert all(r.text is None and r.error.startswith("NoteTimeout: detection exceeded 1e-09s on a note of ") for r in results)


class Stalling:
    """The shipped classifier, except that it never finishes a note holding STALL: it only checks
    the deadline, as any stage's loop does, so the budget alone ends it."""

    def __init__(self, real) -> None:
        self.real, self.name = real, real.name

    def __call__(self, text, record, rule_spans):
        self._stall([text])
        return self.real(text, record, rule_spans)

    def patient_spans(self, record, notes):
        self._stall([text for text, _ in notes])
        return self.real.patient_spans(record, notes)

    def combine(self, rule_spans, own):
        return self.real.combine(rule_spans, own)

    @staticmethod
    def _stall(texts) -> None:
        while any("STALL" in text for text in texts):
            check()


def test_a_note_the_classifier_never_finishes_fails_alone_after_the_patients_pass_runs_out() -> None:
    """The patient's pass has the notes' budgets together; when it runs out each note is redone
    within its own, so the patient's other notes are still anonymized."""
    pipeline = build_pipeline(DetectorsConfig(note_timeout=0.5), {}, ClassifierConfig())
    pipeline = dataclasses.replace(pipeline, classifier=Stalling(pipeline.classifier))
    notes = [Note("1", "1", "José seen 12/03/2019"), Note("2", "1", "STALL " * 10), Note("3", "1", "O'Brien ok")]
    first, stalled, last = anonymize_patient(RECORD, notes, pipeline)
    assert (first.text, first.error) == ("[PATIENT] seen [DATE]", None)
    assert (last.text, last.error) == ("[PATIENT] ok", None)
    assert stalled.text is None and stalled.error == "NoteTimeout: detection exceeded 0.5s on a note of 60 characters"


def test_a_catastrophic_exception_fails_its_note_only(tmp_path) -> None:
    """The context exceptions are searched within the budget too, from the rules and from the
    classifier (whose detections obey them)."""
    rules = shutil.copytree(data_dir("rules"), tmp_path / "rules")
    with (rules / "context.toml").open("a", encoding="utf-8") as file:
        file.write('\n[[exception]]\nname = "hostile"\napplies_to = ["DATE"]\nafter = \'[ ](?:a|aa)+\\d\'\n')
    pipeline = build_pipeline(DetectorsConfig(note_timeout=0.5), {}, ClassifierConfig(), rules_dir=rules)
    notes = [Note("1", "1", "seen 12/03/2019 " + ENDLESS_TEXT), Note("2", "1", "José seen 12/03/2019")]
    hostile, ordinary = anonymize_patient(RECORD, notes, pipeline)
    assert hostile.text is None and hostile.error == f"NoteTimeout: detection exceeded 0.5s on a note of {len(notes[0].text)} characters"
    assert (ordinary.text, ordinary.error) == ("[PATIENT] seen [DATE]", None)
