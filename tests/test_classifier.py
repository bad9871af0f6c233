"""The classifier: deterministic training, plain-data model == scikit-learn, shipped model, union."""

from __future__ import annotations

import gzip
import json
import random
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from anonymizer.classifier import postprocess
from anonymizer.classifier.features import Tokens
from anonymizer.classifier.model import (
    BATCH_NOTES,
    DEFAULT_MODEL,
    Model,
    SvmDetector,
    joined_run,
    load_detector,
    load_model,
    rule_categories,
    vetoed,
    weakest_part,
)
from anonymizer.classifier.policy import load_policy
from anonymizer.classifier.train import train
from anonymizer.classifier.training import (
    TrainingOptions,
    build_dataset,
    fit,
    fit_estimators,
    label_tokens,
)
from anonymizer.corpora import Corpus, GoldNote
from anonymizer.record import PatientRecord
from anonymizer.settings import ClassifierConfig
from anonymizer.spans import Span, union

SHARED = Path(__file__).resolve().parents[2] / "shared" / "corpora" / "physionet-nursing"

DOCTORS = ["Quiley", "Rizzo", "Haverty", "Bean", "Kowalski", "Nguyen", "Okafor", "Lindqvist"]
RELATIVES = ["Mary", "Hank", "Lisa", "Janet", "Vinny", "Ed"]
PLACES = ["Calvert", "Kernan", "Catonsville", "Harford", "Towson"]
TEMPLATES = [
    "Pt seen by Dr {doc} this am. Plan d/w team.",
    "SOCIAL: wife {rel} at bedside, updated by RN.",
    "Transferred from {place} Hospital on {date}. VSS.",
    "NEURO: A&Ox3, MAE. CV: SR 80s, BP 120/70.",
    "resp: lungs clear, sats 98% on 2L NC. {doc} NP aware.",
    "dtr {rel} called, will visit {date}. lives in {place}.",
    "GI: abd soft, +BS. GU: foley draining clear yellow urine.",
]


def synthetic_corpus(notes: int = 60, seed: int = 7) -> Corpus:
    rng = random.Random(seed)
    out = []
    records = {}
    for k in range(notes):
        pid = str(k % 12)
        records[pid] = PatientRecord(pid, names=("JOHN", "DOE"))
        spans, text = [], ""
        for template in rng.sample(TEMPLATES, 4):
            values = {"doc": rng.choice(DOCTORS), "rel": rng.choice(RELATIVES), "place": rng.choice(PLACES),
                      "date": f"{rng.randint(1, 12)}/{rng.randint(1, 28)}"}
            piece = template
            for key, cat in (("doc", "DOCTOR"), ("rel", "RELATIVE"), ("place", "LOCATION"), ("date", "DATE")):
                marker = "{" + key + "}"
                while marker in piece:
                    at = piece.index(marker)
                    start = len(text) + at
                    spans.append((start, start + len(values[key]), cat))
                    piece = piece[:at] + values[key] + piece[at + len(marker):]
            text += piece + "\n"
        out.append(GoldNote(str(k), pid, text, tuple(sorted(spans))))
    return Corpus("synthetic", out, records, {"DOCTOR": ["Quiley", "Rizzo"]})


@pytest.fixture(scope="module")
def corpus() -> Corpus:
    return synthetic_corpus()


def test_labels_follow_overlapping_gold_spans():
    tokens = Tokens.of("seen by Dr. E. Nessenson on 7/22")
    labels = label_tokens(tokens, [(12, 24, "DOCTOR"), (28, 32, "DATE")])
    assert labels == ["O", "O", "O", "DOCTOR", "DOCTOR", "O", "DATE", "DATE"]


def test_training_twice_gives_identical_bytes(tmp_path, corpus):
    options = TrainingOptions(c=0.2)
    a = train([corpus], tmp_path / "a.json.gz", options)
    b = train([corpus], tmp_path / "b.json.gz", options)
    assert (tmp_path / "a.json.gz").read_bytes() == (tmp_path / "b.json.gz").read_bytes()
    assert a["sha256"] == b["sha256"]
    data = json.loads(gzip.decompress((tmp_path / "a.json.gz").read_bytes()))
    assert data["format"] == "anonymizer-svm/1" and data["heads"]["phi"]["weights"]
    # run-time policy (rules/classifier.toml) is not the model's: no confirm list, no heuristics
    for record in (data, data["training"], data["card"]["options"]):
        assert not {"confirm", "postprocess"} & set(record)


def test_training_with_surrogate_copies_twice_gives_identical_bytes_and_the_same_gazetteers(tmp_path, corpus):
    options = TrainingOptions(c=0.2, augment=1)
    a = train([corpus], tmp_path / "a.json.gz", options)
    b = train([corpus], tmp_path / "b.json.gz", options)
    assert a["sha256"] == b["sha256"] and a["augmented_tokens"] > 0.9 * a["tokens"]
    plain = train([corpus], tmp_path / "p.json.gz", TrainingOptions(c=0.2, augment=0))
    loaded = [json.loads(gzip.decompress((tmp_path / f"{x}.json.gz").read_bytes())) for x in ("a", "p")]
    assert loaded[0]["gazetteers"] == loaded[1]["gazetteers"]  # learned from the annotated notes only
    assert loaded[0]["training"]["augment"] == 1 and plain["sha256"] != a["sha256"]
    lighter = train([corpus], tmp_path / "w.json.gz", TrainingOptions(c=0.2, augment=1, augment_weight=0.5))
    assert lighter["sha256"] not in (a["sha256"], plain["sha256"])


