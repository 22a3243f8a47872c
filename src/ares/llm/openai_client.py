"""An async client for any OpenAI-compatible Chat Completions endpoint (OpenAI, vLLM, SGLang, ...).

The client's configured model wins over ``LLMRequest.model``: the request comes from the code
agent, which names whatever model it was written for, while the model under evaluation is the
one this client was configured with. ``LLMRequest.model`` is used only when the client has none.
"""

from __future__ import annotations

import asyncio
import os
import random
from collections.abc import Mapping
from types import TracebackType
from typing import Any, Self

import httpx

from ares.errors import LLMError, LLMTimeoutError, MalformedResponseError
from ares.llm.openai_chat import request_to_openai, response_from_openai, strip_extensions
from ares.llm.types import LLMRequest, LLMResponse

DEFAULT_BASE_URL = "https://api.openai.com/v1"
#: Statuses worth retrying: request timeout, conflict, rate limit and server-side failures.
RETRY_STATUSES = frozenset({408, 409, 429})
_MAX_BACKOFF_S = 30.0
_MAX_RETRY_AFTER_S = 60.0
_EXCERPT_CHARS = 500
#: The variable the API key is read from unless another is named (``ares run --api-key-env``).
DEFAULT_API_KEY_ENV = "OPENAI_API_KEY"
_HINTS = {
    401: "check the API key (api_key=, OPENAI_API_KEY or the variable named by --api-key-env)",
    403: "check the API key's permissions for this model",
    404: "check the base URL (--base-url, base_url= or OPENAI_BASE_URL, usually ending in /v1) and the model",
}


class LLMHTTPError(LLMError):
    """The endpoint answered with an error status; ``status`` and ``body`` (an excerpt) say why."""

    def __init__(self, message: str, *, status: int, body: str) -> None:
        super().__init__(message)
        self.status = status
        self.body = body


