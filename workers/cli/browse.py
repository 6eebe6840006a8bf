"""Read-only commands for people and scripts: `sessions` and `events`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer
from sessionledger.domain import format_event
from sessionledger.workers.cli.app import (
    AsJson,
    BrokerUrl,
    DatabaseUrl,
    OnBehalfOf,
    command,
    console,
    emit_json,
    fail,
    service_for,
    shown_time,
    time_column,
    unknown_session,
)

if TYPE_CHECKING:
    from sessionledger.domain import Session


def session_row(session: Session) -> dict[str, object]:
    from sessionledger.domain.codec import format_timestamp

    return {
        "id": session.id,
        "user_id": session.user_id,
        "app_name": session.app_name,
        "created_at": format_timestamp(session.created_at),
        "expires_at": format_timestamp(session.expires_at) if session.expires_at else None,
        "metadata": dict(session.metadata),
        "state": dict(session.state),
    }


@command
def sessions(
    user: Annotated[
        str | None,
        typer.Option("--user", help="Owner of the sessions (default: every user's, newest first)."),
    ] = None,
    app: Annotated[str | None, typer.Option("--app", help="Only this application.")] = None,
    limit: Annotated[
        int, typer.Option("--limit", min=1, help="Without --user: at most this many sessions a page.")
    ] = 50,
    page: Annotated[
        int, typer.Option("--page", min=1, help="Without --user: this page (1 is the newest).")
    ] = 1,
    database_url: DatabaseUrl = None,
    broker_url: BrokerUrl = None,
    as_json: AsJson = False,
) -> None:
    """List a user's sessions, oldest first; without --user every user's, newest first, a page at a time."""
    if user is not None and not user:
        fail("--user must not be empty")
    if user is not None and (limit, page) != (50, 1):
        fail("--limit and --page page through every user's sessions: give them without --user")
    from sessionledger.domain.filters import MAX_INT64

    offset = (page - 1) * limit
    if limit > MAX_INT64 or offset > MAX_INT64:
        fail(f"--page {page} of --limit {limit} starts past 2**63 - 1 sessions")
    with service_for(database_url, broker_url) as service:
        if user is None:
            found = service.recent_sessions(app_name=app, limit=limit, offset=offset)
        else:
            found = service.list_sessions(user, app_name=app)
        if as_json:
            emit_json([session_row(s) for s in found])
            return
        from rich.table import Table

        title = f"sessions of {user}" if user else f"sessions of every user, newest first, page {page}"
        table = Table(title=title)
        # an id is what the reader copies into the next command: folded onto more lines, never cut short
        table.add_column("session", overflow="fold")
        if user is None:
            table.add_column("user", overflow="fold")
        for heading in ("app", "created", "expires"):
            table.add_column(heading, no_wrap=True)
        table.add_column("window", justify="right", no_wrap=True)
        for session in found:
            table.add_row(
                session.id,
                *([] if user else [session.user_id]),
                session.app_name,
                shown_time(session.created_at, minutes=True),
                shown_time(session.expires_at, minutes=True) if session.expires_at else "never",
                str(len(service.get_messages(session.id))),
            )
        console.print(table)
        if user is None and len(found) == limit:
            console.print(f"more may follow: --page {page + 1}", highlight=False)


@command
def events(
    session_id: Annotated[str, typer.Argument(help="The session to show.")],
    all_events: Annotated[
        bool, typer.Option("--all", help="The whole ledger, archived events included.")
    ] = False,
    user: OnBehalfOf = None,
    database_url: DatabaseUrl = None,
    broker_url: BrokerUrl = None,
    as_json: AsJson = False,
) -> None:
    """Show a session's active window, or with --all every event it recorded."""
    from sessionledger.domain import EventFilter

    with service_for(database_url, broker_url) as service:
        if service.get_session(session_id, user_id=user) is None:
            unknown_session(service, session_id, user)
        found = service.get_events(session_id, EventFilter.all() if all_events else EventFilter.active())
        if as_json:
            from sessionledger.domain.codec import event_document

            emit_json([event_document(e) for e in found])
            return
        from rich.table import Column, Table

        title = f"{'ledger' if all_events else 'active window'} of {session_id}"
        # the id is what `replay --event` and `prove` take: folded onto more lines, never cut short
        table = Table(
            "#", Column("id", overflow="fold"), time_column("time"), "branch", "flags", "event", title=title
        )
        for index, event in enumerate(found, start=1):
            flags = " ".join(
                f for f, on in (("synthetic", event.is_synthetic), ("archived", event.archived)) if on
            )
            text = format_event(event)
            table.add_row(
                str(index),
                event.id,
                shown_time(event.timestamp),
                event.branch or "",
                flags,
                text if len(text) <= 160 else text[:157] + "...",
            )
        console.print(table)
