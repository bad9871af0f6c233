"""The synthetic sample database: reproducible, internally consistent, and gold that is exact.

The generator is run into a temporary directory with a few patients, so these tests never depend
on (or rewrite) the committed sample_db/hospital.db.
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
CONNECTORS = {"bin", "binte", "bte", "s/o", "d/o"}


def _load_generator():
    spec = importlib.util.spec_from_file_location("sample_db_generate", ROOT / "sample_db" / "generate.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


generator = _load_generator()


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
    assert _dump(tmp_path / "other")["gold.jsonl"] != _dump(sample)["gold.jsonl"]


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
    """Every token is a name token, one of its initials, or within seed 003's ratio of one."""
    fields = " ".join(filter(None, (patient["given_name"], patient["family_name"])))
    tokens = [t.lower() for t in fields.split() if t.lower() not in CONNECTORS]
    initials = {part[0] for t in tokens for part in t.split("-")}
    for word in (w.lower() for w in text.split()):
        if word in CONNECTORS or (len(word) == 1 and word in initials):
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
                assert compact in (patient["nric"], mrn, re.sub(r"\D", "", mrn)), text
            elif category == "PHONE":
                assert len(re.sub(r"\D", "", text)) >= 8, text
            elif category == "DATE":
                assert re.search(r"\d", text) and not re.fullmatch(r"\d+/(?:7|12|52)", text), text
            elif category == "AGE":
                assert int(text) > 89
            elif category == "EMAIL":
                assert re.fullmatch(r"[\w.]+@[\w.]+", text), text
            elif category == "URL":
                assert "example." in text.lower()
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
    """Durations, vital signs, doses and clock times (seed 003's false positives) stay unannotated."""
    _, notes, gold = db
    traps = re.compile(r"\b(?:vomiting|LOA|x|in|fever|sputum|BP|HR|GCS|percocet) (\d+/\d+)|"
                       r"\bLOW (\d+/\d+),|\b\d{4}(?:H|h|hrs| hrs)\b", re.I)
    seen = 0
    for entry in gold:
        body = notes[entry["note_id"]]["body"]
        for m in traps.finditer(body):
            seen += 1
            start, end = m.span(m.lastindex or 0)  # the number only: "Low" may be a surname
            assert not any(s["start"] < end and start < s["end"] for s in entry["spans"]), m.group()
    assert seen > 0
