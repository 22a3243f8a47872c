"""Blame and masks: a trainer masks what the policy did not earn, and nothing the agent does can turn
its own zero into a masked sample. Hostile cases run as root and as nobody (uid 65534)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ares.core.status import EpisodeStatus as S
from ares.envs.blame import MASKED, blame_for, error_blame, masked
from ares.errors import (
    AgentError,
    ImageBuildError,
    LLMError,
    LLMTimeoutError,
    MalformedResponseError,
    PolicyError,
    PolicyTimeoutError,
    SandboxCrashedError,
    SandboxTimeoutError,
    SandboxUnavailableError,
    StaleEpisodeError,
    TaskError,
    VerifierError,
    VerifierTimeoutError,
)
from nobody_python import run_as_nobody

SRC = Path(__file__).resolve().parents[2] / "src"
HARBOR = Path(__file__).resolve().parents[1] / "fixtures" / "harbor"


@pytest.mark.parametrize(
    ("error", "blame"),
    [
        (PolicyError("no action"), "policy"),
        (PolicyTimeoutError("slow"), "policy"),
        (MalformedResponseError("bad json"), "policy"),
        (LLMTimeoutError("took too long"), "policy"),
        (LLMError("could not reach the server"), "infra"),
        (SandboxCrashedError("died"), "infra"),
        (SandboxTimeoutError("no answer"), "infra"),
        (SandboxUnavailableError("no engine"), "infra"),
        (AgentError("the scaffold crashed"), "infra"),
        (RuntimeError("a bug"), "infra"),
        (TaskError("broken task.toml"), "task"),
        (ImageBuildError("bad Dockerfile"), "task"),
        (VerifierError("no reward"), "task"),
        (VerifierTimeoutError("tests hung"), "task"),
        (StaleEpisodeError("the trainer moved on"), "infra"),
    ],
)
def test_an_errored_episode_is_blamed_by_its_error(error: BaseException, blame: str) -> None:
    assert error_blame(error) == blame
    assert blame_for(S.ERRORED, error, None) == blame
    assert masked(error_blame(error)) is (blame in MASKED)


def test_the_rules_for_episodes_that_did_not_error() -> None:
    assert blame_for(S.FINISHED, None, None) is None and not masked(None)
    assert blame_for(S.FINISHED, None, "the sandbox did not answer") == "policy"
    assert blame_for(S.TRUNCATED, None, None) == "limit" and not masked("limit")
    for stopped in (S.ABANDONED, S.ABORTED, S.CANCELLED):
        assert blame_for(stopped, None, None) == "infra" and masked("infra")
    assert {"infra", "task"} == MASKED


# Three episodes on a small task whose tests read answer.txt under `set -e`: a number gives a reward
# (1 for 42, else 0); anything else makes test.sh exit before it writes one.
SCENARIO = r"""
import asyncio, dataclasses, json, os, signal, sys
from pathlib import Path

import ares
from ares.agents.bash import BashActionFormat
from ares.sandbox.local import sandbox as local_sandbox

local_sandbox.EXEC_GRACE_S = 0.5
FMT = BashActionFormat()
STRICT_TESTS = {"test.sh": (
    "set -eu\nmkdir -p /logs/verifier\nn=$(cat answer.txt)\ntest \"$n\" -ge 0\n"
    "if [ \"$n\" -eq 42 ]; then echo 1; else echo 0; fi > /logs/verifier/reward.txt\n"
)}
BROKEN_TESTS = {"test.sh": "echo 'this task never writes a reward' >&2\nexit 3\n"}
# Root in the sandbox's user namespace may lower its init's rlimits: no fd, no process, no CPU left.
STARVE = (
    "python3 -c 'import resource as r; [r.prlimit(1, k, (0, 0)) for k in (r.RLIMIT_NPROC, r.RLIMIT_CPU)]; "
    "r.prlimit(1, r.RLIMIT_NOFILE, (4, 4))'"
)


async def episode(env, base, tests, commands):
    task = dataclasses.replace(base, tests=tests, workspace={"answer.txt": "0\n"}, command_timeout_s=1.0)
    ts = await env.reset(task=task)
    for command in commands:
        if ts.last():
            break
        ts = await env.step(FMT.command(command))
    if not ts.last():
        ts = await env.step(FMT.submit())
    e = env.episode
    return {"status": str(e.status), "reward": e.reward, "outcome": e.outcome, "blame": e.blame,
            "masked": e.masked, "terms": dict(e.reward_terms), "exit_reason": e.exit_reason,
            "sandbox_crash": e.sandbox_crash, "error": None if e.error is None else e.error.type}


async def killed_by_host(env, base):
    # pid 1 SIGKILLed from the host (as by an operator or the host's OOM killer) mid-command.
    workspace = {"answer.txt": "0\n"}
    task = dataclasses.replace(base, tests=STRICT_TESTS, workspace=workspace, command_timeout_s=60.0)
    await env.reset(task=task)
    step = asyncio.ensure_future(env.step(FMT.command("echo 7 > answer.txt; sleep 30")))
    sandbox = env.sandbox
    await asyncio.sleep(1.5)  # the command is running
    held = (sandbox._limits.report.memory, sandbox._limits.report.pids)
    cgroups = all(x is not None and x.mechanism.startswith("cgroup") for x in held)
    os.kill(sandbox._pids[0], signal.SIGKILL)
    ts = await step
    e = env.episode
    return {"status": str(e.status), "reward": e.reward, "blame": e.blame, "masked": e.masked,
            "last": ts.last(), "sandbox_crash": e.sandbox_crash, "cgroups": cgroups,
            "error": None if e.error is None else e.error.type}


