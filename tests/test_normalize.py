"""The reader's view of a note: invisible characters and compatibility forms cannot hide PHI.

The map back to the stored text is checked by property; the run (tags and surrogates, through the
unit of work and through a real run on SQLite) and the release gate are checked end to end.
"""

from __future__ import annotations

import datetime as dt
import json

import sqlalchemy as sa
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from anonymizer.cli import app
from anonymizer.config import load_config
from anonymizer.normalize import INVISIBLE, MAX_MARKS, TYPOGRAPHIC, normalize
from anonymizer.normalize import VERSION as VIEW_VERSION
from anonymizer.pipeline import anonymize_patient, build_pipeline
from anonymizer.record import Note, PatientRecord
from anonymizer.run import run
from anonymizer.settings import ClassifierConfig, DetectorsConfig, ReplaceConfig
from tests.conftest import CONFIG, NOTES, create_hospital

runner = CliRunner()
ZWSP, SHY, LRM = "\u200b", "\u00ad", "\u200e"
FULL_NRIC = "\uff33\uff11\uff12\uff13\uff14\uff15\uff16\uff17\uff24"  # Ｓ１２３４５６７Ｄ

RECORD = PatientRecord("1", names=("Tan Wei Ming",), identifiers=("S1234567D",), phones=("+65 9123 4567",),
                       dates=(dt.date(1950, 3, 12),))
HIDDEN = [
    Note("1", "1", f"Pt Ta{ZWSP}n Wei Ming, NRIC {FULL_NRIC}, called \uff19\uff11\uff12\uff13 4567."),
    Note("2", "1", f"Pt T{SHY}a{LRM}n W{ZWSP}ei Ming seen; TAN{ZWSP}WEI MING; dob \uff11\uff12/03/1950"),
]


# --- the view and its map ----------------------------------------------------------------------------


def test_an_ascii_note_is_its_own_view():
    text = "Pt Tan Wei Ming, NRIC S1234567D"
    view = normalize(text)
    assert view.text is text and view.span(3, 6) == (3, 6) and not view.removed


def test_typographic_dashes_and_quotes_read_as_ascii_one_for_one():
    text = "HP 9123\u20134567, Mr O\u2019Brien \u201cJim\u201d, Na\u2212 130"
    view = normalize(text)
    assert view.text == "HP 9123-4567, Mr O'Brien \"Jim\", Na- 130"
    assert view.span(3, 12) == (3, 12) and not view.removed


def test_invisible_characters_are_removed_and_compatibility_forms_folded():
    assert normalize(f"Ta{ZWSP}n {SHY}W{LRM}ei\u2060 Ming\ufeff").text == "Tan Wei Ming"
    assert normalize("Ta\u034fn Wei\ufe0f").text == "Tan Wei"  # grapheme joiner, variation selector
    assert normalize(FULL_NRIC).text == "S1234567D"
    assert normalize("\u2460\u2461 \ufb01ve \u338f").text == "12 five kg"  # circled digits, ligature, ㎏


def test_a_span_covers_the_invisible_characters_inside_and_after_it_and_whole_expansions():
    view = normalize(f"Pt Ta{ZWSP}n{LRM} Wei")
    assert view.text == "Pt Tan Wei"
    assert view.span(3, 6) == (3, 8)  # "Ta\u200bn\u200e"
    assert view.span(3, 5) == (3, 6) and view.span(5, 6) == (6, 8)  # halves touch: nothing left between
    ligature = normalize("x\ufb01y")  # ﬁ -> fi
    assert ligature.text == "xfiy" and ligature.span(1, 2) == ligature.span(2, 3) == (1, 2)


def test_a_long_run_of_combining_marks_is_cut_into_bounded_stretches():
    # NFKC's reordering of marks is quadratic in their number: no stretch may grow with the note.
    text = "a" + "\u0301\u0316" * 5_000
    view = normalize(text)
    assert len(view.text) >= len(text) - MAX_MARKS  # NFKC composes within the first stretch only
    assert max(end - start for start, end in map(view.stretch, range(len(view.text)))) <= MAX_MARKS + 1


TRICKY = st.sampled_from(
    [ZWSP, SHY, LRM, "\u202e", "\u2066", "\ufeff", "\u034f", "\ufe0f", "\u200d",  # invisible
     "\uff33", "\uff11", "\ufb01", "\u338f", "\u2460", "\ufdfa", "\u00b5", "\u00bd", "\u00a0",  # NFKC changes
     "\u0301", "\u0316", "\u0327", "\u1161", "\u11a8", "\u1100", "\u0b47", "\u0b3e",  # marks, jamo, Oriya
     "e", "a", " ", "1", "T", "\u9648", "\u05d0", "\u0645"]
)
NOTES_TEXT = st.lists(st.one_of(TRICKY, st.characters(exclude_categories=("Cs",))), max_size=60).map("".join)


