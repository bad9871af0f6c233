"""The operator's side: paths in the configuration, a source schema, the CLI in a batch job."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import sqlalchemy as sa

from anonymizer.config import load_config
from anonymizer.source import Source
from tests.conftest import CONFIG, create_hospital

ROOT = Path(__file__).resolve().parents[1]


def cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "anonymizer", *args], capture_output=True, text=True, cwd=cwd)


def relative_config(directory: Path) -> Path:
    """The test hospital beside a configuration that names everything by relative paths."""
    directory.mkdir(parents=True)
    create_hospital(f"sqlite:///{directory / 'hospital.db'}")
    (directory / "lists").mkdir()
    (directory / "lists" / "places.txt").write_text("Tampines\n")
    text = CONFIG.replace("sqlite:///{source}", "sqlite:///hospital.db").replace("sqlite:///{target}", "sqlite:///out/target.db")
    text += '\n[[lists]]\ncategory = "LOCATION"\nfile = "lists/places.txt"\n'
    (directory / "out").mkdir()
    config = directory / "anonymizer.toml"
    config.write_text(text)
    return config


def test_relative_paths_are_taken_from_the_configuration_files_directory(tmp_path, monkeypatch):
    config = relative_config(tmp_path / "job")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    loaded = load_config(config)
    assert loaded.source.url == f"sqlite:///{tmp_path / 'job' / 'hospital.db'}"
    assert loaded.target.url == f"sqlite:///{tmp_path / 'job' / 'out' / 'target.db'}"
    assert loaded.lists[-1].file == str(tmp_path / "job" / "lists" / "places.txt")
    result = cli("run", "--config", str(config), "-w", "1", cwd=elsewhere)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "job" / "out" / "target.db").is_file()
    assert list(elsewhere.iterdir()) == [], "nothing may be created in the directory run from"


def test_a_linked_configuration_means_what_it_means_where_it_lives(tmp_path, monkeypatch):
    config = relative_config(tmp_path / "job")
    link = tmp_path / "anonymizer.toml"
    link.symlink_to(config)
    monkeypatch.chdir(tmp_path)
    assert load_config().source.url == f"sqlite:///{tmp_path / 'job' / 'hospital.db'}"


def test_the_bundled_configuration_reads_the_sample_and_writes_beside_itself_from_the_repository_root(monkeypatch):
    monkeypatch.chdir(ROOT)
    monkeypatch.delenv("ANONYMIZER_CONFIG", raising=False)
    config = load_config()  # ./anonymizer.toml, a link to sample_db/anonymizer.toml
    assert config.source.url == f"sqlite:///{ROOT / 'sample_db' / 'hospital.db'}"
    assert Path(config.target.url.removeprefix("sqlite:///")).resolve() == ROOT / "anonymized.db"
    assert all(Path(item.file).is_file() for item in config.lists if item.file)


def test_a_sqlite_source_is_opened_read_only(hospital):
    source = Source(load_config(hospital))
    with source.engine.connect() as conn, pytest.raises(sa.exc.OperationalError, match="readonly"):
        conn.exec_driver_sql("DELETE FROM notes")


@pytest.mark.parametrize("kind", ["postgresql", "mariadb"])
def test_a_source_schema_is_used_for_reflection_and_every_query(databases, tmp_path, kind):
    """The notes live in a schema (PostgreSQL) or another database (MariaDB) than the URL's own."""
    from tests.servers import check_every_note_once, schema_of, write_config

    notes_home, connected = databases.url(kind, "emr"), databases.url(kind, "login")
    create_hospital(notes_home)
    target = databases.url("sqlite", "dst")
    config = write_config(tmp_path / "anonymizer.toml", connected, target)
    without = cli("run", "--config", str(config), "-w", "1")
    assert without.returncode == 2 and "table 'patients' not found in the source database" in without.stderr
    config.write_text(config.read_text().replace("[patients]", f'schema = "{schema_of(notes_home)}"\n\n[patients]', 1))
    result = cli("run", "--config", str(config), "-w", "1")
    assert result.returncode == 0, result.stderr
    check_every_note_once(notes_home, target)
    again = cli("reprocess", "--patient", "1", "--config", str(config), "-w", "1")
    assert again.returncode == 0, again.stderr
    leaks = cli("audit", "leaks", "--json", "--config", str(config))  # records read from the schema too
    assert leaks.returncode == 0 and json.loads(leaks.stdout) == [], leaks.stderr
    note = cli("audit", "note", "10", "--config", str(config))
    assert note.returncode == 0 and "MARISETTE" in note.stdout


