"""Where the Spark engine reads and writes: source tables as DataFrames, and the lakehouse target.

Sources: PostgreSQL and MariaDB/MySQL through Spark's JDBC reader, partitioned by patient id (a
numeric id by ranges, any other by a hash the database computes); a SQLite file, which only the
driver's machine sees, read by the driver; Parquet or Delta folders (``parquet:PATH``, each table
``PATH/<table>``) and tables of Spark's catalog (``catalog:DATABASE``).  The source is checked as
the single-machine run checks it (tables, columns), with the same one-line errors.

The lakehouse target (``parquet:PATH`` or ``delta:PATH``): each run writes a complete new version
of the SQL target's tables in ``PATH/v<N>/`` (rows of unchanged notes carried over) and makes it
current by creating ``PATH/v<N>/_COMMITTED`` after its last table, an atomic step on every file
system Spark writes to.  A run killed before that leaves the previous version current; the next
run deletes the unfinished one.  One run at a time writes a target.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any, Sequence

import pandas as pd
import sqlalchemy as sa
from pyspark.errors import AnalysisException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T

from anonymizer.config import Config, ListConfig, lakehouse
from anonymizer.pipeline import build_pipeline
from anonymizer.record import FIELDS
from anonymizer.settings import ConfigError
from anonymizer.source import Source, _text
from anonymizer.spark.udf import WorkerSpec
from anonymizer.worker import load_lists

# The JDBC drivers of Debian's packages libpostgresql-jdbc-java and libmariadb-java.
DEBIAN_JARS = ("/usr/share/java/postgresql.jar", "/usr/share/java/mariadb-java-client.jar")
# backend -> (JDBC URL scheme, driver class, default port, the Debian package of its driver).  MySQL
# and MariaDB: the MariaDB driver under the jdbc:mysql scheme, by which Spark picks its MySQL dialect
# (identifiers in backquotes); Connector/J 3 wants `permitMysqlScheme` for that.
JDBC = {
    "postgresql": ("jdbc:postgresql", "org.postgresql.Driver", 5432, "libpostgresql-jdbc-java"),
    "mysql": ("jdbc:mysql", "org.mariadb.jdbc.Driver", 3306, "libmariadb-java"),
    "mariadb": ("jdbc:mysql", "org.mariadb.jdbc.Driver", 3306, "libmariadb-java"),
}
# SQLAlchemy URL query keys and the PostgreSQL JDBC driver's names for them.
PG_PROPERTIES = {"options": "options", "application_name": "ApplicationName", "sslmode": "sslmode"}
COMMITTED = "_COMMITTED"


def worker_spec(config: Config, source: Any, batch_size: int) -> WorkerSpec:
    """The workers' settings: the lists read (files, and tables of `source`) and the pipeline built
    once here, which checks the configuration before any task starts and gives the digest."""
    lists = load_lists(config, source)
    pipeline = build_pipeline(config.detectors, lists, config.classifier, replace=config.replace, extra_rules=config.rules.extra)
    columns = [field for field in FIELDS for _ in getattr(config.patients, field)]
    positions = {field: [i for i, f in enumerate(columns) if f == field] for field in FIELDS}
    return WorkerSpec(
        config.detectors, config.classifier, config.replace, lists, config.rules.extra, pipeline.digest, batch_size, positions
    )


def open_source(spark: SparkSession, config: Config) -> SqlSource | LakeSource:
    """The configured source, checked."""
    return LakeSource(spark, config) if lakehouse(config.source.url) else SqlSource(spark, config)


class SqlSource:
    """A source database, checked (and its lists read) by :class:`anonymizer.source.Source`."""

    def __init__(self, spark: SparkSession, config: Config) -> None:
        self.spark = spark
        self.source = Source(config)

    def list_entries(self, item: ListConfig, index: int) -> list[str]:
        return self.source.list_entries(item, index)

    def notes(self, partitions: int) -> DataFrame:
        s = self.source
        return read_sql(self.spark, s.engine, s.notes, [s.note_id, s.note_patient, s.note_text], s.note_patient, partitions, "source.url")

    def patients(self, partitions: int) -> DataFrame:
        s, p = self.source, self.source.config.patients
        columns = [s.patient_id, *(s.patients.c[c] for field in FIELDS for c in getattr(p, field))]
        return read_sql(self.spark, s.engine, s.patients, list(dict.fromkeys(columns)), s.patient_id, partitions, "source.url")


class LakeSource:
    """Parquet or Delta folders, or a database of Spark's catalog, holding the configured tables."""

    def __init__(self, spark: SparkSession, config: Config) -> None:
        self.spark = spark
        self.config = config
        self.format, self.location = lakehouse(config.source.url)
        n, p = config.notes, config.patients
        self._notes = self._table(n.table, "notes.table", {"notes.id": n.id, "notes.patient": n.patient, "notes.text": n.text})
        wanted = {f"patients.{field}[{i}]": c for field in FIELDS for i, c in enumerate(getattr(p, field))}
        self._patients = self._table(p.table, "patients.table", {"patients.id": p.id, **wanted})

    def _table(self, name: str, key: str, columns: dict[str, str]) -> DataFrame:
        try:
            if self.format == "catalog":
                frame = self.spark.table(f"{self.location}.{name}")
            else:
                frame = self.spark.read.format(self.format).load(f"{self.location.rstrip('/')}/{name}")
        except AnalysisException:
            raise ConfigError(f"{key}: table '{name}' not found in {self.config.source.url}") from None
        for column_key, column in columns.items():
            if column not in frame.columns:
                raise ConfigError(f"{column_key}: column '{column}' not found in table '{name}'")
        return frame

    def list_entries(self, item: ListConfig, index: int) -> list[str]:
        """The distinct non-empty values of a list table's column, as the database source reads them."""
        frame = self._table(item.table, f"lists[{index}].table", {f"lists[{index}].column": item.column})
        return [str(v) for (v,) in frame.select(item.column).distinct().collect() if v not in (None, "")]

    def notes(self, partitions: int) -> DataFrame:
        n = self.config.notes
        return self._notes.select(*dict.fromkeys((n.id, n.patient, n.text)))

    def patients(self, partitions: int) -> DataFrame:
        p = self.config.patients
        return self._patients.select(*dict.fromkeys((p.id, *(c for field in FIELDS for c in getattr(p, field)))))


