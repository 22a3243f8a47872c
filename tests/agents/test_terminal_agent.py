"""The terminal agent through ARES's real reset/step loop: real local sandboxes, real tmux, real tasks."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

import pytest

import ares
import host_processes
from ares.agents import StatefulAgent
from ares.agents.bash_parser import FormatError
from ares.agents.terminal import (
    Command,
    Key,
    TerminalActionFormat,
    TerminalAgentConfig,
    TerminalAgentFactory,
    TmuxMissingError,
    keys_of,
    parse_reply,
    script_command,
)
from ares.agents.terminal.agent import RESTARTED_NOTE
from ares.agents.terminal.tmux import SOCKET
from ares.envs.code_env import CodeEnvironment
from ares.errors import AgentError
from ares.llm.types import LLMRequest, LLMResponse
from ares.policies import make_policy
from ares.policies.scripted import oracle_command
from ares.sandbox.local import network
from nobody_python import SKIP_REASON, can_drop, nobody_python

ROOT = Path(__file__).resolve().parents[2]
HARBOR = ROOT / "tests" / "fixtures" / "harbor"
FMT = TerminalActionFormat()


def keys(*commands: Command, task_complete: bool = False) -> LLMResponse:
    return FMT.keystrokes(*commands, task_complete=task_complete)


def screen(ts: ares.TimeStep) -> str:
    """The last user message of a MID step: the notes and the terminal capture."""
    assert not ts.last() and isinstance(ts.observation, LLMRequest)
    return ts.observation.messages[-1].text


def tmux_servers() -> list[int]:
    """Host pids of processes started with the terminal agent's socket (the sandboxes share our /proc)."""
    return host_processes.processes_with(SOCKET)


async def play(env: CodeEnvironment, policy: str, task: int = 0) -> ares.TimeStep:
    ts = await env.reset(task=task)
    assert env.task is not None
    pol = make_policy(policy)(env.task, env.action_format)
    while not ts.last():
        ts = await env.step(await pol.act(ts.observation))
    return ts


@pytest.fixture
async def humaneval():
    env = ares.make("humaneval-terminal", tasks="0:3")
    yield env
    await env.close()


# ---------------------------------------------------------------- whole episodes


async def test_humaneval_oracle_scores_one_and_null_zero(humaneval: CodeEnvironment) -> None:
    for task in range(3):
        assert (await play(humaneval, "oracle", task)).reward == 1.0
        assert humaneval.episode is not None and humaneval.episode.exit_reason == "submitted"
        assert (await play(humaneval, "null", task)).reward == 0.0


@pytest.mark.parametrize("name", ["hello-file", "fix-bug", "json-reward", "pytest-app"])
async def test_harbor_fixtures_oracle_one_null_zero(name: str) -> None:
    async with ares.make("harbor-terminal", path=HARBOR / name) as env:
        assert (await play(env, "oracle")).reward == pytest.approx(1.0)
        assert (await play(env, "null")).reward == 0.0


async def test_first_request_shows_the_task_and_the_terminal(humaneval: CodeEnvironment) -> None:
    ts = await humaneval.reset(task=0)
    request = ts.observation
    assert request.tools == () and [m.role for m in request.messages] == ["user"]
    first = request.messages[0].text
    assert "has_close_elements" in first and "<terminal>\nroot@sandbox:/workspace#" in first
    assert '"task_complete"' in (request.system_prompt or "") and "160x40" in (request.system_prompt or "")
    assert request.metadata == {"agent": "terminal", "turn": 0}


async def test_oracle_keystrokes_are_the_recorded_action(humaneval: CodeEnvironment) -> None:
    """The oracle is honest: what it typed is in its reply, and the screen shows the script ran."""
    await humaneval.reset(task=0)
    assert humaneval.task is not None
    command = oracle_command(humaneval.task)
    response = FMT.command(command)
    [typed] = parse_reply(response.content).commands
    assert typed == script_command(command) and typed.wait_for is not None
    assert typed.wait_for not in typed.keystrokes  # the marker is printed, never typed
    ts = await humaneval.step(response)
    assert typed.wait_for in screen(ts)
    ts = await humaneval.step(
        keys(Command("python3 -c 'import solution' && echo imported-$((40+2))\n", 5, "imported-42"))
    )
    assert "imported-42" in screen(ts)
    assert (await humaneval.step(FMT.submit())).reward == 1.0


