"""An episode's verification: the task's verifier run on its sandbox, and what it found kept.

The verdict's test output, files and view of the agent's filesystem go into the episode record even
when verification fails with a verdict in hand (a ``VerifierError``'s evidence), so a failed check
can still be read.
"""

from __future__ import annotations

from ares import tracing
from ares.envs.episode import Episode
from ares.sandbox.base import Sandbox
from ares.tasks.model import Task
from ares.tasks.verifier import Verdict, verify
from ares.tracing import spans


async def verify_traced(task: Task, sandbox: Sandbox) -> Verdict:
    """``verify``, in an ``env.verify`` span that records the reward (no span object while off)."""
    with (
        tracing.span("env.verify", cat="env", task=task.id) if spans.current_rank() else spans.NO_SPAN as span
    ):
        verdict = await verify(task, sandbox)
        span.set("reward", verdict.reward)
    return verdict


def record_verdict(episode: Episode, verdict: Verdict) -> None:
    """The test run's output, files and view of the agent's filesystem, kept with the episode."""
    if verdict.output is not None:
        episode.verifier_stdout, episode.verifier_stderr = verdict.output.stdout, verdict.output.stderr
    episode.verifier_mode = verdict.mode
    episode.verifier_files = dict(verdict.files.files)
    episode.changed_outside = verdict.outside
