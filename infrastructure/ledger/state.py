"""State scopes in SQL: the app and user state rows read and merged, and a one-event append's
state delta. SQLAlchemy Core on a `Connection`: these run once per read or per state-changing
write, never per row, so its per-execution cost does not matter here."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import sqlalchemy as sa
from sessionledger.domain.sessions import StateDelta
from sessionledger.infrastructure.ledger.engine import upsert
from sessionledger.infrastructure.ledger.schema import app_states, sessions, user_states


class StateScopes:
    """The app and user state of one database."""

    def __init__(self, engine: sa.Engine) -> None:
        self._engine = engine

    def app_state(self, app_name: str) -> Mapping[str, Any]:
        with self._engine.connect() as conn:
            state = conn.execute(
                sa.select(app_states.c.state).where(app_states.c.app_name == app_name)
            ).scalar()
        return state or {}

    def user_state(self, app_name: str, user_id: str) -> Mapping[str, Any]:
        with self._engine.connect() as conn:
            state = conn.execute(
                sa.select(user_states.c.state).where(
                    user_states.c.app_name == app_name, user_states.c.user_id == user_id
                )
            ).scalar()
        return state or {}

    def merge_shared(
        self,
        conn: sa.Connection,
        apps: Mapping[str, dict[str, Any]],
        users: Mapping[tuple[str, str], dict[str, Any]],
    ) -> None:
        """Shallow per-key merge of state deltas into the app and the (app, user) scopes, each
        under its row lock, inside `conn`'s transaction."""
        deltas = [(app_states, {"app_name": app}, delta) for app, delta in apps.items()]
        deltas += [
            (user_states, {"app_name": app, "user_id": user}, delta) for (app, user), delta in users.items()
        ]
        for table, key, delta in deltas:
            if not delta:
                continue
            conn.execute(upsert(self._engine.dialect, table, list(key)).values(**key, state={}))
            where = [table.c[name] == value for name, value in key.items()]
            current = conn.execute(sa.select(table.c.state).where(*where).with_for_update()).scalar_one()
            conn.execute(table.update().where(*where).values(state={**current, **delta}))

    def merge_delta(self, conn: sa.Connection, session_id: str, scopes: StateDelta) -> None:
        """An appended event's state delta, inside the append's transaction (which moved the
        session's head, so its row is locked already)."""
        row = conn.execute(
            sa.select(sessions.c.state, sessions.c.app_name, sessions.c.user_id).where(
                sessions.c.id == session_id
            )
        ).one()
        if scopes.session:
            conn.execute(
                sessions.update()
                .where(sessions.c.id == session_id)
                .values(state={**row.state, **scopes.session})
            )
        self.merge_shared(conn, {row.app_name: scopes.app}, {(row.app_name, row.user_id): scopes.user})
