"""PrivateLoop: sync callers drive coroutines on a private loop, even from inside a running loop."""

from __future__ import annotations

import asyncio
import threading

import pytest

from ares.wrappers.private_loop import PrivateLoop


async def answer(value: int) -> tuple[int, str]:
    await asyncio.sleep(0)
    return value, threading.current_thread().name


async def fail() -> None:
    raise ValueError("bad input")


def test_from_sync_code_it_runs_in_the_callers_thread_and_raises_errors() -> None:
    loop = PrivateLoop(name="ares-loop-test")
    try:
        assert loop.run(answer(42)) == (42, threading.current_thread().name)  # no thread hop
        with pytest.raises(ValueError, match="bad input"):
            loop.run(fail())
    finally:
        loop.close()


async def test_inside_a_running_loop_it_runs_on_a_worker_thread() -> None:
    loop = PrivateLoop(name="ares-loop-inner")
    try:
        # A blocking call from inside this test's loop (what a sync gym env does in Jupyter): no
        # "event loop is already running" error, because the private loop runs on its worker.
        value, thread = loop.run(answer(7))
        assert value == 7 and thread.startswith("ares-loop-inner")
    finally:
        loop.close()
    assert not [t for t in threading.enumerate() if t.name.startswith("ares-loop-inner")]


def test_state_carries_across_calls_from_both_kinds_of_caller() -> None:
    loop = PrivateLoop()
    queue: asyncio.Queue[int] | None = None

    async def make_queue() -> None:
        nonlocal queue
        queue = asyncio.Queue()  # bound to the private loop on first use

    async def put(value: int) -> None:
        assert queue is not None
        await queue.put(value)

    async def get() -> int:
        assert queue is not None
        return await queue.get()

    async def from_inside_a_loop() -> int:
        return loop.run(get())

    try:
        loop.run(make_queue())
        loop.run(put(1))
        loop.run(put(2))
        assert asyncio.run(from_inside_a_loop()) == 1  # the worker thread runs the same loop
        assert loop.run(get()) == 2
    finally:
        loop.close()


def test_close_cancels_pending_work_and_refuses_more() -> None:
    loop = PrivateLoop()
    cancelled = threading.Event()

    async def forever() -> None:
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    async def start_background() -> None:
        asyncio.get_running_loop().create_task(forever())
        await asyncio.sleep(0)

    loop.run(start_background())
    loop.close()
    loop.close()  # idempotent
    assert cancelled.is_set() and loop.closed
    coro = answer(1)
    with pytest.raises(RuntimeError, match="closed"):
        loop.run(coro)


def test_calling_run_from_its_own_coroutine_is_refused() -> None:
    loop = PrivateLoop()

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


def test_an_interrupted_call_cancels_its_coroutine_and_lets_it_clean_up() -> None:
    loop = PrivateLoop()
    cleaned = threading.Event()

    async def interrupted() -> None:
        try:
            asyncio.get_running_loop().call_soon(_raise_keyboard_interrupt)
            await asyncio.sleep(3600)
        finally:
            cleaned.set()

    try:
        with pytest.raises(KeyboardInterrupt):
            loop.run(interrupted())
        assert cleaned.is_set()
        assert loop.run(answer(3))[0] == 3  # still usable
    finally:
        loop.close()


def _raise_keyboard_interrupt() -> None:
    raise KeyboardInterrupt  # what Ctrl-C does to the thread running the loop
