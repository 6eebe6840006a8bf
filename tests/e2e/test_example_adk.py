"""examples/adk_agent.py runs as a user would run it, offline, on a SQLite ledger it creates."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_adk_example_holds_a_conversation_rewinds_and_verifies(tmp_path):
    url = f"sqlite:///{tmp_path / 'adk.db'}"
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "adk_agent.py"), url],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "'Weather in Lisbon tomorrow?' -> 'Sunny and 21 °C in Lisbon tomorrow.'",
        "'What should I pack?' -> 'Pack sunglasses.'",
        "'What should I wear in the evening?' -> 'A light jacket for the evening.'",
        "state: {'last_answer': 'A light jacket for the evening.', 'user:units': 'metric'}",
        "ADK sees 7 events; the ledger keeps 11 records",
        "record kinds: created, event, event, event, event, event, event, rewind, event, event, event",
        "hash chain verified: True",
    ]
    assert (tmp_path / "adk.db").exists()
