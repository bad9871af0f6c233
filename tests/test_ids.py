"""Patient and note ids as the databases compare them (docs/robustness.md).

* A note's patient is the one the source database matches ('007' beside 7, 'p001' beside 'P001'
  under a case-insensitive collation): its record is found and the name removed.
* Source rows sharing a note id as the target keys it (a table without a primary key, 1 beside '1',
  'P001 ' beside 'P001' on MariaDB) end as one failure row, in one batch or across batches, on
  every rerun, with any number of workers and under `reprocess`: never a blocked run, never an
  overwrite.  Every other note is one anonymized row, and the summary counts the target's rows.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa
from typer.testing import CliRunner

from anonymizer.cli import app
from anonymizer.config import load_config
from anonymizer.run import changed_patients, reprocess, run
from anonymizer.source import Source
from anonymizer.target import Target
from tests.servers import execute, query, write_config

runner = CliRunner()

DUPLICATE = "DuplicateNoteId: 2 source rows share this note id"
NAMES = ("Marisette", "Vrabel", "Ravi", "Kumar")


def create_source(url: str, patient_type: str, note_id_type: str, note_patient_type: str, patients, notes) -> None:
    """The user's schema, with the id types under test (no primary keys: ids may repeat)."""
    execute(
        url,
        f"CREATE TABLE patients (patient_id {patient_type}, given_name VARCHAR(100), family_name VARCHAR(100), "
        "next_of_kin VARCHAR(100), nric VARCHAR(20), phone VARCHAR(30), address VARCHAR(200), date_of_birth DATE)",
        f"CREATE TABLE notes (note_id {note_id_type}, patient_id {note_patient_type}, body TEXT)",
        "CREATE TABLE staff (staff_id INTEGER, full_name VARCHAR(100))",
    )
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        for pid, given, family in patients:
            conn.execute(
                sa.text("INSERT INTO patients (patient_id, given_name, family_name) VALUES (:p, :g, :f)"),
                dict(p=pid, g=given, f=family),
            )
        for note_id, pid, body in notes:
            conn.execute(sa.text("INSERT INTO notes (note_id, patient_id, body) VALUES (:n, :p, :b)"), dict(n=note_id, p=pid, b=body))
        conn.execute(sa.text("INSERT INTO staff VALUES (1, 'Quiley')"))
    engine.dispose()


def rows(target: str) -> tuple[dict, dict]:
    """(note id -> (patient, text), note id -> (patient, reason)): the target's content, runs aside."""
    done = {n: (p, t) for n, p, t in query(target, "SELECT note_id, patient_id, text FROM anonymized_notes")}
    failed = {n: (p, r) for n, p, r in query(target, "SELECT note_id, patient_id, reason FROM failures")}
    assert not done.keys() & failed.keys(), "a note both anonymized and failed"
    for _, text in done.values():
        assert not any(name in text for name in NAMES), "a patient's name was released"
    return done, failed


def check_counts(summary, source: str, target: str) -> None:
    """The summary counts the source rows read, and what the target holds: every row written or skipped."""
    done, failed = rows(target)
    assert summary.done + summary.skipped == len(done)
    assert summary.failed == len(failed)
    assert summary.notes == query(source, "SELECT COUNT(*) FROM notes")[0][0]


def config_for(tmp_path: Path, source: str, target: str, name: str = "anonymizer.toml"):
    return load_config(write_config(tmp_path / name, source, target))


# ---- patients: the database decides which record a note belongs to --------------------------------


@pytest.mark.parametrize(
    ("kind", "patient_type", "note_patient_type", "record_id", "note_patient"),
    [
        ("sqlite", "INTEGER", "TEXT", 7, "007"),
        ("sqlite", "INTEGER", "TEXT", 7, "7.0"),
        ("postgresql", "INTEGER", "DOUBLE PRECISION", 7, 7.0),
        ("mariadb", "VARCHAR(20)", "VARCHAR(20)", "P001", "p001"),
    ],
    ids=["sqlite-007", "sqlite-7.0", "postgresql-7.0", "mariadb-case-insensitive"],
)
def test_a_patient_the_database_matches_has_its_record(
    databases, tmp_path, kind, patient_type, note_patient_type, record_id, note_patient
):
    source, target = databases.url(kind, "src"), databases.url("sqlite", "dst")
    notes = [(1, note_patient, "Pt Marisette Vrabel seen."), (2, note_patient, "MARISETTE stable.")]
    create_source(source, patient_type, "INTEGER", note_patient_type, [(record_id, "Marisette", "Vrabel")], notes)
    config = config_for(tmp_path, source, target)

    summary = run(config)
    assert summary.no_record == 0 and summary.done == 2
    note_patient = str(note_patient)  # the key the notes carry
    done, failed = rows(target)
    assert set(done) == {"1", "2"} and not failed
    assert {p for p, _ in done.values()} == {note_patient}
    assert set(Source(config).patient_ids()) == {note_patient}
    assert Source(config).records([note_patient])[note_patient].names == ("Marisette", "Vrabel")  # as audits read it

    # A corrected record: changed_patients and reprocess find the patient by the notes' key.
    execute(source, "UPDATE patients SET family_name = 'Kumar'")
    execute(source, "UPDATE notes SET body = 'Pt Marisette Kumar seen.' WHERE note_id = 1")
    assert changed_patients(Source(config), Target(config.target.url)) == [note_patient]
    summary = reprocess(config, changed=True)
    assert summary.done == 2 and summary.no_record == 0
    done, _ = rows(target)
    assert "Kumar" not in done["1"][1]
    assert changed_patients(Source(config), Target(config.target.url)) == []

    summary = reprocess(config, [note_patient])  # by the key shown in the target
    assert summary.done == 2 and rows(target)[0] == done


