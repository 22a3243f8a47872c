"""What a run returns: one EpisodeResult per episode and a RunSummary of them all.

A result carries the environment's episode record and the runner's own accounting (timings, tokens,
cost); an errored episode has no reward and is counted apart from the scored ones, so a summary's
mean reward and pass rate are over scored episodes, with the errors grouped by cause.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ares.core.status import EpisodeStatus
from ares.envs.blame import Blame, masked


@dataclass(frozen=True, slots=True)
class EpisodeResult:
    """One finished episode: the environment's record plus the runner's timings and accounting.

    ``reward`` is None for an errored episode (it has no score); ``error`` is the episode's error
    (type, message, traceback) when it has one. ``policy_latencies_s`` are the policy's answer times;
    tokens and cost are summed from its responses (None when none reported them). ``record`` is the
    environment's episode dict; empty in what ``run_episodes(keep_records=False)`` returns.
    """

    index: int
    task_id: str
    status: EpisodeStatus
    reward: float | None
    steps: int
    duration_s: float
    step_latencies_s: tuple[float, ...]
    record: dict[str, Any] = field(default_factory=dict)
    group: int | None = None
    error: dict[str, Any] | None = None
    exit_reason: str | None = None
    policy_latencies_s: tuple[float, ...] = ()
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cost_usd: float | None = None
    #: The verifier's pass/fail apart from the reward (``Episode.outcome``); None without a verdict.
    outcome: bool | None = None
    #: Who is to blame when the episode did not simply finish (``ares.envs.blame``).
    blame: Blame | None = None
    #: How many times the runner played this episode again after an infrastructure failure.
    refills: int = 0
    #: The oldest policy version among its answers (what the staleness bound reads); None unversioned.
    policy_version: int | None = None

    @property
    def passed(self) -> bool:
        """Finished with a pass: the verifier's outcome where known, else a reward of at least 1."""
        if self.status is not EpisodeStatus.FINISHED:
            return False
        return self.outcome if self.outcome is not None else (self.reward or 0.0) >= 1.0

    @property
    def masked(self) -> bool:
        """Whether a trainer should leave this episode out (``ares.envs.blame.MASKED``)."""
        return masked(self.blame)

    @property
    def errored(self) -> bool:
        return self.status is EpisodeStatus.ERRORED

    def to_dict(self) -> dict[str, Any]:
        return {
            **self.record,
            "index": self.index,
            "task_id": self.task_id,
            "status": str(self.status),
            "reward": self.reward,
            "steps": self.steps,
            "passed": self.passed,
            "group": self.group,
            "error": self.error,
            "exit_reason": self.exit_reason,
            "runner_duration_s": self.duration_s,
            "step_latencies_s": list(self.step_latencies_s),
            "policy_latencies_s": list(self.policy_latencies_s),
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "cost_usd": self.cost_usd,
            "outcome": self.outcome,
            "blame": self.blame,
            "masked": self.masked,
            "refills": self.refills,
            "policy_version": self.policy_version,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> EpisodeResult:
        """Rebuild a result written by ``to_dict`` (``ares run --resume`` reads earlier runs)."""
        own = {
            "index", "task_id", "status", "reward", "steps", "passed", "runner_duration_s", "group",
            "step_latencies_s", "policy_latencies_s", "outcome", "blame", "masked", "refills",
            "policy_version",
        }  # fmt: skip
        return cls(
            index=int(data["index"]),
            task_id=str(data["task_id"]),
            status=EpisodeStatus(data["status"]),
            reward=data.get("reward"),
            steps=int(data.get("steps", 0)),
            duration_s=float(data.get("runner_duration_s", 0.0)),
            step_latencies_s=tuple(data.get("step_latencies_s", ())),
            record={k: v for k, v in data.items() if k not in own},
            group=data.get("group"),
            error=data.get("error"),
            exit_reason=data.get("exit_reason"),
            policy_latencies_s=tuple(data.get("policy_latencies_s", ())),
            prompt_tokens=data.get("prompt_tokens"),
            completion_tokens=data.get("completion_tokens"),
            cost_usd=data.get("cost_usd"),
            outcome=data.get("outcome"),
            blame=data.get("blame"),
            refills=int(data.get("refills", 0)),
            policy_version=data.get("policy_version"),
        )


@dataclass(frozen=True, slots=True)
class ErrorGroup:
    """Episodes that errored the same way: the error's type and message, how many, and one example."""

    type: str
    message: str
    count: int
    example_index: int
    example_task_id: str


@dataclass(frozen=True, slots=True)
class GroupStats:
    """One group of rollouts of a task: its scored episodes' mean reward and pass rate."""

    group: int
    task_id: str
    size: int
    errored: int
    mean_reward: float | None
    pass_rate: float | None


@dataclass(frozen=True, slots=True)
class RunSummary:
    """A run at a glance. Reward means and pass rates count scored episodes only (not errored);
    ``errors`` groups the errored ones by cause."""

    episodes: int
    mean_reward: float
    pass_rate: float
    statuses: dict[str, int]
    mean_steps: float
    wall_time_s: float
    p50_step_latency_s: float | None
    errored: int = 0
    errors: tuple[ErrorGroup, ...] = ()
    failed_task_ids: tuple[str, ...] = ()
    errored_task_ids: tuple[str, ...] = ()
    p50_policy_latency_s: float | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cost_usd: float | None = None
    groups: tuple[GroupStats, ...] = ()
    #: Episodes by blame (``infra``, ``policy``, ``task``, ``limit``), and how many a trainer masks.
    blames: dict[str, int] = field(default_factory=dict)
    masked: int = 0
    #: Episodes played again after an infrastructure failure (``run_episodes(refills=...)``).
    refills: int = 0
    #: Groups that carry no signal for group-relative advantages, by why (``group_agreement``).
    uninformative: dict[str, int] = field(default_factory=dict)

    @property
    def scored(self) -> int:
        return self.episodes - self.errored

    @classmethod
    def of(cls, results: Sequence[EpisodeResult], wall_time_s: float) -> RunSummary:
        n = len(results)
        scored = [r for r in results if not r.errored]
        errored = [r for r in results if r.errored]
        latencies = [x for r in results for x in r.step_latencies_s]
        policy_latencies = [x for r in results for x in r.policy_latencies_s]
        return cls(
            episodes=n,
            mean_reward=statistics.fmean(r.reward or 0.0 for r in scored) if scored else 0.0,
            pass_rate=sum(r.passed for r in scored) / len(scored) if scored else 0.0,
            statuses=dict(Counter(str(r.status) for r in results)),
            mean_steps=statistics.fmean(r.steps for r in results) if n else 0.0,
            wall_time_s=wall_time_s,
            p50_step_latency_s=statistics.median(latencies) if latencies else None,
            errored=len(errored),
            errors=_error_groups(errored),
            failed_task_ids=tuple(dict.fromkeys(r.task_id for r in scored if not r.passed)),
            errored_task_ids=tuple(dict.fromkeys(r.task_id for r in errored)),
            p50_policy_latency_s=statistics.median(policy_latencies) if policy_latencies else None,
            prompt_tokens=_total(r.prompt_tokens for r in results),
            completion_tokens=_total(r.completion_tokens for r in results),
            cost_usd=_total(r.cost_usd for r in results),
            groups=_group_stats(results),
            blames=dict(Counter(r.blame for r in results if r.blame is not None)),
            masked=sum(r.masked for r in results),
            refills=sum(r.refills for r in results),
            uninformative=dict(Counter(filter(None, map(group_agreement, _groups(results).values())))),
        )


def group_agreement(group: Sequence[EpisodeResult]) -> str | None:
    """Why a group of rollouts of one task gives group-relative advantages (GRPO) nothing to learn
    from, or None when it does: ``all_passed`` / ``all_failed`` when every member a trainer keeps
    (unmasked) has the same outcome, ``too_few`` when fewer than two are kept. The outcome is the
    verifier's pass/fail, never the shaped reward: a group of failures that differ only by their
    penalties would pass a reward filter and train the policy on noise."""
    kept = [r for r in group if not r.masked]
    if len(kept) < 2:
        return "too_few"
    passes = sum(r.passed for r in kept)
    if passes == len(kept):
        return "all_passed"
    return "all_failed" if passes == 0 else None


def _groups(results: Sequence[EpisodeResult]) -> dict[int, list[EpisodeResult]]:
    members: dict[int, list[EpisodeResult]] = {}
    for result in results:
        if result.group is not None:
            members.setdefault(result.group, []).append(result)
    return members


def _total(values: Any) -> Any:
    """The sum of the known values, None when none is known."""
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def _error_groups(errored: Sequence[EpisodeResult]) -> tuple[ErrorGroup, ...]:
    by_cause: dict[tuple[str, str], list[EpisodeResult]] = {}
    for result in errored:
        error = result.error or {}
        key = (str(error.get("type") or "unknown"), str(error.get("message") or "no error recorded"))
        by_cause.setdefault(key, []).append(result)
    groups = [
        ErrorGroup(kind, message, len(members), members[0].index, members[0].task_id)
        for (kind, message), members in by_cause.items()
    ]
    return tuple(sorted(groups, key=lambda g: -g.count))


def _group_stats(results: Sequence[EpisodeResult]) -> tuple[GroupStats, ...]:
    stats = []
    for group, rs in sorted(_groups(results).items()):
        scored = [r for r in rs if not r.errored]
        stats.append(
            GroupStats(
                group=group,
                task_id=rs[0].task_id,
                size=len(rs),
                errored=len(rs) - len(scored),
                mean_reward=statistics.fmean(r.reward or 0.0 for r in scored) if scored else None,
                pass_rate=sum(r.passed for r in scored) / len(scored) if scored else None,
            )
        )
    return tuple(stats)
