"""The tool-calling agent through ARES's real reset/step loop, on real local sandboxes and real tasks."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import jinja2
import pytest

import ares
from ares.agents import (
    TOOLS,
    AgentFactory,
    StatefulAgent,
    ToolActionFormat,
    ToolAgent,
    ToolAgentConfig,
    ToolAgentFactory,
)
from ares.agents.file_tool import ToolCallError
from ares.agents.tool_agent import parse_call, tool_call, tool_calls_response
from ares.envs.code_env import CodeEnvironment
from ares.errors import AgentError
from ares.llm.openai_chat import request_from_openai, request_to_openai
from ares.llm.types import LLMRequest, LLMResponse, Message, ToolCall
from ares.policies import make_policy
from ares.sandbox.local import LocalSandbox
from ares.tasks.humaneval import load_humaneval
from ares.tasks.model import Task

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
FMT = ToolActionFormat()

# HumanEval/0 (has_close_elements): the stub's docstring ends with these lines; the body goes after.
DOCSTRING_END = '    True\n    """\n'
BODY = (
    "    for i, a in enumerate(numbers):\n"
    "        for b in numbers[i + 1 :]:\n"
    "            if abs(a - b) < threshold:\n"
    "                return True\n"
    "    return False\n"
)
CHECK = (
    "python3 -c 'from solution import has_close_elements as f; "
    "print(f([1.0, 2.0, 3.0], 0.5), f([1.0, 2.8, 3.0, 4.0, 5.0, 2.0], 0.3))'"
)
SOLVE = tool_call("file", {"command": "replace", "path": "solution.py", "old_text": DOCSTRING_END,
                           "new_text": DOCSTRING_END + BODY})  # fmt: skip


def call(call_id: str, name: str, **arguments: Any) -> ToolCall:
    return tool_call(name, arguments, call_id)


def raw(call_id: str, name: str, arguments: str) -> ToolCall:
    return ToolCall(id=call_id, name=name, arguments=arguments)


async def play(env: CodeEnvironment, policy: str, task: int = 0) -> ares.TimeStep:
    ts = await env.reset(task=task)
    assert env.task is not None
    pol = make_policy(policy)(env.task, env.action_format)
    while not ts.last():
        ts = await env.step(await pol.act(ts.observation))
    return ts


async def answers(env: CodeEnvironment, *calls: ToolCall, content: str | None = None) -> dict[str, str]:
    """Step with one reply of ``calls``; the tool messages that answer it, by call id, in order."""
    ts = await env.step(tool_calls_response(*calls, content=content))
    assert not ts.last() and isinstance(ts.observation, LLMRequest)
    messages = ts.observation.messages
    assert messages[-len(calls) - 1] == Message("assistant", content, calls)
    replies = messages[-len(calls) :]
    assert all(m.role == "tool" for m in replies)
    return {m.tool_call_id or "": m.text for m in replies}


@pytest.fixture
async def humaneval():
    env = ares.make("humaneval", tasks="0:3", agent=ToolAgentFactory())
    yield env
    await env.close()


# ---------------------------------------------------------------- whole episodes


async def test_humaneval_oracle_scores_one_and_null_zero(humaneval: CodeEnvironment) -> None:
    for task in range(3):
        assert (await play(humaneval, "oracle", task)).reward == 1.0
        assert (await play(humaneval, "null", task)).reward == 0.0


@pytest.mark.parametrize("name", ["hello-file", "fix-bug", "json-reward"])
async def test_harbor_fixtures_oracle_one_null_zero(name: str) -> None:
    async with ares.make("harbor", path=FIXTURES / "harbor" / name, agent=ToolAgentFactory()) as env:
        assert (await play(env, "oracle")).reward == pytest.approx(1.0)
        assert (await play(env, "null")).reward == 0.0


async def test_first_request_offers_the_tools(humaneval: CodeEnvironment) -> None:
    ts = await humaneval.reset(task=0)
    request = ts.observation
    assert request.tools == TOOLS
    assert [t["function"]["name"] for t in request.tools] == ["bash", "file", "submit"]
    assert [m.role for m in request.messages] == ["user"]
    assert "has_close_elements" in request.messages[0].text and "/workspace" in request.messages[0].text
    assert "`submit`" in (request.system_prompt or "")
    assert request.metadata == {"agent": "tool", "turn": 0}
    assert request_from_openai(json.loads(json.dumps(request_to_openai(request)))) == request


