"""The synthetic sample database: reproducible, internally consistent, and gold that is exact.

The generator is run into a temporary directory, so these tests never rewrite the committed
sample_db/; one of them checks that the committed files are exactly what the generator writes.
"""

from __future__ import annotations

import importlib.util
import json
import re
import sqlite3
import sys
from pathlib import Path

import pytest

from anonymizer.spans import CATEGORIES

ROOT = Path(__file__).resolve().parents[1]
CONNECTORS = {"bin", "binte", "bte", "s/o", "d/o", "b.", "b", "bt", "bt.", "binti", "s.o.", "so", "d.o.", "do"}
# Identifiers that belong to someone or something other than the patient: MCR, lab and case
# numbers, another hospital's number, SSN, card and account numbers, IP and MAC addresses.
OTHER_ID = re.compile(r"M\d{5}[A-Z]|[HSC]?\d{2}-\d{5,7}|\d{4}/\d{6}|\d{8}|\d{3}[ .-]\d{2}[ .-]\d{4}|"
                      r"\d{4}([ -]?\d{4}){3}|\d{3}-\d{6}-\d|[\d.]+/\d+|2001:db8:[0-9a-f:]+|02(:[0-9A-F]{2}){5}", re.I)


def _load_generator():
    spec = importlib.util.spec_from_file_location("sample_db_generate", ROOT / "sample_db" / "generate.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


generator = _load_generator()
NICKNAMES = generator.Generator(1).nicknames


def _dump(out: Path) -> dict[str, object]:
    with sqlite3.connect(out / "hospital.db") as db:
        tables = {t: db.execute(f"SELECT * FROM {t} ORDER BY 1").fetchall() for t in ("patients", "notes", "staff")}
    files = {f: (out / f).read_text(encoding="utf-8") for f in ("gold.jsonl", "lists/hospitals.txt", "lists/places.txt")}
    return tables | files


@pytest.fixture(scope="module")
def sample(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("sample")
    generator.generate(out, patients=25, seed=7)
    return out


@pytest.fixture(scope="module")
def db(sample):
    with sqlite3.connect(sample / "hospital.db") as conn:
        conn.row_factory = sqlite3.Row
        patients = {r["patient_id"]: dict(r) for r in conn.execute("SELECT * FROM patients")}
        notes = {r["note_id"]: dict(r) for r in conn.execute("SELECT * FROM notes")}
    gold = [json.loads(line) for line in (sample / "gold.jsonl").read_text(encoding="utf-8").splitlines()]
    return patients, notes, gold


def levenshtein(a: str, b: str) -> int:
    row = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        prev, row[0] = row[0], i
        for j, cb in enumerate(b, 1):
            prev, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, prev + (ca != cb))
    return row[-1]


def test_same_seed_same_output_other_seed_differs(sample, tmp_path):
    generator.generate(tmp_path / "again", patients=25, seed=7)
    generator.generate(tmp_path / "other", patients=25, seed=8)
    assert _dump(tmp_path / "again") == _dump(sample)
    assert all((tmp_path / "again" / f).read_bytes() == (sample / f).read_bytes() for f in ("hospital.db", "gold.jsonl"))
    assert _dump(tmp_path / "other")["gold.jsonl"] != _dump(sample)["gold.jsonl"]


def test_a_note_wide_case_keeps_every_offset():
    # "ß" upper-cased is "SS": the planted spans after it would shift.
    assert generator.same_length(str.upper)("Lives in Gießen, wife Ann") == "LIVES IN GIEßEN, WIFE ANN"
    assert generator.same_length(str.lower)("Dr İnce") == "dr İnce"


def test_nric_checksum():
    assert generator.nric_check_letter("S", "1234567") == "D"
    assert generator.nric_check_letter("T", "1234567") == "J"
    assert generator.nric_check_letter("F", "1234567") == "N"
    assert generator.nric_check_letter("G", "1234567") == "X"


def test_every_nric_is_valid_and_unique(db):
    patients, _, _ = db
    nrics = [p["nric"] for p in patients.values()]
    assert len(set(nrics)) == len(nrics)
    for nric in nrics:
        assert re.fullmatch(r"[STFG]\d{7}[A-Z]", nric)
        assert generator.nric_check_letter(nric[0], nric[1:8]) == nric[8]


def test_notes_belong_to_existing_patients_in_arbitrary_order(db):
    patients, notes, gold = db
    assert {n["patient_id"] for n in notes.values()} <= set(patients)
    assert [g["note_id"] for g in gold] == sorted(notes)
    assert all(g["patient_id"] == notes[g["note_id"]]["patient_id"] for g in gold)
    by_note = [notes[i]["patient_id"] for i in sorted(notes)]
    assert by_note != sorted(by_note)


def test_gold_spans_are_sorted_disjoint_and_trimmed(db):
    _, notes, gold = db
    for entry in gold:
        body, end = notes[entry["note_id"]]["body"], 0
        for span in entry["spans"]:
            text = body[span["start"] : span["end"]]
            assert span["category"] in CATEGORIES
            assert span["start"] >= end and text and text == text.strip()
            end = span["end"]


def _patient_name_matches(text: str, patient: dict) -> bool:
    """Every token is a name token, one of its initials, a diminutive of the first given name, or within seed 003's ratio of one."""
    fields = " ".join(filter(None, (patient["given_name"], patient["family_name"])))
    tokens = [t.lower() for t in fields.split() if t.lower() not in CONNECTORS]
    initials = {part[0] for t in tokens for part in t.split("-")}
    nicknames = {n.lower() for n in NICKNAMES.get(patient["given_name"].split()[0], ())}
    for word in (w.lower() for w in text.split()):
        if word in CONNECTORS or (len(word) == 1 and word in initials) or word in nicknames:
            continue
        if not any(levenshtein(word, t) / min(len(word), len(t)) < 0.33 for t in tokens):
            return False
    return True


def test_gold_text_fits_its_category(db):
    patients, notes, gold = db
    for entry in gold:
        body, patient = notes[entry["note_id"]]["body"], patients[entry["patient_id"]]
        for span in entry["spans"]:
            text, category = body[span["start"] : span["end"]], span["category"]
            if category == "PATIENT":
                assert _patient_name_matches(text, patient), text
            elif category == "ID":
                compact = re.sub(r"[^A-Z0-9]", "", text.upper())
                mrn = patient["mrn"] or ""
                assert compact in (patient["nric"], mrn, re.sub(r"\D", "", mrn)) or OTHER_ID.fullmatch(text), text
            elif category == "PHONE":
                assert len(re.sub(r"\D", "", text)) >= 8, text
            elif category == "DATE":
                assert re.search(r"\d", text) and not re.fullmatch(r"\d+/(?:7|12|52)", text), text
            elif category == "AGE":
                assert int(text) > 89
            elif category == "EMAIL":
                assert re.fullmatch(r"[\w.]+@[\w.]+", text), text
            elif category == "URL":
                assert "example." in text.lower() or text.lower().startswith("example."), text
            elif category in ("DOCTOR", "RELATIVE", "NAME"):
                assert re.fullmatch(r"[A-Za-z][A-Za-z .'/-]*", text), text


def test_patient_misspellings_are_planted(db):
    patients, notes, gold = db
    exact = set()
    for entry in gold:
        p = patients[entry["patient_id"]]
        exact |= {t.lower() for t in " ".join(filter(None, (p["given_name"], p["family_name"]))).split()}
    planted = [notes[e["note_id"]]["body"][s["start"] : s["end"]] for e in gold for s in e["spans"]
               if s["category"] == "PATIENT"]
    assert any(len(w) > 1 and w.lower() not in exact for text in planted for w in text.split())


def test_look_alikes_are_not_annotated(db):
    """Durations, settings, doses, young ages, eponyms, name-like words and clock times stay unannotated."""
    _, notes, gold = db
    traps = re.compile(r"\b(?:vomiting|LOA|x|in|fever|sputum|BP|HR|GCS|percocet|TCU|over|PS|flowby|IPAP/EPAP|"
                       r"salmeterol|seretide|symbicort|co-amoxiclav|sinemet|augmentin) (\d+(?:\.\d+)?/\d+(?:\.\d+)?)|"
                       r"\bLOW (\d+/\d+),|\b\d{4}(?:H|h|hrs| hrs)\b|\bat ((?:[01]\d|2[0-3])[0-5]\d)\b(?![ .-]?\d)|^([1-8]\d/?[MF]) |"
                       r"\b(Parkinson's|Bell's|Alzheimer's|Graves'|Crohn's|Cushing's|Hashimoto's|Down|Raynaud's)|"
                       r"\b(BP) rose|\b(hope) for|\b(tan)-coloured|\b(rose) from|\b(may) need|\b(grace) period|"
                       r"\b(mark) on|\b(sterling) effort|\b(will) review", re.I | re.M)
    seen = 0
    for entry in gold:
        body = notes[entry["note_id"]]["body"]
        for m in traps.finditer(body):
            seen += 1
            start, end = m.span(m.lastindex or 0)  # the number only: "Low" may be a surname
            assert not any(s["start"] < end and start < s["end"] for s in entry["spans"]), m.group()
    assert seen > 0


def test_the_committed_sample_is_what_the_generator_writes_at_its_seed(tmp_path):
    """sample_db/ is regenerated, never edited by hand; each writing convention is in at least 20 notes."""
    _, conventions = generator.generate(tmp_path, seed=generator.SEED)
    assert _dump(tmp_path) == _dump(ROOT / "sample_db")
    assert len(conventions) >= 30 and min(conventions.values()) >= 20, conventions
