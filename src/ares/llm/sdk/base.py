"""What every client on a vendor's official SDK shares: settings, the lazily built SDK client,
pickling, error translation and cost.

The body sent is the one ARES's own converter renders (``request_to_*``, ARES extension keys
stripped), handed to the SDK's typed ``create`` with the keys it does not model in ``extra_body``;
the answer is parsed from the raw JSON the server returned (``with_raw_response``), never from the
SDK's pydantic models, so nothing they drop is lost. Transport, auth headers, timeouts and retries
(exponential backoff with jitter, ``Retry-After`` honoured, on connection errors, timeouts,
408/409/429 and 5xx) are the SDK's own.
"""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import replace
from typing import Any, ClassVar

from ares.errors import LLMError, LLMTimeoutError, MalformedResponseError
from ares.llm.client_common import ConfiguredClient, check_settings, with_settings
from ares.llm.client_common import excerpt as excerpt  # re-exported: the SDK clients' error text
from ares.llm.openai_client import LLMHTTPError
from ares.llm.sdk.pricing import Prices, TokenCounts, price_for
from ares.llm.types import LLMRequest, LLMResponse, Usage

#: Sent as the key to a custom endpoint that needs none: the SDKs refuse to run without one.
NO_KEY = "no-key"


def missing_sdk(package: str) -> LLMError:
    """The error for an SDK that is not installed, naming the extra that brings it."""
    return LLMError(
        f"the {package!r} package is not installed; the {package} API clients need it: "
        f"pip install 'ares[{package}]'"
    )


