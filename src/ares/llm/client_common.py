"""What the LLM clients of ARES share, the HTTP one (``openai_client``) and the vendor-SDK ones
(``sdk/``): settings from the environment, the policy's settings checked and laid over the agent's
request, error excerpts, and ``async with``.

Both kinds read the same options the same way and users see the same messages from either, so
these are written once here.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from types import TracebackType
from typing import Any, ClassVar, Self

from ares.errors import LLMError
from ares.llm.types import LLMRequest

_EXCERPT_CHARS = 500


def excerpt(text: str) -> str:
    """``text`` on one line, cut to a readable length for an error message."""
    flat = " ".join(text.split())
    return flat if len(flat) <= _EXCERPT_CHARS else flat[: _EXCERPT_CHARS - 3] + "..."


def check_settings(max_tokens: int | None, temperature: float | None) -> None:
    """Reject the policy's ``max_tokens`` / ``temperature`` when no endpoint would take them."""
    if max_tokens is not None and max_tokens < 1:
        raise LLMError(f"max_tokens must be >= 1, got {max_tokens}")
    if temperature is not None and temperature < 0:
        raise LLMError(f"temperature must be >= 0, got {temperature}")


def chat_max_tokens_key(body: Mapping[str, Any]) -> str:
    """Where Chat Completions takes ``max_tokens``: reasoning models take only
    ``max_completion_tokens``, so whichever the agent used is kept."""
    return "max_completion_tokens" if "max_completion_tokens" in body else "max_tokens"


def with_settings(
    body: dict[str, Any],
    request: LLMRequest,
    *,
    model: str | None,
    model_from: str,
    max_tokens: int | None,
    max_tokens_key: Callable[[Mapping[str, Any]], str],
    temperature: float | None,
    drop: Iterable[str],
) -> dict[str, Any]:
    """``body`` with the policy's settings over the agent's, and without the ``drop`` keys (streaming).

    The model is ours, else the request's (``model_from`` says where ours is configured);
    ``max_tokens`` goes under the key ``max_tokens_key`` picks for ``body``.
    """
    model = model or request.model
    if model is None:
        raise LLMError(
            f"no model to ask for: configure the client with model= ({model_from}) or set LLMRequest.model"
        )
    body["model"] = model
    if max_tokens is not None:
        body[max_tokens_key(body)] = max_tokens
    if temperature is not None:
        body["temperature"] = temperature
    for key in drop:
        body.pop(key, None)
    return body


class ConfiguredClient:
    """A client built from explicit options or the environment, closed by ``aclose`` or ``async with``.

    Each client class names its variables and the policy it serves; ``from_env`` reads them all
    alike: an explicit option wins, then the variable ``api_key_env`` names, then the vendor's own.
    """

    policy: ClassVar[str]  # the policy name that uses this client
    default_base_url: ClassVar[str]
    key_env: ClassVar[str]
    base_url_env: ClassVar[str]
    model_env: ClassVar[str]

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
        """A client from explicit options, else the vendor's variables (``OPENAI_API_KEY``, ...).

        ``api_key_env`` names the variable holding the key instead of the vendor's default; it must
        be set. A model is required (the policy must be named); so is a key for the vendor's own
        endpoint. ``options`` are the remaining constructor arguments (``timeout_s``, ``max_tokens``...).
        """
        env = os.environ if env is None else env
        if api_key is None and api_key_env is not None:
            api_key = env.get(api_key_env) or None
            if api_key is None:
                raise LLMError(
                    f"the API key variable {api_key_env} is not set (or empty): export {api_key_env}=... "
                    "or name another variable with --api-key-env (api_key_env= in Python)"
                )
        model = model or env.get(cls.model_env) or None
        if model is None:
            raise LLMError(
                f"no model configured for the {cls.policy} policy: pass --model NAME (model= in Python) "
                f"or set {cls.model_env}"
            )
        base_url = base_url or env.get(cls.base_url_env) or cls.default_base_url
        api_key = api_key or env.get(cls.key_env) or None
        if api_key is None and base_url.rstrip("/") == cls.default_base_url:
            raise LLMError(
                f"no API key for {cls.default_base_url}: set {cls.key_env} (or name the variable with "
                f"--api-key-env), or point --base-url/{cls.base_url_env} at an endpoint that needs no key"
            )
        return cls(base_url=cls._base_url_from_env(base_url), api_key=api_key, model=model, **options)

    @staticmethod
    def _base_url_from_env(url: str) -> str:
        """The base URL ``from_env`` found, as it hands it to the constructor (which checks it)."""
        return url

    async def aclose(self) -> None:
        """Close the client's connections; later calls raise ``LLMError`` (each client does its own)."""
        raise NotImplementedError

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()
