"""Configuration: one TOML file that maps the user's schema and switches detectors on and off.

The file is validated before anything touches a database: an unknown key, a wrong type or a
missing required key raises :class:`ConfigError` with a one-line message naming the key.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import tomllib
import types
import typing
from dataclasses import MISSING, asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Mapping

import regex

from anonymizer.spans import CATEGORIES

ENV_VAR = "ANONYMIZER_CONFIG"
DEFAULT_FILE = "anonymizer.toml"


class ConfigError(ValueError):
    """The configuration, or the schema it describes, is not usable. The message is one line."""


def check_range(ok: bool, key: str, value: object, expected: str) -> None:
    """Refuse an out-of-range value at load: a value that switches a safeguard off must not run.

    (A zero name threshold turns name matching off, a zero batch size ends a run with no notes.)
    """
    if not ok:
        raise ConfigError(f"{key}: {value!r} is out of range (must be {expected})")


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
class DetectorsConfig:
    disabled: tuple[str, ...] = ()  # detector names: record, honorific, regex, lists
    disabled_patterns: tuple[str, ...] = ()  # names of [[pattern]] blocks in rules/
    name_threshold: float = 0.33  # edit-distance ratio d / min(|n|, |w|) below which a word is a name
    note_timeout: float = 5.0  # seconds one note may spend in all detection and replacement (anonymizer.budget)

    def __post_init__(self) -> None:
        check_range(0 < self.name_threshold < 1, "detectors.name_threshold", self.name_threshold, "between 0 and 1, exclusive")
        check_range(
            math.isfinite(self.note_timeout) and self.note_timeout > 0,
            "detectors.note_timeout",
            self.note_timeout,
            "a positive number of seconds",
        )


@dataclass(frozen=True)
class ClassifierConfig:
    enabled: bool = True
    model: str | None = None  # path to a trained model; None means the model shipped in the package
    threshold: float | None = None  # decision threshold; None means the one stored with the model

    def __post_init__(self) -> None:
        check_range(self.threshold is None or math.isfinite(self.threshold), "classifier.threshold", self.threshold, "a finite number")


@dataclass(frozen=True)
class RulesConfig:
    """A hospital's own folders of rules, added to the packaged ones (see anonymizer.rules)."""

    extra: tuple[str, ...] = ()  # folders, relative to the configuration file


@dataclass(frozen=True)
class RunConfig:
    batch_size: int = 500

    def __post_init__(self) -> None:
        check_range(self.batch_size >= 1, "run.batch_size", self.batch_size, "at least 1")


REPLACE_MODES = ("tags", "surrogates")
YEAR_MODES = ("keep", "shift")
MAX_DATE_SHIFT = 36_500  # days (a century): further back, shifted dates leave the calendar's range


@dataclass(frozen=True)
class ReplaceConfig:
    """How spans are replaced: by tags ("[PATIENT]") or by consistent surrogates (anonymizer.surrogates)."""

    mode: str = "tags"  # "tags" or "surrogates"
    date_shift_min: int = 100  # days every date of a patient moves back: at least this many ...
    date_shift_max: int = 1000  # ... and at most this many (a per-patient offset from the keyed hash)
    years: str = "shift"  # a year on its own ("s/p MI 1992"): "keep" it or "shift" it with the dates
    secret_env: str = "ANONYMIZER_SECRET"  # environment variable holding the key of the surrogates

    def __post_init__(self) -> None:
        if self.mode not in REPLACE_MODES:
            raise ConfigError(f"replace.mode: '{self.mode}' is not one of {', '.join(REPLACE_MODES)}")
        if self.years not in YEAR_MODES:
            raise ConfigError(f"replace.years: '{self.years}' is not one of {', '.join(YEAR_MODES)}")
        if not 1 <= self.date_shift_min <= self.date_shift_max:
            raise ConfigError("replace: need 1 <= date_shift_min <= date_shift_max")
        check_range(self.date_shift_max <= MAX_DATE_SHIFT, "replace.date_shift_max", self.date_shift_max, f"at most {MAX_DATE_SHIFT} days")
        if not self.secret_env:
            raise ConfigError("replace.secret_env: empty variable name")


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

    def digest(self) -> str:
        """Hash of everything that changes the output (not where it is read from or written to)."""
        payload = asdict(self)
        payload.pop("source")
        payload.pop("target")
        payload.pop("run")
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


def read_text_file(path: str | Path, what: str) -> str:
    """A user's file as UTF-8 text, or a one-line ConfigError naming its first bad line, never
    quoting it: a Latin-1 or binary file (a NUL byte) would be read wrong, or quote PHI."""
    try:
        raw = Path(path).read_bytes()
    except OSError as exc:
        raise ConfigError(f"{what}: cannot read {path} ({exc.strerror})") from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        bad = exc.start
    else:
        bad = raw.find(b"\x00")
    if bad >= 0:
        line = raw[:bad].count(b"\n") + 1
        raise ConfigError(f"{what}: {path}: line {line} is not UTF-8 text; save it as UTF-8")
    return text


def parse_config(data: Mapping[str, Any], base: Path | None = None) -> Config:
    """Build a :class:`Config` from parsed TOML, checking every key and type.

    With `base`, relative paths are made absolute from it (:func:`resolve_paths`).
    """
    config = _build(Config, data, "")
    return resolve_paths(config, base) if base is not None else config


def resolve_paths(config: Config, base: Path) -> Config:
    """`config` with its relative paths taken from `base`: list files, the classifier model, the
    folders of extra rules and the files of SQLite URLs (`sqlite:///hospital.db`, also as `file:` URIs)."""

    def path(value: str) -> str:
        return str(base / Path(value).expanduser()) if not Path(value).expanduser().is_absolute() else str(Path(value).expanduser())

    lists = tuple(replace(item, file=path(item.file)) if item.file else item for item in config.lists)
    classifier = config.classifier
    if classifier.model:
        classifier = replace(classifier, model=path(classifier.model))
    return replace(
        config,
        source=replace(config.source, url=sqlite_url_from(config.source.url, base)),
        target=replace(config.target, url=sqlite_url_from(config.target.url, base)),
        lists=lists,
        classifier=classifier,
        rules=replace(config.rules, extra=tuple(path(folder) for folder in config.rules.extra)),
    )


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
