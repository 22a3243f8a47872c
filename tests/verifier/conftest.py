"""Docker-backend fixtures (``engine_url``, ``factory``) for this folder's tests, from tests/engine_kit.py."""

from engine_kit import engine_url, factory

__all__ = ["engine_url", "factory"]