def read_sql(
    spark: SparkSession, engine: sa.Engine, table: sa.Table, columns: Sequence[sa.Column], by: sa.Column, partitions: int, what: str
) -> DataFrame:
    """These columns of a database table as a DataFrame: Spark's JDBC reader in `partitions` parts
    by column `by`, or, for a SQLite file, read by the driver."""
    if engine.dialect.name == "sqlite":
        return _driver_read(spark, engine, columns)
    url, properties = jdbc_options(engine.url, what)
    name = engine.dialect.identifier_preparer.format_table(table)
    try:
        if _numeric(by):
            with engine.connect() as conn:
                low, high = conn.execute(sa.select(sa.func.min(by), sa.func.max(by))).one()
            if low is None:  # an empty table
                frame = spark.read.jdbc(url, name, properties=properties)
            else:
                frame = spark.read.jdbc(url, name, by.name, int(low), int(high) + 1, partitions, properties=properties)
        else:
            frame = spark.read.jdbc(url, name, predicates=_hash_predicates(engine, by, partitions), properties=properties)
    except Exception as exc:  # py4j's error (or Spark's): the class names what failed, never any data
        raise _jdbc_error(exc, engine.url, what) from None
    return frame.select(*dict.fromkeys(c.name for c in columns))


def _numeric(column: sa.Column) -> bool:
    try:
        return column.type.python_type is int
    except NotImplementedError:
        return False


def _hash_predicates(engine: sa.Engine, column: sa.Column, partitions: int) -> list[str]:
    """One WHERE clause per partition: the id's hash, computed by the database, modulo `partitions`;
    ids that are NULL go with the first."""
    name = engine.dialect.identifier_preparer.quote(column.name)
    if engine.dialect.name == "postgresql":
        bucket = f"mod(hashtext(CAST({name} AS text))::bigint + 2147483648, {partitions})"
    else:
        bucket = f"MOD(CRC32({name}), {partitions})"
    return [f"{bucket} = {i}" + (f" OR {name} IS NULL" if i == 0 else "") for i in range(partitions)]


def jdbc_options(url: sa.URL, what: str) -> tuple[str, dict[str, str]]:
    """The JDBC URL and connection properties of a SQLAlchemy URL (PostgreSQL, MariaDB/MySQL)."""
    backend = url.get_backend_name()
    if backend not in JDBC:
        raise ConfigError(f"{what}: Spark reads PostgreSQL, MariaDB, MySQL or SQLite databases, not {backend}")
    scheme, driver, port, _ = JDBC[backend]
    properties = {"driver": driver}
    if url.username:
        properties["user"] = url.username
    if url.password:
        properties["password"] = str(url.password)
    if backend == "postgresql":
        properties.update({PG_PROPERTIES[k]: str(v) for k, v in url.query.items() if k in PG_PROPERTIES})
    return f"{scheme}://{url.host or 'localhost'}:{url.port or port}/{url.database or ''}", properties


