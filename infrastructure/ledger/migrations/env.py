"""Alembic environment of the ledger's history (`versions/`): the runner's, in `migrate.py`."""

from sessionledger.infrastructure.ledger.migrate import run_environment
from sessionledger.infrastructure.ledger.schema import metadata

run_environment(metadata)
