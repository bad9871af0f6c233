"""Bookkeeping for per-patient reprocessing and for imported manual review.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-22
"""

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

ID = sa.String(191)


def upgrade() -> None:
    # A digest of each patient's record as last anonymized (never the record itself), so that
    # `reprocess --changed` finds the patients whose record was corrected since.
    op.create_table(
        "patient_digests",
        sa.Column("patient_id", ID, primary_key=True),
        sa.Column("record_digest", sa.String(64), nullable=False),
        sa.Column("run_id", sa.Integer, nullable=False),
    )
    # Spans a reviewer marked as missed or wrongly removed; `anonymizer train` can learn from them.
    op.create_table(
        "review_spans",
        sa.Column("review_id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("note_id", ID, nullable=False, index=True),
        sa.Column("start", sa.Integer, nullable=False),
        sa.Column("end", sa.Integer, nullable=False),
        sa.Column("category", sa.String(16), nullable=False),
        sa.Column("verdict", sa.String(8), nullable=False),  # "missed" or "wrong"
        sa.Column("imported_at", sa.DateTime, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("review_spans")
    op.drop_table("patient_digests")
