"""Audit: prove what an agent's model saw at any point, and that nobody changed the record.

- `verify` / `verify_all`: the hash chain (first broken position and kind of break) and the
  stored window and state against the ones replayed from the ledger;
- `replay`: the active window at a version or a time, with which summary stood in for what;
- `what_the_model_saw`: the window and injected summary in force when an event was produced;
- `timeline` / `timeline_page`: every ledger record (or a page of them) described for people;
- `export_lines` / `import_lines`: JSON lines (docs/export-format.md), verified on import.
"""

from sessionledger.infrastructure.audit.chain import BreakKind, ChainBreak
from sessionledger.infrastructure.audit.export import (
    ImportedSession,
    TamperedExport,
    export_lines,
    import_lines,
)
from sessionledger.infrastructure.audit.replay import (
    ModelView,
    StandIn,
    WindowReplay,
    replay,
    what_the_model_saw,
)
from sessionledger.infrastructure.audit.timeline import (
    TimelineEntry,
    TimelinePage,
    described_events,
    session_length,
    timeline,
    timeline_page,
)
from sessionledger.infrastructure.audit.verify import Finding, Mismatch, Verification, verify, verify_all

__all__ = [
    "BreakKind",
    "ChainBreak",
    "Finding",
    "ImportedSession",
    "Mismatch",
    "ModelView",
    "StandIn",
    "TamperedExport",
    "TimelineEntry",
    "TimelinePage",
    "Verification",
    "WindowReplay",
    "described_events",
    "export_lines",
    "import_lines",
    "replay",
    "session_length",
    "timeline",
    "timeline_page",
    "verify",
    "verify_all",
    "what_the_model_saw",
]
