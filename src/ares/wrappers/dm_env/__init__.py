"""DeepMind's dm_env API over ARES environments (needs the ``dm`` extra: ``pip install ares[dm]``).

::

    from ares.wrappers.dm_env import AresDmEnv

    with AresDmEnv(ares.make("humaneval", tasks="0:10")) as env:
        timestep = env.reset()
        while not timestep.last():
            timestep = env.step(policy(timestep.observation))
        print(env.episode.task_id, env.episode.status, timestep.reward)
"""

from ares.wrappers.dm_env.environment import EXAMPLE_COMMAND, ActionRendering, AresDmEnv, ObservationRendering
from ares.wrappers.dm_env.specs import (
    ChatMessagesSpec,
    LLMRequestSpec,
    LLMResponseSpec,
    ObjectSpec,
    TextSpec,
    object_scalar,
)

__all__ = [
    "EXAMPLE_COMMAND",
    "ActionRendering",
    "AresDmEnv",
    "ChatMessagesSpec",
    "LLMRequestSpec",
    "LLMResponseSpec",
    "ObjectSpec",
    "ObservationRendering",
    "TextSpec",
    "object_scalar",
]
