"""AresVectorEnv: N ARES environments behind Gymnasium's ``VectorEnv`` API, stepped concurrently.

Gymnasium's ``SyncVectorEnv`` steps its sub-environments one after another and ``AsyncVectorEnv``
gives each one a process. An ARES sub-environment spends its time waiting on a sandbox, an agent or
a verifier, so one event loop can drive all of them at once: every ``reset()``/``step()`` runs the N
sub-environments with ``asyncio.gather`` on one ``PrivateLoop``, and a slow sandbox holds up
only its own slot, never the others' work. (Gymnasium's API still returns all N at once; for results
as soon as each is ready, see ``ares.rollout.EnvPool``.)
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import partial
from typing import Any, Literal, Self, TypeVar

import numpy as np
import numpy.typing as npt
from gymnasium.error import ClosedEnvironmentError, CustomSpaceError, ResetNeeded
from gymnasium.spaces import Space
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space, concatenate, create_empty_array, iterate

from ares.core.environment import Environment
from ares.errors import AresError
from ares.presets import get_preset, make
from ares.wrappers.gym.async_env import AsyncAresGymEnv, EnvSource
from ares.wrappers.gym.codec import ActionMode, ObservationMode, PromptRender, Tokenizer
from ares.wrappers.gym.transition import innermost
from ares.wrappers.private_loop import PrivateLoop

T = TypeVar("T")
_ids = itertools.count(1)

#: Builds one ARES environment; called ``num_envs`` times.
EnvFactory = Callable[[], Environment[Any, Any]]

#: What a sub-environment that raises does to the vector call: ``"raise"`` fails the whole call with
#: ``SubEnvironmentError``; ``"reset_slot"`` reports the error in that slot's info and resets the slot.
FailureMode = Literal["raise", "reset_slot"]
FAILURE_MODES: tuple[FailureMode, ...] = ("raise", "reset_slot")


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
    """One sub-environment's share of a vector step; ``final`` holds SAME_STEP's pre-reset (obs, info);
    ``needs_reset``: the slot has no running episode afterwards (it ended, or its reset failed)."""

    observation: Any
    reward: float
    terminated: bool
    truncated: bool
    info: dict[str, Any]
    final: tuple[Any, dict[str, Any]] | None = None
    needs_reset: bool = False

    @property
    def done(self) -> bool:
        return self.terminated or self.truncated


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

    ``keep_task=True``: every automatic reset of slot ``i`` (and a ``reset_mask`` reset without a
    ``task`` option) restarts the task slot ``i`` last ran, so ``reset(options={"task": t})`` followed by
    autoreset yields groups of rollouts of ``t`` (GRPO) until the next explicit ``reset()``.

    Errors: bad batches (wrong length, an action outside the single action space) are rejected
    before any sub-environment moves. If a sub-environment raises, the others still finish their call;
    then, with ``failure="raise"`` (default), ``SubEnvironmentError`` names every failure and the vector
    env must be ``reset()`` (or closed). With ``failure="reset_slot"`` the call returns normally: the
    failed slot reports reward 0, ``truncated`` True and ``infos["error"]`` (``{"type", "message"}``,
    masked by ``_error``) and ``infos["exception"]`` (the exception itself), and is reset like an ended
    episode (NEXT_STEP: on the next step, SAME_STEP: at once, DISABLED: by the caller). A slot whose
    reset fails reports the same way and is reset again on the next step (its action ignored).
    ``close()`` closes every sub-environment, mid-episode too, and closes the private loop.
    """

    def __init__(
        self,
        envs: Sequence[Environment[Any, Any]] | EnvFactory,
        num_envs: int | None = None,
        *,
        observation: ObservationMode = "object",
        action: ActionMode = "object",
        tokenizer: Tokenizer | None = None,
        prompt_render: PromptRender | str | None = None,
        autoreset_mode: AutoresetMode | str = AutoresetMode.NEXT_STEP,
        render_mode: str | None = None,
        failure: FailureMode = "raise",
        keep_task: bool = False,
    ) -> None:
        """``envs``: a factory called ``num_envs`` times (on the private loop), or the environments
        themselves. Either way the vector env owns them: ``close()`` closes them.
        ``observation``/``action``/``tokenizer``/``prompt_render`` choose the codec, as for
        ``AsyncAresGymEnv``.
        ``failure`` and ``keep_task``: see the class docstring."""
        if failure not in FAILURE_MODES:
            raise ValueError(f"failure must be one of {FAILURE_MODES}, got {failure!r}")
        self.failure: FailureMode = failure
        self.keep_task = bool(keep_task)
        self.autoreset_mode = AutoresetMode(autoreset_mode)
        metadata = {**AsyncAresGymEnv.metadata, "autoreset_mode": self.autoreset_mode}
        if render_mode is not None and render_mode not in metadata["render_modes"]:
            raise ValueError(
                f"render_mode must be None or one of {metadata['render_modes']}, got {render_mode!r}"
            )
        sources = _sources(envs, num_envs)
        self._loop = PrivateLoop(name=f"ares-vector-{next(_ids)}")
        wrap = partial(
            AsyncAresGymEnv,
            observation=observation,
            action=action,
            tokenizer=tokenizer,
            prompt_render=prompt_render,
        )
        built = _build_on(self._loop, sources, wrap)
        self.envs: tuple[AsyncAresGymEnv, ...] = tuple(built)
        self.num_envs = len(built)
        self.metadata, self.render_mode = metadata, render_mode
        self.single_observation_space = built[0].observation_space
        self.single_action_space = built[0].action_space
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        self._observations: list[Any] = [None] * self.num_envs
        self._tasks: list[Any] = [None] * self.num_envs  # what each slot last ran (for keep_task)
        self._ended = np.zeros(self.num_envs, dtype=np.bool_)  # slot has no running episode
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
        given = options.get("task") if options is not None else None
        partial_keep = self.keep_task and not mask.all() and given is None
        self._needs_reset = True  # until every reset below has succeeded
        results = self._run_all(
            "reset",
            {
                i: partial(
                    self.envs[i].reset,
                    seed=seeds[i],
                    options={**(options or {}), "task": self._tasks[i]} if partial_keep else options,
                )
                for i in indices
            },
        )
        infos: dict[str, Any] = {}
        for i in indices:
            result = results[i]
            if isinstance(result, Exception):  # only with failure="reset_slot"
                self._ended[i] = True
                infos = self._add_info(infos, _failure_info(result), i)
                continue
            self._observations[i], info = result
            self._remember_task(i, self._tasks[i] if partial_keep else given)
            self._ended[i] = False
            infos = self._add_info(infos, info, i)
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
        calls = {i: partial(self._slot_step, i, per_env[i]) for i in range(self.num_envs)}
        self._needs_reset = True  # until every step below has succeeded
        results = self._run_all("step", calls)
        rewards = np.zeros(self.num_envs, dtype=np.float64)
        terminations = np.zeros(self.num_envs, dtype=np.bool_)
        truncations = np.zeros(self.num_envs, dtype=np.bool_)
        infos: dict[str, Any] = {}
        for i in range(self.num_envs):
            result = results[i]
            if isinstance(result, Exception):  # failure="reset_slot", raised outside the slot's guards
                result = _Transition(
                    self._observations[i], 0.0, False, True, _failure_info(result), None, True
                )
            self._observations[i] = result.observation
            rewards[i], terminations[i], truncations[i] = result.reward, result.terminated, result.truncated
            self._ended[i] = result.needs_reset
            if result.final is not None:
                infos = self._add_info(
                    infos, {"final_obs": result.final[0], "final_info": result.final[1]}, i
                )
            infos = self._add_info(infos, result.info, i)
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
            skipped = self._ended[i]  # this step resets the slot instead (DISABLED refused it already)
            if not skipped and not _contains(self.single_action_space, action):
                raise ValueError(
                    f"actions[{i}] ({type(action).__name__}) is not in the single action space"
                    f" {self.single_action_space}"
                )
        return per_env

    async def _slot_step(self, i: int, action: Any) -> _Transition:
        """Slot ``i``'s part of ``step()``: a pending reset, or a step (and, in SAME_STEP, the reset
        after an ending step). With ``failure="reset_slot"`` an exception becomes a truncated step."""
        if self._ended[i]:
            return await self._reset_pending(i)
        try:
            observation, reward, terminated, truncated, info = await self.envs[i].step(action)
        except Exception as exc:
            if self.failure == "raise":
                raise
            ended = _Transition(self._observations[i], 0.0, False, True, _failure_info(exc))
        else:
            ended = _Transition(observation, float(reward), bool(terminated), bool(truncated), info)
        if not ended.done:
            return ended
        if self.autoreset_mode is not AutoresetMode.SAME_STEP:
            return replace(ended, needs_reset=True)
        return await self._reset_after(i, ended)

    async def _reset_pending(self, i: int) -> _Transition:
        """NEXT_STEP's autoreset (or the retry of a failed reset): first observation, reward 0."""
        try:
            observation, info = await self.envs[i].reset(options=self._autoreset_options(i))
        except Exception as exc:
            if self.failure == "raise":
                raise
            return _Transition(self._observations[i], 0.0, False, True, _failure_info(exc), needs_reset=True)
        self._remember_task(i, self._tasks[i])
        return _Transition(observation, 0.0, False, False, info)

    async def _reset_after(self, i: int, ended: _Transition) -> _Transition:
        """SAME_STEP: reset a slot whose episode just ended; the ended one goes to ``final_obs/info``."""
        try:
            observation, info = await self.envs[i].reset(options=self._autoreset_options(i))
        except Exception as exc:
            if self.failure == "raise":
                raise
            return replace(ended, info={**ended.info, **_failure_info(exc)}, needs_reset=True)
        self._remember_task(i, self._tasks[i])
        failure = {k: ended.info[k] for k in ("error", "exception")} if "exception" in ended.info else {}
        return _Transition(
            observation, ended.reward, ended.terminated, ended.truncated, {**info, **failure},
            final=(ended.observation, ended.info),
        )  # fmt: skip

    def _autoreset_options(self, i: int) -> dict[str, Any] | None:
        return {"task": self._tasks[i]} if self.keep_task else None

    def _remember_task(self, i: int, given: Any) -> None:
        """Record the task slot ``i`` now runs: the environment's own ``task`` when it exposes one."""
        task = getattr(innermost(self.envs[i].unwrapped_ares), "task", None)
        self._tasks[i] = task if task is not None else given
        if self.keep_task and self._tasks[i] is None:
            raise ValueError(
                f"keep_task=True, but sub-environment {i} exposes no .task and reset() got no"
                " options['task']; pass the task explicitly"
            )

    def _run_all(self, operation: str, calls: Mapping[int, Callable[[], Awaitable[T]]]) -> dict[int, T]:
        """Every call's result; an ``Exception`` stays in its slot with ``failure="reset_slot"``, any
        other failure raises ``SubEnvironmentError``."""
        results = self._loop.run(_gather(calls))
        failures = {i: r for i, r in results.items() if isinstance(r, BaseException)}
        tolerated = self.failure == "reset_slot" and all(isinstance(r, Exception) for r in failures.values())
        if failures and not tolerated:
            raise SubEnvironmentError(operation, failures) from next(iter(failures.values()))
        return results  # type: ignore[return-value]  # exceptions only where reset_slot keeps them

    def _batch_observations(self) -> Any:
        space = self.single_observation_space
        return concatenate(space, self._observations, create_empty_array(space, self.num_envs))


