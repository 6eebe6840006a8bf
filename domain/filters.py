"""`EventFilter`: which events a read returns (docs/api.md "EventFilter").

Per-event criteria (`matches`) come first, then `last_n`, then paging (`apply_window`). Every
backend must give the same answer; `select` is the reference implementation the memory backend uses.
Search is bounded so that no filter can exhaust a database or the calling process: a few terms of
a bounded length, and a regular expression searched under a time limit.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, fields
from datetime import datetime
from enum import StrEnum
from functools import lru_cache
from typing import TYPE_CHECKING, Any, ClassVar

from sessionledger.domain.events import SessionEvent
from sessionledger.domain.ids import check_id
from sessionledger.domain.messages import MessageType
from sessionledger.domain.times import in_utc

if TYPE_CHECKING:
    import regex

MAX_KEYWORDS = 20
"""The most terms one `keywords` filter takes: plenty for a search, few enough to bound its cost."""
MAX_KEYWORD_LENGTH = 200
"""The longest `keyword`, or term of `keywords`, in characters."""
PATTERN_TIMEOUT = 1.0
"""Seconds the `pattern` searches of one read may take together; longer is a `ValueError`."""


class MatchMode(StrEnum):
    ANY = "any"
    ALL = "all"


def _blank(text: str) -> bool:
    return not text.strip()


MAX_INT64 = 2**63 - 1
"""The largest `last_n`, `page_size` and page end (`(page + 1) * page_size`): every backend's integer."""


def page_start(page: int, page_size: int) -> int:
    """The index of the page's first item; a page that ends past `MAX_INT64` is refused."""
    _int_or_none(page, "page")
    if (page + 1) * page_size > MAX_INT64:
        raise ValueError(f"page {page} of page_size {page_size} ends beyond 2**63 - 1")
    return page * page_size


def _int_or_none(value: Any, name: str) -> int | None:
    if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
        raise ValueError(f"{name} must be an int")
    if value is not None and value > MAX_INT64:
        raise ValueError(f"{name} must be at most 2**63 - 1, got {value}")
    return value


def _without_nul(text: str, name: str) -> str:
    if "\x00" in text:
        raise ValueError(f"{name} contains a NUL character (\\x00)")
    return text


def _aware_or_none(value: Any, name: str) -> datetime | None:
    if value is None:
        return None
    if not isinstance(value, datetime) or value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(f"{name} must be a timezone-aware datetime")
    in_utc(value, name)  # every SQL backend compares in UTC
    return value


