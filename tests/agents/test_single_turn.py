"""The single-turn agent: its extraction rule, and whole episodes on real local sandboxes and tasks."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import jinja2
import pytest

import ares
from ares.agents import (
    BashAgentFactory,
    SingleTurnActionFormat,
    SingleTurnAgentConfig,
    SingleTurnAgentFactory,
    SolutionFormat,
    extract_solution,
)
from ares.envs.code_env import CodeEnvironment
from ares.errors import AgentError, PolicyError, TaskError
from ares.llm.types import LLMRequest, LLMResponse
from ares.policies import make_policy
from ares.policies.scripted import reference_solution
from ares.tasks.harbor import load_harbor_task
from ares.tasks.humaneval import load_humaneval

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "harbor-single" / "add-numbers"
FMT = SingleTurnActionFormat()

STUB = 'from typing import List\n\n\ndef total(xs: List[int]) -> int:\n    """Sum of xs."""\n'
BODY = "    result = 0\n    for x in xs:\n        result += x\n    return result\n"
SOLVED = STUB + BODY
FULL = 'def total(xs: List[int]) -> int:\n    """Sum of xs."""\n    return sum(xs)\n'
HUMANEVAL_0_BODY = (
    "    for i, a in enumerate(numbers):\n"
    "        for b in numbers[i + 1 :]:\n"
    "            if abs(a - b) < threshold:\n"
    "                return True\n"
    "    return False\n"
)


def run(code: str) -> int:
    """total([1, 2, 3]) as defined by ``code``: the extracted file must really work."""
    namespace: dict[str, object] = {}
    exec(compile(code, "solution.py", "exec"), namespace)
    return namespace["total"]([1, 2, 3])  # type: ignore[operator]


# ---------------------------------------------------------------- extraction rule


def test_fenced_full_solution_gets_the_stubs_missing_imports() -> None:
    reply = f"Here is the solution:\n\n```python\n{FULL}```\n\nIt sums the list."
    got = extract_solution(reply, STUB, "total")
    assert got == "from typing import List\n\n\n" + FULL
    assert run(got) == 6


def test_full_solution_with_its_own_imports_is_kept_as_it_is() -> None:
    code = "from typing import List\nimport math\n\n\n" + FULL
    assert extract_solution(f"```py\n{code}```", STUB, "total") == code


def test_unfenced_full_solution_drops_the_prose_before_the_code() -> None:
    got = extract_solution(f"Sure! The answer is:\n{FULL}", STUB, "total")
    assert got.endswith(FULL) and "Sure" not in got
    assert run(got) == 6


def test_body_only_reply_fills_the_stub_function() -> None:
    assert extract_solution(BODY, STUB, "total") == SOLVED  # unfenced, already indented
    dedented = "result = 0\nfor x in xs:\n    result += x\nreturn result\n"
    assert extract_solution(f"```python\n{dedented}```", STUB, "total") == SOLVED
    assert run(SOLVED) == 6


def test_body_replaces_placeholder_statements_and_keeps_what_follows() -> None:
    stub = 'def total(xs):\n    """Sum."""\n    pass\n\n\nLIMIT = 3\n'
    assert extract_solution("return sum(xs)", stub, "total") == (
        'def total(xs):\n    """Sum."""\n    return sum(xs)\n\n\nLIMIT = 3\n'
    )


def test_of_several_blocks_the_last_defining_the_entry_point_wins() -> None:
    first = "def total(xs):\n    return 0\n"
    usage = "print(total([1, 2, 3]))\n"
    reply = f"```python\n{first}```\nFixed:\n```python\n{FULL}```\nUsage:\n```python\n{usage}```\n"
    got = extract_solution(reply, STUB, "total")
    assert got.endswith(FULL) and run(got) == 6


def test_without_a_defining_block_the_longest_python_block_is_the_body() -> None:
    reply = f"```bash\npython -c 'print(1)' && echo a long shell line\n```\n```\n{BODY}```\n```python\nx\n```"
    assert extract_solution(reply, STUB, "total") == SOLVED


def test_a_block_cut_off_by_the_length_limit_still_counts() -> None:
    reply = f"```python\n{FULL}"
    assert extract_solution(reply, STUB, "total").endswith(FULL)


def test_longer_fences_hold_backtick_lines() -> None:
    code = 'def total(xs):\n    """```"""\n    return sum(xs)\n'
    assert extract_solution(FMT.solution(code).content or "", "", "total") == code


@pytest.mark.parametrize("reply", ["", "   \n", "```python\n```", "```python\n\n"])
def test_a_reply_without_code_leaves_the_stub(reply: str) -> None:
    assert extract_solution(reply, STUB, "total") == STUB


def test_the_entry_point_defaults_to_the_stubs_last_function() -> None:
    stub = "def helper():\n    return 1\n\n\ndef total(xs):\n    ...\n"
    assert run(extract_solution("return sum(xs) * helper()", stub, None)) == 6
    assert extract_solution("x = 1", "", None) == "x = 1\n"  # nothing to combine with


def test_crlf_replies_are_normalized() -> None:
    assert extract_solution(BODY.replace("\n", "\r\n"), STUB, "total") == SOLVED


def test_every_humaneval_reference_round_trips_through_the_oracle_reply() -> None:
    for task in load_humaneval():
        reference = reference_solution(task)
        got = extract_solution(FMT.solution(reference).content or "", task.workspace["solution.py"],
                               task.metadata["entry_point"])  # fmt: skip
        assert got.strip("\n") == reference.strip("\n"), task.id


