"""SWE-bench-format tasks end to end on the local backend, on the real fixtures (tests/fixtures/swe).

The oracle resolves and the null policy does not, across four projects; forgeries (editing the hidden
test file, a conftest.py that passes everything, fake PASSED lines from library code, git hooks and
attributes) score 0 or have no effect; an instance whose hidden tests cannot be applied is errored.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from swe_forgeries import FAKE_LINES, HOOKS, PASS_ALL_PLUGIN

from ares.errors import TaskError, UnknownPresetError
from ares.policies import make_policy
from ares.policies.scripted import ReplayPolicy, oracle_command
from ares.presets import make
from ares.rollout.runner import run_episode
from ares.tasks.swe.changes import dropped
from ares.tasks.swe.harness import swebench_available

FIXTURES = Path(__file__).parents[2] / "fixtures" / "swe"
INSTANCES = FIXTURES / "instances.jsonl"
CASES = [
    "pytoolz__toolz-90001",
    "python-poetry__tomlkit-90004",
    "mahmoud__boltons-90001",
    "pallets__click-90005",
]
TOOLZ = "pytoolz__toolz-90001"
TOOLZ_TEST = "toolz/tests/test_itertoolz.py"

pytestmark = pytest.mark.skipif(not swebench_available(), reason="needs swebench + unidiff (ares[swe])")


async def _play(policy: Any, instance: str = TOOLZ, path: Path = INSTANCES) -> Any:
    async with make("swebench", path=path, tasks=instance) as env:
        return await run_episode(env, policy, index=0, task=0, seed=0)


def _episode(result: Any) -> dict[str, Any]:
    return result.record.get("episode", result.record)


def _commands(*commands: str, oracle: bool = False) -> Any:
    """A policy that runs ``commands`` (then the oracle's fix, if asked) and submits."""

    def factory(task: Any, fmt: Any) -> ReplayPolicy:
        steps = [fmt.command(c) for c in commands]
        if oracle:
            steps.append(fmt.command(oracle_command(task)))
        return ReplayPolicy(steps, fmt.submit())

    return factory


@pytest.mark.parametrize("instance", CASES)
async def test_oracle_resolves_and_null_does_not(project_images: None, instance: str) -> None:
    rewards = {}
    for policy in ("oracle", "null"):
        result = await _play(make_policy(policy), instance)
        episode = _episode(result)
        assert result.status == "finished", episode.get("error")
        rewards[policy] = result.reward
        files = episode["verifier_files"]
        grade = json.loads(files["swe/grade.json"])
        terms = episode["reward_terms"]
        assert terms["f2p_passed"] + terms["f2p_failed"] == grade["f2p"]["total"] > 0
        if policy == "oracle":
            assert grade["resolved"] and terms["p2p_failed"] == 0
            assert files["swe/model.patch"].startswith("diff --git a/")  # the gold fix, as the agent's diff
            assert ".egg-info" not in files["swe/model.patch"]
        else:
            assert files["swe/model.patch"] == "" and terms["f2p_passed"] == 0
    assert rewards == {"oracle": 1.0, "null": 0.0}


async def test_the_task_hides_the_tests_and_the_fix(project_images: None) -> None:
    async with make("swebench", path=INSTANCES, tasks=TOOLZ) as env:
        task = env.tasks[0]
        assert task.workdir == "/testbed" and not task.network and task.tests == {}
        row = next(json.loads(line) for line in INSTANCES.read_text().splitlines() if TOOLZ in line)
        assert row["test_patch"] not in task.instruction and "test_tail_of_iterator" not in task.instruction
        assert task.metadata["FAIL_TO_PASS"] == json.loads(row["FAIL_TO_PASS"])
        await env.reset()
        assert env.sandbox is not None
        probe = await env.sandbox.exec(
            f"grep -c test_tail_of_iterator {TOOLZ_TEST}; git log --all --oneline | wc -l;"
            " ls /solution /tests",
            cwd="/testbed",
        )
        assert probe.stdout.split()[:2] == ["0", "1"], probe  # no hidden test, one commit
        assert "No such file" in probe.stderr  # neither the oracle's files nor the tests are there


async def test_editing_the_hidden_test_file_scores_zero(project_images: None) -> None:
    rewrite = f"printf 'def test_tail():\\n    pass\\ndef test_last():\\n    pass\\n' > {TOOLZ_TEST}"
    result = await _play(_commands(rewrite))
    assert result.status == "finished" and result.reward == 0.0
    # the test tree is the base's in the grader's fork, and out of the exported patch too
    assert TOOLZ_TEST not in _episode(result)["verifier_files"]["swe/model.patch"]


async def test_a_conftest_that_passes_everything_scores_zero(project_images: None) -> None:
    write = " && ".join(
        f"cat > {where}/conftest.py <<'EOF'\n{PASS_ALL_PLUGIN}EOF"
        for where in ("/testbed", "/testbed/toolz/tests")
    )
    plugin = "mkdir -p /testbed/fake && printf 'import x\\n' > /testbed/fake/sitecustomize.py"
    result = await _play(_commands(write, plugin))
    episode = _episode(result)
    assert result.status == "finished" and result.reward == 0.0, episode["verifier_files"]
    assert "conftest.py" not in episode["verifier_files"]["swe/model.patch"]


async def test_fake_passed_lines_from_library_code_score_zero(project_images: None) -> None:
    result = await _play(_commands(f"cat >> /testbed/toolz/__init__.py <<'EOF'\n{FAKE_LINES}EOF"))
    episode = _episode(result)
    assert result.status == "finished" and result.reward == 0.0, episode["verifier_files"]
    caught = {"forged_report", "ungradable_exit_code_mismatch"}  # the exit status gives the lines away
    assert caught & set(episode["reward_terms"]), episode["reward_terms"]
    assert "PASSED toolz/tests/test_itertoolz.py::test_tail\n" in episode["verifier_files"]["swe/eval.log"]


@pytest.mark.parametrize(("oracle", "reward"), [(False, 0.0), (True, 1.0)])
async def test_git_hooks_config_and_attributes_have_no_effect(
    project_images: None, oracle: bool, reward: float
) -> None:
    result = await _play(_commands("cd /testbed\n" + HOOKS, oracle=oracle))
    episode = _episode(result)
    assert result.status == "finished" and result.reward == reward, episode["verifier_files"]
    log, patch = episode["verifier_files"]["swe/eval.log"], episode["verifier_files"]["swe/model.patch"]
    assert "HOOK-RAN" not in log and "FILTER-RAN" not in log
    assert ".gitattributes" not in patch and ".git/" not in patch


async def test_hidden_tests_that_do_not_apply_end_the_episode_errored(
    project_images: None, tmp_path: Path
) -> None:
    row = next(json.loads(line) for line in INSTANCES.read_text().splitlines() if TOOLZ in line)
    assert ' mk_rsample(b"a")' in row["test_patch"]
    row["test_patch"] = row["test_patch"].replace(' mk_rsample(b"a")', ' mk_rsample(b"zz")')  # a context line
    (tmp_path / "broken.jsonl").write_text(json.dumps(row) + "\n")
    (tmp_path / "images").symlink_to(FIXTURES / "images")
    result = await _play(make_policy("null"), path=tmp_path / "broken.jsonl")
    episode = _episode(result)
    assert result.status == "errored"
    assert "patch_apply_failed" in episode["error"]["message"]
    assert json.loads(episode["verifier_files"]["swe/grade.json"])["error"] == "patch_apply_failed"


@pytest.mark.parametrize(("oracle", "reward"), [(False, 0.0), (True, 1.0)])
async def test_a_test_dir_turned_into_a_dangling_symlink_is_graded_on_the_merits(
    project_images: None, oracle: bool, reward: float
) -> None:
    """The symlink's target is outside /testbed (not carried): git puts the hidden test file back."""
    hide = "cp -r toolz/tests /tmp/t && rm -rf toolz/tests && ln -s /tmp/t toolz/tests"
    result = await _play(_commands(hide, oracle=oracle))
    episode = _episode(result)
    assert result.status == "finished" and result.reward == reward, episode.get("error")


def test_dropped_paths() -> None:
    kept = ["/testbed/toolz/itertoolz.py", "/testbed/tests/test_x.py", "/testbed/README.md"]
    gone = [
        "/testbed/.git", "/testbed/.git/hooks/post-checkout", "/testbed/sub/.gitattributes",
        "/testbed/conftest.py", "/testbed/a/b/conftest.py", "/testbed/setup.cfg", "/testbed/pyproject.toml",
        "/testbed/x.pth", "/testbed/a/__pycache__", "/testbed/m.pyc", "/testbed/sitecustomize.py",
        "/testbed/toolz.egg-info", "/etc/passwd", "/testbedx/y.py",
    ]  # fmt: skip
    assert [p for p in kept if dropped(p)] == []
    assert [p for p in gone if not dropped(p)] == []


def test_preset_options_are_checked(tmp_path: Path) -> None:
    with pytest.raises(UnknownPresetError, match="--path"):
        make("swebench")
    with pytest.raises(UnknownPresetError, match="no option"):
        make("swebench", path=INSTANCES, dataset="x")
    with pytest.raises(TaskError, match="does not exist"):
        make("swebench", path=tmp_path / "nope.jsonl")
    with pytest.raises(TaskError, match="placeholders"):
        make("swebench", path=INSTANCES, image_template="reg/{repo}:latest")
    env = make("swebench-tools", path=INSTANCES, tasks="0:2", image_template="reg:5000/sweb.{name}:v1")
    assert [t.metadata["image"] for t in env.tasks] == [
        "reg:5000/sweb.mahmoud_1776_boltons-90001:v1", "reg:5000/sweb.mahmoud_1776_boltons-90002:v1",
    ]  # fmt: skip
    image = make("swebench", path=INSTANCES, tasks=TOOLZ).tasks[0].image
    assert image.dockerfile_dir == (FIXTURES / "images" / "instances" / TOOLZ).resolve()
    assert image.image_dirs == ((FIXTURES / "images").resolve(),)  # FROM ares-swe/toolz:1.2.0 -> images/toolz


def _cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "ARES_IMAGE_FALLBACK": os.environ.get("ARES_IMAGE_FALLBACK", "offline")}
    command = [sys.executable, "-m", "ares.cli.main", *args]
    return subprocess.run(command, capture_output=True, text=True, env=env, cwd=cwd, timeout=600)


