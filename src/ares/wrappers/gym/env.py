"""AresGymEnv: a synchronous ``gymnasium.Env`` over an async ARES environment.

The ARES environment lives on a private event loop (``PrivateLoop``) that runs during each call: in
the caller's thread from plain synchronous code (no thread hop), on a worker thread when the caller is
itself inside a running event loop (Jupyter, an asyncio app; that loop is blocked for the call, never
re-entered). All episode logic is an ``AsyncAresGymEnv`` built on that loop; this class only carries
it across.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Coroutine, Mapping
from typing import Any, ClassVar, TypeVar

import gymnasium as gym
from gymnasium.error import ClosedEnvironmentError

from ares.core.environment import Environment
from ares.wrappers.gym.async_env import AsyncAresGymEnv, EnvSource
from ares.wrappers.gym.codec import ActionMode, ObservationMode, PromptRender, Tokenizer
from ares.wrappers.private_loop import PrivateLoop

T = TypeVar("T")
_ids = itertools.count(1)


class AresGymEnv(gym.Env[Any, Any]):
    """An ARES environment as a ``gymnasium.Env``. Build it from an environment or a factory of one
    (the factory runs on the private loop); close it, or use it as a context manager."""

    metadata: ClassVar[dict[str, Any]] = dict(AsyncAresGymEnv.metadata)

    def __init__(
        self,
        env: EnvSource,
        *,
        observation: ObservationMode = "object",
        action: ActionMode = "object",
        tokenizer: Tokenizer | None = None,
        prompt_render: PromptRender | str | None = None,
        render_mode: str | None = None,
    ) -> None:
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(
                f"render_mode must be None or one of {self.metadata['render_modes']}, got {render_mode!r}"
            )
        self.render_mode = render_mode
        self._loop = PrivateLoop(name=f"ares-gym-{next(_ids)}")

        async def build() -> AsyncAresGymEnv:
            return AsyncAresGymEnv(
                env, observation=observation, action=action, tokenizer=tokenizer, prompt_render=prompt_render
            )

        try:
            self._env = self._loop.run(build())
        except BaseException:
            self._loop.close()
            raise
        self.observation_space = self._env.observation_space
        self.action_space = self._env.action_space

    @property
    def unwrapped_ares(self) -> Environment[Any, Any]:
        """The ARES environment (it belongs to this env's private loop: do not await it elsewhere)."""
        return self._env.unwrapped_ares

    @property
    def async_env(self) -> AsyncAresGymEnv:
        return self._env

    @property
    def episode_id(self) -> str | None:
        return self._env.episode_id

    @property
    def private_loop(self) -> PrivateLoop:
        return self._loop

    def reset(
        self, *, seed: int | None = None, options: Mapping[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        """Start an episode (``options={"task": ...}`` picks the task); ``seed`` also seeds ``np_random``."""
        super().reset(seed=seed)
        return self._call("reset", lambda: self._env.reset(seed=seed, options=options))

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        """One LLM turn. Raises ``gymnasium.error.ResetNeeded`` before reset and after the last step."""
        return self._call("step", lambda: self._env.step(action))

    def render(self) -> str | None:
        """With ``render_mode="ansi"``: the conversation so far as text; otherwise None."""
        if self.render_mode is None:
            gym.logger.warn("render() without a render_mode: create the env with render_mode='ansi'")
            return None
        return self._env.render()

    def snapshot(self) -> Any:
        """``EnvironmentSnapshot`` of the current step (``env.unwrapped.snapshot()``)."""
        return self._call("snapshot", self._env.snapshot)

    def restore(self, snapshot: Any) -> tuple[Any, dict[str, Any]]:
        """Continue from a snapshot of this or another env: ``(observation, info)`` like ``reset``.
        Forking is restoring one snapshot into several envs."""
        return self._call("restore", lambda: self._env.restore(snapshot))

    def close(self) -> None:
        """Abort a running episode (its sandbox is stopped), then close the private loop. Idempotent."""
        if self._loop.closed:
            return
        try:
            self._loop.run(self._env.close())
        finally:
            self._loop.close()

    def _call(self, method: str, coroutine: Callable[[], Coroutine[Any, Any, T]]) -> T:
        if self._loop.closed:
            raise ClosedEnvironmentError(f"{method}() on a closed environment; create a new one")
        return self._loop.run(coroutine())

    def __repr__(self) -> str:
        name = self.spec.id if self.spec is not None else type(self._env.unwrapped_ares).__name__
        codec = self._env.codec
        return f"<AresGymEnv {name} observation={codec.observation!r} action={codec.action!r}>"
