"""The same random sequence of operations against google-adk's own `InMemorySessionService` and
`LedgerSessionService` (memory, SQLite, PostgreSQL) gives the same results: sessions, events,
merged and user state, errors, listing order and the caller's in-memory session objects.

Two documented differences are kept out of the sequences: a deleted session's id is never
created again (the ledger does not reuse ids), and event timestamps never go backwards (the
ledger, as google-adk's in-memory service, keeps append order; google-adk's SQL service sorts by
timestamp). Creation times differ between any two services, so sessions without events are
compared without their `last_update_time`.
"""

from __future__ import annotations

import asyncio
import random
import uuid
from typing import Any

import pytest
from google.adk.events.event import Event
from google.adk.events.event_actions import EventActions
from google.adk.sessions.base_session_service import BaseSessionService, GetSessionConfig
from google.adk.sessions.in_memory_session_service import InMemorySessionService
from google.adk.sessions.session import Session
from google.genai import types
from sessionledger.infrastructure.adk import LedgerSessionService

USERS = ("u1", "u2")
SESSION_IDS = ("s1", "s2", "s3", "s4", "s5", "s6")
KEYS = ("k", "n", "app:shared", "user:pref", "temp:scratch", "session:count")
OPERATIONS = 120
EVENT_TIMES_BELOW = 1e6
"""Event timestamps are small (1000 + step); a listed session's larger time is its creation time."""


def _value(rng: random.Random) -> Any:
    return rng.choice(
        [rng.randint(-5, 5), f"v{rng.randint(0, 9)}", None, {"x": rng.randint(0, 3)}, 0.5, True]
    )


def _event(rng: random.Random, step: int) -> Event:
    author = rng.choice(["user", "agent"])
    content = None
    if rng.random() < 0.8:
        role = "user" if author == "user" else "model"
        content = types.Content(role=role, parts=[types.Part(text=f"text {step}")])
    state = {key: _value(rng) for key in rng.sample(KEYS, rng.randint(0, 3))}
    return Event(
        id=str(uuid.UUID(int=rng.getrandbits(128))),
        invocation_id=f"inv{step // 3}",
        author=author,
        content=content,
        partial=rng.random() < 0.05 or None,
        timestamp=1000.0 + step // 2,  # never backwards, with ties
        actions=EventActions(state_delta=state),
    )


def _has_temp(event: Event) -> bool:
    """google-adk's in-memory service stores a re-delivered event carrying `temp:` keys twice (the
    stored one was trimmed, so the two differ); the ledger keeps one event per id."""
    return any(key.startswith("temp:") for key in event.actions.state_delta)


def _session_view(session: Session | None, with_time: bool = True) -> Any:
    if session is None:
        return None
    timed = with_time and (bool(session.events) or session.last_update_time < EVENT_TIMES_BELOW)
    return (
        session.app_name,
        session.user_id,
        session.id,
        session.state,
        [event.model_dump(mode="json") for event in session.events],
        session.last_update_time if timed else None,
    )


async def _outcome(call: Any) -> Any:
    try:
        return ("ok", await call)
    except Exception as error:  # the error's type is what both must agree on
        return ("error", type(error).__name__)


class Driver:
    """One service, and the session objects its caller holds (as an application would)."""

    def __init__(self, service: BaseSessionService, app: str):
        self.service = service
        self.app = app
        self.held: dict[tuple[str, str], Session] = {}

    async def step(self, op: tuple[Any, ...]) -> Any:
        kind, *args = op
        service, app = self.service, self.app
        if kind == "create":
            user, sid, state = args
            done = await _outcome(
                service.create_session(app_name=app, user_id=user, session_id=sid, state=state)
            )
            if done[0] == "ok":
                self.held[(user, sid)] = done[1]
                return ("ok", _session_view(done[1], with_time=False))
            return done
        if kind == "get":
            user, sid, config = args
            got = await service.get_session(app_name=app, user_id=user, session_id=sid, config=config)
            if got is not None and config is None:
                self.held[(user, sid)] = got
            return _session_view(got)
        if kind == "list":
            (user,) = args
            listed = await service.list_sessions(app_name=app, user_id=user)
            return [
                _session_view(s, with_time=s.last_update_time < EVENT_TIMES_BELOW) for s in listed.sessions
            ]
        if kind == "delete":
            user, sid = args
            await service.delete_session(app_name=app, user_id=user, session_id=sid)
            return None
        if kind == "append":
            user, sid, event = args
            session = self.held.get((user, sid)) or Session(id=sid, app_name=app, user_id=user)
            done = await _outcome(service.append_event(session, event.model_copy(deep=True)))
            result = done if done[0] == "error" else ("ok", done[1].model_dump(mode="json"))
            return result, _session_view(session, with_time=bool(session.events))
        if kind == "user_state":
            (user,) = args
            return await service.get_user_state(app_name=app, user_id=user)
        raise AssertionError(kind)


def _operations(seed: int) -> list[tuple[Any, ...]]:
    rng = random.Random(seed)
    deleted: set[tuple[str, str]] = set()
    ops: list[tuple[Any, ...]] = []
    last_event: tuple[str, str, Event] | None = None
    for step in range(OPERATIONS):
        user, sid = rng.choice(USERS), rng.choice(SESSION_IDS)
        roll = rng.random()
        if roll < 0.15 and (user, sid) not in deleted:
            state = {key: _value(rng) for key in rng.sample(KEYS, rng.randint(0, 3))}
            ops.append(("create", user, sid, state))
        elif roll < 0.25:
            config = rng.choice(
                [
                    None,
                    GetSessionConfig(num_recent_events=rng.randint(0, 4)),
                    GetSessionConfig(after_timestamp=1000.0 + rng.randint(0, OPERATIONS // 2)),
                    GetSessionConfig(num_recent_events=rng.randint(1, 3), after_timestamp=1000.0 + step // 3),
                ]
            )
            ops.append(("get", user, sid, config))
        elif roll < 0.30:
            ops.append(("list", rng.choice([*USERS, None])))
        elif roll < 0.33:
            ops.append(("delete", user, sid))
            deleted.add((user, sid))
        elif roll < 0.36:
            ops.append(("user_state", user))
        elif roll < 0.40 and last_event is not None and not _has_temp(last_event[2]):
            ops.append(("append", *last_event))  # a redelivery: idempotent
        else:
            event = _event(rng, step)
            last_event = (user, sid, event)
            ops.append(("append", user, sid, event))
    return ops


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_same_operations_same_results_as_google_adks_in_memory_service(database_url, seed):
    async def main() -> None:
        app = f"app-{uuid.uuid4().hex[:8]}"
        async with LedgerSessionService(database_url) as ledger:
            theirs, ours = Driver(InMemorySessionService(), app), Driver(ledger, app)
            for index, op in enumerate(_operations(seed)):
                expected = await theirs.step(op)
                got = await ours.step(op)
                assert got == expected, f"operation {index}: {op[0]} {op[1:3]}"

    asyncio.run(main())