async def test_a_script_past_the_argument_limit_runs_whole(humaneval: CodeEnvironment) -> None:
    """~280 KiB of keystrokes: sent in several execs, the decoded script past one argument's 128 KiB."""
    await humaneval.reset(task=0)
    body = "".join(f"line {i} {'x' * 60}\n" for i in range(3000))
    ts = await humaneval.step(FMT.command(f"cat > big.txt <<'EOF'\n{body}EOF\nwc -c big.txt"))
    assert f"\n{len(body)} big.txt\nARES_DONE_" in screen(ts)


# ---------------------------------------------------------------- keystrokes, waits, the screen


async def test_a_blocking_command_keeps_the_screen_live_until_c_c(humaneval: CodeEnvironment) -> None:
    await humaneval.reset(task=0)
    ts = await humaneval.step(keys(Command("sleep 30; echo woke-$((6*7))\n", 0.5)))
    running = screen(ts)
    assert "sleep 30; echo woke-$((6*7))" in running and "woke-42" not in running
    # Typed while sleep runs: the keys wait in the terminal, the capture still comes back.
    ts = await humaneval.step(keys(Command("", 0.2)))
    assert "woke-42" not in screen(ts)
    ts = await humaneval.step(keys(Command("C-c", 0.5), Command("echo after-$((40+2))\n", 5, "after-42")))
    after = screen(ts)
    assert "^C" in after and "after-42" in after and "woke-42" not in after


async def test_shell_state_persists_and_scrollback_is_shown(humaneval: CodeEnvironment) -> None:
    await humaneval.reset(task=0)
    ts = await humaneval.step(keys(Command("cd /tmp && export GREETING=hi\n", 0.3)))
    ts = await humaneval.step(
        keys(Command('echo "$GREETING from $(pwd)"; seq 1 100; echo E_$((1+1))\n', 5, "E_2"))
    )
    text = screen(ts)
    assert "hi from /tmp" in text  # scrolled off the 40-line screen, shown from the scrollback
    assert "\n1\n2\n3\n" in text and "\n100\nE_2" in text
    ts = await humaneval.step(keys(Command("echo next\n", 0.3)))
    assert "hi from /tmp" not in screen(ts)  # each capture shows only the scrollback new since the last


async def test_special_keys_and_a_shell_that_exits(humaneval: CodeEnvironment) -> None:
    await humaneval.reset(task=0)
    ts = await humaneval.step(
        keys(Command("echo first-one\n", 0.3), Command("Up", 0.2), Command("Enter", 0.3))
    )
    assert screen(ts).count("first-one") == 4  # typed, printed, recalled with Up, printed again
    ts = await humaneval.step(keys(Command("exit\n", 0.5)))
    assert "[the shell exited; a new one was started in /workspace]" in screen(ts)
    ts = await humaneval.step(keys(Command("echo back-$((2+3))\n", 5, "back-5")))
    assert "back-5" in screen(ts)


async def test_a_wait_for_that_never_shows_is_reported(humaneval: CodeEnvironment) -> None:
    await humaneval.reset(task=0)
    ts = await humaneval.step(keys(Command("echo nope\n", 0.3, "NEVER_PRINTED")))
    assert "['NEVER_PRINTED' did not appear within 0.3s; the command may still be running]" in screen(ts)


async def test_a_duration_past_the_limit_is_cut_and_said() -> None:
    config = TerminalAgentConfig(max_duration_s=0.2)
    async with ares.make("humaneval", tasks="0", agent=TerminalAgentFactory(config)) as env:
        await env.reset(task=0)
        ts = await env.step(keys(Command("echo x\n", 99)))
        assert "[a duration of 99s was cut to the limit of 0.2s]" in screen(ts)


# ---------------------------------------------------------------- malformed replies


async def test_malformed_replies_get_errors_then_end_the_run(humaneval: CodeEnvironment) -> None:
    await humaneval.reset(task=0)
    ts = await humaneval.step(LLMResponse(content="I will run ls"))
    assert screen(ts).startswith("Nothing was sent to the terminal. Your reply has no JSON object.")
    ts = await humaneval.step(LLMResponse(content='{"commands": [{"keystrokes": 5}]}'))
    assert 'commands[0] needs "keystrokes" as a string, got 5' in screen(ts)
    ts = await humaneval.step(keys(Command("echo ok\n", 0.2)))  # a good reply resets the count
    for bad in ("{", '{"commands": "ls"}'):
        ts = await humaneval.step(LLMResponse(content=bad))
    assert not ts.last()
    ts = await humaneval.step(LLMResponse(content='```json\n{"task_complete": "yes"}\n```'))
    assert ts.last() and ts.reward == 0.0
    assert humaneval.episode is not None and humaneval.episode.exit_reason == "format_errors"


