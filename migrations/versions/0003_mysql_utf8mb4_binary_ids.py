"""MySQL/MariaDB: the tool's tables in utf8mb4 with a binary collation (other engines: no change).

Tables created by 0001/0002 take the target database's defaults.  With a latin1 or utf8mb3 default
the database refuses CJK or emoji text, so a batch fails and the run stops before that note is
written anywhere; with a case-insensitive default collation (utf8mb4_general_ci, the usual one)
note ids 'a1' and 'A1' are one key, so one note's row silently replaces the other's.  utf8mb4_bin
stores every character and compares ids exactly (trailing spaces aside: MariaDB's _bin is PAD SPACE).

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-22
"""

from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

TABLES = ("runs", "anonymized_notes", "phi_spans", "failures", "patient_digests", "review_spans")


def upgrade() -> None:
    if op.get_bind().dialect.name not in ("mysql", "mariadb"):
        return
    for table in TABLES:
        op.execute(f"ALTER TABLE {table} CONVERT TO CHARACTER SET utf8mb4 COLLATE utf8mb4_bin")


def downgrade() -> None:
    pass  # the wider character set and exact comparison are kept: narrowing could lose text
