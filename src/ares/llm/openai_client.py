"""An async client for any OpenAI-compatible Chat Completions endpoint (OpenAI, vLLM, SGLang, ...).

The client's configured model wins over ``LLMRequest.model``: the request comes from the code
agent, which names whatever model it was written for, while the model under evaluation is the
one this client was configured with. ``LLMRequest.model`` is used only when the client has none.
"""

from __future__ import annotations

import asyncio
import random
from typing import Any, ClassVar

import httpx

from ares.errors import LLMError, LLMTimeoutError, MalformedResponseError
from ares.llm.client_common import (
    ConfiguredClient,
    chat_max_tokens_key,
    check_settings,
    excerpt,
    with_settings,
)
from ares.llm.openai_chat import request_to_openai, response_from_openai, strip_extensions
from ares.llm.types import LLMRequest, LLMResponse

DEFAULT_BASE_URL = "https://api.openai.com/v1"
#: Statuses worth retrying: request timeout, conflict, rate limit and server-side failures.
RETRY_STATUSES = frozenset({408, 409, 429})
_MAX_BACKOFF_S = 30.0
_MAX_RETRY_AFTER_S = 60.0
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


class OpenAIChatClient(ConfiguredClient):
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

    ``from_env`` reads ``OPENAI_BASE_URL``, ``OPENAI_API_KEY`` and ``OPENAI_MODEL``.
    """

    policy: ClassVar[str] = "openai"
    default_base_url: ClassVar[str] = DEFAULT_BASE_URL
    key_env: ClassVar[str] = DEFAULT_API_KEY_ENV
    base_url_env: ClassVar[str] = "OPENAI_BASE_URL"
    model_env: ClassVar[str] = "OPENAI_MODEL"

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
        check_settings(max_tokens, temperature)
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

    def __repr__(self) -> str:
        return f"OpenAIChatClient(base_url={self.base_url!r}, model={self.model!r})"

    def request_body(self, request: LLMRequest) -> dict[str, Any]:
        """The JSON body sent for ``request``: no ARES extension keys, no streaming, our model."""
        body = with_settings(
            strip_extensions(request_to_openai(request)),
            request,
            model=self.model,
            model_from=f"or {self.model_env}",
            max_tokens=self.max_tokens,
            max_tokens_key=chat_max_tokens_key,
            temperature=self.temperature,
            drop=("stream", "stream_options"),
        )
        if self.logprobs:
            body["logprobs"] = True
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
        body = excerpt(resp.text)
        hint = _HINTS.get(resp.status_code)
        message = f"POST {self.url} returned HTTP {resp.status_code} ({attempts} attempt(s)): {body}"
        return LLMHTTPError(f"{message}; {hint}" if hint else message, status=resp.status_code, body=body)

    def _json(self, resp: httpx.Response) -> Any:
        try:
            return resp.json()
        except ValueError:
            raise MalformedResponseError(
                f"POST {self.url} returned a body that is not JSON (HTTP {resp.status_code}): "
                f"{excerpt(resp.text)}"
            ) from None

    async def aclose(self) -> None:
        """Close the connection pool; later calls raise ``LLMError``."""
        self._closed = True
        if self._http is not None:
            http, self._http = self._http, None
            await http.aclose()