def _contains(space: Space[Any], value: Any) -> bool:
    """``space.contains`` that treats a value it cannot even inspect as outside the space."""
    try:
        return bool(space.contains(value))
    except (TypeError, ValueError, AttributeError):
        return False


def _failure_info(exc: Exception) -> dict[str, Any]:
    """A failed slot's info: the error as an errored episode reports it, and the exception itself."""
    return {"error": {"type": type(exc).__name__, "message": str(exc)}, "exception": exc}


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


def _build_on(
    loop: PrivateLoop, sources: Sequence[EnvSource], wrap: Callable[[EnvSource], AsyncAresGymEnv]
) -> list[AsyncAresGymEnv]:
    """Wrap every source on ``loop`` (where a factory builds its environment); if one fails, close
    what was built and the given environments not reached, then the loop, so nothing leaks."""
    built: list[AsyncAresGymEnv] = []

    async def build() -> None:
        for source in sources:
            built.append(wrap(source))

    try:
        loop.run(build())
    except BaseException:
        leftovers = [s for s in sources[len(built) :] if isinstance(s, Environment)]
        loop.run(_gather({i: c.close for i, c in enumerate([*built, *leftovers])}))
        loop.close()
        raise
    return built


def make_vector_env(
    preset: str,
    num_envs: int = 1,
    *,
    observation: ObservationMode = "object",
    action: ActionMode = "object",
    tokenizer: Tokenizer | None = None,
    prompt_render: PromptRender | str | None = None,
    autoreset_mode: AutoresetMode | str = AutoresetMode.NEXT_STEP,
    render_mode: str | None = None,
    failure: FailureMode = "raise",
    keep_task: bool = False,
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
        prompt_render=prompt_render,
        autoreset_mode=autoreset_mode,
        render_mode=render_mode,
        failure=failure,
        keep_task=keep_task,
    )
