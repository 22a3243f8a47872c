"""The verifier: runs a task's tests after the agent is done and turns their output into a reward.

Trust model: the agent must not be able to forge its reward. Where the sandbox supports it
(``fork_frozen``), the agent's processes are killed and the tests run in a fresh sandbox made of the
same image plus the agent's filesystem diff. In every case /logs and /tests are emptied before the
tests are uploaded, so files the agent planted there do not count.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from ares.errors import VerifierError
from ares.sandbox.base import ExecResult, Sandbox
from ares.tasks.model import Task

LOGS_DIR = "/logs/verifier"
TESTS_DIR = "/tests"


@runtime_checkable
class FreezableSandbox(Protocol):
    async def fork_frozen(self) -> Sandbox: ...


@dataclass(frozen=True, slots=True)
class Verdict:
    """The verifier's outcome: the scalar reward, its named terms, and the test run's output."""

    reward: float
    terms: Mapping[str, float] = field(default_factory=dict)
    output: ExecResult | None = None


def parse_reward_json(text: str) -> tuple[float, dict[str, float]]:
    """reward.json is an object of named numbers; ``reward`` is the scalar, else the terms' sum."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise VerifierError(f"{LOGS_DIR}/reward.json is not valid JSON: {exc}") from exc
    if not isinstance(data, dict) or not data:
        raise VerifierError(f"{LOGS_DIR}/reward.json must be a non-empty JSON object of named numbers")
    terms: dict[str, float] = {}
    for name, value in data.items():
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise VerifierError(f"reward.json term {name!r} is {value!r}, not a number")
        terms[name] = _finite(float(value), f"reward.json term {name!r}")
    return terms.get("reward", math.fsum(terms.values())), terms


def parse_reward_txt(text: str) -> float:
    try:
        value = float(text.strip())
    except ValueError as exc:
        raise VerifierError(f"{LOGS_DIR}/reward.txt must hold one number, got {text.strip()[:80]!r}") from exc
    return _finite(value, "reward.txt")


def _finite(value: float, what: str) -> float:
    if not math.isfinite(value):
        raise VerifierError(f"{what} is {value}, not a finite number")
    return value


async def verify(task: Task, sandbox: Sandbox) -> Verdict:
    """Run ``task.tests`` against what the agent left in ``sandbox`` and read the reward.

    Raises VerifierError when no usable reward was produced (never a silent 0).
    """
    if isinstance(sandbox, FreezableSandbox):
        fresh = await sandbox.fork_frozen()
        await fresh.start()
        try:
            return await _run_tests(task, fresh)
        finally:
            await fresh.stop()
    return await _run_tests(task, sandbox)


async def _run_tests(task: Task, sandbox: Sandbox) -> Verdict:
    reset = await sandbox.exec(
        f"rm -rf /logs {TESTS_DIR} && mkdir -p {LOGS_DIR} {TESTS_DIR}", cwd="/", timeout_s=60
    )
    if not reset.ok:
        raise VerifierError(f"could not prepare the verifier dirs: {reset.stderr.strip()[:500]}")
    await sandbox.upload(task.tests, TESTS_DIR)
    output = await sandbox.exec(
        f"bash {TESTS_DIR}/test.sh",
        cwd=task.workdir,
        env={**task.env, **task.verifier_env},
        timeout_s=task.verifier_timeout_s,
    )
    reward_json = await _read_optional(sandbox, f"{LOGS_DIR}/reward.json")
    if reward_json is not None:
        reward, terms = parse_reward_json(reward_json)
        return Verdict(reward, terms, output)
    reward_txt = await _read_optional(sandbox, f"{LOGS_DIR}/reward.txt")
    if reward_txt is not None:
        return Verdict(parse_reward_txt(reward_txt), {}, output)
    why = (
        f"timed out after {task.verifier_timeout_s:g}s"
        if output.timed_out
        else f"exit code {output.exit_code}"
    )
    tail = (output.stdout + output.stderr).strip()[-800:]
    raise VerifierError(
        f"tests/test.sh ({why}) wrote neither reward.json nor reward.txt. Output tail:\n{tail}"
    )


async def _read_optional(sandbox: Sandbox, path: str) -> str | None:
    result = await sandbox.exec(f"cat {path}", cwd="/", timeout_s=30)
    return result.stdout if result.exit_code == 0 else None
