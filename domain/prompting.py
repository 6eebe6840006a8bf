"""Turning a session's window back into a prompt, the way Sentinel AI does (pure functions).

Sentinel injects the latest session summary as a *fact*: a separate knowledge block in the system
prompt, after its instructions. `window_as_openai` gives the window itself as
OpenAI chat messages ready to send.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any
from xml.sax.saxutils import escape

from sessionledger.domain.events import SessionEvent
from sessionledger.domain.messages import MessageType, to_openai

FACTS_INTRO = "Use the following knowledge and facts to enrich your responses."
FACT_NAME = "A summary of the conversation in this session"


def facts_block(session_id: str, summary: str | Mapping[str, Any]) -> str:
    """Sentinel's `<knowledge>` block holding one session summary (JSON text, a dict, or plain text)."""
    if not session_id:
        raise ValueError("session_id must not be empty")
    content = summary.strip() if isinstance(summary, str) else json.dumps(summary, ensure_ascii=False)
    return (
        "<knowledge>\n"
        "  <facts>\n"
        f"    <description>Information about session {escape(session_id)}</description>\n"
        "    <fact>\n"
        f"      <name>{FACT_NAME}</name>\n"
        f"      <content>{escape(content)}</content>\n"
        "    </fact>\n"
        "  </facts>\n"
        "</knowledge>"
    )


def latest_summary(events: Iterable[SessionEvent]) -> str | None:
    """The text of the newest synthetic summary (the assistant half of a compaction's pair), if any.

    Events are taken in the order given (the ledger's log order), so the last one found is the newest.
    """
    found = None
    for event in events:
        if event.is_synthetic and event.type is MessageType.ASSISTANT and (event.message.text or "").strip():
            found = event.message.text
    return found


def build_system_prompt(base_prompt: str, session_id: str, events: Iterable[SessionEvent]) -> str:
    """`base_prompt` followed by the latest summary as a fact; unchanged when there is no summary."""
    summary = latest_summary(events)
    if summary is None:
        return base_prompt
    knowledge = f"{FACTS_INTRO}\n{facts_block(session_id, summary)}"
    return f"{base_prompt.rstrip()}\n\n{knowledge}" if base_prompt.strip() else knowledge


def window_as_openai(
    events: Iterable[SessionEvent], system_prompt: str | None = None, *, include_synthetic: bool = True
) -> list[dict[str, Any]]:
    """The active window as OpenAI chat messages, after an optional system message.

    Archived events are left out. `include_synthetic=False` drops the summary pair too, for a caller
    that injects the summary as a fact with `build_system_prompt` instead.
    """
    messages = [
        event.message
        for event in events
        if not event.archived and (include_synthetic or not event.is_synthetic)
    ]
    head = [{"role": "system", "content": system_prompt}] if system_prompt else []
    return head + to_openai(messages)
