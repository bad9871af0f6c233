"""Reading the source database: reflected tables, notes streamed in batches grouped by patient.

The user's schema is theirs, so nothing here declares it: tables are reflected and the configured
columns checked before anything is read.  Notes are streamed ordered by patient and each batch
loads only the records of the patients it holds, so memory stays flat however large the source.
"""

from __future__ import annotations

import datetime as dt
import decimal
import logging
import os
import uuid
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Collection, Iterator, Sequence
from urllib.parse import quote, unquote, urlsplit

import regex
import sqlalchemy as sa
from dateutil import parser as date_parser
from sqlalchemy.exc import DBAPIError

from anonymizer.config import Config, ListConfig, lakehouse
from anonymizer.record import FIELDS, Note, PatientRecord, empty_record
from anonymizer.settings import ConfigError

log = logging.getLogger(__name__)


@dataclass
class Batch:
    """Consecutive notes of the source, with the records of their patients."""

    notes: list[Note]
    records: dict[str, PatientRecord]


def connect(url: str, what: str, *, create: bool = False, read_only: bool = False) -> sa.Engine:
    """Create an engine and prove it connects, turning driver errors into one-line ConfigErrors.

    A SQLite file that does not exist is an error, unless `create` (a target being written): then
    it is created readable by its owner only, since it will hold notes.  SQLite would otherwise
    create an empty file wherever a mistyped path points, and an audit would pass on it.
    With `read_only` (the source) a SQLite file is opened read-only (`mode=ro`): the tool never
    writes to the hospital's database.
    """
    if lakehouse(url):
        raise ConfigError(f"{what}: {lakehouse(url)[0]} tables are read and written by `anonymizer run --engine spark` only")
    try:
        parsed = sa.engine.make_url(url)
        path = sqlite_file(parsed)
        if path is not None and not path.exists():
            if not create or parsed.query.get("mode") == "ro":
                raise ConfigError(f"{what}: no SQLite database at {path}")
            _create_private(path, what)
        if path is not None and read_only:
            parsed = _read_only_sqlite(parsed, path)
        engine = sa.create_engine(parsed)
        if engine.dialect.name == "sqlite":
            sa.event.listen(engine, "connect", _lenient_sqlite_text)
        with engine.connect():
            pass
    except ImportError as exc:
        raise ConfigError(f"{what}: database driver not installed ({exc.name}); see the README's install extras") from None
    except (sa.exc.ArgumentError, sa.exc.NoSuchModuleError) as exc:
        raise ConfigError(f"{what}: invalid database URL ({type(exc).__name__})") from None
    except sa.exc.DBAPIError as exc:
        reason = str(exc.orig).strip().splitlines()[0] if exc.orig else type(exc).__name__
        raise ConfigError(f"{what}: cannot connect ({reason})") from None
    return engine


def sqlite_file(url: sa.URL) -> Path | None:
    """The file a SQLite URL names (also as a `file:` URI), or None: another engine, or in memory."""
    if url.get_backend_name() != "sqlite" or url.database in (None, "", ":memory:"):
        return None
    database = url.database
    if url.query.get("uri") == "true" and database.startswith("file:"):
        if url.query.get("mode") == "memory":
            return None
        database = unquote(urlsplit(database).path)
    return Path(database)


def _read_only_sqlite(url: sa.URL, path: Path) -> sa.URL:
    """The SQLite URL `url` opened read-only: a `file:` URI with `mode=ro`, keeping its other options."""
    if not (url.query.get("uri") == "true" and url.database.startswith("file:")):
        url = url.set(database="file:" + quote(str(path.absolute())))
    return url.update_query_dict({"mode": "ro", "uri": "true"})


def _create_private(path: Path, what: str) -> None:
    """An empty file (an empty SQLite database) only its owner can read, never through a symlink."""
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600))
    except FileExistsError:
        pass  # created meanwhile (another run): its own mode stands
    except OSError as exc:
        raise ConfigError(f"{what}: cannot create {path} ({exc.strerror})") from None


def _lenient_sqlite_text(dbapi_connection: Any, _record: Any) -> None:
    # SQLite keeps whatever bytes it was given as TEXT; by default one invalid UTF-8 byte makes the
    # whole read fail (with the text in the message). Read such bytes as U+FFFD instead.
    dbapi_connection.text_factory = lambda raw: raw.decode("utf-8", "replace")


class DatabaseError(ConfigError):
    """A database failed or refused a read or write during a run. One line, never any note data."""


