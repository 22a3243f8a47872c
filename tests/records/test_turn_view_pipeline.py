"""End to end through the real pipeline: traces and every export pair each completion with its prompt.

Runs a real CodeEnvironment (HumanEval, local sandbox) under TrajectoryCollectingEnvironment, and
``ares run`` + ``ares export``, then checks the recorded traces and the exported turn view.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from aligned_data import assert_aligned

import ares
from ares.agents.bash import BashActionFormat
from ares.llm.types import LLMRequest, LLMResponse
from ares.records import JsonDirCollector, JsonlCollector, TrajectoryCollectingEnvironment, load_episodes
from ares.records.exports import load_atif, load_sft_jsonl, load_turns_parquet, turn_rows
from ares.records.rollout_trace import prompt_messages, response_message

pytestmark = pytest.mark.pipeline
FMT = BashActionFormat()
COMMANDS = ("echo first-marker", "echo second-marker", "echo ARES_SUBMIT")


def ares_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    exe = shutil.which("ares", path=str(Path(sys.executable).parent))
    cmd = [exe] if exe else [sys.executable, "-m", "ares.cli.main"]
    return subprocess.run([*cmd, *args], capture_output=True, text=True, timeout=300, env=env)


@pytest.mark.parametrize("kind", ["json", "jsonl"])
async def test_recorded_traces_and_turn_view_are_aligned(tmp_path: Path, kind: str) -> None:
    where = tmp_path / ("dir" if kind == "json" else "events.jsonl")
    collector = JsonDirCollector(where) if kind == "json" else JsonlCollector(where)
    env = TrajectoryCollectingEnvironment(ares.make("humaneval", tasks="0:1"), collector, trace="full")
    async with env:
        ts = await env.reset(task=0, seed=3)
        for command in COMMANDS:
            ts = await env.step(FMT.command(command))
        assert ts.last()
    collector.close()
    (episode,) = load_episodes(where)
    assert [s.step_type for s in episode.steps] == ["FIRST", "MID", "MID", "LAST"]
    first = episode.steps[0].trace
    assert first is not None and first["prompt"] is None and first["response"] is None
    for k in range(1, len(episode.steps)):
        step, before = episode.steps[k], episode.steps[k - 1]
        assert isinstance(before.observation, LLMRequest) and isinstance(step.action, LLMResponse)
        assert step.trace["prompt"] == prompt_messages(before.observation)  # the prompt it answered
        assert step.trace["response"] == response_message(step.action)
        assert step.action.content not in json.dumps(step.trace["prompt"])  # no leak of the target
        policy = step.trace["extra"]["policy"]
        assert set(policy) >= {"latency_s", "prompt_tokens", "completion_tokens", "cost_usd"}
    rows = turn_rows([episode])
    assert_aligned(episode, [r["prompt"] for r in rows], [r["completion"]["content"] for r in rows])
    assert rows[-1]["exit_reason"] == episode.metadata["episode"]["exit_reason"] is not None
    assert episode.status == episode.metadata["episode"]["status"]
    assert {r["episode_status"] for r in rows} == {episode.status}


def test_ares_run_groups_export_to_an_hf_dataset_without_offset(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    datasets = pytest.importorskip("datasets")
    script = tmp_path / "script.jsonl"
    script.write_text("\n".join(json.dumps({"content": f"```bash\n{c}\n```"}) for c in COMMANDS))
    run = tmp_path / "run"
    args = ["run", "humaneval", "--tasks", "0:2", "-k", "2", "-n", "4", "-c", "2", "-p", "scripted"]
    result = ares_cli(*args, "--script", str(script), "--out", str(run))
    assert result.returncode == 0, result.stdout + result.stderr
    episodes = load_episodes(run / "trajectories")
    assert len(episodes) == 4 and {e.metadata.get("group_id") for e in episodes} == {"g0", "g1"}

    out = tmp_path / "turns.parquet"
    exported = ares_cli("export", str(run), "--format", "parquet", "--out", str(out))
    assert exported.returncode == 0, exported.stderr
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    dataset = datasets.load_dataset(
        "parquet", data_files=str(out), split="train", cache_dir=str(tmp_path / "hf")
    )
    rows = [dict(r) for r in dataset]
    assert rows == load_turns_parquet(out)
    assert len(rows) == 4 * len(COMMANDS)
    for episode in episodes:
        mine = sorted((r for r in rows if r["episode_id"] == episode.episode_id), key=lambda r: r["turn"])
        assert_aligned(episode, [r["prompt"] for r in mine], [r["completion"]["content"] for r in mine])
        assert {r["group_id"] for r in mine} == {episode.metadata["group_id"]}
        assert mine[-1]["reward"] == episode.total_reward and mine[-1]["last_turn"]

    assert (
        ares_cli(
            "export", str(run), "--format", "sft", "--per-turn", "--out", str(tmp_path / "s.jsonl")
        ).returncode
        == 0
    )
    sft = load_sft_jsonl(tmp_path / "s.jsonl")
    assert [r.completion[0]["content"] for r in sft] == [
        r["completion"]["content"] for r in turn_rows(episodes)
    ]
    assert ares_cli("export", str(run), "--format", "atif", "--out", str(tmp_path / "atif")).returncode == 0
    assert len(load_atif(tmp_path / "atif")) == 4
