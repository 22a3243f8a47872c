"""Every ARES preset as a gymnasium id: ``gymnasium.make("ares/humaneval", tasks="0:3", step_limit=5)``.

Importing ``ares.wrappers.gym`` registers the ids. Gymnasium 1.x no longer discovers third-party
environments through package entry points (0.26's ``gymnasium.envs`` plugin hook is gone), so
without that import use the ``"module:id"`` form, which imports the module first:
``gymnasium.make("ares.wrappers.gym:ares/humaneval")`` (``make_vec`` accepts it too).

No ``max_episode_steps``: ARES's own ``step_limit`` ends an over-long episode *inside* the
environment, so the verifier still scores it and the sandbox is released at once, and it reports
``truncated``. Gymnasium's ``TimeLimit`` would only flag the step and leave the episode running until
the next reset (then recorded as abandoned, unscored). Pass ``step_limit=N`` instead.
"""

from __future__ import annotations

import functools
from typing import Any

import gymnasium

from ares.presets import get_preset, list_presets, make
from ares.wrappers.gym.codec import ActionMode, ObservationMode, PromptRender, Tokenizer
from ares.wrappers.gym.env import AresGymEnv

NAMESPACE = "ares"
ENTRY_POINT = "ares.wrappers.gym.registration:make_env"
VECTOR_ENTRY_POINT = "ares.wrappers.gym.vector:make_vector_env"


def make_env(
    preset: str,
    *,
    observation: ObservationMode = "object",
    action: ActionMode = "object",
    tokenizer: Tokenizer | None = None,
    prompt_render: PromptRender | str | None = None,
    render_mode: str | None = None,
    **make_kwargs: Any,
) -> AresGymEnv:
    """The entry point of every ``ares/<preset>`` id: ``ares.make(preset, **make_kwargs)``, wrapped."""
    get_preset(preset)  # an unknown preset fails here, before a loop thread starts
    return AresGymEnv(
        functools.partial(make, preset, **make_kwargs),
        observation=observation,
        action=action,
        tokenizer=tokenizer,
        prompt_render=prompt_render,
        render_mode=render_mode,
    )


def env_id(preset: str) -> str:
    return f"{NAMESPACE}/{preset}"


def register_presets() -> list[str]:
    """Register ``ares/<preset>`` for every preset not registered yet; returns all their ids."""
    ids = []
    for preset in list_presets():
        name = env_id(preset.name)
        if name not in gymnasium.registry:
            gymnasium.register(
                name,
                entry_point=ENTRY_POINT,
                vector_entry_point=VECTOR_ENTRY_POINT,
                kwargs={"preset": preset.name},
            )
        ids.append(name)
    return ids
