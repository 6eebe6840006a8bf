"""Access tokens of the audit page (`domain.ports.AccessTokens`): table `access_tokens`, or a map."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from threading import Lock
from typing import Any

import sqlalchemy as sa
from sessionledger.domain.access import Grant, StoredToken
from sessionledger.infrastructure.ledger.driver import Autocommit, compiled
from sessionledger.infrastructure.ledger.engine import WRITE
from sessionledger.infrastructure.ledger.schema import access_tokens

__all__ = ["MemoryAccessTokens", "SqlAccessTokens"]


_FIND = sa.select(
    access_tokens.c.secret_sha256,
    access_tokens.c.user_id,
    access_tokens.c.admin,
    access_tokens.c.write,
    access_tokens.c.created_at,
).where(access_tokens.c.token_id == sa.bindparam("token_id"), access_tokens.c.revoked_at.is_(None))
"""A live token's row."""


class SqlAccessTokens:
    """Tokens in `access_tokens`, found by their id (the primary key)."""

    def __init__(self, engine: sa.Engine, autocommit: Autocommit) -> None:
        """`autocommit`: the ledger's autocommitted connections (`driver.Autocommit`). Every request
        of the HTTP servers reads one token's row: autocommitted, on the driver (`DriverStatement`),
        it is one round trip with no BEGIN and no ROLLBACK and none of SQLAlchemy's per-execution
        work: 0.13-0.5 ms against 0.6-1.4 ms through a SQLAlchemy connection on PostgreSQL (a
        loaded machine), beside an HTTP append's 2-5 ms in all."""
        self._engine = engine
        self._writer = engine.execution_options(**{WRITE: True})
        self._autocommit = autocommit
        self._find = compiled(_FIND, engine.dialect)

    def add(self, token: StoredToken) -> None:
        with self._writer.begin() as conn:
            conn.execute(
                access_tokens.insert().values(
                    token_id=token.token_id,
                    secret_sha256=token.secret_sha256,
                    user_id=token.grant.user_id,
                    admin=token.grant.admin,
                    write=token.grant.write,
                    created_at=token.created_at,
                )
            )

    def find(self, token_id: str) -> StoredToken | None:
        with self._autocommit() as driver:
            rows = self._find.rows(driver.cursor(), {"token_id": token_id})
        return _found(token_id, rows)

    def find_statement(self, token_id: str) -> tuple[str, Mapping[str, Any] | tuple[Any, ...]]:
        """`find`'s read as its SQL and parameters, for a caller that sends it on a connection of
        its own (the event loop's: `async_append.AsyncAppend.read`); its rows go to `found`."""
        return self._find.sql, self._find.params({"token_id": token_id})

    def found(self, token_id: str, rows: Iterable[tuple[Any, ...]]) -> StoredToken | None:
        """The live token of `find_statement`'s rows as the driver returned them, or `None`."""
        return _found(token_id, list(self._find.named(rows)))

    def revoke(self, token_id: str) -> bool:
        t = access_tokens.c
        statement = (
            access_tokens.update()
            .where(t.token_id == token_id, t.revoked_at.is_(None))
            .values(revoked_at=datetime.now(UTC))
        )
        with self._writer.begin() as conn:
            return conn.execute(statement).rowcount == 1


class MemoryAccessTokens:
    """Tokens of one in-memory ledger, kept as long as the object."""

    def __init__(self) -> None:
        self._lock = Lock()
        self._tokens: dict[str, StoredToken] = {}
        self._revoked: set[str] = set()

    def add(self, token: StoredToken) -> None:
        with self._lock:
            if token.token_id in self._tokens:
                raise ValueError(f"token id {token.token_id} is taken")
            self._tokens[token.token_id] = token

    def find(self, token_id: str) -> StoredToken | None:
        with self._lock:
            return None if token_id in self._revoked else self._tokens.get(token_id)

    def revoke(self, token_id: str) -> bool:
        with self._lock:
            if token_id not in self._tokens or token_id in self._revoked:
                return False
            self._revoked.add(token_id)
            return True


def _found(token_id: str, rows: list[Any]) -> StoredToken | None:
    """The live token of `_FIND`'s rows (converted: `DriverStatement.named`), or `None`."""
    if not rows:
        return None
    row = rows[0]
    grant = Grant(row.user_id, bool(row.admin), bool(row.write))
    return StoredToken(token_id, row.secret_sha256, grant, row.created_at)
