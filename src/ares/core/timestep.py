"""dm_env-style TimeStep with constructor helpers so no caller builds one by hand."""

from __future__ import annotations

import enum
from typing import Generic, NamedTuple, TypeVar

ObsT = TypeVar("ObsT")


class StepType(enum.IntEnum):
    """Where a TimeStep sits in its episode."""

    FIRST = 0
    MID = 1
    LAST = 2

    def first(self) -> bool:
        return self is StepType.FIRST

    def mid(self) -> bool:
        return self is StepType.MID

    def last(self) -> bool:
        return self is StepType.LAST


class TimeStep(NamedTuple, Generic[ObsT]):
    """One transition. FIRST has reward/discount None; LAST may have observation None."""

    step_type: StepType
    reward: float | None
    discount: float | None
    observation: ObsT | None

    def first(self) -> bool:
        return self.step_type is StepType.FIRST

    def mid(self) -> bool:
        return self.step_type is StepType.MID

    def last(self) -> bool:
        return self.step_type is StepType.LAST


#: The helpers build TimeSteps without the NamedTuple's Python ``__new__`` (one per environment step).
_new_tuple = tuple.__new__


def restart(observation: ObsT) -> TimeStep[ObsT]:
    """The FIRST step of an episode."""
    return _new_tuple(TimeStep, (StepType.FIRST, None, None, observation))


def transition(observation: ObsT, reward: float = 0.0, discount: float = 1.0) -> TimeStep[ObsT]:
    """A MID step."""
    return _new_tuple(TimeStep, (StepType.MID, reward, discount, observation))


def termination(reward: float, observation: ObsT | None = None) -> TimeStep[ObsT]:
    """The LAST step of an episode that ended on its own (discount 0)."""
    return _new_tuple(TimeStep, (StepType.LAST, reward, 0.0, observation))


def truncation(reward: float, observation: ObsT | None = None) -> TimeStep[ObsT]:
    """The LAST step of an episode cut short by a limit (discount 1: the future still counts)."""
    return _new_tuple(TimeStep, (StepType.LAST, reward, 1.0, observation))
