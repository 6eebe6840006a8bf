"""What each audit page shows, as plain data: the templates render it, `Accept: application/json` gets it.

Every read goes through the service and the audit functions on behalf of the request's grant
(`Grant.reader`), so another user's session is as unknown here as anywhere (`Unknown`, a 404).
Long lists are paged (`PAGE` items), so that a page of a long session reads and renders a page.
Free text is shown with the passwords of any URL in it masked (`hide_passwords`).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from itertools import islice
from pathlib import Path
from typing import Any

from sessionledger.domain import EventFilter, MessageType, Session, format_event
from sessionledger.domain.access import Grant
from sessionledger.domain.codec import event_to_payload, format_timestamp
from sessionledger.domain.errors import SessionNotFound
from sessionledger.infrastructure import SessionService, audit
from sessionledger.infrastructure.audit.anchored import Anchor, anchor_findings, proof_against
from sessionledger.infrastructure.audit.digest import Digest, InvalidDigest, latest_digest, trusted_public_key
from sessionledger.infrastructure.audit.replay import model_view_at, window_at
from sessionledger.infrastructure.audit.since import verify_session_since, verify_since
from sessionledger.infrastructure.redaction import hide_passwords

__all__ = ["PAGE", "SESSIONS_PAGE", "AuditViews", "Unknown", "pages"]

PAGE = 100
"""Timeline entries, window events and archived events a page."""
SESSIONS_PAGE = 25
_SCAN = 200
"""Sessions an admin's search reads at a time, newest first."""


class Unknown(LookupError):
    """Nothing the grant may see by that name: a page answers 404."""


