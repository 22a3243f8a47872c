from __future__ import annotations

from pathlib import Path
from typing import Protocol

import jinja2
import pytest

from ares.agents import (
    SUBMIT_COMMAND,
    ActionFormat,
    AgentFactory,
    BashActionFormat,
    BashAgent,
    BashAgentConfig,
    BashAgentFactory,
    CodeAgent,
    parse_action,
)
from ares.agents.bash import truncate_middle
from ares.llm.types import LLMRequest, LLMResponse, SamplingParams
from ares.sandbox.base import Sandbox
from ares.tasks.model import Task

FMT = BashActionFormat()


class ShellSandbox(Sandbox, Protocol):
    """The conftest double: a Sandbox that also records the commands it ran."""

    commands: list[str]


class ScriptedLLM:
    """Answers each request with the next scripted reply and keeps every request it saw."""

    def __init__(self, *replies: str | LLMResponse | Exception) -> None:
        self.replies = list(replies)
        self.requests: list[LLMRequest] = []

    async def __call__(self, request: LLMRequest) -> LLMResponse:
        self.requests.append(request)
        if not self.replies:
            raise AssertionError("the agent asked for more replies than the test scripted")
        reply = self.replies.pop(0)
        if isinstance(reply, Exception):
            raise reply
        return reply if isinstance(reply, LLMResponse) else LLMResponse(content=reply)


def make_task(workdir: Path, **overrides: object) -> Task:
    fields: dict[str, object] = {
        "id": "t1",
        "instruction": "Create hello.txt containing 'hi'.",
        "tests": {"test.sh": "exit 0"},
        "workdir": str(workdir),
        "command_timeout_s": 10.0,
    }
    fields.update(overrides)
    return Task(**fields)  # type: ignore[arg-type]


def agent_for(sandbox: ShellSandbox, llm: ScriptedLLM, **config: object) -> BashAgent:
    task = make_task(Path(sandbox.spec.workdir))
    return BashAgentFactory(BashAgentConfig(**config))(sandbox=sandbox, llm=llm, task=task)  # type: ignore[arg-type]


async def test_runs_commands_and_sends_output_back(shell_sandbox: ShellSandbox) -> None:
    create = "Create the file.\n```bash\necho hi > hello.txt && echo made\n```"
    llm = ScriptedLLM(
        create,
        "Check it.\n```bash\ncat hello.txt; ls missing\n```",
        FMT.submit(),
    )
    agent = agent_for(shell_sandbox, llm)
    await agent.run()

    assert agent.exit_status == "submitted"
    assert (Path(shell_sandbox.spec.workdir) / "hello.txt").read_text() == "hi\n"
    assert shell_sandbox.commands == ["echo hi > hello.txt && echo made", "cat hello.txt; ls missing"]
    first, second, third = llm.requests
    assert [m.role for m in first.messages] == ["user"]
    assert "Create hello.txt" in first.messages[0].text
    assert shell_sandbox.spec.workdir in first.messages[0].text
    assert SUBMIT_COMMAND in (first.system_prompt or "")
    assert [m.role for m in third.messages] == ["user", "assistant", "user", "assistant", "user"]
    assert third.messages[1].text == create  # the reply is kept verbatim, thought included
    made = second.messages[-1].text
    assert "Exit code: 0" in made and "made" in made
    checked = third.messages[-1].text
    assert "Exit code: 2" in checked and "hi" in checked  # ls of a missing file fails with 2
    assert "[stderr]" in checked and "missing" in checked
    assert [r.metadata for r in llm.requests] == [{"agent": "bash", "turn": n} for n in range(3)]
    assert all(r.system_prompt == first.system_prompt for r in llm.requests)


async def test_sampling_and_model_go_into_the_request(shell_sandbox: ShellSandbox) -> None:
    sampling = SamplingParams(temperature=0.2, max_tokens=512)
    llm = ScriptedLLM(FMT.submit())
    await agent_for(shell_sandbox, llm, sampling=sampling, model="m").run()
    assert llm.requests[0].sampling == sampling
    assert llm.requests[0].model == "m"


