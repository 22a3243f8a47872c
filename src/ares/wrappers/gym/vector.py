"""AresVectorEnv: N ARES environments behind Gymnasium's ``VectorEnv`` API, stepped concurrently.

Gymnasium's ``SyncVectorEnv`` steps its sub-environments one after another and ``AsyncVectorEnv``
gives each one a process. An ARES sub-environment spends its time waiting on a sandbox, an agent or
a verifier, so one event loop can drive all of them at once: every ``reset()``/``step()`` runs the N
sub-environments with ``asyncio.gather`` on one ``PrivateLoop``, and a slow sandbox holds up
only its own slot, never the others' work.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, Self, TypeVar

import numpy as np
import numpy.typing as npt
from gymnasium.error import ClosedEnvironmentError, CustomSpaceError, ResetNeeded
from gymnasium.spaces import Space
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space, concatenate, create_empty_array, iterate

from ares.core.environment import Environment
from ares.errors import AresError
from ares.registry import get_preset, make
from ares.wrappers.gym.async_env import AsyncAresGymEnv, EnvSource
from ares.wrappers.gym.codec import ActionMode, ObservationMode, Tokenizer
from ares.wrappers.private_loop import PrivateLoop

T = TypeVar("T")
_ids = itertools.count(1)

#: Builds one ARES environment; called ``num_envs`` times.
EnvFactory = Callable[[], Environment[Any, Any]]


class SubEnvironmentError(AresError):
    """Some sub-environments raised during a vector ``reset()``, ``step()`` or ``close()``.

    ``failures`` maps each failed sub-environment's index to its exception. The other
    sub-environments finished the same call, so none is left half-way; their results are dropped.
    """

    def __init__(self, operation: str, failures: Mapping[int, BaseException]) -> None:
        self.operation = operation
        self.failures = dict(sorted(failures.items()))
        detail = "; ".join(f"[{i}] {type(e).__name__}: {e}" for i, e in self.failures.items())
        advice = (
            "" if operation == "close" else " Call reset() to start every sub-environment over, or close()."
        )
        super().__init__(f"{operation}() failed in sub-environment(s) {detail}.{advice}")


@dataclass(frozen=True, slots=True)
class _Transition:
    """One sub-environment's share of a vector step; ``final`` holds SAME_STEP's pre-reset (obs, info)."""

    observation: Any
    reward: float
    terminated: bool
    truncated: bool
    info: dict[str, Any]
    final: tuple[Any, dict[str, Any]] | None = None


class AresVectorEnv(VectorEnv[Any, Any, np.ndarray]):
    """``num_envs`` ARES environments, each wrapped as an ``AsyncAresGymEnv``, stepped concurrently.

    Batching follows ``gymnasium.vector.utils``: ``observation_space``/``action_space`` are
    ``batch_space`` of the single spaces, so with the default ``"object"`` codec observations come as
    a tuple of N ``LLMRequest`` and actions go in as a sequence of N ``LLMResponse``. ``reset(seed=s)``
    seeds sub-environment ``i`` with ``s + i`` (or takes a list of N seeds); ``options`` go to every
    sub-environment, so ``options={"task": t}`` starts N episodes of one task (a GRPO group). ``infos``
    use Gymnasium's vector format: a dict of per-key arrays of length N plus a boolean ``_key`` mask of
    the slots that reported that key.

    Autoreset (``metadata["autoreset_mode"]``):

    - ``NEXT_STEP`` (default, as in Gymnasium): a step that ends sub-environment ``i`` returns its last
      observation and reward with ``terminated[i]`` or ``truncated[i]`` set. On the *next* step,
      ``actions[i]`` is ignored and ``i`` is reset instead: its slot holds the new episode's first
      observation and reset info, reward 0 and both flags False.
    - ``SAME_STEP``: an ending sub-environment is reset within the same step; its slot holds the new
      episode's first observation, and ``infos["final_obs"]``/``infos["final_info"]`` (masked by
      ``_final_obs``/``_final_info``) hold the last observation and info of the episode that ended.
    - ``DISABLED``: nothing is reset automatically; reset ended sub-environments with
      ``reset(options={"reset_mask": mask})`` before stepping them again.

    Errors: bad batches (wrong length, an action outside the single action space) are rejected
    before any sub-environment moves. If a sub-environment raises, the others still finish their
    call, then ``SubEnvironmentError`` names every failure; the vector env must then be ``reset()``
    (or closed). ``close()`` closes every sub-environment, mid-episode too, and closes the private loop.
    """

    def __init__(
        self,
        envs: Sequence[Environment[Any, Any]] | EnvFactory,
        num_envs: int | None = None,
        *,
        observation: ObservationMode = "object",
        action: ActionMode = "object",
        tokenizer: Tokenizer | None = None,
        autoreset_mode: AutoresetMode | str = AutoresetMode.NEXT_STEP,
        render_mode: str | None = None,
    ) -> None:
        """``envs``: a factory called ``num_envs`` times (on the private loop), or the environments
        themselves. Either way the vector env owns them: ``close()`` closes them.
        ``observation``/``action``/``tokenizer`` choose the codec, as for ``AsyncAresGymEnv``."""
        self.autoreset_mode = AutoresetMode(autoreset_mode)
        metadata = {**AsyncAresGymEnv.metadata, "autoreset_mode": self.autoreset_mode}
        if render_mode is not None and render_mode not in metadata["render_modes"]:
            raise ValueError(
                f"render_mode must be None or one of {metadata['render_modes']}, got {render_mode!r}"
            )
        sources = _sources(envs, num_envs)
        self._loop = PrivateLoop(name=f"ares-vector-{next(_ids)}")
        built: list[AsyncAresGymEnv] = []

        async def build() -> None:
            for source in sources:
                built.append(
                    AsyncAresGymEnv(source, observation=observation, action=action, tokenizer=tokenizer)
                )

        try:
            self._loop.run(build())
        except BaseException:
            leftovers = [s for s in sources[len(built) :] if isinstance(s, Environment)]
            self._loop.run(_gather({i: c.close for i, c in enumerate([*built, *leftovers])}))
            self._loop.close()
            raise
        self.envs: tuple[AsyncAresGymEnv, ...] = tuple(built)
        self.num_envs = len(built)
        self.metadata, self.render_mode = metadata, render_mode
        self.single_observation_space = built[0].observation_space
        self.single_action_space = built[0].action_space
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        self._observations: list[Any] = [None] * self.num_envs
        self._ended = np.zeros(self.num_envs, dtype=np.bool_)
        self._needs_reset = True

    @property
    def private_loop(self) -> PrivateLoop:
        """The one event loop every sub-environment runs on (do not await them elsewhere)."""
        return self._loop

    # ------------------------------------------------------------------ VectorEnv API
    def reset(
        self,
        *,
        seed: int | Sequence[int | None] | None = None,
        options: Mapping[str, Any] | None = None,
    ) -> tuple[Any, dict[str, Any]]:
        """Reset every sub-environment concurrently, or only those in ``options["reset_mask"]`` (a bool
        array; the other slots keep their current observation)."""
        self._check_open()
        seeds = self._seeds(seed)
        options = dict(options) if options is not None else None
        mask = self._reset_mask(options.pop("reset_mask", None) if options is not None else None)
        if isinstance(seed, int | np.integer):
            super().reset(seed=int(seed))
        if not mask.all() and self._needs_reset:
            raise ResetNeeded("a partial reset (reset_mask) needs a full reset() first")
        indices = [int(i) for i in np.flatnonzero(mask)]
        self._needs_reset = True  # until every reset below has succeeded
        results = self._run_all(
            "reset", {i: partial(self.envs[i].reset, seed=seeds[i], options=options) for i in indices}
        )
        infos: dict[str, Any] = {}
        for i in indices:
            self._observations[i], info = results[i]
            infos = self._add_info(infos, info, i)
        self._ended[mask] = False
        self._needs_reset = False
        return self._batch_observations(), infos

    def step(
        self, actions: Any
    ) -> tuple[Any, npt.NDArray[np.float64], npt.NDArray[np.bool_], npt.NDArray[np.bool_], dict[str, Any]]:
        """Step every sub-environment concurrently (resetting those that ended last step, in NEXT_STEP)."""
        self._check_open()
        if self._needs_reset:
            raise ResetNeeded(
                "step() needs a successful reset() first (the vector env was never reset, or its last"
                " reset()/step() failed)"
            )
        if self.autoreset_mode is AutoresetMode.DISABLED and self._ended.any():
            ended = [int(i) for i in np.flatnonzero(self._ended)]
            raise ResetNeeded(
                f"sub-environment(s) {ended} ended and autoreset is disabled: reset them first with"
                " reset(options={'reset_mask': mask})"
            )
        per_env = self._split_actions(actions)
        calls = {i: self._step_call(i, per_env[i]) for i in range(self.num_envs)}
        self._needs_reset = True  # until every step below has succeeded
        results = self._run_all("step", calls)
        rewards = np.zeros(self.num_envs, dtype=np.float64)
        terminations = np.zeros(self.num_envs, dtype=np.bool_)
        truncations = np.zeros(self.num_envs, dtype=np.bool_)
        infos: dict[str, Any] = {}
        for i in range(self.num_envs):
            result: _Transition = results[i]
            self._observations[i] = result.observation
            rewards[i], terminations[i], truncations[i] = result.reward, result.terminated, result.truncated
            if result.final is not None:
                infos = self._add_info(
                    infos, {"final_obs": result.final[0], "final_info": result.final[1]}, i
                )
            infos = self._add_info(infos, result.info, i)
        self._ended = terminations | truncations
        if self.autoreset_mode is AutoresetMode.SAME_STEP:
            self._ended[:] = False
        self._needs_reset = False
        return self._batch_observations(), rewards, terminations, truncations, infos

    def render(self) -> tuple[str, ...]:
        """Every sub-environment's conversation as text (``AsyncAresGymEnv.render``), in any render_mode."""
        return tuple(env.render() for env in self.envs)

    def close_extras(self, **kwargs: Any) -> None:
        """Close every sub-environment concurrently (aborting running episodes), then the private loop."""
        if self._loop.closed:
            return
        try:
            results = self._loop.run(_gather({i: env.close for i, env in enumerate(self.envs)}))
        finally:
            self._loop.close()
        failures = {i: r for i, r in results.items() if isinstance(r, BaseException)}
        if failures:
            raise SubEnvironmentError("close", failures) from next(iter(failures.values()))

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # ------------------------------------------------------------------ internals
    def _check_open(self) -> None:
        if self.closed or self._loop.closed:
            raise ClosedEnvironmentError("the vector environment is closed; create a new one")

    def _seeds(self, seed: int | Sequence[int | None] | None) -> list[int | None]:
        if seed is None:
            return [None] * self.num_envs
        if isinstance(seed, int | np.integer):
            return [int(seed) + i for i in range(self.num_envs)]
        seeds = list(seed)
        if len(seeds) != self.num_envs:
            raise ValueError(f"got {len(seeds)} seeds for {self.num_envs} sub-environments")
        return seeds

    def _reset_mask(self, mask: Any) -> npt.NDArray[np.bool_]:
        if mask is None:
            return np.ones(self.num_envs, dtype=np.bool_)
        if not isinstance(mask, np.ndarray) or mask.dtype != np.bool_ or mask.shape != (self.num_envs,):
            raise ValueError(f"options['reset_mask'] must be a bool numpy array of shape ({self.num_envs},)")
        if not mask.any():
            raise ValueError("options['reset_mask'] selects no sub-environment")
        return mask

    def _split_actions(self, actions: Any) -> list[Any]:
        """One action per sub-environment; those that will really be stepped must be in the single space."""
        try:
            per_env = list(iterate(self.action_space, actions))
        except (TypeError, CustomSpaceError) as exc:
            raise TypeError(f"actions must be a batch of {self.num_envs} actions: {exc}") from exc
        if len(per_env) != self.num_envs:
            raise ValueError(f"got {len(per_env)} actions for {self.num_envs} sub-environments")
        for i, action in enumerate(per_env):
            skipped = self.autoreset_mode is AutoresetMode.NEXT_STEP and self._ended[i]
            if not skipped and not _contains(self.single_action_space, action):
                raise ValueError(
                    f"actions[{i}] ({type(action).__name__}) is not in the single action space"
                    f" {self.single_action_space}"
                )
        return per_env

    def _step_call(self, i: int, action: Any) -> Callable[[], Awaitable[_Transition]]:
        env = self.envs[i]
        if self.autoreset_mode is AutoresetMode.NEXT_STEP and self._ended[i]:
            return partial(_autoreset, env)
        if self.autoreset_mode is AutoresetMode.SAME_STEP:
            return partial(_step_then_reset, env, action)
        return partial(_step, env, action)

    def _run_all(self, operation: str, calls: Mapping[int, Callable[[], Awaitable[T]]]) -> dict[int, T]:
        results = self._loop.run(_gather(calls))
        failures = {i: r for i, r in results.items() if isinstance(r, BaseException)}
        if failures:
            raise SubEnvironmentError(operation, failures) from next(iter(failures.values()))
        return results  # type: ignore[return-value]  # no exceptions left

    def _batch_observations(self) -> Any:
        space = self.single_observation_space
        return concatenate(space, self._observations, create_empty_array(space, self.num_envs))


