"""Embeddings from any OpenAI-compatible `/v1/embeddings` endpoint, through the real `openai` client."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import openai


class EmbeddingsUnavailable(RuntimeError):
    """The embeddings endpoint failed or answered something unusable; nothing was stored."""


class OpenAIEmbeddings:
    """`embed(texts)` -> one vector per text, in order (the `openai` client's retries and timeout apply).

    Any failure of the endpoint, or an answer with the wrong number of vectors, vectors of mixed
    sizes or non-finite values, is an `EmbeddingsUnavailable` naming the model and the cause, raised
    before a store writes anything.
    """

    def __init__(self, client: openai.OpenAI, model: str = "text-embedding-3-small") -> None:
        if client is None or not hasattr(client, "embeddings"):
            raise ValueError("client must be an openai.OpenAI client")
        if not isinstance(model, str) or not model.strip():
            raise ValueError("model must be a non-empty string")
        self._client = client
        self._model = model

    @property
    def model(self) -> str:
        return self._model

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        texts = list(texts)
        if not texts:
            return []
        try:
            response = self._client.embeddings.create(model=self._model, input=texts)
            data: list[Any] = sorted(response.data, key=lambda item: item.index)
            vectors = [[float(x) for x in item.embedding] for item in data]
        except openai.OpenAIError as error:
            raise EmbeddingsUnavailable(
                f"embeddings endpoint failed for model {self._model!r}: {error}"
            ) from error
        except (AttributeError, TypeError, ValueError) as error:
            raise EmbeddingsUnavailable(
                f"embeddings endpoint gave an unusable answer for model {self._model!r}: {error}"
            ) from error
        sizes = {len(vector) for vector in vectors}
        if len(vectors) != len(texts) or len(sizes) != 1 or 0 in sizes:
            raise EmbeddingsUnavailable(
                f"embeddings endpoint gave {len(vectors)} vectors of sizes {sorted(sizes)} for {len(texts)} "
                f"texts (model {self._model!r})"
            )
        if not all(math.isfinite(x) for vector in vectors for x in vector):
            raise EmbeddingsUnavailable(f"embeddings endpoint gave non-finite values (model {self._model!r})")
        return vectors