async def test_parallel_calls_view_edit_and_test_then_solve(humaneval: CodeEnvironment) -> None:
    await humaneval.reset(task=0)
    view = call("v1", "file", command="view", path="solution.py")
    edit = ToolCall("e1", SOLVE.name, SOLVE.arguments)
    test = call("t1", "bash", command=CHECK)
    got = await answers(humaneval, view, edit, test, content="View, fix and check at once.")
    assert list(got) == ["v1", "e1", "t1"]
    assert "     4\tdef has_close_elements(numbers: List[float], threshold: float) -> bool:" in got["v1"]
    assert got["e1"].startswith("Replaced the text in /workspace/solution.py. Lines ")
    assert "            if abs(a - b) < threshold:" in got["e1"]
    assert got["t1"] == "Exit code: 0\n<output>\nFalse True\n</output>"
    ts = await humaneval.step(FMT.submit())
    assert ts.last() and ts.reward == 1.0


async def test_submit_runs_the_calls_before_it_and_none_after(humaneval: CodeEnvironment) -> None:
    await humaneval.reset(task=0)
    breaks = call("x", "file", command="create", path="solution.py", content="raise SystemExit\n")
    ts = await humaneval.step(tool_calls_response(SOLVE, call("s", "submit"), breaks))
    assert ts.last() and ts.reward == 1.0  # solved before submit; the break after it never ran


# ---------------------------------------------------------------- malformed replies


async def test_malformed_calls_get_errors_and_good_calls_still_run(humaneval: CodeEnvironment) -> None:
    await humaneval.reset(task=0)
    got = await answers(
        humaneval,
        raw("json", "bash", '{"command": "ls"'),
        raw("unknown", "python", '{"code": "1"}'),
        raw("missing", "bash", "{}"),
        raw("type", "bash", '{"command": 5}'),
        raw("extra", "bash", '{"command": "ls", "cwd": "/"}'),
        raw("array", "bash", '["ls"]'),
        raw("enum", "file", '{"command": "delete", "path": "solution.py"}'),
        raw("bool", "file", '{"command": "insert", "path": "solution.py", "line": true, "content": "x"}'),
        raw("ok", "bash", '{"command": "echo fine"}'),
        raw("noargs", "bash", ""),
    )
    assert list(got) == [
        "json",
        "unknown",
        "missing",
        "type",
        "extra",
        "array",
        "enum",
        "bool",
        "ok",
        "noargs",
    ]
    assert got["json"].startswith("Error: the arguments of this bash call are not valid JSON (")
    assert got["unknown"] == "Error: there is no tool named 'python'; the tools are bash, file, submit."
    assert got["missing"] == "Error: bash needs the argument command."
    assert got["type"] == "Error: bash's argument command must be a string, got 5."
    assert got["extra"] == "Error: bash has no argument cwd (its arguments: command)."
    assert got["array"] == "Error: the arguments of a bash call must be a JSON object, not list."
    assert got["enum"].startswith("Error: file's argument command must be one of view, create, replace")
    assert got["bool"] == "Error: file's argument line must be an integer, got true."
    assert got["ok"] == "Exit code: 0\n<output>\nfine\n</output>"
    assert got["noargs"] == "Error: bash needs the argument command."


async def test_cut_off_call_is_flagged(humaneval: CodeEnvironment) -> None:
    await humaneval.reset(task=0)
    cut = LLMResponse(tool_calls=(raw("c", "bash", '{"command": "ec'),), finish_reason="length")
    ts = await humaneval.step(cut)
    assert "cut off by the length limit" in ts.observation.messages[-1].text


