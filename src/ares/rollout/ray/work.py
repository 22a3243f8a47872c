"""What the driver sends Ray actors and what comes back: plain frozen dataclasses (cheap to pickle)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from ares import tracing
from ares.records.collecting import TraceLevel
from ares.rollout.ray.buffer import RecordEvent
from ares.rollout.ray.control import Control
from ares.rollout.results import EpisodeResult


def tracing_level() -> str:
    """This process's span tracing level, which the actors it starts trace at."""
    return "full" if tracing.enabled("full") else "basic" if tracing.enabled("basic") else "off"


@dataclass(frozen=True, slots=True)
class RunConfig:
    """How every actor plays one run's work: the run's policy and the local runner's knobs.

    Sent once per actor and run (not with each episode), so a trainer can change the policy (new
    weights, a new endpoint) between runs on the same actors. ``control`` is the run's gate and
    version as they stand when it is sent (a replacement actor starts from the latest).
    """

    run_id: str
    policy_factory: Any
    record: bool
    trace: TraceLevel
    branch_at: int | None
    policy_timeout_s: float | None
    tracing: str = "off"
    control: Control = field(default_factory=Control)


@dataclass(frozen=True, slots=True)
class Work:
    """One unit of dispatch: episode ``index`` (or, with ``size`` > 1, a shared-prefix group of
    ``size`` episodes starting at ``index``) of task number ``task`` with ``seed``.

    ``attempt`` counts retries after a lost actor, ``refill`` the plays again after a failure
    blamed on the infrastructure (``refills``); ``run_id`` names the run (its ``RunConfig``) and
    scopes trace flow ids.
    """

    index: int
    task: int
    seed: int
    group: int | None
    run_id: str
    size: int = 1
    attempt: int = 0
    refill: int = 0

    @property
    def indices(self) -> range:
        return range(self.index, self.index + self.size)

    @property
    def dispatch_flow(self) -> int:
        """Links the driver's dispatch span to the actor's episode span (same id in both)."""
        return tracing.flow_id("dispatch", self.run_id, self.index, self.attempt, self.refill)

    @property
    def result_flow(self) -> int:
        """Links the actor's episode span to the driver's result span."""
        return tracing.flow_id("result", self.run_id, self.index, self.attempt, self.refill)

    def retried(self) -> Work:
        return replace(self, attempt=self.attempt + 1)

    def refilled(self) -> Work:
        return replace(self, refill=self.refill + 1)


@dataclass(frozen=True, slots=True)
class Played:
    """An actor's answer to one ``Work``: its results and the record events to replay, in order."""

    results: tuple[EpisodeResult, ...]
    events: tuple[RecordEvent, ...] = field(default=())
    actor: str = ""