@dataclass(frozen=True, slots=True, kw_only=True)
class EventFilter:
    """An immutable query over a session's events; value equality over every field.

    `start`/`end` are inclusive. `keyword`/`keywords` are literal, case-insensitive substrings;
    `pattern` is a regular-expression search (its own flags decide case). A `branch` shows root
    events, its own events and those of its dot-prefix ancestors only.
    """

    DEFAULT_PAGE_SIZE: ClassVar[int] = 10

    start: datetime | None = None
    end: datetime | None = None
    message_types: frozenset[MessageType] | None = None
    exclude_synthetic: bool = False
    last_n: int | None = None
    keyword: str | None = None
    keywords: tuple[str, ...] | None = None
    match_mode: MatchMode | None = None
    pattern: re.Pattern[str] | None = None
    page: int | None = None
    page_size: int | None = None
    branch: str | None = None
    exclude_archived: bool = False

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        # normalisation and validation, in the order docs/api.md "EventFilter" gives
        keyword = self.keyword
        if keyword is not None:
            if not isinstance(keyword, str):
                raise ValueError("keyword must be a string")
            keyword = (
                None
                if _blank(keyword)
                else _bounded_term(_without_nul(keyword, "keyword"), "keyword").lower()
            )
        set_(self, "keyword", keyword)

        keywords = _terms(self.keywords)
        set_(self, "keywords", keywords)

        mode = None
        if keywords is not None:
            mode = MatchMode.ANY if self.match_mode is None else _match_mode(self.match_mode)
        set_(self, "match_mode", mode)

        types = self.message_types
        if types is not None:
            try:
                types = frozenset(MessageType(t) for t in types) or None
            except (TypeError, ValueError):
                raise ValueError(f"message_types must be MessageType values, got {types!r}") from None
        set_(self, "message_types", types)

        last_n = _int_or_none(self.last_n, "last_n")
        page = _int_or_none(self.page, "page")
        page_size = _int_or_none(self.page_size, "page_size")
        if last_n is not None and last_n <= 0:
            raise ValueError("last_n must be greater than 0")
        if last_n is not None and page_size is not None:
            raise ValueError("last_n and page/page_size are mutually exclusive")
        if page_size is not None and page_size <= 0:
            raise ValueError("page_size must be greater than 0")
        if page is not None and page < 0:
            raise ValueError("page must be >= 0")
        if page is not None and page_size is None:
            raise ValueError("page_size must be set when page is set")
        if page is not None and page_size is not None:
            page_start(page, page_size)
        if page_size is not None and page is None:
            set_(self, "page", 0)

        set_(self, "start", _aware_or_none(self.start, "start"))
        set_(self, "end", _aware_or_none(self.end, "end"))
        if self.pattern is not None:
            set_(self, "pattern", _compiled(self.pattern))
        if self.branch is not None:
            if not isinstance(self.branch, str):
                raise ValueError("branch must be a string")
            check_id(self.branch, "branch")
        for flag in ("exclude_synthetic", "exclude_archived"):
            if not isinstance(getattr(self, flag), bool):
                raise ValueError(f"{flag} must be a bool")

    # --- factories --------------------------------------------------------------------------

    @classmethod
    def all(cls) -> EventFilter:
        """Every event, archived ones included: the recall view."""
        return cls()

    @classmethod
    def active(cls) -> EventFilter:
        """The active window: what a prompt is built from."""
        return cls(exclude_archived=True)

    @classmethod
    def last(cls, n: int) -> EventFilter:
        return cls(last_n=n)

    @classmethod
    def real_only(cls) -> EventFilter:
        return cls(exclude_synthetic=True)

    @classmethod
    def keyword_search(cls, keyword: str, page: int = 0, page_size: int = DEFAULT_PAGE_SIZE) -> EventFilter:
        return cls(keyword=keyword, page=page, page_size=page_size)

    @classmethod
    def keywords_search(cls, terms: Iterable[str], mode: MatchMode | str = MatchMode.ANY) -> EventFilter:
        return cls(
            keywords=_terms(terms), match_mode=_match_mode(mode), page=0, page_size=cls.DEFAULT_PAGE_SIZE
        )

    @classmethod
    def pattern_search(cls, pattern: str | re.Pattern[str]) -> EventFilter:
        return cls(pattern=_compiled(pattern), page=0, page_size=cls.DEFAULT_PAGE_SIZE)

    @classmethod
    def for_branch(cls, branch: str) -> EventFilter:
        return cls(branch=branch)

    # --- combining and applying -----------------------------------------------------------------

    def merge(self, other: EventFilter) -> EventFilter:
        """`other` overrides every field it sets; the two exclusion flags are ORed."""
        if not isinstance(other, EventFilter):
            raise ValueError("other must be an EventFilter")
        values: dict[str, Any] = {}
        for f in fields(self):
            mine, theirs = getattr(self, f.name), getattr(other, f.name)
            if isinstance(mine, bool):
                values[f.name] = mine or theirs
            else:
                values[f.name] = mine if theirs is None else theirs
        return EventFilter(**values)

    def matches(self, event: SessionEvent) -> bool:
        """The per-event criteria, in a fixed order; `last_n` and paging are not per-event."""
        return self._matches(event, _pattern_deadline())

    def _matches(self, event: SessionEvent, deadline: float) -> bool:
        """`matches`, with the `pattern` search bounded by `deadline` (a `time.monotonic()` value)."""
        if self.exclude_synthetic and event.is_synthetic:
            return False
        if self.exclude_archived and event.archived:
            return False
        if self.start is not None and event.timestamp < self.start:
            return False
        if self.end is not None and event.timestamp > self.end:
            return False
        if self.message_types is not None and event.message.type not in self.message_types:
            return False
        text = event.message.text
        if self.keyword is not None and (text is None or self.keyword not in text.lower()):
            return False
        if self.keywords is not None:
            if text is None:
                return False
            lowered = text.lower()
            found = (term in lowered for term in self.keywords)
            if not (all(found) if self.match_mode is MatchMode.ALL else any(found)):
                return False
        if self.pattern is not None and (text is None or not _found(self.pattern, text, deadline)):
            return False
        return self.branch is None or branch_visible(event.branch, self.branch)

    def apply_window(self, matched: Sequence[SessionEvent]) -> list[SessionEvent]:
        """`last_n`, then the page, applied to events that already passed `matches`."""
        window = list(matched)
        if self.last_n is not None and len(window) > self.last_n:
            window = window[-self.last_n :]
        if self.page_size is not None:
            first = (self.page or 0) * self.page_size
            window = window[first : first + self.page_size]
        return window

    def select(self, events: Iterable[SessionEvent]) -> list[SessionEvent]:
        """The whole read: match every event, then window the result. The read's `pattern` searches
        share one `PATTERN_TIMEOUT`: a budget per event would let many events add up to minutes."""
        deadline = _pattern_deadline()
        return self.apply_window([event for event in events if self._matches(event, deadline)])


