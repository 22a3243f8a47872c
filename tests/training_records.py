"""Episode records built by hand for the training-data tests: requests, responses and whole episodes."""

from __future__ import annotations

from ares.llm import PROMPT_TOKEN_IDS_KEY
from ares.llm.types import LLMRequest, LLMResponse, user
from ares.records.model import EpisodeRecord, StepRecord


def request(ids: list[int] | None) -> LLMRequest:
    return LLMRequest(messages=(user("solve it"),), prompt_token_ids=None if ids is None else tuple(ids))


def response(
    ids: list[int] | None, logprobs: list[float] | None = None, fed: list[int] | None = None
) -> LLMResponse:
    extra = {} if fed is None else {PROMPT_TOKEN_IDS_KEY: fed}
    return LLMResponse(
        content="x",
        token_ids=None if ids is None else tuple(ids),
        logprobs=None if logprobs is None else tuple(logprobs),
        extra=extra,
    )


def episode(
    turns: list[tuple[LLMRequest, LLMResponse]],
    *,
    status: str = "finished",
    reward: float | None = 1.0,
    group: str | None = "g0",
    index: int = 3,
) -> EpisodeRecord:
    """An episode whose k-th policy turn answers the k-th request: FIRST, MID..., LAST steps."""
    steps = [StepRecord(0, "FIRST", turns[0][0], None, None, None, 0.0, 0.1)]
    for k, (_, answer) in enumerate(turns):
        last = k == len(turns) - 1
        observation = None if last else turns[k + 1][0]
        steps.append(StepRecord(k + 1, "LAST" if last else "MID", observation, answer, 0.0, 1.0, 0.1, 0.2))
    metadata = {"episode_index": index} | ({"group_id": group} if group else {})
    return EpisodeRecord(
        episode_id="e1", task_id="t", seed=0, env={}, started_at=0.0, ended_at=1.0, status=status,
        total_reward=reward, steps=tuple(steps), metadata=metadata,
    )  # fmt: skip
