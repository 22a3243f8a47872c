"""An LLM client answering ``LLMRequest``s with a local GGUF model, token ids and logprobs included.

The prompt is the model's own chat template applied to the request, tokenized, and fed to the
model as token ids, so ``extra["ares_prompt_token_ids"]`` is exactly what the model saw. A request
that already carries ``prompt_token_ids`` (a trainer's token-in path) is fed as is, unrendered.

Sampling defaults to the model's plain distribution (temperature 1, no top-k/min-p truncation)
so the logprobs a trainer gets describe the policy it optimises; temperature 0 is greedy. The
logprobs are llama.cpp's log-softmax of the raw logits (before temperature and top-p).

Token ids come from llama.cpp's ``tokens`` (every generated id), not from its logprob entries:
those merge the tokens of one multi-byte character into a single entry, so from the first such
character on, each token's logprob is taken from one forced extra step (``rescore``: same
numbers, tested token by token; the whole vocabulary when needed, so none is ever missing).
"""

from __future__ import annotations

import asyncio
import importlib.util
import weakref
from collections.abc import Mapping
from typing import Any

from ares.errors import LLMError, MalformedResponseError
from ares.llm._wire import PROMPT_TOKEN_IDS_KEY
from ares.llm.client_common import check_settings
from ares.llm.local.default_model import default_model_path
from ares.llm.local.model import (
    DEFAULT_CONTEXT,
    INSTALL_HINT,
    LocalModel,
    ModelSettings,
    check_gguf,
    load_model,
)
from ares.llm.local.rescore import rescore
from ares.llm.openai_chat import request_to_openai
from ares.llm.types import LLMRequest, LLMResponse, Usage

#: Used when neither the client nor the request bounds the answer: a small model may never stop.
DEFAULT_MAX_TOKENS = 1024
_FINISH = {"eos": "stop", "word": "stop", "limit": "length"}