class SDKClient(ConfiguredClient, ABC):
    """``await client(request)`` -> response through a vendor SDK; one instance serves many episodes.

    ``model``, ``max_tokens`` and ``temperature``, when set, replace what the agent's request asked
    for: they are settings of the policy under evaluation, not of the agent. ``timeout_s`` bounds
    each attempt (the SDK's timeout: connect, and each wait for the server's next bytes);
    ``max_retries`` is how many times the SDK retries a failed attempt. ``prices`` turns the wire's
    token usage into ``LLMResponse.cost`` (USD); there is no built-in price list, which would go stale.

    Pickled without its SDK client (each process, e.g. a Ray actor, builds its own on first use).
    """

    #: Filled in by each vendor's subclass, with the variables ``from_env`` reads.
    vendor: ClassVar[str]  # the API's name in messages
    max_tokens_key: ClassVar[str] = "max_tokens"
    stream_keys: ClassVar[tuple[str, ...]] = ("stream",)

    def __init__(
        self,
        *,
        model: str | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout_s: float = 600.0,
        max_retries: int = 3,
        max_tokens: int | None = None,
        temperature: float | None = None,
        prices: Prices | None = None,
    ) -> None:
        self._sdk_module()  # a missing SDK fails here, naming the extra to install
        base_url = (base_url or self.default_base_url).rstrip("/")
        if not base_url.startswith(("http://", "https://")):
            raise LLMError(
                f"base_url must be an http(s) URL such as {self.default_base_url}, got {base_url!r}"
            )
        if api_key is None and base_url == self.default_base_url:
            raise LLMError(
                f"no API key for {base_url}: pass api_key=, or build the client with from_env() "
                f"(reads {self.key_env} or the variable named by --api-key-env)"
            )
        if timeout_s <= 0 or max_retries < 0:
            raise LLMError(f"timeout_s must be > 0 and max_retries >= 0, got {timeout_s} and {max_retries}")
        check_settings(max_tokens, temperature)
        self.model = model
        self.base_url = base_url
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.prices = prices
        self._api_key = api_key
        self._sdk: Any = None
        self._building: asyncio.Future[Any] | None = None
        self._closed = False

    @staticmethod
    def _base_url_from_env(url: str) -> str:
        return url.rstrip("/")  # so a URL of slashes alone falls back to the default, as in __init__

    def __getstate__(self) -> dict[str, Any]:
        """Pickled without the live SDK client; it is rebuilt on first use in the new process."""
        return {**self.__dict__, "_sdk": None, "_building": None}

    def __repr__(self) -> str:
        return f"{type(self).__name__}(base_url={self.base_url!r}, model={self.model!r})"

    # --- the vendor's part ----------------------------------------------------------------------

    @staticmethod
    @abstractmethod
    def _sdk_module() -> Any:
        """The SDK package; raises ``missing_sdk(...)`` when it is not installed."""

    @abstractmethod
    def _new_sdk(self, api_key: str) -> Any:
        """A new async SDK client with our base URL, timeout and retries."""

    @abstractmethod
    def _render(self, request: LLMRequest) -> dict[str, Any]:
        """The request in the vendor's wire format (ARES's converter), ARES extension keys stripped."""

    @abstractmethod
    async def _create(self, sdk: Any, body: dict[str, Any]) -> Any:
        """Send ``body`` through the SDK's endpoint method; return the raw HTTP response."""

    @abstractmethod
    def _parse(self, wire: Any) -> LLMResponse:
        """The response from the server's raw JSON (ARES's converter)."""

    @abstractmethod
    def _token_counts(self, usage: Usage) -> TokenCounts:
        """``usage`` split by how the vendor bills it."""

    # --- the shared part ------------------------------------------------------------------------

    def request_body(self, request: LLMRequest) -> dict[str, Any]:
        """The JSON body sent for ``request``: no ARES extension keys, no streaming, our settings."""
        return with_settings(
            self._render(request),
            request,
            model=self.model,
            model_from=f"--model or {self.model_env}",
            max_tokens=self.max_tokens,
            max_tokens_key=self._max_tokens_key,
            temperature=self.temperature,
            drop=self.stream_keys,
        )

    def _max_tokens_key(self, body: Mapping[str, Any]) -> str:
        return self.max_tokens_key

    async def __call__(self, request: LLMRequest) -> LLMResponse:
        body = self.request_body(request)
        sdk = await self._client()
        module = self._sdk_module()
        try:
            http = await self._create(sdk, body)
        except module.APIStatusError as e:
            raise self._status_error(e) from e
        except module.APITimeoutError as e:
            raise LLMTimeoutError(
                f"{self.vendor} API call to {e.request.url} timed out after {self.timeout_s:g}s"
                f"{_attempts(e.request)}; raise --timeout (timeout_s=) if the model is just slow"
            ) from e
        except module.APIConnectionError as e:
            cause = e.__cause__ or e
            raise LLMError(
                f"could not reach the {self.vendor} API at {e.request.url}{_attempts(e.request)}: "
                f"{type(cause).__name__}: {cause}"
            ) from e
        try:
            wire = http.json()
        except ValueError:
            raise MalformedResponseError(
                f"{self.vendor} API at {http.request.url} returned a body that is not JSON "
                f"(HTTP {http.status_code}): {excerpt(http.text)}"
            ) from None
        return self._priced(self._parse(wire), body["model"])

    async def _client(self) -> Any:
        """The SDK client, built on first use; concurrent first calls share one build."""
        if self._sdk is None and not self._closed:
            if self._building is None:
                # Building it loads TLS certificates from disk: off the event loop.
                build = asyncio.to_thread(self._new_sdk, self._api_key or NO_KEY)
                self._building = asyncio.ensure_future(build)
            building = self._building
            try:
                sdk = await asyncio.shield(building)  # a cancelled caller leaves the build to the others
            finally:
                if self._building is building and building.done():
                    self._building = None
            if self._sdk is None and not self._closed:
                self._sdk = sdk
            elif sdk is not self._sdk:
                await sdk.close()  # closed while it was being built
        if self._closed:
            raise LLMError(f"{self!r} is closed; create a new client")
        return self._sdk

    def _status_error(self, e: Any) -> LLMHTTPError:
        status: int = e.status_code
        body = excerpt(e.response.text)
        attempts = _attempts(e.response.request)
        message = f"{self.vendor} API at {e.request.url} returned HTTP {status}{attempts}: {body}"
        hint = {
            401: f"check the API key (api_key=, {self.key_env} or the variable named by --api-key-env)",
            403: "check the API key's permissions for this model",
            404: f"check the base URL (--base-url, base_url= or {self.base_url_env}) and the model name",
        }.get(status)
        return LLMHTTPError(f"{message}; {hint}" if hint else message, status=status, body=body)

    def _priced(self, resp: LLMResponse, model: str) -> LLMResponse:
        price = price_for(self.prices, resp.model, model)
        if price is None or resp.usage is None:
            return resp
        return replace(resp, cost=price.cost(self._token_counts(resp.usage)))

    async def aclose(self) -> None:
        """Close the SDK's connection pool; later calls raise ``LLMError``."""
        self._closed = True
        if self._sdk is not None:
            sdk, self._sdk = self._sdk, None
            await sdk.close()


def _attempts(request: Any) -> str:
    """The attempts made, as `` (N attempt(s))``, from the retry counter the SDKs send on each request."""
    try:
        return f" ({int(request.headers['x-stainless-retry-count']) + 1} attempt(s))"
    except (KeyError, ValueError):
        return ""


def cached_tokens(usage: Usage, details_key: str) -> int:
    """``usage.extra[details_key]["cached_tokens"]`` (OpenAI's count of prompt tokens read from cache)."""
    details = usage.extra.get(details_key)
    cached = details.get("cached_tokens") if isinstance(details, Mapping) else None
    return cached if isinstance(cached, int) and not isinstance(cached, bool) else 0