# Quoted parts of driver messages may be data (MariaDB "Duplicate entry 'x'", SQLite "with text
# '...'", PostgreSQL 'input syntax for type integer: "x"'); only the tool's own names are kept.
_QUOTED = regex.compile(r"""'[^'\n]*'|"[^"\n]*"|`[^`\n]*`""")
_OWN_NAMES = regex.compile(
    r"(anonymizer_alembic_version|runs|anonymized_notes|phi_spans|failures|patient_digests|review_spans|review_notes"
    r"|note_id|patient_id|text|run_id|source_digest|reason|status|PRIMARY|UTF8|ix_\w+)(_pkey|_\w+_check|_\w+_fkey)?"
)
# Errors whose text the server writes itself (connection, authentication, privileges, missing
# tables and columns, resources).  Any other can carry a row's text: a trigger's RAISE or SIGNAL,
# a constraint, a value that does not convert.  Of those only the class and code are shown.
_PG_OWN = ("08", "28", "3D", "3F", "40", "53", "54", "55", "57", "58", "25006", "42501", "42P01", "42703")
_SQLITE_OWN = ("SQLITE_READONLY", "SQLITE_FULL", "SQLITE_IOERR", "SQLITE_CANTOPEN", "SQLITE_BUSY", "SQLITE_LOCKED",
               "SQLITE_CORRUPT", "SQLITE_NOTADB", "SQLITE_PERM", "SQLITE_AUTH", "SQLITE_NOMEM")
_SQLITE_ERROR_OWN = regex.compile(r"no such (?:table|column): [\w.]+|table \w+ has no column named \w+")
# MySQL/MariaDB: a trigger's SIGNAL may give any error number, so the text is kept only as far as
# it matches the server's own message for that number (Q: a quoted part, masked or one of ours).
_MYSQL_OWN = {
    errno: regex.compile(template.replace("Q", f"(?:{_QUOTED.pattern})"))
    for errno, template in {
        1036: r"Table Q is read only",
        1040: r"Too many connections",
        1044: r"Access denied for user Q@Q to database Q",
        1045: r"Access denied for user Q@Q \(using password: (?:YES|NO)\)",
        1049: r"Unknown database Q",
        1054: r"Unknown column Q in Q",
        1142: r"[A-Z ]{1,30} command denied to user Q@Q for table Q(?:\.Q)?",
        1143: r"[A-Z ]{1,30} command denied to user Q@Q for column Q in table Q",
        1146: r"Table Q doesn't exist",
        1114: r"The table Q is full",
        1205: r"Lock wait timeout exceeded; try restarting transaction",
        1213: r"Deadlock found when trying to get lock; try restarting transaction",
        1290: r"The (?:MariaDB|MySQL) server is running with the [\w-]{1,60} option so it cannot execute this statement",
        2003: r"Can't connect to MySQL server on Q",
        2006: r"MySQL server has gone away",
        2013: r"Lost connection to (?:MySQL|MariaDB) server during query",
    }.items()
}


def database_error(exc: DBAPIError, what: str = "database error") -> DatabaseError:
    """The driver's error as one line: its class and code, and its text only where the server
    wrote it (never a row's data), with quoted values masked."""
    orig = exc.orig
    if orig is None:
        return DatabaseError(f"{what}: {type(exc).__name__}")
    code = getattr(orig, "sqlstate", None) or getattr(orig, "sqlite_errorname", None)
    args = getattr(orig, "args", ())
    errno = None
    if len(args) == 2 and isinstance(args[0], int):  # PyMySQL: (errno, message)
        errno, message = args[0], str(args[1])
        code = code or errno
    else:
        diag = getattr(orig, "diag", None)
        message = getattr(diag, "message_primary", None) or str(orig)
    lines = message.strip().splitlines()  # PostgreSQL's DETAIL line holds the failing row: dropped
    first = lines[0] if lines else ""
    masked = _QUOTED.sub(lambda m: m.group() if _OWN_NAMES.fullmatch(m.group()[1:-1]) else m.group()[0] + "…" + m.group()[0], first)
    own = _server_text(orig, errno or code, masked)
    return DatabaseError(f"{what}: {type(orig).__name__}" + (f" [{code}]" if code else "") + (f": {own[:300]}" if own else ""))


