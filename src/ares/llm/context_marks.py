"""Marks a context manager leaves in ``LLMRequest.metadata`` when it compacts a conversation.

They live here, beside the request type, because everything above the LLM layer reads them: the
agents' context manager and the proxy's compaction write them; the turn view, the training sequences
and the viewer start a new sequence at a "compacted" request.
"""

from __future__ import annotations

from typing import Final, Literal

#: ``LLMRequest.metadata`` key: "summary" on the request that asks for a summary, "compacted" on the
#: first request after one (it starts a new training sequence).
CONTEXT_KEY: Final = "ares_context"
#: ``LLMRequest.metadata`` key: the number of the compaction a marked request belongs to (1, 2, ...).
COMPACTION_KEY: Final = "ares_compaction"
ContextMark = Literal["summary", "compacted"]
