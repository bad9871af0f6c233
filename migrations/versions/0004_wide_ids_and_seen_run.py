"""Ids as long as the source allows, and the run that last saw each note.

0001 stored ids as VARCHAR(191): a longer id failed its batch's write on PostgreSQL (and every run
stopped there), and MySQL/MariaDB refused it.  PostgreSQL and SQLite now store ids as TEXT (a
PostgreSQL btree key still stops at 2,704 bytes); MySQL/MariaDB as VARCHAR(768), the most an InnoDB
key holds in utf8mb4 (3,072 bytes), in utf8mb4_bin as 0003 set.  A run refuses, before writing, a
source whose ids are longer than its target can key (anonymizer.run).

`anonymized_notes.seen_run`: the last run that wrote or skipped the note (run_id stays the run
that wrote it).  A run tells from it that a note id it meets again, in a later batch, was already
met in this run: two source rows with one id, which become one failure row, never an overwrite.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-25
"""

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

# (table, column, nullable) of every id column of the tool's tables.
ID_COLUMNS = (
    ("anonymized_notes", "note_id", False),
    ("anonymized_notes", "patient_id", False),
    ("phi_spans", "note_id", False),
    ("failures", "note_id", False),
    ("failures", "patient_id", False),
    ("patient_digests", "patient_id", False),
    ("review_spans", "note_id", False),
)
MYSQL_ID_LENGTH = 768


def upgrade() -> None:
    mysql = op.get_bind().dialect.name in ("mysql", "mariadb")
    wide = sa.String(MYSQL_ID_LENGTH, collation="utf8mb4_bin") if mysql else sa.Text()
    for table in dict.fromkeys(t for t, _, _ in ID_COLUMNS):
        with op.batch_alter_table(table) as batch:  # SQLite: the table is rebuilt; others: ALTER
            for _, column, nullable in (c for c in ID_COLUMNS if c[0] == table):
                batch.alter_column(column, type_=wide, existing_type=sa.String(191), existing_nullable=nullable)
            if table == "anonymized_notes":
                batch.add_column(sa.Column("seen_run", sa.Integer))


def downgrade() -> None:
    pass  # narrowing could cut ids that no longer fit