def test_parse_reply_accepts_fences_and_text_and_names_what_is_wrong() -> None:
    fenced = 'Plan first.\n```json\n{"commands": [{"keystrokes": "ls\\n", "duration": 2}]}\n```'
    assert parse_reply(fenced).commands == (Command("ls\n", 2.0),)
    assert parse_reply('Sure: {"task_complete": true} - done').task_complete
    cases = {
        None: "was empty",
        "[1, 2]": "no JSON object",
        '{"a": 1}': "none of the fields",
        '{"commands": []}': "no commands",
        '{"commands": [{"keystrokes": "x", "duration": -1}]}': "must not be negative",
        '{"commands": [{"keystrokes": "x", "duration": true}]}': "number of seconds",
        '{"commands": [{"keystrokes": "x", "wait_for": ""}]}': "non-empty string",
        '{"commands": ["ls"]}': 'must be an object with "keystrokes"',
        '{"commands": [], "task_complete": 1}': "true or false",
        '{"plan": 3, "task_complete": true}': '"plan" must be a string',
    }
    for text, message in cases.items():
        with pytest.raises(FormatError, match=message):
            parse_reply(text)


def test_the_keys_rule() -> None:
    assert keys_of("C-c") == [Key("C-c", literal=False)]
    assert keys_of("M-b") == keys_of("M-b")
    assert keys_of("Escape") == [Key("Escape", literal=False)]
    assert keys_of("C-Left") == [Key("C-Left", literal=False)]
    assert keys_of("ls\n") == [Key("ls", literal=True), Key("Enter", literal=False)]
    enter = Key("Enter", literal=False)
    assert keys_of("a\r\n\nb") == [Key("a", literal=True), enter, enter, Key("b", literal=True)]
    assert keys_of("echo C-c\n")[0] == Key("echo C-c", literal=True)
    assert keys_of("Enter\n") == [Key("Enter", literal=True), Key("Enter", literal=False)]
    assert keys_of("") == []


async def test_a_context_budget_compacts_the_conversation() -> None:
    async with ares.make("humaneval-terminal", tasks="0", context_budget=1500) as env:
        ts = await env.reset(task=0)
        marks = []
        for _ in range(6):
            ts = await env.step(keys(Command("seq 1 150\n", 0.3)))
            marks.append(ts.observation.metadata.get("ares_context"))
            if marks[-1] == "summary":
                break
        assert marks[-1] == "summary"
        ts = await env.step(LLMResponse(content="I printed numbers."))
        assert ts.observation.metadata["ares_context"] == "compacted"
        [only] = ts.observation.messages
        assert "has_close_elements" in only.text and "I printed numbers." in only.text
        ts = await env.step(keys(Command("echo still-$((1+1))\n", 5, "still-2")))
        assert "still-2" in screen(ts)


# ---------------------------------------------------------------- snapshots and processes


async def test_snapshot_keeps_files_and_conversation_and_restarts_the_terminal() -> None:
    async with ares.make("humaneval-terminal", tasks="0") as env:
        await env.reset(task=0)
        await env.step(keys(Command("cd /tmp && export X=kept && echo one > /workspace/notes.txt\n", 0.3)))
        await env.step(LLMResponse(content="not json"))  # a format error is part of the state
        snapshot = await env.snapshot()
        state = json.loads(json.dumps(snapshot.agent_state))
        assert state["agent"] == "terminal" and state["turn"] == 2 and state["format_errors"] == 1
        [fork] = await env.fork(1)
        async with fork:
            probe = keys(Command('echo "x=$X in $(pwd)"; cat notes.txt; echo P_$((1+1))\n', 5, "P_2"))
            for branch in (env, fork):  # the original lost its tmux server to the snapshot too
                text = screen(await branch.step(probe))
                assert text.startswith(f"[{RESTARTED_NOTE.format(workdir='/workspace')}]")
                assert "x= in /workspace" in text and "\none\n" in text
            assert fork.task is not None
            await fork.step(FMT.command(oracle_command(fork.task)))
            assert (await fork.step(FMT.submit())).reward == 1.0
            assert (await env.step(FMT.submit())).reward == 0.0


