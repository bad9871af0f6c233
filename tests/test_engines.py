"""The database-to-database run, reprocessing and the leak audit on real PostgreSQL and MariaDB.

Each test gets its own PostgreSQL schema / MariaDB database / SQLite file (tests/servers.py) and
drops it.  Without a server these tests skip with a reason; with CI set they fail instead.
The anonymized text must be the same whatever the engines: the SQLite → SQLite run is the reference.
"""

from __future__ import annotations

import json

import pytest
import sqlalchemy as sa
from typer.testing import CliRunner

from anonymizer.cli import app
from anonymizer.config import load_config
from anonymizer.source import Source
from tests.conftest import NOTES, create_hospital
from tests.servers import anonymized, check_every_note_once, execute, query, reference_run, write_config

runner = CliRunner()

PAIRS = [
    ("sqlite", "sqlite"),
    ("postgresql", "postgresql"),
    ("mariadb", "mariadb"),
    ("postgresql", "sqlite"),
    ("mariadb", "postgresql"),
]


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> dict[str, str]:
    """Anonymized texts of the test hospital from a SQLite → SQLite run."""
    return reference_run(tmp_path_factory.mktemp("reference"), create_hospital)


def cli(*args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.stdout, result.stderr


@pytest.mark.parametrize(("source_kind", "target_kind"), PAIRS, ids=[f"{s}-to-{t}" for s, t in PAIRS])
def test_run_reprocess_and_leak_audit(databases, tmp_path, reference, source_kind, target_kind):
    source, target = databases.url(source_kind, "src"), databases.url(target_kind, "dst")
    create_hospital(source)
    config = str(write_config(tmp_path / "anonymizer.toml", source, target))

    code, out, err = cli("run", "--config", config, "--workers", "2")  # a worker pool, as by default
    assert code == 0, err
    assert anonymized(target) == reference
    done, failed = check_every_note_once(source, target)
    assert len(done) == len(NOTES) and not failed
    assert query(target, "SELECT status, notes_done FROM runs") == [("done", len(NOTES))]

    code, out, err = cli("run", "--config", config, "--workers", "1")  # unchanged: every note skipped, none duplicated
    assert code == 0 and query(target, "SELECT notes_skipped FROM runs WHERE run_id = 2") == [(len(NOTES),)]
    check_every_note_once(source, target)

    # A corrected record: reprocess --changed redoes that patient's notes only.
    execute(source, "UPDATE notes SET body = 'Selvam stable, seen by team' WHERE note_id = 14")
    assert cli("run", "--config", config, "--workers", "1")[0] == 0
    assert anonymized(target)["14"] == "Selvam stable, seen by team"
    execute(source, "UPDATE patients SET family_name = 'Selvam' WHERE patient_id = 2")
    code, out, err = cli("reprocess", "--changed", "--config", config, "--workers", "1")
    assert code == 0, err
    after = anonymized(target)
    assert after["14"] == "[PATIENT] stable, seen by team"
    assert {k: v for k, v in after.items() if k not in ("12", "14")} == {
        k: v for k, v in reference.items() if k not in ("12", "14")
    }
    assert query(target, "SELECT kind, patients FROM runs ORDER BY run_id DESC")[0] == ("reprocess", "2")
    check_every_note_once(source, target)

    code, out, err = cli("audit", "leaks", "--config", config)
    assert code == 0, out + err
    execute(target, "UPDATE anonymized_notes SET text = 'Marisete called, NRIC S1234567D' WHERE note_id = '11'")
    code, out, _ = cli("audit", "leaks", "--json", "--config", config)
    assert code == 1
    assert {f["field"] for f in json.loads(out)} >= {"name", "identifier"}

    code, out, err = cli("audit", "summary", "--json", "--config", config)
    assert code == 0, err
    assert [r["status"] for r in json.loads(out)] == ["done"] * 4


@pytest.mark.parametrize("kind", ["postgresql", "mariadb"])
def test_source_is_streamed_with_a_server_side_cursor(databases, tmp_path, kind):
    """The notes query runs on a server-side cursor; records load on a second connection meanwhile."""
    source = databases.url(kind, "src")
    notes = [dict(note_id=i, patient_id=i % 7, body=f"note {i} for Ravi") for i in range(1, 61)]
    create_hospital(source, notes=notes)
    config = load_config(write_config(tmp_path / "anonymizer.toml", source, "sqlite:///unused.db"))
    reader = Source(config)
    cursors: list[tuple[str, str, int]] = []

    @sa.event.listens_for(reader.engine, "before_cursor_execute")
    def spy(conn, cursor, statement, parameters, context, executemany):
        table = "notes" if "FROM notes" in statement else "patients" if "FROM patients" in statement else "other"
        cursors.append((table, type(cursor).__name__, id(conn.connection.dbapi_connection)))

    batches = reader.batches(batch_size=10)
    first = next(batches)  # read while the stream is open
    rest = list(batches)
    assert len(first.notes) + sum(len(b.notes) for b in rest) == len(notes)
    [(_, cursor, stream_connection)] = [c for c in cursors if c[0] == "notes"]
    assert cursor == {"postgresql": "ServerCursor", "mariadb": "SSCursor"}[kind]
    record_connections = {c[2] for c in cursors if c[0] == "patients"}
    # one records query per batch holding a patient with a record (patients 0, 3 to 6 have none)
    assert 1 <= len([c for c in cursors if c[0] == "patients"]) <= 1 + len(rest)
    assert stream_connection not in record_connections
    reader.engine.dispose()