async def test_no_tool_call_gets_a_nudge_then_the_agent_gives_up(humaneval: CodeEnvironment) -> None:
    await humaneval.reset(task=0)
    ts = await humaneval.step(LLMResponse(content="Let me think."))
    assert [m.role for m in ts.observation.messages[-2:]] == ["assistant", "user"]
    assert ts.observation.messages[-2] == Message("assistant", "Let me think.")
    nudge = ts.observation.messages[-1].text
    assert nudge.startswith("Nothing was run: your reply called no tool.") and "call submit" in nudge
    ts = await humaneval.step(LLMResponse(content=None, finish_reason="length"))
    assert ts.observation.messages[-2] == Message("assistant", "")  # turns still alternate
    assert "cut off by the length limit" in ts.observation.messages[-1].text
    ts = await humaneval.step(LLMResponse(content="Still thinking."))
    assert ts.last() and ts.reward == 0.0  # gave up after 3 in a row; the episode is still verified
    assert humaneval.episode is not None and humaneval.episode.status == "finished"


class ScriptedLLM:
    """Answers each request with the next scripted response and keeps every request it saw."""

    def __init__(self, *replies: LLMResponse) -> None:
        self.replies = list(replies)
        self.requests: list[LLMRequest] = []

    async def __call__(self, request: LLMRequest) -> LLMResponse:
        self.requests.append(request)
        if not self.replies:
            raise AssertionError("the agent asked for more replies than the test scripted")
        return self.replies.pop(0)


async def run_agent(*replies: LLMResponse, **config: Any) -> tuple[ToolAgent, ScriptedLLM]:
    """One ToolAgent run on HumanEval/0 in a real local sandbox, driven by ``replies``."""
    task: Task = load_humaneval()[0]
    llm = ScriptedLLM(*replies)
    async with LocalSandbox(task.sandbox_spec()) as sandbox:
        await sandbox.upload(task.workspace, task.workdir)
        agent = ToolAgentFactory(ToolAgentConfig(**config))(sandbox=sandbox, llm=llm, task=task)
        await agent.run()
    assert llm.replies == []
    return agent, llm


async def test_exit_statuses() -> None:
    bad = tool_calls_response(raw("b", "nope", "{}"))
    agent, llm = await run_agent(
        LLMResponse(content="hm"), FMT.command("true"), bad, bad, max_format_errors=2
    )
    assert agent.exit_status == "format_errors"  # a usable call in between reset the count
    assert llm.requests[-1].messages[-1] == Message("tool", "Error: there is no tool named 'nope'; the tools "
                                                    "are bash, file, submit.", tool_call_id="b")  # fmt: skip
    agent, llm = await run_agent(FMT.command("true"), FMT.command("true"), step_limit=2)
    assert agent.exit_status == "step_limit" and len(llm.requests) == 2
    agent, llm = await run_agent(FMT.submit())
    assert agent.exit_status == "submitted" and len(llm.requests) == 1


# ---------------------------------------------------------------- the file tool

SETUP = (
    "printf 'a\\0b' > bin.dat && printf '\\377\\376' > latin.txt && seq 1 1000 > big.txt && "
    "seq 1 200 > long.txt && printf 'x = 1\\nx = 1\\ny = 2\\n' > dup.py && "
    "printf '#!/bin/sh\\necho ran\\n' > run && chmod 750 run && ln -s dup.py link.py && "
    "mkdir -p pkg/sub && touch pkg/a.py pkg/sub/b.py pkg/.hidden && : > empty.txt && "
    "printf 'no newline' > tail.txt && echo only > one.txt"
)


