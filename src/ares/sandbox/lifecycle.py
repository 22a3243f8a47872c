"""The backends' common base class: ``async with`` start/stop, capability checks and tracing spans.

Apart from ``base.py`` (the seam's values and protocols) so that ``capabilities.py``, which describes
that seam, and the class that checks each backend's declaration against it do not import each other.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Collection
from types import TracebackType
from typing import Any, Literal, Self

from ares import tracing
from ares.images.identity import ImageIdentity
from ares.sandbox.base import ExecResult
from ares.sandbox.capabilities import check_declaration

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
    a sandbox that forwards to another which is traced already)."""

    #: What this backend can do beyond the protocol (a frozenset of ``Capability``): declared, and
    #: checked against the class's own methods when the class is made.
    capabilities: frozenset[Any] = frozenset()
    #: Which image this sandbox really runs, once started (None: not known yet, or not reported).
    image_identity: ImageIdentity | None = None

    def __init_subclass__(cls, traced: Collection[str] = tuple(TRACED_OPS), **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        check_declaration(cls)
        for op in traced:
            method = cls.__dict__.get(op)
            if method is not None:
                setattr(cls, op, _traced(op, method))

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


def _traced(op: str, method: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
    """``method`` in a ``sandbox.<op>`` span when tracing is on at the op's level, as is otherwise."""
    level, name = TRACED_OPS[op], f"sandbox.{op}"

    @functools.wraps(method)
    def traced(self: Any, *args: Any, **kwargs: Any) -> Awaitable[Any]:
        # Untraced, the method's own coroutine is returned: no second frame on every command.
        if not tracing.enabled(level):
            return method(self, *args, **kwargs)
        return in_span(self, *args, **kwargs)

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

    return traced