def test_patient_columns_the_database_cannot_compare_stop_the_run(databases, tmp_path):
    source, target = databases.url("postgresql", "src"), databases.url("sqlite", "dst")
    uid = "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"
    create_source(source, "UUID", "INTEGER", "TEXT", [(uid, "Marisette", "Vrabel")], [(1, "{" + uid.upper() + "}", "Marisette")])
    result = runner.invoke(app, ["run", "--config", str(write_config(tmp_path / "a.toml", source, target))])
    assert result.exit_code == 2
    [line] = result.stderr.strip().splitlines()
    assert line.startswith("error: notes.patient: column 'patient_id' (TEXT) cannot be compared with patients.id")
    assert "UUID" in line and "Marisette" not in line
    assert not sa.inspect(sa.create_engine(target)).get_table_names()  # nothing written


# ---- note ids: rows sharing one become one failure row ---------------------------------------------

PATIENTS = [(1, "Marisette", "Vrabel"), (2, "Ravi", "Kumar")]


def shared_id_notes(first, second, second_patient: int = 2) -> list[tuple]:
    """Notes of two patients, with ids `first` (patient 1) and `second` (`second_patient`)."""
    return [
        (first, 1, "Pt Marisette Vrabel seen."),
        (3, 1, "Vrabel stable."),
        (4, 1, "marisete ok"),
        (second, second_patient, "Mr Ravi Kumar reviewed." if second_patient == 2 else "Marisette again"),
        (6, 2, "Kumar discharged."),
    ]


def runs_agree(tmp_path: Path, source: str, targets: tuple[str, str], batch_size: int, key: str) -> tuple[dict, dict]:
    """Run, rerun and run again with one worker and with two: the same target, and each run's
    summary counting its rows.  Returns the one-worker target's rows."""
    states = []
    for workers, target in zip((1, 2), targets):
        config = config_for(tmp_path, source, target, f"w{workers}.toml")
        summary = run(config, batch_size=batch_size, workers=workers)
        check_counts(summary, source, target)
        first = rows(target)
        assert first[1][key][1] == DUPLICATE
        for _ in range(2):  # a rerun ends in the same state
            summary = run(config, batch_size=batch_size, workers=workers)
            check_counts(summary, source, target)
            assert rows(target) == first
        states.append(first)
    assert states[0] == states[1]
    return states[0]


@pytest.mark.parametrize(
    ("second_patient", "batch_size"), [(1, 500), (2, 500), (2, 1)], ids=["one-batch", "next-batch", "distant-batches"]
)
def test_a_note_id_two_source_rows_share_is_one_failure_row(databases, tmp_path, second_patient, batch_size):
    source = databases.url("sqlite", "src")
    create_source(source, "INTEGER", "INTEGER", "INTEGER", PATIENTS, shared_id_notes(5, 5, second_patient))
    done, failed = runs_agree(tmp_path, source, (databases.url("sqlite", "a"), databases.url("sqlite", "b")), batch_size, "5")
    assert set(done) == {"3", "4", "6"} and set(failed) == {"5"}
    assert failed["5"] == ("1", DUPLICATE)  # named by the first source row


def test_int_and_text_ids_sqlite_keeps_apart_are_one_target_id(databases, tmp_path):
    source = databases.url("sqlite", "src")
    create_source(source, "INTEGER", "", "INTEGER", PATIENTS, shared_id_notes(1, "1"))  # no affinity: 1 and '1' differ
    assert len(query(source, "SELECT DISTINCT note_id FROM notes")) == 5
    done, failed = runs_agree(tmp_path, source, (databases.url("sqlite", "a"), databases.url("sqlite", "b")), 1, "1")
    assert set(failed) == {"1"}


