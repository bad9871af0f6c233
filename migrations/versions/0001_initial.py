"""The target's tables: anonymized notes, their spans, runs and failures.

Revision ID: 0001
Revises:
Create Date: 2026-11-22
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

# Ids are the user's, of any type: kept as strings. MariaDB's TEXT stops at 64 KB; notes may not.
ID = sa.String(191)
LONG_TEXT = sa.Text().with_variant(mysql.LONGTEXT(), "mysql", "mariadb")


def upgrade() -> None:
    op.create_table(
        "runs",
        sa.Column("run_id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("started_at", sa.DateTime, nullable=False),
        sa.Column("finished_at", sa.DateTime),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("notes_done", sa.Integer, nullable=False, server_default="0"),
        sa.Column("notes_skipped", sa.Integer, nullable=False, server_default="0"),
        sa.Column("notes_failed", sa.Integer, nullable=False, server_default="0"),
        sa.Column("config_digest", sa.String(64), nullable=False),
        sa.Column("patients", sa.Text),
    )
    op.create_table(
        "anonymized_notes",
        sa.Column("note_id", ID, primary_key=True),
        sa.Column("patient_id", ID, nullable=False, index=True),
        sa.Column("text", LONG_TEXT, nullable=False),
        sa.Column("run_id", sa.Integer, nullable=False),
        sa.Column("source_digest", sa.String(64), nullable=False),
    )
    op.create_table(
        "phi_spans",
        sa.Column("span_id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("note_id", ID, nullable=False, index=True),
        sa.Column("start", sa.Integer, nullable=False),
        sa.Column("end", sa.Integer, nullable=False),
        sa.Column("category", sa.String(16), nullable=False),
        sa.Column("detectors", sa.String(255), nullable=False),
    )
    op.create_table(
        "failures",
        sa.Column("note_id", ID, primary_key=True),
        sa.Column("patient_id", ID, nullable=False),
        sa.Column("run_id", sa.Integer, nullable=False),
        sa.Column("reason", sa.String(255), nullable=False),
    )


def downgrade() -> None:
    for table in ("failures", "phi_spans", "anonymized_notes", "runs"):
        op.drop_table(table)
