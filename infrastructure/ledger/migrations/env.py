"""Alembic environment: always run programmatically by `infrastructure.ledger.migrate` on a
connection it already holds (and locked), never from the alembic command line with a URL."""

from alembic import context
from sessionledger.infrastructure.ledger.schema import metadata

connection = context.config.attributes["connection"]
context.configure(connection=connection, target_metadata=metadata, render_as_batch=True)
with context.begin_transaction():
    context.run_migrations()
