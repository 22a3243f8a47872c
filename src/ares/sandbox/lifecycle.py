"""The backends' common base class: ``async with`` start/stop, capability checks and tracing spans.

Apart from ``base.py`` (the seam's values and protocols) so that ``capabilities.py``, which describes
that seam, and the class that checks each backend's declaration against it do not import each other.
"""

from __future__ import annotations

import functools
import weakref
from collections.abc import Awaitable, Callable, Collection
from types import TracebackType
from typing import Any, ClassVar, Literal, Self

from ares import tracing
from ares.images.identity import ImageIdentity
from ares.sandbox.base import ExecResult
from ares.sandbox.capabilities import check_declaration
from ares.tracing import spans

#: Sandbox operations traced as spans ``sandbox.<op>``, and at which level: commands are many per
#: episode, so only a "full" trace has them.
TRACED_OPS: dict[str, Literal["basic", "full"]] = {
    "start": "basic", "stop": "basic", "exec": "full", "upload": "full", "download": "full",
    "archive": "full",
}  # fmt: skip


class StartStopContext:
    """``async with sandbox:`` for backends: start on entry, stop on exit (whatever happened).

    Also the one place sandboxes are traced: each backend's own ``start``/``stop``/``exec``/
    ``upload``/``download`` is wrapped in a span (``traced=`` in the class statement narrows that, for
    a sandbox that forwards to another which is traced already). The span version sits on the class
    only while tracing records that operation's level; otherwise the method is the one written."""

    #: What this backend can do beyond the protocol (a frozenset of ``Capability``): declared, and
    #: checked against the class's own methods when the class is made.
    capabilities: frozenset[Any] = frozenset()
    #: Which image this sandbox really runs, once started (None: not known yet, or not reported).
    image_identity: ImageIdentity | None = None
    #: The class's own traced methods: op -> (the method as written, the method in its span).
    _ares_traced_ops: ClassVar[
        dict[str, tuple[Callable[..., Awaitable[Any]], Callable[..., Awaitable[Any]]]]
    ] = {}

    def __init_subclass__(cls, traced: Collection[str] = tuple(TRACED_OPS), **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        check_declaration(cls)
        own = {op: (cls.__dict__[op], _traced(op, cls.__dict__[op])) for op in traced if op in cls.__dict__}
        cls._ares_traced_ops = own  # this class's own methods, each as is and in its span
        if own:
            _TRACED_CLASSES.add(cls)
            _install(cls, spans.current_rank())

    async def start(self) -> None:
        raise NotImplementedError

    async def stop(self) -> None:
        raise NotImplementedError

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()


#: Each op's rank: its span wrapper is on the class only from that tracing level up.
_OP_RANK = {op: spans.BASIC if level == "basic" else spans.FULL for op, level in TRACED_OPS.items()}
#: The backend classes with traced methods of their own.
_TRACED_CLASSES: weakref.WeakSet[type] = weakref.WeakSet()


def _install(cls: type, rank: int) -> None:
    """Put each of ``cls``'s own traced methods in place as is, or in its span when ``rank`` records
    it: an untraced command costs no wrapper call at all."""
    for op, (method, in_span) in cls.__dict__["_ares_traced_ops"].items():
        setattr(cls, op, in_span if rank >= _OP_RANK[op] else method)


def _install_all(rank: int) -> None:
    for cls in list(_TRACED_CLASSES):
        _install(cls, rank)


spans.on_level_change(_install_all)


def _traced(op: str, method: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
    """``method`` in a ``sandbox.<op>`` span (a no-op span if called after tracing went off, through a
    bound method kept from before)."""
    level, name = TRACED_OPS[op], f"sandbox.{op}"

    @functools.wraps(method)
    async def in_span(self: Any, *args: Any, **kwargs: Any) -> Any:
        with tracing.span(name, cat="sandbox", level=level, backend=type(self).__name__) as span:
            if op == "exec":
                span.set("cmd", str(args[0] if args else kwargs.get("cmd", ""))[:200])
            result = await method(self, *args, **kwargs)
            if isinstance(result, ExecResult):
                span.set("exit_code", result.exit_code)
                if result.timed_out:
                    span.set("timed_out", True)
            return result

    return in_span