async def test_each_command_starts_in_the_workdir(shell_sandbox: ShellSandbox) -> None:
    (Path(shell_sandbox.spec.workdir) / "sub").mkdir()
    llm = ScriptedLLM(FMT.command("cd sub && pwd"), FMT.command("pwd"), FMT.submit())
    await agent_for(shell_sandbox, llm).run()
    workdir = shell_sandbox.spec.workdir
    assert f"{workdir}/sub\n" in llm.requests[1].messages[-1].text
    assert f"{workdir}\n" in llm.requests[2].messages[-1].text


async def test_long_output_is_truncated_with_marker(shell_sandbox: ShellSandbox) -> None:
    llm = ScriptedLLM(FMT.command("echo START; seq 1 5000; echo END"), FMT.submit())
    await agent_for(shell_sandbox, llm, max_output_chars=200).run()
    observation = llm.requests[1].messages[-1].text
    assert "START" in observation and "END" in observation
    assert "characters elided ...]" in observation
    assert len(observation) < 400


def test_truncate_middle_keeps_head_and_tail() -> None:
    text = "a" * 50 + "b" * 100 + "c" * 50
    cut = truncate_middle(text, 100)
    assert cut == "a" * 50 + "\n[... 100 characters elided ...]\n" + "c" * 50
    assert truncate_middle("short", 5) == "short"


async def test_format_error_feedback_then_recovery(shell_sandbox: ShellSandbox) -> None:
    llm = ScriptedLLM(
        "I'll just think about it.",
        "```bash\nls\n```\n```bash\npwd\n```",
        LLMResponse(content=None),
        FMT.command("echo recovered"),
        FMT.submit(),
    )
    agent = agent_for(shell_sandbox, llm, max_format_errors=4)
    await agent.run()
    assert agent.exit_status == "submitted"
    assert shell_sandbox.commands == ["echo recovered"]
    feedback = [r.messages[-1].text for r in llm.requests[1:4]]
    assert "no ```bash block" in feedback[0]
    assert "2 ```bash blocks" in feedback[1]
    assert "no text" in feedback[2]
    assert all(f.startswith("Nothing was run.") for f in feedback)
    assert llm.requests[3].messages[-2].role == "assistant"
    assert llm.requests[3].messages[-2].text == ""  # a None reply still keeps turns alternating
    assert "recovered" in llm.requests[4].messages[-1].text


async def test_cut_off_reply_gets_a_hint(shell_sandbox: ShellSandbox) -> None:
    llm = ScriptedLLM(LLMResponse(content="Long thought\n```bash\nls", finish_reason="length"), FMT.submit())
    await agent_for(shell_sandbox, llm).run()
    feedback = llm.requests[1].messages[-1].text
    assert "never closed" in feedback and "cut off" in feedback


async def test_too_many_consecutive_format_errors_end_the_run(shell_sandbox: ShellSandbox) -> None:
    llm = ScriptedLLM("no block", FMT.command("true"), "no block", "still none", "never", "unused")
    agent = agent_for(shell_sandbox, llm, max_format_errors=3)
    await agent.run()
    assert agent.exit_status == "format_errors"
    assert len(llm.requests) == 5  # the good reply in between reset the count
    assert llm.replies == ["unused"]


async def test_step_limit_ends_the_run(shell_sandbox: ShellSandbox) -> None:
    llm = ScriptedLLM(FMT.command("true"), FMT.command("true"), FMT.submit())
    agent = agent_for(shell_sandbox, llm, step_limit=2)
    await agent.run()
    assert agent.exit_status == "step_limit"
    assert len(llm.requests) == 2


@pytest.mark.parametrize(
    "reply",
    [FMT.submit().content, f"Done.\n```sh\n  {SUBMIT_COMMAND}\n```", "```bash\necho   ARES_SUBMIT\n```"],
)
async def test_submit_ends_the_run_without_executing(shell_sandbox: ShellSandbox, reply: str) -> None:
    llm = ScriptedLLM(reply, "unused")
    agent = agent_for(shell_sandbox, llm)
    await agent.run()
    assert agent.exit_status == "submitted"
    assert shell_sandbox.commands == []
    assert len(llm.requests) == 1


