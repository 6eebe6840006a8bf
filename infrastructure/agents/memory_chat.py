"""`MemoryChat`: one model call, or a tool-calling loop, through the real `openai` client and advisors.

Every assistant message, tool calls included, and every tool result reaches the advisors' `after`
in order, a call together with its result (one `after` call, so `SessionMemory` stores the pair in
one transaction), which is what Spring AI Chat Memory leaves out. The recall tools are answered in
the loop; calls to any other tool end it and go back to the caller, who sends their results in its
next request. A streamed reply is stored once its stream is complete, never in part. One reply's
recall calls are bounded: at most `max_tool_calls_per_round` are run, the others answered with an
`Error:` result, and results too large for one stored event are cut to fit (`tool_results`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

from sessionledger.domain.filters import EventFilter
from sessionledger.domain.messages import (
    AssistantMessage,
    Message,
    ToolCall,
    ToolResponse,
    to_openai,
)
from sessionledger.infrastructure.agents.advisor import Advisor
from sessionledger.infrastructure.agents.recall import RecallTools
from sessionledger.infrastructure.agents.tool_results import fitted

if TYPE_CHECKING:
    import openai
    from openai import Stream
    from openai.types.chat import ChatCompletion, ChatCompletionChunk, ChatCompletionMessageParam

DEFAULT_MAX_TOOL_ROUNDS = 8
DEFAULT_MAX_TOOL_CALLS_PER_ROUND = 16
"""Recall calls run for one reply: a model asking for 2,000 searches at once gets 16 answers and an
`Error:` result for each of the others, instead of 2,000 searches and a results event over the
payload limit."""


class MemoryChat:
    """A chat-completions call wrapped by `advisors` (`before` in order, `after` in reverse)."""

    def __init__(
        self,
        client: openai.OpenAI,
        *advisors: Advisor,
        model: str,
        recall: RecallTools | None = None,
        max_tool_rounds: int = DEFAULT_MAX_TOOL_ROUNDS,
        max_tool_calls_per_round: int = DEFAULT_MAX_TOOL_CALLS_PER_ROUND,
    ) -> None:
        if client is None:
            raise ValueError("client must not be None")
        if not isinstance(model, str) or not model.strip():
            raise ValueError("model must be a non-empty string")
        for index, advisor in enumerate(advisors):
            if not isinstance(advisor, Advisor):
                raise ValueError(f"advisor {index} has no before() and after()")
        if recall is not None and not isinstance(recall, RecallTools):
            raise ValueError("recall must be a RecallTools or None")
        for name, bound in (
            ("max_tool_rounds", max_tool_rounds),
            ("max_tool_calls_per_round", max_tool_calls_per_round),
        ):
            if isinstance(bound, bool) or not isinstance(bound, int) or bound < 1:
                raise ValueError(f"{name} must be a positive integer")
        self._client = client
        self._advisors = advisors
        self._model = model
        self._recall = recall
        self._max_rounds = max_tool_rounds
        self._max_calls = max_tool_calls_per_round

    def complete(
        self,
        conversation_id: str,
        messages: Sequence[Message],
        *,
        user_id: str | None = None,
        event_filter: EventFilter | None = None,
        **kwargs: Any,
    ) -> ChatCompletion | Iterator[ChatCompletionChunk]:
        """The final `ChatCompletion`; with `stream=True`, an iterator of every round's chunks.

        At most `max_tool_rounds` model calls: when the last one still asks for recall tools, they
        are answered and stored (no call is left without its result) and that completion is returned.
        `kwargs` go to `chat.completions.create` (`tools` are offered beside the recall tools).
        """
        if not isinstance(conversation_id, str) or not conversation_id.strip():
            raise ValueError("conversation_id must be a non-empty string")
        if messages is None:
            raise ValueError("messages must not be None")
        if isinstance(messages, Message | str | bytes) or not all(isinstance(m, Message) for m in messages):
            raise ValueError("messages must be a list of Message values")
        for reserved in ("model", "messages"):
            if reserved in kwargs:
                raise ValueError(f"{reserved!r} is MemoryChat's to set, not a keyword argument")
        stream = kwargs.pop("stream", False) is True
        kwargs = self._with_tools(kwargs)
        prompt = list(messages)
        for advisor in self._advisors:
            prompt = advisor.before(conversation_id, prompt, user_id=user_id, event_filter=event_filter)
        if stream:
            return self._streamed(conversation_id, prompt, user_id, kwargs)
        round_number = 1
        while True:
            completion: ChatCompletion = self._client.chat.completions.create(
                model=self._model, messages=_wire(prompt), **kwargs
            )
            if not completion.choices:
                raise ValueError("the model returned no choices; nothing stored")
            reply = _from_completion(completion.choices[0].message)
            turn = self._answered(conversation_id, reply, user_id)
            self._after(conversation_id, turn, user_id)
            if len(turn) == 1 or round_number == self._max_rounds:
                return completion
            prompt = prompt + turn
            round_number += 1

    def _streamed(
        self, conversation_id: str, prompt: list[Message], user_id: str | None, kwargs: dict[str, Any]
    ) -> Iterator[ChatCompletionChunk]:
        for round_number in range(1, self._max_rounds + 1):
            reply = _Reply()
            opened = self._client.chat.completions.create(
                model=self._model, messages=_wire(prompt), stream=True, **kwargs
            )
            with cast("Stream[ChatCompletionChunk]", opened) as chunks:
                for chunk in chunks:
                    reply.add(chunk)
                    yield chunk
            if reply.finish_reason is None:
                raise RuntimeError("the model's stream ended before it finished; nothing of it was stored")
            turn = self._answered(conversation_id, reply.message(), user_id)
            self._after(conversation_id, turn, user_id)
            if len(turn) == 1 or round_number == self._max_rounds:
                return
            prompt = prompt + turn

    def _with_tools(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        if self._recall is None:
            return kwargs
        tools = list(kwargs.get("tools") or [])
        return {**kwargs, "tools": tools + self._recall.definitions()}

    def _answered(self, conversation_id: str, reply: Message, user_id: str | None) -> list[Message]:
        """`[reply]`, or `[reply, results]` when every call it makes is a recall tool's: the first
        `max_tool_calls_per_round` run, every other answered with an `Error:` (each call id needs a
        result), all of them cut to fit the payload limit."""
        recall = self._recall
        calls = reply.tool_calls
        if recall is None or not calls or any(call.name not in recall.names for call in calls):
            return [reply]
        user = user_id if user_id is not None else recall.owner_of(conversation_id)
        bound = self._max_calls
        results = [
            ToolResponse(
                call.id,
                call.name,
                recall.handle(call.name, call.arguments, session_id=conversation_id, user_id=user or "")
                if index < bound
                else f"Error: not run: at most {bound} tool calls are answered per reply, and this reply "
                f"made {len(calls)}; ask again for what you still need",
            )
            for index, call in enumerate(calls)
        ]
        return [reply, fitted(results, conversation_id, recall.max_payload_bytes)]

    def _after(self, conversation_id: str, turn: list[Message], user_id: str | None) -> None:
        for advisor in reversed(self._advisors):
            advisor.after(conversation_id, turn, user_id=user_id)


def _wire(prompt: list[Message]) -> list[ChatCompletionMessageParam]:
    """The prompt in the client's message format (the typed dicts `to_openai` builds)."""
    return cast("list[ChatCompletionMessageParam]", to_openai(prompt))


