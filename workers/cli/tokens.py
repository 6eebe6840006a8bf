"""`sessionledger token create|revoke`: the tokens of `sessionledger serve` (audit page, HTTP API).

A token is printed once, as the last line of `create`'s output, and stored only as the hash of its
secret; after `revoke` it opens nothing (its row is kept, revoked).
"""

from __future__ import annotations

import sys
from typing import Annotated

import typer
from sessionledger.workers.cli.app import AsJson, DatabaseUrl, cli, emit_json, fail, storage_for

__all__ = ["tokens"]

tokens = typer.Typer(
    help="Tokens for `sessionledger serve` (the audit page, the HTTP session API).", no_args_is_help=True
)
cli.add_typer(tokens, name="token")


@tokens.command("create")
def create(
    user: Annotated[str, typer.Option("--user", help="The user whose sessions the token reads.")],
    admin: Annotated[bool, typer.Option("--admin", help="Read every user's sessions.")] = False,
    write: Annotated[
        bool,
        typer.Option("--write", help="Also write the user's sessions through the HTTP session API."),
    ] = False,
    database_url: DatabaseUrl = None,
    as_json: AsJson = False,
) -> None:
    """Make a token and print it (the last line): it is shown this once, and stored hashed."""
    from datetime import UTC, datetime

    from sessionledger.domain.access import Grant, issue

    if not user.strip():
        fail("--user must not be empty")
    token, stored = issue(Grant(user, admin, write), datetime.now(UTC))
    with storage_for(database_url, create=True) as storage:  # tokens are written: migrate if need be
        storage.access_tokens.add(stored)
    if as_json:
        emit_json({"user": user, "admin": admin, "write": write, "token_id": stored.token_id, "token": token})
        return
    who = "every user's sessions (admin)" if admin else f"the sessions of user {user}"
    if write:
        who += f", writing user {user}'s"
    sys.stdout.write(f"a token for {who}; it is shown once, keep it secret:\n{token}\n")


@tokens.command("revoke")
def revoke(
    token: Annotated[str, typer.Argument(help="The token to revoke.")],
    database_url: DatabaseUrl = None,
    as_json: AsJson = False,
) -> None:
    """Revoke a token: it opens nothing from now on (the record of it is kept)."""
    from sessionledger.domain.access import parse_token

    try:
        token_id, _ = parse_token(token)
    except ValueError as error:
        fail(str(error))
    with storage_for(database_url, create=True) as storage:
        revoked = storage.access_tokens.revoke(token_id)
    if as_json:
        emit_json({"token_id": token_id, "revoked": revoked})
    elif revoked:
        sys.stdout.write(f"token sl_{token_id} revoked\n")
    if not revoked:
        fail(f"no token sl_{token_id} to revoke (unknown, or revoked already)")
