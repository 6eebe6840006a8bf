"""Digest and proof commands: `digest` (optionally signed), `keygen`, `prove` and `check-proof` (no database).

Exit status 1 when a digest is unusable (malformed, not signed by the trusted key of
`--public-key` or SESSIONLEDGER_DIGEST_PUBLIC_KEY, or signed with no trusted key to check it by):
that is a failed check, not a bad argument. `keygen` makes the key pair.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from sessionledger.workers.cli.app import (
    AsJson,
    BrokerUrl,
    DatabaseUrl,
    OnBehalfOf,
    cli,
    command,
    console,
    emit_json,
    errors,
    fail,
    reason,
    service_for,
    unknown_session,
)

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
    from sessionledger.infrastructure.audit.digest import Digest

PublicKey = Annotated[
    Path | None,
    typer.Option(
        "--public-key",
        help="PEM Ed25519 public key (default: SESSIONLEDGER_DIGEST_PUBLIC_KEY): every digest must "
        "carry its valid signature.",
    ),
]


NO_TRUSTED_KEY = "no trusted key (set SESSIONLEDGER_DIGEST_PUBLIC_KEY or pass --public-key)"


def read_digests(paths: list[Path], public_key: Path | None) -> list[Digest]:
    """The digests in `paths`, each signature checked with the trusted key: `public_key`, else the
    `digest_public_key` setting (exit 1 for a digest that key did not sign, or not signed at all).

    With no trusted key nothing can vouch for a signature, and a digest signed with an attacker's
    key would pass as well as the operator's: a signed digest is refused (exit 1, saying that its
    signature was not checked), and an unsigned one is read with a note on stderr saying so.
    """
    from sessionledger.infrastructure.audit.digest import (
        InvalidDigest,
        load_public_key,
        read_digest,
        trusted_public_key,
    )
    from sessionledger.infrastructure.settings import Settings

    key: Ed25519PublicKey | None
    try:
        if public_key is not None:
            key = load_public_key(public_key)
        else:
            setting = Settings().digest_public_key
            key = None if setting is None else trusted_public_key(setting)
        digests = [read_digest(path, key) for path in paths]
    except InvalidDigest as error:
        fail(str(error), status=1)
    if key is None:
        for found in digests:
            if found.signature is not None:
                fail(f"digest {found.name} is signed, but its signature was not checked: {NO_TRUSTED_KEY}", 1)
            errors.print(
                f"note: digest {found.name} is not signed: no signature was checked",
                highlight=False,
                soft_wrap=True,
            )
    return digests


def _read_anchor(path: Path) -> Digest:
    """The digest `prove` makes its proof against: the prover's own, its signature left to the
    proof's checker (exit 1 when it cannot be read)."""
    from sessionledger.infrastructure.audit.digest import InvalidDigest, read_digest

    try:
        return read_digest(path)
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
    from sessionledger.infrastructure.audit.digest import (
        InvalidDigest,
        load_private_key,
        take_digest,
        write_digest,
    )

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
    )


@command
def prove(
    session_id: Annotated[str, typer.Argument(help="The session the event is in.")],
    event_id: Annotated[str, typer.Argument(help="The event (a reply) to prove.")],
    digest: Annotated[
        Path | None,
        typer.Option("--digest", help="Prove against this digest (default: the session as it stands)."),
    ] = None,
    output: Annotated[
        Path | None, typer.Option("--output", help="Write the proof here (default: stdout).")
    ] = None,
    user: OnBehalfOf = None,
    database_url: DatabaseUrl = None,
    broker_url: BrokerUrl = None,
) -> None:
    """A self-contained proof that the event, and the window the model saw for it, are in the ledger."""
    from sessionledger.infrastructure.audit.anchored import NotExtended, proof_against

    anchor = None if digest is None else _read_anchor(digest)
    with service_for(database_url, broker_url) as service:
        records = service.records(session_id, user_id=user)
        if not records:
            unknown_session(service, session_id, user)
        try:
            text = proof_against(records, event_id, anchor)
        except NotExtended as error:
            fail(str(error), 1)
        except (ValueError, LookupError) as error:
            fail(reason(error))
    if output is None:
        sys.stdout.write(text)
        return
    try:
        output.write_text(text, encoding="utf-8")
    except OSError as error:
        fail(f"cannot write {output}: {error.strerror}")


@command
def keygen(
    out: Annotated[
        Path,
        typer.Option("--out", help="The private key's file (mode 0600); the public key goes to OUT.pub."),
    ] = Path("digest-key.pem"),
    as_json: AsJson = False,
) -> None:
    """Make an Ed25519 key pair for signing digests (`digest --sign-key OUT`, `--public-key OUT.pub`)."""
    from sessionledger.infrastructure.audit.digest import write_key_pair

    try:
        public_path, public_pem = write_key_pair(out)
    except OSError as error:
        fail(str(error) if isinstance(error, FileExistsError) else f"cannot write {out}: {error.strerror}")
    if as_json:
        emit_json({"private_key": str(out), "public_key": str(public_path), "public_key_pem": public_pem})
        return
    console.print(
        f"private key written to {out} (keep it secret: it signs digests, `digest --sign-key {out}`)\n"
        f"public key written to {public_path} (trust it: SESSIONLEDGER_DIGEST_PUBLIC_KEY={public_path}, "
        f"or `--public-key {public_path}`):\n{public_pem}",
        highlight=False,
        soft_wrap=True,
        end="",
    )


@cli.command(name="check-proof")
def check_proof_command(
    proof: Annotated[Path, typer.Argument(help="A proof written by `sessionledger prove`.")],
    digest: Annotated[Path, typer.Argument(help="The digest it was made against.")],
    public_key: PublicKey = None,
    as_json: AsJson = False,
) -> None:
    """Check a proof against a digest, with no database: exit 1 with the reason when it fails."""
    from sessionledger.infrastructure.audit.proof import InvalidProof, check_proof

    anchor = read_digests([digest], public_key)[0]
    try:
        text = proof.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        fail(f"cannot read {proof}: {error}")
    try:
        checked = check_proof(text, anchor)
    except InvalidProof as error:
        fail(f"proof {proof} does not check: {error}", status=1)
    positions = [record.position for record in checked.window]
    if as_json:
        emit_json(
            {
                "session_id": checked.session_id,
                "event_id": checked.event.event_id,
                "position": checked.event.position,
                "window": positions,
            }
        )
        return
    console.print(
        f"proof checks: event {checked.event.event_id} at position {checked.event.position} of session "
        f"{checked.session_id}, produced after a window of {len(positions)} records {positions}, "
        f"is in the ledger digest {anchor.name} commits to",
    )
