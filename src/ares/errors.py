"""Typed errors. Every message says what went wrong and what the user can do about it.

One tree: every error ARES raises for its caller derives from ``AresError`` (with a stdlib base too
where callers expect one: ``ValueError`` for bad data, ``ImportError`` for a missing extra,
``TimeoutError`` for the timeout family). Errors that belong to one concept may live beside it (a
pool's, a tracker's, the proxy's) but derive from these. Exceptions used as signals inside one module
(an agent's end, a closed pipe) never reach a caller and are not errors in this sense;
``tests/test_error_tree.py`` lists them and checks the rest.
"""

from __future__ import annotations

from typing import Any


class AresError(Exception):
    """Base class of every error ARES raises on purpose."""


class EnvironmentStateError(AresError):
    """The environment was used out of order (step before reset, step after LAST, use after close)."""


class SandboxError(AresError):
    """A sandbox could not start, crashed, or an operation on it failed."""


class SandboxUnavailableError(SandboxError):
    """The machine lacks a kernel feature the sandbox needs (user namespaces, overlayfs, ...)."""


class SandboxCrashedError(SandboxError):
    """The sandbox died while an operation was in flight."""


class SandboxKilledError(SandboxCrashedError):
    """The sandbox was killed from outside, by nothing its own processes can do (an operator, the host's
    OOM killer, a lost node): the backend saw no sign the sandbox did it to itself. Not the agent's
    doing, so its episode errors (blame ``infra``, masked) instead of being verified as the agent's."""


class OutputRefusedError(SandboxError):
    """What the agent left breaks a bound of the verifier's carry (too many entries, a huge or sparse
    file, a special file, a tree too deep, a path too long, an unreadable dir, too slow to read).

    The agent caused it, so the verifier scores it 0 with the reason on record (term
    ``refused_<reason>``) instead of erroring the episode. ``outside``: what the agent changed outside
    its outputs, when that was read before the refusal.
    """

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"the agent's files are refused ({reason}): {detail}")
        self.reason, self.detail = reason, detail
        self.outside: Any = None

    @property
    def term(self) -> str:
        return f"refused_{self.reason}"


class ImageBuildError(SandboxError):
    """An image could not be built: a bad Dockerfile, an unsupported base, or a failing step."""


class TaskError(AresError):
    """A task definition is malformed or cannot be loaded."""


class TaskConfigWarning(UserWarning):
    """A task file holds a table or key that nothing reads (often a typo); the task still loads."""


class TaskNotFoundError(TaskError):
    """A task selector did not match any task."""


class VerifierError(AresError):
    """The verifier did not produce a usable reward (missing, malformed or non-finite).

    ``evidence`` (an ``ares.tasks.verifier.Verdict`` with a NaN reward), when the tests ran: their
    output and files, kept with the episode so the failure can be diagnosed.
    """

    evidence: Any = None


class AgentError(AresError):
    """The code agent crashed or misbehaved."""


class SnapshotError(AresError):
    """A snapshot cannot be taken, saved, loaded or restored (the message says why and what to do)."""


class LLMError(AresError):
    """An LLM call failed or the policy's response could not be understood."""


class MalformedResponseError(LLMError):
    """A response does not match the expected wire format."""


class PolicyError(AresError):
    """A policy could not produce an action."""


class StaleEpisodeError(AresError):
    """An episode's oldest token came from weights more versions behind the trainer's current ones
    than ``max_staleness`` allows: it is ended (blame ``infra``, masked, refillable), never silently
    trained on."""


class AresTimeoutError(AresError, TimeoutError):
    """Something ARES waited on did not answer in time (a ``TimeoutError`` too): the family of
    ``LLMTimeoutError``, ``PolicyTimeoutError``, ``SandboxTimeoutError`` and ``VerifierTimeoutError``."""


class LLMTimeoutError(LLMError, AresTimeoutError):
    """An LLM call (HTTP or vendor SDK) did not complete within its timeout, retries included."""


class PolicyTimeoutError(PolicyError, AresTimeoutError):
    """The policy did not answer an observation within the runner's ``policy_timeout_s``."""


class SandboxTimeoutError(SandboxCrashedError, AresTimeoutError):
    """A sandbox did not answer within its bound (an exec's own timeout plus a grace): it was stopped,
    as after a crash. (A command that runs past its timeout is not an error: its ``ExecResult`` says
    ``timed_out``.)"""


class VerifierTimeoutError(VerifierError, AresTimeoutError):
    """The task's tests ran past ``verifier_timeout_s`` without writing a reward."""


class UnknownPresetError(AresError):
    """No preset (or policy) is registered under the requested name."""


class MissingExtraError(AresError, ImportError):
    """A preset needs an optional extra (``pip install 'ares[NAME]'``) that is not installed.

    An ImportError too, so code that guards an optional import with ``except ImportError`` still works.
    """


#: Joins an error's problem and its remedy on one line; summaries that shorten errors keep the remedy
#: whole (``clip_error``) and shorten the problem instead.
FIX = "; to fix: "


def clip_error(text: str, limit: int = 300) -> str:
    """``text`` (one line) in at most about ``limit`` characters: the middle of the problem goes, never
    the end of the line nor its ``FIX`` remedy."""
    problem, sep, remedy = text.rpartition(FIX)
    if not sep:
        problem, remedy = text, ""
    room = max(limit - len(sep) - len(remedy), 80)
    if len(problem) > room:
        keep = room - 3
        problem = problem[: keep * 2 // 3] + " … " + problem[len(problem) - (keep - keep * 2 // 3) :]
    return problem + sep + remedy
