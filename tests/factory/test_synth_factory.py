"""``ares tasks synth`` end to end on toolz (the fixture bundle's release tree): candidates, forks,
combinations, instances that the SWE environment grades (oracle 1, null 0), a resumed rerun that
validates nothing again, and the CLI's stats of the set."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from synth_sources import plain_dir

from ares.factory.factory import SynthOptions, synthesize
from ares.factory.stats import set_stats
from ares.policies import make_policy
from ares.presets import make
from ares.rollout.runner import run_episode
from ares.sandbox.local.images import image_sandbox, local_builder
from ares.tasks.swe.harness import swebench_available

pytestmark = pytest.mark.skipif(not swebench_available(), reason="needs swebench + unidiff (ares[swe])")
SOURCE_PROBE = """cd /testbed
echo "all=$(git log --all --format=%H | wc -l)" "refs=$(git for-each-ref | wc -l)"
git cat-file -e {pristine} 2>/dev/null && echo pristine=present || echo pristine=absent
git cat-file -e {blob} 2>/dev/null && echo blob=present || echo blob=absent
test -e {hidden} && echo hidden=present || echo hidden=absent
timeout 60 pip download --no-deps -q -d /tmp/dl toolz==1.2.0 >/dev/null 2>&1 \\
  && echo pip=fetched || echo pip=failed
echo "archives=$(find / -xdev \\( -name 'toolz-*.whl' -o -name 'toolz-*.tar.gz' -o -name '*.bundle' \\) \\
  2>/dev/null | wc -l)"
"""
OPTIONS = SynthOptions(
    strategies=("flip_comparison", "off_by_one", "remove_statement"),
    max_candidates=8,
    per_function=1,
    combinations=2,
    timeout_s=60,
)


async def test_a_project_becomes_graded_instances(clones: dict[str, Path], tmp_path: Path) -> None:
    source = plain_dir(clones["toolz"], tmp_path / "toolz")
    # A test whose id comes from the clock (marshmallow has one): it passes, but no later run has it.
    (source / "toolz/tests/test_clock.py").write_text(
        "import time\n\nimport pytest\n\n\n"
        "@pytest.mark.parametrize('stamp', [time.strftime('%H:%M:%S') + str(time.time_ns())])\n"
        "def test_stamp(stamp):\n    assert stamp\n"
    )
    out = tmp_path / "set"
    said: list[str] = []
    report = await synthesize(str(source), out, OPTIONS, say=said.append)
    rows = [json.loads(line) for line in (out / "instances.jsonl").read_text().splitlines()]
    assert report.instances == len(rows) > 0 and report.singles.kept > 0
    assert {row["synth"]["strategy"].removeprefix("combo:").split("+")[0] for row in rows} <= set(
        OPTIONS.strategies or ()
    )
    for row in rows:
        hidden = row["synth"]["hidden_tests"]
        assert hidden and all(f"+++ b/{path}" in row["test_patch"] for path in hidden)
        assert row["synth"]["fail_to_pass"] == len(json.loads(row["FAIL_TO_PASS"])) >= 1
        assert row["synth"]["qualname"] not in ("", None) and row["image"] == report.image
    assert json.loads((out / "synth.json").read_text())["instances"] == len(rows)
    assert [name.split("[")[0] for name in report.unstable_tests] == [
        "toolz/tests/test_clock.py::test_stamp"
    ] * 2
    assert not any("test_clock" in row["FAIL_TO_PASS"] + row["PASS_TO_PASS"] for row in rows)

    env = make("swebench", path=out)
    assert [task.id for task in env.tasks] == [row["instance_id"] for row in rows]
    first = rows[0]["instance_id"]
    rewards = {}
    for policy in ("oracle", "null"):
        async with make("swebench", path=out, tasks=first) as episode_env:
            result = await run_episode(episode_env, make_policy(policy), index=0, task=0, seed=0)
        assert result.status == "finished", result.record.get("error")
        rewards[policy] = result.reward
    assert rewards == {"oracle": 1.0, "null": 0.0}

    # Hostile: from the agent's sandbox the original source is out of reach (history, objects, the
    # hidden tests, PyPI, archives); the same probe on the set's own image finds it, so it is not hollow.
    row = rows[0]
    fixed_path = row["patch"].split(" b/", 1)[1].split("\n", 1)[0]
    repo = out / "work" / "repo"
    original = git_out(repo, "rev-parse", f"{row['environment_setup_commit']}:{fixed_path}")
    probe = SOURCE_PROBE.format(
        pristine=row["environment_setup_commit"], blob=original, hidden=row["synth"]["hidden_tests"][0]
    )
    async with make("swebench", path=out, tasks=first) as probe_env:
        await probe_env.reset()
        assert probe_env.sandbox is not None
        seen = (await probe_env.sandbox.exec(probe, cwd="/testbed", timeout_s=120)).stdout.split()
    assert seen == [
        "all=1",
        "refs=0",
        "pristine=absent",
        "blob=absent",
        "hidden=absent",
        "pip=failed",
        "archives=0",
    ]
    raw = image_sandbox(await local_builder().from_name(report.image))
    await raw.start()
    try:
        unclean = (await raw.exec(probe, cwd="/testbed", timeout_s=120)).stdout.split()
    finally:
        await raw.stop()
    assert "pristine=present" in unclean and "blob=present" in unclean and "hidden=present" in unclean

    again = await synthesize(str(source), out, OPTIONS, say=said.append)  # resumed: nothing runs twice
    assert again.singles.ran == 0 and again.instances == report.instances
    assert again.image == report.image  # the tag is a function of what the image holds
    assert set_stats(out).instances == len(rows)

    # Another set of the same release (fewer bugs) gets its own image; the first set still grades.
    other = await synthesize(
        str(source), tmp_path / "other", replace(OPTIONS, max_candidates=2, combinations=0), say=said.append
    )
    assert other.image != report.image and other.image.startswith("ares-synth/toolz:")
    async with make("swebench", path=out, tasks=first) as episode_env:
        result = await run_episode(episode_env, make_policy("oracle"), index=0, task=0, seed=0)
    assert (result.status, result.reward) == ("finished", 1.0), result.record.get("error")


def git_out(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True
    ).stdout.strip()


def test_the_cli_refuses_unknown_strategies(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "ares.cli.main", "tasks", "synth", "toolz==1.2.0", "--out", str(tmp_path),
         "--strategies", "flip_comparison,teleport"],
        capture_output=True, text=True,
    )  # fmt: skip
    assert done.returncode == 2 and "unknown strategies: teleport" in done.stderr