#        0         1         2         3         4         5         6         7         8         9
#        0123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123
COPY_TEXT = "SMITH, John seen 7/22/2010 by Dr. Kowalski; wife smith (617) 555-1234 lives in Towson near MGH."
COPY_GOLD = ((0, 5, "PATIENT"), (7, 11, "PATIENT"), (17, 26, "DATE"), (34, 42, "DOCTOR"), (49, 54, "RELATIVE"),
             (55, 69, "PHONE"), (79, 85, "LOCATION"), (91, 94, "LOCATION"))


def test_a_surrogate_copy_replaces_each_gold_span_by_one_of_its_category_and_shape():
    import datetime as dt
    import re

    from anonymizer.classifier.augment import surrogate_copy, surrogate_replacer

    note = GoldNote("n1", "p1", COPY_TEXT, COPY_GOLD)
    record = PatientRecord("p1", names=("John", "Smith"), phones=("(617) 555-1234",), dates=(dt.date(1950, 1, 2),),
                           addresses=("12 Towson Road",))
    assert [COPY_TEXT[s:e] for s, e, _ in COPY_GOLD] == ["SMITH", "John", "7/22/2010", "Kowalski", "smith", "(617) 555-1234",
                                                         "Towson", "MGH"]
    replacer = surrogate_replacer()
    copy, new_record = surrogate_copy(replacer, note, record, 1)
    assert surrogate_copy(replacer, note, record, 1) == (copy, new_record)  # deterministic
    assert surrogate_copy(replacer, note, record, 2)[0].text != copy.text
    assert copy.note_id == "n1+1" and copy.patient_id == "p1" and new_record.patient_id == "p1"
    assert [c for *_, c in copy.spans] == [c for *_, c in COPY_GOLD]
    old = [COPY_TEXT[s:e] for s, e, _ in COPY_GOLD]
    new = [copy.text[s:e] for s, e, _ in copy.spans]
    assert all(a.casefold() != b.casefold() for a, b in zip(old[:6], new[:6]))
    assert new[6:] == old[6:]  # places keep their words
    # the text between the spans is kept
    assert re.sub(r"\x00+", "", "".join("\x00" if any(s <= i < e for s, e, _ in copy.spans) else ch
                                       for i, ch in enumerate(copy.text))) == re.sub(
        r"\x00+", "", "".join("\x00" if any(s <= i < e for s, e, _ in COPY_GOLD) else ch for i, ch in enumerate(COPY_TEXT)))
    surname, given, date, doctor, relative, phone = new[:6]
    assert surname.isupper() and relative.islower() and given.istitle() and doctor.istitle()
    assert surname.casefold() == relative.casefold()  # one surrogate per name, in each spelling's case
    assert re.fullmatch(r"\d{1,2}/\d{1,2}/\d{4}", date) and re.fullmatch(r"\(\d{3}\) \d{3}-\d{4}", phone)
    # the record says what the copy says
    assert new_record.names == (given, surname.title()) and new_record.phones == (phone,)
    assert new_record.dates[0] < record.dates[0]
    assert new_record.addresses == record.addresses


def test_cross_validation_trains_on_the_copies_of_its_training_notes_only(monkeypatch):
    from anonymizer.classifier import crossval
    from anonymizer.classifier.crossval import cross_validate

    dataset = build_dataset([synthetic_corpus(notes=40)])
    trained: list[tuple[set[str], set[str]]] = []  # per fold: the annotated notes, the notes copied
    real_fit = crossval.fit

    def spy(notes, options, lists=None):
        trained.append(({n.note.note_id for n in notes if not n.copy}, {n.note.note_id.split("+")[0] for n in notes if n.copy}))
        return real_fit(notes, options, lists)

    monkeypatch.setattr(crossval, "fit", spy)
    result = cross_validate(dataset, TrainingOptions(c=0.5, augment=2), folds=4)
    assert len(trained) == 4
    for fold, (annotated, copied) in enumerate(trained):
        tested = {d.note.note_id for d, f in zip(result.notes, result.fold_of_note) if f == fold}
        assert copied == annotated and tested and not tested & (annotated | copied)
    assert not any(n.copy for n in result.notes)  # only annotated notes are scored
    assert sum(len(c) for c in dataset.augmented(2)) == 2 * len(dataset.notes)
    assert [[c.note.text for c in cs] for cs in dataset.augmented(1)] == [[cs[0].note.text] for cs in dataset.augmented(2)]


@pytest.mark.parametrize("mode", ["multiclass", "binary"])
def test_runtime_decisions_equal_sklearn_decision_function(corpus, mode):
    options = TrainingOptions(mode=mode, c=0.5)
    dataset = build_dataset([corpus])
    fitted = fit_estimators(dataset.notes, options)
    model = Model(fit(dataset.notes, options))
    X = fitted.vectorizer.transform(fitted.rows)
    expected = np.atleast_2d(fitted.estimators["phi"].decision_function(X))
    if mode == "binary":
        expected = expected.reshape(-1, 1)
    got = np.array([(model.bias + model.weight_sum(row))[: model.phi.width] for row in fitted.rows])
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-9)
    # and through the detector's own path (features recomputed from text, cached word parts);
    # the training rows' gazetteer features are cross-fitted, so compare on a model without them
    options = TrainingOptions(mode=mode, c=0.5, gazetteers=False)
    fitted = fit_estimators(dataset.notes, options)
    model = Model(fit(dataset.notes, options))
    detector = SvmDetector(model, dataset.lists)
    rows = iter(fitted.vectorizer.transform(fitted.rows))
    est = fitted.estimators["phi"]
    for data in dataset.notes[:10]:
        _, scores = detector.score_tokens(data.note.text, data.record)
        for score, _ in scores:
            x = next(rows)
            d = np.ravel(est.decision_function(x))
            want = d[0] if mode == "binary" else max(v for c, v in zip(est.classes_, d) if c != "O")
            assert abs(score - want) < 1e-9


