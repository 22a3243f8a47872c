"""A GGUF model served in-process by llama.cpp (xllamacpp), loaded once per process.

llama.cpp's server runs inside this process and listens on a loopback port; we speak to it over
that port (``/apply-template``, ``/tokenize``, ``/detokenize``, ``/completion``) because only the
HTTP API exposes template rendering, tokenization and the native completion response, which carries
the generated token ids, each token's logprob and why generation stopped. Every call is async I/O,
so nothing blocks the event loop; only loading the weights blocks, and callers run that in a thread.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from ares.errors import LLMError
from ares.llm.local.threads import pick_threads

#: Installing this extra brings xllamacpp (the default model's file: see ares.llm.local.default_model).
INSTALL_HINT = "pip install 'ares[local]'"
DEFAULT_CONTEXT = 8192
_GGUF_MAGIC = b"GGUF"
_TIMEOUT = httpx.Timeout(None, connect=10.0)  # generation is bounded by n_predict and the context


class ContextOverflowError(LLMError):
    """The prompt alone does not fit in the model's context window."""


@dataclass(frozen=True, slots=True)
class ModelSettings:
    """How a model is served: the key of the per-process model cache."""

    path: str
    context: int = DEFAULT_CONTEXT
    parallel: int = 0  # 0: one slot per CPU core
    threads: int = 0  # 0: $ARES_LOCAL_THREADS, else the idle CPUs when the model loads (threads.py)

    def resolved(self) -> ModelSettings:
        """The path made absolute and the slots counted; ``threads`` 0 stays 0, picked at load."""
        cores = os.cpu_count() or 1
        return ModelSettings(
            str(Path(self.path).expanduser().resolve()), self.context, self.parallel or cores, self.threads
        )


def check_gguf(path: str) -> None:
    """Fail early and clearly on a missing file or one that is not GGUF (llama.cpp only logs)."""
    p = Path(path)
    if not p.is_file():
        raise LLMError(f"GGUF model file not found: {path}; pass an existing file as local:/path/model.gguf")
    with p.open("rb") as f:
        if f.read(4) != _GGUF_MAGIC:
            raise LLMError(
                f"{path} is not a GGUF file (no GGUF magic bytes); convert it with llama.cpp first"
            )


class LocalModel:
    """One loaded GGUF model and the loopback llama.cpp server answering for it."""

    def __init__(self, settings: ModelSettings) -> None:
        try:
            import xllamacpp
        except ImportError:
            raise LLMError(f"the local policy needs xllamacpp: {INSTALL_HINT}") from None
        self.settings = settings.resolved()
        check_gguf(self.settings.path)
        params = xllamacpp.CommonParams()
        params.model.path = self.settings.path
        params.n_ctx = self.settings.context
        params.n_parallel = self.settings.parallel
        self.threads = pick_threads(self.settings.threads)
        params.cpuparams.n_threads = self.threads
        params.cpuparams_batch.n_threads = self.threads
        params.hostnames = ["127.0.0.1"]
        params.port = 0  # any free port
        params.verbosity = 0
        try:
            self._server = xllamacpp.Server(params)
        except Exception as e:
            raise LLMError(f"llama.cpp could not load {self.settings.path}: {type(e).__name__}: {e}") from e
        self.base_url: str = self._server.listening_address
        self.name = Path(self.settings.path).name.removesuffix(".gguf")
        self._vocab_size: int | None = None

    @property
    def parallel(self) -> int:
        """Sequences the server decodes at once (its slots): the useful concurrency."""
        return self.settings.parallel

    def __repr__(self) -> str:
        return f"LocalModel({self.settings.path!r}, base_url={self.base_url!r})"

    async def render(
        self, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]] = ()
    ) -> str:
        """The prompt text the model's own (GGUF-embedded) chat template makes of a conversation."""
        body: dict[str, Any] = {"messages": list(messages)}
        if tools:
            body["tools"] = list(tools)
        return str((await self._post("/apply-template", body))["prompt"])

    async def tokenize(self, text: str, *, add_special: bool = True) -> list[int]:
        """Token ids of ``text``, special tokens parsed; ``add_special``: BOS added as the model wants
        (a prompt's start; False for a continuation)."""
        body = {"content": text, "add_special": add_special, "parse_special": True}
        data = await self._post("/tokenize", body)
        return [int(t) for t in data["tokens"]]

    async def detokenize(self, ids: Sequence[int]) -> str:
        return str((await self._post("/detokenize", {"tokens": list(ids)}))["content"])

    async def vocab_size(self) -> int:
        """How many tokens the model's vocabulary holds (llama.cpp's ``/v1/models``), asked once."""
        if self._vocab_size is None:
            data = await self._request("GET", "/v1/models")
            try:
                self._vocab_size = int(data["data"][0]["meta"]["n_vocab"])
            except (KeyError, IndexError, TypeError, ValueError) as e:
                raise LLMError(f"llama.cpp's /v1/models did not give the vocabulary size: bad {e}") from None
        return self._vocab_size

    async def complete(self, prompt_ids: Sequence[int], params: Mapping[str, Any]) -> Mapping[str, Any]:
        """llama.cpp's native completion of exactly ``prompt_ids`` with sampling ``params``."""
        return await self._post("/completion", {**params, "prompt": list(prompt_ids), "stream": False})

    async def _post(self, route: str, body: Mapping[str, Any]) -> Mapping[str, Any]:
        return await self._request("POST", route, body)

    async def _request(self, method: str, route: str, body: Mapping[str, Any] | None = None) -> Any:
        async with httpx.AsyncClient(base_url=self.base_url, timeout=_TIMEOUT) as http:
            try:
                resp = await http.request(method, route, json=body)
            except httpx.TransportError as e:
                raise LLMError(f"the local llama.cpp server at {self.base_url} failed: {e!r}") from e
        if resp.is_success:
            return resp.json()
        error = _error(resp)
        if error.get("type") == "exceed_context_size_error":
            raise ContextOverflowError(
                f"the prompt ({error.get('n_prompt_tokens')} tokens) does not fit the local model's context "
                f"({error.get('n_ctx')} tokens); shorten the conversation or load the model with a larger "
                "context (context=)"
            )
        raise LLMError(
            f"local llama.cpp {route} failed (HTTP {resp.status_code}): {error.get('message', '')}"
        )


def _error(resp: httpx.Response) -> Mapping[str, Any]:
    try:
        error = resp.json().get("error")
    except ValueError:
        return {"message": resp.text[:500]}
    return error if isinstance(error, dict) else {"message": str(error)}


_models: dict[ModelSettings, LocalModel] = {}
_lock = threading.Lock()


def load_model(settings: ModelSettings) -> LocalModel:
    """The process's model for ``settings``, loaded on first use (blocking; call it from a thread)."""
    key = settings.resolved()
    with _lock:
        model = _models.get(key)
        if model is None:
            model = _models[key] = LocalModel(key)
        return model
