"""ARES: RL environments for LLM coding agents.

Observations are the code agent's LLM requests, actions are the policy's LLM responses::

    env = ares.make("humaneval")
    async with env:
        ts = await env.reset()
        while not ts.last():
            ts = await env.step(await policy.act(ts.observation))
"""

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
from ares.registry import list_presets, make, select_tasks
from ares.sandbox import ExecResult, Sandbox, SandboxSpec
from ares.sandbox.local import LocalSandbox
from ares.tasks import Task, load_harbor_dataset, load_harbor_task, load_humaneval

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
