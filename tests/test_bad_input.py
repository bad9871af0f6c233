"""Bad input and bad databases: each case has one clear, tested outcome (docs/robustness.md).

The invariant checked throughout: every source note ends as exactly one row of `anonymized_notes`
or one row of `failures` with its reason, never neither and never both.
"""

from __future__ import annotations

import json

import pytest
import sqlalchemy as sa
from sqlalchemy.dialects import mysql
from typer.testing import CliRunner

import anonymizer.worker as worker_module
from anonymizer.budget import check
from anonymizer.cli import app
from anonymizer.config import load_config
from anonymizer.run import run
from anonymizer.spans import Span
from tests.conftest import create_hospital
from tests.servers import anonymized, check_every_note_once, execute, kind_of, query, reference_run, write_config

runner = CliRunner()

PATIENTS = [
    dict(patient_id=1, given_name="Marisette", family_name="Vrabel", next_of_kin="Mary Vrabel", nric="S1234567D"),
    dict(patient_id=2, given_name="Ravi", family_name="Kumar", next_of_kin=None, nric="T0123456G"),
    dict(patient_id=3, given_name="José", family_name="O'Brien", next_of_kin="Siobhán Ní Bhriain", nric=None),
    dict(patient_id=4, given_name="大文", family_name="陈", next_of_kin=None, nric=None),
    dict(patient_id=5, given_name=None, family_name="Tan", next_of_kin=None, nric=None),  # NULL name fields
    dict(patient_id=6, given_name=None, family_name=None, next_of_kin=None, nric=None),  # a record of NULLs
    dict(patient_id=7, given_name="Mei Ling", family_name="Goh", next_of_kin=None, nric=None),
    dict(patient_id=7, given_name="Meiling", family_name="Ng", next_of_kin=None, nric=None),  # duplicate id
]
PROSE = "patient stable overnight, afebrile, tolerating diet, plan continue antibiotics and review. "
ONE_MB = ("Pt José O'Brien seen. " + PROSE * 11_000)[: 1_000_000 - 20] + " José O'Brien ok."
NOTES = [
    dict(note_id=1, patient_id=1, body=""),
    dict(note_id=2, patient_id=1, body=None),
    dict(note_id=3, patient_id=2, body="Ravi\x01\x07 seen\x1b[31m, \x7f\u0085\u2028 Kumar\tcalled\r\n"),
    dict(note_id=4, patient_id=3, body="José O'Brien seen; Siobhán Ní Bhriain (wife) called. o'brien stable."),
    dict(note_id=5, patient_id=4, body="陈 大文 seen today, stable."),
    dict(note_id=6, patient_id=5, body="Mr Tan seen, NRIC S1234567D not his."),
    dict(note_id=7, patient_id=6, body="Seen 12/03/2019, call 6123 4567."),
    dict(note_id=8, patient_id=99, body="No record: call 6123-4567 on 12 Mar 2019, Dr Quiley."),
    dict(note_id=9, patient_id=7, body="Mei Ling Goh (Meiling Ng before marriage) seen."),
    dict(note_id=10, patient_id=2, body="Ravi \u202eKumar\u202c مريض שלום Ravi"),
    dict(note_id=13, patient_id=3, body=ONE_MB),
]
NUL_NOTE = dict(note_id=11, patient_id=2, body="Ravi\x00Kumar seen\x00")  # PostgreSQL sources cannot hold NUL
INVALID_UTF8 = b"Ravi \xff\xfeKumar seen"  # SQLite TEXT and MariaDB BLOB can hold any bytes


