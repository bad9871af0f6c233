"""The DataFrame API: a notes table and a patients table in, the SQL target's tables out.

    from anonymizer.spark import anonymize
    result = anonymize(spark.table("emr.notes"), spark.table("emr.patients"), "anonymizer.toml")
    result.results.write.parquet("/lake/deid/results")          # computed once ...
    tables = result.tables(spark.read.parquet("/lake/deid/results"))   # ... then split

The configuration's ``[notes]`` and ``[patients]`` name the columns, as for ``anonymizer run``.
Each patient's notes meet its record in one Python worker: the notes and one row per patient (its
record rows, and the digests the target holds for its notes) are partitioned by patient id and
sorted so that the patient's row comes first, then its notes (a cogroup without a row per group);
the worker cuts the sorted rows into batches of whole patients for the unit of work.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from anonymizer.config import Config, load_config
from anonymizer.record import FIELDS
from anonymizer.spark.udf import DONE, FAILED, RESULT_SCHEMA, SKIPPED, WorkerSpec, anonymize_partition
from anonymizer.target import DUPLICATE_REASON

PATIENT_ROW, NOTE_ROW = 0, 1  # a patient's row sorts before its notes
TABLES = ("anonymized_notes", "phi_spans", "failures", "patient_digests")  # what a run writes, less `runs`


@dataclass(frozen=True)
class Anonymized:
    """The result of :func:`anonymize`, lazily: `results` has one row per source note (its
    columns: anonymizer.spark.udf.RESULT_COLUMNS).  Each use computes it again: write or persist it
    once, then split it with :meth:`tables`."""

    results: DataFrame
    run_id: int | None = None

    def tables(self, results: DataFrame | None = None) -> dict[str, DataFrame]:
        """The SQL target's tables (less their surrogate keys) from `results` (default: this one's)."""
        return tables(self.results if results is None else results, self.run_id)


def anonymize(
    notes: DataFrame,
    patients: DataFrame,
    config: Config | str | Path,
    *,
    held: DataFrame | None = None,
    run_id: int | None = None,
    partitions: int | None = None,
) -> Anonymized:
    """Anonymize every note of `notes` with its patient's record from `patients`, as ``anonymizer
    run`` would with this configuration (a Config or a TOML path).

    The lists are read on the driver (their files, and their tables from the configured source),
    and the pipeline built there once to check the configuration.  `held`: rows (patient_id,
    note_id, source_digest) of notes already anonymized; a note whose source digest is unchanged
    comes back SKIPPED.  `partitions`: how many partitions of patients (default: 4 per core)."""
    from anonymizer.spark.tables import open_source, worker_spec

    config = config if isinstance(config, Config) else load_config(config)
    source = open_source(notes.sparkSession, config) if any(item.table for item in config.lists) else None
    spec = worker_spec(config, source, config.run.batch_size)
    return anonymize_frames(notes, patients, config, spec, held=held, run_id=run_id, partitions=partitions)


def anonymize_frames(
    notes: DataFrame,
    patients: DataFrame,
    config: Config,
    spec: WorkerSpec,
    *,
    held: DataFrame | None = None,
    run_id: int | None = None,
    partitions: int | None = None,
    fold_spaces: bool = False,
) -> Anonymized:
    """:func:`anonymize` with the workers' settings read already."""
    rows, duplicates = patient_rows(notes, patients, config, held=held, partitions=partitions, fold_spaces=fold_spaces)
    return Anonymized(rows.mapInPandas(anonymize_partition(spec), RESULT_SCHEMA).unionByName(duplicates), run_id)


