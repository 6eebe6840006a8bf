"""examples/chatbot.py runs as a script against the fake OpenAI server (chat and embeddings), on a
SQLite ledger with a sqlite-vec store beside it, and keeps what it says it keeps."""

from __future__ import annotations

from sessionledger.domain import MessageType
from sessionledger.infrastructure import open_service

from tests.e2e.example_scripts import run_example
from tests.fakes.fake_openai import Reply


def test_chatbot_keeps_a_window_archives_the_rest_and_recalls_an_old_fact(fake_openai, tmp_path):
    fake_openai.enqueue(
        Reply.text("Hello Ada, bees are wonderful."),
        Reply.text("Lavender and clover."),
        Reply.text("Every week in summer."),
        Reply.text("You keep bees."),
    )
    database_url = f"sqlite:///{tmp_path / 'chatbot.db'}"
    out = run_example("chatbot.py", fake_openai, "--database-url", database_url)
    assert "bot: You keep bees." in out
    assert "window: 4 messages; ledger: 8 (4 archived)" in out

    # the last question reached the model with the first turn recalled from the vector store,
    # although that turn had left the window
    last = fake_openai.requests[-1].body["messages"]
    assert last[0]["role"] == "system"
    recalled = '<memory-entry type="user">Hi, I am Ada and I keep bees on my roof.</memory-entry>'
    assert recalled in last[0]["content"]
    assert "Hi, I am Ada" not in " ".join(str(m["content"]) for m in last[1:])
    assert (tmp_path / "chatbot.vectors.db").exists()
    assert len(fake_openai.embedding_requests) >= 8

    with open_service(database_url) as service:
        events = service.get_events("chat-ada", user_id="ada")
        assert [e.message.text for e in events if e.archived][:2] == [
            "Hi, I am Ada and I keep bees on my roof.",
            "Hello Ada, bees are wonderful.",
        ]
        window = [e.message for e in events if not e.archived]
        assert [m.type for m in window] == [MessageType.USER, MessageType.ASSISTANT] * 2
        assert window[-1].text == "You keep bees."