async def test_submit_combined_with_other_commands_just_runs(shell_sandbox: ShellSandbox) -> None:
    llm = ScriptedLLM(FMT.command(f"ls && {SUBMIT_COMMAND}"), FMT.submit())
    await agent_for(shell_sandbox, llm).run()
    assert shell_sandbox.commands == [f"ls && {SUBMIT_COMMAND}"]


async def test_timed_out_command_is_reported(shell_sandbox: ShellSandbox) -> None:
    llm = ScriptedLLM(FMT.command("echo begun; sleep 30"), FMT.submit())
    task = make_task(Path(shell_sandbox.spec.workdir), command_timeout_s=0.5)
    agent = BashAgent(shell_sandbox, llm, task, BashAgentConfig())
    await agent.run()
    observation = llm.requests[1].messages[-1].text
    assert "timed out after 0.5 seconds and was killed" in observation
    assert "Exit code" not in observation


async def test_llm_errors_propagate(shell_sandbox: ShellSandbox) -> None:
    llm = ScriptedLLM(FMT.command("true"), RuntimeError("provider down"))
    with pytest.raises(RuntimeError, match="provider down"):
        await agent_for(shell_sandbox, llm).run()


TRICKY = [
    "ls -la",
    "echo 'single' \"double\" `date` $(pwd)",
    "cat <<'EOF' > notes.md\n# Title\n```python\nprint('hi')\n```\nEOF",
    "printf '%s\\n' '```' '````' '`````'",
    "```\n```bash\n```",
    "python - <<EOF\nimport sys\nprint(sys.argv)\nEOF\necho after",
    'for f in *.py; do\n  echo "$f"\ndone',
    "  indented inner line is kept\n    deeper",
]


@pytest.mark.parametrize("command", TRICKY)
def test_action_format_round_trip(command: str) -> None:
    assert parse_action(FMT.command(command).content or "") == command.strip()


async def test_heredoc_with_fences_runs_verbatim(shell_sandbox: ShellSandbox) -> None:
    llm = ScriptedLLM(FMT.command(TRICKY[2]), FMT.submit())
    await agent_for(shell_sandbox, llm).run()
    written = (Path(shell_sandbox.spec.workdir) / "notes.md").read_text()
    assert written == "# Title\n```python\nprint('hi')\n```\n"


def test_action_format_submit_is_the_sentinel() -> None:
    assert parse_action(FMT.submit().content or "") == SUBMIT_COMMAND


def test_factory_and_agent_satisfy_the_protocols(shell_sandbox: ShellSandbox) -> None:
    factory: AgentFactory = BashAgentFactory()
    fmt: ActionFormat = factory.action_format
    agent: CodeAgent = factory(sandbox=shell_sandbox, llm=ScriptedLLM(), task=make_task(Path("/tmp")))
    assert isinstance(agent, BashAgent) and isinstance(fmt, BashActionFormat)
    assert isinstance(shell_sandbox, Sandbox)


def test_config_validates_limits_and_templates() -> None:
    with pytest.raises(ValueError, match="max_output_chars"):
        BashAgentConfig(max_output_chars=0)
    with pytest.raises(ValueError, match="step_limit"):
        BashAgentConfig(step_limit=0)
    with pytest.raises(jinja2.TemplateSyntaxError):
        BashAgentConfig(system_template="{% if x %}")


async def test_custom_templates_are_used(shell_sandbox: ShellSandbox) -> None:
    llm = ScriptedLLM(FMT.command("echo out"), FMT.submit())
    config = {
        "system_template": "SYS {{ submit_command }}",
        "instance_template": "DO {{ instruction }} IN {{ workdir }}",
        "observation_template": "rc={{ exit_code }} {{ output }}",
    }
    await agent_for(shell_sandbox, llm, **config).run()
    assert llm.requests[0].system_prompt == f"SYS {SUBMIT_COMMAND}"
    assert llm.requests[0].messages[0].text.startswith("DO Create hello.txt")
    assert llm.requests[1].messages[-1].text == "rc=0 out"
