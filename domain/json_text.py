"""`read_json`: JSON text from outside (a file, an import line, a queued line, a model's tool
arguments) read with its nesting bounded, so that `"[" * 100000` is malformed JSON like any other,
not a `RecursionError` traceback (issue 25)."""

from __future__ import annotations

import json
from typing import Any


class NestedTooDeeply(json.JSONDecodeError):
    """JSON nested deeper than the parser can go: a `json.JSONDecodeError` (so a `ValueError`),
    which every reader already answers as it answers malformed JSON."""


def read_json(text: str | bytes) -> Any:
    """`json.loads(text)`, with nesting deeper than the interpreter's recursion limit allows (about
    a thousand levels, less in a deep call stack) raised as `NestedTooDeeply`.

    The stdlib parser is the one every caller used: it reads what it read before, exactly (orjson,
    which stops at 1,024 levels, reads big integers and lone surrogates otherwise).
    """
    try:
        return json.loads(text)
    except RecursionError:
        document = text if isinstance(text, str) else text.decode("utf-8", "replace")
        raise NestedTooDeeply("nested too deeply", document, 0) from None