class LocalChatClient:
    """``await client(request)`` -> response from a GGUF model loaded lazily in this process.

    Picklable (e.g. into Ray actors): it holds settings only, and each process loads its own model.
    At most ``max_concurrency`` calls run at once (default: the server's parallel slots, one per
    core); more wait their turn. ``temperature`` and ``max_tokens`` replace what the request asks
    for; ``sampling`` adds llama.cpp sampling fields (e.g. ``{"top_k": 40}``) over everything.
    """

    def __init__(
        self,
        model_path: str | None = None,
        *,
        temperature: float | None = None,
        max_tokens: int | None = None,
        sampling: Mapping[str, Any] | None = None,
        context: int = DEFAULT_CONTEXT,
        parallel: int = 0,
        threads: int = 0,
        max_concurrency: int | None = None,
    ) -> None:
        check_settings(max_tokens, temperature)
        if max_concurrency is not None and max_concurrency < 1:
            raise LLMError(f"max_concurrency must be >= 1, got {max_concurrency}")
        if context < 16 or parallel < 0 or threads < 0:
            raise LLMError("context must be >= 16; parallel and threads must be >= 0 (0: automatic)")
        if importlib.util.find_spec("xllamacpp") is None:
            raise LLMError(f"the local policy needs xllamacpp: {INSTALL_HINT}")
        self.settings = ModelSettings(model_path or default_model_path(), context, parallel, threads)
        check_gguf(self.settings.path)  # here, not at the first call: a bad path is a config mistake
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.sampling = dict(sampling or {})
        self.max_concurrency = max_concurrency
        self._model: LocalModel | None = None
        self._limits: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore] = (
            weakref.WeakKeyDictionary()
        )

    def __getstate__(self) -> dict[str, Any]:
        return {
            k: getattr(self, k)
            for k in ("settings", "temperature", "max_tokens", "sampling", "max_concurrency")
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._model = None
        self._limits = weakref.WeakKeyDictionary()

    def __repr__(self) -> str:
        return f"LocalChatClient({self.settings.path!r})"

    async def model(self) -> LocalModel:
        """The loaded model (loading it in a worker thread the first time in this process)."""
        if self._model is None:
            self._model = await asyncio.to_thread(load_model, self.settings)
        return self._model

    def _limit(self, model: LocalModel) -> asyncio.Semaphore:
        loop = asyncio.get_running_loop()
        sem = self._limits.get(loop)
        if sem is None:
            sem = self._limits[loop] = asyncio.Semaphore(self.max_concurrency or model.parallel)
        return sem

    async def prompt_ids(self, request: LLMRequest) -> tuple[int, ...]:
        """The token ids the model is fed for ``request``: its own, else the rendered chat template."""
        if request.prompt_token_ids is not None:
            return request.prompt_token_ids
        model = await self.model()
        body = request_to_openai(request)
        text = await model.render(body["messages"], body.get("tools") or ())
        return tuple(await model.tokenize(text))

    def params(self, request: LLMRequest) -> dict[str, Any]:
        """llama.cpp sampling fields for ``request`` (client settings win over the request's)."""
        s = request.sampling
        temperature = next((t for t in (self.temperature, s.temperature) if t is not None), 1.0)
        max_tokens = next((m for m in (self.max_tokens, s.max_tokens) if m is not None), DEFAULT_MAX_TOKENS)
        params: dict[str, Any] = {
            "temperature": temperature,
            "top_p": 1.0 if s.top_p is None else s.top_p,
            "top_k": 0,
            "min_p": 0.0,
            "n_predict": max_tokens,
            "n_probs": 1,  # the sampled token's logprob comes with it
            "return_tokens": True,
            "cache_prompt": True,
        }
        if s.stop:
            params["stop"] = list(s.stop)
        if s.seed is not None:
            params["seed"] = s.seed
        return {**params, **self.sampling}

    async def __call__(self, request: LLMRequest) -> LLMResponse:
        model = await self.model()
        async with self._limit(model):
            prompt = await self.prompt_ids(request)
            if not prompt:
                raise LLMError("the prompt is empty: nothing to feed the local model")
            params = self.params(request)
            data = await model.complete(prompt, params)
            ids, known, merged = aligned_logprobs(data)
            if merged and data.get("stop_type") == "word":
                ids = await _without_stop_word(model, ids, str(data.get("content", "")))
            logprobs = [
                lp if lp is not None else await rescore(model, [*prompt, *ids[:i]], ids[i])
                for i, lp in enumerate(known[: len(ids)])
            ]
        return _response(data, prompt, model.name, ids, logprobs)


def _response(
    data: Mapping[str, Any], prompt: tuple[int, ...], model: str, ids: list[int], logprobs: list[float]
) -> LLMResponse:
    try:
        content = str(data["content"])
        stop_type = str(data["stop_type"])
    except (KeyError, TypeError, ValueError) as e:
        raise _malformed(e) from None
    return LLMResponse(
        content=content,
        finish_reason=_FINISH.get(stop_type, "stop"),
        usage=Usage(prompt_tokens=len(prompt), completion_tokens=len(ids)),
        model=model,
        token_ids=tuple(ids),
        logprobs=tuple(logprobs),
        # A list, as JSON has it: a record read back from disk equals the live response.
        extra={PROMPT_TOKEN_IDS_KEY: list(prompt), "ares_stop_type": stop_type},
    )


async def _without_stop_word(model: LocalModel, ids: list[int], content: str) -> list[int]:
    """The longest prefix of ``ids`` whose text ``content`` starts with: the stop word's few tokens
    cut, as llama.cpp cuts them from its entries (a token the stop word starts inside goes too)."""
    for end in range(len(ids), 0, -1):
        if content.startswith(await model.detokenize(ids[:end])):
            return ids[:end]
    return []


def _malformed(error: Exception) -> MalformedResponseError:
    return MalformedResponseError(f"unexpected llama.cpp completion response: missing or bad {error}")


def aligned_logprobs(data: Mapping[str, Any]) -> tuple[list[int], list[float | None], bool]:
    """(generated ids, logprobs, merged): each id's logprob, None where llama.cpp did not report it.

    ``tokens`` holds every generated id. ``completion_probabilities`` has one entry per *piece of
    text*: the tokens that together spell one multi-byte UTF-8 character (" ➞" is 3 tokens) share
    one entry, which carries the last token's id and logprob and all their bytes. Entries are
    matched to tokens one for one up to the first such merge (the entry's id then differs from the
    token's); every token from there on gets None, to be scored again by the caller, since which
    entry covers which tokens can no longer be told from ids (byte tokens repeat). ``merged`` says
    whether that happened. A stop word's tokens (after the last entry) are cut, as llama.cpp cuts
    them from ``content``; when merged, the caller cuts them by the content.
    """
    try:
        tokens = [int(t) for t in data["tokens"]]
        entries = [(int(e["id"]), float(e["logprob"])) for e in data["completion_probabilities"]]
        stop_type = str(data["stop_type"])
    except (KeyError, TypeError, ValueError) as e:
        raise _malformed(e) from None
    exact = 0
    while exact < min(len(tokens), len(entries)) and tokens[exact] == entries[exact][0]:
        exact += 1
    if exact == len(entries):  # one entry per token: whatever follows is a stop word's (or nothing)
        kept = exact if stop_type == "word" else len(tokens)
        logprobs: list[float | None] = [lp for _, lp in entries]
        return tokens[:kept], logprobs + [None] * (kept - exact), kept != exact
    return tokens, [lp for _, lp in entries[:exact]] + [None] * (len(tokens) - exact), True