def _contains(space: Space[Any], value: Any) -> bool:
    """``space.contains`` that treats a value it cannot even inspect as outside the space."""
    try:
        return bool(space.contains(value))
    except (TypeError, ValueError, AttributeError):
        return False


async def _step(env: AsyncAresGymEnv, action: Any) -> _Transition:
    observation, reward, terminated, truncated, info = await env.step(action)
    return _Transition(observation, float(reward), bool(terminated), bool(truncated), info)


async def _autoreset(env: AsyncAresGymEnv) -> _Transition:
    observation, info = await env.reset()
    return _Transition(observation, 0.0, False, False, info)


async def _step_then_reset(env: AsyncAresGymEnv, action: Any) -> _Transition:
    ended = await _step(env, action)
    if not (ended.terminated or ended.truncated):
        return ended
    observation, info = await env.reset()
    final = (ended.observation, ended.info)
    return _Transition(observation, ended.reward, ended.terminated, ended.truncated, info, final)


async def _gather(calls: Mapping[int, Callable[[], Awaitable[T]]]) -> dict[int, T | BaseException]:
    """Run every call concurrently; each one's exception is returned in its slot, not raised."""
    results = await asyncio.gather(*(call() for call in calls.values()), return_exceptions=True)
    return dict(zip(calls, results, strict=True))


