"""One policy call as the runner saw it: the version serving when it was asked, and its clock.

An asynchronous trainer bounds how stale a sample may be, counting from when the episode asked,
queue time included (an answer that waited behind a weight update is older than its answer
time says). The runner records each call beside the step it produced (``StepRecord.call``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class PolicyCall:
    """When the observation was handed over, when the policy was really asked (after any pause of the
    run), when it answered (wall clock, seconds since the epoch), and the version serving when it was
    asked (``ares.policies.versions``; None: the policy reports none)."""

    requested_at: float
    asked_at: float
    answered_at: float
    requested_version: int | None = None

    @property
    def queue_s(self) -> float:
        """How long the request waited before the policy took it (e.g. held by a paused gate)."""
        return max(0.0, self.asked_at - self.requested_at)

    @property
    def answer_s(self) -> float:
        """How long the policy took to answer once asked."""
        return max(0.0, self.answered_at - self.asked_at)

    def to_json(self) -> dict[str, Any]:
        return {
            "requested_at": self.requested_at,
            "asked_at": self.asked_at,
            "answered_at": self.answered_at,
            "requested_version": self.requested_version,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> PolicyCall | None:
        if not data:
            return None
        version = data.get("requested_version")
        return cls(
            requested_at=float(data["requested_at"]),
            asked_at=float(data["asked_at"]),
            answered_at=float(data["answered_at"]),
            requested_version=None if version is None else int(version),
        )