async def main():
    env = ares.make("harbor", path=sys.argv[1])
    async with env:
        base = env.tasks[0]
        out = {
            "solved": await episode(env, base, STRICT_TESTS, ["echo 42 > answer.txt"]),
            "broke_tests": await episode(env, base, STRICT_TESTS, ["echo not-a-number > answer.txt"]),
            "broken_task": await episode(env, base, BROKEN_TESTS, ["echo 42 > answer.txt"]),
            "crashed_own_sandbox": await episode(
                env, base, STRICT_TESTS, ["echo 7 > answer.txt", "kill -STOP $PPID; sleep 600"]
            ),
            "killed_by_host": await killed_by_host(env, base),
            "starved_init": await episode(
                env, base, STRICT_TESTS, ["echo 7 > answer.txt", STARVE, "echo 42 > answer.txt"]
            ),
        }
    print(json.dumps(out))

asyncio.run(main())
"""


@pytest.fixture(scope="module", params=["root", "nobody"])
def outcomes(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    if request.param == "root":
        import subprocess
        import sys

        done = subprocess.run(
            [sys.executable, "-c", SCENARIO, str(HARBOR / "hello-file")],
            capture_output=True,
            text=True,
            timeout=600,
            env={"PATH": "/usr/bin:/bin", "ARES_IMAGE_FALLBACK": "offline", "PYTHONPATH": str(SRC)},
        )
    else:
        code = f"import sys; sys.argv = ['-', {str(HARBOR / 'hello-file')!r}]\n{SCENARIO}"
        done = run_as_nobody(request, "ares-blame-", code, [SRC], timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return {**json.loads(done.stdout.strip().splitlines()[-1]), "who": request.param}


def test_a_solved_episode_has_an_outcome_and_no_blame(outcomes: dict[str, Any]) -> None:
    solved = outcomes["solved"]
    assert (solved["status"], solved["reward"], solved["outcome"], solved["blame"]) == (
        "finished",
        1.0,
        True,
        None,
    )
    assert solved["masked"] is False


def test_tests_the_agent_broke_are_its_zero_not_a_masked_error(outcomes: dict[str, Any]) -> None:
    """Attack: write what makes test.sh exit before it writes a reward, hoping for an `errored`
    episode a trainer masks. Expected: the tests give a reward on a pristine tree, so the episode is
    finished with reward 0, outcome false, blame policy, unmasked."""
    broke = outcomes["broke_tests"]
    assert broke["status"] == "finished" and broke["error"] is None
    assert (broke["reward"], broke["outcome"], broke["blame"], broke["masked"]) == (
        0.0,
        False,
        "policy",
        False,
    )
    assert broke["terms"] == {"verifier_failed": 1.0} and broke["exit_reason"] == "verifier_failed"


def test_a_task_whose_tests_never_give_a_reward_is_masked(outcomes: dict[str, Any]) -> None:
    broken = outcomes["broken_task"]
    assert (broken["status"], broken["error"], broken["blame"], broken["masked"]) == (
        "errored",
        "VerifierError",
        "task",
        True,
    )


def test_an_agent_cannot_starve_its_sandbox_init(outcomes: dict[str, Any]) -> None:
    """Attack: lower the sandbox init's rlimits from inside (no processes or CPU left, 4 fds), so the
    sandbox dies and the episode may be masked. Expected: the syscall filter refuses to set another
    process's limits, the agent's next command runs (answer 42), and the episode is its own: finished,
    reward 1, unmasked."""
    starved = outcomes["starved_init"]
    assert starved["status"] == "finished" and starved["error"] is None and starved["sandbox_crash"] is None
    assert (starved["reward"], starved["outcome"], starved["masked"]) == (1.0, True, False)


def test_an_agent_that_crashes_its_own_sandbox_is_not_masked(outcomes: dict[str, Any]) -> None:
    """Attack: stop the sandbox's supervisor so it stops answering. Expected: its files are still
    verified (answer 7: reward 0), blame policy, unmasked: a crash is no way out of a zero."""
    crashed = outcomes["crashed_own_sandbox"]
    assert crashed["sandbox_crash"] is not None and crashed["status"] == "finished"
    assert (crashed["reward"], crashed["outcome"], crashed["blame"], crashed["masked"]) == (
        0.0,
        False,
        "policy",
        False,
    )


def test_a_host_kill_is_masked_where_nothing_inside_can_kill_the_init(outcomes: dict[str, Any]) -> None:
    """Fault: the host SIGKILLs the sandbox's pid 1 while a command runs. Where cgroups count memory
    and processes (as root here: what is left of the ways a sandbox could kill its own init), the
    episode errors with ``SandboxKilledError``: blame infra, masked, so a runner refills it. Where
    rlimits hold them (nobody here: no count to read), a host's kill cannot be told from the agent's,
    and the agent's files are verified as its own (answer 7: reward 0), blame policy, unmasked."""
    killed = outcomes["killed_by_host"]
    assert killed["last"] is True and killed["cgroups"] is (outcomes["who"] == "root")
    if killed["cgroups"]:
        assert (killed["status"], killed["error"], killed["blame"], killed["masked"]) == (
            "errored",
            "SandboxKilledError",
            "infra",
            True,
        )
    else:
        assert killed["status"] == "finished" and killed["sandbox_crash"] is not None
        assert (killed["reward"], killed["blame"], killed["masked"]) == (0.0, "policy", False)