def test_detector_scores_only_what_the_rules_left_and_unions(tmp_path, corpus):
    train([corpus], tmp_path / "m.json.gz", TrainingOptions(c=0.5, threshold=0.0))
    detector = SvmDetector(Model.load(tmp_path / "m.json.gz"), corpus.lists)
    text = "Pt seen by Dr Kowalski this am.\nSOCIAL: wife Lisa at bedside, updated by RN."
    record = PatientRecord("x", names=("JOHN", "DOE"))
    alone = detector(text, record, [])
    assert {text[s.start:s.end] for s in alone} >= {"Kowalski", "Lisa"}
    assert all(s.detector == "svm" for s in alone)
    rule = Span(text.index("Kowalski"), text.index("Kowalski") + 8, "DOCTOR", "lists", "doctor")
    rest = detector(text, record, [rule])
    assert all(text[s.start:s.end] != "Kowalski" for s in rest)
    merged = union([rule] + rest)
    covered = {text[m.start:m.end] for m in merged}
    assert "Kowalski" in covered and "Lisa" in covered
    assert any("lists:doctor" in m.sources for m in merged)


def test_weak_rule_spans_stand_only_where_the_classifier_agrees(tmp_path, corpus):
    train([corpus], tmp_path / "m.json.gz", TrainingOptions(c=0.5, threshold=0.0))
    detector = SvmDetector(Model.load(tmp_path / "m.json.gz"), corpus.lists)
    assert "regex:date_dm_numeric" in detector.confirm
    text = "PEEP 5/10 per Dr Kowalski"
    weak = Span(5, 9, "DATE", "regex", "date_dm_numeric")
    strong = Span(text.index("Kowalski"), len(text), "DOCTOR", "lists", "doctor")
    # the weak span's tokens are scored, marked as such; the strong span's are not
    assert rule_categories(Tokens.of(text), [weak, strong], detector.confirm) == [None, "DATE?", "DATE?", None, None, "DOCTOR"]
    agrees = [Span(7, 9, "DATE", "svm")]
    assert detector.combine([weak, strong], agrees) == [weak, strong] + agrees
    assert detector.combine([weak, strong], []) == [strong]



def test_a_weak_match_is_confirmed_whole_or_not_at_all():
    text = "PEEP 12-18, on 7/22/93 3.8 40 then 5/10"
    tokens = Tokens.of(text)  # PEEP 12 18 on 7 22 93 3 8 40 then 5 10
    cats = [None, "DATE?", "DATE?", None, "DATE?", "DATE?", "DATE?", "DATE?", "DATE?", "DATE?", None, "DATE", "DATE"]
    scores = [0.0, 1.0, -2.0, 0.0, 0.5, 0.2, 0.9, 3.0, -1.0, 0.7, 0.0, -5.0, 1.0]
    # "12-18", "7/22/93" and "3.8" take their weakest part's score; "40" (after a space) stays
    # apart; tokens a strong rule flagged ("5/10" here) are left alone
    assert weakest_part(text, tokens, cats, scores) == [0.0, -2.0, -2.0, 0.0, 0.2, 0.2, 0.2, -1.0, -1.0, 0.7, 0.0, -5.0, 1.0]


def test_patient_propagation_hook(tmp_path, corpus):
    train([corpus], tmp_path / "m.json.gz", TrainingOptions(c=0.5, threshold=0.0))
    detector = SvmDetector(Model.load(tmp_path / "m.json.gz"), corpus.lists)
    record = PatientRecord("x")
    notes = [("Pt seen by Dr Kowalski this am.", []), ("kowalski aware of plan", [])]
    spans = detector.patient_spans(record, notes)
    assert len(spans) == 2
    assert all(s.detector == "svm" for per_note in spans for s in per_note)


def test_shipped_model_loads_and_runs():
    if not DEFAULT_MODEL.is_file():
        pytest.skip("no shipped model")
    detector = load_detector(ClassifierConfig(), {"DOCTOR": ["Quiley"]})
    assert detector.threshold == load_model().threshold
    assert DEFAULT_MODEL.stat().st_size < 8_000_000
    text = "SOCIAL: wife Mary in to visit. Seen by Dr. Nessenson; transferred from Calvert Hospital 7/23."
    spans = detector(text, PatientRecord("1", names=("MARISETTE", "VRABEL")), [])
    found = {text[s.start:s.end] for s in spans}
    assert "Nessenson" in found or "Mary" in found
    # a threshold above every score leaves only what the recall heuristics add ("wife Mary")
    high = load_detector(ClassifierConfig(threshold=50.0), {})(text, PatientRecord("1"), [])
    assert all(s.rule for s in high)
    assert load_detector(ClassifierConfig(), {}).digest == load_detector(ClassifierConfig(), {}).digest


def test_a_title_that_is_an_ordinary_word_stands_only_where_the_classifier_agrees():
    if not DEFAULT_MODEL.is_file():
        pytest.skip("no shipped model")
    from anonymizer.pipeline import build_pipeline
    from anonymizer.settings import DetectorsConfig

    pipeline = build_pipeline(DetectorsConfig(), {}, ClassifierConfig())
    text = "pt received general ventilator management overnight"
    record = PatientRecord("1")
    rules = pipeline.rule_spans(text, record)
    assert [(s.source, text[s.start : s.end]) for s in rules] == [("honorific:general", "ventilator")]
    assert pipeline.classifier.combine(rules, pipeline.classifier(text, record, rules)) == []


