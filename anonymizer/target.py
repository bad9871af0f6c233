"""The target database: the tool's own tables, created and upgraded by Alembic, and batch writes.

Every batch is one transaction that replaces the rows of its notes, so a rerun never duplicates a
note and a run killed at any moment leaves each note either fully written or not at all.
"""

from __future__ import annotations

import datetime as dt
import logging
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

    def digests(self, note_ids: Iterable[str]) -> dict[str, str]:
        """The source digest each of these notes was anonymized from, for those already written."""
        ids = list(note_ids)
        query = sa.select(self.notes.c.note_id, self.notes.c.source_digest).where(self.notes.c.note_id.in_(ids))
        with self.engine.connect() as conn:
            return dict(conn.execute(query).all())

    def record_digests(self) -> dict[str, str]:
        """Each patient's record digest as last anonymized."""
        table = self.patient_digests
        with self.engine.connect() as conn:
            return dict(conn.execute(sa.select(table.c.patient_id, table.c.record_digest)).all())

    def write(self, run_id: int, results: Sequence[NoteResult], record_digests: Mapping[str, str]) -> None:
        """Replace these notes' rows in one transaction: each ends as a note row or a failure row."""
        ids = [r.note_id for r in results]
        with self.engine.begin() as conn:
            for table in (self.spans, self.notes, self.failures):
                conn.execute(table.delete().where(table.c.note_id.in_(ids)))
            self._insert(conn, run_id, results, record_digests)

    def replace_patient(self, run_id: int, patient_id: str, results: Sequence[NoteResult], record_digest: str) -> None:
        """Replace every row of one patient in one transaction; on any error the old rows stay."""
        with self.engine.begin() as conn:
            notes = sa.select(self.notes.c.note_id).where(self.notes.c.patient_id == patient_id)
            conn.execute(self.spans.delete().where(self.spans.c.note_id.in_(notes.scalar_subquery())))
            for table in (self.notes, self.failures):
                conn.execute(table.delete().where(table.c.patient_id == patient_id))
            self._insert(conn, run_id, results, {patient_id: record_digest})

    def _insert(
        self, conn: sa.Connection, run_id: int, results: Sequence[NoteResult], record_digests: Mapping[str, str]
    ) -> None:
        notes, spans, failures = [], [], []
        for r in results:
            if r.error is not None:
                failures.append(dict(note_id=r.note_id, patient_id=r.patient_id, run_id=run_id, reason=r.error[:255]))
                continue
            notes.append(
                dict(note_id=r.note_id, patient_id=r.patient_id, text=storable(r.text), run_id=run_id, source_digest=r.source_digest)
            )
            spans.extend(
                dict(note_id=r.note_id, start=s.start, end=s.end, category=s.category, detectors=",".join(s.sources)[:255])
                for s in r.spans
            )
        digests = [dict(patient_id=p, record_digest=d, run_id=run_id) for p, d in record_digests.items()]
        known = self.patient_digests
        conn.execute(known.delete().where(known.c.patient_id.in_(list(record_digests))))
        for table, rows in ((self.notes, notes), (self.spans, spans), (self.failures, failures), (known, digests)):
            if rows:
                conn.execute(table.insert(), rows)
