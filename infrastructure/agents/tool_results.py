"""Tool results cut to fit one stored event: the ledger refuses an event over its payload limit, and a
refused results event would lose the model's reply that asked for them (issue 25)."""

from __future__ import annotations

from collections.abc import Sequence

from sessionledger.domain.events import SessionEvent
from sessionledger.domain.hashing import canonical
from sessionledger.domain.ids import MAX_ID_LENGTH
from sessionledger.domain.messages import Message, ToolResponse, ToolResponseMessage
from sessionledger.domain.records import event_draft

HEADROOM = 2 * MAX_ID_LENGTH * 4 + 256
"""Bytes kept free for what the advisor that stores the results may add to the event measured here:
an event id and a branch of up to `MAX_ID_LENGTH` characters of up to 4 bytes each, and some more."""


def fitted(results: Sequence[ToolResponse], session_id: str, max_payload_bytes: int) -> Message:
    """The results as one message whose stored event is within `max_payload_bytes`.

    Results that fit are kept whole; when they do not, the room left is shared out, the smallest
    results kept whole first, and each larger one cut to its share, ending with
    `... [cut: N of M bytes shown]` so the model (and a reader of the log) knows it was cut.
    """
    message = ToolResponseMessage(list(results))
    room = max_payload_bytes - HEADROOM - _event_size(results, session_id, "")
    sizes = [_json_size(result.content) for result in results]
    if sum(sizes) <= room:
        return message
    shares = _shares(sizes, max(room, 0))
    return ToolResponseMessage(
        [
            result if size <= share else _with_content(result, _cut(result.content, share))
            for result, size, share in zip(results, sizes, shares, strict=True)
        ]
    )


def _event_size(results: Sequence[ToolResponse], session_id: str, content: str) -> int:
    """The payload bytes of the results' event with every content replaced by `content`."""
    emptied = ToolResponseMessage([_with_content(result, content) for result in results])
    return event_draft(SessionEvent(session_id=session_id, message=emptied)).size


def _with_content(result: ToolResponse, content: str) -> ToolResponse:
    return ToolResponse(result.id, result.name, content)


def _json_size(text: str) -> int:
    """Bytes `text` takes inside the stored JSON (escapes included, quotes not)."""
    return len(canonical(text).encode()) - 2


def _shares(sizes: list[int], room: int) -> list[int]:
    """Each result's share of `room`: the smallest take what they need, the rest split what is left."""
    shares = [0] * len(sizes)
    left = room
    order = sorted(range(len(sizes)), key=sizes.__getitem__)
    for taken, index in enumerate(order):
        share = min(sizes[index], left // (len(order) - taken))
        shares[index] = share
        left -= share
    return shares


def _cut(text: str, share: int) -> str:
    """The longest start of `text` that, with its marker, takes at most `share` bytes in JSON (the
    marker alone when even that does not fit: the result still says what happened)."""
    total = len(text.encode())
    room = share - _json_size(_marker(total, total))
    low, high = 0, len(text)
    while low < high:  # the longest prefix within room: JSON size grows with the prefix
        middle = (low + high + 1) // 2
        if _json_size(text[:middle]) <= room:
            low = middle
        else:
            high = middle - 1
    kept = text[:low]
    return kept + _marker(len(kept.encode()), total)


def _marker(shown: int, total: int) -> str:
    return f"... [cut: {shown} of {total} bytes shown]"
