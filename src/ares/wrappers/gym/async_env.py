"""AsyncAresGymEnv: gymnasium's reset/step/close contract as coroutines, for code already in an event loop.

It holds the whole adapter logic (episode state, codec, transition mapping, render); the synchronous
``AresGymEnv`` runs one of these on a private loop thread, and a vector env can gather the
``reset``/``step`` of many on one loop. There is no autoreset: ``step`` after the last step (or before
the first ``reset``) raises ``gymnasium.error.ResetNeeded``, so an episode boundary is always the
caller's explicit choice and never starts a sandbox nobody asked for.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import TracebackType
from typing import Any, ClassVar, Self

from gymnasium.error import ClosedEnvironmentError, ResetNeeded
from gymnasium.spaces import Space

from ares.core.environment import Environment
from ares.llm.types import LLMRequest, LLMResponse
from ares.wrappers.gym.codec import ActionMode, Codec, ObservationMode, PromptRender, Tokenizer, make_codec
from ares.wrappers.gym.render import transcript
from ares.wrappers.gym.transition import episode_status, innermost, reset_info, step_transition

#: An ARES environment, or a zero-argument callable that builds one (called once, by the wrapper).
EnvSource = Environment[Any, Any] | Callable[[], Environment[Any, Any]]

RESET_OPTIONS = frozenset({"task"})


def resolve_env(source: EnvSource) -> Environment[Any, Any]:
    """The environment itself, or what the factory builds; anything else is a TypeError."""
    if not isinstance(source, type) and isinstance(source, Environment):
        return source
    if callable(source):
        built = source()
        if isinstance(built, Environment):
            return built
        raise TypeError(f"the environment factory returned {type(built).__name__}, not an ARES Environment")
    raise TypeError(
        "expected an ARES Environment (e.g. ares.make('humaneval')) or a factory of one, "
        f"got {type(source).__name__}"
    )


def _snapshotting(env: Environment[Any, Any]) -> Any:
    """The environment's own snapshot/restore (a CodeEnvironment's, through any wrappers)."""
    for candidate in (env, innermost(env)):
        if callable(getattr(candidate, "snapshot", None)) and callable(getattr(candidate, "restore", None)):
            return candidate
    raise TypeError(f"{type(innermost(env)).__name__} cannot snapshot (ares.make environments can)")


def task_option(options: Mapping[str, Any] | None) -> Any:
    """The task selector in ``reset(options={"task": ...})`` (an index, a task id or a Task)."""
    if options is None:
        return None
    if not isinstance(options, Mapping):
        raise TypeError(f"reset options must be a dict, got {type(options).__name__}")
    unknown = set(options) - RESET_OPTIONS
    if unknown:
        raise ValueError(f"unknown reset option(s) {sorted(unknown)}; supported: {sorted(RESET_OPTIONS)}")
    return options.get("task")


class AsyncAresGymEnv:
    """An ARES environment with gymnasium's API, ``async``: ``obs, info = await env.reset()`` and
    ``obs, reward, terminated, truncated, info = await env.step(action)``."""

    # gymnasium's checker wants a frame rate for any render mode; a text transcript has no natural one.
    metadata: ClassVar[dict[str, Any]] = {"render_modes": ["ansi"], "render_fps": 1}

    def __init__(
        self,
        env: EnvSource,
        *,
        observation: ObservationMode = "object",
        action: ActionMode = "object",
        tokenizer: Tokenizer | None = None,
        prompt_render: PromptRender | str | None = None,
    ) -> None:
        """``prompt_render``: how "tokens" observations render a request without ``prompt_token_ids``
        (default: the tokenizer's own chat template; ``"chatml"`` or a function ``request -> text``)."""
        self._codec = make_codec(
            observation, action, tokenizer, render=prompt_render
        )  # bad modes fail before an env is built
        self._env = resolve_env(env)
        self.observation_space: Space[Any] = self._codec.observation_space
        self.action_space: Space[Any] = self._codec.action_space
        self._request: LLMRequest | None = None  # the latest request the agent made
        self._final: LLMResponse | None = None  # the action that ended the episode
        self._ending: str | None = None  # "status, reward" once the episode is over
        self._active = False
        self._closed = False

    # ------------------------------------------------------------------ attributes
    @property
    def unwrapped_ares(self) -> Environment[Any, Any]:
        """The ARES environment this adapter drives."""
        return self._env

    @property
    def codec(self) -> Codec:
        return self._codec

    @property
    def episode_id(self) -> str | None:
        """The id of the current (or last) episode, when the environment keeps one."""
        return getattr(getattr(innermost(self._env), "episode", None), "id", None)

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def needs_reset(self) -> bool:
        return not self._active

    # ------------------------------------------------------------------ the API
    async def reset(
        self, *, seed: int | None = None, options: Mapping[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        """Start an episode; ``seed`` goes to the ARES env's task choice, ``options["task"]`` picks one."""
        self._ensure_open("reset")
        task = task_option(options)
        self._active = False
        ts = await self._env.reset(seed=seed, task=task)
        if not isinstance(ts.observation, LLMRequest):
            raise TypeError(
                f"the environment's first observation is {type(ts.observation).__name__}, not an LLMRequest"
            )
        self._request, self._final, self._ending = ts.observation, None, None
        observation = self._codec.observe(ts.observation)
        self._active = True
        return observation, reset_info(ts, self._env, seed)

    async def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        self._ensure_open("step")
        if not self._active:
            raise ResetNeeded(
                "step() called before reset()"
                if self._request is None
                else "the episode is over (terminated or truncated); call reset() to start a new one. "
                "This env does not reset by itself."
            )
        response = self._codec.act(action)
        try:
            ts = await self._env.step(response)
        except BaseException:
            self._active = False  # the ARES env ended or lost the episode: only a reset is safe now
            raise
        if isinstance(ts.observation, LLMRequest):
            self._request = ts.observation
        result = step_transition(ts, self._env)
        if result.done:
            self._active = False
            self._final = response
            self._ending = f"{episode_status(ts, self._env)}, reward {result.reward:g}"
        # At LAST ARES may have no observation; gymnasium needs one, so the last request stands in.
        assert self._request is not None
        observation = self._codec.observe(self._request)
        return observation, result.reward, result.terminated, result.truncated, result.info

    async def snapshot(self) -> Any:
        """The ARES environment's ``snapshot()`` of the current step (see ``ares.snapshot``)."""
        self._ensure_open("snapshot")
        return await _snapshotting(self._env).snapshot()

    async def restore(self, snapshot: Any) -> tuple[Any, dict[str, Any]]:
        """Continue from ``snapshot`` (this env or another one's): like ``reset``, the observation
        the policy answers next and the info dict."""
        self._ensure_open("restore")
        self._active = False
        ts = await _snapshotting(self._env).restore(snapshot)
        self._request, self._final, self._ending = ts.observation, None, None
        self._active = True
        return self._codec.observe(ts.observation), reset_info(ts, self._env, snapshot.seed)

    async def close(self) -> None:
        """Close the ARES env: a running episode is aborted and its sandbox stopped. Idempotent."""
        if self._closed:
            return
        self._closed, self._active = True, False
        await self._env.close()

    def render(self) -> str:
        """The conversation so far as text: system, user and assistant turns, and the outcome at the end."""
        if self._request is None:
            return ""
        messages = self._request.chat()
        if self._final is not None:
            messages.append(self._final.message())
        text = transcript(messages)
        return text if self._ending is None else f"{text}\n\n[episode over: {self._ending}]"

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    def _ensure_open(self, method: str) -> None:
        if self._closed:
            raise ClosedEnvironmentError(f"{method}() on a closed environment; create a new one")

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}({type(innermost(self._env)).__name__}, observation="
            f"{self._codec.observation!r}, action={self._codec.action!r})"
        )
