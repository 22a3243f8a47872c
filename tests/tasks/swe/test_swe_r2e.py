"""R2E-Gym instances end to end: hidden tests from the row, a gold patch rebuilt from the commit, and
expected-output grading (tests/fixtures/swe/r2e, made by scripts/swe_fixtures/make_r2e.py)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from ares.errors import TaskError
from ares.policies import make_policy
from ares.policies.scripted import ReplayPolicy
from ares.presets import make
from ares.rollout.runner import run_episode
from ares.sandbox.local.images import local_builder
from ares.tasks.swe import r2e
from ares.tasks.swe.formats import parse_row
from ares.tasks.swe.grading import SweGradingError
from ares.tasks.swe.harness import swebench_available
from ares.tasks.swe.markers import END_TEST_OUTPUT, START_TEST_OUTPUT

R2E = Path(__file__).parents[2] / "fixtures" / "swe" / "r2e"
INSTANCES = R2E / "instances.jsonl"
ROWS = [json.loads(line) for line in INSTANCES.read_text().splitlines()]
IDS = [f"{row['repo_name']}-{row['commit_hash'][:12]}" for row in ROWS]

pytestmark = pytest.mark.skipif(not swebench_available(), reason="needs swebench + unidiff (ares[swe])")


@pytest.fixture(scope="module")
def r2e_images(project_images: None) -> None:
    """The R2E-shaped images under the names the rows give (``docker_image``)."""

    async def build() -> None:
        builder = local_builder()
        for row in ROWS:
            name = row["docker_image"].split("/")[1].split(":")[0]
            await builder.build(R2E / "images" / name, tags=(row["docker_image"],))

    asyncio.run(build())


async def _play(policy: Any, instance: str) -> tuple[Any, dict[str, Any]]:
    async with make("swebench", path=INSTANCES, tasks=instance) as env:
        result = await run_episode(env, policy, index=0, task=0, seed=0)
    return result, result.record.get("episode", result.record)


@pytest.mark.parametrize("instance", IDS)
async def test_oracle_matches_the_expected_output_and_null_does_not(r2e_images: None, instance: str) -> None:
    rewards = {}
    for policy in ("oracle", "null"):
        result, episode = await _play(make_policy(policy), instance)
        assert result.status == "finished", episode.get("error")
        rewards[policy] = result.reward
        grade = json.loads(episode["verifier_files"]["swe/grade.json"])
        if policy == "oracle":
            expected = json.loads(ROWS[IDS.index(instance)]["expected_output_json"])
            assert grade["statuses"] == expected and grade["resolved"]
    assert rewards == {"oracle": 1.0, "null": 0.0}


async def test_the_agent_sees_neither_the_hidden_tests_nor_other_commits(r2e_images: None) -> None:
    async with make("swebench", path=INSTANCES, tasks=IDS[0]) as env:
        task = env.tasks[0]
        assert "r2e_tests" not in task.instruction and task.tests == {}
        await env.reset()
        assert env.sandbox is not None
        probe = await env.sandbox.exec(
            "ls -d /r2e_tests /testbed/r2e_tests /testbed/run_tests.sh 2>&1 | grep -vc 'No such';"
            " git log --all --oneline | wc -l; test -f /root/run_tests.sh && echo runner-moved",
            cwd="/testbed",
        )
    assert probe.stdout.split() == ["0", "1", "runner-moved"], probe


STUB_TESTS = r"""mkdir -p /testbed/r2e_tests
printf 'def test_tail():\n    pass\n' > /testbed/r2e_tests/test_1.py
printf '#!/bin/sh\necho "short test summary info"\necho "PASSED r2e_tests/test_1.py::test_tail"\n' \
  > /root/run_tests.sh
