"""Which weights answer: the version a policy reports, read when it is asked and when it answers.

An asynchronous trainer needs both: the version serving when an episode asked (how stale the
request was, queue time included) and the version that produced the tokens
(``LLMResponse.policy_version``). A policy that knows its version implements ``VersionReporting``;
the runner reads it as each call starts and records it with the step (``records.policy_call.PolicyCall``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, runtime_checkable

#: A version: a fixed value, or a callable read each time (e.g. the trainer's step counter, or the
#: version its inference server last loaded); None: not known.
VersionSource = int | Callable[[], int | None] | None


def read_version(source: VersionSource) -> int | None:
    """The version ``source`` says is serving now."""
    return source() if callable(source) else source


@runtime_checkable
class VersionReporting(Protocol):
    """A policy that can say which version of its weights would answer a call made now."""

    def current_version(self) -> int | None: ...


def version_of(policy: object) -> int | None:
    """``policy.current_version()`` for a policy that reports one; None for any other."""
    return policy.current_version() if isinstance(policy, VersionReporting) else None
