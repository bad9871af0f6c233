"""Per-patient reprocessing against real SQLite files."""

import pytest
import sqlalchemy as sa

from anonymizer.config import load_config
from anonymizer.run import reprocess, run


def rows(url, query):
    engine = sa.create_engine(url)
    with engine.connect() as conn:
        result = conn.execute(sa.text(query)).all()
    engine.dispose()
    return result


def execute(url, *statements):
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        for statement in statements:
            conn.execute(sa.text(statement))
    engine.dispose()


@pytest.fixture
def config(hospital):
    config = load_config(hospital)
    execute(config.source.url, "UPDATE notes SET body = 'Selvam stable, seen by team' WHERE note_id = 14")
    run(config)
    return config


def test_changed_name_is_removed_and_no_other_patient_is_touched(config):
    others_before = rows(config.target.url, "SELECT * FROM anonymized_notes WHERE patient_id != '2' ORDER BY note_id")
    assert "Selvam" in rows(config.target.url, "SELECT text FROM anonymized_notes WHERE note_id = '14'")[0][0]
    execute(config.source.url, "UPDATE patients SET family_name = 'Selvam' WHERE patient_id = 2")
    summary = reprocess(config, ["2"])
    assert summary.done == 2
    assert rows(config.target.url, "SELECT text FROM anonymized_notes WHERE note_id = '14'")[0][0].startswith("[PATIENT]")
    assert rows(config.target.url, "SELECT * FROM anonymized_notes WHERE patient_id != '2' ORDER BY note_id") == others_before
    kind, patients = rows(config.target.url, "SELECT kind, patients FROM runs ORDER BY run_id DESC")[0]
    assert (kind, patients) == ("reprocess", "2")


def test_changed_finds_only_patients_whose_record_changed(config):
    execute(config.source.url, "UPDATE patients SET phone = '6000 0000' WHERE patient_id = 1")
    summary = reprocess(config, changed=True)
    assert rows(config.target.url, "SELECT patients FROM runs ORDER BY run_id DESC")[0][0] == "1"
    assert summary.done == 2
    assert reprocess(config, changed=True).done == 0  # digests are now current


def test_a_failing_reprocess_leaves_the_patient_as_it_was(config):
    before = rows(config.target.url, "SELECT * FROM anonymized_notes ORDER BY note_id")
    spans_before = rows(config.target.url, "SELECT * FROM phi_spans ORDER BY span_id")
    # A real failure inside the target's transaction: the database refuses the new rows.
    execute(
        config.target.url,
        "CREATE TRIGGER refuse BEFORE INSERT ON anonymized_notes WHEN NEW.patient_id = '2' "
        "BEGIN SELECT RAISE(ABORT, 'refused'); END",
    )
    execute(config.source.url, "UPDATE patients SET family_name = 'Selvam' WHERE patient_id = 2")
    with pytest.raises(sa.exc.IntegrityError):
        reprocess(config, ["2"])
    assert rows(config.target.url, "SELECT * FROM anonymized_notes ORDER BY note_id") == before
    assert rows(config.target.url, "SELECT * FROM phi_spans ORDER BY span_id") == spans_before
    assert rows(config.target.url, "SELECT status FROM runs ORDER BY run_id DESC")[0][0] == "failed"
