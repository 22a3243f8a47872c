"""Which weights made which tokens of one answer: version segments over its ``token_ids``.

An answer is usually sampled by one version of the weights (``LLMResponse.policy_version``). An
answer whose generation was preempted by a weight update and continued afterwards
(``ares.rollout.preemption``) holds tokens of two or more versions: its ``extra`` then carries
``ares_version_segments``, ``[start, end, version]`` spans over its ``token_ids`` (end exclusive),
and ``policy_version`` is the version that finished it. The key survives every dialect and the
records (an ``extra`` key, kept losslessly); training sequences split on it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from ares.llm.types import LLMResponse

#: The ``LLMResponse.extra`` key of an answer whose tokens come from more than one version.
VERSION_SEGMENTS_KEY = "ares_version_segments"

#: ``(start, end, version)`` over an answer's (or a sequence's) tokens; end exclusive.
Segment = tuple[int, int, int | None]


def answer_segments(response: LLMResponse) -> tuple[Segment, ...]:
    """The version segments of ``response``'s tokens: its recorded ones, else one span of its
    ``policy_version`` (none for an answer without tokens)."""
    recorded = response.extra.get(VERSION_SEGMENTS_KEY) if isinstance(response.extra, Mapping) else None
    if recorded:
        return tuple((int(start), int(end), None if v is None else int(v)) for start, end, v in recorded)
    n = len(response.token_ids or ())
    return ((0, n, response.policy_version),) if n else ()


def merged(segments: Iterable[Segment]) -> tuple[Segment, ...]:
    """``segments`` with empty spans dropped and adjacent spans of one version joined."""
    out: list[Segment] = []
    for start, end, version in segments:
        if end <= start:
            continue
        if out and out[-1][2] == version and out[-1][1] == start:
            out[-1] = (out[-1][0], end, version)
        else:
            out.append((start, end, version))
    return tuple(out)


def oldest_version(response: LLMResponse) -> int | None:
    """The oldest version that made any of ``response``'s tokens (its ``policy_version`` when it
    records no segments; None when no version is known)."""
    known = [v for _, _, v in answer_segments(response) if v is not None]
    if response.policy_version is not None:
        known.append(response.policy_version)
    return min(known) if known else None
