"""The ingest wire format: what travels on the broker between a publisher and the workers.

Two layers, both defined here only: an event's line (`encode_event`: one JSON document per event,
its payload the ledger's canonical text, the publisher's identity stamped on it, and the trace
context of its `publish()` span when there is one (`"trace"`, a propagator's carrier); read back by
`decode_event`, `decode_published` and `decode_draft`), and the Celery (protocol 2) task message
that carries a list of lines (`task_message`: its headers and JSON body, built without a Celery
app; `read_json_body`: its body read back as kombu's `json` serializer reads it). The publisher
writes lines and messages; the workers read them (`tasks.py`) and the dead-letter tools send
them again (`dlq.py`); each imports the format from here, not from the other.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from json.encoder import encode_basestring
from typing import Any

import orjson
from kombu.utils import json as kombu_json
from sessionledger.domain.codec import event_from_payload, validated_event
from sessionledger.domain.events import SessionEvent
from sessionledger.domain.json_text import read_json
from sessionledger.domain.records import Draft, event_draft
from sessionledger.domain.sessions import holds_temp
from sessionledger.infrastructure.service import append_draft

_CELERY_EMBED = {"callbacks": None, "errbacks": None, "chain": None, "chord": None}
_ORIGIN = f"publisher@{socket.gethostname()}:{os.getpid()}"


@dataclass(frozen=True, slots=True)
class PublisherIdentity:
    """Whom a publisher publishes for: the ingest workers store its events only in sessions of
    that user and/or app. Both `None` is an unbound publisher, which may write to any session."""

    user_id: str | None = None
    app_name: str | None = None

    def __post_init__(self) -> None:
        for name in ("user_id", "app_name"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, str) or not value.strip()):
                raise ValueError(f"{name} must be a non-empty string or None")

    @property
    def bound(self) -> bool:
        return self.user_id is not None or self.app_name is not None

    def as_dict(self) -> dict[str, str]:
        return {name: value for name in ("user_id", "app_name") if (value := getattr(self, name)) is not None}

    def __str__(self) -> str:
        """`user 'alice' and app 'chat'`, as a dead letter's reason names it."""
        named = [("user", self.user_id), ("app", self.app_name)]
        return " and ".join(f"{what} {value!r}" for what, value in named if value is not None) or "no one"


UNBOUND = PublisherIdentity()


def encode_event(event: SessionEvent, identity: PublisherIdentity = UNBOUND) -> str:
    """One event as it travels to the ingest workers: a JSON document of its own.

    Each event is its own document so that one malformed event is rejected alone. Its payload is
    the ledger's canonical text, so `publish()` sends the text it checked (`append_draft`). A bound
    publisher's identity travels in each document (`"identity"`); a document without one (an
    unbound publisher's, or one from before identities existed) is ingested as before.
    """
    return event_line(event, event_draft(event).text, identity)


def event_line(
    event: SessionEvent,
    payload_text: str,
    identity: PublisherIdentity,
    trace: Mapping[str, str] | None = None,
) -> str:
    """`encode_event`'s line for an event whose canonical payload text is already made (`publish()`
    has it from `append_draft`, the check it makes anyway: the event is not encoded twice); `trace`
    is the trace context of the `publish()` span (`tracing.carrier_of`), `None` for none."""
    ids = f'"id":{encode_basestring(event.id)},"session_id":{encode_basestring(event.session_id)}'
    stamp = f',"identity":{json.dumps(identity.as_dict(), separators=(",", ":"))}' if identity.bound else ""
    if trace:
        stamp += f',"trace":{json.dumps(trace, separators=(",", ":"))}'
    return f'{{{ids},"event":{payload_text}{stamp}}}'


class UndecodableEvent(ValueError):
    """A line that `decode_event` could not turn into an event; `session_id` if the line names one."""

    def __init__(self, reason: str, session_id: str | None) -> None:
        super().__init__(reason)
        self.session_id = session_id


def decode_event(line: str) -> SessionEvent:
    """The event `encode_event` encoded, validated as anything from outside the process is.

    Raises `UndecodableEvent` saying why (malformed JSON, or an invalid event) and carrying the
    session id the line names, if any, so that a rejected event can still be traced to its session.
    """
    return decode_published(line)[0]


def decode_published(line: str) -> tuple[SessionEvent, PublisherIdentity]:
    """`decode_event`, and the identity of the publisher that encoded it (`UNBOUND` when it has none).

    An identity that is not an object of non-empty `user_id` / `app_name` strings makes the line
    an `UndecodableEvent`: a line that names an identity is never read as unbound.
    """
    event, identity, _ = _published(line)
    return event, identity


def _published(line: str) -> tuple[SessionEvent, PublisherIdentity, Mapping[str, str] | None]:
    """`decode_published`, and the trace context the line carries (`None` for none, or one that
    is not an object of strings: a trace context is advice, never a reason to refuse an event)."""
    try:
        document = read_json(line)
    except ValueError as error:
        raise UndecodableEvent(f"malformed JSON: {error}", None) from error
    session_id = document.get("session_id") if isinstance(document, dict) else None
    session_id = session_id if isinstance(session_id, str) else None
    try:
        if not isinstance(document, dict):
            raise ValueError("an event must be a JSON object")
        event = event_from_payload(
            str(document["session_id"]), str(document["id"]), document["event"], validate=True
        )
        return event, _identity(document.get("identity")), _trace(document.get("trace"))
    except (KeyError, TypeError, ValueError) as error:
        raise UndecodableEvent(f"invalid event: {error}", session_id) from error