def _sources(envs: Sequence[Environment[Any, Any]] | EnvFactory, num_envs: int | None) -> list[EnvSource]:
    """What to build each ``AsyncAresGymEnv`` from: the factory ``num_envs`` times, or the given envs."""
    if callable(envs):
        if num_envs is None or num_envs < 1:
            raise ValueError(f"num_envs must be >= 1 when building from a factory, got {num_envs}")
        return [envs] * num_envs
    sources: list[EnvSource] = list(envs)
    if not sources:
        raise ValueError("AresVectorEnv needs at least one environment")
    if num_envs is not None and num_envs != len(sources):
        raise ValueError(f"num_envs={num_envs} but {len(sources)} environments were given")
    return sources


def make_vector_env(
    preset: str,
    num_envs: int = 1,
    *,
    observation: ObservationMode = "object",
    action: ActionMode = "object",
    tokenizer: Tokenizer | None = None,
    autoreset_mode: AutoresetMode | str = AutoresetMode.NEXT_STEP,
    render_mode: str | None = None,
    seed: int | None = None,
    max_episode_steps: int | None = None,
    **make_kwargs: Any,
) -> AresVectorEnv:
    """``num_envs`` environments of ``preset`` (each built by ``ares.make(preset, **make_kwargs)``).

    This is the ``vector_entry_point`` of the ``ares/<preset>`` registrations, so
    ``gymnasium.make_vec("ares/humaneval", num_envs=8, tasks="0:8")`` lands here (``make_vec`` keeps
    ``vectorization_mode``/``vector_kwargs`` to itself and passes everything else). ``seed`` seeds
    sub-environment ``i``'s task choice with ``seed + i``, so they do not all draw the same tasks;
    ``max_episode_steps`` (what ``make_vec`` passes for a registration that sets it) is ARES's
    ``step_limit``.
    """
    get_preset(preset)  # an unknown preset fails here, before any environment is built
    if max_episode_steps is not None:
        if make_kwargs.get("step_limit", max_episode_steps) != max_episode_steps:
            raise ValueError(
                f"max_episode_steps={max_episode_steps} and step_limit={make_kwargs['step_limit']}"
                " disagree; pass only one"
            )
        make_kwargs["step_limit"] = max_episode_steps
    seeds = itertools.count(seed) if seed is not None else itertools.repeat(None)
    return AresVectorEnv(
        lambda: make(preset, seed=next(seeds), **make_kwargs),
        num_envs,
        observation=observation,
        action=action,
        tokenizer=tokenizer,
        autoreset_mode=autoreset_mode,
        render_mode=render_mode,
    )
