"""An episode's verification: the task's verifier run on its sandbox, and what it found kept.

The verdict's test output, files and view of the agent's filesystem go into the episode record even
when verification fails with a verdict in hand (a ``VerifierError``'s evidence), so a failed check
can still be read.
"""

from __future__ import annotations

import dataclasses
import logging

from ares import tracing
from ares.envs.episode import PASS_REWARD, Episode
from ares.sandbox.base import IMAGE_WORKDIR, Sandbox, SandboxFactory
from ares.tasks.model import Task
from ares.tasks.verifier import Verdict, verify
from ares.tracing import spans

logger = logging.getLogger(__name__)

#: The reward term of an episode whose changes broke the task's tests (they pass on a pristine tree).
BROKE_TESTS = "verifier_failed"


async def verify_traced(task: Task, sandbox: Sandbox) -> Verdict:
    """``verify``, in an ``env.verify`` span that records the reward (no span object while off)."""
    with (
        tracing.span("env.verify", cat="env", task=task.id) if spans.current_rank() else spans.NO_SPAN as span
    ):
        verdict = await verify(task, sandbox)
        span.set("reward", verdict.reward)
    return verdict


def record_verdict(episode: Episode, verdict: Verdict) -> None:
    """The test run's output, files and view of the agent's filesystem, kept with the episode, and
    (for a usable reward) the verifier's pass/fail as its ``outcome``."""
    if verdict.reward == verdict.reward:  # not the NaN of a failed verification's evidence
        episode.outcome = verdict.reward >= PASS_REWARD
    if verdict.output is not None:
        episode.verifier_stdout, episode.verifier_stderr = verdict.output.stdout, verdict.output.stderr
    episode.verifier_mode = verdict.mode
    episode.verifier_files = dict(verdict.files.files)
    episode.changed_outside = verdict.outside


async def tests_run_on_pristine(task: Task, sandbox_factory: SandboxFactory) -> bool:
    """Whether the task's tests give a reward on a sandbox nobody touched (the image and the task's
    workspace), verified as the task always is: the control that tells tests the agent's changes
    broke (an error on its tree, a reward here: the agent's zero) from a broken task (an error
    here too). Nothing the agent did reaches this sandbox. Any failure here counts as no reward."""
    sandbox = sandbox_factory(task.sandbox_spec())
    try:
        await sandbox.start()
        if task.workdir == IMAGE_WORKDIR:
            task = dataclasses.replace(task, workdir=sandbox.spec.workdir)
        if task.workspace:
            await sandbox.upload(task.workspace, task.workdir)
        verdict = await verify(task, sandbox)
    except Exception as exc:  # the control could not run, or failed too: the task is to blame
        why = f"{type(exc).__name__}: {exc}"
        logger.info("task %s: its tests give no reward on a pristine tree either (%s)", task.id, why)
        return False
    finally:
        await sandbox.stop()
    return verdict.reward == verdict.reward
