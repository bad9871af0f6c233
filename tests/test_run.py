"""The database-to-database run against real SQLite files: output, reruns, recovery after kill -9."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import sqlalchemy as sa

from anonymizer.config import load_config
from anonymizer.run import run
from tests.conftest import NOTES, create_hospital


def target_rows(config_path: Path, table: str) -> list[tuple]:
    engine = sa.create_engine(load_config(config_path).target.url)
    with engine.connect() as conn:
        rows = conn.execute(sa.text(f"SELECT * FROM {table}")).all()
    engine.dispose()
    return rows


def anonymized(config_path: Path) -> dict[str, str]:
    return {row[0]: row[2] for row in target_rows(config_path, "anonymized_notes")}


def test_run_writes_every_note_once_without_the_record_phi(hospital):
    summary = run(load_config(hospital))
    assert (summary.notes, summary.done, summary.failed) == (len(NOTES), len(NOTES), 0)
    out = anonymized(hospital)
    assert set(out) == {str(n["note_id"]) for n in NOTES}
    text = " ".join(out.values()).lower()
    for phi in ("marisette", "marisete", "vrabel", "s1234567d", "9123 4567", "kumar", "ravi", "mary", "quiley"):
        assert phi not in text
    assert "vomiting 2/7" in out["11"] and "BP 120/70" in out["11"]
    assert "[PATIENT]" in out["10"] and "[ID]" in out["10"] and "[DATE]" in out["11"]
    assert out["14"] == ""


def test_spans_keep_offsets_and_detectors_never_the_phi(hospital):
    run(load_config(hospital))
    spans = target_rows(hospital, "phi_spans")
    note = next(n for n in NOTES if n["note_id"] == 10)["body"]
    by_text = {note[s[2] : s[3]]: (s[4], s[5]) for s in spans if s[1] == "10"}
    category, detectors = by_text["MARISETTE VRABEL"]  # one name, one span
    assert category == "PATIENT" and "record:name" in detectors
    stored = " ".join(str(v) for row in spans for v in row)
    assert "MARISETTE" not in stored and "S1234567D" not in stored


def test_a_note_without_a_patient_record_is_still_anonymized(hospital):
    run(load_config(hospital))
    out = anonymized(hospital)["13"]
    assert "6123-4567" not in out and "12 Mar 2019" not in out


def test_rerun_skips_done_notes_and_never_duplicates(hospital):
    first = run(load_config(hospital))
    second = run(load_config(hospital))
    assert second.skipped == len(NOTES) and second.done == 0
    assert len(target_rows(hospital, "anonymized_notes")) == len(NOTES)
    runs = target_rows(hospital, "runs")
    assert [r[4] for r in runs] == ["done", "done"] and runs[0][0] == first.run_id


def test_changed_note_is_redone_on_rerun(hospital):
    config = load_config(hospital)
    run(config)
    engine = sa.create_engine(config.source.url)
    with engine.begin() as conn:
        conn.execute(sa.text("UPDATE notes SET body = 'Ravi again' WHERE note_id = 12"))
    again = run(config)
    assert again.done == 1 and again.skipped == len(NOTES) - 1
    assert anonymized(hospital)["12"] == "[PATIENT] again"


def test_dry_run_writes_nothing(hospital):
    summary = run(load_config(hospital), dry_run=True)
    assert summary.done == len(NOTES) and summary.run_id is None
    assert not Path(load_config(hospital).target.url.removeprefix("sqlite:///")).exists()


def test_killed_run_recovers_to_every_note_exactly_once(tmp_path):
    """kill -9 a real `anonymizer run` mid-way, start it again, compare with a clean run."""
    source = tmp_path / "big.db"
    notes = [dict(note_id=i, patient_id=i % 40, body=f"Pt Marisette Vrabel seen 12/03/2019 S1234567D note {i}") for i in range(6000)]
    create_hospital(f"sqlite:///{source}", notes=notes)
    config = tmp_path / "anonymizer.toml"
    from tests.conftest import CONFIG

    config.write_text(CONFIG.format(source=source, target=tmp_path / "killed.db"))
    command = [sys.executable, "-m", "anonymizer", "run", "--config", str(config), "--batch-size", "50"]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if (tmp_path / "killed.db").exists() and _count(tmp_path / "killed.db") >= 500:
            break
        time.sleep(0.05)
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    partial = _count(tmp_path / "killed.db")
    assert 0 < partial < len(notes), "the run was not killed mid-way"
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    clean = tmp_path / "clean.toml"
    clean.write_text(CONFIG.format(source=source, target=tmp_path / "clean.db"))
    subprocess.run([*command[:4], "--config", str(clean)], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    assert anonymized(config) == anonymized(clean)
    assert len(target_rows(config, "anonymized_notes")) == len(notes)


def _count(path: Path) -> int:
    engine = sa.create_engine(f"sqlite:///{path}")
    try:
        with engine.connect() as conn:
            return conn.execute(sa.text("SELECT count(*) FROM anonymized_notes")).scalar_one()
    except sa.exc.OperationalError:
        return 0
    finally:
        engine.dispose()


def test_a_note_that_hits_the_time_budget_is_a_failure_row_not_a_lost_note(hospital):
    hospital.write_text(hospital.read_text() + "\n[detectors]\nnote_timeout = 0.0000001\n")
    summary = run(load_config(hospital))
    failures = target_rows(hospital, "failures")
    written = target_rows(hospital, "anonymized_notes")
    assert summary.failed == len(failures) > 0
    assert {f[0] for f in failures}.isdisjoint(r[0] for r in written)
    assert len(failures) + len(written) == len(NOTES)
    assert all(f[3].startswith("NoteTimeout") for f in failures)
