"""The target fails closed: audits never create it, one writer at a time, private files, errors
that carry no row text (docs/robustness.md)."""

from __future__ import annotations

import json
import logging
import os
import signal
import stat
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
import sqlalchemy as sa
from typer.testing import CliRunner

from anonymizer.cli import app
from anonymizer.config import load_config
from anonymizer.run import run
from anonymizer.settings import ConfigError
from anonymizer.source import database_error
from anonymizer.target import LOCKED, Target, WriterLock
from tests.conftest import create_hospital
from tests.servers import ENGINES, admin_engine, check_every_note_once, execute, query, schema_of, write_config

runner = CliRunner()
AUDITS = (["audit", "summary"], ["audit", "leaks"], ["audit", "note", "10"], ["audit", "sample", "--n", "2", "--seed", "1"])


def error_line(args: list[str]) -> str:
    """Exit status 2 and one `error:` line on stderr (the progress bar may add blank lines)."""
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in result.stderr, result.stderr
    return lines[0]


def setup(databases, tmp_path: Path, kind: str, extra: str = "") -> tuple[str, str, Path]:
    source, target = databases.url("sqlite", "src"), databases.url(kind, "dst")
    create_hospital(source)
    return source, target, write_config(tmp_path / "anonymizer.toml", source, target, extra)


def tables(target: str) -> list[str]:
    engine = sa.create_engine(target)
    try:
        return sorted(sa.inspect(engine).get_table_names())
    finally:
        engine.dispose()


# ---- audits open the target as it is -----------------------------------------------------------


def audit_args(name: str, tmp_path: Path) -> list[str]:
    review = tmp_path / "review.jsonl"
    review.touch()
    extra = {"sample": ["--out", str(tmp_path / "s.jsonl")], "import-review": [str(review)]}
    return [*next(a for a in (*AUDITS, ["audit", "import-review"]) if a[1] == name), *extra.get(name, [])]


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
@pytest.mark.parametrize("audit", ["summary", "leaks", "note", "sample", "import-review"])
def test_an_audit_of_a_target_never_written_exits_2_and_creates_nothing(databases, tmp_path, kind, audit):
    source, target, config = setup(databases, tmp_path, kind)
    message = error_line([*audit_args(audit, tmp_path), "--config", str(config)])
    assert message.startswith("error: target.url: ")
    if kind == "sqlite":
        assert not Path(target.removeprefix("sqlite:///")).exists(), "an audit must not create the target"
    else:
        assert tables(target) == [], "an audit must not create or migrate the target"
    assert not (tmp_path / "s.jsonl").exists()


def test_an_audit_of_a_target_at_an_older_or_unknown_migration_exits_2_naming_it(databases, tmp_path):
    source, target, config = setup(databases, tmp_path, "sqlite")
    assert runner.invoke(app, ["run", "--workers", "1", "--config", str(config)]).exit_code == 0
    execute(target, "UPDATE anonymizer_alembic_version SET version_num = '0002'")
    message = error_line(["audit", "leaks", "--config", str(config)])
    assert "migration 0002, older than" in message and "anonymizer run" in message
    assert query(target, "SELECT version_num FROM anonymizer_alembic_version") == [("0002",)], "audits never migrate"
    execute(target, "UPDATE anonymizer_alembic_version SET version_num = 'f00dface'")
    for args in (["audit", "summary"], ["run", "--workers", "1"]):
        assert "migration f00dface, which this version of anonymizer does not know" in error_line([*args, "--config", str(config)])


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
def test_a_dropped_target_table_is_one_line_for_run_and_audits_not_a_traceback(databases, tmp_path, kind):
    source, target, config = setup(databases, tmp_path, kind)
    assert runner.invoke(app, ["run", "--workers", "1", "--config", str(config)]).exit_code == 0
    execute(target, "DROP TABLE phi_spans")
    for args in (["run", "--workers", "1"], ["reprocess", "--patient", "1"], *(audit_args(a[1], tmp_path) for a in AUDITS)):
        message = error_line([*args, "--config", str(config)])
        assert message == "error: target.url: table(s) phi_spans missing from the target (dropped?); restore them or write a new target"


# ---- one writer per target ---------------------------------------------------------------------


@pytest.mark.parametrize("kind", ENGINES)
def test_a_second_writer_exits_2_while_the_first_holds_the_lock_and_runs_once_it_ends(databases, tmp_path, kind):
    source, target, config = setup(databases, tmp_path, kind)
    first = Target(target)
    run_id = first.start_run("run", "digest")
    for args in (["run", "--workers", "1"], ["reprocess", "--patient", "1", "--workers", "1"]):
        assert error_line([*args, "--config", str(config)]) == f"error: {LOCKED}"
    with pytest.raises(ConfigError, match="holds the target's lock"):
        Target(target)  # not even the migration runs beside a writer
    assert query(target, "SELECT run_id, status FROM runs") == [(run_id, "running")]
    first.finish_run(run_id, "done", 0, 0, 0)
    first.engine.dispose()
    for args in (["run"], ["reprocess", "--patient", "1"], ["run"]):
        assert runner.invoke(app, [*args, "--workers", "1", "--config", str(config)]).exit_code == 0
    check_every_note_once(source, target)
    spans = query(target, 'SELECT note_id, start, "end" FROM phi_spans')
    assert spans and len(spans) == len(set(spans)), "no span written twice"


