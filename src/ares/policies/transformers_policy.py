"""A policy sampling from an in-process Hugging Face ``transformers`` model (extra ``train``).

A trainer that updates a model's weights in place needs samples from those weights, not from a
separately served copy: this policy generates with the very model object the trainer optimises, so
rollouts are on-policy after every update. Answers carry the sampled token ids and their logprobs
(log-softmax of logits / temperature: the distribution each token was drawn from, which is what an
importance ratio or a temperature-scaled loss such as TRL's needs; greedy answers report the
untempered logits), and
``extra["ares_prompt_token_ids"]`` the prompt ids, rendered with the tokenizer's own chat template.

Concurrent episodes' requests are gathered into one left-padded ``generate`` call (a batch is much
cheaper per token than one sequence at a time on a CPU), run in a worker thread so the event loop
never blocks. The trainer must not step its optimizer while a rollout runs.

It is a ``ResumablePolicy``: a cancelled answer (a weight update's ``pause(preempt=True)``) stops at
the next token (a stopping criterion checked after every token, per row, so the batch's other
answers go on) and hands over what it sampled; re-issued, it continues from prompt + those tokens
with the weights of its new batch, the answer carrying the kept tokens and logprobs unchanged.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field
from typing import Any

import torch
from transformers import StoppingCriteria, StoppingCriteriaList

from ares.agents.base import ActionFormat
from ares.errors import LLMError
from ares.llm import PROMPT_TOKEN_IDS_KEY
from ares.llm.openai_chat import request_to_openai
from ares.llm.types import LLMRequest, LLMResponse, Usage
from ares.policies.base import Policy
from ares.policies.resuming import KeepTokens, KeptTokens, TokenChunk
from ares.tasks.model import Task


@dataclass(frozen=True, slots=True)
class GenerationSettings:
    """How to sample. ``temperature`` 0 is greedy; logprobs are of the sampling distribution
    (logits / temperature; the raw logits when greedy)."""

    max_new_tokens: int = 256
    temperature: float = 1.0
    batch_size: int = 8
    #: How long the first request of a batch waits for others before the batch is generated anyway.
    gather_s: float = 0.2

    def __post_init__(self) -> None:
        if self.max_new_tokens < 1 or self.batch_size < 1 or self.temperature < 0 or self.gather_s < 0:
            raise LLMError("max_new_tokens and batch_size must be >= 1; temperature and gather_s >= 0")


@dataclass(slots=True, eq=False)  # compared by identity: withdrawn from the queue by itself
class _Pending:
    """One answer to generate: from ``prompt`` (+ the kept tokens), at most ``budget`` new tokens.
    ``stop`` is set (from the loop) to end it at its next token; ``made`` counts its new tokens
    (from the generating thread)."""

    prompt: list[int]
    budget: int
    answer: asyncio.Future[tuple[list[int], list[float], int]]
    stop: bool = False
    made: int = 0


@dataclass(slots=True)
class TransformersPolicy:
    """Answers every episode's requests with ``model``; one instance serves all episodes of a run."""

    model: Any  # a transformers PreTrainedModel (causal LM)
    tokenizer: Any  # its tokenizer, with a chat template
    settings: GenerationSettings = field(default_factory=GenerationSettings)
    #: The weights' version, stamped on every answer (``LLMResponse.policy_version``): the trainer
    #: adds one after each optimizer step, so records tell which weights made each token.
    version: int = 0
    _queue: list[_Pending] = field(default_factory=list)
    _running: list[_Pending] = field(default_factory=list)
    _worker: asyncio.Task[None] | None = None

    def __call__(self, task: Task, action_format: ActionFormat) -> Policy:
        """The PolicyFactory: every episode shares this instance (and so its batches)."""
        return self

    def current_version(self) -> int | None:
        """The version the next batch is generated with (``VersionReporting``)."""
        return self.version

    def prompt_ids(self, request: LLMRequest) -> list[int]:
        """The ids fed to the model: the request's own, else its chat rendered by the template."""
        if request.prompt_token_ids is not None:
            return list(request.prompt_token_ids)
        messages = request_to_openai(request)["messages"]
        ids = self.tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
        return list(ids["input_ids"] if isinstance(ids, dict) or hasattr(ids, "keys") else ids)

    def in_progress(self) -> list[int]:
        """How many tokens each answer being generated now has sampled so far (for monitoring)."""
        return [p.made for p in self._running]

    async def act(self, observation: LLMRequest) -> LLMResponse:
        return await self.act_resuming(observation, KeptTokens(), lambda chunk: None)

    async def act_resuming(self, observation: LLMRequest, kept: KeptTokens, keep: KeepTokens) -> LLMResponse:
        """The answer, its first tokens ``kept``'s; cancelled, the tokens sampled so far go to
        ``keep`` once generation stopped (``ares.policies.resuming``)."""
        prompt = self.prompt_ids(observation)
        if not prompt:
            raise LLMError("the prompt is empty: nothing to feed the model")
        ids, logprobs = list(kept.token_ids), list(kept.logprobs)
        version = kept.chunks[-1].version if kept.chunks else self.version
        eos = set(_eos_ids(self.model, self.tokenizer))
        if not (ids and ids[-1] in eos) and len(ids) < self.settings.max_new_tokens:
            new, new_logprobs, version = await self._sample(prompt + ids, len(ids), keep)
            ids, logprobs = ids + new, logprobs + new_logprobs
        stopped = bool(ids) and ids[-1] in eos
        return LLMResponse(
            content=self.tokenizer.decode(ids, skip_special_tokens=True),
            finish_reason="stop" if stopped else "length",
            usage=Usage(prompt_tokens=len(prompt), completion_tokens=len(ids)),
            model=getattr(self.model.config, "name_or_path", None) or None,
            token_ids=tuple(ids),
            logprobs=tuple(logprobs),
            extra={PROMPT_TOKEN_IDS_KEY: list(prompt)},  # a list, as a reloaded record has it
            policy_version=version,
        )

    async def _sample(
        self, prompt: list[int], done: int, keep: KeepTokens
    ) -> tuple[list[int], list[float], int]:
        """New tokens after ``prompt`` (``done`` of the answer's tokens already in it), their logprobs
        and the version that sampled them. Cancelled: stop the generation at its next token, hand
        what it sampled to ``keep``, then let the cancellation go on."""
        loop = asyncio.get_running_loop()
        pending = _Pending(prompt, self.settings.max_new_tokens - done, loop.create_future())
        self._queue.append(pending)
        if self._worker is None or self._worker.done():
            self._worker = asyncio.create_task(self._drain())
        try:
            return await asyncio.shield(pending.answer)
        except asyncio.CancelledError:
            if pending in self._queue:  # not started: nothing sampled
                self._queue.remove(pending)
                raise
            pending.stop = True
            with contextlib.suppress(Exception):  # a failed batch sampled nothing to keep
                ids, logprobs, version = await asyncio.shield(pending.answer)
                keep(TokenChunk(tuple(ids), tuple(logprobs), version))
            raise

    async def _drain(self) -> None:
        """Generate batches until the queue is empty; a failed batch fails only its requests."""
        while self._queue:
            if len(self._queue) < self.settings.batch_size:
                await asyncio.sleep(self.settings.gather_s)
            batch = self._queue[: self.settings.batch_size]
            del self._queue[: len(batch)]
            if not batch:  # all withdrawn while gathering
                continue
            version = self.version  # the weights this batch is generated with
            self._running = batch
            try:
                answers = await asyncio.to_thread(self._generate, batch)
            except Exception as e:  # handed to each waiting episode
                for p in batch:
                    if not p.answer.done():
                        p.answer.set_exception(LLMError(f"generation failed: {type(e).__name__}: {e}"))
                continue
            finally:
                self._running = []
            for p, (ids, logprobs) in zip(batch, answers, strict=True):
                if not p.answer.done():
                    p.answer.set_result((ids, logprobs, version))

    def _generate(self, batch: list[_Pending]) -> list[tuple[list[int], list[float]]]:
        """Sample one completion per request: (token ids up to and including EOS, or as far as it
        got when stopped, and their logprobs)."""
        prompts = [p.prompt for p in batch]
        pad = self.tokenizer.pad_token_id
        pad = pad if pad is not None else _eos_ids(self.model, self.tokenizer)[0]
        width = max(len(p) for p in prompts)
        input_ids = torch.tensor([[pad] * (width - len(p)) + p for p in prompts])
        mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts])
        greedy = self.settings.temperature == 0
        sampling: dict[str, Any] = (
            {"do_sample": False}
            if greedy
            else {"do_sample": True, "temperature": self.settings.temperature, "top_k": 0, "top_p": 1.0}
        )
        until = _Until(batch, width)
        with torch.inference_mode():
            out = self.model.generate(
                input_ids=input_ids, attention_mask=mask, max_new_tokens=max(p.budget for p in batch),
                pad_token_id=pad, return_dict_in_generate=True, output_logits=True,
                stopping_criteria=StoppingCriteriaList([until]), **sampling,
            )  # fmt: skip
        new = out.sequences[:, width:]
        logits = torch.stack(out.logits, dim=1).float()  # raw logits: [batch, new tokens, vocab]
        scale = self.settings.temperature if not greedy else 1.0
        chosen = torch.log_softmax(logits / scale, dim=-1).gather(-1, new.unsqueeze(-1)).squeeze(-1)
        eos = set(_eos_ids(self.model, self.tokenizer))
        answers = []
        for row, row_logprobs, cut in zip(new.tolist(), chosen.tolist(), until.ends, strict=True):
            row = row[: len(row) if cut is None else cut]
            end = next((i + 1 for i, t in enumerate(row) if t in eos), len(row))
            answers.append((row[:end], row_logprobs[:end]))
        return answers


class _Until(StoppingCriteria):
    """Ends each row at its own budget, or at the next token once its request is stopped; keeps
    where each row ended (None: it ran to the batch's end) and counts each request's tokens."""

    def __init__(self, batch: list[_Pending], width: int) -> None:
        self.batch, self.width = batch, width
        self.ends: list[int | None] = [None] * len(batch)

    def __call__(self, input_ids: torch.LongTensor, scores: Any, **kwargs: Any) -> torch.BoolTensor:
        made = input_ids.shape[1] - self.width
        for row, pending in enumerate(self.batch):
            if self.ends[row] is None:
                pending.made = made
                if pending.stop or made >= pending.budget:
                    self.ends[row] = made
        done = [end is not None for end in self.ends]
        return torch.tensor(done, dtype=torch.bool, device=input_ids.device)  # type: ignore[return-value]


def _eos_ids(model: Any, tokenizer: Any) -> list[int]:
    eos = model.generation_config.eos_token_id
    ids = eos if isinstance(eos, list) else [eos] if eos is not None else []
    return ids or [tokenizer.eos_token_id]
