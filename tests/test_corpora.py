"""Loading annotated corpora: the PhysioNet format and the sample database's gold file."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from anonymizer.corpora import CorpusError, load_corpus, load_gold_jsonl, load_physionet

SHARED = Path(__file__).resolve().parents[2] / "shared" / "corpora" / "physionet-nursing"
SAMPLE = Path(__file__).resolve().parents[1] / "sample_db"


def write_physionet(folder: Path) -> None:
    folder.mkdir()
    (folder / "id.text").write_text(
        "START_OF_RECORD=1||||1||||\nPt seen by Dr Quiley 7/22.\n||||END_OF_RECORD\n"
        "START_OF_RECORD=1||||2||||\nno phi here\n||||END_OF_RECORD\n"
        "START_OF_RECORD=3||||1||||\nwife Mary called from Calvert\n||||END_OF_RECORD\n"
    )
    (folder / "id-phi.phrase").write_text(
        "1 1 14 20 HCPName Quiley\n1 1 21 25 Date 7/22\n3 1 5 9 RelativeProxyName Mary\n3 1 22 29 Location Calvert\n"
    )
    (folder / "pid_patientname.txt").write_text("1||||MARISETTE||||VRABEL\n3||||JOSEPHINE||||ROMERO\n")
    (folder / "lists").mkdir()
    (folder / "lists" / "doctor_last_names.txt").write_text("QUILEY\nRIZZO \n")
    (folder / "lists" / "stripped_hospitals.txt").write_text("Calvert Memorial\n")


def test_physionet_format(tmp_path):
    write_physionet(tmp_path / "c")
    corpus = load_physionet(tmp_path / "c")
    assert [n.note_id for n in corpus.notes] == ["1-1", "1-2", "3-1"]
    first = corpus.notes[0]
    assert first.text == "Pt seen by Dr Quiley 7/22.\n"
    assert [(first.text[s:e], c) for s, e, c in first.spans] == [("Quiley", "DOCTOR"), ("7/22", "DATE")]
    assert corpus.notes[1].spans == ()
    third = corpus.notes[2]
    assert [(third.text[s:e], c) for s, e, c in third.spans] == [("Mary", "RELATIVE"), ("Calvert", "LOCATION")]
    assert corpus.records["1"].names == ("MARISETTE", "VRABEL")
    assert corpus.lists == {"DOCTOR": ["QUILEY", "RIZZO"], "HOSPITAL": ["Calvert Memorial"]}
    assert load_corpus(tmp_path / "c").notes == corpus.notes


def test_physionet_errors(tmp_path):
    with pytest.raises(CorpusError):
        load_physionet(tmp_path)
    write_physionet(tmp_path / "c")
    (tmp_path / "c" / "id-phi.phrase").write_text("1 1 0 4 Nonsense text\n")
    with pytest.raises(CorpusError, match="unknown category"):
        load_physionet(tmp_path / "c")


def test_gold_jsonl_with_sqlite(tmp_path):
    db = tmp_path / "h.db"
    con = sqlite3.connect(db)
    con.executescript(
        "create table patients (id integer primary key, first text, last text, kin text);"
        "create table notes (id integer primary key, patient_id integer, body text);"
        "create table staff (name text);"
        "insert into patients values (1, 'Ann', 'Lee', 'Bob Lee');"
        "insert into notes values (10, 1, 'Ann Lee seen by Dr Rizzo.');"
        "insert into staff values ('Rizzo');"
    )
    con.commit()
    con.close()
    (tmp_path / "anonymizer.toml").write_text(
        f'[source]\nurl = "sqlite:///{db}"\n[target]\nurl = "sqlite:///{tmp_path / "out.db"}"\n'
        '[patients]\ntable = "patients"\nid = "id"\nnames = ["first", "last"]\nrelatives = ["kin"]\n'
        '[notes]\ntable = "notes"\nid = "id"\npatient = "patient_id"\ntext = "body"\n'
        '[[lists]]\ncategory = "DOCTOR"\ntable = "staff"\ncolumn = "name"\n'
    )
    gold = tmp_path / "gold.jsonl"
    gold.write_text(json.dumps({"note_id": 10, "patient_id": 1, "spans": [
        {"start": 0, "end": 3, "category": "PATIENT"}, {"start": 19, "end": 24, "category": "DOCTOR"}]}) + "\n")
    corpus = load_gold_jsonl(gold)
    assert corpus.notes[0].text == "Ann Lee seen by Dr Rizzo."
    assert corpus.notes[0].spans == ((0, 3, "PATIENT"), (19, 24, "DOCTOR"))
    assert corpus.records["1"].names == ("Ann", "Lee") and corpus.records["1"].relatives == ("Bob Lee",)
    assert corpus.lists == {"DOCTOR": ["Rizzo"]}


@pytest.mark.skipif(not (SAMPLE / "gold.jsonl").is_file() or not (SAMPLE / "hospital.db").is_file(), reason="sample database not generated")
def test_sample_database_gold():
    corpus = load_corpus(SAMPLE / "gold.jsonl")
    assert corpus.notes
    for note in corpus.notes[:50]:
        assert all(0 <= s < e <= len(note.text) for s, e, _ in note.spans)


@pytest.mark.skipif(not SHARED.is_dir(), reason="../shared/corpora/physionet-nursing not present")
def test_physionet_development_half():
    corpus = load_physionet(SHARED)
    assert len(corpus.notes) == 1450
    assert sum(len(n.spans) for n in corpus.notes) == 999
    assert len({n.patient_id for n in corpus.notes}) == 82
    assert set(corpus.lists) == {"DOCTOR", "HOSPITAL", "LOCATION"}
