"""`sessionledger migrate`: the schema step that reading commands leave to the operator.

Writing commands and workers create or upgrade the schema when they open a ledger; reading
commands never change a database, so an older ledger is upgraded here, on purpose.
"""

from __future__ import annotations

from sessionledger.infrastructure.redaction import hide_passwords
from sessionledger.workers.cli.app import (
    AsJson,
    BrokerUrl,
    DatabaseUrl,
    command,
    console,
    emit_json,
    settings_for,
)


@command
def migrate(database_url: DatabaseUrl = None, broker_url: BrokerUrl = None, as_json: AsJson = False) -> None:
    """Create the ledger's schema, or upgrade it to this version's revision."""
    from sessionledger.infrastructure.bootstrap import open_storage, schema_revision

    settings = settings_for(database_url, broker_url)
    with open_storage(settings, create=True):
        pass
    url, revision = hide_passwords(settings.database_url), schema_revision()
    if as_json:
        emit_json({"database_url": url, "revision": revision})
        return
    console.print(f"the ledger at {url} is at schema revision {revision}", markup=False, highlight=False)
