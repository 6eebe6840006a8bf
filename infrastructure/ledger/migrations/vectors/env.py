"""Alembic environment of the vector stores' history (`versions/`): the runner's, in `migrate.py`."""

from sessionledger.infrastructure.ledger.migrate import run_environment

run_environment(None)
