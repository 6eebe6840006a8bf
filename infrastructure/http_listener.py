"""`HttpListener`: the standard library's threading HTTP server, quiet about clients that hang up."""

from __future__ import annotations

import logging
import sys
from http.server import ThreadingHTTPServer
from typing import Any

__all__ = ["HttpListener"]

logger = logging.getLogger(__name__)


class HttpListener(ThreadingHTTPServer):
    """A thread per connection, each a daemon (a client that never finishes its request does not
    hold the process at exit), for the workers' `/metrics` and the offline model's server.

    A client that goes away mid-request (a health check that connects and closes, a scraper or an
    `openai` client that gave up waiting) is a debug line: the standard library printed its
    traceback on stderr, into the worker's log, once per hang-up. Any other failure of a request
    is logged with its traceback."""

    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        error = sys.exc_info()[1]
        if isinstance(error, ConnectionError):
            logger.debug("a client went away mid-request (%s): %s", client_address, error)
        else:
            logger.exception("a request from %s failed", client_address)
