"""Configuration: one TOML file that maps the user's schema and switches detectors on and off.

The file is validated before anything touches a database: an unknown key, a wrong type or a
missing required key raises :class:`ConfigError` with a one-line message naming the key.
"""

from __future__ import annotations

import hashlib
import json
import os
import tomllib
import types
import typing
from dataclasses import MISSING, asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Mapping

import regex

from anonymizer.settings import (
    ClassifierConfig,
    ConfigError,
    DetectorsConfig,
    ReplaceConfig,
    check_range,
)
from anonymizer.spans import CATEGORIES

ENV_VAR = "ANONYMIZER_CONFIG"
DEFAULT_FILE = "anonymizer.toml"


@dataclass(frozen=True)
class SourceConfig:
    url: str
    schema: str | None = None  # PostgreSQL schema, or MySQL/MariaDB database on the same server, of every source table


@dataclass(frozen=True)
class PatientsConfig:
    table: str
    id: str
    names: tuple[str, ...] = ()
    relatives: tuple[str, ...] = ()
    identifiers: tuple[str, ...] = ()
    phones: tuple[str, ...] = ()
    dates: tuple[str, ...] = ()
    addresses: tuple[str, ...] = ()


@dataclass(frozen=True)
class NotesConfig:
    table: str
    id: str
    patient: str
    text: str


@dataclass(frozen=True)
class ListConfig:
    """Known doctors, hospitals or places, from a source table column or a one-per-line file."""

    category: str
    table: str | None = None
    column: str | None = None
    file: str | None = None

    def __post_init__(self) -> None:
        if self.category not in CATEGORIES:
            raise ConfigError(f"lists: unknown category '{self.category}' (one of {', '.join(CATEGORIES)})")
        if (self.file is None) == (self.table is None) or (self.table is None) != (self.column is None):
            raise ConfigError(f"lists ({self.category}): give either file, or table and column")


@dataclass(frozen=True)
class TargetConfig:
    url: str


@dataclass(frozen=True)
class RulesConfig:
    """A hospital's own folders of rules, added to the packaged ones (see anonymizer.rules)."""

    extra: tuple[str, ...] = ()  # folders, relative to the configuration file


@dataclass(frozen=True)
class RunConfig:
    batch_size: int = 500

    def __post_init__(self) -> None:
        check_range(self.batch_size >= 1, "run.batch_size", self.batch_size, "at least 1")


@dataclass(frozen=True)
class SparkConfig:
    """Settings of ``anonymizer run --engine spark`` only (anonymizer.spark)."""

    jars: tuple[str, ...] = ()  # JDBC driver jars; default: Debian's PostgreSQL and MariaDB drivers, where installed
    partitions: int | None = None  # patient partitions of the work; default: 4 per core Spark offers

    def __post_init__(self) -> None:
        check_range(self.partitions is None or self.partitions >= 1, "spark.partitions", self.partitions, "at least 1")


# Tables that only the Spark engine reads or writes: `parquet:PATH` and `delta:PATH` (each table a
# folder PATH/<table>), `catalog:DATABASE` (a source's tables in Spark's catalog).
LAKEHOUSE = ("parquet", "delta", "catalog")


def lakehouse(url: str) -> tuple[str, str] | None:
    """(format, location) of a lakehouse URL, or None for a database URL."""
    scheme, sep, location = url.partition(":")
    return (scheme, location) if sep and scheme in LAKEHOUSE else None


@dataclass(frozen=True)
class Config:
    source: SourceConfig
    patients: PatientsConfig
    notes: NotesConfig
    target: TargetConfig
    lists: tuple[ListConfig, ...] = ()
    detectors: DetectorsConfig = field(default_factory=DetectorsConfig)
    classifier: ClassifierConfig = field(default_factory=ClassifierConfig)
    run: RunConfig = field(default_factory=RunConfig)
    replace: ReplaceConfig = field(default_factory=ReplaceConfig)
    rules: RulesConfig = field(default_factory=RulesConfig)
    spark: SparkConfig = field(default_factory=SparkConfig)

    def digest(self) -> str:
        """Hash of everything that changes the output (not where it is read from or written to)."""
        payload = asdict(self)
        payload.pop("source")
        payload.pop("target")
        payload.pop("run")
        payload.pop("spark")
        return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()


def find_config_file(explicit: str | Path | None) -> Path:
    """`--config`, then $ANONYMIZER_CONFIG, then ./anonymizer.toml."""
    chosen = explicit or os.environ.get(ENV_VAR) or DEFAULT_FILE
    path = Path(chosen)
    if not path.is_file():
        raise ConfigError(f"configuration file not found: {path}")
    return path


