"""Driving a bash-agent episode by commands: what the snapshot tests replay before and after a fork."""

from __future__ import annotations

from typing import Any

from ares.agents.bash import BashActionFormat
from ares.llm.types import LLMRequest

FMT = BashActionFormat()


def last_text(observation: Any) -> str:
    """The text of the observation's last message (the output of the command just run)."""
    assert isinstance(observation, LLMRequest)
    return observation.messages[-1].text


async def play(env: Any, commands: list[str]) -> list[str]:
    """Run ``commands`` as steps of ``env`` (none may end the episode); their outputs."""
    seen = []
    for command in commands:
        ts = await env.step(FMT.command(command))
        assert not ts.last()
        seen.append(last_text(ts.observation))
    return seen