def test_the_classifiers_dates_obey_the_rules_context_exceptions():
    if not DEFAULT_MODEL.is_file():
        pytest.skip("no shipped model")
    from anonymizer.pipeline import build_pipeline
    from anonymizer.settings import DetectorsConfig

    text = "- gout, last flare 3/12 ago\nrecent travel to Perth 3/12 ago\nGCS 15/15"
    record = PatientRecord("1")
    plain = load_detector(ClassifierConfig(threshold=-3.0), {})  # no exceptions: low threshold flags the numbers
    assert any(s.category == "DATE" for s in plain(text, record, []))
    pipeline = build_pipeline(DetectorsConfig(), {}, ClassifierConfig(threshold=-3.0))
    found = pipeline.classifier(text, record, pipeline.rule_spans(text, record))
    assert not [s for s in found if s.category == "DATE"]


@pytest.fixture(scope="module")
def shipped() -> SvmDetector:
    return load_detector(ClassifierConfig(), {})


SPAN = st.builds(
    lambda a, b, source: Span(min(a, b), max(a, b) + 1, "DATE", *source.split(":")),
    st.integers(0, 40), st.integers(0, 40), st.sampled_from(["regex:date_dm_numeric", "regex:date_dmy_numeric", "svm:"]),
)


@given(st.lists(SPAN, max_size=12), st.lists(SPAN, max_size=12))
def test_combine_keeps_a_weak_rule_span_exactly_where_one_of_the_classifiers_overlaps_it(shipped, rule_spans, own):
    """combine finds the overlaps by bisection (a test of every pair grew with the square of a
    note of dense dates); it must keep what that test kept."""
    expected = [s for s in rule_spans if s.source not in shipped.confirm or any(o.start < s.end and s.start < o.end for o in own)]
    assert shipped.combine(rule_spans, own) == expected + own


@given(st.text(alphabet="1/-. a", max_size=40))
def test_joined_runs_remembered_across_a_note_are_the_runs_walked_token_by_token(text):
    tokens = Tokens.of(text)
    runs: dict[int, tuple[int, int]] = {}
    assert [joined_run(text, tokens, i, runs) for i in range(len(tokens))] == [joined_run(text, tokens, i) for i in range(len(tokens))]


def test_a_title_is_never_taken_for_a_name():
    text = "follows up with Prof. Kwek at Singapore General Hospital"
    tokens = Tokens.of(text)
    prof, general = tokens.words.index("Prof"), tokens.words.index("General")
    assert vetoed(text, tokens, prof, "DOCTOR", None)
    assert not vetoed(text, tokens, general, "LOCATION", None)  # part of a hospital's name
    assert not vetoed(text, tokens, tokens.words.index("Kwek"), "DOCTOR", None)


@pytest.mark.parametrize(
    ("text", "words", "kept"),
    [
        (  # a clinical word may be a place
            "Mitral Valve Angioplasty at Quimby Square; Radiologist phoned son Valve",
            ("Mitral", "Valve", "Angioplasty", "Radiologist"),
            {"Square": "LOCATION", "Quimby": "DOCTOR"},
        ),
        (  # a ward's word of rules/common_words.txt; an initial stays a name's
            "FDW Madam Png helps with ADLs; seen by physio. PMHX: nil. Occasional EtOH. C C Ho (cardio)",
            ("ADLs", "physio", "PMHX", "EtOH"),
            {"C": "DOCTOR"},
        ),
        (  # a brand that is a given name too stays
            "Tx with Lorazepam and XANAX overnight; her health care PROXY and son-in-law aware; Dr Allegra",
            ("Lorazepam", "XANAX", "PROXY", "law"),
            {"Allegra": "DOCTOR"},
        ),
    ],
)
def test_a_clinical_ward_drug_or_kinship_word_is_never_taken_for_a_name(text: str, words: tuple[str, ...], kept: dict[str, str]):
    tokens = Tokens.of(text)
    for word in words:
        assert vetoed(text, tokens, tokens.words.index(word), "RELATIVE", None)
    for word, category in kept.items():
        assert not vetoed(text, tokens, tokens.words.index(word), category, None)


def test_a_unit_after_a_number_and_a_slash_is_never_a_name():
    text = "PR 103/min, O2 2L/min; Tan/Min aware; Filipino helper"
    tokens = Tokens.of(text)
    assert vetoed(text, tokens, 2, "PATIENT", None) and vetoed(text, tokens, 5, "PATIENT", None)
    assert not vetoed(text, tokens, tokens.words.index("Min"), "PATIENT", None)
    assert vetoed(text, tokens, tokens.words.index("Filipino"), "NAME", None)  # a nationality


def test_a_count_or_a_time_is_never_taken_for_a_place():
    text = "Wife called x2. Lives in Towson; moved to Q7 at 0030h, back 2145hrs; lives at 1430 Elm St"
    tokens = Tokens.of(text)
    for word in ("x2", "0030h", "2145hrs"):
        assert vetoed(text, tokens, tokens.words.index(word), "LOCATION", None)
    assert not vetoed(text, tokens, tokens.words.index("1430"), "LOCATION", None)  # a house number
    assert not vetoed(text, tokens, tokens.words.index("Towson"), "LOCATION", None)
    assert not vetoed(text, tokens, tokens.words.index("Q7"), "LOCATION", None)  # a ward may be named so


def test_a_headings_word_is_never_taken_for_a_place():
    text = "Referred from Bedok Polyclinic\nPast Medical Hx: - IHD\nLives in Quimby: alone"
    tokens = Tokens.of(text)
    for word in ("Past", "Medical", "Hx"):
        assert vetoed(text, tokens, tokens.words.index(word), "LOCATION", None)
    for word in ("Bedok", "Quimby"):  # not a line's label, or after its first words
        assert not vetoed(text, tokens, tokens.words.index(word), "LOCATION", None)