def _server_text(orig: BaseException, code: object, masked: str) -> str | None:
    """The part of a (masked) error message the server wrote itself, or None (`code`: a MySQL errno,
    a SQLite error name or a SQLSTATE)."""
    if isinstance(code, int):  # MySQL/MariaDB
        template = _MYSQL_OWN.get(code)
        match = template.match(masked) if template else None
        return match.group() if match else None
    if hasattr(orig, "sqlite_errorname"):
        if str(code).startswith(_SQLITE_OWN) or (code == "SQLITE_ERROR" and _SQLITE_ERROR_OWN.fullmatch(masked)):
            return masked
        return None
    if code is None:  # psycopg's own (client side) connection errors
        return masked if type(orig).__name__ in ("OperationalError", "InterfaceError") else None
    # PostgreSQL: an error raised inside a function or trigger (RAISE) has a context; its text is the function's.
    diag = getattr(orig, "diag", None)
    return masked if str(code).startswith(_PG_OWN) and getattr(diag, "context", None) is None else None


class Source:
    """The configured patients and notes tables of one source database."""

    def __init__(self, config: Config, engine: sa.Engine | None = None) -> None:
        self.config = config
        self.engine = engine or connect(config.source.url, "source.url", read_only=True)
        self.schema = config.source.schema
        metadata = sa.MetaData()
        self.patients = self._reflect(metadata, config.patients.table, "patients.table")
        self.notes = self._reflect(metadata, config.notes.table, "notes.table")
        p, n = config.patients, config.notes
        self._column(self.patients, p.id, "patients.id")
        for field in FIELDS:
            for i, column in enumerate(getattr(p, field)):
                self._column(self.patients, column, f"patients.{field}[{i}]")
        self.note_id = self._column(self.notes, n.id, "notes.id")
        self.note_patient = self._column(self.notes, n.patient, "notes.patient")
        self.note_text = self._column(self.notes, n.text, "notes.text")
        self.patient_id = self.patients.c[p.id]
        # Each patients.id once, to join to notes.patient: the database, not Python, decides which
        # note belongs to which patient ('007' or '7.0' and 7 on SQLite, 'p001' and 'P001' under a
        # case-insensitive collation).  DISTINCT may fold ids the database treats as equal into
        # one of them: any one finds every row of that patient again (_records).
        self._matched = sa.select(self.patient_id.label("id")).distinct().subquery("matched")
        self._check_patient_join()
        self._list_tables = {
            i: self._reflect(metadata, item.table, f"lists[{i}].table")
            for i, item in enumerate(config.lists)
            if item.table
        }
        for i, table in self._list_tables.items():
            self._column(table, config.lists[i].column, f"lists[{i}].column")

    def _check_patient_join(self) -> None:
        """Once, at open: a source that cannot compare notes.patient with patients.id (PostgreSQL
        uuid and text) is a configuration error, not a note without a record."""
        try:
            with self.engine.connect() as conn:
                conn.execute(self._with_patient(sa.select(self.note_patient)).limit(0)).all()
        except DBAPIError:
            kinds = [_type_name(c, self.engine) for c in (self.note_patient, self.patient_id)]
            raise ConfigError(
                f"notes.patient: column '{self.note_patient.name}' ({kinds[0]}) cannot be compared with patients.id "
                f"'{self.patient_id.name}' ({kinds[1]}) in the source database; give both columns one type (and collation)"
            ) from None

    def _with_patient(self, query: sa.Select) -> sa.Select:
        """`query` over the notes, with the patients.id its database matches to each (NULL: none)."""
        joined = self.notes.outerjoin(self._matched, self._matched.c.id == self.note_patient)
        return query.add_columns(self._matched.c.id).select_from(joined)

    def _reflect(self, metadata: sa.MetaData, name: str, key: str) -> sa.Table:
        try:
            return sa.Table(name, metadata, schema=self.schema, autoload_with=self.engine)
        except sa.exc.NoSuchTableError:
            where = f"schema '{self.schema}' of " if self.schema else ""
            raise ConfigError(f"{key}: table '{name}' not found in {where}the source database") from None

    @staticmethod
    def _column(table: sa.Table, name: str | None, key: str) -> sa.Column:
        if name not in table.c:
            raise ConfigError(f"{key}: column '{name}' not found in table '{table.name}'")
        return table.c[name]

    def list_entries(self, item: ListConfig, index: int) -> list[str]:
        """The distinct non-empty values of a list table's column."""
        column = self._list_tables[index].c[item.column]
        with self.engine.connect() as conn:
            return [str(v) for (v,) in conn.execute(sa.select(column).distinct()) if v not in (None, "")]

    def count_notes(self, patient_ids: Collection[str] | None = None) -> int:
        query = sa.select(sa.func.count()).select_from(self.notes)
        if patient_ids is not None:
            query = query.where(self._patient_filter(patient_ids))
        with self.engine.connect() as conn:
            return int(conn.execute(query).scalar_one())

    def long_ids(self, column: sa.Column, chars: int) -> Iterator[str]:
        """The values of a notes column longer than `chars` characters, as text (streamed; usually none)."""
        as_text = sa.cast(column, sa.String)
        query = sa.select(as_text).where(sa.func.char_length(as_text) > chars)
        with self.engine.connect() as conn:
            for (value,) in conn.execution_options(stream_results=True, yield_per=100).execute(query):
                yield _key(value)

    def _patient_filter(self, patient_ids: Collection[str]) -> sa.ColumnElement[bool]:
        return self.note_patient.in_(_typed(self.note_patient, patient_ids))

    def batches(
        self, batch_size: int, limit: int | None = None, patient_ids: Collection[str] | None = None
    ) -> Iterator[Batch]:
        """Stream notes ordered by patient in batches of about `batch_size` notes.

        A patient's notes stay in one batch (the classifier looks at them together), so a batch
        ends at a patient boundary; only a patient with more than `batch_size` notes fills a batch
        alone, and goes on into the next.
        """
        query = self._with_patient(sa.select(self.note_id, self.note_patient, self.note_text))
        query = query.order_by(self.note_patient, self.note_id)
        if patient_ids is not None:
            query = query.where(self._patient_filter(patient_ids))
        if limit is not None:
            query = query.limit(limit)
        with self.engine.connect() as conn:
            if conn.dialect.name in ("mysql", "mariadb"):
                # The stream is unbuffered (SSCursor): the server drops it when the client leaves the
                # socket unread for net_write_timeout (60 s by default), e.g. during a slow batch.
                conn.exec_driver_sql("SET SESSION net_write_timeout = 86400")
            # Server-side cursors: a psycopg named cursor, a PyMySQL SSCursor; records are read on
            # a second connection of the pool while this one streams.
            result = conn.execution_options(stream_results=True, yield_per=batch_size).execute(query)
            pending: list[Note] = []
            matched: dict[str, set[Any]] = defaultdict(set)  # note patient key -> matched patients.id values
            for rows in result.partitions(batch_size):
                for note_id, patient, text, match in rows:
                    note = Note(_key(note_id), _key(patient), _text(text))
                    pending.append(note)
                    matched[note.patient_id].add(match)
                last = pending[-1].patient_id
                cut = next((i for i in range(len(pending) - 1, -1, -1) if pending[i].patient_id != last), -1) + 1
                if cut == 0 and len(pending) < batch_size:
                    continue
                notes, pending = (pending[:cut], pending[cut:]) if cut else (pending, [])
                yield Batch(notes, self._records({n.patient_id: matched[n.patient_id] for n in notes}))
                matched = defaultdict(set, {n.patient_id: matched[n.patient_id] for n in pending})
            if pending:
                yield Batch(pending, self._records({n.patient_id: matched[n.patient_id] for n in pending}))

    def notes_by_id(self, note_ids: Collection[str]) -> dict[str, Note]:
        """These notes, fetched by id (for audits of single notes and review samples)."""
        found: dict[str, Note] = {}
        ids = sorted(note_ids)
        query = sa.select(self.note_id, self.note_patient, self.note_text)
        with self.engine.connect() as conn:
            for start in range(0, len(ids), 1000):
                chunk = _typed(self.note_id, ids[start : start + 1000])
                for note_id, patient, text in conn.execute(query.where(self.note_id.in_(chunk))):
                    found[_key(note_id)] = Note(_key(note_id), _key(patient), _text(text))
        return found

    def patient_ids(self) -> Iterator[str]:
        """Every patient key the notes carry, streamed (ids the database treats as equal may come once)."""
        with self.engine.connect() as conn:
            query = sa.select(self.note_patient).distinct()
            for (value,) in conn.execution_options(stream_results=True, yield_per=1000).execute(query):
                yield _key(value)

    def records(self, patient_ids: Collection[str]) -> dict[str, PatientRecord]:
        """Records of these patients, by the keys their notes carry; a patient without a row gets an empty record."""
        matched: dict[str, set[Any]] = {pid: set() for pid in patient_ids}
        found: set[str] = set()
        query = self._with_patient(sa.select(self.note_patient)).distinct()
        ids = sorted(matched)
        with self.engine.connect() as conn:
            for start in range(0, len(ids), 1000):
                chunk = _typed(self.note_patient, ids[start : start + 1000])
                for value, match in conn.execute(query.where(self.note_patient.in_(chunk))):
                    if _key(value) in matched:
                        found.add(_key(value))
                        matched[_key(value)].add(match)
            # DISTINCT folds keys the database treats as equal into one spelling: the others, one by one.
            for pid in matched.keys() - found:
                typed = _typed(self.note_patient, [pid])
                if typed:
                    rows = conn.execute(sa.select(self._matched.c.id).where(self._matched.c.id == typed[0]))
                    matched[pid].update(match for (match,) in rows)
        return self._records(matched)

    def _records(self, matched: dict[str, set[Any]]) -> dict[str, PatientRecord]:
        """Each key's record, from the patients.id values the database matched to it (None: no row).

        Every row of a patient is found by joining the patients table to itself, so rows whose ids
        the database treats as equal are merged (a duplicated patient: every value counts).
        """
        p = self.config.patients
        wanted = {field: [self.patients.c[c] for c in getattr(p, field)] for field in FIELDS}
        same = self.patients.alias("same")
        columns = [same.c[c.name] for cols in wanted.values() for c in cols]
        joined = self.patients.join(same, same.c[p.id] == self.patient_id)
        values: dict[Any, dict[str, list[Any]]] = defaultdict(lambda: defaultdict(list))
        ids = list({m for ms in matched.values() for m in ms if m is not None})
        with self.engine.connect() as conn:
            for start in range(0, len(ids), 1000):
                query = sa.select(self.patient_id, *columns).select_from(joined).where(self.patient_id.in_(ids[start : start + 1000]))
                for row in conn.execute(query):
                    fields = values[row[0]]
                    position = 1
                    for field, cols in wanted.items():
                        fields[field].extend(row[position : position + len(cols)])
                        position += len(cols)
        records = {}
        for pid, ms in matched.items():
            merged: dict[str, list[Any]] = defaultdict(list)
            for m in ms:
                for field, vals in values.get(m, {}).items():
                    merged[field].extend(vals)
            records[pid] = _record(pid, merged) if merged else empty_record(pid)
        return records


