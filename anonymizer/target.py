"""The target database: the tool's own tables, created and upgraded by Alembic, and batch writes.

Every batch is one transaction that replaces the rows of its notes, so a rerun never duplicates a
note and a run killed at any moment leaves each note either fully written or not at all.  One
writer at a time: a run or reprocess holds the target's lock (:class:`WriterLock`) from its start
to its end, and the migration runs under it too.  Audits open an existing target as it is.
"""

from __future__ import annotations

import datetime as dt
import fcntl
import hashlib
import logging
import os
import re
from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence

import sqlalchemy as sa
from alembic import command
from alembic.config import Config as AlembicConfig
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory

from anonymizer.record import NoteResult
from anonymizer.resources import data_dir
from anonymizer.settings import ConfigError
from anonymizer.source import DBAPIError, connect, database_error, sqlite_file

log = logging.getLogger(__name__)

TABLES = ("runs", "anonymized_notes", "phi_spans", "failures", "patient_digests", "review_spans", "review_notes")
VERSION_TABLE = "anonymizer_alembic_version"  # as migrations/env.py names it
LOCKED = "target.url: another anonymizer run holds the target's lock"


def _alembic_config() -> AlembicConfig:
    config = AlembicConfig()
    config.set_main_option("script_location", str(data_dir("migrations")))
    return config


def upgrade(engine: sa.Engine) -> None:
    """Bring the target's tables to the newest migration (a fresh target gets all of them)."""
    config = _alembic_config()
    check_revision(engine, writing=True)
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.upgrade(config, "head")


def check_revision(engine: sa.Engine, writing: bool) -> None:
    """Refuse a target written by a newer version; for reading, also one never written or not upgraded.

    An audit that created or migrated the target it reads would pass on an empty database.
    """
    with engine.connect() as conn:
        current = set(MigrationContext.configure(conn, opts={"version_table": VERSION_TABLE}).get_current_heads())
    script = ScriptDirectory.from_config(_alembic_config())
    heads = set(script.get_heads())
    unknown = current - {r.revision for r in script.walk_revisions()}
    if unknown:
        raise ConfigError(f"target.url: the target's tables are at migration {', '.join(sorted(unknown))}, "
                          "which this version of anonymizer does not know (a newer version wrote them)")
    if writing or current == heads:
        return
    if not current:
        raise ConfigError("target.url: the target holds no anonymizer tables (never written by `anonymizer run`, "
                          "or another database)")
    raise ConfigError(f"target.url: the target's tables are at migration {', '.join(sorted(current))}, older than "
                      f"this version's {', '.join(sorted(heads))}; `anonymizer run` upgrades them")


def storable(text: str) -> str:
    """The text as every target engine can store it: NUL (refused by PostgreSQL) becomes U+FFFD.

    One character for one, so the offsets in phi_spans stay valid; done on every engine so a note's
    output does not depend on where it is written (docs/robustness.md).
    """
    return text.replace("\x00", "\ufffd")


@dataclass(frozen=True)
class Held:
    """The row the target holds under a note id: a note (its source digest) or a failure (its reason)."""

    note_id: str
    patient_id: str
    digest: str | None  # None: a failure row
    run_id: int  # the run that wrote the row
    seen_run: int | None = None  # note rows: the last run that wrote or skipped it
    reason: str | None = None

    def sources(self) -> int:
        """How many source rows the row stands for: more than one for a DuplicateNoteId failure."""
        found = DUPLICATE.match(self.reason or "")
        return int(found[1]) if found else 1

    def seen_by(self, run_id: int) -> bool:
        """Whether run `run_id` already wrote (or, for a note, skipped) this row."""
        return (self.run_id if self.digest is None else self.seen_run) == run_id


DUPLICATE_PREFIX = "DuplicateNoteId: "
DUPLICATE_REASON = DUPLICATE_PREFIX + "{} source rows share this note id"
DUPLICATE = re.compile(re.escape(DUPLICATE_PREFIX) + r"(\d+) ")