def relatives_found(text: str) -> set[str]:
    """The words relative_cues adds in `text`, nothing flagged before."""
    tokens = Tokens.of(text)
    return {tokens.words[i] for i in postprocess.relative_cues(text, tokens, [None] * len(tokens))}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Family: Son, Ed, was updated", {"Ed"}),
        ("Wife Jo called; husband Al visited", {"Jo", "Al"}),
        ("son ED visit planned; dtr ed aware", set()),  # the department, in capitals or lower case
    ],
)
def test_a_two_letter_diminutive_after_a_kinship_word_is_a_relative(text, expected):
    assert relatives_found(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("husband evans informed; nephew THOMPSON on 3/4; brought in by brother hussein", {"evans", "THOMPSON", "hussein"}),
        ("wife brown at bedside; son english speaking; daughter smith aware", {"brown", "smith"}),  # before what is said of them
        ("wife brown and tired; son english speaking; daughter smith's", set()),  # words too
        ("son accompanies pt to clinic; dtr quellmores called", {"quellmores"}),  # a rare verb's -s form is no name
        ("daughter manages finances; son resides abroad", set()),  # nor two of them, as a name's two words
        ("daughter mary williams called", {"mary", "williams"}),  # a listed surname ending in s is one
        ("neighbour foo checks daily; lives with niece nur; son mei, home", {"foo", "nur"}),  # names of other origins
    ],
)
def test_a_frequent_surname_that_english_spells_capitalised_after_a_kinship_word_is_a_relative(text, expected):
    assert relatives_found(text) == expected


@pytest.mark.parametrize(
    ("text", "found", "expected"),
    [
        ("spoke to daughter koh boon min at home", {"koh": "DOCTOR", "boon": "DOCTOR"}, {"koh", "boon", "min"}),  # "min" a word too
        ("d/w WIFE ONG MIN LENG re plan", {"ONG": "NAME"}, {"ONG", "MIN", "LENG"}),
        ("son koh soon to visit", {"koh": "NAME"}, {"koh"}),  # one syllable after the surname: "soon" the word
        ("son KOH min leng visited", {"KOH": "NAME"}, {"KOH"}),  # not in one case
        ("conference with wife BOON HUAT on 3/4", {}, {"BOON", "HUAT"}),  # a given name without its surname
        ("wife soon to visit; son mei, home", {}, set()),
        ("son mei at home", {}, {"mei"}),  # a surname too, before what is said of the relative
        ("seen with boon huat (husband) today", {}, {"boon", "huat"}),  # before a bracketed kinship word
        ("visited by quek BOON HUAT (son)", {"quek": "NAME"}, {"quek", "BOON", "HUAT"}),  # a bare name relabelled
        ("will stop soon (wife agrees); see you soon (son aware)", {}, set()),
    ],
)
def test_a_chinese_given_names_syllables_go_with_the_surname_though_english_words(text, found, expected):
    """The surname found by another detector (a list, the record), then the syllables after it."""
    tokens = Tokens.of(text)
    added = postprocess.relative_cues(text, tokens, [found.get(word) for word in tokens.words])
    assert {tokens.words[i] for i in added} == expected


@pytest.mark.parametrize(
    ("text", "found", "expected"),
    [
        ("spoke to son j l quellmore at home", {"quellmore": "PATIENT"}, {"j", "l"}),  # the patient's surname is the son's too
        ("stays with k t quellmore (brother) at home", {"quellmore": "PATIENT"}, {"k", "t"}),
        ("sick Oswin bin Quellmore (son) at home", {"Oswin": "RELATIVE", "Quellmore": "PATIENT"}, {"bin"}),
        ("Imran s/o Quellmore (son) to bring pt home", {"Quellmore": "PATIENT"}, {"Imran", "s", "o"}),
        ("sick Nur Oswin bin Quellmore (son) at home", {"Quellmore": "PATIENT"}, {"Nur", "Oswin", "bin"}),  # a given name of two words
        ("contact with sick wife kim-min at home", {"kim": "RELATIVE"}, {"min"}),
        ("son-in-law david at bedside", {}, {"david"}),
        ("Oswin Quellmore (son)", {}, {"Oswin", "Quellmore"}),  # the kinship word ends the note
        ("spoke to daughter quek xin hwee at home", {"xin": "RELATIVE"}, {"quek", "xin", "hwee"}),  # past a word found
        ("d/w wife Alexandra Quellmore re goals", {"Alexandra": "HOSPITAL"}, {"Quellmore"}),  # a given name a list took for a place
        ("SON AUSTIN QUELLMORE AT BEDSIDE", {"AUSTIN": "LOCATION"}, {"QUELLMORE"}),
        ("wife from Wexcombe Hospital today", {"Wexcombe": "HOSPITAL", "Hospital": "HOSPITAL"}, set()),  # no given name
    ],
)
def test_a_relatives_name_goes_on_over_a_name_found_already(text, found, expected):
    """Initials, connectors and a hyphenated syllable next to a name another detector found (the
    patient's surname a relative shares, a given name the classifier found)."""
    tokens = Tokens.of(text)
    flagged = [found.get(word) for word in tokens.words]
    added = postprocess.relative_cues(text, tokens, flagged)
    assert {tokens.words[i] for i in added} == expected


def test_a_drug_is_no_part_of_a_name():
    text = "Given Mesalamine supp. Aloe Vesta oint applied"
    tokens = Tokens.of(text)
    flagged = [None] * len(tokens)
    flagged[tokens.words.index("Vesta")] = "RELATIVE"
    assert not postprocess.extend_names(text, tokens, flagged)  # not "Aloe"