@dataclass(frozen=True)
class AuditViews:
    """The pages' data for one ledger: its service, and the directory its digests are kept in."""

    service: SessionService
    digest_dir: Path | None = None
    digest_public_key: str | None = None

    # --- sessions -------------------------------------------------------------------------------

    def sessions(
        self, grant: Grant, keyword: str, since: datetime | None, until: datetime | None, page: int
    ) -> dict[str, Any]:
        """The grant's sessions, newest first; with a keyword or times, those that have an event
        saying it (or whose id holds it) recorded then."""
        search = (
            EventFilter(keyword=keyword or None, start=since, end=until, page=0, page_size=1)
            if keyword or since or until
            else None
        )
        found = (
            s for s in self._visible_sessions(grant) if search is None or self._matches(s, search, keyword)
        )
        shown = list(islice(found, (page - 1) * SESSIONS_PAGE, page * SESSIONS_PAGE + 1))
        return {
            "user": grant.user_id,
            "admin": grant.admin,
            "keyword": keyword,
            "since": _time(since),
            "until": _time(until),
            "page": page,
            "more": len(shown) > SESSIONS_PAGE,
            "sessions": [self._session_row(s) for s in shown[:SESSIONS_PAGE]],
        }

    def _visible_sessions(self, grant: Grant) -> Iterator[Session]:
        if not grant.admin:
            yield from reversed(self.service.list_sessions(grant.user_id))
            return
        offset = 0
        while batch := self.service.recent_sessions(limit=_SCAN, offset=offset):
            yield from batch
            offset += len(batch)

    def _matches(self, session: Session, search: EventFilter, keyword: str) -> bool:
        if keyword and keyword.lower() in session.id.lower() and search.start is None and search.end is None:
            return True
        return bool(self.service.get_events(session.id, search))

    def _session_row(self, session: Session) -> dict[str, Any]:
        return {
            "id": session.id,
            "user_id": session.user_id,
            "app_name": session.app_name,
            "created_at": format_timestamp(session.created_at),
            "expires_at": None if session.expires_at is None else format_timestamp(session.expires_at),
            "version": self.service.event_version(session.id),
        }

    # --- one session ----------------------------------------------------------------------------

    def _session(self, grant: Grant, session_id: str) -> dict[str, Any] | None:
        """The session's row (`None`: deleted, which only an admin sees); `Unknown` when the grant
        may not see it or it has no records."""
        session = self.service.get_session(session_id, user_id=grant.reader)
        if session is not None:
            return self._session_row(session)
        if grant.admin and audit.session_length(self.service.ledger, session_id):
            return None
        raise Unknown(session_id)

    def timeline(self, grant: Grant, session_id: str, page: int) -> dict[str, Any]:
        """A page of the session's history, one entry per ledger record, oldest first."""
        session = self._session(grant, session_id)
        try:
            found = audit.timeline_page(self.service.ledger, session_id, (page - 1) * PAGE, page * PAGE)
        except SessionNotFound:
            raise Unknown(session_id) from None
        return {
            "session_id": session_id,
            "session": session,
            "records": found.last,
            **_paging(page, found.last),
            "entries": [_entry(entry.as_dict()) for entry in found.entries],
        }

    def record(self, grant: Grant, session_id: str, position: int, page: int) -> dict[str, Any]:
        """One record in full: a compaction with the events it archived (a page of them) and the
        summaries it wrote, a rewind with the events it hid."""
        self._session(grant, session_id)
        found = audit.timeline_page(self.service.ledger, session_id, position - 1, position)
        if not found.entries:
            raise Unknown(f"{session_id}@{position}")
        entry = _entry(found.entries[0].as_dict())
        listed = entry["details"].get("archived") or entry["details"].get("hidden") or []
        summaries = entry["details"].get("summaries", [])
        shown = listed[(page - 1) * PAGE : page * PAGE]
        described = audit.described_events(self.service.ledger, session_id, [*shown, *summaries])
        return {
            "session_id": session_id,
            "entry": entry,
            **_paging(page, len(listed)),
            "listed": [described[p] for p in shown if p in described],
            "summaries": [described[p] for p in summaries if p in described],
        }

    def window(self, grant: Grant, session_id: str, version: int | None, page: int | None) -> dict[str, Any]:
        """The active window replayed from the ledger as it stood at `version` (default: now),
        from the last compaction or rewind at or before it (`window_at`: a page of a long session
        reads its window, not its history); `latest` is the session's version now (`None` once
        deleted)."""
        session = self._session(grant, session_id)
        try:
            found = window_at(self.service.ledger, session_id, version)
        except SessionNotFound:
            raise Unknown(session_id) from None
        latest = self.service.event_version(session_id) if session is not None else None
        return {"session_id": session_id, "latest": latest, **_replayed(found, page)}

    def event(self, grant: Grant, session_id: str, event_id: str, page: int | None) -> dict[str, Any]:
        """The event, and for a reply what the model saw: the window replayed to just before it
        (as `window` replays it) and the summary injected into the system prompt."""
        self._session(grant, session_id)
        try:
            view = model_view_at(self.service.ledger, session_id, event_id)
        except LookupError:
            raise Unknown(f"{session_id}/{event_id}") from None
        reply = view.event.type is MessageType.ASSISTANT
        return {
            "session_id": session_id,
            "event": _event(view.event),
            "reply": reply,
            "model_saw": None
            if not reply
            else {
                "before": _replayed(view.before, page),
                "summary": _masked(view.summary),
                "facts": _masked(view.facts),
                "system_prompt": _masked(view.system_prompt),
            },
        }

    # --- checks and downloads -------------------------------------------------------------------

    def verify(self, grant: Grant, session_id: str, everything: bool = False) -> dict[str, Any]:
        """The session against the latest digest: when that holds the session, what was written
        since it (`verify_session_since`: the digest vouches for the rest, so the cost follows the
        records written since); else, or with `everything`, the whole chain and the stored window
        replayed (`verify`), and all its records against the digest."""
        self._session(grant, session_id)
        digest, problem = self._latest_digest()
        anchored: dict[str, Any] = {
            "digest": None if digest is None else _digest_row(digest),
            "problem": problem,
            "holds_session": digest is not None and session_id in digest.sessions,
        }
        if digest is not None and session_id in digest.sessions and not everything:
            try:
                since = verify_session_since(self.service.ledger, digest, session_id)
            except InvalidDigest as error:
                anchored["problem"] = str(error)
            else:
                broken = [f for f in since.findings if f.kind in set(Anchor)]
                anchored |= {"ok": not broken, "findings": [f.as_dict() for f in broken]}
                verification = _masked_dict(since.as_dict())
                return {
                    "session_id": session_id,
                    "scope": "since",
                    "vouched": digest.sessions[session_id].position,
                    "verification": verification,
                    "digest": anchored,
                }
        checked = audit.verify(self.service, session_id, user_id=grant.reader)
        if anchored["holds_session"]:
            hashes = [r.row_hash for r in self.service.records(session_id, user_id=grant.reader)]
            findings = anchor_findings(session_id, hashes, [digest])  # type: ignore[list-item]  # held: not None
            anchored |= {"ok": not findings, "findings": [f.as_dict() for f in findings]}
        else:
            anchored |= {"ok": None, "findings": []}
        return {
            "session_id": session_id,
            "scope": "all",
            "verification": _masked_dict(checked.as_dict()),
            "digest": anchored,
        }

    def ledger(self, grant: Grant) -> dict[str, Any]:
        """The whole ledger against the latest digest (`verify --since --all-heads` it: every head
        the digest holds looked up, a lookup per session): an admin's page."""
        if not grant.admin:
            raise Unknown("ledger")
        digest, problem = self._latest_digest()
        if digest is None:
            return {"digest": None, "problem": problem, "ok": None, "unchanged": 0, "checked": []}
        try:
            found = verify_since(self.service.ledger, digest, all_heads=True)
        except InvalidDigest as error:
            return {
                "digest": _digest_row(digest),
                "problem": str(error),
                "ok": False,
                "unchanged": 0,
                "checked": [],
            }
        return {
            "digest": _digest_row(digest),
            "problem": problem,
            "ok": found.ok,
            "unchanged": found.unchanged,
            "checked": [_masked_dict(r.as_dict()) for r in found.results],
        }

    def export(self, grant: Grant, session_id: str) -> Iterator[str]:
        """The session's export (docs/export-format.md), line by line."""
        self._session(grant, session_id)
        try:
            lines = audit.export_lines(self.service, session_id, user_id=grant.reader)
            first = next(lines)
        except (LookupError, StopIteration):
            raise Unknown(session_id) from None
        yield first + "\n"
        for line in lines:
            yield line + "\n"

    def proof(self, grant: Grant, session_id: str, event_id: str) -> str:
        """The event's proof: against the latest digest when that holds the session, else as the
        session stands (`ValueError` when the ledger does not extend that digest)."""
        self._session(grant, session_id)
        records = self.service.records(session_id, user_id=grant.reader)
        if not records:
            raise Unknown(session_id)
        digest, _ = self._latest_digest()
        anchor = digest if digest is not None and session_id in digest.sessions else None
        try:
            return proof_against(records, event_id, anchor)
        except LookupError:
            raise Unknown(f"{session_id}/{event_id}") from None

    def _latest_digest(self) -> tuple[Digest | None, str | None]:
        """The latest digest in the digest directory, or why there is none to check against."""
        if self.digest_dir is None:
            return None, "no digest directory (serve --digest-dir DIR)"
        try:
            key = None if self.digest_public_key is None else trusted_public_key(self.digest_public_key)
            found = latest_digest(self.digest_dir, key)
        except InvalidDigest as error:
            return None, str(error)
        return found, None if found is not None else f"no digest in {self.digest_dir}"


