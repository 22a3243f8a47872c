"""Every mutation operator, in the stable order candidates are listed in."""

from __future__ import annotations

from collections.abc import Iterable

from .arguments import SwapArguments
from .arithmetic import SwapArithmetic
from .boolean import FlipBoolean
from .comparison import FlipComparison
from .conditions import DropCondition, InvertCondition, SwapIfElse
from .constants import ChangeConstant
from .handlers import RemoveHandler
from .off_by_one import OffByOne
from .operator import Operator
from .statements import RemoveReturn, RemoveStatement, Shuffle

OPERATORS: tuple[Operator, ...] = (
    FlipComparison(),
    FlipBoolean(),
    SwapArithmetic(),
    OffByOne(),
    ChangeConstant(),
    InvertCondition(),
    DropCondition(),
    RemoveStatement(),
    RemoveReturn(),
    RemoveHandler(),
    SwapArguments(),
    SwapIfElse(),
    Shuffle(),
)
STRATEGIES: tuple[str, ...] = tuple(op.strategy for op in OPERATORS)


def select(strategies: Iterable[str] | None) -> tuple[Operator, ...]:
    """The operators named (registry order kept), all when None; an unknown name is a ValueError."""
    if strategies is None:
        return OPERATORS
    wanted = set(strategies)
    unknown = sorted(wanted - set(STRATEGIES))
    if unknown:
        raise ValueError(f"unknown mutation strategy {', '.join(unknown)} (known: {', '.join(STRATEGIES)})")
    return tuple(op for op in OPERATORS if op.strategy in wanted)