def load_config(path: str | Path | None = None) -> Config:
    """Find, parse and validate the configuration file.

    Relative paths in it (list files, the classifier model, SQLite files in URLs) are relative to
    the directory of the file itself, after symbolic links are followed: a file reached through a
    link (./anonymizer.toml -> sample_db/anonymizer.toml) means what it means where it lives.
    """
    config_path = find_config_file(path)
    try:
        data = tomllib.loads(config_path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{config_path}: not valid TOML ({exc})") from None
    return parse_config(data, base=config_path.resolve().parent)


def parse_config(data: Mapping[str, Any], base: Path | None = None) -> Config:
    """Build a :class:`Config` from parsed TOML, checking every key and type.

    With `base`, relative paths are made absolute from it (:func:`resolve_paths`).
    """
    config = _build(Config, data, "")
    return resolve_paths(config, base) if base is not None else config


def resolve_paths(config: Config, base: Path) -> Config:
    """`config` with its relative paths taken from `base`: list files, the classifier model, the
    folders of extra rules, the files of SQLite URLs (`sqlite:///hospital.db`, also as `file:` URIs),
    the folders of lakehouse URLs (`parquet:lake/emr`) and the Spark engine's jars."""

    def path(value: str) -> str:
        return str(base / Path(value).expanduser()) if not Path(value).expanduser().is_absolute() else str(Path(value).expanduser())

    lists = tuple(replace(item, file=path(item.file)) if item.file else item for item in config.lists)
    classifier = config.classifier
    if classifier.model:
        classifier = replace(classifier, model=path(classifier.model))
    return replace(
        config,
        source=replace(config.source, url=lakehouse_url_from(sqlite_url_from(config.source.url, base), base)),
        target=replace(config.target, url=lakehouse_url_from(sqlite_url_from(config.target.url, base), base)),
        lists=lists,
        classifier=classifier,
        rules=replace(config.rules, extra=tuple(path(folder) for folder in config.rules.extra)),
        spark=replace(config.spark, jars=tuple(path(jar) for jar in config.spark.jars)),
    )


def lakehouse_url_from(url: str, base: Path) -> str:
    """A `parquet:` or `delta:` URL whose relative folder is taken from `base`; any other URL
    (a catalog name, a URI such as `parquet:s3a://bucket/emr`, an absolute folder) unchanged."""
    found = lakehouse(url)
    if found is None or found[0] == "catalog" or not found[1] or "://" in found[1] or Path(found[1]).is_absolute():
        return url
    return f"{found[0]}:{base / found[1]}"


def sqlite_url_from(url: str, base: Path) -> str:
    """A SQLite URL whose relative file is taken from `base`; any other URL unchanged."""
    if not url.startswith("sqlite"):
        return url
    head, sep, rest = url.partition(":///")
    if not sep or not rest or rest.startswith(":memory:"):
        return url
    database, query_sep, query = rest.partition("?")
    prefix = ""
    if database.startswith("file:"):  # a URI filename (with ?uri=true): file:relative.db
        if "uri=true" not in query.split("&") or database.startswith("file:/"):
            return url
        prefix, database = "file:", database[len("file:") :]
    if not database or Path(database).is_absolute():
        return url
    return f"{head}:///{prefix}{base / database}{query_sep}{query}"


# Keys of earlier versions, named in the error so an old file is fixed at once.
RENAMED = {"detectors.regex_timeout": "detectors.note_timeout"}

_VAR = regex.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def expand_env(value: str, key: str) -> str:
    """Expand ${VAR} from the environment; a missing variable is an error, never an empty string."""

    def sub(match: regex.Match) -> str:
        name = match.group(1)
        if name not in os.environ:
            raise ConfigError(f"{key}: environment variable {name} is not set")
        return os.environ[name]

    return _VAR.sub(sub, value)


def _build(cls: type, data: Any, prefix: str) -> Any:
    where = prefix.rstrip(".") or "top level"
    if not isinstance(data, Mapping):
        raise ConfigError(f"{where}: expected a table")
    hints = typing.get_type_hints(cls)
    known = {f.name: f for f in fields(cls)}
    for key in data:
        if key not in known:
            renamed = f" (now '{RENAMED[prefix + key]}')" if prefix + key in RENAMED else ""
            raise ConfigError(f"unknown key '{prefix}{key}'{renamed}")
    values = {}
    for name, spec in known.items():
        key = f"{prefix}{name}"
        if name not in data:
            if spec.default is MISSING and spec.default_factory is MISSING:
                raise ConfigError(f"missing required key '{key}'")
            continue
        values[name] = _convert(hints[name], data[name], key)
        if name == "url":
            values[name] = expand_env(values[name], key)
    return cls(**values)


def _convert(hint: Any, value: Any, key: str) -> Any:
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        inner = [a for a in typing.get_args(hint) if a is not type(None)]
        return _convert(inner[0], value, key)
    if origin is tuple:
        item = typing.get_args(hint)[0]
        if not isinstance(value, list):
            raise ConfigError(f"{key}: expected a list")
        if isinstance(item, type) and hasattr(item, "__dataclass_fields__"):
            return tuple(_build(item, v, f"{key}[{i}].") for i, v in enumerate(value))
        return tuple(_convert(item, v, f"{key}[{i}]") for i, v in enumerate(value))
    if isinstance(hint, type) and hasattr(hint, "__dataclass_fields__"):
        return _build(hint, value, f"{key}.")
    if hint is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if hint is int and isinstance(value, bool) or not isinstance(value, hint):
        raise ConfigError(f"{key}: expected {hint.__name__}, got {type(value).__name__}")
    return value
