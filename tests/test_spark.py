"""The Spark engine (anonymizer.spark) in local mode: the same output as the single-machine run,
incremental reruns, failures as rows, every note exactly once after a kill.

One Spark session (local[2], UI off, few shuffle partitions) serves every test.  Without Java or
pyspark these tests skip with a reason; with CI set they fail instead.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import sqlalchemy as sa
from typer.testing import CliRunner

from anonymizer.cli import app
from anonymizer.config import load_config
from anonymizer.run import run as local_run
from tests.conftest import NOTES, PATIENTS, create_hospital
from tests.servers import anonymized, check_every_note_once, execute, query, reference_run, write_config
from tests.test_crash import hospital as crash_hospital

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "sample_db"
runner = CliRunner()


def missing_spark() -> str | None:
    """Why Spark cannot run here (one line), or None."""
    if shutil.which("java") is None:
        return "no java on PATH (Spark needs Java 17)"
    if importlib.util.find_spec("pyspark") is None:
        return "pyspark not installed; pip install -e '.[spark]'"
    return None


@pytest.fixture(scope="session")
def spark():
    """The one Spark session of the test run (skipped, or under CI failed, without Java or pyspark)."""
    reason = missing_spark()
    if reason is not None:
        if os.environ.get("CI"):
            pytest.fail(f"CI is set but Spark cannot run: {reason}", pytrace=False)
        pytest.skip(reason)
    from pyspark.sql import SparkSession

    from anonymizer.spark.tables import DEBIAN_JARS

    builder = (
        SparkSession.builder.master("local[2]").appName("anonymizer-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.pyspark.python", sys.executable)
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
    )
    jars = [jar for jar in DEBIAN_JARS if Path(jar).is_file()]
    if jars:
        builder = builder.config("spark.jars", ",".join(jars))
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


def cli(*args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.stdout, result.stderr


def sample_config(path: Path, target: str) -> Path:
    """The bundled sample configuration, its paths made absolute, writing to `target`."""
    text = (SAMPLE / "anonymizer.toml").read_text()
    text = text.replace('"sqlite:///hospital.db"', f'"sqlite:///{SAMPLE / "hospital.db"}"')
    text = text.replace('file = "lists/', f'file = "{SAMPLE / "lists"}/')
    text = text.replace('"sqlite:///../anonymized.db"', f'"{target}"')
    path.write_text(text)
    return path


SPANS = 'SELECT note_id, start, "end", category, detectors FROM phi_spans ORDER BY 1, 2, 3, 4, 5'


def test_on_the_sample_database_spark_writes_exactly_what_one_machine_writes(spark, tmp_path):
    local, distributed = f"sqlite:///{tmp_path / 'local.db'}", f"sqlite:///{tmp_path / 'spark.db'}"
    local_run(load_config(sample_config(tmp_path / "local.toml", local)), workers=2)
    config = str(sample_config(tmp_path / "spark.toml", distributed))

    code, out, err = cli("run", "--engine", "spark", "--master", "local[2]", "--config", config, "--json")
    assert code == 0, err
    summary = json.loads(out)
    notes = query(local, "SELECT count(*) FROM anonymized_notes")[0][0]
    assert (summary["notes"], summary["done"], summary["failed"]) == (notes, notes, 0)
    assert anonymized(distributed) == anonymized(local)
    assert query(distributed, SPANS) == query(local, SPANS)
    assert query(distributed, "SELECT note_id, source_digest FROM anonymized_notes ORDER BY 1") == query(
        local, "SELECT note_id, source_digest FROM anonymized_notes ORDER BY 1"
    )
    assert query(distributed, "SELECT * FROM patient_digests ORDER BY 1") == query(local, "SELECT * FROM patient_digests ORDER BY 1")
    assert query(distributed, "SELECT count(*) FROM failures") == [(0,)]

    code, out, err = cli("audit", "summary", "--json", "--config", config)  # the audit reads it unchanged
    assert code == 0, err
    [report] = json.loads(out)
    assert (report["notes_done"], report["status"]) == (notes, "done")

    code, out, err = cli("run", "--engine", "spark", "--config", config, "--json")  # unchanged: every note skipped
    assert code == 0, err
    assert (json.loads(out)["skipped"], json.loads(out)["done"]) == (notes, 0)
    check_every_note_once(f"sqlite:///{SAMPLE / 'hospital.db'}", distributed)


def test_the_dataframe_api_returns_the_target_tables_with_failures_as_rows(spark, tmp_path):
    from anonymizer.spark import anonymize
    from anonymizer.target import Target

    (tmp_path / "ref").mkdir()
    reference = reference_run(tmp_path / "ref", create_hospital)
    config = write_config(tmp_path / "anonymizer.toml", f"sqlite:///{tmp_path / 'ref' / 'source.db'}", "sqlite:///unused.db")
    shared = dict(note_id=12, patient_id=1, body="a second row with note id 12")  # two source rows, one id
    rows = [(n["note_id"], n["patient_id"], n["body"]) for n in [*NOTES, shared]]
    notes = spark.createDataFrame(rows, "note_id long, patient_id long, body string")
    columns = ["patient_id", "given_name", "family_name", "next_of_kin", "nric", "phone", "date_of_birth", "address"]
    patients = spark.createDataFrame([tuple(p[c] for c in columns) for p in PATIENTS], ", ".join(
        f"{c} {'long' if c == 'patient_id' else 'date' if c == 'date_of_birth' else 'string'}" for c in columns))

    result = anonymize(notes, patients, config, run_id=7)
    tables = result.tables(result.results.cache())
    texts = dict(tables["anonymized_notes"].select("note_id", "text").collect())
    assert texts == {k: v for k, v in reference.items() if k != "12"}
    [failure] = tables["failures"].collect()
    assert (failure.note_id, failure.reason, failure.run_id) == ("12", "DuplicateNoteId: 2 source rows share this note id", 7)
    target = Target(f"sqlite:///{tmp_path / 'columns.db'}")  # the SQL target's columns, less the surrogate span_id
    for name, frame in tables.items():
        table = getattr(target, {"anonymized_notes": "notes", "phi_spans": "spans"}.get(name, name))
        assert frame.columns == [c.name for c in table.columns if c.name != "span_id"], name
    target.engine.dispose()

    slow = dataclasses.replace(load_config(config), detectors=dataclasses.replace(load_config(config).detectors, note_timeout=1e-7))
    rows = anonymize(notes, patients, slow).results.collect()  # no note fits the budget: failure rows, none lost
    assert {r.note_id for r in rows} == {str(n["note_id"]) for n in NOTES}
    assert {r.status for r in rows} == {"failed"} and all(r.reason.startswith(("NoteTimeout", "DuplicateNoteId")) for r in rows)


@pytest.mark.parametrize(("source_kind", "target_kind"), [("postgresql", "parquet"), ("mariadb", "postgresql")])
def test_a_jdbc_source_read_by_patient_partitions_and_reruns_redo_only_what_changed(spark, databases, tmp_path, source_kind, target_kind):
    from anonymizer.spark import read_target
    from anonymizer.spark import run as spark_run

    (tmp_path / "ref").mkdir()
    reference = reference_run(tmp_path / "ref", create_hospital)
    source = databases.url(source_kind, "src")
    create_hospital(source)
    if source_kind == "mariadb":  # text patient ids: partitions by the database's hash of the id
        execute(source, "ALTER TABLE notes MODIFY patient_id VARCHAR(20)", "ALTER TABLE patients MODIFY patient_id VARCHAR(20)")
    target = f"parquet:{tmp_path / 'lake'}" if target_kind == "parquet" else databases.url(target_kind, "dst")
    config = load_config(write_config(tmp_path / "anonymizer.toml", source, target))

    def texts() -> dict[str, str]:
        if target_kind == "parquet":
            return dict(read_target(spark, target)["anonymized_notes"].select("note_id", "text").collect())
        check_every_note_once(source, target)
        return anonymized(target)

    first = spark_run(config, spark=spark, partitions=3)
    assert (first.notes, first.done, first.skipped, first.failed) == (len(NOTES), len(NOTES), 0, 0)
    assert first.no_record == 1  # note 13's patient has no row
    assert texts() == reference

    execute(source, "UPDATE notes SET body = 'Ravi stable' WHERE note_id = 14")
    second = spark_run(config, spark=spark, partitions=3)
    assert (second.done, second.skipped, second.failed) == (1, len(NOTES) - 1, 0)
    assert texts() == {**reference, "14": "[PATIENT] stable"}
    if target_kind == "parquet":
        tables = read_target(spark, target)
        assert [tuple(r) for r in tables["runs"].select("run_id", "status", "notes_done", "notes_skipped").orderBy("run_id").collect()] == [
            (1, "done", len(NOTES), 0), (2, "done", 1, len(NOTES) - 1)]
        assert sorted(p.name for p in (tmp_path / "lake").iterdir()) == ["v1", "v2"]
        assert tables["failures"].count() == 0 and tables["anonymized_notes"].count() == len(NOTES)
    else:
        assert query(target, "SELECT status, notes_done, notes_skipped FROM runs ORDER BY run_id") == [
            ("done", len(NOTES), 0), ("done", 1, len(NOTES) - 1)]


def count_rows(url: str) -> int:
    try:
        return query(url, "SELECT count(*) FROM anonymized_notes")[0][0]
    except sa.exc.DBAPIError:
        return 0  # not created yet


@pytest.mark.parametrize("target_kind", ["sqlite", "parquet"])
def test_a_spark_job_killed_mid_way_and_run_again_ends_with_every_note_exactly_once(spark, tmp_path, target_kind):
    import random

    from anonymizer.spark import read_target
    from anonymizer.spark import run as spark_run

    people, notes = crash_hospital(random.Random(20), notes=3000)
    source = f"sqlite:///{tmp_path / 'source.db'}"
    create_hospital(source, patients=people, notes=notes)
    lake = tmp_path / "lake"
    target = f"parquet:{lake}" if target_kind == "parquet" else f"sqlite:///{tmp_path / 'target.db'}"
    config = write_config(tmp_path / "anonymizer.toml", source, target)
    command = [sys.executable, "-m", "anonymizer", "run", "--engine", "spark", "--master", "local[2]", "--batch-size", "20",
               "--config", str(config)]

    def mid_way() -> bool:  # the job has started writing and not finished
        if target_kind == "parquet":
            return (lake / "v1" / "_results").is_dir() and not (lake / "v1" / "_COMMITTED").exists()
        return 0 < count_rows(target) < len(notes)

    job = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 300
        while not mid_way() and job.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        os.killpg(job.pid, signal.SIGKILL)  # the driver, its JVM and the Python workers at once
        job.wait()
    assert job.returncode == -signal.SIGKILL and mid_way(), "the kill must interrupt the job"

    again = spark_run(load_config(config), spark=spark)
    assert again.done + again.skipped + again.failed == len(notes)
    if target_kind == "parquet":
        tables = read_target(spark, target)
        ids = [r.note_id for r in tables["anonymized_notes"].select("note_id").collect()]
        assert sorted(ids) == sorted(str(n["note_id"]) for n in notes) and tables["failures"].count() == 0
        assert sorted(p.name for p in lake.iterdir()) == ["v1"] and again.done == len(notes)  # the killed version discarded
    else:
        check_every_note_once(source, target)
        assert again.skipped > 0  # what the killed job wrote stays
        statuses = [s for (s,) in query(target, "SELECT status FROM runs ORDER BY run_id")]
        assert statuses == ["running", "done"]  # the killed run is left 'running', as on one machine


# Installed in every Python process of the job through PYTHONPATH: the Python worker running the
# first attempt of partition 1 kills itself (SIGKILL, as the kernel's OOM killer would) right after
# its second batch is committed to the target, so the kill lands mid-task, after some of the task's
# rows are written, on every machine however fast.  Killing a busy-looking worker from outside
# raced with its task's end: a worker killed between tasks is replaced without a task failing.
KILL_MID_TASK = """
import os, signal