Traced = tuple[Draft, PublisherIdentity, Mapping[str, str] | None]
"""A line's event drafted for the ledger, its publisher's identity, and the trace context of its
`publish()` span (`None` for none)."""


def decode_draft(line: str) -> Traced:
    """`decode_published`, with the event drafted as `append_draft` drafts it (its size aside,
    which `SessionService.ingest` checks), and the trace context the line carries:
    `UndecodableEvent` for any line that `decode_published` or `append_draft` refuses.

    A line exactly as `encode_event` writes it (any publisher's) is parsed once, by orjson, and
    the event is built and drafted from that parse: the event's canonical text must be the line's
    payload byte for byte, which also proves that orjson read every value exactly (it reads an
    integer beyond 64 bits as a float, which would print otherwise). Any other line takes the
    general path: `decode_published`, then `append_draft`.
    """
    fast = _drafted(line)
    if fast is not None:
        return fast
    event, identity, trace = _published(line)
    try:
        return append_draft(event, sys.maxsize), identity, trace
    except ValueError as error:
        raise UndecodableEvent(f"invalid event: {error}", event.session_id) from error


def _drafted(line: str) -> Traced | None:
    """`decode_draft`'s one parse of a line as `encode_event` writes it; `None` for any other line."""
    try:
        document = orjson.loads(line)
        session_id, event_id = document["session_id"], document["id"]
        if type(session_id) is not str or type(event_id) is not str:
            return None
        event, payload = validated_event(session_id, event_id, document["event"])
        if holds_temp(event.state_delta):
            return None  # `append_draft` drops them: not what the line says
        identity = _identity(document.get("identity"))
        trace = _trace(document.get("trace"))
        draft = event_draft(event, payload)
    except Exception:  # the general path says what is wrong, in its own words
        return None
    if event_line(event, draft.text, identity, trace) != line:
        return None
    return draft, identity, trace


def _identity(named: Any) -> PublisherIdentity:
    if named is None:
        return UNBOUND
    if (
        not isinstance(named, dict)
        or not named
        or not set(named) <= {"user_id", "app_name"}
        or not all(isinstance(value, str) for value in named.values())
    ):
        raise ValueError(f"identity must be an object with user_id and/or app_name, not {named!r}")
    return PublisherIdentity(**named)


def _trace(carried: Any) -> Mapping[str, str] | None:
    if not isinstance(carried, dict) or not all(
        isinstance(key, str) and isinstance(value, str) for key, value in carried.items()
    ):
        return None
    return carried


def session_of_line(line: str) -> str | None:
    """The session an encoded event belongs to, if its line names one (valid event or not)."""
    try:
        return decode_event(line).session_id
    except UndecodableEvent as error:
        return error.session_id


def task_message(
    task: str, args: list[Any], kwargs: dict[str, Any] | None = None, **headers: Any
) -> tuple[dict[str, Any], bytes]:
    """Headers and JSON body of a Celery (protocol 2) task message, built without a Celery app."""
    task_id = str(uuid.uuid4())
    base = {
        "lang": "py",
        "task": task,
        "id": task_id,
        "root_id": task_id,
        "parent_id": None,
        "group": None,
        "retries": 0,
        "eta": None,
        "expires": None,
        "timelimit": [None, None],
        "argsrepr": f"<{len(args[0]) if args and isinstance(args[0], list) else len(args)} items>",
        "kwargsrepr": "{}",
        "origin": _ORIGIN,
        "ignore_result": True,
    }
    return {**base, **headers}, _json_body([args, kwargs or {}, _CELERY_EMBED])


def _json_body(value: Any) -> bytes:
    """`value` as JSON: by orjson when it holds nothing but strings, integers, `None`, booleans,
    lists and dicts (an ingest batch: 2,000 lines in 2 ms, where `json` takes 13), whose JSON the
    two write alike; by `json` otherwise (orjson writes NaN as null and refuses big integers)."""
    if _plain(value):
        try:
            return orjson.dumps(value)
        except orjson.JSONEncodeError:
            pass
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


def read_json_body(data: bytes | str) -> Any:
    """A task message's JSON body, as kombu's `json` serializer reads it: by orjson (an ingest
    batch of 2,000 lines in 2 ms, where `json` takes 8, and Celery reads each message twice)
    when what it read is plain (`_plain`: no number it may have read inexactly, no kombu-tagged
    value), else by kombu's own reader."""
    try:
        value = orjson.loads(data)
    except orjson.JSONDecodeError:
        return kombu_json.loads(data)
    return value if _plain(value) else kombu_json.loads(data)


def _plain(value: Any) -> bool:
    """Nothing but strings, integers within 64 bits, `None`, booleans, and lists and dicts of
    them, with no kombu type tag (`__type__`): the values orjson and `json` read and write alike."""
    pending = [value]
    while pending:
        item = pending.pop()
        kind = type(item)
        if kind is str or kind is bool or item is None:
            continue
        if kind is int:
            if not -(2**63) <= item < 2**63:
                return False
        elif kind is list:
            pending.extend(item)
        elif kind is dict:
            if "__type__" in item:
                return False
            pending.extend(item.values())
        else:
            return False
    return True
