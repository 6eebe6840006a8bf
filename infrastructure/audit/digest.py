"""Ledger digests: a small document, kept outside the database, that commits to the whole ledger as
it stood, so that a rewrite by someone who can also recompute every hash after it is still caught.

A digest names, for every session, its head (last position, row hash and global position) and the
Merkle root of its row hashes (`domain.merkle`), with the highest global position and the time it
was taken. It is canonical JSON (`domain.hashing.canonical`), optionally signed with an Ed25519 key
the operator holds: the signature covers the document without its `signature` field. The format
is docs/proofs.md "Digests".
"""

from __future__ import annotations

import base64
import binascii
import os
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from itertools import groupby
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import load_pem_private_key, load_pem_public_key
from sessionledger.domain.audit_port import AuditLedger, RowHash
from sessionledger.domain.codec import format_timestamp, parse_timestamp
from sessionledger.domain.hashing import canonical
from sessionledger.domain.json_text import read_json
from sessionledger.domain.merkle import MerkleMountainRange

FORMAT = "sessionledger-digest/1"
_HEX64 = frozenset("0123456789abcdef")


class InvalidDigest(ValueError):
    """A digest that cannot be used: unreadable, malformed, or its signature does not verify."""


@dataclass(frozen=True, slots=True)
class SessionHead:
    """One session as a digest saw it: its last position, that record's row hash, and the Merkle
    root of its row hashes 1..position (all lowercase hex)."""

    position: int
    head: str
    root: str
    peaks: tuple[str, ...] | None = None
    """The Merkle mountain range's peaks (largest first; none in a digest of an older release):
    `verify --since` resumes the tree from them and hashes only the records added since."""
    global_position: int | None = None
    """The head record's global position (none in a digest of an older release): `verify --since`
    finds the head by the primary key, a cheaper lookup than by session and position."""

    def as_dict(self) -> dict[str, Any]:
        optional = {
            "peaks": None if self.peaks is None else list(self.peaks),
            "global_position": self.global_position,
        }
        given = {key: value for key, value in optional.items() if value is not None}
        return {"position": self.position, "head": self.head, "root": self.root, **given}

    def mountains(self) -> MerkleMountainRange:
        """The tree of the digest's records, ready to append to (`ValueError` without peaks)."""
        if self.peaks is None:
            raise ValueError("it holds no Merkle peaks (taken by an older release)")
        return MerkleMountainRange.resumed(self.position, [bytes.fromhex(peak) for peak in self.peaks])


@dataclass(frozen=True, slots=True)
class Digest:
    taken_at: datetime
    global_position: int
    sessions: Mapping[str, SessionHead]
    signature: str | None = None
    source: str = field(default="", compare=False)
    """Where the digest was read from (a file name), for messages; not part of the document."""

    def body(self) -> dict[str, Any]:
        """The document without its signature: what the signature covers."""
        return {
            "format": FORMAT,
            "taken_at": format_timestamp(self.taken_at),
            "global_position": self.global_position,
            "sessions": {sid: head.as_dict() for sid, head in self.sessions.items()},
        }

    def to_json(self) -> str:
        document = self.body()
        if self.signature is not None:
            document["signature"] = {"algorithm": "ed25519", "value": self.signature}
        return canonical(document) + "\n"

    def signed(self, key: Ed25519PrivateKey) -> Digest:
        signature = key.sign(canonical(self.body()).encode("utf-8"))
        return replace(self, signature=base64.b64encode(signature).decode("ascii"))

    def check_signature(self, key: Ed25519PublicKey) -> None:
        """`InvalidDigest` unless the digest carries a valid signature by `key`."""
        if self.signature is None:
            raise InvalidDigest(f"digest {self.name} is not signed")
        try:
            key.verify(base64.b64decode(self.signature, validate=True), canonical(self.body()).encode())
        except (InvalidSignature, binascii.Error):
            raise InvalidDigest(
                f"the signature of digest {self.name} does not verify with the trusted public key: "
                "it was signed with another key, forged, or the digest altered"
            ) from None

    @property
    def name(self) -> str:
        return self.source or f"taken at {format_timestamp(self.taken_at)}"


