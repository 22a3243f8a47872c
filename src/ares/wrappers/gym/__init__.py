"""Gymnasium adapters for ARES environments (needs the ``gym`` extra: ``pip install 'ares[gym]'``).

- ``AresGymEnv``: a synchronous ``gymnasium.Env``; the ARES env runs on a private event loop, so it
  works from scripts, notebooks and code inside a running event loop alike.
- ``AsyncAresGymEnv``: the same contract with ``async`` reset/step/close, for use inside a loop.
- ``wrap_as_gym(env, async_mode=...)`` picks one; observations and actions can be the LLM objects
  (default), OpenAI chat messages / plain text, or token ids (see ``codec``).
- ``AresVectorEnv`` / ``make_vector_env``: N environments stepped concurrently on one event loop
  behind ``gymnasium.vector.VectorEnv`` (autoreset NEXT_STEP by default; see ``vector``).
- Importing this package registers ``ares/<preset>`` for ``gymnasium.make`` (see ``registration``).
"""

from __future__ import annotations

try:
    import gymnasium as _gymnasium  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised in a subprocess by the tests
    raise ImportError(
        "ares.wrappers.gym needs gymnasium, which is not installed: pip install 'ares[gym]'"
    ) from exc

from typing import Literal, overload

from ares.wrappers.gym.async_env import AsyncAresGymEnv, EnvSource
from ares.wrappers.gym.codec import ActionMode, Codec, ObservationMode, PromptRender, Tokenizer, make_codec
from ares.wrappers.gym.env import AresGymEnv
from ares.wrappers.gym.registration import make_env, register_presets
from ares.wrappers.gym.spaces import (
    ChatMessagesSpace,
    LLMRequestSpace,
    LLMResponseSpace,
    TextSpace,
    token_ids_space,
)


@overload
def wrap_as_gym(
    env: EnvSource,
    *,
    async_mode: Literal[False] = False,
    observation: ObservationMode = "object",
    action: ActionMode = "object",
    tokenizer: Tokenizer | None = None,
    render_mode: str | None = None,
) -> AresGymEnv: ...


@overload
def wrap_as_gym(
    env: EnvSource,
    *,
    async_mode: Literal[True],
    observation: ObservationMode = "object",
    action: ActionMode = "object",
    tokenizer: Tokenizer | None = None,
    render_mode: str | None = None,
) -> AsyncAresGymEnv: ...


def wrap_as_gym(
    env: EnvSource,
    *,
    async_mode: bool = False,
    observation: ObservationMode = "object",
    action: ActionMode = "object",
    tokenizer: Tokenizer | None = None,
    render_mode: str | None = None,
) -> AresGymEnv | AsyncAresGymEnv:
    """``env`` (or a factory of it) as a synchronous ``gymnasium.Env``, or with ``async_mode=True``
    as an ``AsyncAresGymEnv`` to await inside an event loop (its ``render()`` always returns text)."""
    if async_mode:
        if render_mode is not None:
            raise ValueError(
                "render_mode applies to the sync env; AsyncAresGymEnv.render() always returns text"
            )
        return AsyncAresGymEnv(env, observation=observation, action=action, tokenizer=tokenizer)
    return AresGymEnv(
        env, observation=observation, action=action, tokenizer=tokenizer, render_mode=render_mode
    )


from ares.wrappers.gym.vector import AresVectorEnv, SubEnvironmentError, make_vector_env  # noqa: E402

register_presets()

__all__ = [
    "ActionMode",
    "AresGymEnv",
    "AresVectorEnv",
    "AsyncAresGymEnv",
    "ChatMessagesSpace",
    "Codec",
    "EnvSource",
    "LLMRequestSpace",
    "LLMResponseSpace",
    "ObservationMode",
    "PromptRender",
    "SubEnvironmentError",
    "TextSpace",
    "Tokenizer",
    "make_codec",
    "make_env",
    "make_vector_env",
    "register_presets",
    "token_ids_space",
    "wrap_as_gym",
]
