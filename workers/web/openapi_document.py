"""Prints the HTTP session API's OpenAPI document, the one docs/http-api.openapi.json holds:
`python -m sessionledger.workers.web.openapi_document > docs/http-api.openapi.json`."""

from __future__ import annotations

import json
from typing import Any

from sessionledger.infrastructure.bootstrap import open_storage
from sessionledger.infrastructure.settings import Settings
from sessionledger.workers.web.session_api import session_api

__all__ = ["openapi_document"]


def openapi_document() -> dict[str, Any]:
    """The document as `GET /api/v1/openapi.json` serves it (it depends on no ledger's content)."""
    with open_storage(Settings(database_url="memory://")) as storage:
        return session_api(storage.service, storage.access_tokens).openapi()


if __name__ == "__main__":
    print(json.dumps(openapi_document(), indent=2, sort_keys=True))