def test_reprocess_of_an_unknown_patient_exits_2_and_records_no_run(hospital):
    from tests.servers import query

    assert cli("run", "-c", str(hospital), "-w", "1").returncode == 0
    result = cli("reprocess", "--patient", "99999", "--patient", "1", "--patient", "3", "-c", str(hospital))
    assert result.returncode == 2
    assert result.stderr == "error: 1 of the 3 given patient ids have neither a note nor a record in the source\n"
    target = load_config(hospital).target.url
    assert query(target, "SELECT run_id, kind FROM runs") == [(1, "run")]
    # Patient 3 has notes but no record; '01' is patient 1 of an integer column: both known.
    assert cli("reprocess", "--patient", "3", "--patient", "01", "-c", str(hospital), "-w", "1").returncode == 0


# ---- the CLI in a batch job ----------------------------------------------------------------------

STAMP = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ"


def test_a_batch_job_gets_timestamped_progress_lines_and_a_json_summary(hospital, tmp_path):
    import re

    log = tmp_path / "logs" / "job.log"
    result = cli("run", "-c", str(hospital), "-w", "1", "--batch-size", "1", "--progress-interval", "0",
                 "--json", "-v", "--log-file", str(log))
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)  # stdout is the summary alone
    assert summary["run_id"] == 1 and summary["notes"] == 5 and summary["done"] == 5 and summary["kind"] == "run"
    progress = [line for line in result.stderr.splitlines() if re.match(rf"{STAMP} run", line)]
    assert progress and all(
        re.fullmatch(rf"{STAMP} run( 1)?: [\d,]+ of 5 notes(, [\d,]+ notes/s)?(, finished)?", line) for line in progress
    ), result.stderr
    assert len(progress) >= 2 and progress[-1][21:].startswith("run 1: 5 of 5 notes") and progress[-1].endswith(", finished")
    assert all(re.match(STAMP, line) for line in result.stderr.splitlines()), "every log line carries its time"
    logged = log.read_text()
    assert "run 1: 5 of 5 notes" in logged and all(re.match(STAMP, line) for line in logged.splitlines())
    for text in ("MARISETTE", "Marisette", "S1234567D", "vomiting"):  # never note text or a record
        assert text not in result.stderr and text not in logged and text not in result.stdout


def test_global_options_are_accepted_after_the_subcommand_and_version_is_printed(hospital, tmp_path):
    log = tmp_path / "after.log"
    result = cli("run", "-c", str(hospital), "-w", "1", "--log-file", str(log), "--verbose")
    assert result.returncode == 0, result.stderr
    assert "run 1: 5 of 5 notes" in log.read_text()
    failed = cli("audit", "leaks", "-c", str(hospital.parent / "missing.toml"), "--log-file", str(log))
    assert failed.returncode == 2 and failed.stderr.count("\n") == 1
    assert log.read_text().splitlines()[-1].endswith(f"error: configuration file not found: {hospital.parent / 'missing.toml'}")
    version = cli("--version")
    assert version.returncode == 0 and version.stdout.startswith("anonymizer ") and version.stdout.strip() != "anonymizer"


def test_reprocess_prints_a_json_summary(hospital):
    assert cli("run", "-c", str(hospital), "-w", "1").returncode == 0
    result = cli("reprocess", "--patient", "1", "-c", str(hospital), "-w", "1", "--json")
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["kind"] == "reprocess" and summary["run_id"] == 2 and summary["done"] == 2


def test_the_library_never_configures_logging():
    for path in (ROOT / "anonymizer").rglob("*.py"):
        if path.name != "cli.py":
            text = path.read_text()
            assert "basicConfig" not in text and "addHandler" not in text, path


# ---- PHI printed only where a flag asks ---------------------------------------------------------


