"""Per-task pass rates over the policy's recent versions: what a curriculum samples tasks by.

A GRPO group whose members all pass or all fail has zero advantage, so its rollouts teach nothing;
a trainer that knows each task's pass rate can send its rollouts where the policy can still learn.
``PassRateStore`` counts, per task id, the verifier's pass/fail outcomes per policy version.

The rate is over a window: the ``window`` most recent distinct policy versions the store has seen
across all tasks, i.e. the versions ``v > newest - window`` where ``newest`` is the highest version
recorded so far, plus every unversioned sample (``version=None``: a fixed policy, a validation run,
which never ages). Older counts describe a policy that is gone; they drop out of the rate and are
pruned as new versions arrive, so a task holds at most ``window`` versions and the unversioned
count. Beside the window, an exponential moving average of every outcome ever recorded
(``ema``) follows the trend in record order, with no regard to versions.

Outcomes are the verifier's pass/fail, never a shaped reward: a partial score of 0.7 is not 70% of
a pass, and filtering groups on shaped scores keeps groups whose advantage comes from the shaping
alone (phantom gradients toward whatever the shaping rewards).

The store saves as one JSON document beside a run (``save``/``load``) and stores of several earlier
runs add up (``merge``). It is plain data with no locking: one owner records into it.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ares.errors import AresError

FORMAT = 1
#: The key of the unversioned count in a saved store (version keys are decimal integers).
UNVERSIONED = "unversioned"


class PassRateStoreError(AresError):
    """A saved pass-rate store (or a file seeding one) that cannot be read: what and where is wrong."""


@dataclass(frozen=True, slots=True)
class TaskPassRate:
    """One task's outcomes: ``passes`` of ``samples`` inside the store's window, and the moving
    average of every outcome ever recorded (``ema``; None before the first)."""

    task_id: str
    passes: int
    samples: int
    ema: float | None

    @property
    def rate(self) -> float | None:
        """Passes over samples inside the window; None with no samples (unknown, not 0)."""
        return self.passes / self.samples if self.samples else None


class _Task:
    """One task's counts: version (None: unversioned) -> [passes, samples]; its EMA; all samples ever
    (what weighs its EMA in a merge)."""

    __slots__ = ("counts", "ema", "seen")

    def __init__(self) -> None:
        self.counts: dict[int | None, list[int]] = {}
        self.ema: float | None = None
        self.seen = 0


class PassRateStore:
    """Per task id, pass/fail counts per policy version over a window of recent versions, and an EMA.

    ``window``: how many of the newest versions count. ``ema_alpha``: the weight of each new outcome
    in the moving average (the first outcome starts it: ``ema = outcome``, then
    ``ema = (1 - alpha) * ema + alpha * outcome``).
    """

    def __init__(self, *, window: int = 4, ema_alpha: float = 0.2) -> None:
        if isinstance(window, bool) or not isinstance(window, int) or window < 1:
            raise ValueError(f"window must be an int >= 1, got {window!r}")
        if not 0.0 < ema_alpha <= 1.0:
            raise ValueError(f"ema_alpha must be in (0, 1], got {ema_alpha!r}")
        self.window = window
        self.ema_alpha = float(ema_alpha)
        self._tasks: dict[str, _Task] = {}
        self._newest: int | None = None

    @property
    def newest_version(self) -> int | None:
        """The highest version recorded so far (None while every sample is unversioned)."""
        return self._newest

    def record(self, task_id: str, outcome: bool, version: int | None = None) -> None:
        """Count one verified outcome of ``task_id`` under policy ``version`` (None: unversioned).

        ``outcome`` must be a bool (the verifier's pass/fail): a shaped reward is refused, not
        rounded. A version older than the window still moves the EMA but counts in no rate.
        """
        if not isinstance(outcome, bool):
            raise TypeError(f"outcome must be the verifier's pass/fail (a bool), got {outcome!r}")
        _check_version(version)
        task = self._task(task_id)
        value = 1.0 if outcome else 0.0
        task.ema = value if task.ema is None else (1.0 - self.ema_alpha) * task.ema + self.ema_alpha * value
        task.seen += 1
        self._see(version)
        self._add(task, version, int(outcome), 1)
        self._prune(task)

    def get(self, task_id: str) -> TaskPassRate:
        """``task_id``'s windowed counts and EMA (zero samples and no EMA for a task never recorded)."""
        task = self._tasks.get(task_id)
        if task is None:
            return TaskPassRate(task_id, 0, 0, None)
        passes = samples = 0
        for version, (p, n) in task.counts.items():
            if self._counted(version):
                passes, samples = passes + p, samples + n
        return TaskPassRate(task_id, passes, samples, task.ema)

    def rates(self) -> dict[str, TaskPassRate]:
        """Every recorded task's rate, by task id (in the order tasks were first recorded)."""
        return {task_id: self.get(task_id) for task_id in self._tasks}

    def __len__(self) -> int:
        return len(self._tasks)

    def __contains__(self, task_id: object) -> bool:
        return task_id in self._tasks

    def merge(self, other: PassRateStore) -> None:
        """Add ``other``'s counts inside its window to this store's (e.g. the stores of several
        earlier runs); this store's settings stay. Where both have an EMA for a task, the result is
        their mean weighted by each store's samples of it ever."""
        self._see(other._newest)
        for task_id, theirs in other._tasks.items():
            mine = self._task(task_id)
            for version, (p, n) in theirs.counts.items():
                if other._counted(version):
                    self._add(mine, version, p, n)
            if theirs.ema is not None:
                weighted = (mine.ema or 0.0) * mine.seen + theirs.ema * theirs.seen
                mine.ema = weighted / (mine.seen + theirs.seen) if mine.seen + theirs.seen else theirs.ema
            mine.seen += theirs.seen
        for task in self._tasks.values():
            self._prune(task)

    def to_dict(self) -> dict[str, Any]:
        """The store as JSON-compatible data: settings, newest version, and per task its windowed
        counts as ``{version: [passes, samples]}`` (versions as decimal strings, ``"unversioned"``),
        its EMA and its samples ever."""
        tasks = {}
        for task_id, task in self._tasks.items():
            counts = {
                UNVERSIONED if version is None else str(version): list(count)
                for version, count in sorted(task.counts.items(), key=lambda item: _order(item[0]))
                if self._counted(version)
            }
            tasks[task_id] = {"counts": counts, "ema": task.ema, "seen": task.seen}
        return {
            "format": FORMAT,
            "window": self.window,
            "ema_alpha": self.ema_alpha,
            "newest_version": self._newest,
            "tasks": tasks,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PassRateStore:
        """A store from ``to_dict``'s data; ``PassRateStoreError`` saying what is wrong otherwise."""
        if not isinstance(data, Mapping):
            raise PassRateStoreError(f"a pass-rate store is a JSON object, not {type(data).__name__}")
        if data.get("format") != FORMAT:
            raise PassRateStoreError(
                f"not a pass-rate store of format {FORMAT} (its format is {data.get('format')!r})"
            )
        try:
            store = cls(window=data["window"], ema_alpha=data["ema_alpha"])
            newest = data["newest_version"]
            _check_version(newest)
            store._newest = newest
            for task_id, item in data["tasks"].items():
                task = store._tasks[str(task_id)] = _read_task(item)
                store._prune(task)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            what = f"missing key {exc}" if isinstance(exc, KeyError) else str(exc)
            raise PassRateStoreError(f"a malformed pass-rate store: {what}") from None
        return store

    def save(self, path: Path) -> None:
        """Write the store to ``path`` whole: a temporary file in the same dir, then renamed over it
        (a reader, or a crash, never sees half a file)."""
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        try:
            tmp.write_text(json.dumps(self.to_dict(), indent=1) + "\n", encoding="utf-8")
            os.replace(tmp, path)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise

    @classmethod
    def load(cls, path: Path) -> PassRateStore:
        """The store saved at ``path``; ``PassRateStoreError`` naming the path and what is wrong."""
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise PassRateStoreError(f"cannot read the pass-rate store {path}: {exc}") from None
        try:
            return cls.from_dict(data)
        except PassRateStoreError as exc:
            raise PassRateStoreError(f"{path}: {exc}") from None

    def _task(self, task_id: str) -> _Task:
        if not isinstance(task_id, str):
            raise TypeError(f"task ids are str, got {task_id!r}")
        task = self._tasks.get(task_id)
        if task is None:
            task = self._tasks[task_id] = _Task()
        return task

    def _see(self, version: int | None) -> None:
        """Move the window up to ``version`` if it is the newest yet."""
        if version is not None and (self._newest is None or version > self._newest):
            self._newest = version

    def _add(self, task: _Task, version: int | None, passes: int, samples: int) -> None:
        """Add counts of ``version`` to ``task``'s (nothing if the version is outside the window)."""
        if self._counted(version):
            count = task.counts.setdefault(version, [0, 0])
            count[0] += passes
            count[1] += samples

    def _counted(self, version: int | None) -> bool:
        """Whether samples of ``version`` are inside the window."""
        return version is None or self._newest is None or version > self._newest - self.window

    def _prune(self, task: _Task) -> None:
        for version in [v for v in task.counts if not self._counted(v)]:
            del task.counts[version]


def _check_version(version: object) -> None:
    if version is not None and (isinstance(version, bool) or not isinstance(version, int)):
        raise TypeError(f"a policy version is an int or None, got {version!r}")


def _order(version: int | None) -> tuple[bool, int]:
    """Versions ascending, the unversioned count first."""
    return (version is not None, version or 0)


def _read_task(item: Mapping[str, Any]) -> _Task:
    task = _Task()
    for key, (passes, samples) in item["counts"].items():
        if key != UNVERSIONED and not key.lstrip("-").isdigit():
            raise ValueError(f"a version key is a decimal integer or {UNVERSIONED!r}, got {key!r}")
        version = None if key == UNVERSIONED else int(key)
        if not all(isinstance(n, int) and not isinstance(n, bool) for n in (passes, samples)):
            raise ValueError(f"counts are integers, got {[passes, samples]!r}")
        if not 0 <= passes <= samples:
            raise ValueError(f"passes must be within 0..samples, got {passes} of {samples}")
        task.counts[version] = [passes, samples]
    ema = item["ema"]
    if ema is not None and not (isinstance(ema, int | float) and math.isfinite(ema) and 0.0 <= ema <= 1.0):
        raise ValueError(f"an EMA is a number in [0, 1] or null, got {ema!r}")
    task.ema = None if ema is None else float(ema)
    seen = item["seen"]
    if isinstance(seen, bool) or not isinstance(seen, int) or seen < 0:
        raise ValueError(f"samples ever ('seen') is an int >= 0, got {seen!r}")
    task.seen = seen
    return task
