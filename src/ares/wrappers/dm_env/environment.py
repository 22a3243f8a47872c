"""AresDmEnv: an ARES environment behind the synchronous ``dm_env.Environment`` API.

The ARES environment runs on a private event loop (``PrivateLoop``), so the adapter works the
same from a plain script, from Jupyter and from inside a running asyncio application.

dm_env semantics, which differ from ARES's own ``Environment``:

- ``step()`` before the first ``reset()`` or after a LAST step starts a new episode and returns its
  FIRST step; the action passed to that call is ignored (not even validated). ARES raises instead.
- dm_env's TimeStep has no info dict: read the ARES record of the current or last episode (task id,
  status, truncation reason, error) from ``AresDmEnv.episode``.
- FIRST has reward and discount None; LAST has discount 0.0 when the episode terminated and 1.0
  when a limit truncated it (exactly what ARES reports). The observation at LAST is None when the
  ARES environment has no next request to show (``CodeEnvironment`` never has one), so the
  observation spec is ``optional``.
"""

from __future__ import annotations

from collections.abc import Coroutine
from types import TracebackType
from typing import Any, Literal, Self, get_args

import dm_env
import numpy as np
from dm_env import specs

from ares.core.environment import Environment
from ares.core.timestep import TimeStep
from ares.envs.episode import Episode
from ares.errors import EnvironmentStateError
from ares.llm.openai_chat import request_to_openai
from ares.llm.types import LLMRequest, LLMResponse, text_response
from ares.wrappers.dm_env.specs import (
    ChatMessagesSpec,
    LLMRequestSpec,
    LLMResponseSpec,
    ObjectSpec,
    TextSpec,
    object_scalar,
)
from ares.wrappers.private_loop import PrivateLoop

#: "object": ``ares.LLMRequest``; "messages": the conversation as OpenAI chat dicts in a 0-d object
#: array (``.item()`` gives the list; tools and sampling parameters are left out: use "object").
ObservationRendering = Literal["object", "messages"]
#: "object": ``ares.LLMResponse``; "text": a ``str``, sent as a plain text response.
ActionRendering = Literal["object", "text"]

#: The command in the action spec's example: harmless, so generated actions drive real agent steps.
EXAMPLE_COMMAND = "true"


class AresDmEnv(dm_env.Environment):
    """A synchronous dm_env over an async ARES environment, which it owns and closes.

    ``env`` is any ARES ``Environment`` whose observations are ``LLMRequest`` and actions
    ``LLMResponse`` (e.g. ``ares.make("humaneval")``, wrapped or not). Use it as a context manager,
    or call ``close()``: that stops the episode's sandbox and closes the private loop.
    """

    def __init__(
        self,
        env: Environment[LLMRequest, LLMResponse],
        *,
        observation: ObservationRendering = "object",
        action: ActionRendering = "object",
    ) -> None:
        if not isinstance(env, Environment):
            raise TypeError(
                f"AresDmEnv wraps an ARES environment, e.g. AresDmEnv(ares.make('humaneval')); "
                f"got {type(env).__name__}"
            )
        _check_choice("observation", observation, get_args(ObservationRendering))
        _check_choice("action", action, get_args(ActionRendering))
        self._env = env
        self._observation = observation
        self._action = action
        self._observation_spec: ObjectSpec = (
            LLMRequestSpec(optional=True, name="observation")
            if observation == "object"
            else ChatMessagesSpec(optional=True, name="observation")
        )
        example = _example_action(env)
        self._action_spec: LLMResponseSpec | TextSpec = (
            LLMResponseSpec(example, name="action")
            if action == "object"
            else TextSpec(example.content or "", name="action")
        )
        self._needs_reset = True
        self._closed = False
        self._loop = PrivateLoop(name="ares-dm-env")  # last: a bad argument above leaks no loop

    # ------------------------------------------------------------------ dm_env API
    def reset(self, *, seed: int | None = None, task: Any | None = None) -> dm_env.TimeStep:
        """Start a new episode (an active one is abandoned). ``seed``/``task`` go to the ARES env."""
        return self._convert(self._run(self._env.reset(seed=seed, task=task)))

    def step(self, action: Any) -> dm_env.TimeStep:
        """Send ``action`` to the agent; before the first reset or after LAST, reset instead.

        An invalid action raises ``ValueError`` (from the action spec) and leaves the episode as it was.
        """
        if self._closed:
            raise EnvironmentStateError("the environment is closed; create a new one")
        if self._needs_reset:
            return self.reset()
        return self._convert(self._run(self._env.step(self._response(action))))

    def observation_spec(self) -> ObjectSpec:
        return self._observation_spec

    def action_spec(self) -> LLMResponseSpec | TextSpec:
        return self._action_spec

    def reward_spec(self) -> specs.Array:
        return specs.Array(shape=(), dtype=np.float64, name="reward")

    def discount_spec(self) -> specs.BoundedArray:
        return specs.BoundedArray(shape=(), dtype=np.float64, minimum=0.0, maximum=1.0, name="discount")

    def close(self) -> None:
        """Close the ARES env (an active episode ends "aborted", its sandbox stops), then the private
        loop. Idempotent."""
        if self._closed:
            return
        self._closed = True
        try:
            self._loop.run(self._env.close())
        finally:
            self._loop.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    # ------------------------------------------------------------------ extras
    @property
    def env(self) -> Environment[LLMRequest, LLMResponse]:
        """The ARES environment. It belongs to the private loop: inspect it between calls, never drive it."""
        return self._env

    @property
    def episode(self) -> Episode | None:
        """The ARES record of the current or last episode (``task_id``, ``status``, ``truncation``,
        ``reward``, ``error``...), or None before the first episode or if the env keeps no record."""
        episode = getattr(self._env, "episode", None)
        return episode if isinstance(episode, Episode) else None

    @property
    def closed(self) -> bool:
        return self._closed

    def __repr__(self) -> str:
        return f"AresDmEnv({self._env!r}, observation={self._observation!r}, action={self._action!r})"

    # ------------------------------------------------------------------ internals
    def _run(self, coro: Coroutine[Any, Any, TimeStep[LLMRequest]]) -> TimeStep[LLMRequest]:
        if self._closed:
            coro.close()
            raise EnvironmentStateError("the environment is closed; create a new one")
        try:
            return self._loop.run(coro)
        except BaseException:
            # The ARES episode may be over (errored, cancelled): the next step() starts a fresh one.
            self._needs_reset = True
            raise

    def _response(self, action: Any) -> LLMResponse:
        item = self._action_spec.validate(action).item()
        return text_response(item) if self._action == "text" else item

    def _convert(self, timestep: TimeStep[LLMRequest]) -> dm_env.TimeStep:
        step_type = dm_env.StepType(int(timestep.step_type))
        self._needs_reset = step_type.last()
        return dm_env.TimeStep(
            step_type=step_type,
            reward=None if timestep.reward is None else float(timestep.reward),
            discount=None if timestep.discount is None else float(timestep.discount),
            observation=self._render(timestep.observation),
        )

    def _render(self, request: LLMRequest | None) -> Any:
        if request is None or self._observation == "object":
            return request
        return object_scalar(request_to_openai(request)["messages"])


def _check_choice(option: str, value: str, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise ValueError(f"{option} must be one of {choices}, got {value!r}")


def _example_action(env: Environment[LLMRequest, LLMResponse]) -> LLMResponse:
    """A harmless command in the agent's own action format, if the env exposes one."""
    action_format = getattr(env, "action_format", None)
    if action_format is None:
        return LLMResponse(content="")
    response: LLMResponse = action_format.command(EXAMPLE_COMMAND)
    return response