def test_the_migration_of_a_fresh_target_runs_under_the_lock(databases, tmp_path):
    target = databases.url("postgresql", "dst")
    holder = WriterLock(databases.engine(target))
    holder.acquire()
    with pytest.raises(ConfigError, match="holds the target's lock"):
        Target(target)
    assert tables(target) == []
    holder.release()
    Target(target).engine.dispose()
    assert "phi_spans" in tables(target)


HOLD = """
import os, sys, time
from anonymizer.target import Target
target = Target(sys.argv[1])
target.start_run("run", "digest")
child = os.fork()  # as a worker pool forks: the child must not keep the lock alive
if child == 0:
    time.sleep(120)
    os._exit(0)
print(child, flush=True)
time.sleep(120)
"""


def _free(target: str, within: float = 30.0) -> bool:
    """Whether the lock can be taken within `within` seconds (a server notices a dead client's
    closed connection shortly after, not at once)."""
    engine = sa.create_engine(target)
    deadline = time.monotonic() + within
    try:
        while True:
            lock = WriterLock(engine)
            try:
                lock.acquire()
            except ConfigError:
                if time.monotonic() > deadline:
                    return False
                time.sleep(0.2)
                continue
            lock.release()
            return True
    finally:
        engine.dispose()


@pytest.mark.parametrize("kind", ENGINES)
def test_the_lock_of_a_killed_run_is_released_even_while_its_forked_worker_lives(databases, tmp_path, kind):
    target = databases.url(kind, "dst")
    Target(target).engine.dispose()
    holder = subprocess.Popen([sys.executable, "-c", HOLD, target], stdout=subprocess.PIPE, text=True)
    child = int(holder.stdout.readline())
    try:
        assert not _free(target, within=0), "the holder has the lock"
        holder.kill()
        holder.wait()
        assert _free(target), "the lock outlived the killed run"
        assert Path(f"/proc/{child}").exists(), "the forked child still lives"
    finally:
        holder.kill()
        holder.wait()
        try:
            os.kill(child, signal.SIGKILL)  # started by this test's holder, checked by pid just above
        except ProcessLookupError:
            pass


# ---- files holding PHI ---------------------------------------------------------------------------


def test_a_sqlite_target_created_by_a_run_and_its_lock_file_are_private(databases, tmp_path):
    source, target, config = setup(databases, tmp_path, "sqlite")
    assert runner.invoke(app, ["run", "--workers", "1", "--config", str(config)]).exit_code == 0
    path = Path(target.removeprefix("sqlite:///"))
    for file in (path, path.with_name(path.name + ".lock")):
        assert stat.S_IMODE(os.stat(file).st_mode) == 0o600, file


def test_audit_sample_writes_a_private_file_and_refuses_existing_files_and_symlinks(databases, tmp_path):
    source, target, config = setup(databases, tmp_path, "sqlite")
    assert runner.invoke(app, ["run", "--workers", "1", "--config", str(config)]).exit_code == 0
    out = tmp_path / "review.jsonl"
    sample = ["audit", "sample", "--n", "2", "--seed", "1", "--config", str(config), "--out", str(out)]
    assert runner.invoke(app, sample).exit_code == 0
    assert stat.S_IMODE(os.stat(out).st_mode) == 0o600 and len(out.read_text().splitlines()) == 2
    assert "exists" in error_line(sample)
    out.write_text("old")
    os.chmod(out, 0o644)
    assert runner.invoke(app, [*sample, "--force"]).exit_code == 0
    assert stat.S_IMODE(os.stat(out).st_mode) == 0o600 and json.loads(out.read_text().splitlines()[0])["note_id"]

    elsewhere = tmp_path / "elsewhere.txt"
    elsewhere.write_text("not yours")
    link = tmp_path / "link.jsonl"
    link.symlink_to(elsewhere)
    dangling = tmp_path / "dangling.jsonl"
    dangling.symlink_to(tmp_path / "nowhere.jsonl")
    for target_link in (link, dangling):
        for force in ([], ["--force"]):
            args = [*sample[:-1], str(target_link), *force]
            assert "symbolic link" in error_line(args)
    assert elsewhere.read_text() == "not yours" and not (tmp_path / "nowhere.jsonl").exists()


# ---- error lines carry no row text ---------------------------------------------------------------

