"""Rollouts on Ray: ``RayRunner``/``run_episodes_ray`` take the local runner's arguments and play them
on actors.

Needs the ``ray`` extra (``pip install 'ares[ray]'``). See docs/scale.md for multi-node runs.
"""

from ares.rollout.ray.env_factory import PresetEnv
from ares.rollout.ray.fleet import ACTOR_NAME_PREFIX, RayRunError
from ares.rollout.ray.policy import SharedPolicyFactory, shared_policy
from ares.rollout.ray.run import DEFAULT_ACTOR_START_TIMEOUT_S, RayRunner, run_episodes_ray

__all__ = [
    "ACTOR_NAME_PREFIX",
    "DEFAULT_ACTOR_START_TIMEOUT_S",
    "PresetEnv",
    "RayRunError",
    "RayRunner",
    "SharedPolicyFactory",
    "run_episodes_ray",
    "shared_policy",
]
