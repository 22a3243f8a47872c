"""AresDmEnv passes dm_env's own conformance suite (``dm_env.test_utils.EnvironmentTestMixin``).

The mixin resets and steps a real HumanEval environment on the local sandbox with actions made from
``action_spec()`` and checks every TimeStep against the specs, including the auto-reset contract.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

from absl.testing import absltest
from dm_env import test_utils

import ares
from ares.agents.bash import BashActionFormat
from ares.llm.types import LLMResponse
from ares.wrappers.dm_env import ActionRendering, AresDmEnv, ObservationRendering

STEP_LIMIT = 5
FMT = BashActionFormat()


class TestAresDmEnv(test_utils.EnvironmentTestMixin, absltest.TestCase):
    """Default renderings: LLMRequest observations, LLMResponse actions."""

    observation: ObservationRendering = "object"
    action: ActionRendering = "object"

    def make_object_under_test(self) -> AresDmEnv:
        self.threads_before = set(threading.enumerate())
        env = ares.make("humaneval", tasks="0:3", step_limit=STEP_LIMIT)
        return AresDmEnv(env, observation=self.observation, action=self.action)

    def tearDown(self) -> None:
        super().tearDown()  # the mixin closes the environment
        self.assertTrue(self.environment.closed)
        self.assertEqual(set(threading.enumerate()) - self.threads_before, set())

    def make_action_sequence(self) -> Iterator[Any]:
        """Reaches both kinds of LAST: a submit (terminated), then the step limit (truncated)."""
        yield self._render(FMT.command("true"))
        yield self._render(FMT.submit())
        yield self.make_action()  # ignored: starts the next episode
        for _ in range(STEP_LIMIT):
            yield self.make_action()

    def _render(self, response: LLMResponse) -> Any:
        return response.content if self.action == "text" else response


class TestAresDmEnvMessagesAndText(TestAresDmEnv):
    """Chat-message observations and plain-text actions."""

    observation: ObservationRendering = "messages"
    action: ActionRendering = "text"