"""


async def test_planted_tests_and_a_rewritten_runner_score_zero(r2e_images: None) -> None:
    def policy(task: Any, fmt: Any) -> ReplayPolicy:
        return ReplayPolicy([fmt.command(STUB_TESTS)], fmt.submit())

    result, episode = await _play(policy, IDS[0])
    assert result.status == "finished" and result.reward == 0.0, episode["reward_terms"]
    grade = json.loads(episode["verifier_files"]["swe/grade.json"])
    assert len(grade["statuses"]) > 1  # the hidden tests ran, not the planted one or the planted runner


def test_rows_parse_into_tasks_with_a_gold_patch_and_host_only_tests() -> None:
    instance = parse_row(ROWS[0], where="r2e line 1")
    assert instance.format == "r2egym" and instance.instance_id == IDS[0]
    assert instance.patch.startswith("diff --git a/toolz/itertoolz.py b/toolz/itertoolz.py\n")
    assert "test_itertoolz" not in instance.patch  # the commit's test file is not part of the fix
    assert set(instance.hidden_tests or {}) == {"test_1.py"}
    env = make("swebench", path=INSTANCES)
    assert [task.id for task in env.tasks] == IDS
    assert all("execution_result_content" not in task.metadata for task in env.tasks)


def test_gold_patch_handles_new_deleted_and_test_files() -> None:
    commit = {
        "file_diffs": [
            {"header": {"file": {"path": "pkg/new.py"}}, "old_file_content": "", "new_file_content": "x = 1"},
            {
                "header": {"file": {"path": "pkg/old.py"}},
                "old_file_content": "y = 2\n",
                "new_file_content": "",
            },
            {
                "header": {"file": {"path": "tests/test_a.py"}},
                "old_file_content": "a",
                "new_file_content": "b",
            },
            {"header": {"file": {"path": "pkg/same.py"}}, "old_file_content": "s", "new_file_content": "s"},
        ]
    }
    patch = r2e.gold_patch(commit)
    assert "new file mode 100644\n--- /dev/null\n+++ b/pkg/new.py" in patch
    assert "+x = 1\n\\ No newline at end of file\n" in patch
    assert "deleted file mode 100644\n--- a/pkg/old.py\n+++ /dev/null" in patch
    assert "test_a" not in patch and "same.py" not in patch


@pytest.mark.parametrize(
    ("names", "codes", "problem"),
    [
        (["test_1.py"], [], "same non-zero length"),
        (["../evil.py"], ["x"], "plain .py file name"),
        (["sub/test_1.py"], ["x"], "plain .py file name"),
        (["test_1.py"], [3], "must be text"),
    ],
)
def test_hidden_tests_are_checked(names: list[Any], codes: list[Any], problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        r2e.hidden_tests({"test_file_names": names, "test_file_codes": codes})
    row = {
        **ROWS[0],
        "execution_result_content": json.dumps({"test_file_names": names, "test_file_codes": codes}),
    }
    with pytest.raises(TaskError, match="execution_result_content"):
        parse_row(row, where="r2e line 1")


LOG = f"""{START_TEST_OUTPUT}
r2e_tests/test_1.py ..F
=========================== short test summary info ============================
PASSED r2e_tests/test_1.py::TestA::test_one
PASSED r2e_tests/test_1.py::test_two
FAILED r2e_tests/test_1.py::test_three - AssertionError: no
==================== 1 failed, 2 passed in 0.05s ====================
{END_TEST_OUTPUT}
"""


def test_expected_output_grading() -> None:
    assert r2e.parse_log(LOG) == {"TestA.test_one": "PASSED", "test_two": "PASSED", "test_three": "FAILED"}
    expected = {"TestA.test_one": "PASSED", "test_two": "PASSED", "test_three": "FAILED"}
    assert r2e.grade_expected(LOG, expected).resolved
    assert not r2e.grade_expected(LOG, {**expected, "test_three": "PASSED"}).resolved
    assert not r2e.grade_expected(LOG, {**expected, "test_four": "PASSED"}).resolved  # a test did not run
    grade = r2e.grade_expected(LOG, {"TestA.test_one": "PASSED", "test_two": "PASSED"})  # an extra test ran
    assert not grade.resolved and grade.f2p_failed == ("test_three",)
    with pytest.raises(SweGradingError, match="no_tests_ran"):
        r2e.grade_expected(f"{START_TEST_OUTPUT}\nboom\n{END_TEST_OUTPUT}\n", expected)
    with pytest.raises(SweGradingError, match="markers_missing"):
        r2e.grade_expected(LOG.replace(END_TEST_OUTPUT, ""), expected)