def _excerpt(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= _EXCERPT_CHARS else flat[: _EXCERPT_CHARS - 3] + "..."


class OpenAIChatClient:
    """``await client(request)`` -> response, over HTTP, with a total deadline and retries per call.

    Each attempt is bounded by ``timeout_s`` end to end (connect, upload, generation, download).
    Connection errors, timeouts, 408/409/429 and 5xx are retried up to ``max_retries`` times with
    jittered exponential backoff (a ``Retry-After`` header wins); other statuses raise
    ``LLMHTTPError`` at once. One instance is safe to share between concurrent episodes.

    ``max_tokens`` and ``temperature``, when set, replace whatever the agent's request asked for
    (like ``model``, they are settings of the policy under evaluation, not of the agent).

    ``logprobs=True`` asks the endpoint for the sampled tokens' logprobs (``"logprobs": true``) and
    they land in ``LLMResponse.logprobs``. Off by default: not every endpoint accepts it (OpenAI's
    reasoning models refuse it); vLLM, SGLang and llama.cpp servers do, so turn it on for RL there.
    """

    def __init__(
        self,
        *,
        base_url: str = DEFAULT_BASE_URL,
        api_key: str | None = None,
        model: str | None = None,
        timeout_s: float = 600.0,
        max_retries: int = 3,
        backoff_s: float = 0.5,
        max_connections: int = 256,
        max_tokens: int | None = None,
        temperature: float | None = None,
        logprobs: bool = False,
    ) -> None:
        if not base_url.startswith(("http://", "https://")):
            raise LLMError(f"base_url must be an http(s) URL such as {DEFAULT_BASE_URL}, got {base_url!r}")
        if timeout_s <= 0 or max_retries < 0 or backoff_s < 0:
            raise LLMError("timeout_s must be > 0, max_retries and backoff_s must be >= 0")
        if max_tokens is not None and max_tokens < 1:
            raise LLMError(f"max_tokens must be >= 1, got {max_tokens}")
        if temperature is not None and temperature < 0:
            raise LLMError(f"temperature must be >= 0, got {temperature}")
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.logprobs = logprobs
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.url = f"{self.base_url}/chat/completions"
        self._api_key = api_key
        self._timeout_s = timeout_s
        self._max_retries = max_retries
        self._backoff_s = backoff_s
        self._max_connections = max_connections
        self._http: httpx.AsyncClient | None = None
        self._closed = False

    def __getstate__(self) -> dict[str, Any]:
        """Pickled without its connection pool: each process (e.g. a Ray actor) opens its own."""
        return {**self.__dict__, "_http": None}

    @classmethod
    def from_env(
        cls,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        model: str | None = None,
        api_key_env: str | None = None,
        env: Mapping[str, str] | None = None,
        **options: Any,
    ) -> Self:
        """A client from explicit options, else ``OPENAI_BASE_URL``/``OPENAI_API_KEY``/``OPENAI_MODEL``.

        ``api_key_env`` names the variable holding the key instead of ``OPENAI_API_KEY``; it must be
        set. A model is required here (the policy must be named); so is a key for the OpenAI API
        itself. ``options`` are the remaining constructor arguments (``timeout_s``, ``max_tokens``...).
        """
        env = os.environ if env is None else env
        base_url = base_url or env.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL
        if api_key is None and api_key_env is not None:
            api_key = env.get(api_key_env) or None
            if api_key is None:
                raise LLMError(
                    f"the API key variable {api_key_env} is not set (or empty): export {api_key_env}=... "
                    "or name another variable with --api-key-env (api_key_env= in Python)"
                )
        api_key = api_key or env.get(DEFAULT_API_KEY_ENV) or None
        model = model or env.get("OPENAI_MODEL") or None
        if model is None:
            raise LLMError(
                "no model configured for the openai policy: pass --model NAME (model= in Python) "
                "or set OPENAI_MODEL"
            )
        if api_key is None and base_url.rstrip("/") == DEFAULT_BASE_URL:
            raise LLMError(
                f"no API key for {DEFAULT_BASE_URL}: set {DEFAULT_API_KEY_ENV} (or name the variable with "
                "--api-key-env), or point --base-url/OPENAI_BASE_URL at an endpoint that needs no key"
            )
        return cls(base_url=base_url, api_key=api_key, model=model, **options)

    def __repr__(self) -> str:
        return f"OpenAIChatClient(base_url={self.base_url!r}, model={self.model!r})"

    def request_body(self, request: LLMRequest) -> dict[str, Any]:
        """The JSON body sent for ``request``: no ARES extension keys, no streaming, our model."""
        body = strip_extensions(request_to_openai(request))
        model = self.model or request.model
        if model is None:
            raise LLMError(
                "no model to ask for: configure the client with model= (or OPENAI_MODEL) "
                "or set LLMRequest.model"
            )
        body["model"] = model
        if self.max_tokens is not None:
            # Reasoning models take only max_completion_tokens; keep whichever the agent used.
            key = "max_completion_tokens" if "max_completion_tokens" in body else "max_tokens"
            body[key] = self.max_tokens
        if self.temperature is not None:
            body["temperature"] = self.temperature
        if self.logprobs:
            body["logprobs"] = True
        body.pop("stream", None)
        body.pop("stream_options", None)
        return body

    async def __call__(self, request: LLMRequest) -> LLMResponse:
        return response_from_openai(await self._post(self.request_body(request)))

    async def _post(self, body: dict[str, Any]) -> Any:
        http = self._client()
        attempts = self._max_retries + 1
        for attempt in range(1, attempts + 1):
            retry_after: str | None = None
            try:
                async with asyncio.timeout(self._timeout_s):
                    resp = await http.post(self.url, json=body)
            except (httpx.TransportError, TimeoutError) as e:
                if attempt == attempts:
                    raise self._transport_error(e, attempts) from e
            else:
                if resp.is_success:
                    return self._json(resp)
                if not (resp.status_code in RETRY_STATUSES or resp.status_code >= 500) or attempt == attempts:
                    raise self._status_error(resp, attempt)
                retry_after = resp.headers.get("retry-after")
            await asyncio.sleep(self._delay(attempt, retry_after))
        raise AssertionError("unreachable")  # pragma: no cover

    def _client(self) -> httpx.AsyncClient:
        if self._closed:
            raise LLMError(f"{self!r} is closed; create a new client")
        if self._http is None:
            headers = {"Accept": "application/json", "User-Agent": "ares"}
            if self._api_key:
                headers["Authorization"] = f"Bearer {self._api_key}"
            limits = httpx.Limits(
                max_connections=self._max_connections, max_keepalive_connections=self._max_connections
            )
            timeout = httpx.Timeout(self._timeout_s, connect=min(self._timeout_s, 30.0))
            self._http = httpx.AsyncClient(headers=headers, timeout=timeout, limits=limits)
        return self._http

    def _delay(self, attempt: int, retry_after: str | None) -> float:
        if retry_after is not None:
            try:
                return min(max(float(retry_after), 0.0), _MAX_RETRY_AFTER_S)
            except ValueError:
                pass  # an HTTP date: fall back to our own backoff
        return min(self._backoff_s * 2 ** (attempt - 1), _MAX_BACKOFF_S) * random.uniform(0.5, 1.0)

    def _transport_error(self, e: Exception, attempts: int) -> LLMError:
        if isinstance(e, TimeoutError | httpx.TimeoutException):
            return LLMTimeoutError(
                f"POST {self.url} timed out after {self._timeout_s:g}s ({attempts} attempt(s)); "
                "raise --timeout (timeout_s=) if the model is just slow"
            )
        return LLMError(f"could not reach {self.url} ({attempts} attempt(s)): {type(e).__name__}: {e}")

    def _status_error(self, resp: httpx.Response, attempts: int) -> LLMHTTPError:
        body = _excerpt(resp.text)
        hint = _HINTS.get(resp.status_code)
        message = f"POST {self.url} returned HTTP {resp.status_code} ({attempts} attempt(s)): {body}"
        return LLMHTTPError(f"{message}; {hint}" if hint else message, status=resp.status_code, body=body)

    def _json(self, resp: httpx.Response) -> Any:
        try:
            return resp.json()
        except ValueError:
            raise MalformedResponseError(
                f"POST {self.url} returned a body that is not JSON (HTTP {resp.status_code}): "
                f"{_excerpt(resp.text)}"
            ) from None

    async def aclose(self) -> None:
        """Close the connection pool; later calls raise ``LLMError``."""
        self._closed = True
        if self._http is not None:
            http, self._http = self._http, None
            await http.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()
