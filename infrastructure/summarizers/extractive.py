"""An offline summarizer: no model, no key, no network, same output for the same input.

It keeps the most informative sentences of the conversation (word-frequency scoring, the classic
Luhn method) so the embedded default can compact real conversations on a machine without an LLM.
It reads the user prompt the recursive-summarization strategy builds: the `=== PRIOR SUMMARY ===`
section is folded in (its best sentences keep part of the budget), the `=== CONVERSATION TO
SUMMARIZE ===` section is what gets summarized, and the upcoming-context section is ignored.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

from sessionledger.domain.json_text import read_json

HEADER = "Extractive summary (offline, no LLM):"
PRIOR_SECTION = "=== PRIOR SUMMARY ==="
CONVERSATION_SECTION = "=== CONVERSATION TO SUMMARIZE ==="
_SECTION = re.compile(
    r"^(=== (?:PRIOR SUMMARY|CONVERSATION TO SUMMARIZE|UPCOMING CONTEXT .*) ===)$", re.MULTILINE
)
_CLOSING = "Please write the summary now:"
_SPEAKER = re.compile(r"^(User|Assistant|System|Tool|Earlier)(?=: | \[)")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")
_WORD = re.compile(r"[^\W_]+(?:['’][^\W_]+)*")
_STOPWORD_TEXT = """
    a about above after again against all am an and any are as at be because been before being below
    between both but by can could did do does doing down during each few for from further had has have
    having he her here hers herself him himself his how i if in into is it its itself just me more most
    my myself no nor not now of off on once only or other our ours ourselves out over own same she
    should so some such than that the their theirs them themselves then there these they this those
    through to too under until up very was we were what when where which while who whom why will with
    would you your yours yourself yourselves also like get got one use using used may might must
    let lets sure yes ok okay thanks thank please hi hello well really much many make made want need
    user assistant tool system"""
_STOPWORDS = frozenset(_STOPWORD_TEXT.split())
_MAX_SENTENCE_CHARS = 300
_SHORT_WORDS = 4  # sentences with fewer informative words score as if they had this many
_PRIOR_SHARE = 0.4


@dataclass(frozen=True, slots=True)
class _Sentence:
    position: int
    speaker: str
    text: str
    words: tuple[str, ...]


class ExtractiveSummarizer:
    """Picks the highest-scoring sentences, in their original order, within `max_chars`."""

    def __init__(self, max_chars: int = 1500) -> None:
        if max_chars < 200:
            raise ValueError("max_chars must be at least 200")
        self.max_chars = max_chars

    def summarize(self, system_prompt: str, user_prompt: str) -> str | None:
        prior, conversation = split_prompt(user_prompt)
        utterances = _utterances(conversation)
        if not utterances and not prior.strip():
            return None
        prior_sentences = _sentences(_prior_utterances(prior))
        sentences = _sentences(utterances)
        frequencies = _frequencies(prior_sentences + sentences)
        header = f"{HEADER} the key sentences of {len(utterances)} earlier messages."
        budget = self.max_chars - len(header) - 1
        prior_budget = int(budget * _PRIOR_SHARE) if sentences else budget
        kept_prior = _select(prior_sentences, frequencies, prior_budget)
        kept = _select(sentences, frequencies, budget - sum(len(_line(s)) + 1 for s in kept_prior))
        lines = [_line(s) for s in kept_prior + kept] or ["- (no informative sentences)"]
        return "\n".join([header, *lines])


def split_prompt(user_prompt: str) -> tuple[str, str]:
    """(prior summary, conversation) of the strategy's prompt; without sections it is all conversation."""
    before, *rest = _SECTION.split(user_prompt.replace(_CLOSING, ""))
    if not rest:
        return "", before
    sections = dict(zip(rest[::2], rest[1::2], strict=True))
    return sections.get(PRIOR_SECTION, "").strip(), sections.get(CONVERSATION_SECTION, "")


def _prior_utterances(prior: str) -> list[tuple[str, str]]:
    """The prior summary's lines (keeping a speaker they name), or a structured summary's fields."""
    try:
        data = read_json(prior)
    except ValueError:
        data = None
    if isinstance(data, dict):
        fields = [data.get("summary"), *data.get("key_points", ()), *data.get("key_facts", ())]
        return [("Earlier", text) for text in fields if isinstance(text, str)]
    utterances = []
    for raw in prior.splitlines():
        line = raw.strip().removeprefix("- ")
        if line and not line.startswith(HEADER):
            match = _SPEAKER.match(line)
            speaker, text = (match.group(1), line[match.end() :].lstrip(": ")) if match else ("Earlier", line)
            utterances.append((speaker, text))
    return utterances


def _utterances(conversation: str) -> list[tuple[str, str]]:
    """(speaker, text) per formatted event; a line without a speaker continues the previous event."""
    utterances: list[tuple[str, str]] = []
    for line in conversation.splitlines():
        match = _SPEAKER.match(line)
        if match:
            utterances.append((match.group(1), line[match.end() :].lstrip(": ")))
        elif line.strip() and utterances:
            speaker, text = utterances[-1]
            utterances[-1] = (speaker, f"{text}\n{line}")
        elif line.strip():
            utterances.append(("", line))
    return utterances


def _sentences(utterances: list[tuple[str, str]]) -> list[_Sentence]:
    sentences: list[_Sentence] = []
    for speaker, text in utterances:
        for raw in _SENTENCE_END.split(text):
            sentence = " ".join(raw.split())
            words = tuple(w for w in (m.group().lower() for m in _WORD.finditer(sentence)) if _informative(w))
            if words:
                sentences.append(_Sentence(len(sentences), speaker, _clip(sentence), words))
    return sentences


def _informative(word: str) -> bool:
    return len(word) > 2 and word not in _STOPWORDS and not word.isdigit()


def _frequencies(sentences: list[_Sentence]) -> dict[str, float]:
    counts = Counter(word for s in sentences for word in s.words)
    top = max(counts.values(), default=1)
    return {word: count / top for word, count in counts.items()}


def _select(sentences: list[_Sentence], frequencies: dict[str, float], budget: int) -> list[_Sentence]:
    """Best sentences first while they fit, then back in conversation order."""

    def score(s: _Sentence) -> tuple[float, int]:
        distinct = set(s.words)
        return (sum(frequencies[w] for w in distinct) / max(len(distinct), _SHORT_WORDS) ** 0.5, -s.position)

    chosen, seen = [], set()
    for sentence in sorted(sentences, key=score, reverse=True):
        cost = len(_line(sentence)) + 1
        if cost <= budget and sentence.text.lower() not in seen:
            chosen.append(sentence)
            seen.add(sentence.text.lower())
            budget -= cost
    return sorted(chosen, key=lambda s: s.position)


def _line(sentence: _Sentence) -> str:
    return f"- {sentence.speaker}: {sentence.text}" if sentence.speaker else f"- {sentence.text}"


def _clip(sentence: str) -> str:
    if len(sentence) <= _MAX_SENTENCE_CHARS:
        return sentence
    return sentence[: _MAX_SENTENCE_CHARS - 1].rsplit(" ", 1)[0] + "…"
