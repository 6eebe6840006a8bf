"""The summarization prompts: the default texts and the user-prompt layouts."""

from __future__ import annotations

from collections.abc import Sequence

from sessionledger.domain.events import SessionEvent
from sessionledger.domain.messages import MessageType
from sessionledger.domain.turns import format_event

DEFAULT_SHADOW_PROMPT = "Summarize the conversation we had so far."
"""The synthetic USER message that opens a summary turn."""

DEFAULT_SYSTEM_PROMPT = """\
You maintain the running summary of a conversation between a user and an AI assistant. Your \
summary takes the place of the original messages in the assistant's context window, so it must \
carry everything the assistant needs to continue the conversation coherently.

Guidelines:
- Keep the key facts, the decisions taken, the user's stated preferences and the outcomes reached.
- Note every question still open and every action still pending.
- Write a third-person narrative ("The user asked ...", "The assistant found ...").
- Be concise: no filler, no greetings, no remarks about the summary itself.
- When a prior summary is given, fold its content into the new summary naturally; do not repeat \
it word for word.
- Text marked as upcoming context is there only so the summary leads into it; do not summarize it."""

ADK_SYSTEM_PROMPT = """\
You compact the history of a conversation between a user and an AI agent. The history may begin \
with the summary of an earlier part of the conversation.

Write a summary that:
- begins with a line naming the language the user mainly writes in, for example \
"Conversation Language: English";
- restates what the user is asking for;
- records the key decisions, the information obtained so far, and the questions or tasks still \
unresolved;
- lists the exact names of every tool the agent called.

Reply with the summary only."""
"""The project's wording of google-adk's default compaction prompt (google-adk 2.13.0)."""

_UPCOMING = "=== UPCOMING CONTEXT (do not summarize \u2014 for continuity only) ==="


def recursive_prompt(
    prior: Sequence[SessionEvent], to_archive: Sequence[SessionEvent], overlap: Sequence[SessionEvent]
) -> str:
    """The user prompt of the recursive strategy, laid out byte for byte as docs/api.md "Strategies" shows.

    `prior` are the window's synthetic events: the text of each non-USER one is the prior summary.
    """
    parts: list[str] = []
    if prior:
        parts.append("=== PRIOR SUMMARY ===\n")
        parts.extend(f"{event.message.text or ''}\n" for event in prior if event.type != MessageType.USER)
        parts.append("\n")
    parts.append("=== CONVERSATION TO SUMMARIZE ===\n")
    parts.extend(f"{format_event(event)}\n" for event in to_archive)
    if overlap:
        parts.append(f"\n{_UPCOMING}\n")
        parts.extend(f"{format_event(event)}\n" for event in overlap)
    parts.append("\nPlease write the summary now:")
    return "".join(parts)


def history_prompt(events: Sequence[SessionEvent]) -> str:
    """The user prompt of the ADK strategies: the history, one `format_event` line per event."""
    return "\n".join(format_event(event) for event in events)
