"""``ares/<preset>`` ids in gymnasium's registry, the "module:id" form, and the missing-extra error."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import gymnasium
import pytest

from ares.errors import UnknownPresetError
from ares.presets import list_presets
from ares.wrappers.gym import AresGymEnv
from ares.wrappers.gym.registration import ENTRY_POINT, VECTOR_ENTRY_POINT, register_presets


def run_python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_every_preset_is_registered_with_both_entry_points() -> None:
    ids = register_presets()  # a second registration changes nothing (and does not warn)
    assert ids == [f"ares/{p.name}" for p in list_presets()]
    for env_id in ids:
        spec = gymnasium.spec(env_id)
        assert spec.namespace == "ares" and spec.entry_point == ENTRY_POINT
        assert spec.vector_entry_point == VECTOR_ENTRY_POINT == "ares.wrappers.gym.vector:make_vector_env"
        assert spec.max_episode_steps is None  # ARES's step_limit truncates (and still verifies) instead
        assert spec.kwargs == {"preset": env_id.removeprefix("ares/")}


def test_gymnasium_make_passes_options_to_ares_make() -> None:
    env = gymnasium.make("ares/humaneval", tasks="0:3", step_limit=5, observation="messages", action="text")
    try:
        inner = env.unwrapped
        assert isinstance(inner, AresGymEnv) and env.spec is not None and env.spec.id == "ares/humaneval"
        ares_env = inner.unwrapped_ares
        assert len(ares_env.tasks) == 3 and ares_env.step_limit == 5  # type: ignore[attr-defined]
        obs, _ = env.reset(seed=0)
        assert obs[0]["role"] == "system"
        truncated = False
        for _ in range(5):
            *_, terminated, truncated, info = env.step("I will look around.\n\n```bash\nls\n```")
        assert truncated and not terminated and info["truncation"] == "step_limit"
    finally:
        env.close()


def test_bad_make_arguments_are_clear_errors() -> None:
    with pytest.raises(UnknownPresetError, match="no option"):
        gymnasium.make("ares/humaneval", colour="blue")
    with pytest.raises(ValueError, match="render_mode"):
        gymnasium.make("ares/humaneval", tasks="0:1", render_mode="rgb_array")


def test_module_prefixed_id_registers_without_an_import_and_plain_id_does_not() -> None:
    result = run_python(
        """
        import gymnasium
        try:
            gymnasium.make("ares/humaneval", tasks="0:1")
        except gymnasium.error.NamespaceNotFound:
            print("plain id: not found")
        env = gymnasium.make("ares.wrappers.gym:ares/humaneval", tasks="0:1")
        obs, info = env.reset()
        print("module id:", type(env.unwrapped).__name__, info["status"])
        env.close()
        """
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["plain id: not found", "module id: AresGymEnv running"]


def test_import_without_gymnasium_names_the_extra() -> None:
    result = run_python(
        """
        import sys
        sys.modules["gymnasium"] = None  # as if it were not installed
        import ares.wrappers  # the parent package needs no extra
        try:
            import ares.wrappers.gym
        except ImportError as e:
            print(e)
        """
    )
    assert result.returncode == 0, result.stderr
    assert "pip install 'ares[gym]'" in result.stdout
