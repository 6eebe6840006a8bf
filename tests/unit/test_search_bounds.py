"""Search cannot exhaust anything: `EventFilter` bounds its terms, and searches a regular
expression under a time limit (domain/filters.py)."""

from __future__ import annotations

import re
import time

import pytest
import regex
from sessionledger.domain import EventFilter, MatchMode, SessionEvent, UserMessage
from sessionledger.domain.filters import MAX_KEYWORD_LENGTH, MAX_KEYWORDS, PATTERN_TIMEOUT


def ev(text: str) -> SessionEvent:
    return SessionEvent(session_id="s", message=UserMessage(text))


# --- terms ---------------------------------------------------------------------------------------


def test_keywords_take_at_most_twenty_terms():
    assert MAX_KEYWORDS == 20
    terms = [f"t{i}" for i in range(MAX_KEYWORDS)]
    assert EventFilter.keywords_search(terms).keywords == tuple(terms)
    for build in (lambda t: EventFilter(keywords=t), EventFilter.keywords_search):
        with pytest.raises(ValueError, match="at most 20 terms, got 21"):
            build([*terms, "one more"])
    with pytest.raises(ValueError, match="at most 20 terms, got 5000"):
        EventFilter.keywords_search([f"t{i}" for i in range(5000)], MatchMode.ALL)


def test_blank_terms_do_not_count():
    terms = [f"t{i}" for i in range(MAX_KEYWORDS)] + [" ", "", None] * 10
    assert len(EventFilter(keywords=terms).keywords) == MAX_KEYWORDS


def test_a_term_or_keyword_is_at_most_two_hundred_characters():
    longest = "x" * MAX_KEYWORD_LENGTH
    assert EventFilter(keyword=longest).keyword == longest
    assert EventFilter(keywords=[longest]).keywords == (longest,)
    with pytest.raises(ValueError, match="keyword is at most 200 characters long, got 201"):
        EventFilter(keywords=["ok", longest + "x"])
    with pytest.raises(ValueError, match="keyword is at most 200 characters long, got 1048576"):
        EventFilter.keyword_search("y" * 1024 * 1024)


def test_merging_keeps_the_bounds():
    many = EventFilter.keywords_search([f"t{i}" for i in range(MAX_KEYWORDS)])
    assert many.merge(EventFilter(page=1, page_size=5)).keywords == many.keywords


# --- patterns ------------------------------------------------------------------------------------


@pytest.mark.timeout(60)
def test_nested_repetition_that_regex_matching_untangles_answers_at_once():
    """`re` takes seconds at 24 characters here, doubling per character; the bounded search does not."""
    started = time.monotonic()
    assert not EventFilter.pattern_search(r"(a+)+$").matches(ev("a" * 26 + "b"))
    assert EventFilter.pattern_search(r"(a+)+$").matches(ev("b" + "a" * 26))
    assert time.monotonic() - started < 3


@pytest.mark.timeout(60)
def test_a_search_that_backtracks_too_long_is_a_value_error_within_its_bound():
    started = time.monotonic()
    with pytest.raises(ValueError, match=r"took longer than 1 s .*backtracks catastrophically"):
        EventFilter.pattern_search(r"(a|aa)+$").matches(ev("a" * 40 + "b"))
    assert PATTERN_TIMEOUT == 1.0
    assert time.monotonic() - started < 15  # the bound, however loaded the machine


def calibrated_run() -> str:
    """A run of `a` then `!` that `(a|aa)+$` searches in a tenth of the budget or so on this machine:
    each one alone well within the bound, forty of them together several times over it."""
    search = regex.compile(r"(a|aa)+$").search  # the package the filter searches with
    for length in range(12, 40):
        text = "a" * length + "!"
        started = time.monotonic()
        search(text)
        if time.monotonic() - started >= PATTERN_TIMEOUT / 10:
            return text
    raise AssertionError("no run of a's took a tenth of the budget")


@pytest.mark.timeout(120)
def test_one_read_has_one_budget_however_many_events_it_searches():
    """Issue 25: forty events each under the bound took 30 s together; the budget is per read."""
    events = [ev(calibrated_run())] * 40
    started = time.monotonic()
    with pytest.raises(ValueError, match=r"took longer than 1 s on the events of one read .*catastroph"):
        EventFilter.pattern_search(r"(a|aa)+$").select(events)
    assert time.monotonic() - started < 15  # about the budget, however loaded the machine


ORDINARY = [
    (r"\bwe decided\b", 0, ["so we decided to go", "we decidedly", "We decided"]),
    (r"remember that", re.IGNORECASE, ["REMEMBER THAT", "remember this"]),
    (r"^second$", re.MULTILINE, ["first\nsecond\nthird", "first second"]),
    (r"a.b", re.DOTALL, ["a\nb", "ab"]),
    (r"a.b", 0, ["a\nb", "axb"]),
    (r" \d+ \s* items ", re.VERBOSE, ["12items", "12 items", "twelve items"]),
    (r"^\w+$", re.ASCII, ["café", "cafe"]),
    (r"^\w+$", 0, ["café", "ca fé"]),
    (r"(?i)straße", 0, ["STRASSE", "Straße", "STRAẞE"]),
    (r"(\w)\1", 0, ["book", "bok"]),
    (r"(?P<n>x)(?P=n)", 0, ["xx", "x"]),
    (r"colou?r(?=s)", 0, ["colors", "colour", "colours"]),
    (r"[^\x00-\x7f]", 0, ["plain", "naïve"]),
    (r"", 0, ["", "anything"]),
]


@pytest.mark.parametrize(("source", "flags", "texts"), ORDINARY)
def test_ordinary_patterns_match_as_re_does(source, flags, texts):
    pattern = re.compile(source, flags)
    for text in texts:
        assert EventFilter.pattern_search(pattern).matches(ev(text)) is bool(pattern.search(text)), text
