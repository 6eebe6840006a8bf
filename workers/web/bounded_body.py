"""A request's JSON body, refused (413) once it is larger than a limit, before it is read whole.

A declared `Content-Length` over the limit is refused without reading a byte; a body without one
(chunked) or that lies about it is counted as it streams in and refused at the first chunk past
the limit, so a client cannot make the server hold more than the limit in memory.
"""

from __future__ import annotations

import json
from typing import Any

from fastapi import HTTPException, Request

__all__ = ["json_body"]


async def json_body(request: Request, limit: int) -> dict[str, Any]:
    """The body as a JSON object; 413 over `limit` bytes, 400 for anything not a JSON object."""
    declared = request.headers.get("content-length")
    if declared is not None:
        if not declared.isdigit():
            raise HTTPException(400, "Content-Length must be a number of bytes")
        if int(declared) > limit:
            raise HTTPException(413, f"the body is {declared} bytes, over the limit of {limit}")
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise HTTPException(413, f"the body is over the limit of {limit} bytes")
        chunks.append(chunk)
    try:
        body = json.loads(b"".join(chunks))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise HTTPException(400, f"the body is not JSON: {error}") from None
    except RecursionError:
        raise HTTPException(400, "the body is nested too deeply") from None
    if not isinstance(body, dict):
        raise HTTPException(400, f"the body must be a JSON object, not {type(body).__name__}")
    return body