def test_a_section_letter_opens_a_line_and_is_no_initial_in_a_sectioned_note():
    soap = "S: feels tired\nO see flowsheet\nA: stable\nP: continue"
    tokens = Tokens.of(soap)
    for k in (0, tokens.words.index("O"), tokens.words.index("A"), tokens.words.index("P")):
        assert vetoed(soap, tokens, k, "DOCTOR", None)
    signed = "A. Smith RN\nhanded over"  # one letter at a line's start: an initial
    assert not vetoed(signed, Tokens.of(signed), 0, "DOCTOR", None)


@pytest.mark.parametrize("text", ["Riker scale #4 overnight", "QTc up from .431 to .48"])
def test_an_items_number_or_a_decimal_fraction_is_no_date(text):
    tokens = Tokens.of(text)
    number = next(i for i, w in enumerate(tokens.words) if w.isdigit())
    assert vetoed(text, tokens, number, "DATE", None)
    dated = "seen on 4/5 and 3.4.2019"
    tokens = Tokens.of(dated)
    assert not any(vetoed(dated, tokens, i, "DATE", None) for i in range(2, len(tokens)) if tokens.words[i] != "and")


def test_a_name_is_not_extended_over_a_credential_or_an_everyday_word_in_capitals():
    text = "Paul Wendt RRT\nPER DR HALVERSEN GOOD PULSES; PASSING SMALL AMTS; SEEN BY TAN ROBERTSON"
    tokens = Tokens.of(text)
    flagged = [None] * len(tokens)
    for word in ("Wendt", "HALVERSEN", "AMTS", "TAN"):
        flagged[tokens.words.index(word)] = "DOCTOR"
    added = {tokens.words[i] for i in postprocess.extend_names(text, tokens, flagged)}
    assert added == {"Paul", "ROBERTSON"}  # not "RRT", "GOOD", "SMALL"


def test_a_connector_between_two_parts_of_a_name_goes_with_them():
    text = "DR Quarah binte Mohd Yusof / Registrar; Quarah binte pending; son bin Yusof"
    tokens = Tokens.of(text)
    flagged = [None] * len(tokens)
    for k in (1, 3, 4, 6, 11):  # Quarah, Mohd, Yusof, the second Quarah, the second Yusof
        flagged[k] = "DOCTOR"
    added = postprocess.extend_names(text, tokens, flagged)
    assert {tokens.words[k] for k in added} == {"binte"} and list(added) == [2]  # not before "pending", nor after "son"


@pytest.mark.parametrize(
    ("text", "found", "expected"),
    [
        ("Patient Muhammad Firdaus bin Abdullah, 45M", "Abdullah", {"Muhammad", "Firdaus", "bin"}),
        ("Seen with Ravi s/o Kumar today", "Kumar", {"Ravi", "s", "o"}),
        ("Seen with Ravi s/o Kumar today", "Ravi", {"s", "o", "Kumar"}),
        ("put in sharps Bin, Tan aware; bin Tan", "Tan", set()),  # no connector: capitalised, or no name beyond it
    ],
)
def test_a_name_goes_on_past_its_connector(text, found, expected):
    tokens = Tokens.of(text)
    flagged = [None] * len(tokens)
    for k in [k for k, word in enumerate(tokens.words) if word == found]:
        flagged[k] = "NAME"
    assert {tokens.words[k] for k in postprocess.extend_names(text, tokens, flagged)} == expected


def test_a_role_written_as_a_title_is_no_part_of_the_name():
    text = "Attended by Nurse Clinician Jane Ong; Fellow Lindqvist saw pt"
    tokens = Tokens.of(text)
    flagged = [("DOCTOR" if word in ("Jane", "Lindqvist") else None) for word in tokens.words]
    assert {tokens.words[k] for k in postprocess.extend_names(text, tokens, flagged)} == {"Ong"}


def test_names_joined_by_a_slash_go_together_but_not_a_department():
    text = "Halvorsen/Brackett aware; Dr Quimby/Cardiology aware; Dr Tan/reg/ENT"
    tokens = Tokens.of(text)
    flagged = [("DOCTOR" if word in ("Brackett", "Quimby", "Tan") else None) for word in tokens.words]
    assert {tokens.words[k] for k in postprocess.extend_names(text, tokens, flagged)} == {"Halvorsen"}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("PT AND GERALD NEO (HUSBAND) UNDERSTAND", {"GERALD", "NEO"}),  # a listed name, though a ward's abbreviation too
        ("pt and KENG-LAY (wife) understand", {"KENG", "LAY"}),  # a Chinese given name hyphenated
        ("on neo (wife aware); started on neo (son)", {"neo"}),  # only right before a bracketed kinship word alone
    ],
)
def test_a_listed_name_or_a_given_name_right_before_a_bracketed_kinship_word_is_a_relative(text, expected):
    assert relatives_found(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("contact with son a reyes at home; fdw a sharma helps", {"a", "reyes", "sharma"}),
        ("brother a h quek visited", {"a", "h", "quek"}),
        ("son a bit better today; wife a nurse, supportive; son I think is coming", set()),
    ],
)
def test_a_letter_that_is_a_word_after_a_kinship_word_is_an_initial_before_a_listed_surname(text, expected):
    assert relatives_found(text) == expected


def test_a_capital_i_right_before_a_name_after_a_lower_case_word_is_an_initial():
    text = "friend I Chia at bedside. Then I Called Quimby. I Yap said"
    tokens = Tokens.of(text)
    flagged = [("NAME" if word in ("Chia", "Quimby", "Yap") else None) for word in tokens.words]
    added = postprocess.extend_names(text, tokens, flagged)
    assert [(tokens.starts[k], tokens.words[k]) for k in added] == [(7, "I")]


