"""Signals to init: a command signals pid 1 (or every process it can) to take the sandbox down.

Each case gets a fresh sandbox (several run at once): the kill, then `echo alive` in the same sandbox.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

Scenario = Callable[..., dict[str, Any]]

KILLS = {
    "INT": "kill -INT 1",
    "TERM": "kill -TERM 1",
    "HUP": "kill -HUP 1",
    "QUIT": "kill -QUIT 1",
    "USR1": "kill -USR1 1",
    "USR2": "kill -USR2 1",
    "ALRM": "kill -ALRM 1",
    "SEGV": "kill -SEGV 1",
    "ABRT": "kill -ABRT 1",
    "PIPE": "kill -PIPE 1",
    "KILL": "kill -9 1",
    "STOP": "kill -STOP 1",
    "STOP_CONT": "kill -STOP 1; kill -CONT 1",
    "all_processes": "kill -9 -1",
    "own_shepherd": "kill -9 $PPID",
    "every_pid": "for p in /proc/[0-9]*; do [ ${p#/proc/} != $$ ] && kill -9 ${p#/proc/}; done; true",
}

SCENARIO = """
async def one(cmd, slots):
    async with slots, LocalSandbox(SandboxSpec()) as sb:
        kill = await run(sb, cmd, timeout_s=10, guard_s=20)
        await asyncio.sleep(0.2)
        alive = await run(sb, "echo alive", timeout_s=10, guard_s=20)
        return {"kill": kill, "alive": alive, "running": sb.running}


async def scenario(args):
    slots = asyncio.Semaphore(8)
    names = list(args["kills"])
    cases = await asyncio.gather(*(one(args["kills"][name], slots) for name in names))
    return dict(zip(names, cases))
"""


@pytest.fixture(scope="module")
def result(scenario: Scenario) -> dict[str, Any]:
    return scenario(SCENARIO, {"kills": KILLS})


@pytest.mark.parametrize("name", list(KILLS))
def test_signal_does_not_take_the_sandbox_down(result: dict[str, Any], name: str) -> None:
    """Attack: signal pid 1 from inside (INT, TERM, HUP, QUIT, USR1/2, ALRM, SEGV, ABRT, PIPE, KILL,
    STOP, STOP then CONT), or kill every process the command may signal (`kill -9 -1`, its own
    shepherd `$PPID`, every pid in /proc). Expected: the exec that sent the signal returns an
    ExecResult (no exception; e.g. exit code 137 when it killed itself), and the next exec in the same
    sandbox prints "alive" with exit code 0."""
    case = result[name]
    assert "raised" not in case["kill"], f"{KILLS[name]!r} raised: {case['kill']['raised']}"
    alive = case["alive"]
    assert "raised" not in alive, f"after {KILLS[name]!r}: {alive['raised']}"
    assert alive["exit_code"] == 0 and alive["stdout"].strip() == "alive", alive
    assert case["running"] is True
