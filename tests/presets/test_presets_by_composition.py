"""Presets are a task source x an agent, each declared once: every pair that fits is a preset, the old
names all still work, and the pair that filled a hole (``swebench-terminal``) plays like the others."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ares.policies import make_policy
from ares.presets import AGENTS, PRESETS, SOURCES, get_preset, make, preset_name
from ares.rollout.runner import run_episode
from ares.tasks.swe.harness import swebench_available

FIXTURES = Path(__file__).parents[1] / "fixtures"
#: The presets that existed before they were composed (each must keep its name and meaning).
BEFORE = [
    "humaneval",
    "harbor",
    "humaneval-tools",
    "harbor-tools",
    "humaneval-terminal",
    "harbor-terminal",
    "humaneval-cli",
    "harbor-cli",
    "humaneval-mswea",
    "harbor-mswea",
    "swebench",
    "swebench-tools",
    "swebench-mswea",
    "swebench-cli",
    "humaneval-single",
    "harbor-single",
    "humaneval-codex",
    "harbor-codex",
    "swebench-codex",
    "humaneval-claude-code",
    "harbor-claude-code",
    "swebench-claude-code",
    "humaneval-opencode",
    "harbor-opencode",
    "swebench-opencode",
]


def test_every_fitting_pair_is_a_preset_and_nothing_else_is() -> None:
    pairs = {preset_name(s, a): (s, a) for a in AGENTS for s in SOURCES if a.fits(s)}
    assert set(PRESETS) == set(pairs)
    for name, (source, agent) in pairs.items():
        preset = PRESETS[name]
        assert (preset.source, preset.agent_kind) == (source.name, agent.name)
        assert preset.options == source.options and preset.task_extras == source.extras
        assert preset.agent is agent.build and preset.agent_extras == agent.extras


def test_the_old_names_all_keep_working_and_the_holes_are_filled() -> None:
    assert set(BEFORE) <= set(PRESETS)
    assert set(PRESETS) - set(BEFORE) == {"swebench-terminal"}
    assert get_preset("harbor-single").agent_kind == "single"


def test_a_single_turn_agent_needs_tasks_that_name_a_solution_file() -> None:
    assert "swebench-single" not in PRESETS  # SWE instances name no solution file
    assert {p.source for p in PRESETS.values() if p.agent_kind == "single"} == {"humaneval", "harbor"}


SOURCE_NAMES = tuple(source.name for source in SOURCES)


def test_presets_prints_the_matrix() -> None:
    """Agents down, sources across; every name whole in an 80-column terminal."""
    env = {**os.environ, "COLUMNS": "80"}
    done = subprocess.run(
        [sys.executable, "-m", "ares.cli.main", "presets"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    header = next(line for line in lines if "agent" in line and "tasks" in line)
    assert [name for name in header.split() if name in SOURCE_NAMES] == list(SOURCE_NAMES)
    rows = {line.split()[1]: line.split()[2:] for line in lines if line.startswith("│ ") and "yes" in line}
    assert list(rows) == [agent.name for agent in AGENTS]
    assert [cell for cell in rows["single"] if cell != "│"] == ["yes", "yes", "-"]  # no swebench-single
    assert all(cells.count("yes") == len(SOURCE_NAMES) for name, cells in rows.items() if name != "single")


@pytest.mark.skipif(not swebench_available(), reason="needs swebench + unidiff (ares[swe])")
@pytest.mark.parametrize(("policy", "reward"), [("oracle", 1.0), ("null", 0.0)])
async def test_the_new_pair_swebench_terminal_plays(policy: str, reward: float) -> None:
    instances = FIXTURES / "swe" / "instances.jsonl"
    async with make("swebench-terminal", path=instances, tasks="pytoolz__toolz-90001") as env:
        result = await run_episode(env, make_policy(policy), index=0, task=0, seed=0)
    assert (result.status, result.reward) == ("finished", reward), result.error