def test_a_missing_or_broken_model_is_a_config_error(tmp_path):
    from anonymizer.settings import ConfigError

    with pytest.raises(ConfigError):
        load_detector(ClassifierConfig(model=str(tmp_path / "none.json.gz")), {})
    (tmp_path / "bad.json.gz").write_bytes(b"not a model")
    with pytest.raises(ConfigError):
        load_detector(ClassifierConfig(model=str(tmp_path / "bad.json.gz")), {})


@pytest.mark.skipif(not SHARED.is_dir(), reason="../shared/corpora/physionet-nursing not present")
def test_runtime_equals_decision_function_on_real_notes():
    from anonymizer.corpora import load_physionet

    physionet = load_physionet(SHARED)
    small = Corpus("p", physionet.notes[:30], physionet.records, physionet.lists)
    dataset = build_dataset([small])
    options = TrainingOptions(gazetteers=False)
    fitted = fit_estimators(dataset.notes, options)
    model = Model(fit(dataset.notes, options))
    X = fitted.vectorizer.transform(fitted.rows)
    expected = fitted.estimators["phi"].decision_function(X)
    got = np.array([(model.bias + model.weight_sum(row))[: model.phi.width] for row in fitted.rows])
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-9)


def test_recall_heuristics_on_fragments():
    text = "seen by E. Nessenson NP; SELLVI D/O BALA; wife Janet called; son is here; with Prof. Kwek"
    tokens = Tokens.of(text)
    flagged = [None] * len(tokens)
    flagged[tokens.words.index("Nessenson")] = "DOCTOR"
    flagged[tokens.words.index("SELLVI")] = "PATIENT"
    flagged[tokens.words.index("Kwek")] = "DOCTOR"
    added = postprocess.extend_names(text, tokens, flagged)
    assert {tokens.words[i] for i in added} == {"E"}  # not "D" of "D/O", not "NP", not "seen", not the title "Prof"
    rel = postprocess.relative_cues(text, tokens, flagged)
    assert {tokens.words[i] for i in rel} == {"Janet"}  # not "is"/"here"
    text2 = "per Dr. Okafor. Await PT eval; both Imelda and Oswin are proxies; DRS JOSEPH & Pemberton aware"
    tokens2 = Tokens.of(text2)
    flagged2 = [None] * len(tokens2)
    for word in ("Okafor", "Imelda", "JOSEPH"):
        flagged2[tokens2.words.index(word)] = "DOCTOR"
    added2 = postprocess.extend_names(text2, tokens2, flagged2)
    assert {"Oswin", "Pemberton"} <= {tokens2.words[i] for i in added2}
    assert "Await" not in {tokens2.words[i] for i in added2}  # a sentence's period ends the name
    notes = [(tokens, flagged, [2.0 if f else -1.0 for f in flagged]), (Tokens.of("nessenson paged"), [None, None], [-1.0, -1.0])]
    spread = postprocess.propagate(notes, confident=0.0)
    assert spread[1] == {0: "DOCTOR"}


def test_a_name_a_note_says_the_patient_goes_by_spreads_to_the_patients_other_notes():
    notes = ["Doris prefers to be called Dottie.", "Dottie c/o pain 3/10. Dot on the map.", "PR 110/MIN, to ED", "dottie comfortable"]
    per_note = [(text, Tokens.of(text), [None] * len(Tokens.of(text))) for text in notes]
    per_note[0][2][per_note[0][1].words.index("Dottie")] = "PATIENT"  # which the record detector took after "called"
    spread = postprocess.spread_called(per_note, {"dottie": "PATIENT", "min": "PATIENT", "ed": "PATIENT"})
    # Capitalised, or in a note of one case; not the flagged one itself, a unit after a number, two letters
    assert [{per_note[k][1].words[i]: cat for i, cat in found.items()} for k, found in enumerate(spread)] == [
        {}, {"Dottie": "PATIENT"}, {}, {"dottie": "PATIENT"}
    ]


def test_a_place_goes_on_over_the_words_of_a_facility_name():
    text = "transfer to Baltimore Rehab of the county\nHospital notified"
    tokens = Tokens.of(text)
    flagged = [None] * len(tokens)
    flagged[tokens.words.index("Baltimore")] = "LOCATION"
    added = postprocess.extend_places(text, tokens, flagged)
    assert {tokens.words[i] for i in added} == {"Rehab"}  # "of the" ends it; "Hospital" is on the next line


@pytest.mark.parametrize(
    ("text", "place", "expected"),
    [("go home to Wexcombe Mall, advised", "Wexcombe", {"Mall"}), ("travel to Harwick Airport 3/7 ago", "Harwick", {"Airport"}),
     ("lived at Brenzolo Bahru until 2020", "Brenzolo", {"Bahru"})],
)
def test_a_place_goes_on_over_a_landmark_or_a_new_towns_word(text, place, expected):
    tokens = Tokens.of(text)
    flagged = [None] * len(tokens)
    flagged[tokens.words.index(place)] = "LOCATION"
    assert {tokens.words[i] for i in postprocess.extend_places(text, tokens, flagged)} == expected


@pytest.mark.parametrize(
    ("text", "place", "expected"),
    [
        ("moved to University of Maryland", "Maryland", {"University", "of"}),
        ("daughter Grace of Lindqvistown visited", "Lindqvistown", set()),
        ("Nephew, Oswin Quellmore of Towson visited", "Towson", set()),
    ],
)
def test_of_joins_a_place_name_but_never_ends_one(text, place, expected):
    tokens = Tokens.of(text)
    flagged = [None] * len(tokens)
    flagged[tokens.words.index(place)] = "LOCATION"
    if "Grace" in tokens.words:
        flagged[tokens.words.index("Grace")] = "RELATIVE"
    added = postprocess.extend_places(text, tokens, flagged)
    assert {tokens.words[i] for i in added} == expected


