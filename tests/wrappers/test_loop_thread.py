"""LoopThread: sync callers drive coroutines on a private loop, even from inside a running loop."""

from __future__ import annotations

import asyncio
import threading

import pytest

from ares.wrappers.loop_thread import LoopThread


async def answer(value: int) -> tuple[int, str]:
    await asyncio.sleep(0)
    return value, threading.current_thread().name


async def fail() -> None:
    raise ValueError("bad input")


def test_runs_coroutines_on_its_own_thread_and_raises_their_errors() -> None:
    loop = LoopThread(name="ares-loop-test")
    try:
        assert loop.run(answer(42)) == (42, "ares-loop-test")
        with pytest.raises(ValueError, match="bad input"):
            loop.run(fail())
    finally:
        loop.close()


async def test_works_from_code_that_already_runs_an_event_loop() -> None:
    loop = LoopThread()
    try:
        # A blocking call from inside this test's loop (what a sync gym env does in Jupyter): no
        # "event loop is already running" error, because the coroutine runs on the other loop.
        value, _ = loop.run(answer(7))
        assert value == 7
    finally:
        loop.close()


def test_close_cancels_pending_work_joins_the_thread_and_refuses_more() -> None:
    loop = LoopThread(name="ares-loop-closing")
    cancelled = threading.Event()

    async def forever() -> None:
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    asyncio.run_coroutine_threadsafe(forever(), loop.loop)
    loop.run(answer(0))  # the sleeper is scheduled by now
    loop.close()
    loop.close()  # idempotent
    assert cancelled.is_set()
    assert loop.closed and not any(t.name == "ares-loop-closing" for t in threading.enumerate())
    coro = answer(1)
    with pytest.raises(RuntimeError, match="closed"):
        loop.run(coro)


def test_calling_run_from_the_loop_thread_itself_is_refused() -> None:
    loop = LoopThread()

    async def reentrant() -> str:
        try:
            loop.run(answer(1))
        except RuntimeError as exc:
            return str(exc)
        return "no error"

    try:
        assert "await the coroutine instead" in loop.run(reentrant())
    finally:
        loop.close()