def _now() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)


class WriterLock:
    """The target's one-writer lock, held on a connection (or file descriptor) of its own.

    PostgreSQL: a session advisory lock keyed by the schema; MySQL/MariaDB: a named lock keyed by
    the database; SQLite: flock on a file beside the database.  A run that dies (even kill -9)
    lets go with its connection or descriptor, so the server or the kernel releases it.
    """

    def __init__(self, engine: sa.Engine) -> None:
        self.engine = engine
        self._conn: sa.Connection | None = None
        self._unlock: sa.TextClause | None = None
        self._fd: int | None = None

    def acquire(self) -> None:
        """Take the lock now or raise ConfigError: a second writer stops instead of waiting."""
        kind = self.engine.dialect.name
        if kind == "sqlite":
            self._acquire_file()
            return
        if kind not in ("postgresql", "mysql", "mariadb"):
            raise ConfigError(f"target.url: cannot lock a {kind} target (SQLite, PostgreSQL, MySQL or MariaDB)")
        conn = self.engine.connect().execution_options(isolation_level="AUTOCOMMIT")  # no open transaction
        try:
            if kind == "postgresql":
                scope = conn.scalar(sa.text("SELECT current_schema()")) or ""
                key = dict(key=int.from_bytes(hashlib.sha256(f"anonymizer:{scope}".encode()).digest()[:8], "big", signed=True))
                held = conn.scalar(sa.text("SELECT pg_try_advisory_lock(:key)"), key)
                unlock = sa.text("SELECT pg_advisory_unlock(:key)").bindparams(**key)
            else:
                # An idle connection is dropped after wait_timeout (8 h by default), and its lock with it.
                conn.exec_driver_sql("SET SESSION wait_timeout = 31536000")
                scope = conn.scalar(sa.text("SELECT DATABASE()")) or ""
                name = dict(name="anonymizer:" + hashlib.sha256(scope.encode()).hexdigest()[:40])  # at most 64 characters
                held = conn.scalar(sa.text("SELECT GET_LOCK(:name, 0)"), name) == 1
                unlock = sa.text("SELECT RELEASE_LOCK(:name)").bindparams(**name)
        except BaseException:
            conn.close()
            raise
        if not held:
            conn.close()
            raise ConfigError(LOCKED)
        self._conn, self._unlock = conn, unlock
        _FORK_CLOSES[id(self)] = _socket_fd(conn)

    def _acquire_file(self) -> None:
        path = sqlite_file(self.engine.url)
        if path is None:
            return  # in memory: no other process can reach it
        lock = path.with_name(path.name + ".lock")
        try:
            fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        except OSError as exc:
            raise ConfigError(f"target.url: cannot open the lock file {lock} ({exc.strerror})") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise ConfigError(LOCKED) from None
        self._fd = fd
        _FORK_CLOSES[id(self)] = fd

    def release(self) -> None:
        """Let go (a no-op when not held). A failure here loses nothing: the lock dies with its connection."""
        _FORK_CLOSES.pop(id(self), None)
        if self._fd is not None:
            os.close(self._fd)  # closing the descriptor releases the flock
            self._fd = None
        if self._conn is not None:
            conn, self._conn = self._conn, None
            try:
                conn.execute(self._unlock)
            except DBAPIError:
                conn.invalidate()  # closed, not pooled: the server ends its session and the lock
                log.warning("the target's lock could not be released; it ends with its connection")
            finally:
                conn.close()


# Descriptors of the locks this process holds.  A forked child (a worker of the pool) shares them;
# were it to outlive a killed run, it would hold the target's lock for it.  It gets /dev/null instead.
_FORK_CLOSES: dict[int, int | None] = {}


def _let_go_in_child() -> None:
    fds = [fd for fd in _FORK_CLOSES.values() if fd is not None]
    _FORK_CLOSES.clear()
    if fds:
        null = os.open(os.devnull, os.O_RDWR)
        for fd in fds:
            os.dup2(null, fd)
        os.close(null)