def _install():
    try:
        from pyspark import TaskContext
        from anonymizer.spark import udf
    except ImportError:
        return
    write_rows, written = udf._write_rows, []

    def write_then_die(*args, **kwargs):
        write_rows(*args, **kwargs)
        task = TaskContext.get()
        if task is not None and task.partitionId() == 1 and task.attemptNumber() == 0:
            written.append(1)
            if len(written) == 2:
                os.kill(os.getpid(), signal.SIGKILL)

    udf._write_rows = write_then_die

_install()
"""


def test_a_python_worker_killed_mid_task_is_retried_by_spark_and_writes_nothing_twice(tmp_path):
    import random

    people, notes = crash_hospital(random.Random(21), notes=3000)
    source, target = f"sqlite:///{tmp_path / 'source.db'}", f"sqlite:///{tmp_path / 'target.db'}"
    create_hospital(source, patients=people, notes=notes)
    config = write_config(tmp_path / "anonymizer.toml", source, target)
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(KILL_MID_TASK)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(hook), os.environ.get("PYTHONPATH")]))}
    # local[2,4]: two cores, a task tried up to four times (a cluster's default; plain local mode tries once)
    command = [sys.executable, "-m", "anonymizer", "run", "--engine", "spark", "--master", "local[2,4]", "--batch-size", "20",
               "--config", str(config), "--json"]
    job = subprocess.run(command, capture_output=True, text=True, env=env, timeout=600)
    assert job.returncode == 0, job.stderr[-2000:]
    assert "Lost task 1.0" in job.stderr  # Spark saw partition 1's first attempt fail, and ran it again
    assert json.loads(job.stdout)["done"] + json.loads(job.stdout)["skipped"] == len(notes)
    check_every_note_once(source, target)
    assert query(target, "SELECT status FROM runs") == [("done",)]


def test_spark_options_are_refused_with_one_line(hospital):
    code, _, err = cli("run", "--engine", "spark", "--workers", "2", "--config", str(hospital))
    assert code == 2 and err.strip() == "error: --workers: not with --engine spark (its master sets the cores)"
    code, _, err = cli("run", "--master", "local[2]", "--config", str(hospital))
    assert code == 2 and err.strip() == "error: --master: only with --engine spark"
    hospital.write_text(hospital.read_text().replace('url = "sqlite:///', 'url = "parquet:', 1))
    code, _, err = cli("run", "--config", str(hospital))
    assert code == 2 and err.strip() == "error: source.url: parquet tables are read and written by `anonymizer run --engine spark` only"
    assert load_config(hospital).source.url == f"parquet:{hospital.parent / 'hospital.db'}"  # relative to the file, as SQLite's


def test_the_pipeline_is_built_once_per_python_worker_and_must_match_the_drivers(spark, hospital, monkeypatch):
    from pyspark import cloudpickle

    from anonymizer.source import Source
    from anonymizer.spark import udf
    from anonymizer.spark.tables import worker_spec

    config = load_config(hospital)
    source = Source(config)
    spec = worker_spec(config, source, 500)
    source.engine.dispose()

    def probe(frames):  # in a Python worker: which process, which pipeline object
        import os

        import pandas as pd

        from anonymizer.spark.udf import worker_pipeline

        for frame in frames:
            yield pd.DataFrame({"pid": [os.getpid()] * len(frame), "pipeline": [id(worker_pipeline(spec))] * len(frame)})

    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the workers cannot import this test module
    try:
        seen = spark.range(32).repartition(16).mapInPandas(probe, "pid long, pipeline long").distinct().collect()
    finally:
        cloudpickle.unregister_pickle_by_value(sys.modules[__name__])
    per_worker = {}
    for row in seen:
        per_worker.setdefault(row.pid, set()).add(row.pipeline)
    assert per_worker and all(len(ids) == 1 for ids in per_worker.values())  # 16 tasks, one pipeline per worker

    monkeypatch.setattr(udf, "_pipelines", {})
    assert udf.worker_pipeline(spec) is udf.worker_pipeline(spec)
    with pytest.raises(RuntimeError, match="differs from the driver's"):
        udf.worker_pipeline(dataclasses.replace(spec, digest="0" * 64))


def test_jdbc_options_come_from_the_sqlalchemy_url(spark):
    from anonymizer.settings import ConfigError
    from anonymizer.spark.tables import jdbc_options

    url = sa.engine.make_url("postgresql+psycopg://deid:s3cret@db.example:6543/emr?options=-csearch_path%3Dreporting&application_name=x")
    properties = {"driver": "org.postgresql.Driver", "user": "deid", "password": "s3cret", "options": "-csearch_path=reporting",
                  "ApplicationName": "x"}
    assert jdbc_options(url, "source.url") == ("jdbc:postgresql://db.example:6543/emr", properties)
    url = sa.engine.make_url("mysql+pymysql://root@127.0.0.1/test?charset=utf8mb4")
    assert jdbc_options(url, "source.url") == ("jdbc:mysql://127.0.0.1:3306/test", {"driver": "org.mariadb.jdbc.Driver", "user": "root"})
    with pytest.raises(ConfigError, match="^source.url: Spark reads PostgreSQL, MariaDB, MySQL or SQLite databases, not mssql$"):
        jdbc_options(sa.engine.make_url("mssql+pyodbc://u@h/db"), "source.url")