def annotated(tmp_path: Path) -> Path:
    """A tiny PhysioNet-format corpus with a phrase no detector finds ("the", marked a place)."""
    from tests.test_corpora import write_physionet

    folder = tmp_path / "corpus"
    write_physionet(folder)
    with (folder / "id.text").open("a") as f:
        f.write("START_OF_RECORD=3||||2||||\nthe ward is quiet\n||||END_OF_RECORD\n")
    with (folder / "id-phi.phrase").open("a") as f:
        f.write("3 2 0 3 Location the\n")
    return folder


def test_evaluate_prints_missed_phrases_only_when_asked(tmp_path):
    folder = annotated(tmp_path)
    quiet = cli("evaluate", str(folder))
    assert quiet.returncode == 0, quiet.stderr
    assert "missed phrases (" not in quiet.stdout and "--show-missed" in quiet.stdout
    shown = cli("evaluate", str(folder), "--show-missed")
    assert shown.returncode == 0 and "missed phrases (" in shown.stdout and "'the'" in shown.stdout


def test_train_prints_a_short_summary_and_the_card_only_with_json(tmp_path):
    folder = annotated(tmp_path)
    result = cli("train", str(folder), "--out", str(tmp_path / "m.json.gz"))
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("model written to ") and len(result.stdout.splitlines()) <= 4
    card = cli("train", str(folder), "--out", str(tmp_path / "n.json.gz"), "--json")
    assert card.returncode == 0 and json.loads(card.stdout)["corpora"][0]["notes"] == 4


def test_audit_leaks_json_is_an_array_empty_when_clean(hospital):
    assert cli("run", "-c", str(hospital), "-w", "1").returncode == 0
    clean = cli("audit", "leaks", "--json", "-c", str(hospital))
    assert clean.returncode == 0 and json.loads(clean.stdout) == []
    target = load_config(hospital).target.url
    from tests.servers import execute

    execute(target, "UPDATE anonymized_notes SET text = 'Marisete called' WHERE note_id = '11'")
    found = cli("audit", "leaks", "--json", "-c", str(hospital))
    assert found.returncode == 1
    findings = json.loads(found.stdout)
    assert [f["field"] for f in findings] == ["name"] and "value" not in findings[0]


# ---- a pinned install -----------------------------------------------------------------------------


def test_constraints_pin_every_dependency_and_ci_runs_the_readmes_test_command():
    import re
    import tomllib

    pins = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        if line and not line.startswith("#"):
            name, _, version = line.partition("==")
            assert re.fullmatch(r"[a-z0-9-]+", name) and re.fullmatch(r"[\w.+-]+", version), line
            pins[name] = version
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = ("test", "postgres", "mysql", "spark")
    wanted = project["dependencies"] + [r for extra in extras for r in project["optional-dependencies"][extra]]
    for requirement in wanted:
        name = re.split(r"[\[<>=~! ]", requirement, maxsplit=1)[0].lower().replace("_", "-")
        assert name in pins, f"{name} is not pinned in constraints.txt"
    ci = (ROOT / ".ci" / "run").read_text().strip().splitlines()[-1]
    readme = (ROOT / "README.md").read_text()
    assert "-c constraints.txt" in ci and f"```sh\n{ci}\n```" in readme
    assert "pip install -c constraints.txt . && anonymizer run" in readme


def test_other_libraries_warnings_reach_stderr_only_with_verbose_and_always_the_log_file(tmp_path, capsys):
    import logging

    from anonymizer.cli import configure_logging, remove_log_handlers

    log = tmp_path / "job.log"
    try:
        for verbose in (False, True):
            configure_logging(verbose, log)
            logging.getLogger("psycopg").warning("pipeline aborted %s", verbose)
            logging.getLogger("anonymizer.source").warning("ours %s", verbose)
    finally:
        remove_log_handlers()
    err = capsys.readouterr().err
    assert "pipeline aborted False" not in err and "pipeline aborted True" in err and "ours False" in err
    assert all(f"{what} {v}" in log.read_text() for what in ("pipeline aborted", "ours") for v in (False, True))


def test_a_terminal_gets_the_progress_bar_not_progress_lines(hospital):
    import os
    import re

    result = subprocess.run(
        [sys.executable, "-m", "anonymizer", "run", "-c", str(hospital), "-w", "1", "--progress-interval", "0"],
        capture_output=True,
        text=True,
        env={**os.environ, "TTY_COMPATIBLE": "1"},
    )
    assert result.returncode == 0, result.stderr
    assert not re.search(rf"{STAMP} run", result.stderr)
