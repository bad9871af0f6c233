"""Shared fixtures: a small real SQLite hospital database and a configuration that maps it."""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path

import pytest
import sqlalchemy as sa
from hypothesis import settings

# Tests assert behaviour, never timings: no example fails for taking long on a loaded machine.
# Under CI the examples are the same every run (a submission's result does not depend on the draw);
# elsewhere each run draws new ones, which is how property tests keep finding cases.
settings.register_profile("anonymizer", deadline=None, derandomize=bool(os.environ.get("CI")))
settings.load_profile("anonymizer")

PATIENTS = [
    dict(patient_id=1, given_name="Marisette", family_name="Vrabel", next_of_kin="Mary Vrabel", nric="S1234567D",
         phone="+65 9123 4567", date_of_birth=dt.date(1950, 3, 12), address="Blk 12 Lorong Lew Lian #05-12 Singapore 530012"),
    dict(patient_id=2, given_name="Ravi", family_name="Kumar", next_of_kin=None, nric="T0123456G",
         phone="6777 1234", date_of_birth=dt.date(1988, 11, 2), address=None),
]
NOTES = [
    dict(note_id=10, patient_id=1, body="Pt MARISETTE VRABEL, NRIC S1234567D, seen by Dr. Quiley. Daughter Mary called 9123 4567."),
    dict(note_id=11, patient_id=1, body="marisete c/o vomiting 2/7, BP 120/70. DOB 12/03/1950."),
    dict(note_id=12, patient_id=2, body="Mr Kumar stable. Ravi's brother visited on 3rd of March 2019."),
    dict(note_id=13, patient_id=3, body="No record for this patient; call 6123-4567 on 12 Mar 2019."),
    dict(note_id=14, patient_id=2, body=""),
]

CONFIG = """
[source]
url = "sqlite:///{source}"

[patients]
table = "patients"
id = "patient_id"
names = ["given_name", "family_name"]
relatives = ["next_of_kin"]
identifiers = ["nric"]
phones = ["phone"]
dates = ["date_of_birth"]
addresses = ["address"]

[notes]
table = "notes"
id = "note_id"
patient = "patient_id"
text = "body"

[[lists]]
category = "DOCTOR"
table = "staff"
column = "full_name"

[target]
url = "sqlite:///{target}"

[classifier]
enabled = false
"""


def create_hospital(url: str, patients=PATIENTS, notes=NOTES) -> None:
    """Create the test hospital schema (the user's schema, not ours) and fill it."""
    engine = sa.create_engine(url)
    metadata = sa.MetaData()
    p = sa.Table(
        "patients", metadata,
        sa.Column("patient_id", sa.Integer, primary_key=True),
        *(sa.Column(c, sa.String(200)) for c in ("given_name", "family_name", "next_of_kin", "nric", "phone", "address")),
        sa.Column("date_of_birth", sa.Date),
    )
    n = sa.Table(
        "notes", metadata,
        sa.Column("note_id", sa.Integer, primary_key=True),
        sa.Column("patient_id", sa.Integer),
        sa.Column("body", sa.Text),
    )
    s = sa.Table("staff", metadata, sa.Column("staff_id", sa.Integer, primary_key=True), sa.Column("full_name", sa.String(200)))
    metadata.drop_all(engine)
    metadata.create_all(engine)
    with engine.begin() as conn:
        conn.execute(p.insert(), patients)
        conn.execute(n.insert(), notes)
        conn.execute(s.insert(), [dict(staff_id=1, full_name="Quiley")])
    engine.dispose()


@pytest.fixture
def hospital(tmp_path: Path) -> Path:
    """A source database and a config file mapping it; returns the config path."""
    source, target = tmp_path / "hospital.db", tmp_path / "target.db"
    create_hospital(f"sqlite:///{source}")
    config = tmp_path / "anonymizer.toml"
    config.write_text(CONFIG.format(source=source, target=target))
    return config


# Fresh PostgreSQL schemas, MariaDB databases and SQLite files per test (tests/servers.py).
from tests.servers import databases, pytest_runtest_logreport, pytest_terminal_summary  # noqa: E402,F401