def test_a_patients_notes_scored_together_equal_note_by_note(tmp_path, corpus):
    """analyse_many batches a patient's notes into one lookup and gather pass; the result must be
    what scoring each note alone gives, whatever the notes' sizes (an empty note included) and
    across the batches of BATCH_NOTES."""
    train([corpus], tmp_path / "m.json.gz", TrainingOptions(c=0.5, threshold=-0.5))
    detector = SvmDetector(Model.load(tmp_path / "m.json.gz"), corpus.lists)
    notes = [(n.text, []) for n in corpus.notes[:40]] * 2 + [("", []), ("Seen by Dr Lee.", [])]
    assert len(notes) > BATCH_NOTES
    record = PatientRecord("x", names=("JOHN", "DOE"))
    together = detector.analyse_many(record, notes)
    alone = [detector.analyse(text, record, spans) for text, spans in notes]
    assert [a.spans for a in together] == [a.spans for a in alone]
    for a, b in zip(together, alone):
        np.testing.assert_allclose(a.scores, b.scores, rtol=0, atol=1e-12)


@pytest.mark.parametrize("text", ["PT SEEN BY DR X", "Pt seen by Dr X", "AAAAb", "AAAAAb", "", "123 /", "ÉCOLE àb", "École ÀB"])
def test_all_caps_test_counts_letters_as_the_regex_does(text):
    letters, upper = len(postprocess.LETTER.findall(text)), len(postprocess.UPPER.findall(text))
    assert postprocess._mostly_capitals(text) == (letters > 0 and upper > 0.8 * letters)


# ------------------------------------------------------------------ policy: rules/classifier.toml


def test_the_shipped_model_holds_weights_and_vocabulary_only_and_the_policy_lives_in_the_rules():
    if not DEFAULT_MODEL.is_file():
        pytest.skip("no shipped model")
    data = json.loads(gzip.decompress(DEFAULT_MODEL.read_bytes()))
    assert set(data) == {"format", "mode", "score", "threshold", "feature_classes", "gazetteers", "heads", "training", "card"}
    for record in (data["training"], data["card"]["options"]):
        assert not {"confirm", "postprocess"} & set(record)
    policy = load_policy()
    assert policy.confirm == {
        "regex:date_dm_numeric", "regex:date_md_numeric", "regex:date_dmy_numeric", "regex:date_mdy_numeric",
        "regex:date_my_numeric", "honorific:general", "honorific:gen",
    }
    assert dict(policy.heuristics) == {"extend_names": True, "relative_cues": True, "extend_places": True, "propagate": 0.0}
    detector = load_detector(ClassifierConfig(), {})
    assert detector.confirm == policy.confirm and detector.postprocess == policy.heuristics
    assert TrainingOptions().confirm == tuple(sorted(policy.confirm))


def _rules_with_policy(tmp_path: Path, text: str) -> Path:
    import shutil

    from anonymizer.resources import data_dir

    rules = shutil.copytree(data_dir("rules"), tmp_path / "rules")
    (rules / "classifier.toml").write_text(text, encoding="utf-8")
    return rules


@pytest.mark.parametrize(
    "policy, message",
    [
        ('confirm = ["regex:date_nonexistent"]\n', "rules/classifier.toml: confirm: unknown rule 'regex:date_nonexistent'"),
        ('confirm = ["honorific:emperor"]\n', "rules/classifier.toml: confirm: unknown rule 'honorific:emperor'"),
        ('confirm = ["date_dm_numeric"]\n', "rules/classifier.toml: confirm: 'date_dm_numeric' is not a rule name"),
        ("[heuristics]\nextend_name = true\n", "rules/classifier.toml: heuristics: unknown heuristic 'extend_name'"),
        ('[heuristics]\npropagate = "yes"\n', "rules/classifier.toml: heuristics.propagate: expected a number"),
        ("confirms = []\n", "rules/classifier.toml: unknown key 'confirms'"),
    ],
)
def test_an_unknown_rule_or_heuristic_in_the_policy_stops_the_pipeline_with_one_line(tmp_path, policy, message):
    from anonymizer.pipeline import build_pipeline
    from anonymizer.settings import ConfigError, DetectorsConfig

    rules = _rules_with_policy(tmp_path, policy)
    with pytest.raises(ConfigError) as raised:
        build_pipeline(DetectorsConfig(), {}, ClassifierConfig(), rules_dir=rules)
    assert str(raised.value).startswith(message) and "\n" not in str(raised.value)
    # with the classifier off the policy is not read
    build_pipeline(DetectorsConfig(), {}, ClassifierConfig(enabled=False), rules_dir=rules)


def test_the_policy_of_the_pipelines_rules_is_the_one_the_detector_runs(tmp_path):
    from anonymizer.pipeline import build_pipeline
    from anonymizer.settings import DetectorsConfig

    if not DEFAULT_MODEL.is_file():
        pytest.skip("no shipped model")
    rules = _rules_with_policy(tmp_path, 'confirm = ["regex:date_dm_numeric"]\n[heuristics]\npropagate = false\n')
    # a disabled pattern may still be named (it exists in the rules)
    pipeline = build_pipeline(DetectorsConfig(disabled_patterns=["date_dm_numeric"]), {}, ClassifierConfig(), rules_dir=rules)
    assert pipeline.classifier.confirm == {"regex:date_dm_numeric"}
    assert pipeline.classifier.postprocess == {"propagate": None}
    shipped = build_pipeline(DetectorsConfig(), {}, ClassifierConfig())
    assert pipeline.digest != shipped.digest  # the policy file is part of the rules' digest