def take_digest(ledger: AuditLedger, *, now: datetime | None = None) -> Digest:
    """The digest of the ledger as it stands, in one snapshot."""
    taken_at = now or datetime.now(UTC)
    with ledger.audit_snapshot() as snapshot:
        top = snapshot.top()
        heads = dict(
            _heads(
                (sid, ((row.row_hash, row.global_position) for row in group))
                for sid, group in groupby(snapshot.row_hashes(), _sid)
            )
        )
    return Digest(taken_at, top, heads)


def _sid(row: RowHash) -> str:
    return str(row.session_id)


def _heads(
    chains: Iterable[tuple[str, Iterable[tuple[str, int | None]]]],
) -> Iterator[tuple[str, SessionHead]]:
    """Each session's head from its records' (row hash, global position), by position."""
    for session_id, records in chains:
        kept = list(records)
        if kept:
            mountains = MerkleMountainRange().extend(bytes.fromhex(row_hash) for row_hash, _ in kept)
            last, at = kept[-1]
            peaks = tuple(peak.hex() for peak in mountains.peaks)
            yield session_id, SessionHead(mountains.size, last, mountains.root().hex(), peaks, at)


PARTIAL = ".partial"
"""The suffix of a digest file being written (`write_digest` renames it when it is whole)."""


def write_digest(digest: Digest, path: Path) -> None:
    """Write the digest to `path` whole or not at all (a reader never sees half a digest)."""
    partial = path.with_name(path.name + PARTIAL)
    partial.write_text(digest.to_json(), encoding="utf-8")
    partial.replace(path)