def _from_completion(message: Any) -> Message:
    """A completion's assistant message as a domain `Message` (`ValueError` for what it cannot be)."""
    calls = []
    for call in message.tool_calls or ():
        function = getattr(call, "function", None)
        if function is None or not isinstance(call.id, str) or not call.id:
            raise ValueError("the model produced a tool call that is not a function call with an id")
        calls.append(ToolCall(call.id, function.name, function.arguments or ""))
    return AssistantMessage(message.content, calls)


@dataclass
class _PartialCall:
    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


@dataclass
class _Reply:
    """A streamed reply put back together from its chunks."""

    content: list[str] = field(default_factory=list)
    calls: dict[int, _PartialCall] = field(default_factory=dict)
    finish_reason: str | None = None

    def add(self, chunk: ChatCompletionChunk) -> None:
        for choice in chunk.choices:
            if choice.index != 0:
                continue
            delta = choice.delta
            if delta.content:
                self.content.append(delta.content)
            for part in delta.tool_calls or ():
                call = self.calls.setdefault(part.index, _PartialCall())
                if part.id:
                    call.id = part.id
                if part.function is not None:
                    call.name += part.function.name or ""
                    call.arguments.append(part.function.arguments or "")
            if choice.finish_reason is not None:
                self.finish_reason = choice.finish_reason

    def message(self) -> Message:
        calls = []
        for index in sorted(self.calls):
            call = self.calls[index]
            if not call.id:
                raise ValueError(f"the model streamed tool call {index} without an id")
            calls.append(ToolCall(call.id, call.name, "".join(call.arguments)))
        return AssistantMessage("".join(self.content) if self.content else None, calls)
