"""Token-level scoring arithmetic on a hand-made example, and grouped cross-validation."""

from __future__ import annotations

import pytest

from anonymizer.classifier.crossval import cross_validate
from anonymizer.corpora import Corpus, GoldNote
from anonymizer.record import PatientRecord
from anonymizer.scoring import Counts, evaluate, overlap_mask, score_notes, tokenize
from anonymizer.spans import Span

#        0         1         2         3         4
#        0123456789012345678901234567890123456789012345
TEXT = "Dr E. Nessenson saw pt on 7/22; wife Mary here."
GOLD = ((3, 15, "DOCTOR"), (26, 30, "DATE"), (37, 41, "RELATIVE"))
NOTE = GoldNote("n1", "p1", TEXT, GOLD)


def predict(text: str, record: PatientRecord) -> list[Span]:
    return [
        Span(6, 15, "DOCTOR", "lists"),  # Nessenson (E missed)
        Span(26, 30, "DATE", "regex"),  # 7, 22
        Span(0, 2, "DOCTOR", "honorific"),  # Dr: a false positive
    ]


def test_tokens_and_overlap():
    starts, ends = tokenize(TEXT)
    words = [TEXT[s:e] for s, e in zip(starts, ends)]
    assert words == ["Dr", "E", "Nessenson", "saw", "pt", "on", "7", "22", "wife", "Mary", "here"]
    gold = overlap_mask(starts, ends, GOLD)
    assert gold == [None, "DOCTOR", "DOCTOR", None, None, None, "DATE", "DATE", None, "RELATIVE", None]


def test_scoring_arithmetic_by_hand():
    counts = score_notes([NOTE], {"p1": PatientRecord("p1")}, predict)
    # gold tokens: E, Nessenson, 7, 22, Mary = 5; detected among them: Nessenson, 7, 22 = 3; FP: Dr
    assert (counts.tp, counts.fp, counts.fn) == (3, 1, 2)
    assert counts.precision == pytest.approx(3 / 4)
    assert counts.recall == pytest.approx(3 / 5)
    assert counts.f1 == pytest.approx(2 * 0.75 * 0.6 / 1.35)
    # phrases: "E. Nessenson" (not all tokens found), "7/22" found, "Mary" missed
    assert (counts.phrases, counts.phrases_found) == (3, 1)
    assert sorted(c for _, c, _ in counts.missed) == ["DOCTOR", "RELATIVE"]
    table = counts.categories()
    assert table["DOCTOR"]["recall"] == 0.5 and table["DATE"]["recall"] == 1.0 and table["RELATIVE"]["recall"] == 0.0
    assert table["DOCTOR"]["precision"] == 0.5  # Dr (wrong) and Nessenson (right)
    row = counts.row()
    assert row["tp"] == 3 and row["phrase_recall"] == pytest.approx(1 / 3, abs=1e-4)


def test_merge_adds_up():
    a = score_notes([NOTE], {}, predict)
    b = score_notes([NOTE], {}, predict)
    total = Counts()
    total.merge(a)
    total.merge(b)
    assert (total.tp, total.fp, total.fn, total.phrases) == (6, 2, 4, 6)


def test_rules_classifier_union_rows():
    corpus = Corpus("t", [NOTE], {"p1": PatientRecord("p1")})

    def classifier(text, record, rule_spans):
        flagged = {(s.start, s.end) for s in rule_spans}
        mary = (37, 41)
        return [] if mary in flagged else [Span(*mary, "RELATIVE", "svm")]

    rows = evaluate(corpus, rules=predict, classifier=classifier)
    assert set(rows) == {"rules", "classifier", "union"}
    assert rows["classifier"].tp == 1 and rows["classifier"].fp == 0
    assert rows["union"].tp == 4 and rows["union"].fn == 1 and rows["union"].fp == 1


def synthetic_corpus(notes: int) -> Corpus:
    """The synthetic corpus of test_classifier.py, loaded by path (whatever pytest's import mode)."""
    import importlib.util
    from pathlib import Path

    spec = importlib.util.spec_from_file_location("_synthetic", Path(__file__).with_name("test_classifier.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.synthetic_corpus(notes=notes)


@pytest.fixture
def trained_on(monkeypatch) -> list[set[str]]:
    """The patients of each model cross-validation fits, in the order it fits them."""
    from anonymizer.classifier import crossval

    seen: list[set[str]] = []
    real_fit = crossval.fit

    def spy(notes, options, lists=None):
        seen.append({n.note.patient_id for n in notes})
        return real_fit(notes, options, lists)

    monkeypatch.setattr(crossval, "fit", spy)
    return seen


def test_cross_validation_never_scores_a_note_with_a_model_that_saw_its_patient(trained_on):
    from anonymizer.classifier.training import TrainingOptions, build_dataset

    dataset = build_dataset([synthetic_corpus(notes=40)])
    seen = trained_on
    result = cross_validate(dataset, TrainingOptions(c=0.5), folds=4)
    assert len(seen) == 4
    for fold, patients in enumerate(seen):
        tested = {d.note.patient_id for d, f in zip(result.notes, result.fold_of_note) if f == fold}
        assert tested and not (tested & patients)
    again = cross_validate(dataset, TrainingOptions(c=0.5), folds=4)
    assert all((a == b).all() for a, b in zip(result.scores, again.scores))
    summary = result.summary()
    assert set(summary["rows"]) >= {"rules", "classifier", "union"}
    assert summary["curve"] and summary["rows"]["classifier"]["recall"] > 0.5


def test_lockbox_split_is_by_patient_and_stable():
    from anonymizer.corpora import in_lockbox, split_lockbox

    assert [in_lockbox(p) for p in ("3", "9", "4", "11", " 15 ")] == [True, True, False, False, True]
    assert in_lockbox("uuid-a") == in_lockbox("uuid-a")  # non-numeric ids: a stable hash
    notes = [GoldNote(f"n{k}", str(k % 9), TEXT, GOLD) for k in range(18)]
    tuning, box = split_lockbox(Corpus("c", notes, {}))
    assert {n.patient_id for n in box.notes} == {"0", "3", "6"}
    assert not {n.patient_id for n in tuning.notes} & {n.patient_id for n in box.notes}
    assert len(tuning.notes) + len(box.notes) == len(notes)


def test_lockbox_report_scores_the_lockbox_with_a_model_that_never_saw_it(trained_on):
    from anonymizer.classifier.training import TrainingOptions
    from anonymizer.corpora import in_lockbox
    from anonymizer.evaluate import format_report, run_evaluation

    corpus = synthetic_corpus(notes=48)
    report = run_evaluation(corpus, cv=3, options=TrainingOptions(c=0.5), lockbox=True)
    assert len(trained_on) == 4  # three tuning folds, then the tuning part for the lockbox
    assert not any(in_lockbox(p) for patients in trained_on for p in patients)
    assert {"tuning: union", "lockbox: union"} <= set(report["rows"])
    assert report["split"]["lockbox"]["patients"] == 4  # ids 0, 3, 6, 9 of 0..11
    assert not {nid for nid, _, _ in report["missed"]} & {n.note_id for n in corpus.notes if in_lockbox(n.patient_id)}
    assert "lockbox minus tuning part" in format_report(report)
