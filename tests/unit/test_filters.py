"""EventFilter: normalisation, validation order, matching, merge, factories and windowing.

Cases ported from Spring AI Session v0.7.0 (EventFilter*Tests); the rules are in docs/api.md "EventFilter".
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest
from sessionledger.domain import (
    AssistantMessage,
    EventFilter,
    MatchMode,
    MessageType,
    SessionEvent,
    UserMessage,
)

T0 = datetime(2025, 1, 1, tzinfo=UTC)


def ev(text: str | None = "hello", *, branch=None, synthetic=False, archived=False, at=T0, assistant=False):
    message = AssistantMessage(text) if assistant or text is None else UserMessage(text)
    metadata = {SessionEvent.SYNTHETIC: True} if synthetic else {}
    return SessionEvent(
        session_id="s", message=message, branch=branch, metadata=metadata, archived=archived, timestamp=at
    )


# --- normalisation and validation --------------------------------------------------------------------


def test_default_is_all_and_nothing_is_set():
    f = EventFilter()
    assert f == EventFilter.all()
    assert f.page is None and f.page_size is None and f.last_n is None
    assert EventFilter.DEFAULT_PAGE_SIZE == 10


def test_keyword_normalisation():
    assert EventFilter(keyword="  ").keyword is None
    assert EventFilter(keyword="").keyword is None
    assert EventFilter(keyword="Spring AI").keyword == "spring ai"


def test_keywords_normalisation_and_match_mode():
    f = EventFilter(keywords=["Spring", "  ", "", None, "BOOT"])
    assert f.keywords == ("spring", "boot")
    assert f.match_mode is MatchMode.ANY
    empty = EventFilter(keywords=[], match_mode="all")
    assert empty.keywords is None and empty.match_mode is None
    assert EventFilter(keywords=[" ", ""]).keywords is None
    assert EventFilter(match_mode=MatchMode.ALL).match_mode is None
    assert EventFilter(keywords=["a"], match_mode="all").match_mode is MatchMode.ALL
    assert EventFilter(keywords=["a"], match_mode="ALL").match_mode == "all"


def test_invalid_match_mode():
    with pytest.raises(ValueError, match="match_mode must be 'any' or 'all'"):
        EventFilter(keywords=["a"], match_mode="some")


def test_message_types_any_iterable_becomes_a_frozenset_and_empty_is_none():
    assert EventFilter(message_types=[MessageType.USER, "assistant"]).message_types == frozenset(
        {MessageType.USER, MessageType.ASSISTANT}
    )
    assert EventFilter(message_types=(t for t in [MessageType.TOOL])).message_types == {MessageType.TOOL}
    assert EventFilter(message_types=set()).message_types is None
    with pytest.raises(ValueError, match="message_types"):
        EventFilter(message_types=["robot"])


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"last_n": 0}, "last_n must be greater than 0"),
        ({"last_n": -1}, "last_n must be greater than 0"),
        ({"last_n": 0, "page_size": 10}, "last_n must be greater than 0"),
        ({"last_n": 5, "page_size": 10}, "last_n and page/page_size are mutually exclusive"),
        ({"last_n": 5, "page_size": 0}, "last_n and page/page_size are mutually exclusive"),
        ({"page_size": 0}, "page_size must be greater than 0"),
        ({"page_size": 0, "page": -1}, "page_size must be greater than 0"),
        ({"page": -1, "page_size": 5}, "page must be >= 0"),
        ({"page": -1}, "page must be >= 0"),
        ({"page": 1}, "page_size must be set when page is set"),
    ],
)
def test_validation_messages_in_reference_order(kwargs, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        EventFilter(**kwargs)


def test_page_defaults_to_zero_when_page_size_is_set():
    assert EventFilter(page_size=5).page == 0


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"last_n": 2**63}, "last_n must be at most 2**63 - 1, got 9223372036854775808"),
        ({"page_size": 2**63}, "page_size must be at most 2**63 - 1"),
        ({"page": 2**63, "page_size": 1}, "page must be at most 2**63 - 1"),
        ({"page": 2**62, "page_size": 2}, "page 4611686018427387904 of page_size 2 ends beyond 2**63 - 1"),
        ({"page": 1, "page_size": 2**62}, "ends beyond 2**63 - 1"),
    ],
)
def test_paging_values_fit_a_database_integer(kwargs, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        EventFilter(**kwargs)
    for largest in (
        {"last_n": 2**63 - 1},
        {"page": 0, "page_size": 2**63 - 1},
        {"page": 2**62 - 2, "page_size": 2},
    ):
        EventFilter(**largest)


def test_an_invalid_regular_expression_is_a_value_error():
    for build in (EventFilter.pattern_search, lambda p: EventFilter(pattern=p)):
        with pytest.raises(ValueError, match=r"^pattern is not a valid regular expression: missing \)"):
            build("(unclosed")


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: EventFilter(keyword="a\x00"), "keyword contains a NUL character"),
        (lambda: EventFilter.keywords_search(["ok", "\x00"]), "keywords contains a NUL character"),
        (lambda: EventFilter.for_branch("a\x00"), "branch contains a NUL character"),
    ],
)
def test_search_terms_and_branch_hold_what_an_event_can(build, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        build()


def test_other_invalid_values():
    with pytest.raises(ValueError, match="start must be a timezone-aware datetime"):
        EventFilter(start=datetime(2025, 1, 1))
    with pytest.raises(ValueError, match="last_n must be an int"):
        EventFilter(last_n="3")
    with pytest.raises(ValueError, match="pattern"):
        EventFilter(pattern=42)


# --- factories ----------------------------------------------------------------------------------------


def test_factories():
    assert EventFilter.all() == EventFilter()
    assert EventFilter.active() == EventFilter(exclude_archived=True)
    assert EventFilter.last(3) == EventFilter(last_n=3)
    assert EventFilter.real_only() == EventFilter(exclude_synthetic=True)
    assert EventFilter.keyword_search("X") == EventFilter(keyword="x", page=0, page_size=10)
    assert EventFilter.keyword_search("x", 2, 3) == EventFilter(keyword="x", page=2, page_size=3)
    assert EventFilter.keywords_search(["a", "b"]) == EventFilter(
        keywords=["a", "b"], match_mode="any", page=0, page_size=10
    )
    assert EventFilter.keywords_search(["a"], "all").match_mode is MatchMode.ALL
    assert EventFilter.pattern_search("x+") == EventFilter(pattern=re.compile("x+"), page=0, page_size=10)
    assert EventFilter.for_branch("orch") == EventFilter(branch="orch")


def test_value_equality_compares_patterns_by_text_and_flags():
    assert EventFilter.pattern_search("a") == EventFilter.pattern_search(re.compile("a"))
    assert EventFilter.pattern_search("a") != EventFilter.pattern_search(re.compile("a", re.IGNORECASE))
    assert hash(EventFilter.pattern_search("a")) == hash(EventFilter.pattern_search("a"))
    assert len({EventFilter.active(), EventFilter.active(), EventFilter.all()}) == 2


# --- matches ------------------------------------------------------------------------------------------


def test_exclusions():
    assert not EventFilter.real_only().matches(ev(synthetic=True))
    assert EventFilter.real_only().matches(ev())
    assert not EventFilter.active().matches(ev(archived=True))
    assert EventFilter.all().matches(ev(archived=True, synthetic=True))


def test_time_bounds_are_inclusive():
    f = EventFilter(start=T0, end=T0 + timedelta(hours=1))
    assert f.matches(ev(at=T0)) and f.matches(ev(at=T0 + timedelta(hours=1)))
    assert not f.matches(ev(at=T0 - timedelta(microseconds=1)))
    assert not f.matches(ev(at=T0 + timedelta(hours=1, microseconds=1)))


def test_message_types():
    f = EventFilter(message_types={MessageType.ASSISTANT})
    assert f.matches(ev("x", assistant=True)) and not f.matches(ev("x"))


def test_keyword_is_a_case_insensitive_substring():
    e = ev("Spring AI is awesome")
    assert EventFilter.keyword_search("spring ai").matches(e)
    assert EventFilter.keyword_search("AWESOME").matches(e)
    assert EventFilter.keyword_search("is").matches(e)
    assert not EventFilter.keyword_search("memory").matches(e)
    assert not EventFilter.keyword_search("anything").matches(ev(""))
    assert not EventFilter.keyword_search("anything").matches(ev(None))


def test_keyword_percent_and_underscore_are_literal():
    assert EventFilter.keyword_search("100%").matches(ev("we are 100% sure"))
    assert not EventFilter.keyword_search("1%0").matches(ev("100"))
    assert EventFilter.keyword_search("snake_case").matches(ev("use snake_case names"))
    assert not EventFilter.keyword_search("snake_case").matches(ev("use snakeXcase names"))
    assert not EventFilter.keywords_search(["a_c"]).matches(ev("abc"))


def test_keywords_any_and_all():
    any_of = EventFilter.keywords_search(["actually", "instead"], MatchMode.ANY)
    assert any_of.matches(ev("I meant instead of that"))
    assert not any_of.matches(ev("no relation here"))
    all_of = EventFilter.keywords_search(["actually", "instead"], MatchMode.ALL)
    assert all_of.matches(ev("actually, use this instead"))
    assert not all_of.matches(ev("actually, that's fine"))
    assert EventFilter.keywords_search(["SPRING"]).matches(ev("spring ai is great"))
    assert not EventFilter.keywords_search(["anything"]).matches(ev(None))
    assert EventFilter(keywords=[]).matches(ev("anything at all"))


def test_pattern_search_is_a_search_with_the_patterns_own_flags():
    decided = EventFilter.pattern_search(re.compile(r"\bwe decided\b"))
    assert decided.matches(ev("so we decided to go with option B"))
    assert not decided.matches(ev("we haven't decided yet"))
    assert EventFilter.pattern_search(re.compile("remember that", re.IGNORECASE)).matches(
        ev("Remember That the API key rotates monthly")
    )
    case_sensitive = EventFilter.pattern_search("Remember")
    assert not case_sensitive.matches(ev("remember this"))
    assert case_sensitive.matches(ev("Remember this"))
    assert not EventFilter.pattern_search(".+").matches(ev(""))
    assert not EventFilter.pattern_search(".*").matches(ev(None))


def test_keyword_and_pattern_are_anded():
    f = EventFilter(keyword="decided", pattern=re.compile("option [A-Z]"))
    assert f.matches(ev("we decided on option B"))
    assert not f.matches(ev("we decided nothing"))
    assert not f.matches(ev("option B is available"))


def test_no_branch_filter_sees_every_branch():
    assert all(EventFilter.all().matches(ev(branch=b)) for b in (None, "orch", "orch.researcher"))


@pytest.mark.parametrize(
    ("filter_branch", "event_branch", "visible"),
    [
        ("orch.researcher", None, True),
        ("orch.researcher", "orch.researcher", True),
        ("orch.researcher", "orch", True),
        ("orch.researcher.summarizer", "orch", True),
        ("orch.researcher.summarizer", "orch.researcher", True),
        ("orch.researcher", "orch.writer", False),
        ("orch.researcher", "orch.researcher.summarizer", False),
        ("orchestra.researcher", "orch", False),
        ("orchestra.researcher", "orchestra", True),
        ("orch", "orch.researcher", False),
    ],
)
def test_branch_isolation(filter_branch, event_branch, visible):
    assert EventFilter.for_branch(filter_branch).matches(ev(branch=event_branch)) is visible


def test_synthetic_root_events_are_visible_on_every_branch():
    f = EventFilter.for_branch("orch.researcher")
    events = [
        ev("shadow", synthetic=True),
        ev("summary", synthetic=True, assistant=True),
        ev(branch="orch.writer"),
    ]
    assert f.select(events) == events[:2]


# --- merge --------------------------------------------------------------------------------------------


def test_merge_override_wins_when_set():
    t1, t2 = T0, T0 + timedelta(days=150)
    assert EventFilter.last(10).merge(EventFilter.last(3)).last_n == 3
    assert EventFilter.for_branch("orch").merge(EventFilter.for_branch("orch.r")).branch == "orch.r"
    assert EventFilter(start=t1).merge(EventFilter(start=t2)).start == t2
    assert EventFilter(end=t2).merge(EventFilter(end=t1)).end == t1
    types = EventFilter(message_types={MessageType.USER}).merge(
        EventFilter(message_types={MessageType.ASSISTANT})
    )
    assert types.message_types == {MessageType.ASSISTANT}
    assert (
        EventFilter(keyword="spring", page_size=5).merge(EventFilter(keyword="ai", page_size=5)).keyword
        == "ai"
    )
    words = EventFilter.keywords_search(["spring"]).merge(
        EventFilter.keywords_search(["actually", "x"], "all")
    )
    assert (words.keywords, words.match_mode) == (("actually", "x"), MatchMode.ALL)
    pattern = EventFilter.pattern_search("we decided").merge(EventFilter.pattern_search("let's go with"))
    assert pattern.pattern.pattern == "let's go with"
    paged = EventFilter(page=0, page_size=10).merge(EventFilter(page=2, page_size=5))
    assert (paged.page, paged.page_size) == (2, 5)


def test_merge_keeps_base_when_override_is_unset():
    assert EventFilter.last(5).merge(EventFilter.all()).last_n == 5
    assert EventFilter.for_branch("orch.writer").merge(EventFilter.all()).branch == "orch.writer"
    kept = EventFilter.keywords_search(["a"], "all").merge(EventFilter(keyword="k"))
    assert (kept.keywords, kept.match_mode, kept.keyword) == (("a",), MatchMode.ALL, "k")
    assert EventFilter.keyword_search("k", 3, 4).merge(EventFilter.all()).page == 3


def test_merge_ors_the_flags_and_all_with_all_is_all():
    assert EventFilter.all().merge(EventFilter.real_only()).exclude_synthetic
    assert EventFilter.real_only().merge(EventFilter.all()).exclude_synthetic
    assert EventFilter.all().merge(EventFilter.active()).exclude_archived
    assert EventFilter.active().merge(EventFilter.all()).exclude_archived
    merged = EventFilter.all().merge(EventFilter.all())
    assert not merged.exclude_synthetic and not merged.exclude_archived
    assert merged == EventFilter.all()


def test_merge_validates_the_result():
    with pytest.raises(ValueError, match="mutually exclusive"):
        EventFilter.last(3).merge(EventFilter(page_size=5))
    # an override that only sets page_size resets the base's page to 0
    assert EventFilter(page=4, page_size=2).merge(EventFilter(page_size=3)).page == 0
    with pytest.raises(ValueError, match="EventFilter"):
        EventFilter.all().merge(None)


# --- windowing: last_n, then paging -----------------------------------------------------------------


def texts(events):
    return [e.message.text for e in events]


def test_pages_are_oldest_first():
    events = [ev(f"spring message {i}") for i in range(1, 8)]
    assert texts(EventFilter.keyword_search("spring message", 0, 3).select(events)) == [
        "spring message 1",
        "spring message 2",
        "spring message 3",
    ]
    assert texts(EventFilter.keyword_search("spring message", 1, 3).select(events))[0] == "spring message 4"
    assert texts(EventFilter.keyword_search("spring message", 2, 3).select(events)) == ["spring message 7"]
    assert EventFilter.keyword_search("spring message", 5, 10).select(events) == []


def test_default_page_size_and_only_matches_are_paged():
    events = [ev(f"entry {i}") for i in range(1, 16)]
    page = EventFilter.keyword_search("entry").select(events)
    assert len(page) == EventFilter.DEFAULT_PAGE_SIZE
    assert texts(page)[0] == "entry 1" and texts(page)[-1] == "entry 10"
    mixed = [ev(f"{kind} {i}") for i in range(5) for kind in ("keyword hit", "no match")]
    assert texts(EventFilter.keyword_search("keyword hit", 0, 10).select(mixed)) == [
        f"keyword hit {i}" for i in range(5)
    ]


def test_last_n_applies_after_matching():
    events = [ev(f"u{i}") for i in range(5)] + [ev("a", assistant=True)]
    assert texts(EventFilter.last(2).select(events)) == ["u4", "a"]
    user_last_two = EventFilter(message_types={MessageType.USER}, last_n=2)
    assert texts(user_last_two.select(events)) == ["u3", "u4"]
    assert texts(EventFilter.last(10).select(events)) == texts(events)


def test_apply_window_keeps_order_and_copies():
    events = [ev(str(i)) for i in range(4)]
    window = EventFilter.all().apply_window(events)
    assert window == events and window is not events


@pytest.mark.parametrize(
    "pattern", ["[[:digit:]]", "[a[:alpha:]]xyz]", "[[=a=]]", "[[.a.]]", re.compile("[a[:space:]]")]
)
def test_a_posix_class_in_a_pattern_is_refused_as_re_and_regex_read_it_otherwise(pattern):
    """The searches run in the `regex` package, which reads `[[:digit:]]` as a POSIX class, where
    `re` (the pattern's own syntax, and the index's literal) reads the characters `[:digt`."""
    with pytest.raises(ValueError, match=r"inside a set, which `re` reads as characters"):
        EventFilter(pattern=pattern)


@pytest.mark.parametrize("pattern", [r"\[[:x]", r"[\[:]", "[]:[]", "a[.]b", r"[x]\[:y", "[a-z]+"])
def test_brackets_that_are_no_posix_class_are_taken(pattern):
    assert EventFilter(pattern=pattern).pattern.pattern == pattern
