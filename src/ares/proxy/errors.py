"""Errors of the interception proxy: ``ProxyError`` for its Python API, ``ApiError`` for its HTTP answers.

An ``ApiError`` is a value, not a wire body: each dialect renders it in its own error shape, so an
agent's SDK raises its usual exception type (``openai.BadRequestError``, ``anthropic.APIStatusError``...)
with our message in it.
"""

from __future__ import annotations

from ares.errors import AresError


class ProxyError(AresError):
    """The proxy was used wrongly (a bad or duplicate session id, a session on a stopped proxy...)."""


class ApiError(Exception):
    """An HTTP error answer: ``status``, a human ``message`` and a machine-readable ``code``."""

    def __init__(self, status: int, message: str, code: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.code = code

    def __str__(self) -> str:
        return f"{self.status} {self.code}: {self.message}"
