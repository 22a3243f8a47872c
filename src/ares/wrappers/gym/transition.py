"""From an ARES ``TimeStep`` to gymnasium's ``reward, terminated, truncated, info``.

Works for any ``Environment``: what only some environments know (the episode's status, id, task,
truncation reason, reward terms) is read with ``getattr`` from the innermost environment, and the
step type and discount decide when it is missing.

Info keys. Every call: ``timestep`` (the ARES TimeStep), ``status`` (the episode status string) and
``task_id``. At reset and at the last step also ``episode_id`` (and ``seed`` at reset); at the last
step ``truncation``, ``reward_terms`` and, for an errored episode, ``error``. ``episode_id`` is left
out of the middle steps on purpose: gymnasium's ``check_env`` requires the infos of two same-seed
episodes to be equal step by step, and a unique id never is. The id of the running episode is
always on the env's ``episode_id`` attribute.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ares.core.timestep import TimeStep


@dataclass(frozen=True, slots=True)
class Transition:
    """Gymnasium's view of one step, minus the observation (the codec renders that)."""

    reward: float
    terminated: bool
    truncated: bool
    info: dict[str, Any]

    @property
    def done(self) -> bool:
        return self.terminated or self.truncated


def innermost(env: object) -> object:
    """The environment under all ARES wrappers (wrappers expose ``unwrapped``)."""
    return getattr(env, "unwrapped", env)


def episode_status(ts: TimeStep[Any], env: object) -> str:
    """The environment's own status when it keeps one; otherwise running, or at LAST truncated when
    the discount is 1.0 (a limit cut the episode) and finished when it is not."""
    status = getattr(getattr(innermost(env), "episode", None), "status", None)
    if status is not None and (str(status) != "running" or not ts.last()):
        return str(status)
    if not ts.last():
        return "running"
    return "truncated" if ts.discount == 1.0 else "finished"


def _identity(env: object) -> tuple[Any, Any]:
    inner = innermost(env)
    episode, task = getattr(inner, "episode", None), getattr(inner, "task", None)
    task_id = getattr(task, "id", None) or getattr(episode, "task_id", None)
    return getattr(episode, "id", None), task_id


def reset_info(ts: TimeStep[Any], env: object, seed: int | None) -> dict[str, Any]:
    episode_id, task_id = _identity(env)
    status = episode_status(ts, env)
    return {"timestep": ts, "status": status, "task_id": task_id, "episode_id": episode_id, "seed": seed}


def step_transition(ts: TimeStep[Any], env: object) -> Transition:
    """``terminated``/``truncated`` come from the status and discount at LAST, never from constants."""
    status = episode_status(ts, env)
    episode_id, task_id = _identity(env)
    info: dict[str, Any] = {"timestep": ts, "status": status, "task_id": task_id}
    reward = 0.0 if ts.reward is None else float(ts.reward)
    if not ts.last():
        return Transition(reward, False, False, info)
    truncated = status == "truncated" or ts.discount == 1.0
    episode = getattr(innermost(env), "episode", None)
    info["episode_id"] = episode_id
    info["truncation"] = getattr(episode, "truncation", None)
    info["reward_terms"] = dict(getattr(episode, "reward_terms", None) or {})
    error = getattr(episode, "error", None)
    if error is not None:
        kind, message = getattr(error, "type", type(error).__name__), getattr(error, "message", error)
        info["error"] = {"type": str(kind), "message": str(message)}
    return Transition(reward, not truncated, truncated, info)