def patient_rows(
    notes: DataFrame, patients: DataFrame, config: Config, *, held: DataFrame | None, partitions: int | None, fold_spaces: bool
) -> tuple[DataFrame, DataFrame]:
    """The rows for :func:`anonymizer.spark.udf.anonymize_partition`, partitioned by patient and
    sorted, each patient's row first; and the failure rows (RESULT_SCHEMA) of note ids that several
    source rows share.  `fold_spaces`: ids that differ only by trailing spaces are one (a
    MySQL/MariaDB target's keys)."""
    parts = partitions or default_partitions(notes.sparkSession)
    n, p = config.notes, config.patients
    notes = notes.select(
        _key(n.id).alias("note_id"), _key(n.patient).alias("patient_id"), F.col(n.text).alias("text"),
        F.col(n.id).alias("_order"), F.col(n.patient).alias("_patient_order"),
    )
    # Source rows sharing a note id become one failure row, never an overwrite (ids only are shuffled).
    key = F.rtrim("note_id") if fold_spaces else F.col("note_id")
    shared = (
        notes.groupBy(key.alias("_key"))
        .agg(F.count(F.lit(1)).alias("sources"), F.min(F.struct("_patient_order", "_order", "note_id", "patient_id")).alias("first"))
        .where("sources > 1")
    )
    duplicates = shared.select(
        "first.note_id", "first.patient_id", F.lit(FAILED).alias("status"), F.lit(None).cast("string").alias("text"),
        F.lit(None).cast("string").alias("source_digest"),
        F.format_string(DUPLICATE_REASON.replace("{}", "%d"), "sources").alias("reason"),
        F.lit(None).cast("array<struct<start: int, end: int, category: string, detectors: string>>").alias("spans"),
        F.lit(None).cast("string").alias("record_digest"), F.lit(False).alias("no_record"), F.col("sources").cast("int"),
    )
    single = notes.withColumn("_key", key).join(F.broadcast(shared.select("_key")), "_key", "left_anti")

    columns = [c for field in FIELDS for c in getattr(p, field)]
    records = (
        patients.where(F.col(p.id).isNotNull())
        .select(_key(p.id).alias("patient_id"), F.struct(*(F.col(c).alias(f"c{i}") for i, c in enumerate(columns))).alias("row"))
        .groupBy("patient_id")
        .agg(F.collect_list("row").alias("record"))
    )
    if held is not None:
        digests = F.map_from_entries(F.collect_list(F.struct("note_id", "source_digest")))
        records = records.join(held.groupBy("patient_id").agg(digests.alias("held")), "patient_id", "full")
    else:
        records = records.withColumn("held", F.lit(None).cast("map<string, string>"))
    order = notes.schema["_order"].dataType
    rows = single.select(
        "patient_id", F.lit(NOTE_ROW).alias("kind"), "_order", "note_id", "text",
        F.lit(None).cast(records.schema["record"].dataType).alias("record"), F.lit(None).cast("map<string, string>").alias("held"),
    ).unionByName(
        records.select(
            "patient_id", F.lit(PATIENT_ROW).alias("kind"), F.lit(None).cast(order).alias("_order"),
            F.lit(None).cast("string").alias("note_id"), F.lit(None).cast(notes.schema["text"].dataType).alias("text"), "record", "held",
        )
    )
    return rows.repartition(parts, "patient_id").sortWithinPartitions("patient_id", "kind", "_order").drop("kind", "_order"), duplicates


def default_partitions(spark: SparkSession) -> int:
    """4 partitions of patients per core Spark offers (or, without a SparkContext, as Spark
    Connect has none, its shuffle partitions)."""
    try:
        return 4 * spark.sparkContext.defaultParallelism
    except Exception:  # noqa: BLE001 - Spark Connect raises its own error class here
        return int(spark.conf.get("spark.sql.shuffle.partitions"))


def _key(column: str) -> Column:
    """An id as the text the single-machine run reads it as (NULL: the empty id)."""
    return F.coalesce(F.col(column).cast("string"), F.lit(""))


def tables(results: DataFrame, run_id: int | None) -> dict[str, DataFrame]:
    """The SQL target's tables (less phi_spans.span_id) from the rows of :func:`anonymize`; skipped
    notes have none (their rows stay as they are)."""
    run = F.lit(run_id).cast("int").alias("run_id")
    done = results.where(F.col("status") == DONE)
    return {
        "anonymized_notes": done.select("note_id", "patient_id", "text", run, "source_digest", run.alias("seen_run")),
        "phi_spans": done.select("note_id", F.explode("spans").alias("s")).select("note_id", "s.*"),
        "failures": results.where(F.col("status") == FAILED).select("note_id", "patient_id", run, "reason"),
        "patient_digests": results.where(F.col("record_digest").isNotNull())
        .select("patient_id", "record_digest", run)
        .dropDuplicates(["patient_id"]),
    }


def written(results: DataFrame) -> DataFrame:
    """The note ids whose rows a run replaces (every one but the skipped)."""
    return results.where(F.col("status") != SKIPPED).select("note_id")
