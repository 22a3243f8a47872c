"""What an LLM call cost, from a price table the user supplies.

ARES ships no price list on purpose: vendors change prices, add models and rename snapshots faster
than a release cycle, and a stale table silently reports wrong costs. Give the prices you pay.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

_PER = 1_000_000


@dataclass(frozen=True, slots=True)
class Price:
    """USD per million tokens. Cache rates left as None are billed at the ``input`` rate."""

    input: float
    output: float
    cache_read: float | None = None
    cache_write: float | None = None

    def __post_init__(self) -> None:
        rates = (self.input, self.output, self.cache_read or 0.0, self.cache_write or 0.0)
        if not all(math.isfinite(r) and r >= 0 for r in rates):
            raise ValueError(f"prices must be finite and >= 0 (USD per million tokens), got {self}")

    def cost(self, tokens: TokenCounts) -> float:
        """USD for ``tokens``."""
        cache_read = self.input if self.cache_read is None else self.cache_read
        cache_write = self.input if self.cache_write is None else self.cache_write
        return (
            tokens.input * self.input
            + tokens.output * self.output
            + tokens.cache_read * cache_read
            + tokens.cache_write * cache_write
        ) / _PER


@dataclass(frozen=True, slots=True)
class TokenCounts:
    """Tokens by how they are billed; ``input`` excludes the cached ones (each vendor counts its own way)."""

    input: int
    output: int
    cache_read: int = 0
    cache_write: int = 0


#: Prices by model name, or one price for whatever model answers.
Prices = Price | Mapping[str, Price]


def price_for(prices: Prices | None, *models: str | None) -> Price | None:
    """The price of the first of ``models`` the table names (served snapshot first, then the asked name)."""
    if prices is None or isinstance(prices, Price):
        return prices
    return next((prices[m] for m in models if m is not None and m in prices), None)
