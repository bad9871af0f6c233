"""Alembic environment for the anonymizer's own tables in the target database.

Run programmatically by :func:`anonymizer.target.upgrade`, which passes an open connection; the
version table has its own name so the tool never touches another application's migrations.
"""

from alembic import context

VERSION_TABLE = "anonymizer_alembic_version"

connection = context.config.attributes["connection"]
context.configure(connection=connection, version_table=VERSION_TABLE, target_metadata=None)
with context.begin_transaction():
    context.run_migrations()