def test_cli_flags_are_checked() -> None:
    assert "needs an instance file" in _cli("run", "swebench").stderr
    assert "--image-template applies to" in _cli("run", "humaneval", "--image-template", "x/{name}").stderr
    assert "--split applies to" in _cli("run", "harbor", "--split", "test").stderr


def test_cli_run_builds_the_set_images_on_first_use(tmp_path: Path) -> None:
    """From an empty image cache, one command: the project image the instance's Dockerfile starts
    FROM (``ares-swe/toolz:1.2.0``) is built from ``images/toolz/`` beside the instance file."""
    cache = tmp_path / "cache"
    out = tmp_path / "out"
    done = subprocess.run(
        [sys.executable, "-m", "ares.cli.main", "run", "swebench", "--path", str(INSTANCES),
         "--tasks", TOOLZ, "-p", "oracle", "--out", str(out)],
        capture_output=True, text=True, timeout=600, check=False,
        env={**os.environ, "ARES_CACHE_DIR": str(cache), "ARES_IMAGE_FALLBACK": "off"},
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "image images-toolz: built" in done.stdout and "FAILED" not in done.stdout
    result = json.loads(next((out / "episodes").glob("*.json")).read_text())
    assert result["reward"] == 1.0


@pytest.mark.parametrize("policy", ["oracle", "null"])
def test_cli_run(project_images: None, tmp_path: Path, policy: str) -> None:
    out = tmp_path / "out"
    done = _cli(
        "run", "swebench", "--path", str(INSTANCES), "--tasks", TOOLZ, "-p", policy, "--out", str(out)
    )
    assert done.returncode == 0, done.stderr[-2000:]
    (episode,) = (json.loads(p.read_text()) for p in (out / "episodes").glob("*.json"))
    assert episode["reward"] == (1.0 if policy == "oracle" else 0.0)
    shutil.rmtree(out)


UNREADABLE = r"""cd /testbed
mkdir -p toolz/__pycache__/deep toolz/tests/.git/objects && touch toolz/__pycache__/deep/x.pyc
chmod 000 toolz/__pycache__/deep toolz/__pycache__ toolz/tests/.git/objects toolz/tests/.git
"""


@pytest.mark.parametrize(("oracle", "reward"), [(False, 0.0), (True, 1.0)])
async def test_unreadable_dirs_the_grader_drops_do_not_change_the_outcome(
    project_images: None, oracle: bool, reward: float
) -> None:
    """Byte code and nested .git dirs made unreadable are still dropped: the outcome is the fix's."""
    result = await _play(_commands(UNREADABLE, oracle=oracle))
    episode = _episode(result)
    assert result.status == "finished" and result.reward == reward, episode.get("error")
