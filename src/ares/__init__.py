"""ARES: RL environments for LLM coding agents.

Observations are the code agent's LLM requests, actions are the policy's LLM responses::

    env = ares.make("humaneval")
    async with env:
        ts = await env.reset()
        while not ts.last():
            ts = await env.step(await policy.act(ts.observation))

Public names are imported on first use, so importing a subpackage (``ares.images``) loads only what
it needs, while ``from ares import make`` works as usual.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ares import moved

moved.install()  # old import paths of moved modules still work, with a DeprecationWarning

if TYPE_CHECKING:
    from ares.core import (
        Environment,
        EpisodeStatus,
        EpisodicEnvironment,
        SnapshottingEnvironment,
        StepType,
        TimeStep,
        Wrapper,
        restart,
        termination,
        transition,
        truncation,
    )
    from ares.envs import CodeEnvironment, Episode
    from ares.llm import LLMRequest, LLMResponse, Message, SamplingParams, ToolCall, Usage
    from ares.policies import make_policy
    from ares.presets import list_presets, make, select_tasks
    from ares.sandbox import ExecResult, Sandbox, SandboxSpec
    from ares.sandbox.local import LocalSandbox
    from ares.tasks import Task, load_harbor_dataset, load_harbor_task, load_humaneval

_EXPORTS = {
    "CodeEnvironment": "ares.envs",
    "Environment": "ares.core",
    "Episode": "ares.envs",
    "EpisodeStatus": "ares.core",
    "EpisodicEnvironment": "ares.core",
    "ExecResult": "ares.sandbox",
    "LLMRequest": "ares.llm",
    "LLMResponse": "ares.llm",
    "LocalSandbox": "ares.sandbox.local",
    "Message": "ares.llm",
    "SamplingParams": "ares.llm",
    "Sandbox": "ares.sandbox",
    "SandboxSpec": "ares.sandbox",
    "SnapshottingEnvironment": "ares.core",
    "StepType": "ares.core",
    "Task": "ares.tasks",
    "TimeStep": "ares.core",
    "ToolCall": "ares.llm",
    "Usage": "ares.llm",
    "Wrapper": "ares.core",
    "list_presets": "ares.presets",
    "load_harbor_dataset": "ares.tasks",
    "load_harbor_task": "ares.tasks",
    "load_humaneval": "ares.tasks",
    "make": "ares.presets",
    "make_policy": "ares.policies",
    "restart": "ares.core",
    "select_tasks": "ares.presets",
    "termination": "ares.core",
    "transition": "ares.core",
    "truncation": "ares.core",
}

__version__ = "0.1.0"

__all__ = [
    "CodeEnvironment",
    "Environment",
    "Episode",
    "EpisodeStatus",
    "EpisodicEnvironment",
    "ExecResult",
    "LLMRequest",
    "LLMResponse",
    "LocalSandbox",
    "Message",
    "SamplingParams",
    "Sandbox",
    "SandboxSpec",
    "SnapshottingEnvironment",
    "StepType",
    "Task",
    "TimeStep",
    "ToolCall",
    "Usage",
    "Wrapper",
    "list_presets",
    "load_harbor_dataset",
    "load_harbor_task",
    "load_humaneval",
    "make",
    "make_policy",
    "restart",
    "select_tasks",
    "termination",
    "transition",
    "truncation",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'ares' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
