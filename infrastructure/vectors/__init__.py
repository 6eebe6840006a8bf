"""Vector stores for long-term chat memory (pgvector, sqlite-vec, brute force) and their embeddings.

`PgVectorStore` and `SqliteVecStore` need the `vector` extra (`pip install 'sessionledger[vector]'`);
they are imported on first use, so this package loads without it, and so are the embeddings (the
`openai` client), so that `sessionledger migrate` reaches `schema.py` without loading either.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sessionledger.domain.lazy_names import lazy_names
from sessionledger.infrastructure.vectors.entries import Embeddings
from sessionledger.infrastructure.vectors.memory import InMemoryVectorStore

if TYPE_CHECKING:
    from sessionledger.infrastructure.vectors.embeddings import EmbeddingsUnavailable, OpenAIEmbeddings
    from sessionledger.infrastructure.vectors.pgvector import PgVectorStore
    from sessionledger.infrastructure.vectors.sqlite_vec import SqliteVecStore

__all__ = [
    "Embeddings",
    "EmbeddingsUnavailable",
    "InMemoryVectorStore",
    "OpenAIEmbeddings",
    "PgVectorStore",
    "SqliteVecStore",
]

_LAZY = {
    "EmbeddingsUnavailable": "sessionledger.infrastructure.vectors.embeddings",
    "OpenAIEmbeddings": "sessionledger.infrastructure.vectors.embeddings",
    "PgVectorStore": "sessionledger.infrastructure.vectors.pgvector",
    "SqliteVecStore": "sessionledger.infrastructure.vectors.sqlite_vec",
}


__getattr__, __dir__ = lazy_names(__name__, _LAZY, __all__)
