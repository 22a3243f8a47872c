"""What happened in an episode, available after LAST (and after abandon/abort/cancel)."""

from __future__ import annotations

import time
import traceback
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ares.core.status import EpisodeStatus
from ares.envs.blame import Blame, blame_for, masked
from ares.sandbox.base import DiffSummary


@dataclass(frozen=True, slots=True)
class ErrorInfo:
    """An error kept as data: type, message and formatted traceback."""

    type: str
    message: str
    traceback: str = ""

    @classmethod
    def from_exception(cls, exc: BaseException) -> ErrorInfo:
        tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        return cls(type(exc).__name__, str(exc), tb)


#: The reward at which the verifier's verdict counts as a pass (``Episode.outcome``).
PASS_REWARD = 1.0

_DEFAULT_REASONS = {
    EpisodeStatus.ERRORED: "error",
    EpisodeStatus.ABORTED: "aborted",
    EpisodeStatus.ABANDONED: "abandoned",
    EpisodeStatus.CANCELLED: "cancelled",
}


@dataclass(slots=True)
class Episode:
    """Mutable record of one episode, owned by the environment; read it, do not write it."""

    id: str
    task_id: str
    seed: int | None
    status: EpisodeStatus = EpisodeStatus.RUNNING
    steps: int = 0
    reward: float | None = None
    reward_terms: Mapping[str, float] = field(default_factory=dict)
    #: The verifier's pass/fail (reward at least ``PASS_REWARD``), apart from the reward a wrapper
    #: may shape; None when the tests gave no verdict. Group statistics and filters read this.
    outcome: bool | None = None
    #: Who is to blame when the episode did not simply finish (``ares.envs.blame``); None otherwise.
    blame: Blame | None = None
    error: ErrorInfo | None = None
    truncation: str | None = None  # why a limit cut the episode ("step_limit", "time_limit", "context_limit")
    verifier_stdout: str = ""
    verifier_stderr: str = ""
    #: What the tests saw of the agent's filesystem: "outputs" (the pristine image plus the task's
    #: outputs), "full" (plus the agent's whole diff) or "in-place" (the agent's own sandbox).
    verifier_mode: str | None = None
    #: The files the tests wrote to /logs/verifier (e.g. test-output.txt), size-bounded text.
    verifier_files: dict[str, str] = field(default_factory=dict)
    #: What the agent changed outside the task's outputs (a count and the first paths), for review.
    changed_outside: DiffSummary | None = None
    started_at: float = field(default_factory=time.time)
    ended_at: float | None = None
    #: How many agent commands each resource limit stopped ("memory", "pids", "disk", ...).
    limit_hits: Counter[str] = field(default_factory=Counter)
    #: Why the sandbox died under the agent's commands, when it did; the episode still went on to
    #: verification with the agent's files (``errored`` is kept for faults the agent did not cause).
    sandbox_crash: str | None = None
    #: Why the episode ended, as data: the agent's own reason when it stopped by itself ("submitted",
    #: "format_errors", its "step_limit"), else the limit that cut it ("step_limit", "time_limit",
    #: "context_limit"), or "error", "aborted", "abandoned", "cancelled".
    exit_reason: str | None = None
    #: What the policy cost: time it took to answer (between an observation and the next step),
    #: tokens and money its responses reported (None when no response reported them).
    policy_latency_s: float = 0.0
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cost_usd: float | None = None
    #: For an episode restored or forked from a snapshot: the episode it branched from, at which step.
    parent_episode_id: str | None = None
    branch_step: int | None = None
    #: Which image the episode's sandbox really ran (``ImageIdentity.to_dict()``): what the task named,
    #: where it came from, its digest, and the stand-in that served it if the offline fallback did.
    image: dict[str, str | None] | None = None
    metadata: dict[str, Any] = field(default_factory=dict)

    def count_policy(self, latency_s: float, usage: Any, cost: float | None) -> None:
        """Add one policy answer: its latency, its ``Usage`` (or None) and cost (or None)."""
        self.policy_latency_s += latency_s
        if usage is not None:
            self.prompt_tokens = (self.prompt_tokens or 0) + usage.prompt_tokens
            self.completion_tokens = (self.completion_tokens or 0) + usage.completion_tokens
        if cost is not None:
            self.cost_usd = (self.cost_usd or 0.0) + cost

    def end(
        self, status: EpisodeStatus, error: BaseException | None = None, reason: str | None = None
    ) -> None:
        """Record how the episode ended; the first recorded end wins."""
        if self.status is not EpisodeStatus.RUNNING:
            return
        self.status = status
        self.ended_at = time.time()
        if error is not None and self.error is None:
            self.error = ErrorInfo.from_exception(error)
        if self.exit_reason is None:
            self.exit_reason = reason or _DEFAULT_REASONS.get(status)
        if self.blame is None:
            self.blame = blame_for(status, error, self.sandbox_crash)

    @property
    def masked(self) -> bool:
        """Whether a trainer should leave this episode out: its blame is not the policy's doing."""
        return masked(self.blame)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "task_id": self.task_id,
            "seed": self.seed,
            "status": str(self.status),
            "steps": self.steps,
            "reward": self.reward,
            "reward_terms": dict(self.reward_terms),
            "outcome": self.outcome,
            "blame": self.blame,
            "masked": self.masked,
            "error": None if self.error is None else {
                "type": self.error.type, "message": self.error.message, "traceback": self.error.traceback,
            },
            "truncation": self.truncation,
            "limit_hits": dict(self.limit_hits),
            "sandbox_crash": self.sandbox_crash,
            "exit_reason": self.exit_reason,
            "policy_latency_s": self.policy_latency_s,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "cost_usd": self.cost_usd,
            "parent_episode_id": self.parent_episode_id,
            "branch_step": self.branch_step,
            "image": self.image,
            "verifier_stdout": self.verifier_stdout,
            "verifier_stderr": self.verifier_stderr,
            "verifier_mode": self.verifier_mode,
            "verifier_files": dict(self.verifier_files),
            "changed_outside": None if self.changed_outside is None else self.changed_outside.to_dict(),
            "started_at": self.started_at,
            "ended_at": self.ended_at,
            "duration_s": None if self.ended_at is None else self.ended_at - self.started_at,
            "metadata": self.metadata,
        }  # fmt: skip
