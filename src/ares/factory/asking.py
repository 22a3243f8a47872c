"""One question to any ARES policy, outside an episode (the factory's LLM strategies and ``--writer``).

A policy answers ``LLMRequest``s for an agent in an episode; here there is no episode, so each
question builds the policy from its factory with a small synthetic ``Task`` and a plain-text action
format, sends one request (system prompt + one user message) and reads the text back. Whatever goes
wrong with one answer (a ``PolicyError``, an LLM error, the timeout, no text) skips that item and is
counted: one bad answer never ends a run of hundreds.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ares.errors import AresError, PolicyError
from ares.llm.types import LLMRequest, LLMResponse, SamplingParams, text_response, user
from ares.policies import PolicyFactory, make_policy
from ares.tasks.model import Task

#: Seconds one answer may take by default (a small local model on two cores needs tens of seconds).
DEFAULT_TIMEOUT_S = 300.0
#: At most this many error messages are kept for the report.
MAX_ERRORS_KEPT = 5


@dataclass(frozen=True)
class PolicySpec:
    """A policy by spec (``local``, ``scripted``, ``openai``, ``local:/m.gguf``) with its options and
    the sampling of its requests."""

    spec: str
    options: Mapping[str, Any] = field(default_factory=dict)
    max_tokens: int | None = None
    temperature: float | None = None
    timeout_s: float = DEFAULT_TIMEOUT_S


class _TextFormat:
    """The action format of a plain-text exchange: a command is its text, submitting is no text."""

    def command(self, command: str) -> LLMResponse:
        return text_response(command)

    def submit(self) -> LLMResponse:
        return text_response("")


@dataclass
class Asker:
    """Asks one policy questions; ``counts`` says how many were asked, answered, and failed how."""

    spec: PolicySpec
    factory: PolicyFactory
    counts: Counter[str] = field(default_factory=Counter)
    errors: list[str] = field(default_factory=list)

    @classmethod
    def of(cls, spec: PolicySpec) -> Asker:
        """The asker of ``spec``; an unknown spec or bad options raise (a mistake of the run's setup)."""
        return cls(spec, make_policy(spec.spec, **dict(spec.options)))

    @property
    def name(self) -> str:
        return self.spec.spec

    async def ask(self, system: str, prompt: str, *, purpose: str = "synth") -> str | None:
        """The policy's text answer to ``prompt``, or None (counted) when it fails or says nothing."""
        self.counts["asked"] += 1
        task = Task(id=f"synth-{purpose}", instruction=prompt, tests={}, metadata={"purpose": purpose})
        request = LLMRequest(
            messages=(user(prompt),),
            system_prompt=system,
            sampling=SamplingParams(temperature=self.spec.temperature, max_tokens=self.spec.max_tokens),
            metadata={"purpose": purpose},
        )
        try:
            policy = self.factory(task, _TextFormat())
            response = await asyncio.wait_for(policy.act(request), self.spec.timeout_s)
            if not isinstance(response, LLMResponse):
                raise PolicyError(f"the policy answered a {type(response).__name__}, not an LLMResponse")
        except AresError as exc:  # first: an LLM call's own timeout is one, with its own reason
            return self._failed(type(exc).__name__, str(exc))
        except TimeoutError:
            return self._failed("timeout", f"no answer within {self.spec.timeout_s:g}s")
        text = response.content if isinstance(response.content, str) else response.message().text
        if not text.strip():
            return self._failed("empty", "the answer has no text")
        self.counts["answered"] += 1
        return text

    def _failed(self, kind: str, message: str) -> None:
        self.counts[f"error:{kind}"] += 1
        if len(self.errors) < MAX_ERRORS_KEPT:
            self.errors.append(f"{kind}: {message}"[:300])
        return None

    def report(self) -> dict[str, Any]:
        """For ``synth.json``: the policy, its counts, the first few errors."""
        return {"policy": self.name, **dict(sorted(self.counts.items())), "errors": list(self.errors)}
