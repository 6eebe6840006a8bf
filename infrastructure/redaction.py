"""Passwords out of URLs before a message or a log line shows them (database and broker URLs alike)."""

from __future__ import annotations

import re

_CREDENTIALS = re.compile(r"(?P<user>\b[A-Za-z][A-Za-z0-9+.-]*://[^:/@\s'\"]*):[^\s'\"]*@")
"""`scheme://user:password@`: the password runs to the last `@` of the URL, so one holding an `@`
or a `/` (which SQLAlchemy accepts unescaped) is masked whole; the user name and host stay."""


_QUERY_PASSWORD = re.compile(r"(?P<name>[?&](?:password|passwd|pwd)=)[^&#\s'\"]*", re.IGNORECASE)
"""`?password=...` (or `&password=`): libpq, psycopg and the brokers take the password from the
query string too."""


def hide_passwords(text: str) -> str:
    """`text` with the password of every URL in it replaced by `***`.

    It works on any text, not on one parsed URL, because the URLs to hide are often inside a
    message (a driver's error, a log line) or do not parse at all (a mistyped port).
    """
    return _QUERY_PASSWORD.sub(r"\g<name>***", _CREDENTIALS.sub(r"\g<user>:***@", text))
