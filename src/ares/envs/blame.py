"""Who is to blame when an episode did not simply finish, and whether a trainer should learn from it.

A trainer must not learn from a sample the policy did not earn (a sandbox that died under it, a
policy server that went away, a task whose tests cannot run) and must learn from every one it did
earn, zeros included: were a policy's own failure masked, failing loudly would be a way to escape a
zero. The rules, in order (the first that applies decides):

=================================================  =========  ========
what happened                                      blame      masked
=================================================  =========  ========
finished, the sandbox died under the agent's       policy     no
commands and may have done so by their doing
(its files were still verified)
finished                                           (none)     no
a step, time or context limit cut the episode      limit      no
abandoned, aborted or cancelled by the caller      infra      yes
errored: the policy failed, timed out, or its      policy     no
reply could not be read (``PolicyError``,
``MalformedResponseError``, ``LLMTimeoutError``)
errored: the policy server could not be reached    infra      yes
(any other ``LLMError``), or the episode went stale
(``StaleEpisodeError``: the trainer moved on)
errored: the task cannot be loaded, built or       task       yes
verified on a pristine tree (``TaskError``,
``ImageBuildError``, ``VerifierError``)
errored: the sandbox was killed from outside       infra      yes
(``SandboxKilledError``)
errored: anything else (a sandbox or backend       infra      yes
fault the agent did not cause, a scaffold crash)
=================================================  =========  ========

A verifier that fails on the agent's tree but gives a reward on the pristine one was broken by the
agent: that episode is not errored at all but finished with reward 0 and blame ``policy``
(``ares.envs.verification``). A sandbox crash during an agent command is kept as ``sandbox_crash``
and verified, never errored (``ares.envs.agent_run``), unless the backend proves the kill came from
outside (``SandboxKilledError``). The local backend can where cgroups hold memory and processes:
signals from inside never reach a pid namespace's init, ptrace of it is refused, the syscall filter
stops commands from lowering its rlimits, and cgroups count the rest (an OOM kill, a refused fork);
with none counted over the sandbox's life, its init was killed from outside. With rlimits (no count
to read), on Docker (whose default profile lets root in the container lower pid 1's rlimits) and in
the cloud, a host's kill cannot be told from the agent's, so it stays the agent's: masking an earned
zero is the mistake an optimizer exploits, while keeping a rare infra kill costs one noisy sample.
"""

from __future__ import annotations

from typing import Literal

from ares.core.status import EpisodeStatus
from ares.errors import (
    ImageBuildError,
    LLMError,
    LLMTimeoutError,
    MalformedResponseError,
    PolicyError,
    StaleEpisodeError,
    TaskError,
    VerifierError,
)

Blame = Literal["infra", "policy", "task", "limit"]
BLAMES: tuple[Blame, ...] = ("infra", "policy", "task", "limit")

#: The blames whose samples a trainer masks by default: not the policy's doing.
MASKED: frozenset[Blame] = frozenset({"infra", "task"})

_STOPPED_BY_CALLER = (EpisodeStatus.ABANDONED, EpisodeStatus.ABORTED, EpisodeStatus.CANCELLED)


def blame_for(status: EpisodeStatus, error: BaseException | None, sandbox_crash: str | None) -> Blame | None:
    """The blame of an episode that ended with ``status`` (and ``error``); None for a clean finish."""
    if status is EpisodeStatus.FINISHED or status is EpisodeStatus.RUNNING:
        return "policy" if sandbox_crash is not None else None
    if status is EpisodeStatus.TRUNCATED:
        return "limit"
    if status in _STOPPED_BY_CALLER:
        return "infra"
    return error_blame(error)


def error_blame(error: BaseException | None) -> Blame:
    """The blame of an errored episode, from its error."""
    if isinstance(error, StaleEpisodeError):
        return "infra"  # the trainer moved on: no fault of the policy that answered
    if isinstance(error, PolicyError | MalformedResponseError | LLMTimeoutError):
        return "policy"
    if isinstance(error, LLMError):
        return "infra"
    if isinstance(error, TaskError | ImageBuildError | VerifierError):
        return "task"
    return "infra"


def masked(blame: Blame | None) -> bool:
    """Whether a trainer should leave this sample out (``MASKED``)."""
    return blame in MASKED
