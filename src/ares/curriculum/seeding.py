"""Seeding a pass-rate store from earlier measurements, so a run's first draws are informed too.

Two sources, both counted as unversioned samples (they were measured with some earlier policy, not
a version of this run's):

- an ``ares tasks validate`` report (``validation.json``): its per-task ``policy_outcomes``, the
  pass/fail of each run of a policy on the task, where the report has them. The oracle's and the
  null policy's runs are not counted: the reference solution passing says nothing about how hard
  the task is for a policy.
- an ``ares run`` output dir: its ``episodes/*.json``, one result per episode. What a trainer would
  learn from counts (the rules of ``ares.envs.blame``): a finished episode by its verifier's outcome
  (a reward >= 1 where it has none), an unmasked one that did not finish (cut by a limit, the
  policy's own error) as a failure; a masked one (infrastructure, a broken task) says nothing about
  the policy and is skipped. A run from before masks were recorded counts its finished and
  truncated episodes only (whose errors were the policy's cannot be told there).

Both read whole files, blocking: call them before a run starts, or off the event loop.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ares.curriculum.pass_rates import PassRateStore, PassRateStoreError

#: Episode statuses of a run's results that are the policy's doing when no mask was recorded.
_UNMASKED_WITHOUT_MASKS = ("finished", "truncated")


def seed_from_validation(store: PassRateStore, path: Path) -> int:
    """Count the ``policy_outcomes`` of the validation report at ``path`` into ``store`` (each an
    unversioned sample; null entries skipped). The number of samples added."""
    data = _read_json(path)
    try:
        fmt = data.get("format")
        if fmt is not None and not str(fmt).startswith("ares-task-validation/"):
            raise ValueError(f"its format is {fmt!r}, not an ares task validation report")
        found = []
        tasks = data["tasks"]
        if not isinstance(tasks, list) or not all(isinstance(item, dict) for item in tasks):
            raise ValueError("'tasks' is a list of objects, one per task")
        for item in tasks:
            task_id, outcomes = item["task_id"], item.get("policy_outcomes")
            if not isinstance(task_id, str):
                raise ValueError(f"a task_id is a string, got {task_id!r}")
            if outcomes is None:
                continue
            if not isinstance(outcomes, list) or not all(o is None or isinstance(o, bool) for o in outcomes):
                raise ValueError(f"{task_id}: policy_outcomes is a list of true/false/null, got {outcomes!r}")
            found.extend((task_id, outcome) for outcome in outcomes if outcome is not None)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise PassRateStoreError(f"a malformed validation report {path}: {_what(exc)}") from None
    for task_id, outcome in found:
        store.record(task_id, outcome)
    return len(found)


def seed_from_run(store: PassRateStore, run_dir: Path) -> int:
    """Count the episodes of the ``ares run`` output in ``run_dir`` into ``store`` (unversioned;
    the module's docstring says which count). The number of samples added."""
    episodes = run_dir / "episodes"
    if not episodes.is_dir():
        raise PassRateStoreError(f"{run_dir} is not an ares run output: it has no episodes/ dir")
    found = []
    for path in sorted(episodes.glob("*.json")):
        data = _read_json(path)
        try:
            outcome = _episode_outcome(data)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise PassRateStoreError(f"a malformed episode result {path}: {_what(exc)}") from None
        if outcome is not None:
            found.append((data["task_id"], outcome))
    for task_id, outcome in found:
        store.record(task_id, outcome)
    return len(found)


def _episode_outcome(data: dict[str, Any]) -> bool | None:
    """What one episode result says of the policy: pass, fail, or nothing (None)."""
    task_id, status, masked = data["task_id"], data["status"], data.get("masked")
    if not isinstance(task_id, str) or not isinstance(status, str):
        raise ValueError(f"task_id and status are strings, got {task_id!r} and {status!r}")
    if masked is not None and not isinstance(masked, bool):
        raise ValueError(f"masked is true or false, got {masked!r}")
    if masked or status == "running" or (masked is None and status not in _UNMASKED_WITHOUT_MASKS):
        return None
    if status != "finished":
        return False
    outcome, reward = data.get("outcome"), data.get("reward")
    if outcome is not None:
        if not isinstance(outcome, bool):
            raise ValueError(f"outcome is true, false or null, got {outcome!r}")
        return outcome
    if reward is not None and (isinstance(reward, bool) or not isinstance(reward, int | float)):
        raise ValueError(f"reward is a number or null, got {reward!r}")
    return reward is not None and reward >= 1.0


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise PassRateStoreError(f"cannot read {path}: {exc}") from None
    if not isinstance(data, dict):
        raise PassRateStoreError(f"{path} holds a JSON {type(data).__name__}, not an object")
    return data


def _what(exc: Exception) -> str:
    return f"missing key {exc}" if isinstance(exc, KeyError) else str(exc)