async def test_state_exists_only_between_steps_and_is_checked() -> None:
    from ares.sandbox.local import LocalSandbox
    from ares.tasks.humaneval import load_humaneval

    task = load_humaneval()[0]

    async def never(request: LLMRequest) -> LLMResponse:
        raise AssertionError("not called")

    agent = TerminalAgentFactory()(sandbox=LocalSandbox(task.sandbox_spec()), llm=never, task=task)
    assert isinstance(agent, StatefulAgent)
    with pytest.raises(AgentError, match="no pending LLM call"):
        agent.state()
    with pytest.raises(AgentError, match="not a terminal agent state"):
        agent.load_state({"agent": "bash", "version": 1, "request": {}})


async def test_the_tmux_server_is_gone_after_the_episode() -> None:
    async with ares.make("humaneval-terminal", tasks="0", step_limit=3) as env:
        assert tmux_servers() == []
        await env.reset(task=0)
        await env.step(keys(Command("sleep 300\n", 0.2)))
        assert tmux_servers() != []  # the check sees a live server
        ts = await env.step(keys(Command("", 0.1)))
        ts = await env.step(keys(Command("", 0.1)))
        assert ts.last() and env.episode is not None and env.episode.truncation == "step_limit"
        assert tmux_servers() == []  # cut off mid-command: the sandbox took the server with it
        assert (await play(env, "oracle")).reward == 1.0
        assert tmux_servers() == []  # a submitted run stops it


def _no_tmux_task(root: Path) -> Path:
    task = root / "no-tmux"
    shutil.copytree(HARBOR / "hello-file", task)
    (task / "environment" / "Dockerfile").write_text(
        "FROM python:3.11-slim\nRUN rm -f /usr/bin/tmux\nWORKDIR /app\n"
    )
    return task


async def test_an_image_without_tmux_is_a_clear_error(tmp_path: Path) -> None:
    async with ares.make("harbor-terminal", path=_no_tmux_task(tmp_path)) as env:
        with pytest.raises(
            AgentError, match="failed at reset: the terminal agent needs tmux in the sandbox"
        ) as error:
            await env.reset(task=0)
        assert isinstance(error.value.__cause__, TmuxMissingError)


# ---------------------------------------------------------------- config, action format


def test_config_is_checked() -> None:
    with pytest.raises(ValueError, match="width"):
        TerminalAgentConfig(width=0)
    with pytest.raises(ValueError, match="history_limit"):
        TerminalAgentConfig(history_limit=10, max_scrollback_lines=100)
    with pytest.raises(ValueError, match="max_duration_s"):
        TerminalAgentConfig(max_duration_s=0)
    assert isinstance(TerminalAgentFactory().action_format, TerminalActionFormat)


def test_action_format_round_trips() -> None:
    script = "cat <<'EOF' > a.txt\nline with 'quotes' and \"double\" and `ticks` and !bang\nEOF"
    reply = parse_reply(FMT.command(script).content)
    [command] = reply.commands
    assert (
        not reply.task_complete and command.keystrokes.count("\n") == 1 and command.keystrokes.endswith("\n")
    )
    assert parse_reply(FMT.submit().content).task_complete and not parse_reply(FMT.submit().content).commands
    assert FMT.command(script) == FMT.command(script)


# ---------------------------------------------------------------- unprivileged


@pytest.mark.skipif(not can_drop(), reason=SKIP_REASON)
def test_an_unprivileged_user_runs_terminal_episodes() -> None:
    """The CLI as nobody: local sandbox, tmux inside it, oracle reward 1."""
    python = nobody_python() or pytest.skip(SKIP_REASON)
    state = Path(tempfile.mkdtemp(prefix="ares-terminal-"))
    try:
        os.chown(state, 65534, 65534)
        env = {
            "PATH": f"{Path(sys.executable).parent}:{network.SEARCH_PATH}",
            "PYTHONPATH": f"{ROOT / 'src'}:{sysconfig.get_paths()['purelib']}",
            "HOME": str(state),
            "LANG": "C.UTF-8",
            "ARES_SANDBOX_DIR": str(state / "sandboxes"),
        }
        cmd = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", python, "-m",
               "ares.cli.main", "run", "humaneval-terminal", "--policy", "oracle", "--tasks", "0:2",
               "--out", str(state / "out")]  # fmt: skip
        result = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=state, timeout=240)
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
        summary = json.loads((state / "out" / "summary.json").read_text())
        assert summary["statuses"] == {"finished": 2} and summary["mean_reward"] == 1.0
    finally:
        shutil.rmtree(state, ignore_errors=True)
