"""The review loop: who marked a span and when, and which notes a reviewer finished.

`review_spans` gains the reviewer's name and calls its time `marked_at` (rows imported before keep
their time and have no reviewer).  Its verdicts: "missed" (PHI the run left), "wrong" (a detection
that is not PHI) and "category" (a detection of another category, given in `category`); and, written when a reviewer accepts a note, "detected":
the run's detections as that reviewer saw them, so what was reviewed survives a later run.

`review_notes`: one row per note and reviewer who accepted it (the note's marks are complete), with
the run whose output was reviewed and a digest of the source text reviewed, so a note anonymized
again or edited since is known to need a new review; `sampled` says it came from a random sample
(only those count towards the release estimate).  Offsets, names and digests only: never text.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-28
"""

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

MYSQL_ID_LENGTH = 768  # as 0004


def upgrade() -> None:
    mysql = op.get_bind().dialect.name in ("mysql", "mariadb")
    note_id = sa.String(MYSQL_ID_LENGTH, collation="utf8mb4_bin") if mysql else sa.Text()
    with op.batch_alter_table("review_spans") as batch:
        batch.add_column(sa.Column("reviewer", sa.String(100)))
        batch.alter_column("imported_at", new_column_name="marked_at", existing_type=sa.DateTime, existing_nullable=False)
    op.create_table(
        "review_notes",
        sa.Column("review_id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("note_id", note_id, nullable=False, index=True),
        sa.Column("reviewer", sa.String(100), nullable=False),
        sa.Column("reviewed_at", sa.DateTime, nullable=False),
        sa.Column("run_id", sa.Integer, nullable=False),
        sa.Column("text_digest", sa.String(64), nullable=False),
        sa.Column("sampled", sa.Boolean, nullable=False),
        mysql_charset="utf8mb4",
        mysql_collate="utf8mb4_bin",
    )


def downgrade() -> None:
    op.drop_table("review_notes")
    with op.batch_alter_table("review_spans") as batch:
        batch.alter_column("marked_at", new_column_name="imported_at", existing_type=sa.DateTime, existing_nullable=False)
        batch.drop_column("reviewer")
