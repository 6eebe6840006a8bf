"""Digest commands: `digest` writes one (optionally signed); the options that read them back.

Exit status 1 when a digest is unusable (malformed, or its signature does not verify under
`--public-key`): that is a failed check, not a bad argument.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer
from sessionledger.infrastructure.audit.digest import (
    Digest,
    InvalidDigest,
    load_private_key,
    load_public_key,
    read_digest,
    take_digest,
    write_digest,
)
from sessionledger.workers.cli.app import (
    AsJson,
    BrokerUrl,
    DatabaseUrl,
    command,
    console,
    emit_json,
    fail,
    service_for,
)

PublicKey = Annotated[
    Path | None,
    typer.Option("--public-key", help="PEM Ed25519 public key: every digest must carry its valid signature."),
]


def read_digests(paths: list[Path], public_key: Path | None) -> list[Digest]:
    """The digests in `paths`, signatures checked with `public_key` when given (exit 1 if not)."""
    try:
        key = None if public_key is None else load_public_key(public_key)
        return [read_digest(path, key) for path in paths]
    except InvalidDigest as error:
        fail(str(error), status=1)


@command
def digest(
    output: Annotated[
        Path | None, typer.Option("--output", help="Write the digest to this file (default: stdout).")
    ] = None,
    sign_key: Annotated[
        Path | None, typer.Option("--sign-key", help="PEM Ed25519 private key to sign the digest with.")
    ] = None,
    database_url: DatabaseUrl = None,
    broker_url: BrokerUrl = None,
    as_json: AsJson = False,
) -> None:
    """Commit to the whole ledger as it stands: every session's head and Merkle root (keep it elsewhere)."""
    try:
        key = None if sign_key is None else load_private_key(sign_key)
    except InvalidDigest as error:
        fail(str(error))
    with service_for(database_url, broker_url) as service:
        taken = take_digest(service.ledger)
    if key is not None:
        taken = taken.signed(key)
    if output is None:
        sys.stdout.write(taken.to_json())
        return
    try:
        write_digest(taken, output)
    except OSError as error:
        fail(f"cannot write {output}: {error.strerror}")
    if as_json:
        emit_json({"output": str(output), "sessions": len(taken.sessions), "signed": key is not None})
        return
    console.print(
        f"digest of {len(taken.sessions)} sessions up to global position {taken.global_position} "
        f"written to {output}" + (" (signed)" if key is not None else ""),
        markup=False,
    )