def read_digest(path: Path, public_key: Ed25519PublicKey | None = None) -> Digest:
    """The digest in `path`, its signature checked when a key is given (`InvalidDigest` if not)."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise InvalidDigest(f"cannot read digest {path}: {error}") from None
    digest = parse_digest(text, str(path))
    if public_key is not None:
        digest.check_signature(public_key)
    return digest


def parse_digest(text: str, source: str = "") -> Digest:
    try:
        document = read_json(text)
        if document.get("format") != FORMAT:
            raise ValueError(f"its format is not {FORMAT}")
        signature = document.get("signature")
        if signature is not None and signature.get("algorithm") != "ed25519":
            raise ValueError("its signature is not ed25519")
        digest = Digest(
            taken_at=parse_timestamp(document["taken_at"]),
            global_position=count(document["global_position"]),
            sessions={sid: _session_head(head) for sid, head in document["sessions"].items()},
            signature=None if signature is None else str(signature["value"]),
            source=source,
        )
        for sid, head in digest.sessions.items():
            if head.global_position is not None and head.global_position > digest.global_position:
                raise ValueError(
                    f"session {sid}'s head is at global position {head.global_position}, "
                    f"past the digest's {digest.global_position}"
                )
        if digest.to_json() != text:
            raise ValueError("it is not the canonical text its fields give (edited by hand?)")
    except (ValueError, KeyError, TypeError, AttributeError) as error:
        raise InvalidDigest(f"digest {source or '(text)'} is malformed: {error}") from None
    return digest


def _session_head(head: Mapping[str, Any]) -> SessionHead:
    peaks, at = head.get("peaks"), head.get("global_position")
    parsed = SessionHead(
        count(head["position"]),
        hex_hash(head["head"]),
        hex_hash(head["root"]),
        None if peaks is None else tuple(hex_hash(peak) for peak in peaks),
        None if at is None else count(at),
    )
    if peaks is not None and parsed.mountains().root().hex() != parsed.root:
        raise ValueError(f"the peaks of a session at position {parsed.position} do not fold to its root")
    return parsed


def count(value: Any) -> int:
    """A position, version or size as a document spells it: an `int` (not a `bool`, not a float),
    never negative (`ValueError` for anything else). Proofs read theirs with it too."""
    if type(value) is not int or value < 0:
        raise ValueError(f"{value!r} is not a position or version")
    return value


def hex_hash(value: Any) -> str:
    """A sha256 as 64 lowercase hex digits (`ValueError` for anything else: one spelling only)."""
    if not isinstance(value, str) or len(value) != 64 or not _HEX64.issuperset(value):
        raise ValueError(f"{value!r} is not a sha256 in lowercase hex")
    return value


def load_private_key(path: Path) -> Ed25519PrivateKey:
    try:
        key = load_pem_private_key(_key_bytes(path), password=None)
    except (ValueError, TypeError) as error:
        raise InvalidDigest(f"{path} is not a PEM private key without a password: {error}") from None
    if not isinstance(key, Ed25519PrivateKey):
        raise InvalidDigest(f"{path} is not an Ed25519 private key")
    return key


def load_public_key(path: Path) -> Ed25519PublicKey:
    try:
        key = load_pem_public_key(_key_bytes(path))
    except ValueError as error:
        raise InvalidDigest(f"{path} is not a PEM public key: {error}") from None
    if not isinstance(key, Ed25519PublicKey):
        raise InvalidDigest(f"{path} is not an Ed25519 public key")
    return key


def trusted_public_key(setting: str) -> Ed25519PublicKey:
    """The key of the `digest_public_key` setting: the PEM itself, or the path of a PEM file."""
    if not setting.lstrip().startswith("-----BEGIN"):
        return load_public_key(Path(setting))
    try:
        key = load_pem_public_key(setting.strip().encode("ascii"))
    except (ValueError, UnicodeEncodeError) as error:
        raise InvalidDigest(f"SESSIONLEDGER_DIGEST_PUBLIC_KEY is not a PEM public key: {error}") from None
    if not isinstance(key, Ed25519PublicKey):
        raise InvalidDigest("SESSIONLEDGER_DIGEST_PUBLIC_KEY is not an Ed25519 public key")
    return key


def write_key_pair(path: Path) -> tuple[Path, str]:
    """A new Ed25519 key pair: the private key written to `path` (PEM, PKCS#8, unencrypted: what
    `--sign-key` reads; mode 0600), its public key to `path` + `.pub` (PEM: what `--public-key`
    and `digest_public_key` read). Returns that file and the public key's PEM. `FileExistsError`
    when either file exists: a signing key is never overwritten."""
    from cryptography.hazmat.primitives import serialization

    public_path = path.with_name(path.name + ".pub")
    for existing in (path, public_path):
        if existing.exists() or existing.is_symlink():
            raise FileExistsError(f"{existing} exists: a key is never overwritten")
    key = Ed25519PrivateKey.generate()
    private = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    public = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    _write_new(path, private, 0o600)
    _write_new(public_path, public, 0o644)
    return public_path, public.decode("ascii")


def _write_new(path: Path, data: bytes, mode: int) -> None:
    """Create `path` with `mode` from the start (never a moment with wider permissions)."""
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    with os.fdopen(descriptor, "wb") as file:
        file.write(data)


def _key_bytes(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as error:
        raise InvalidDigest(f"cannot read key {path}: {error.strerror}") from None


def latest_digest(directory: Path, public_key: Ed25519PublicKey | None = None) -> Digest | None:
    """The digest in the file of `directory` written last (`None`: it holds none), its signature
    checked when a key is given; files being written (`PARTIAL`) and hidden ones are left out.
    Only that file is read: a relay writing a digest a minute fills the directory with thousands,
    each holding every session's head. A newest file that is not a readable digest is an
    `InvalidDigest`, never passed over: a tampered digest must not go unnoticed."""
    try:
        paths = [
            path
            for path in directory.iterdir()
            if path.is_file() and not path.name.startswith(".") and not path.name.endswith(PARTIAL)
        ]
        newest = max(paths, key=lambda path: (path.stat().st_mtime_ns, path.name), default=None)
    except OSError as error:
        raise InvalidDigest(f"cannot read the digest directory {directory}: {error.strerror}") from None
    return None if newest is None else read_digest(newest, public_key)