def branch_visible(event_branch: str | None, filter_branch: str) -> bool:
    """Branch isolation: root events, the branch itself and its dot-prefix ancestors are visible."""
    return (
        event_branch is None or event_branch == filter_branch or filter_branch.startswith(event_branch + ".")
    )


def _match_mode(value: Any) -> MatchMode:
    try:
        return MatchMode(value.lower() if isinstance(value, str) else value)
    except ValueError:
        raise ValueError(f"match_mode must be 'any' or 'all', got {value!r}") from None


def _terms(value: Iterable[str] | str | None) -> tuple[str, ...] | None:
    """Keywords lowercased, blank ones dropped (`None` when none is left); a lone string is one term."""
    if value is None:
        return None
    terms = []
    for term in (value,) if isinstance(value, str) else value:
        if term is not None and not isinstance(term, str):
            raise ValueError("keywords must be strings")
        if term is not None and not _blank(term):
            terms.append(_bounded_term(_without_nul(term, "keywords"), "a keyword").lower())
    if len(terms) > MAX_KEYWORDS:
        raise ValueError(f"keywords takes at most {MAX_KEYWORDS} terms, got {len(terms)}")
    return tuple(terms) or None


def _bounded_term(term: str, name: str) -> str:
    if len(term) > MAX_KEYWORD_LENGTH:
        raise ValueError(f"{name} is at most {MAX_KEYWORD_LENGTH} characters long, got {len(term)}")
    return term


def _compiled(value: str | re.Pattern[str]) -> re.Pattern[str]:
    if not isinstance(value, str | re.Pattern):
        raise ValueError("pattern must be a string or a compiled re.Pattern")
    source = value if isinstance(value, str) else value.pattern
    if _posix_bracket(source):
        raise ValueError(
            f"pattern {source!r} has '[:', '[=' or '[.' inside a set, which `re` reads as characters "
            "and POSIX as a class: write \\[ for the bracket, or \\d, \\w, \\s for the class"
        )
    if isinstance(value, re.Pattern):
        return value
    try:
        return re.compile(value)
    except re.error as error:
        raise ValueError(f"pattern is not a valid regular expression: {error}") from None


def _posix_bracket(source: str) -> bool:
    """Whether a set of `source` holds `[:`, `[=` or `[.`: the `regex` package the searches run in
    (`_timed`) reads `[[:digit:]]` as a POSIX class, `re` (whose syntax the contract names, and
    which the index's literal comes from) as the characters `[:digt` and a `]`."""
    index, in_set = 0, False
    while index < len(source):
        char = source[index]
        if char == "\\":
            index += 2
            continue
        if in_set and char == "[" and source[index + 1 : index + 2] in (":", "=", "."):
            return True
        if not in_set and char == "[":
            in_set = True
            index += 1 + source.startswith("^", index + 1)
            index += source.startswith("]", index)  # a first `]` is one of the set's characters
            continue
        if in_set and char == "]":
            in_set = False
        index += 1
    return False


_REGEX_FLAGS = ("IGNORECASE", "MULTILINE", "DOTALL", "VERBOSE", "ASCII")
"""The `re` flags a pattern can carry, which the `regex` package names alike (two differ in value)."""


@lru_cache(maxsize=64)
def _timed(source: str, flags: int) -> regex.Pattern[str]:
    """The `re` pattern compiled by the `regex` package, the same syntax, which can stop a search.
    `regex` is imported here, by the first pattern searched: a read without one (the command
    line's `events`, say) does without its imports, a few hundredths of a second."""
    import regex

    ours = sum(getattr(regex, name) for name in _REGEX_FLAGS if flags & getattr(re, name))
    try:
        return regex.compile(source, ours)
    except regex.error as error:
        raise ValueError(f"pattern {source!r} is not a valid regular expression: {error}") from None


def _pattern_deadline() -> float:
    """When the `pattern` searches of a read begin, the `time.monotonic()` by which they must end."""
    return time.monotonic() + PATTERN_TIMEOUT


def _found(pattern: re.Pattern[str], text: str, deadline: float) -> bool:
    """`pattern.search(text)` before `deadline`: a pattern that backtracks catastrophically
    (`(a|aa)+$` on a long run of a's) would otherwise hold the calling process at full CPU for hours."""
    try:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError
        return _timed(pattern.pattern, pattern.flags).search(text, timeout=remaining) is not None
    except TimeoutError:
        raise ValueError(
            f"pattern {pattern.pattern!r} took longer than {PATTERN_TIMEOUT:g} s on the events of one read "
            "(it backtracks catastrophically); write it without nested repetition"
        ) from None
