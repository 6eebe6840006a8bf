"""The ledger's hashing: the canonical JSON text a record's content is stored and hashed as, and
the row hash that chains each record to its predecessor.

The hash chain covers a record's content and its place, so an edit or a deletion anywhere shows
up in `chain.chain_problems`. These are functions of plain values: records (`records.py`) place
themselves with them, and audits recompute them.
"""

from __future__ import annotations

import functools
import hashlib
import json
from datetime import datetime
from json.encoder import encode_basestring
from typing import Any

import orjson
from sessionledger.domain.codec import format_timestamp

GENESIS_HASH = "0" * 64
"""The `prev_hash` of a session's first record."""


_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
"""One encoder for every record: `json.dumps` with options builds a new one per call."""


def canonical(obj: Any) -> str:
    """The one JSON text a value hashes and is stored as: sorted keys, no spaces, no NaN.

    The text is `json`'s (`_CANONICAL`), which every stored hash was computed over. orjson writes
    the same text ten times faster (1 KB message: 12 -> 1 us) for every value but floats, whose
    shortest form it spells differently (`1e16`, not `1e+16`): a value holding none is encoded by
    orjson, any other (and anything orjson refuses: big integers, lone surrogates, non-str keys,
    other types) by `json` (tests/unit/test_canonical_json.py holds the two to the same text).
    """
    if not _holds_float(obj):
        text = canonical_without_floats(obj)
        if text is not None:
            return text
    try:
        return _CANONICAL.encode(obj)
    except (TypeError, ValueError) as error:
        raise ValueError(f"not JSON-serializable: {error}") from None


def canonical_without_floats(obj: Any) -> str | None:
    """`canonical(obj)` of a value its caller knows to hold no float, without the search for one
    (a few microseconds of every append): orjson's text, which is `json`'s for such a value;
    `None` when orjson refuses it (`canonical` then has `json` write it, or says why not)."""
    try:
        return orjson.dumps(obj, option=orjson.OPT_SORT_KEYS).decode()
    except orjson.JSONEncodeError:
        return None


_NO_FLOAT = {str, int, bool, type(None)}
FLOAT_SEARCH_LIMIT = 100_000
"""Values `_holds_float` looks at before it gives up (and says yes: `json` then writes the text)."""


def _holds_float(value: Any) -> bool:
    """Whether a float is anywhere in `value` (dict values and list or tuple items, nested); also
    yes past `FLOAT_SEARCH_LIMIT` values, which bounds the search of a value that contains itself."""
    pending = [value]
    pop, extend = pending.pop, pending.extend
    for _ in range(FLOAT_SEARCH_LIMIT):
        if not pending:
            return False
        item = pop()
        if type(item) in _NO_FLOAT:
            continue
        if isinstance(item, dict):
            extend(item.values())
        elif isinstance(item, list | tuple):
            extend(item)
        elif isinstance(item, float):
            return True
    return True


def sha256_hex(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def row_hash(
    prev_hash: str,
    session_id: str,
    position: int,
    version: int,
    event_id: str | None,
    kind: str,
    occurred_at: datetime,
    content_hash: str,
    recorded_at: datetime | None = None,
) -> str:
    """`sha256(prev_hash + "\\n" + canonical(header))`: chains a record to its predecessor.

    The header is `canonical({session_id, position, version, event_id, kind, occurred_at,
    recorded_at, content_hash})`, written out directly (keys in sorted order): it is hashed on
    every append. Without `recorded_at` it is the header of the records written before the
    recording time was hashed (docs/architecture.md "Hash chain"), which still verify.
    """
    occurred = format_timestamp(occurred_at)  # first: an event's time was just formatted (its payload)
    recorded = "" if recorded_at is None else f'"recorded_at":"{_recorded_text(recorded_at)}",'
    header = (
        f'{{"content_hash":"{content_hash}","event_id":{_json_string(event_id)},"kind":"{kind}",'
        f'"occurred_at":"{occurred}","position":{int(position)},{recorded}'
        f'"session_id":{_json_string(session_id)},"version":{int(version)}}}'
    )
    return sha256_hex(prev_hash + "\n" + header)


_recorded_text = functools.lru_cache(maxsize=64)(format_timestamp)
"""`format_timestamp` of a `recorded_at`: a write places all its records at one time (a batch:
thousands), formatted once."""


def _json_string(value: str | None) -> str:
    """A string (or None) as canonical JSON, exactly as `canonical` writes it inside a document
    (the encoder's own string function, without its per-call dispatch: it runs per record)."""
    return "null" if value is None else encode_basestring(value)