def create_source(url: str, patients=PATIENTS, notes=NOTES, body_type: sa.types.TypeEngine | None = None) -> None:
    """The user's schema: patients without a primary key (ids may repeat), notes up to LONGTEXT."""
    engine = sa.create_engine(url)
    metadata = sa.MetaData()
    p = sa.Table(
        "patients", metadata,
        sa.Column("patient_id", sa.Integer),
        *(sa.Column(c, sa.String(200)) for c in ("given_name", "family_name", "next_of_kin", "nric", "phone", "address")),
        sa.Column("date_of_birth", sa.Date),
    )
    n = sa.Table(
        "notes", metadata,
        sa.Column("note_id", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("patient_id", sa.Integer),
        sa.Column("body", body_type or sa.Text().with_variant(mysql.LONGTEXT(), "mysql", "mariadb")),
    )
    s = sa.Table("staff", metadata, sa.Column("staff_id", sa.Integer, primary_key=True), sa.Column("full_name", sa.String(200)))
    metadata.create_all(engine)
    with engine.begin() as conn:
        conn.execute(p.insert(), [{**dict(phone=None, address=None, date_of_birth=None), **row} for row in patients])
        if notes:
            conn.execute(n.insert(), notes)
        conn.execute(s.insert(), [dict(staff_id=1, full_name="Quiley")])
    engine.dispose()


def bad_source(url: str) -> list[dict]:
    notes = NOTES + ([] if kind_of(url) == "postgresql" else [NUL_NOTE])
    create_source(url, notes=notes)
    if kind_of(url) == "sqlite":
        execute(url, f"INSERT INTO notes VALUES (12, 2, CAST(X'{INVALID_UTF8.hex()}' AS TEXT))")
        notes = notes + [dict(note_id=12, patient_id=2, body=INVALID_UTF8)]
    return notes


PAIRS = [
    ("sqlite", "sqlite"),
    ("postgresql", "postgresql"),
    ("mariadb", "mariadb"),
    ("sqlite", "postgresql"),  # NUL and invalid UTF-8 into PostgreSQL
    ("mariadb", "postgresql"),
]


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> dict[str, str]:
    return reference_run(tmp_path_factory.mktemp("bad_reference"), bad_source, NO_BUDGET)


# The 1 MB note must be anonymized however slow the machine: the budget's own tests are below.
NO_BUDGET = "\n[detectors]\nnote_timeout = 86400.0\n"


@pytest.mark.parametrize(("source_kind", "target_kind"), PAIRS, ids=[f"{s}-to-{t}" for s, t in PAIRS])
def test_bad_notes_each_get_one_clear_outcome(databases, tmp_path, reference, source_kind, target_kind):
    source, target = databases.url(source_kind, "src"), databases.url(target_kind, "dst")
    notes = bad_source(source)
    config = write_config(tmp_path / "anonymizer.toml", source, target, NO_BUDGET)
    summary = run(load_config(config))
    assert (summary.notes, summary.done, summary.failed) == (len(notes), len(notes), 0)
    assert summary.no_record == 2  # patient 99 has no row; patient 6's row is all NULL
    done, failed = check_every_note_once(source, target)
    out = anonymized(target)
    # The same output whatever the engines (SQLite → SQLite is the reference).
    assert out == {k: v for k, v in reference.items() if k in out}

    assert out["1"] == "" and out["2"] == ""  # empty and NULL bodies: an empty anonymized note
    assert "Ravi" not in out["3"] and "Kumar" not in out["3"]
    assert "\x01\x07" in out["3"] and "\x1b[31m" in out["3"] and "\u2028" in out["3"]  # control characters kept
    for name in ("José", "O'Brien", "o'brien", "Siobhán", "Bhriain"):
        assert name not in out["4"]
    assert "陈" not in out["5"] and "大文" not in out["5"]
    assert "Tan" not in out["6"] and "[ID]" in out["6"]
    assert "12/03/2019" not in out["7"] and "6123 4567" not in out["7"]
    assert "6123-4567" not in out["8"] and "12 Mar 2019" not in out["8"] and "Quiley" not in out["8"]
    for name in ("Mei Ling", "Goh", "Meiling", "Ng "):  # both rows of the duplicated patient id count
        assert name not in out["9"]
    assert "Ravi" not in out["10"] and "Kumar" not in out["10"] and "مريض שלום" in out["10"]
    assert "José" not in out["13"] and "O'Brien" not in out["13"] and len(out["13"]) > 990_000
    if "11" in out:  # NUL: stored as U+FFFD (PostgreSQL refuses NUL), same on every target
        assert "\x00" not in out["11"] and out["11"].count("\ufffd") == 2 and "Ravi" not in out["11"]
    if "12" in out:  # invalid UTF-8: each bad byte read as U+FFFD
        assert "\ufffd" in out["12"] and "Ravi" not in out["12"] and "Kumar" not in out["12"]

    result = runner.invoke(app, ["audit", "leaks", "--config", str(config)])
    assert result.exit_code == 0, result.output


def test_a_dense_1mb_note_over_its_time_budget_is_a_failure_row_and_the_others_are_done(tmp_path, monkeypatch):
    """A detector that never finishes on the dense note (it only checks the deadline) stands for
    any stage that outlasts the budget, however fast the machine: the note fails with the budget
    and its length only, and the patient's other note is anonymized."""
    source, target = f"sqlite:///{tmp_path / 'source.db'}", f"sqlite:///{tmp_path / 'target.db'}"
    dense = ("Pt José O'Brien seen 12/03/2019 by Dr Quiley, call 9123 4567. BP 120/70. " * 14_000)[:1_000_000]
    create_source(source, notes=[dict(note_id=1, patient_id=3, body=dense), dict(note_id=2, patient_id=3, body="José ok")])
    config = write_config(tmp_path / "anonymizer.toml", source, target, "\n[detectors]\nnote_timeout = 2.0\n")
    real = worker_module.build_pipeline

    def stalling(*args, **kwargs):
        pipeline = real(*args, **kwargs)

        def stall(text, record) -> list[Span]:
            while len(text) == len(dense):
                check()
            return []

        pipeline.detectors.append(stall)
        return pipeline

    monkeypatch.setattr(worker_module, "build_pipeline", stalling)
    summary = run(load_config(config))
    assert (summary.done, summary.failed) == (1, 1)
    done, failed = check_every_note_once(source, target)
    [(reason,)] = query(target, "SELECT reason FROM failures WHERE note_id = '1'")
    assert reason == "NoteTimeout: detection exceeded 2.0s on a note of 1000000 characters"
    assert anonymized(target) == {"2": "[PATIENT] ok"}


@pytest.mark.parametrize("kind", ["mariadb"])
def test_blob_notes_with_invalid_utf8_are_read_as_replacement_characters(databases, tmp_path, kind):
    source, target = databases.url(kind, "src"), databases.url("sqlite", "dst")
    notes = [dict(note_id=1, patient_id=2, body=INVALID_UTF8), dict(note_id=2, patient_id=2, body="Kumar ok".encode())]
    create_source(source, notes=notes, body_type=mysql.LONGBLOB())
    run(load_config(write_config(tmp_path / "anonymizer.toml", source, target)))
    check_every_note_once(source, target)
    assert anonymized(target) == {"1": "[PATIENT] \ufffd\ufffd[PATIENT] seen", "2": "[PATIENT] ok"}


class Boom(RuntimeError):
    pass


@pytest.mark.parametrize("target_kind", ["sqlite", "postgresql"])
def test_a_note_that_fails_is_one_failure_row_shown_by_audit_and_redone_later(databases, tmp_path, monkeypatch, target_kind):
    source, target = databases.url("sqlite", "src"), databases.url(target_kind, "dst")
    create_hospital(source)
    config = write_config(tmp_path / "anonymizer.toml", source, target)
    real = worker_module.build_pipeline

    def failing(*args, **kwargs):
        pipeline = real(*args, **kwargs)

        def explode(text, record) -> list[Span]:
            if "vomiting" in text:
                raise Boom("detector crashed on 'marisete c/o vomiting'")  # must not reach the target
            return []

        pipeline.detectors.append(explode)
        return pipeline

    monkeypatch.setattr(worker_module, "build_pipeline", failing)
    summary = run(load_config(config))
    assert (summary.done, summary.failed) == (4, 1)
    done, failed = check_every_note_once(source, target)
    assert failed == {"11"}
    assert query(target, "SELECT reason FROM failures") == [("Boom",)]  # the class, never the message
    result = runner.invoke(app, ["audit", "summary", "--json", "--config", str(config)])
    [report] = json.loads(result.stdout)
    assert report["notes_failed"] == 1 and report["failures"] == {"Boom": 1}
    text = runner.invoke(app, ["audit", "summary", "--config", str(config)]).stdout
    assert "failure: Boom" in text

    monkeypatch.setattr(worker_module, "build_pipeline", real)
    again = run(load_config(config))
    assert (again.done, again.skipped, again.failed) == (1, 4, 0)
    done, failed = check_every_note_once(source, target)
    assert not failed


# ---- databases that cannot be reached or refuse writes -----------------------------------------


def one_line_error(args: list[str]) -> str:
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    # One line (the progress bar, stopped after the error on a non-terminal, may add blank lines).
    assert result.stderr.startswith("error: ") and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "Traceback" not in result.stderr
    return result.stderr


@pytest.mark.parametrize(
    "bad",
    [
        "notadb://somewhere/x",
        "postgresql+psycopg://no_such_role@127.0.0.1:5432/test",
        "mysql+pymysql://root:wrong-password@127.0.0.1:3306/test",
        "postgresql+psycopg://postgres@127.0.0.1:1/test",
        "mysql+pymysql://root@127.0.0.1:3306/no_such_database",
    ],
    ids=["wrong-url", "pg-wrong-role", "mariadb-wrong-password", "unreachable", "mariadb-unknown-database"],
)
@pytest.mark.parametrize("side", ["source", "target"])
def test_wrong_url_credentials_or_server_exit_2_with_one_line_and_write_nothing(databases, tmp_path, bad, side):
    source, target = databases.url("sqlite", "src"), databases.url("sqlite", "dst")
    create_hospital(source)
    urls = {"source": source, "target": target, side: bad}
    config = write_config(tmp_path / "anonymizer.toml", urls["source"], urls["target"])
    message = one_line_error(["run", "--config", str(config)])
    assert message.startswith(f"error: {side}.url: ")
    assert not (tmp_path / target.rsplit("/", 1)[1]).exists(), "nothing may be written"


def test_read_only_sqlite_target_exits_2_and_leaves_it_unchanged(databases, tmp_path):
    source, target = databases.url("sqlite", "src"), databases.url("sqlite", "dst")
    create_hospital(source)
    run(load_config(write_config(tmp_path / "first.toml", source, target)))
    before = query(target, "SELECT * FROM anonymized_notes ORDER BY note_id"), query(target, "SELECT * FROM runs")
    execute(source, "UPDATE notes SET body = 'Ravi again' WHERE note_id = 12")
    read_only = f"sqlite:///file:{target.removeprefix('sqlite:///')}?mode=ro&uri=true"
    message = one_line_error(["run", "--config", str(write_config(tmp_path / "ro.toml", source, read_only))])
    assert "readonly" in message.replace("-", "").replace(" ", "").lower()
    assert (query(target, "SELECT * FROM anonymized_notes ORDER BY note_id"), query(target, "SELECT * FROM runs")) == before


@pytest.mark.parametrize("fresh", [True, False], ids=["empty-schema", "existing-target"])
def test_read_only_postgresql_role_exits_2_and_writes_nothing(databases, tmp_path, fresh):
    source, target = databases.url("sqlite", "src"), databases.url("postgresql", "dst")
    create_hospital(source)
    if not fresh:
        run(load_config(write_config(tmp_path / "first.toml", source, target)))
        execute(source, "UPDATE notes SET body = 'Ravi again' WHERE note_id = 12")
    tables = query(target, "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() ORDER BY 1")
    before = query(target, "SELECT * FROM anonymized_notes ORDER BY note_id") if not fresh else []
    read_only = databases.read_only_role(target)
    message = one_line_error(["run", "--config", str(write_config(tmp_path / "ro.toml", source, read_only))])
    assert "permission denied" in message and "InsufficientPrivilege" in message
    assert query(target, "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() ORDER BY 1") == tables
    if not fresh:
        assert query(target, "SELECT * FROM anonymized_notes ORDER BY note_id") == before
        assert [s for (s,) in query(target, "SELECT status FROM runs")] == ["done"]


REFUSE = {
    # A full disk cannot be staged in a test; a trigger raising PostgreSQL's own disk_full error
    # (SQLSTATE 53100) or a MariaDB SIGNAL is the database refusing the write mid-run all the same.
    "postgresql": [
        "CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
        "IF NEW.note_id = '12' THEN RAISE EXCEPTION 'could not extend file: No space left on device' "
        "USING ERRCODE = '53100'; END IF; RETURN NEW; END $$",
        "CREATE TRIGGER refuse BEFORE INSERT ON anonymized_notes FOR EACH ROW EXECUTE FUNCTION refuse()",
    ],
    "mariadb": [
        "CREATE TRIGGER refuse BEFORE INSERT ON anonymized_notes FOR EACH ROW BEGIN "
        "IF NEW.note_id = '12' THEN SIGNAL SQLSTATE 'HY000' SET MYSQL_ERRNO = 1114, "
        "MESSAGE_TEXT = 'The table `anonymized_notes` is full'; END IF; END",
    ],
}


@pytest.mark.parametrize("kind", ["postgresql", "mariadb"])
def test_target_refusing_writes_mid_run_exits_2_marks_the_run_failed_and_half_writes_nothing(databases, tmp_path, kind):
    source, target = databases.url("sqlite", "src"), databases.url(kind, "dst")
    create_hospital(source)
    config = write_config(tmp_path / "anonymizer.toml", source, target, "\n[run]\nbatch_size = 2\n")
    from anonymizer.target import Target

    Target(target).engine.dispose()  # the tables exist, so the trigger can be installed
    execute(target, *REFUSE[kind])
    message = one_line_error(["run", "--config", str(config)])
    assert message.startswith("error: run failed: ") and ("53100" in message or "full" in message)
    assert "Marisette" not in message and "6123" not in message
    assert query(target, "SELECT status, notes_done FROM runs") == [("failed", 2)]
    # Batches (by patient) are (10, 11), (12, 14), (13): the first committed whole, the second not at all.
    assert sorted(anonymized(target)) == ["10", "11"]
    assert {n for (n,) in query(target, "SELECT DISTINCT note_id FROM phi_spans")} <= {"10", "11"}
    assert query(target, "SELECT count(*) FROM failures") == [(0,)]

    execute(target, "DROP TRIGGER refuse" + (" ON anonymized_notes" if kind == "postgresql" else ""))
    assert runner.invoke(app, ["run", "--config", str(config)]).exit_code == 0
    done, failed = check_every_note_once(source, target)
    assert len(done) == 5 and not failed


@pytest.mark.parametrize("kind", ["postgresql", "mariadb"])
def test_rows_added_to_the_source_during_a_run_are_never_lost(databases, tmp_path, kind):
    """The stream reads a snapshot: rows added meanwhile are done by this run or by the next one."""
    source, target = databases.url(kind, "src"), databases.url("sqlite", "dst")
    notes = [dict(note_id=i, patient_id=i % 5, body=f"Ravi Kumar seen {i}") for i in range(1, 101)]
    create_hospital(source, notes=notes)
    config = load_config(write_config(tmp_path / "anonymizer.toml", source, target, "\n[run]\nbatch_size = 10\n"))
    added = [dict(note_id=i, patient_id=i % 7, body=f"Kumar late note {i}") for i in range(1000, 1020)]
    writer = sa.create_engine(source)
    calls = []

    def grow(n: int, total: int) -> None:
        calls.append(n)
        if len(calls) == 2:  # mid-stream, from another connection, committed
            with writer.begin() as conn:
                conn.execute(sa.text("INSERT INTO notes (note_id, patient_id, body) VALUES (:note_id, :patient_id, :body)"), added)

    first = run(config, progress=grow)
    writer.dispose()
    assert len(calls) >= 10
    done = set(anonymized(target))
    assert {str(n["note_id"]) for n in notes} <= done
    second = run(config)
    assert second.done == len(added) - len(done - {str(n["note_id"]) for n in notes})
    done, failed = check_every_note_once(source, target)
    assert len(done) == len(notes) + len(added) and not failed
    assert first.done + second.done == len(done)


def test_mariadb_target_with_latin1_and_case_insensitive_defaults_keeps_every_note(databases, tmp_path):
    """Migration 0003: CJK and emoji are stored, and ids that differ only in case stay two notes."""
    source, target = databases.url("sqlite", "src"), databases.url("mariadb", "dst", charset="latin1")
    create_source(source, notes=[])
    execute(source, "DROP TABLE notes", "CREATE TABLE notes (note_id TEXT PRIMARY KEY, patient_id INTEGER, body TEXT)")
    rows = [("n-a", 4, "陈 大文 seen 😀"), ("N-A", 2, "Ravi seen"), ("n-b", 3, "Zoë, O'Brien")]
    engine = sa.create_engine(source)
    with engine.begin() as conn:
        conn.execute(sa.text("INSERT INTO notes VALUES (:i, :p, :b)"), [dict(i=i, p=p, b=b) for i, p, b in rows])
    engine.dispose()
    summary = run(load_config(write_config(tmp_path / "anonymizer.toml", source, target)))
    assert (summary.done, summary.failed) == (3, 0)
    check_every_note_once(source, target)
    assert anonymized(target) == {"n-a": "[PATIENT] seen 😀", "N-A": "[PATIENT] seen", "n-b": "Zoë, [PATIENT]"}
