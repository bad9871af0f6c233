"""The target database: the tool's own tables, created and upgraded by Alembic, and batch writes.

Every batch is one transaction that replaces the rows of its notes, so a rerun never duplicates a
note and a run killed at any moment leaves each note either fully written or not at all.
"""

from __future__ import annotations

import datetime as dt
import logging
import re
from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence

import sqlalchemy as sa
from alembic import command
from alembic.config import Config as AlembicConfig

from anonymizer.pipeline import NoteResult
from anonymizer.resources import data_dir
from anonymizer.source import connect

log = logging.getLogger(__name__)

TABLES = ("runs", "anonymized_notes", "phi_spans", "failures", "patient_digests", "review_spans")


def upgrade(engine: sa.Engine) -> None:
    """Bring the target's tables to the newest migration (a fresh target gets all of them)."""
    config = AlembicConfig()
    config.set_main_option("script_location", str(data_dir("migrations")))
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.upgrade(config, "head")


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


class Target:
    def __init__(self, url: str, engine: sa.Engine | None = None) -> None:
        self.engine = engine or connect(url, "target.url")
        upgrade(self.engine)
        metadata = sa.MetaData()
        metadata.reflect(self.engine, only=TABLES)
        self.runs, self.notes, self.spans, self.failures, self.patient_digests, self.review = (
            metadata.tables[t] for t in TABLES
        )

    def start_run(self, kind: str, config_digest: str, patients: Sequence[str] | None = None) -> int:
        row = {
            "kind": kind,
            "started_at": _now(),
            "status": "running",
            "config_digest": config_digest,
            "patients": ",".join(patients) if patients is not None else None,
        }
        with self.engine.begin() as conn:
            return int(conn.execute(self.runs.insert().values(**row)).inserted_primary_key[0])

    def finish_run(self, run_id: int, status: str, done: int, skipped: int, failed: int) -> None:
        values = dict(finished_at=_now(), status=status, notes_done=done, notes_skipped=skipped, notes_failed=failed)
        with self.engine.begin() as conn:
            conn.execute(self.runs.update().where(self.runs.c.run_id == run_id).values(**values))

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
