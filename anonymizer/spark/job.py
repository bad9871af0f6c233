"""``anonymizer run --engine spark``: the configured source into the target, on a Spark cluster.

The driver checks the configuration and the source, reads the lists, builds the pipeline once
(for its digest), and reads the target's source digests; the executors do the rest.  Notes whose
source digest the target holds are skipped (incremental, as the single-machine run), and a job
killed at any point and run again ends with every note exactly once in the notes or the failures:

- a SQL target (the single-machine run's tables, so ``anonymizer audit`` reads it unchanged): each
  executor writes its notes in batches, each batch one transaction that replaces the rows of its
  notes (:meth:`anonymizer.target.Target.write`): an idempotent overwrite, so a task Spark retries
  or a rerun writes the same rows again instead of adding to them;
- a Parquet or Delta target: the run stages its results and writes a complete new version of the
  tables, then commits it atomically (:class:`anonymizer.spark.tables.LakeTarget`).
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import sys
import time
from collections import Counter

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from anonymizer.config import Config, lakehouse
from anonymizer.run import _check_id_lengths
from anonymizer.spark.frames import TABLES, anonymize_frames, default_partitions, patient_rows, tables, written
from anonymizer.spark.tables import LakeTarget, SqlSource, local_jars, open_source, read_sql, worker_spec
from anonymizer.spark.udf import RESULT_SCHEMA, SKIPPED, TALLY_SCHEMA, anonymize_partition, tally, write_partition
from anonymizer.target import Target
from anonymizer.worker import RunSummary

log = logging.getLogger(__name__)

RUNS_SCHEMA = (
    "run_id int, kind string, started_at timestamp_ntz, finished_at timestamp_ntz, status string, notes_done int, "
    "notes_skipped int, notes_failed int, config_digest string, patients string"
)


def session(config: Config, master: str | None = None) -> SparkSession:
    """The Spark session of a run: the one spark-submit (or a notebook) made, else a new one on
    `master` with the JDBC drivers' jars; a local one runs its Python workers on this interpreter."""
    builder = SparkSession.builder.appName("anonymizer")
    if master:
        builder = builder.master(master)
    jars = local_jars(config)
    if jars:
        builder = builder.config("spark.jars", ",".join(jars))
    under_submit = "PYSPARK_GATEWAY_PORT" in os.environ  # spark-submit started this process: its settings stand
    if (master or "local").startswith("local") and not under_submit and not os.environ.get("PYSPARK_PYTHON"):
        builder = builder.config("spark.pyspark.python", sys.executable)
    return builder.config("spark.sql.execution.arrow.pyspark.enabled", "true").getOrCreate()


def run(
    config: Config,
    *,
    spark: SparkSession | None = None,
    master: str | None = None,
    batch_size: int | None = None,
    partitions: int | None = None,
) -> RunSummary:
    """Anonymize the configured source into the target with Spark (`spark`, or a session on `master`)."""
    started = time.perf_counter()
    spark = spark or session(config, master)
    source = open_source(spark, config)
    try:
        spec = worker_spec(config, source, batch_size or config.run.batch_size)
        parts = partitions or config.spark.partitions or default_partitions(spark)
        notes, patients = source.notes(parts), source.patients(parts)
        if lakehouse(config.target.url):
            summary = _run_lake(spark, config, spec, notes, patients, parts)
        else:
            summary = _run_sql(spark, config, spec, source, notes, patients, parts)
    finally:
        if isinstance(source, SqlSource):
            source.source.engine.dispose()
    summary.seconds = time.perf_counter() - started
    return summary


def _run_sql(spark, config, spec, source, notes, patients, parts) -> RunSummary:
    target = Target(config.target.url)
    if isinstance(source, SqlSource):
        _check_id_lengths(source.source, target)
    summary = RunSummary(run_id=target.start_run("run", spec.digest))
    try:
        columns = [target.notes.c.patient_id, target.notes.c.note_id, target.notes.c.source_digest]
        held = read_sql(spark, target.engine, target.notes, columns, target.notes.c.patient_id, parts, "target.url")
        mysql = target.engine.dialect.name in ("mysql", "mariadb")
        rows, duplicates = patient_rows(notes, patients, config, held=held, partitions=parts, fold_spaces=mysql)
        url, run_id = config.target.url, summary.run_id
        tallies = rows.mapInPandas(anonymize_partition(spec, url, run_id), TALLY_SCHEMA)
        _count(summary, tallies.unionByName(duplicates.mapInPandas(write_partition(url, run_id, spec.batch_size), TALLY_SCHEMA)))
    except BaseException as exc:  # the run's row says how it ended; a kill leaves it 'running'
        ended = "interrupted" if isinstance(exc, KeyboardInterrupt) else "failed"
        target.finish_run(summary.run_id, ended, summary.done, summary.skipped, summary.failed)
        raise
    target.finish_run(summary.run_id, "done", summary.done, summary.skipped, summary.failed)
    return summary


def _run_lake(spark, config, spec, notes, patients, parts) -> RunSummary:
    target = LakeTarget(spark, config.target.url)
    target.discard_unfinished()
    current = target.current()
    runs = target.read("runs", current) if current is not None else spark.createDataFrame([], RUNS_SCHEMA)
    run_id = (runs.agg(F.max("run_id")).first()[0] or 0) + 1
    version = max(run_id, (current or 0) + 1)
    started_at = _now()
    summary = RunSummary(run_id=run_id)
    held = target.read("anonymized_notes", current).select("patient_id", "note_id", "source_digest") if current is not None else None
    result = anonymize_frames(notes, patients, config, spec, held=held, run_id=run_id, partitions=parts)
    staged = target.folder(version, "_results")
    result.results.write.mode("overwrite").parquet(staged)  # the work, done once
    results = spark.read.schema(RESULT_SCHEMA).parquet(staged)
    new = tables(results, run_id)
    for name, frame in new.items():
        if current is not None:
            old = target.read(name, current)
            kept = old.join(written(results), "note_id", "left_anti") if name != "patient_digests" else old.join(
                frame.select("patient_id"), "patient_id", "left_anti"
            )
            frame = kept.unionByName(frame)
        target.write(frame, version, name)
    _count(summary, results.mapInPandas(tally, TALLY_SCHEMA))
    row = (run_id, "run", started_at, _now(), "done", summary.done, summary.skipped, summary.failed, spec.digest, None)
    target.write(runs.unionByName(spark.createDataFrame([row], RUNS_SCHEMA)), version, "runs")
    target.commit(version)
    return summary


def read_target(spark: SparkSession, url: str) -> dict[str, DataFrame]:
    """The tables of a Parquet or Delta target (``parquet:PATH``) as its last committed run left them."""
    target = LakeTarget(spark, url)
    return {name: target.read(name) for name in (*TABLES, "runs")}


def _now() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)


def _count(summary: RunSummary, tallies: DataFrame) -> None:
    """Add the notes' tallies (computing them: for a SQL target, that writes the notes) to the summary."""
    counts = Counter({what: n for what, n in tallies.groupBy("what").agg(F.sum("count")).collect()})
    summary.notes += counts["notes"]
    summary.done += counts["status:done"]
    summary.skipped += counts[f"status:{SKIPPED}"]
    summary.failed += counts["status:failed"]
    summary.no_record += counts["no_record"]
    summary.spans.update({what.split(":", 1)[1]: n for what, n in counts.items() if what.startswith("category:")})