@settings(max_examples=300, deadline=None)
@given(NOTES_TEXT, st.data())
def test_the_map_keeps_spans_inside_ordered_and_exact(text, data):
    view = normalize(text)
    n = len(view.text)
    assert not INVISIBLE.search(view.text)
    assert normalize(view.text).text == view.text  # the view is its own view
    if view.at is None:  # one character for one: at most a typographic dash or quote made ASCII
        assert view.text == text.translate(TYPOGRAPHIC)
        return
    stretches = [view.stretch(i) for i in range(n)]
    if n:
        assert stretches[0][0] == 0 and stretches[-1][1] == len(text)  # the stretches tile the original
    for (start, end), following in zip(stretches, stretches[1:]):
        assert start < end and (following == (start, end) or following[0] == end)
    if not n:
        return
    s = data.draw(st.integers(0, n - 1))
    e = data.draw(st.integers(s + 1, n))
    start, end = view.span(s, e)
    assert 0 <= start < end <= len(text)
    # Widened to whole stretches, the original slice normalizes to the view's slice.
    while s > 0 and stretches[s - 1][0] == start:
        s -= 1
    while e < n and stretches[e][1] == end:
        e += 1
    assert normalize(text[start:end]).text == view.text[s:e]


# --- the run -----------------------------------------------------------------------------------------


def released(mode: str, monkeypatch) -> list[str]:
    monkeypatch.setenv("ANONYMIZER_SECRET", "9b1f4c2e7a0d3856c4e1a7f09d2b6e3c")
    pipeline = build_pipeline(DetectorsConfig(), {}, ClassifierConfig(enabled=False), replace=ReplaceConfig(mode=mode))
    results = anonymize_patient(RECORD, HIDDEN + [Note("3", "1", "Pt Tan Wei Ming")], pipeline)
    assert all(r.error is None for r in results)
    return [r.text for r in results]


def test_tags_replace_names_and_ids_hidden_by_invisible_or_full_width_characters(monkeypatch):
    first, second, _ = released("tags", monkeypatch)
    assert first == "Pt [PATIENT], NRIC [ID], called [PHONE]."
    assert second == "Pt [PATIENT] seen; [PATIENT]; dob [DATE]"


def test_surrogates_see_the_span_as_the_reader_does(monkeypatch):
    first, second, plain = released("surrogates", monkeypatch)
    fake = plain.removeprefix("Pt ")
    assert first.startswith(f"Pt {fake}, NRIC S") and second.startswith(f"Pt {fake} seen")  # one fake for Tan Wei Ming
    for text in (first, second):
        assert not INVISIBLE.search(text) and text.isascii()
        assert "Tan" not in text and "1234567" not in text and "4567" not in text


def test_a_real_run_releases_neither_and_the_gate_agrees(tmp_path):
    source, target = tmp_path / "hospital.db", tmp_path / "target.db"
    notes = NOTES + [
        dict(note_id=20, patient_id=1, body=f"Pt Mari{ZWSP}sette Vra{SHY}bel, NRIC {FULL_NRIC}."),
        dict(note_id=21, patient_id=1, body=f"{LRM}VRABEL{ZWSP}MARISETTE called \uff19\uff11\uff12\uff13 4567"),
    ]
    create_hospital(f"sqlite:///{source}", notes=notes)
    config = tmp_path / "anonymizer.toml"
    config.write_text(CONFIG.format(source=source, target=target))
    run(load_config(config))
    engine = sa.create_engine(f"sqlite:///{target}")
    with engine.connect() as conn:
        texts = dict(conn.execute(sa.text("SELECT note_id, text FROM anonymized_notes WHERE note_id IN ('20', '21')")).all())
    engine.dispose()
    assert texts == {"20": "Pt [PATIENT], NRIC [ID].", "21": f"{LRM}[PATIENT] called [PHONE]"}
    result = runner.invoke(app, ["audit", "leaks", "--config", str(config)])
    assert result.exit_code == 0 and "scanned 7 notes: 0 finding(s)" in result.stderr


def test_a_new_view_redoes_every_note(monkeypatch):
    # Notes released before the view changed may hold what it now finds: their digests must change.
    before = build_pipeline(DetectorsConfig(), {}, ClassifierConfig(enabled=False)).digest
    monkeypatch.setattr("anonymizer.pipeline.VIEW_VERSION", VIEW_VERSION + 1)
    assert build_pipeline(DetectorsConfig(), {}, ClassifierConfig(enabled=False)).digest != before


# --- the gate ------------------------------------------------------------------------------------------


def test_the_gate_finds_a_leak_hidden_by_invisible_or_full_width_characters(hospital):
    run(load_config(hospital))
    text = f"[PATIENT] Mari{ZWSP}sette Vra{SHY}bel, NRIC {FULL_NRIC}"
    engine = sa.create_engine(load_config(hospital).target.url)
    with engine.begin() as conn:
        conn.execute(sa.text("UPDATE anonymized_notes SET text = :t WHERE note_id = '11'"), dict(t=text))
    engine.dispose()
    result = runner.invoke(app, ["audit", "leaks", "--json", "--show-values", "--config", str(hospital)])
    assert result.exit_code == 1
    findings = json.loads(result.stdout)
    values = {(f["field"], f["value"]) for f in findings}
    assert values >= {("name", f"Mari{ZWSP}sette Vra{SHY}bel"), ("identifier", FULL_NRIC)}
    assert all(text[f["start"] : f["end"]] == f["value"] for f in findings)  # offsets into the stored text

