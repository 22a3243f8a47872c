"""An agent that plays a given model patch instead of asking a model: how ``ares eval`` grades predictions.

Each episode's agent uploads its instance's patch outside /testbed (so the file itself never reaches
the grader) and applies it to /testbed with the harness's cascade (``eval_script.apply_cascade_script``:
``git apply``, ``--3way``, ``--reject``, ``patch --fuzz=5``, a clean tree between attempts, "already
applied" accepted). From there the episode is any SWE episode: the verifier carries /testbed's diff
into a fork of the pristine image and grades it on the host, so a prediction is graded by exactly the
rules an ``ares run swebench`` agent is.

The environment needs one observation per episode, so after applying the agent asks its LLM once
(the answer, whatever it is, ends the agent: ``null_policy`` submits). A patch that does not apply
raises :class:`PatchNotApplied` before that: the episode ends without a test run, as the harness
runs none, and the factory's ``outcomes`` say why.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from ares.errors import AgentError, PolicyError
from ares.llm.interceptor import LLMClient
from ares.llm.types import LLMRequest, LLMResponse, user
from ares.sandbox.base import Sandbox
from ares.tasks.model import Task
from ares.tasks.swe.eval_script import apply_cascade_script

#: Where the prediction and the apply script go in the agent's sandbox (outside /testbed).
PREDICTION_DIR = "/tmp/ares-prediction"
APPLY_TIMEOUT_S = 300.0
_SUBMIT = "submit"


class PatchNotApplied(AgentError):
    """No command of the harness's cascade applied the prediction."""


@dataclass(frozen=True)
class ApplyOutcome:
    """What applying one prediction did: whether it applied and the cascade's output."""

    applied: bool
    log: str


@dataclass(frozen=True)
class _SubmitOnly:
    """The action format: the agent takes no commands, any answer ends it."""

    def command(self, command: str) -> LLMResponse:
        raise PolicyError("the prediction agent runs no commands: it applies the predicted patch")

    def submit(self) -> LLMResponse:
        return LLMResponse(content=_SUBMIT)


@dataclass
class PredictionAgentFactory:
    """Builds one :class:`PredictionAgent` per episode from ``patches`` (task id -> model patch)."""

    patches: Mapping[str, str]
    #: Filled as episodes apply their patch: task id -> outcome (read after the run).
    outcomes: dict[str, ApplyOutcome] = field(default_factory=dict)
    action_format: _SubmitOnly = field(default_factory=_SubmitOnly)

    def __call__(self, *, sandbox: Sandbox, llm: LLMClient, task: Task) -> PredictionAgent:
        if task.id not in self.patches:
            raise AgentError(f"no prediction for task {task.id}")
        return PredictionAgent(sandbox, llm, task, self.patches[task.id], self.outcomes)


class PredictionAgent:
    """Applies one prediction to the task's workdir, then asks once and ends (module docstring)."""

    def __init__(
        self, sandbox: Sandbox, llm: LLMClient, task: Task, patch: str, outcomes: dict[str, ApplyOutcome]
    ) -> None:
        self.sandbox, self.llm, self.task, self.patch, self.outcomes = sandbox, llm, task, patch, outcomes
        #: Why the agent ended (kept as the episode's exit reason).
        self.exit_status: str | None = None

    async def run(self) -> None:
        outcome = await self.apply()
        self.outcomes[self.task.id] = outcome
        if not outcome.applied:
            self.exit_status = "patch_apply_failed"
            raise PatchNotApplied(f"the prediction for {self.task.id} does not apply: {_tail(outcome.log)}")
        self.exit_status = "patch_applied"
        note = f"The predicted patch for {self.task.id} is applied to {self.task.workdir}; submit."
        await self.llm(LLMRequest(messages=(user(note),)))

    async def apply(self) -> ApplyOutcome:
        """The cascade run in the sandbox on the uploaded patch (exit 0: applied)."""
        patch_path = f"{PREDICTION_DIR}/model.patch"
        script = apply_cascade_script(patch_path, workdir=self.task.workdir)
        await self.sandbox.upload({"model.patch": self.patch, "apply.sh": script}, PREDICTION_DIR)
        result = await self.sandbox.exec(
            f"bash {PREDICTION_DIR}/apply.sh", cwd=self.task.workdir, timeout_s=APPLY_TIMEOUT_S
        )
        return ApplyOutcome(result.ok, result.stdout + result.stderr)


def _tail(log: str, lines: int = 3) -> str:
    return " | ".join(log.strip().splitlines()[-lines:]) or "no output"