os.register_at_fork(after_in_child=_let_go_in_child)


def _socket_fd(conn: sa.Connection) -> int | None:
    """The socket of a psycopg or PyMySQL connection."""
    dbapi = conn.connection.dbapi_connection
    if hasattr(dbapi, "fileno"):  # psycopg
        return dbapi.fileno()
    sock = getattr(dbapi, "_sock", None)  # PyMySQL keeps its socket here
    return sock.fileno() if sock is not None else None


class Target:
    """The tool's tables in the target database.

    `create=True` (runs): create the database (SQLite) and bring the tables to the newest migration
    under the writer lock.  `create=False` (audits): open the target as it is; one never written,
    at an older migration, or missing a table is a ConfigError naming it.
    """

    def __init__(self, url: str, engine: sa.Engine | None = None, *, create: bool = True) -> None:
        self.engine = engine or connect(url, "target.url", create=create)
        self.lock = WriterLock(self.engine)
        if create:
            self.lock.acquire()
            try:
                upgrade(self.engine)
            finally:
                self.lock.release()
        else:
            check_revision(self.engine, writing=False)
        inspector = sa.inspect(self.engine)
        missing = [t for t in TABLES if not inspector.has_table(t)]
        if missing:
            raise ConfigError(f"target.url: table(s) {', '.join(missing)} missing from the target (dropped?); "
                              "restore them or write a new target")
        metadata = sa.MetaData()
        metadata.reflect(self.engine, only=TABLES)
        self.runs, self.notes, self.spans, self.failures, self.patient_digests, self.review, self.review_notes = (
            metadata.tables[t] for t in TABLES
        )

    def start_run(self, kind: str, config_digest: str, patients: Sequence[str] | None = None) -> int:
        """Take the writer lock (held until :meth:`finish_run`) and record the run as running."""
        self.lock.acquire()
        row = {
            "kind": kind,
            "started_at": _now(),
            "status": "running",
            "config_digest": config_digest,
            "patients": ",".join(patients) if patients is not None else None,
        }
        try:
            with self.engine.begin() as conn:
                return int(conn.execute(self.runs.insert().values(**row)).inserted_primary_key[0])
        except BaseException:
            self.lock.release()
            raise

    def finish_run(self, run_id: int, status: str, done: int, skipped: int, failed: int) -> None:
        """Record how the run ended and release the writer lock.

        A run that already failed is reported by its own error: if it cannot be marked too (the
        target refuses every write), that is logged, not raised over it.
        """
        values = dict(finished_at=_now(), status=status, notes_done=done, notes_skipped=skipped, notes_failed=failed)
        try:
            with self.engine.begin() as conn:
                conn.execute(self.runs.update().where(self.runs.c.run_id == run_id).values(**values))
        except DBAPIError as exc:
            if status == "done":
                raise
            log.warning("run %d could not be marked %s (%s); it stays 'running'", run_id, status, database_error(exc, "target"))
        finally:
            self.lock.release()

    def key(self, note_id: str) -> str:
        """The id as this target's key compares it: MySQL/MariaDB's PAD SPACE collations ignore trailing spaces."""
        return note_id.rstrip(" ") if self.engine.dialect.name in ("mysql", "mariadb") else note_id

    def digests(self, note_ids: Iterable[str]) -> dict[str, Held]:
        """What the target holds under each of these ids (note or failure row), by :meth:`key`."""
        ids = list(note_ids)
        n, f = self.notes.c, self.failures.c
        held: dict[str, Held] = {}
        with self.engine.connect() as conn:
            for row in conn.execute(sa.select(n.note_id, n.patient_id, n.source_digest, n.run_id, n.seen_run).where(n.note_id.in_(ids))):
                held[self.key(row.note_id)] = Held(row.note_id, row.patient_id, row.source_digest, row.run_id, row.seen_run)
            for row in conn.execute(sa.select(f.note_id, f.patient_id, f.run_id, f.reason).where(f.note_id.in_(ids))):
                held[self.key(row.note_id)] = Held(row.note_id, row.patient_id, None, row.run_id, None, row.reason)
        return held

    def record_digests(self) -> dict[str, str]:
        """Each patient's record digest as last anonymized."""
        table = self.patient_digests
        with self.engine.connect() as conn:
            return dict(conn.execute(sa.select(table.c.patient_id, table.c.record_digest)).all())

    def write(
        self, run_id: int, results: Sequence[NoteResult], record_digests: Mapping[str, str], skipped: Sequence[str] = ()
    ) -> None:
        """Replace these notes' rows in one transaction: each ends as a note row or a failure row.

        `skipped`: notes of the batch left as they are, marked as seen by this run (`seen_run`).
        """
        ids = [r.note_id for r in results]
        with self.engine.begin() as conn:
            for table in (self.spans, self.notes, self.failures):
                conn.execute(table.delete().where(table.c.note_id.in_(ids)))
            self._insert(conn, run_id, results, record_digests)
            if skipped:
                conn.execute(self.notes.update().where(self.notes.c.note_id.in_(list(skipped))).values(seen_run=run_id))

    def replace_patient(
        self, run_id: int, patient_id: str, results: Sequence[NoteResult], record_digests: Mapping[str, str]
    ) -> None:
        """Replace every row of one patient in one transaction; on any error the old rows stay.

        The patient's rows are those under `patient_id`, under every key its notes carry
        (`record_digests`: the source may spell one patient in several ways its database treats as
        equal) and under its notes' ids; a DuplicateNoteId failure stands for other patients' rows
        too, and stays unless one of its notes replaces it (the next run recounts it).
        """
        patients = list({patient_id, *record_digests})
        ids = [r.note_id for r in results]
        with self.engine.begin() as conn:
            for table in (self.notes, self.failures):
                under = table.c.patient_id.in_(patients)
                if table is self.failures:
                    under = sa.and_(under, ~table.c.reason.startswith(DUPLICATE_PREFIX, autoescape=True))
                mine = sa.or_(under, table.c.note_id.in_(ids))
                if table is self.notes:
                    old = sa.select(self.notes.c.note_id).where(mine).scalar_subquery()
                    conn.execute(self.spans.delete().where(sa.or_(self.spans.c.note_id.in_(old), self.spans.c.note_id.in_(ids))))
                conn.execute(table.delete().where(mine))
            self._insert(conn, run_id, results, record_digests)

    def _insert(
        self, conn: sa.Connection, run_id: int, results: Sequence[NoteResult], record_digests: Mapping[str, str]
    ) -> None:
        notes, spans, failures = [], [], []
        for r in results:
            if r.error is not None:
                failures.append(dict(note_id=r.note_id, patient_id=r.patient_id, run_id=run_id, reason=r.error[:255]))
                continue
            notes.append(
                dict(
                    note_id=r.note_id, patient_id=r.patient_id, text=storable(r.text), run_id=run_id,
                    source_digest=r.source_digest, seen_run=run_id,
                )
            )
            spans.extend(
                dict(note_id=r.note_id, start=s.start, end=s.end, category=s.category, detectors=",".join(s.sources)[:255])
                for s in r.spans
            )
        # Patient keys this target treats as equal (MySQL/MariaDB: trailing spaces) get one row.
        by_key = {self.key(p): (p, d) for p, d in record_digests.items()}
        digests = [dict(patient_id=p, record_digest=d, run_id=run_id) for p, d in by_key.values()]
        known = self.patient_digests
        conn.execute(known.delete().where(known.c.patient_id.in_(list(record_digests))))
        for table, rows in ((self.notes, notes), (self.spans, spans), (self.failures, failures), (known, digests)):
            if rows:
                conn.execute(table.insert(), rows)