def test_ids_a_mariadb_target_pads_alike_are_one_failure_row(databases, tmp_path):
    source = databases.url("sqlite", "src")
    create_source(source, "INTEGER", "TEXT", "INTEGER", PATIENTS, shared_id_notes("P001", "P001 "))
    targets = (databases.url("mariadb", "a"), databases.url("mariadb", "b"))
    done, failed = runs_agree(tmp_path, source, targets, 2, "P001")
    assert set(done) == {"3", "4", "6"}


@pytest.mark.parametrize("batch_size", [500, 1], ids=["one-batch", "across-batches"])
def test_a_duplicate_added_after_a_run_is_never_an_overwrite(databases, tmp_path, batch_size):
    """The first copy is skipped (unchanged) by the next run, which still sees the second copy
    share its id: seen_run marks the skipped row as met in this run."""
    source, target = databases.url("sqlite", "src"), databases.url("sqlite", "dst")
    notes = shared_id_notes(5, 7)
    create_source(source, "INTEGER", "INTEGER", "INTEGER", PATIENTS, notes)
    config = config_for(tmp_path, source, target)
    run(config, batch_size=batch_size)
    assert rows(target)[0]["5"][0] == "1"
    execute(source, "INSERT INTO notes VALUES (5, 2, 'Ravi Kumar, second copy')")
    for _ in range(2):
        summary = run(config, batch_size=batch_size)
        check_counts(summary, source, target)
        done, failed = rows(target)
        assert failed == {"5": ("1", DUPLICATE)} and set(done) == {"3", "4", "6", "7"}
    execute(source, "DELETE FROM notes WHERE note_id = 5 AND patient_id = 2")  # the duplicate resolved
    run(config, batch_size=batch_size)
    done, failed = rows(target)
    assert not failed and done["5"][0] == "1"


def test_reprocess_keeps_a_shared_id_one_failure_row(databases, tmp_path):
    source, target = databases.url("sqlite", "src"), databases.url("sqlite", "dst")
    create_source(source, "INTEGER", "INTEGER", "INTEGER", PATIENTS, shared_id_notes(5, 5))
    config = config_for(tmp_path, source, target)
    run(config)
    after_run = rows(target)
    for patient in ("1", "2"):  # one transaction per patient: the other patient's copy is outside it
        summary = reprocess(config, [patient])
        assert rows(target) == after_run
        assert summary.failed == 1
    summary = run(config)
    check_counts(summary, source, target)
    assert rows(target) == after_run

    # Patient 1's copy leaves the source: reprocessing patient 1 keeps the failure row that stands
    # for patient 2's copy too (never neither row); the next run writes that copy.
    execute(source, "DELETE FROM notes WHERE note_id = 5 AND patient_id = 1")
    reprocess(config, ["1"])
    assert rows(target)[1] == after_run[1]
    run(config)
    done, failed = rows(target)
    assert not failed and done["5"][0] == "2"


# ---- ids of any length --------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["sqlite", "postgresql", "mariadb"])
def test_long_ids_round_trip(databases, tmp_path, kind):
    source, target = databases.url("sqlite", "src"), databases.url(kind, "dst")
    note_id, patient = "ñ" * 700, "p" * 700  # beyond the old VARCHAR(191), within every target's keys
    create_source(source, "TEXT", "TEXT", "TEXT", [(patient, "Marisette", "Vrabel")], [(note_id, patient, "Marisette Vrabel seen")])
    summary = run(config_for(tmp_path, source, target))
    assert summary.done == 1 and summary.no_record == 0
    assert rows(target)[0] == {note_id: (patient, "[PATIENT] seen")}
    assert run(config_for(tmp_path, source, target)).skipped == 1


@pytest.mark.parametrize(
    ("kind", "column", "length", "limit"),
    [
        ("mariadb", "note_id", "800 characters", "768"),
        ("mariadb", "patient_id", "800 characters", "768"),
        ("postgresql", "note_id", "3200 bytes", "2688"),
        ("postgresql", "patient_id", "3200 bytes", "2688"),
    ],
)
def test_an_id_longer_than_the_target_can_key_stops_the_run_before_writing(databases, tmp_path, kind, column, length, limit):
    source, target = databases.url("sqlite", "src"), databases.url(kind, "dst")
    ids = {"note_id": "1", "patient_id": "1", column: "é" * 800 if kind == "mariadb" else "é" * 1600}
    create_source(source, "TEXT", "TEXT", "TEXT", [(ids["patient_id"], "Marisette", "Vrabel")], [(ids["note_id"], ids["patient_id"], "ok")])
    result = runner.invoke(app, ["run", "--config", str(write_config(tmp_path / "a.toml", source, target))])
    assert result.exit_code == 2
    key = {"note_id": "notes.id", "patient_id": "notes.patient"}[column]
    assert result.stderr.strip() == f"error: {key}: an id of {length} is longer than the {limit} the target database can key"
    assert query(target, "SELECT COUNT(*) FROM runs") == [(0,)]