def pages(count: int) -> int:
    return max(1, -(-count // PAGE))


def _paging(page: int, count: int) -> dict[str, int]:
    return {"page": page, "pages": pages(count)}


def _time(moment: datetime | None) -> str | None:
    return None if moment is None else format_timestamp(moment)


def _masked(text: str | None) -> str | None:
    return None if text is None else hide_passwords(text)


def _masked_dict(data: dict[str, Any]) -> dict[str, Any]:
    for finding in data.get("findings", []):
        finding["detail"] = hide_passwords(finding["detail"])
    return data


def _entry(data: dict[str, Any]) -> dict[str, Any]:
    data["text"] = hide_passwords(data["text"])
    return data


def _event(event: Any) -> dict[str, Any]:
    payload = event_to_payload(event)
    return {
        "id": event.id,
        "type": str(event.type),
        "text": hide_passwords(format_event(event)),
        "timestamp": format_timestamp(event.timestamp),
        "synthetic": event.is_synthetic,
        "archived": event.archived,
        "branch": event.branch,
        "invocation_id": payload.get("invocation_id"),
    }


def _replayed(found: audit.WindowReplay, page: int | None) -> dict[str, Any]:
    """A replayed window, a page of its events (default: the last page, the newest); the state
    and the counts of archived and rewound events when it was replayed from the first record
    (else `None`: see `WindowReplay.complete`)."""
    count = len(found.window)
    page = pages(count) if page is None else min(page, pages(count))
    shown = range((page - 1) * PAGE, min(count, page * PAGE))
    summaries = {p: s for s in found.stand_ins for p in s.summaries}
    return {
        "version": found.version,
        "deleted": found.deleted,
        "size": count,
        **_paging(page, count),
        "window": [
            {
                "position": found.positions[i],
                **_event(found.window[i]),
                "stands_in_for": _stand_in(summaries.get(found.positions[i])),
            }
            for i in shown
        ],
        "state": dict(found.state) if found.complete else None,
        "archived": len(found.archived) if found.complete else None,
        "hidden": len(found.hidden) if found.complete else None,
    }


def _stand_in(stand_in: audit.StandIn | None) -> dict[str, Any] | None:
    """The compaction a summary was written by and the events it archived (which the
    compaction's page lists, earlier summaries among them)."""
    if stand_in is None:
        return None
    return {key: value for key, value in stand_in.as_dict().items() if key != "covers"}


def _digest_row(digest: Digest) -> dict[str, Any]:
    return {
        "name": Path(digest.name).name,
        "taken_at": format_timestamp(digest.taken_at),
        "sessions": len(digest.sessions),
        "signed": digest.signature is not None,
    }
