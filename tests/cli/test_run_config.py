"""RunConfig: one field per ``ares run`` flag, checked as it is built, and what the flags imply."""

from __future__ import annotations

import dataclasses
import inspect
from pathlib import Path

import pytest
import typer

from ares.cli.main import run
from ares.cli.run_config import RunConfig
from ares.rollout.runner import DEFAULT_POLICY_TIMEOUT_S


def test_the_fields_are_the_flags_by_name_with_the_same_defaults() -> None:
    fields = {f.name: f.default for f in dataclasses.fields(RunConfig) if f.init}
    parameters = inspect.signature(run).parameters
    assert list(fields) == list(parameters)
    for name, parameter in parameters.items():
        if parameter.default is not inspect.Parameter.empty:
            assert fields[name] == parameter.default, name


def test_a_config_is_frozen() -> None:
    config = RunConfig("humaneval")
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.seed = 3  # type: ignore[misc]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"preset": "nope"}, "unknown preset 'nope'"),
        ({"policy": "nope"}, "unknown policy 'nope'"),
        ({"trace": "loud"}, "--rollout-trace must be one of: off, basic, full"),
        ({"resume": True}, "--resume needs --out DIR"),
        ({"retries": 2}, "go with --ray"),
        ({"span_level": "off"}, "--span-level must be basic or full"),
        ({"track": ["nope:x"]}, "--track"),
        ({"model": "m"}, "--model applies to --policy openai only"),
        (
            {"path": Path(".")},
            "--path applies to the harbor and swebench presets (harbor, harbor-*, swebench, ",
        ),
    ],
)
def test_a_mistake_is_refused_as_the_config_is_built(
    options: dict[str, object], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(typer.Exit) as exited:
        RunConfig(**{"preset": "humaneval", **options})  # type: ignore[arg-type]
    assert exited.value.exit_code == 2
    assert message in capsys.readouterr().err


def test_the_policy_timeout_follows_the_http_timeout_and_zero_means_none() -> None:
    assert RunConfig("humaneval").policy_timeout_s == DEFAULT_POLICY_TIMEOUT_S
    slow = RunConfig("humaneval", policy="openai", model="m", timeout=1000.0)
    assert slow.policy_timeout_s == 4000.0
    assert RunConfig("humaneval", policy_timeout=0.0).policy_timeout_s is None
    assert RunConfig("humaneval", policy_timeout=5.0).policy_timeout_s == 5.0


def test_each_policy_gets_only_its_own_options(tmp_path: Path) -> None:
    script = tmp_path / "s.jsonl"
    assert RunConfig("humaneval", policy="scripted", script=script).policy_options == {"script": script}
    api = RunConfig("humaneval", policy="openai", model="m", temperature=0.5, timeout=3.0)
    assert api.policy_options == {"model": "m", "temperature": 0.5, "timeout_s": 3.0}
    local = RunConfig("humaneval", policy="local:model.gguf", max_tokens=7)
    assert local.policy_options == {"max_tokens": 7}
    assert RunConfig("humaneval").policy_options == {}


def test_episodes_default_to_one_group_per_task_and_groups_are_whole(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert RunConfig("humaneval", group_size=4).total_episodes(3) == 12
    assert RunConfig("humaneval", episodes=8, group_size=4).total_episodes(3) == 8
    with pytest.raises(typer.Exit):
        RunConfig("humaneval", episodes=6, group_size=4).total_episodes(3)
    assert "-n 6 is not a multiple of --group-size 4" in capsys.readouterr().err


def test_the_output_directory_is_out_or_a_new_one_under_runs(tmp_path: Path) -> None:
    assert RunConfig("humaneval", out=tmp_path).out_dir() == tmp_path
    made = RunConfig("humaneval", policy="null").out_dir()
    assert made.parent == Path("runs") and made.name.startswith("humaneval-null-")