def _jdbc_error(exc: Exception, url: sa.URL, what: str) -> ConfigError:
    backend = url.get_backend_name()
    if "ClassNotFoundException" in str(exc) and backend in JDBC:
        return ConfigError(f"{what}: Spark has no JDBC driver for {backend} (apt-get install {JDBC[backend][3]}, or [spark] jars)")
    lines = [line for line in str(exc).splitlines() if "Exception" in line]
    reason = lines[0].split(":")[0].strip().rsplit(".", 1)[-1] if lines else type(exc).__name__
    return ConfigError(f"{what}: Spark's JDBC reader failed ({reason})")


def _driver_read(spark: SparkSession, engine: sa.Engine, columns: Sequence[sa.Column]) -> DataFrame:
    """A SQLite table's columns read here, typed as the single-machine run reads them: whole
    numbers, dates and timestamps as such, anything else as text."""
    columns = list(dict.fromkeys(columns))
    with engine.connect() as conn:
        rows = conn.execute(sa.select(*columns)).all()
    data, fields = {}, []
    for i, column in enumerate(columns):
        values = [row[i] for row in rows]
        kind = _spark_type(values)
        if isinstance(kind, T.StringType):
            values = [None if v is None else _text(v) for v in values]
        data[column.name] = pd.Series(values, dtype=object)
        fields.append(T.StructField(column.name, kind))
    spark.conf.set("spark.sql.execution.arrow.pyspark.enabled", "true")
    return spark.createDataFrame(pd.DataFrame(data), T.StructType(fields))


def _spark_type(values: Sequence[Any]) -> T.DataType:
    kinds = {type(v) for v in values if v is not None}
    if kinds == {int}:
        return T.LongType()
    if kinds == {dt.date}:
        return T.DateType()
    if kinds == {dt.datetime}:
        return T.TimestampNTZType()
    return T.StringType()


class LakeTarget:
    """A Parquet or Delta target: complete versions of the tables, the newest committed one current."""

    def __init__(self, spark: SparkSession, url: str) -> None:
        self.spark = spark
        self.format, location = lakehouse(url)
        if self.format == "catalog":
            raise ConfigError("target.url: the Spark engine writes parquet:PATH or delta:PATH targets, or a database")
        self.location = location.rstrip("/")
        jvm = spark.sparkContext._jvm
        self._path = jvm.org.apache.hadoop.fs.Path
        self._fs = self._path(self.location).getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())

    def _versions(self) -> dict[int, bool]:
        """Each version's number and whether it is committed."""
        root = self._path(self.location)
        if not self._fs.exists(root):
            return {}
        found = {}
        for status in self._fs.listStatus(root):
            name = status.getPath().getName()
            if status.isDirectory() and name[:1] == "v" and name[1:].isdigit():
                found[int(name[1:])] = self._fs.exists(self._path(f"{self.location}/{name}/{COMMITTED}"))
        return found

    def current(self) -> int | None:
        """The newest committed version (None: never written)."""
        return max((v for v, done in self._versions().items() if done), default=None)

    def folder(self, version: int, table: str = "") -> str:
        return f"{self.location}/v{version}" + (f"/{table}" if table else "")

    def read(self, table: str, version: int | None = None) -> DataFrame:
        """A table of `version` (default: the current one)."""
        version = self.current() if version is None else version
        if version is None:
            raise ConfigError(f"target.url: nothing committed at {self.location}")
        return self.spark.read.format(self.format).load(self.folder(version, table))

    def write(self, frame: DataFrame, version: int, table: str) -> None:
        frame.write.format(self.format).mode("overwrite").save(self.folder(version, table))

    def discard_unfinished(self) -> None:
        """Delete the versions of runs that were killed before they committed."""
        for version, done in self._versions().items():
            if not done:
                self._fs.delete(self._path(self.folder(version)), True)

    def commit(self, version: int) -> None:
        """Make `version` current (an atomic file creation), then delete all but it and the one before."""
        self._fs.delete(self._path(self.folder(version, "_results")), True)
        if not self._fs.createNewFile(self._path(self.folder(version, COMMITTED))):
            raise ConfigError(f"target.url: version {version} at {self.location} was committed by another run")
        older = sorted(v for v, done in self._versions().items() if done and v < version)
        for old in older[:-1]:
            self._fs.delete(self._path(self.folder(old)), True)


def local_jars(config: Config) -> list[str]:
    """The JDBC driver jars to start Spark with: the configured ones, else Debian's where installed."""
    for i, jar in enumerate(config.spark.jars):
        if "://" not in jar and not Path(jar).is_file():
            raise ConfigError(f"spark.jars[{i}]: file not found: {jar}")
    return list(config.spark.jars) or [jar for jar in DEBIAN_JARS if Path(jar).is_file()]