TRIGGERS = {
    # A trigger quoting the new row in its error: the text must reach neither stderr nor `failures`.
    "postgresql": [
        "CREATE FUNCTION quote_row() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
        "IF NEW.note_id = '12' THEN RAISE EXCEPTION 'bad row %%', NEW.text; END IF; RETURN NEW; END $$",
        "CREATE TRIGGER quote_row BEFORE INSERT ON anonymized_notes FOR EACH ROW EXECUTE FUNCTION quote_row()",
    ],
    "postgresql-errcode": [  # the same under a code whose own text is kept (insufficient_privilege)
        "CREATE FUNCTION quote_row() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
        "IF NEW.note_id = '12' THEN RAISE EXCEPTION 'bad row %%', NEW.text USING ERRCODE = '42501'; END IF; RETURN NEW; END $$",
        "CREATE TRIGGER quote_row BEFORE INSERT ON anonymized_notes FOR EACH ROW EXECUTE FUNCTION quote_row()",
    ],
    "mariadb": [
        "CREATE TRIGGER quote_row BEFORE INSERT ON anonymized_notes FOR EACH ROW BEGIN "
        "DECLARE msg VARCHAR(255); SET msg = CONCAT('bad row ', NEW.text); "
        "IF NEW.note_id = '12' THEN SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = msg; END IF; END",
    ],
    "mariadb-errno": [  # the same under an error number whose own text is kept (no such table)
        "CREATE TRIGGER quote_row BEFORE INSERT ON anonymized_notes FOR EACH ROW BEGIN "
        "DECLARE msg VARCHAR(255); SET msg = CONCAT('Table ', NEW.text); "
        "IF NEW.note_id = '12' THEN SIGNAL SQLSTATE '42S02' SET MYSQL_ERRNO = 1146, MESSAGE_TEXT = msg; END IF; END",
    ],
}


@pytest.mark.parametrize("case", list(TRIGGERS))
def test_a_trigger_error_quoting_the_row_puts_none_of_its_text_in_the_error_line(databases, tmp_path, case):
    source, target, config = setup(databases, tmp_path, case.split("-")[0], "\n[run]\nbatch_size = 2\n")
    Target(target).engine.dispose()
    execute(target, *TRIGGERS[case])
    message = error_line(["run", "--workers", "1", "--config", str(config)])
    assert message.startswith("error: run failed: ")
    # Note 12, released: "Mr [PATIENT] stable. [PATIENT]'s brother visited on [DATE]."
    for word in ("bad row", "stable", "brother", "visited", "PATIENT", "DATE", "Table"):
        assert word not in message, message
    assert query(target, "SELECT status FROM runs") == [("failed",)]
    assert query(target, "SELECT count(*) FROM failures") == [(0,)]


# ---- a run that cannot be marked keeps its own error ---------------------------------------------


def test_write_permission_revoked_mid_run_reports_the_write_error_and_logs_the_unmarked_run(databases, tmp_path, caplog):
    source, target, config = setup(databases, tmp_path, "postgresql", "\n[run]\nbatch_size = 2\n")
    Target(target).engine.dispose()
    schema, role = schema_of(target), f"anon_rw_{uuid.uuid4().hex[:10]}"
    with admin_engine("postgresql").connect() as conn:
        conn.execute(sa.text(f'CREATE ROLE "{role}" LOGIN'))
        databases.roles.append(role)
        conn.execute(sa.text(f'GRANT USAGE ON SCHEMA "{schema}" TO "{role}"'))
        conn.execute(sa.text(f'GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA "{schema}" TO "{role}"'))
        conn.execute(sa.text(f'GRANT USAGE ON ALL SEQUENCES IN SCHEMA "{schema}" TO "{role}"'))
    writer = sa.engine.make_url(target).set(username=role).render_as_string(hide_password=False)
    cfg = load_config(write_config(tmp_path / "writer.toml", source, writer, "\n[run]\nbatch_size = 2\n"))

    def revoke(n: int, total: int) -> None:
        with admin_engine("postgresql").connect() as conn:
            conn.execute(sa.text(f'REVOKE INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA "{schema}" FROM "{role}"'))

    with caplog.at_level(logging.WARNING, logger="anonymizer.target"), pytest.raises(sa.exc.DBAPIError) as info:
        run(cfg, progress=revoke)
    message = str(database_error(info.value, "run failed"))
    assert "InsufficientPrivilege [42501]" in message and "runs" not in message.replace("run failed", "")
    assert any("could not be marked failed" in r.getMessage() for r in caplog.records)
    assert query(target, "SELECT status FROM runs") == [("running",)]
    assert _free(target, within=0), "the lock is released all the same"


def test_a_database_error_during_an_audit_is_one_line_exit_2_not_a_finding(databases, tmp_path):
    source, target, config = setup(databases, tmp_path, "postgresql")
    assert runner.invoke(app, ["run", "--workers", "1", "--config", str(config)]).exit_code == 0
    reader = databases.read_only_role(target)
    with admin_engine("postgresql").connect() as conn:
        conn.execute(sa.text(f'REVOKE SELECT ON "{schema_of(target)}".phi_spans FROM "{sa.engine.make_url(reader).username}"'))
    audit = write_config(tmp_path / "reader.toml", source, reader)
    message = error_line(["audit", "summary", "--config", str(audit)])
    assert message == "error: audit failed: InsufficientPrivilege [42501]: permission denied for table phi_spans"