async def test_file_tool_edge_cases() -> None:
    config = ToolAgentConfig(max_output_chars=300, max_file_bytes=2000)
    async with ares.make("humaneval", tasks="0", agent=ToolAgentFactory(config)) as env:
        await env.reset(task=0)
        assert (await answers(env, call("setup", "bash", command=SETUP)))[
            "setup"
        ] == "Exit code: 0\n(no output)"

        def f(call_id: str, command: str, path: str, **arguments: Any) -> ToolCall:
            return call(call_id, "file", command=command, path=path, **arguments)

        got = await answers(
            env,
            f("missing", "view", "nope.py"),
            f("nul", "view", "bin.dat"),
            f("latin", "view", "/workspace/latin.txt"),
            f("huge", "replace", "big.txt", old_text="1", new_text="2"),
            f("long", "view", "long.txt"),
            f("range", "view", "long.txt", start_line=5, end_line=7),
            f("tail", "view", "long.txt", start_line=199, end_line=-1),
            f("past", "view", "long.txt", start_line=300),
            f("reversed", "view", "long.txt", start_line=5, end_line=2),
            f("twice", "replace", "dup.py", old_text="x = 1", new_text="x = 2"),
            f("absent", "replace", "dup.py", old_text="z = 3", new_text=""),
            f("link", "replace", "link.py", old_text="y = 2", new_text="y = 3"),
            f("exec", "insert", "run", line=1, content="echo inserted"),
            f("append", "insert", "tail.txt", line=1, content="more\n"),
            f("outside", "insert", "dup.py", line=9, content="z = 4"),
            f("dir", "create", "pkg", content="x"),
            f("new", "create", "new/deep/file.txt", content="hello"),
            f("listing", "view", "pkg"),
            f("empty", "view", "empty.txt"),
            f("needs", "replace", "dup.py", old_text="y"),
            f("blank", "view", " "),
            f("wipe", "replace", "one.txt", old_text="only\n", new_text=""),
        )
        assert got["missing"] == "Error: /workspace/nope.py does not exist."
        assert "/workspace/bin.dat is a binary file" in got["nul"]
        assert "/workspace/latin.txt is a binary file" in got["latin"]
        assert got["huge"].startswith(
            "Error: /workspace/big.txt is 3893 bytes, over the file tool's limit of 2000"
        )
        assert got["long"].startswith("     1\t1\n") and got["long"].count("characters elided") == 1
        assert got["long"].endswith(
            "   200\t200\n[the file is long: view a part with start_line and end_line]"
        )
        assert got["range"] == "     5\t5\n     6\t6\n     7\t7"
        assert got["tail"] == "   199\t199\n   200\t200"
        assert got["past"] == "Error: start_line 300 is past the end of /workspace/long.txt (200 lines)."
        assert got["reversed"].startswith("Error: bad line range 5..2")
        assert got["twice"].startswith(
            "Error: `old_text` occurs 2 times in /workspace/dup.py (at lines 1, 2)"
        )
        assert got["absent"].startswith("Error: `old_text` was not found in /workspace/dup.py.")
        assert got["link"].endswith("     1\tx = 1\n     2\tx = 1\n     3\ty = 3")
        assert got["exec"].startswith("Inserted 1 line after line 1 of /workspace/run.")
        assert got["append"].endswith("     1\tno newline\n     2\tmore")
        assert (
            got["outside"] == "Error: `line` must be between 0 and 3 (the lines of /workspace/dup.py), not 9."
        )
        assert got["dir"] == "Error: /workspace/pkg is a directory."
        assert got["new"] == "Created /workspace/new/deep/file.txt (1 line)."
        assert (
            got["listing"] == "/workspace/pkg (2 levels deep, hidden entries left out):\na.py\nsub/\nsub/b.py"
        )
        assert got["empty"] == "/workspace/empty.txt is empty."
        assert got["needs"] == "Error: `replace` needs `new_text`."
        assert got["blank"] == "Error: `path` is empty."
        assert got["wipe"] == "Replaced the text in /workspace/one.txt, which is now empty."
        check = "stat -c %a run && ./run && readlink link.py && cat dup.py tail.txt new/deep/file.txt"
        out = (await answers(env, call("check", "bash", command=check)))["check"]
        lines = ["750", "inserted", "ran", "dup.py", "x = 1", "x = 1", "y = 3", "no newline", "more", "hello"]
        assert out == "Exit code: 0\n<output>\n" + "\n".join(lines) + "\n</output>"


async def test_a_slow_command_is_killed_and_reported(humaneval: CodeEnvironment) -> None:
    await humaneval.reset(task=dataclasses.replace(humaneval.tasks[0], command_timeout_s=0.5))
    got = await answers(humaneval, call("slow", "bash", command="echo begun; sleep 30"))
    assert got["slow"].startswith("The command timed out after 0.5 seconds and was killed.")
    assert "begun" in got["slow"] and "Exit code" not in got["slow"]