# ---------------------------------------------------------------- action format and oracle


def test_action_format() -> None:
    assert isinstance(FMT, SolutionFormat)
    assert not isinstance(BashAgentFactory().action_format, SolutionFormat)
    assert FMT.submit() == LLMResponse(content="")
    with pytest.raises(PolicyError, match="runs no commands"):
        FMT.command("ls")


def test_oracle_needs_a_reference_solution_file() -> None:
    task = load_humaneval()[0]
    with pytest.raises(PolicyError, match="declares no solution file"):
        make_policy("oracle")(dataclasses.replace(task, solution_file=None), FMT)
    with pytest.raises(PolicyError, match=r"has no solution\.py"):
        make_policy("oracle")(dataclasses.replace(task, solution={"solve.sh": "true"}), FMT)


# ---------------------------------------------------------------- whole episodes


@pytest.fixture
async def humaneval():
    env = ares.make("humaneval", tasks="0:5", agent=SingleTurnAgentFactory())
    yield env
    await env.close()


async def play(env: CodeEnvironment, policy: str, task: int | str = 0) -> ares.TimeStep:
    ts = await env.reset(task=task)
    assert env.task is not None
    pol = make_policy(policy)(env.task, env.action_format)
    steps = 0
    while not ts.last():
        ts = await env.step(await pol.act(ts.observation))
        steps += 1
    assert steps == 1  # one reply, then the verifier
    return ts


async def test_humaneval_oracle_scores_one_and_null_zero(humaneval: CodeEnvironment) -> None:
    for task in range(5):
        assert (await play(humaneval, "oracle", task)).reward == 1.0
        assert (await play(humaneval, "null", task)).reward == 0.0


async def test_the_one_request_shows_the_task_once(humaneval: CodeEnvironment) -> None:
    ts = await humaneval.reset(task=0)
    request = ts.observation
    assert isinstance(request, LLMRequest)
    assert [m.role for m in request.messages] == ["user"]
    text = request.messages[0].text
    assert text.count("def has_close_elements(") == 1  # the instruction already quotes the stub
    assert "complete new content of `solution.py`" in text
    assert request.metadata == {"agent": "single_turn", "turn": 0}
    assert "one reply" in (request.system_prompt or "")


async def test_a_correct_body_reply_scores_one(humaneval: CodeEnvironment) -> None:
    await humaneval.reset(task=0)
    ts = await humaneval.step(LLMResponse(content=f"```python\n{HUMANEVAL_0_BODY}```"))
    assert ts.last() and ts.reward == 1.0


async def test_a_wrong_reply_scores_zero(humaneval: CodeEnvironment) -> None:
    await humaneval.reset(task=0)
    wrong = "def has_close_elements(numbers, threshold):\n    return False\n"
    ts = await humaneval.step(LLMResponse(content=f"```python\n{wrong}```"))
    assert ts.last() and ts.reward == 0.0


async def test_harbor_task_declares_its_solution_file() -> None:
    task = load_harbor_task(FIXTURE)
    assert task.solution_file == "solution.py" and task.metadata["entry_point"] == "add"
    async with ares.make("harbor", path=FIXTURE, agent=SingleTurnAgentFactory()) as env:
        assert (await play(env, "oracle")).reward == pytest.approx(1.0)
        assert (await play(env, "null")).reward == 0.0
        ts = await env.reset()
        assert "def add(a: int, b: int) -> int:" in ts.observation.messages[0].text  # the stub, shown
        ts = await env.step(LLMResponse(content="```python\nreturn a + b\n```"))
        assert ts.last() and ts.reward == pytest.approx(1.0)


@pytest.mark.parametrize("value", ['"/etc/passwd"', '"../x.py"', '""', "3"])
def test_harbor_rejects_a_bad_solution_file(tmp_path: Path, value: str) -> None:
    task_dir = tmp_path / "t"
    (task_dir / "tests").mkdir(parents=True)
    (task_dir / "tests" / "test.sh").write_text("#!/bin/sh\n")
    (task_dir / "instruction.md").write_text("Do it.\n")
    (task_dir / "task.toml").write_text(f"[ares.agent]\nsolution_file = {value}\n")
    with pytest.raises(TaskError, match=r"\[ares.agent\] solution_file"):
        load_harbor_task(task_dir)


async def test_a_task_without_a_solution_file_fails_at_reset() -> None:
    hello = FIXTURE.parents[1] / "harbor" / "hello-file"
    async with ares.make("harbor", path=hello, agent=SingleTurnAgentFactory()) as env:
        with pytest.raises(AgentError, match=r"declares no solution file.*solution_file"):
            await env.reset()


def test_config_rejects_a_broken_template() -> None:
    with pytest.raises(jinja2.TemplateSyntaxError):
        SingleTurnAgentConfig(instance_template="{% if %}")


async def test_forks_ask_the_same_and_score_their_own_replies() -> None:
    async with ares.make("humaneval", tasks="0", agent=SingleTurnAgentFactory()) as env:
        first = (await env.reset(task=0)).observation
        snapshot = await env.snapshot()
        assert snapshot.agent_state == {"agent": "single_turn", "version": 1}
        await snapshot.discard()
        [fork] = await env.fork(1)
        async with fork:
            assert fork.observation == first
            right = await fork.step(LLMResponse(content=HUMANEVAL_0_BODY))
            wrong = await env.step(LLMResponse(content="return True"))
            assert (right.reward, wrong.reward) == (1.0, 0.0)
