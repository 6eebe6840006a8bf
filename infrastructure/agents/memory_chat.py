"""`MemoryChat` and `AsyncMemoryChat`: one model call, or a tool-calling loop, through a Chat
Completions client and advisors.

Every assistant message, tool calls included, and every tool result reaches the advisors' `after`
in order, a call together with its result (one `after` call, so `SessionMemory` stores the pair in
one transaction), which is what Spring AI Chat Memory leaves out. The recall tools are answered in
the loop; calls to any other tool end it and go back to the caller, who sends their results in its
next request. A streamed reply is stored once its stream is complete, never in part. One reply's
recall calls are bounded: at most `max_tool_calls_per_round` are run, the others answered with an
`Error:` result, and results too large for one stored event are cut to fit (`tool_results`).

The client is anything with the OpenAI Chat Completions surface, `client.chat.completions.create`
(`openai.OpenAI`, `openai.AzureOpenAI`, an `OpenAI` pointed at a vLLM, Ollama or LiteLLM endpoint);
nothing else of it is used. The rules (what is sent, which calls are answered, what is stored, when
the loop ends) live in `_ChatRules`; the two classes only wait for the client and the advisors,
one synchronously, the other on the event loop.
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, TypeVar, cast

from sessionledger.domain.filters import EventFilter
from sessionledger.domain.messages import (
    AssistantMessage,
    Message,
    ToolCall,
    ToolResponse,
    to_openai,
)
from sessionledger.infrastructure.agents.advisor import Advisor, AsyncAdvisor
from sessionledger.infrastructure.agents.pacing import take_turn
from sessionledger.infrastructure.agents.recall import AsyncRecallTools, RecallTools
from sessionledger.infrastructure.agents.tool_results import fitted

if TYPE_CHECKING:
    from openai.types.chat import ChatCompletion, ChatCompletionChunk, ChatCompletionMessageParam

DEFAULT_MAX_TOOL_ROUNDS = 8
DEFAULT_MAX_TOOL_CALLS_PER_ROUND = 16
"""Recall calls run for one reply: a model asking for 2,000 searches at once gets 16 answers and an
`Error:` result for each of the others, instead of 2,000 searches and a results event over the
payload limit."""


A = TypeVar("A", Advisor, AsyncAdvisor)
T = TypeVar("T", RecallTools, AsyncRecallTools)


class _ChatRules(Generic[A, T]):
    """What both chat classes decide: the checked call, the request's tools, which recall calls a
    reply has answered, the results stored with it and when the loop ends."""

    _ASYNC = False
    _RECALL: type[Any] = RecallTools

    def __init__(
        self,
        client: Any,
        *advisors: A,
        model: str,
        recall: T | None = None,
        max_tool_rounds: int = DEFAULT_MAX_TOOL_ROUNDS,
        max_tool_calls_per_round: int = DEFAULT_MAX_TOOL_CALLS_PER_ROUND,
    ) -> None:
        """`client` needs only `client.chat.completions.create` (see the module's docstring)."""
        if client is None:
            raise ValueError("client must not be None")
        # looked up once here, not first inside a turn: `openai` imports its chat resources when
        # `chat` and `completions` are first read (tens of ms that stalled the first turn's loop)
        if not callable(getattr(getattr(getattr(client, "chat", None), "completions", None), "create", None)):
            raise ValueError("client has no chat.completions.create (the Chat Completions surface)")
        if not isinstance(model, str) or not model.strip():
            raise ValueError("model must be a non-empty string")
        for index, advisor in enumerate(advisors):
            if not _advises(advisor, self._ASYNC):
                kind = "coroutine" if self._ASYNC else "synchronous"
                raise ValueError(f"advisor {index} has no {kind} before() and after()")
        if recall is not None and not isinstance(recall, self._RECALL):
            raise ValueError(f"recall must be a {self._RECALL.__name__} or None")
        for name, bound in (
            ("max_tool_rounds", max_tool_rounds),
            ("max_tool_calls_per_round", max_tool_calls_per_round),
        ):
            if isinstance(bound, bool) or not isinstance(bound, int) or bound < 1:
                raise ValueError(f"{name} must be a positive integer")
        self._client = client
        self._advisors: tuple[A, ...] = advisors
        self._model = model
        self._recall = recall
        self._max_rounds = max_tool_rounds
        self._max_calls = max_tool_calls_per_round

    def _request(
        self, conversation_id: str, messages: Sequence[Message], kwargs: dict[str, Any]
    ) -> tuple[bool, dict[str, Any]]:
        """Whether the call streams, and the keyword arguments of every `create` (tools added)."""
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
        if self._recall is None:
            return stream, kwargs
        tools = list(kwargs.get("tools") or [])
        return stream, {**kwargs, "tools": tools + self._recall.definitions()}

    def _recall_calls(self, reply: Message) -> list[ToolCall]:
        """The calls the loop runs: the first `max_tool_calls_per_round`, when every call the reply
        makes is a recall tool's; none otherwise (the reply goes back to the caller)."""
        recall = self._recall
        calls = reply.tool_calls
        if recall is None or not calls or any(call.name not in recall.names for call in calls):
            return []
        return list(calls[: self._max_calls])

    def _turn(self, conversation_id: str, reply: Message, answers: list[str]) -> list[Message]:
        """`[reply]`, or `[reply, results]` with `answers` to the calls run, an `Error:` for every
        other (each call id needs a result), all of them cut to fit the payload limit."""
        if not answers:
            return [reply]
        assert self._recall is not None  # answers come from the recall tools
        calls, bound = reply.tool_calls, self._max_calls
        results = [
            ToolResponse(
                call.id,
                call.name,
                answers[index]
                if index < bound
                else f"Error: not run: at most {bound} tool calls are answered per reply, and this reply "
                f"made {len(calls)}; ask again for what you still need",
            )
            for index, call in enumerate(calls)
        ]
        return [reply, fitted(results, conversation_id, self._recall.max_payload_bytes)]

    def _done(self, turn: list[Message], round_number: int) -> bool:
        """Whether the loop ends after this turn: nothing to answer, or the last round."""
        return len(turn) == 1 or round_number == self._max_rounds

    def _create(self, prompt: list[Message], kwargs: dict[str, Any], stream: bool) -> Any:
        """The client's `create` call for this prompt (awaited by the async class)."""
        extra = {"stream": True} if stream else {}
        return self._client.chat.completions.create(
            model=self._model, messages=_wire(prompt), **extra, **kwargs
        )


class MemoryChat(_ChatRules[Advisor, RecallTools]):
    """A chat-completions call wrapped by `advisors` (`before` in order, `after` in reverse)."""

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
        stream, kwargs = self._request(conversation_id, messages, kwargs)
        prompt = list(messages)
        for advisor in self._advisors:
            prompt = advisor.before(conversation_id, prompt, user_id=user_id, event_filter=event_filter)
        if stream:
            return self._streamed(conversation_id, prompt, user_id, kwargs)
        round_number = 1
        while True:
            completion: ChatCompletion = self._create(prompt, kwargs, stream=False)
            turn = self._answered(conversation_id, _from_completion(completion), user_id)
            self._after(conversation_id, turn, user_id)
            if self._done(turn, round_number):
                return completion
            prompt = prompt + turn
            round_number += 1

    def _streamed(
        self, conversation_id: str, prompt: list[Message], user_id: str | None, kwargs: dict[str, Any]
    ) -> Iterator[ChatCompletionChunk]:
        for round_number in range(1, self._max_rounds + 1):
            reply = _Reply()
            opened = self._create(prompt, kwargs, stream=True)
            with opened if hasattr(opened, "__exit__") else contextlib.nullcontext(opened) as chunks:
                for chunk in chunks:
                    reply.add(chunk)
                    yield chunk
            turn = self._answered(conversation_id, reply.message(), user_id)
            self._after(conversation_id, turn, user_id)
            if self._done(turn, round_number):
                return
            prompt = prompt + turn

    def _answered(self, conversation_id: str, reply: Message, user_id: str | None) -> list[Message]:
        calls = self._recall_calls(reply)
        if not calls:
            return [reply]
        recall = cast(RecallTools, self._recall)
        user = (user_id if user_id is not None else recall.owner_of(conversation_id)) or ""
        answers = [
            recall.handle(call.name, call.arguments, session_id=conversation_id, user_id=user)
            for call in calls
        ]
        return self._turn(conversation_id, reply, answers)

    def _after(self, conversation_id: str, turn: list[Message], user_id: str | None) -> None:
        for advisor in reversed(self._advisors):
            advisor.after(conversation_id, turn, user_id=user_id)


class AsyncMemoryChat(_ChatRules[AsyncAdvisor, AsyncRecallTools]):
    """`MemoryChat` over an async client (`openai.AsyncOpenAI` and its kin), `AsyncAdvisor`s and
    `AsyncRecallTools`: the same arguments and rules, nothing of it blocking the event loop."""

    _ASYNC = True
    _RECALL = AsyncRecallTools

    async def complete(
        self,
        conversation_id: str,
        messages: Sequence[Message],
        *,
        user_id: str | None = None,
        event_filter: EventFilter | None = None,
        **kwargs: Any,
    ) -> ChatCompletion | AsyncIterator[ChatCompletionChunk]:
        """`MemoryChat.complete`; with `stream=True`, an async iterator of every round's chunks."""
        stream, kwargs = self._request(conversation_id, messages, kwargs)
        prompt = list(messages)
        for advisor in self._advisors:
            prompt = await advisor.before(conversation_id, prompt, user_id=user_id, event_filter=event_filter)
        if stream:
            return self._streamed(conversation_id, prompt, user_id, kwargs)
        round_number = 1
        while True:
            completion: ChatCompletion = await self._paced(prompt, kwargs, stream=False)
            turn = await self._answered(conversation_id, _from_completion(completion), user_id)
            await self._after(conversation_id, turn, user_id)
            if self._done(turn, round_number):
                return completion
            prompt = prompt + turn
            round_number += 1

    async def _streamed(
        self, conversation_id: str, prompt: list[Message], user_id: str | None, kwargs: dict[str, Any]
    ) -> AsyncIterator[ChatCompletionChunk]:
        for round_number in range(1, self._max_rounds + 1):
            reply = _Reply()
            opened = await self._paced(prompt, kwargs, stream=True)
            async with opened if hasattr(opened, "__aexit__") else contextlib.nullcontext(opened) as chunks:
                async for chunk in chunks:
                    reply.add(chunk)
                    yield chunk
            turn = await self._answered(conversation_id, reply.message(), user_id)
            await self._after(conversation_id, turn, user_id)
            if self._done(turn, round_number):
                return
            prompt = prompt + turn

    async def _paced(self, prompt: list[Message], kwargs: dict[str, Any], stream: bool) -> Any:
        """`_create`, begun when its turn on the loop comes (`pacing.py`): the client's own work
        for a call, milliseconds of it, is never done for dozens of turns in one step of the loop."""
        await take_turn()
        return await self._create(prompt, kwargs, stream)

    async def _answered(self, conversation_id: str, reply: Message, user_id: str | None) -> list[Message]:
        calls = self._recall_calls(reply)
        if not calls:
            return [reply]
        recall = cast(AsyncRecallTools, self._recall)
        user = (user_id if user_id is not None else await recall.owner_of(conversation_id)) or ""
        answers = [
            await recall.handle(call.name, call.arguments, session_id=conversation_id, user_id=user)
            for call in calls
        ]
        return self._turn(conversation_id, reply, answers)

    async def _after(self, conversation_id: str, turn: list[Message], user_id: str | None) -> None:
        for advisor in reversed(self._advisors):
            await advisor.after(conversation_id, turn, user_id=user_id)


def _advises(advisor: object, asynchronous: bool) -> bool:
    """Whether `advisor` has `before` and `after`, coroutines or not as the chat class awaits them."""
    methods = [getattr(advisor, name, None) for name in ("before", "after")]
    return all(callable(m) and inspect.iscoroutinefunction(m) == asynchronous for m in methods)


def _wire(prompt: list[Message]) -> list[ChatCompletionMessageParam]:
    """The prompt in the client's message format (the typed dicts `to_openai` builds)."""
    return cast("list[ChatCompletionMessageParam]", to_openai(prompt))


def _from_completion(completion: Any) -> Message:
    """A completion's first assistant message as a domain `Message` (`ValueError` for what it
    cannot be: no choices, a tool call without an id)."""
    if not completion.choices:
        raise ValueError("the model returned no choices; nothing stored")
    message = completion.choices[0].message
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
        """The reply, once its stream has finished (`RuntimeError` for a stream cut short)."""
        if self.finish_reason is None:
            raise RuntimeError("the model's stream ended before it finished; nothing of it was stored")
        calls = []
        for index in sorted(self.calls):
            call = self.calls[index]
            if not call.id:
                raise ValueError(f"the model streamed tool call {index} without an id")
            calls.append(ToolCall(call.id, call.name, "".join(call.arguments)))
        return AssistantMessage("".join(self.content) if self.content else None, calls)