# Column types whose ids travel as strings and go back to the database as the column's own type.
_NUMERIC_OR_UUID = (float, decimal.Decimal, uuid.UUID)


def _typed(column: sa.Column, keys: Collection[str]) -> list[Any]:
    """Ids as the column's own type, so the database compares them as its own values and can use
    its index (ids travel as strings); a string that is no such value matches nothing."""
    try:
        kind = column.type.python_type
    except NotImplementedError:
        return sorted(keys)
    if kind is int:
        return sorted(int(k) for k in keys if k.lstrip("-").isdigit())
    if kind in _NUMERIC_OR_UUID:
        typed = []
        for k in keys:
            try:
                typed.append(kind(k))
            except (ValueError, ArithmeticError):
                continue
        return typed
    return sorted(keys)


def _type_name(column: sa.Column, engine: sa.Engine) -> str:
    try:
        return column.type.compile(dialect=engine.dialect)
    except sa.exc.CompileError:
        return type(column.type).__name__


def _key(value: Any) -> str:
    return "" if value is None else str(value)


def _text(value: Any) -> str:
    """A note body: NULL is the empty note; bytes (BLOB columns, SQL_ASCII) are read as UTF-8, bad bytes as U+FFFD."""
    if value is None:
        return ""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).decode("utf-8", "replace")
    return str(value)


def _record(patient_id: str, fields: dict[str, list[Any]]) -> PatientRecord:
    converted: dict[str, tuple[Any, ...]] = {}
    for field in FIELDS:
        raw = [v for v in fields.get(field, []) if v not in (None, "")]
        items = _dates(raw) if field == "dates" else [_text(v) for v in raw]
        converted[field] = tuple(dict.fromkeys(items))
    return PatientRecord(patient_id=patient_id, **converted)


def _dates(values: Sequence[Any]) -> list[dt.date]:
    """Dates from DATE/DATETIME columns or from text; text that is no date is skipped (logged, not shown)."""
    dates = []
    for value in values:
        if isinstance(value, dt.datetime):
            dates.append(value.date())
        elif isinstance(value, dt.date):
            dates.append(value)
        else:
            try:
                dates.append(date_parser.parse(str(value), dayfirst=True).date())
            except (ValueError, OverflowError):
                log.warning("a record date field could not be parsed as a date; it is not matched")
    return dates