async def test_written_files_get_the_current_time(humaneval: CodeEnvironment) -> None:
    """Uploads stamp files with the epoch; tools that trust mtimes (make, bytecode caches) need now."""
    await humaneval.reset(task=0)
    fresh = call(
        "t",
        "bash",
        command="python3 -c 'import os, time; print(time.time() - os.path.getmtime(\"m.py\") < 60)'",
    )
    write = call("w", "file", command="create", path="m.py", content="X = 1\n")
    assert (await answers(humaneval, write, fresh))["t"].endswith("\nTrue\n</output>")
    edit = call("e", "file", command="replace", path="m.py", old_text="1", new_text="2")
    touch = call("o", "bash", command="touch -d @0 m.py")
    assert (await answers(humaneval, touch, edit, fresh))["t"].endswith("\nTrue\n</output>")


# ---------------------------------------------------------------- state, snapshots, forks


async def test_state_resumes_identically_in_a_fork() -> None:
    async with ares.make("humaneval", tasks="0", agent=ToolAgentFactory()) as env:
        await env.reset(task=0)
        await answers(env, call("n", "file", command="create", path="notes.txt", content="one\n"))
        await env.step(LLMResponse(content="no call"))  # a nudge and a format error are part of the state
        snapshot = await env.snapshot()
        state = json.loads(json.dumps(snapshot.agent_state))
        assert state["agent"] == "tool" and state["turn"] == 2 and state["format_errors"] == 1
        [fork] = await env.fork(1)
        async with fork:
            script = [
                tool_calls_response(
                    call("a", "file", command="insert", path="notes.txt", line=1, content="two")
                ),
                tool_calls_response(call("b", "bash", command="cat notes.txt"), SOLVE),
                FMT.submit(),
            ]
            seen: list[list[Any]] = [[], []]
            for branch, record in zip((env, fork), seen, strict=True):
                for response in script:
                    ts = await branch.step(response)
                    record.append(ts.observation if not ts.last() else ts.reward)
            assert seen[0] == seen[1] and seen[0][-1] == 1.0
            assert "one\ntwo" in seen[0][1].messages[-2].text


async def test_state_exists_only_between_steps_and_is_checked() -> None:
    task = load_humaneval()[0]
    agent = ToolAgentFactory()(sandbox=LocalSandbox(task.sandbox_spec()), llm=ScriptedLLM(), task=task)
    assert isinstance(agent, StatefulAgent)
    with pytest.raises(AgentError, match="no pending LLM call"):
        agent.state()
    with pytest.raises(AgentError, match="not a tool agent state"):
        agent.load_state({"agent": "bash", "version": 1, "request": {}})


# ---------------------------------------------------------------- action format, config


@pytest.mark.parametrize(
    "command", ["ls -la", "echo '\"q\"' && printf '%s\\n' '```'", "cat <<'EOF'\n{}\nEOF"]
)
def test_action_format_speaks_one_bash_call(command: str) -> None:
    response = FMT.command(command)
    assert response.finish_reason == "tool_calls" and response.content is None
    [only] = response.tool_calls
    assert parse_call(only) == ("bash", {"command": command})
    assert FMT.command(command) == response  # deterministic ids: the same action is the same response
    assert FMT.command(command + " ").tool_calls[0].id != only.id
    [submit] = FMT.submit().tool_calls
    assert parse_call(submit) == ("submit", {})


def test_factory_config_and_schemas() -> None:
    factory: AgentFactory = ToolAgentFactory()
    assert isinstance(factory.action_format, ToolActionFormat)
    with pytest.raises(ValueError, match="max_file_bytes"):
        ToolAgentConfig(max_file_bytes=0)
    with pytest.raises(ValueError, match="step_limit"):
        ToolAgentConfig(step_limit=0)
    with pytest.raises(jinja2.TemplateSyntaxError):
        ToolAgentConfig(call_error_template="{% if x %}")
    for tool in TOOLS:
        assert tool["type"] == "function" and set(tool["function"]) == {"name", "description", "parameters"}
    with pytest.raises(ToolCallError, match="no tool named"):
        parse_call(raw("x", "", "{}"))
