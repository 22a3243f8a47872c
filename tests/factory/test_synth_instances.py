"""Synthesized instances: root base commits, diffs that round-trip, rows the SWE loader runs unchanged,
and statements that never give the fix away. On the real toolz repository (the fixture bundle)."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from ares.factory import statements
from ares.factory.instances import (
    commit_base,
    hidden_test_files,
    instance_id,
    instance_row,
    write_instances,
)
from ares.policies import make_policy
from ares.presets import make
from ares.rollout.runner import run_episode
from ares.sandbox.local.images import local_builder
from ares.tasks.swe.harness import swebench_available
from ares.tasks.swe.load import load_swe_instances

SWE = Path(__file__).parents[1] / "fixtures" / "swe"
BUNDLE = SWE / "images" / "toolz" / "toolz.bundle"
ROW = next(json.loads(line) for line in (SWE / "instances.jsonl").open() if "toolz-90001" in line)
MODULE, TESTS = "toolz/itertoolz.py", "toolz/tests/test_itertoolz.py"
GOOD = "    return next(iter(seq))\n"
BAD = "    return next(iter(seq[1:]))\n"


@dataclass(frozen=True)
class Bug:
    strategy: str
    path: str
    qualname: str
    description: str
    after: str
    author: str | None = None


@dataclass(frozen=True)
class Outcome:
    fail_to_pass: tuple[str, ...]
    pass_to_pass: tuple[str, ...]


def git(repo: Path, *args: str, stdin: str | None = None) -> str:
    env = {
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@t",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@t",
    }
    done = subprocess.run(
        ["git", *args], cwd=repo, input=stdin, capture_output=True, text=True, env=env, check=True
    )
    return done.stdout


@pytest.fixture(scope="module")
def toolz(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, Bug]:
    """toolz with the fixture's regression fixed (the pristine commit) and a bug in ``first``."""
    repo = tmp_path_factory.mktemp("toolz") / "repo"
    subprocess.run(["git", "clone", "-q", "-b", ROW["instance_id"], str(BUNDLE), str(repo)], check=True)
    git(repo, "apply", "-", stdin=ROW["patch"])
    git(repo, "commit", "-qam", "pristine")
    pristine = git(repo, "rev-parse", "HEAD").strip()
    source = (repo / MODULE).read_text()
    assert source.count(GOOD) == 1
    bug = Bug("change_slice", MODULE, "first", "first skips an item", source.replace(GOOD, BAD))
    return repo, pristine, bug


def test_base_is_a_root_commit_and_the_diffs_round_trip(toolz: tuple[Path, str, Bug]) -> None:
    repo, pristine, bug = toolz
    base = commit_base(repo, pristine, bug, hidden_test_files([f"{TESTS}::test_first"]), ref="synth-a")
    assert git(repo, "rev-list", "--count", base.commit).strip() == "1"  # no parent: no history to read
    assert git(repo, "rev-parse", "refs/heads/synth-a").strip() == base.commit
    assert TESTS not in git(repo, "ls-tree", "-r", "--name-only", base.commit).split()
    assert base.patch.startswith(f"diff --git a/{MODULE} b/{MODULE}") and f"+{GOOD}" in base.patch
    assert base.test_patch.startswith(f"diff --git a/{TESTS} b/{TESTS}\nnew file mode")
    again = commit_base(repo, pristine, bug, (TESTS,))
    assert again.commit == base.commit  # fixed identity and date: the same bug, the same base
    work = repo.parent / "check"
    subprocess.run(["git", "clone", "-q", str(repo), str(work)], check=True)
    git(work, "checkout", "-q", base.commit)
    git(work, "apply", "-", stdin=base.patch)
    git(work, "apply", "-", stdin=base.test_patch)
    git(work, "add", "-A")
    assert git(work, "diff", "--cached", pristine, "--stat") == ""  # base + fix + tests == pristine


def test_instance_ids_are_stable_and_distinct() -> None:
    assert instance_id("toolz", "a") == instance_id("toolz", "a") != instance_id("toolz", "b")
    assert instance_id("toolz", "a").startswith("synth__toolz-")


LOG = """
=================================== FAILURES ===================================
__________________________________ test_first __________________________________

    def test_first():
>       assert first('ABCDE') == 'A'
E       AssertionError: assert 'B' == 'A'
E         - A
E         + B

toolz/tests/test_itertoolz.py:137: AssertionError
=========================== short test summary info ============================
FAILED toolz/tests/test_itertoolz.py::test_first - AssertionError: assert 'B' == 'A'
"""


def test_statements_say_what_fails_and_never_where(toolz: tuple[Path, str, Bug]) -> None:
    repo, pristine, bug = toolz
    base = commit_base(repo, pristine, bug, ())
    failures = statements.failure_lines(LOG)
    assert failures["test_first"][0] == "AssertionError: assert 'B' == 'A'"
    hidden = statements.template_statement("toolz", [f"{TESTS}::test_first"], failures, tests_visible=False)
    assert "first is broken" in hidden and "assert 'B' == 'A'" in hidden and "test_itertoolz" not in hidden
    visible = statements.template_statement("toolz", [f"{TESTS}::test_first"], failures, tests_visible=True)
    assert f"`{TESTS}::test_first`" in visible
    assert statements.quotes_the_diff(hidden, base.patch, [MODULE]) is None
    leak = hidden + "\nMaybe `return next(iter(seq[1:]))` is wrong in itertoolz.py?"
    assert "names the file" in (statements.quotes_the_diff(leak, base.patch, [MODULE]) or "")
    assert "quotes a changed line" in (statements.quotes_the_diff(leak, base.patch) or "")


pytestmark_env = pytest.mark.skipif(not swebench_available(), reason="needs swebench + unidiff (ares[swe])")


@pytestmark_env
async def test_rows_run_unchanged_in_the_swe_environment(
    toolz: tuple[Path, str, Bug], project_images: None, tmp_path: Path
) -> None:
    """The written instance: oracle 1, null 0, on an image whose /testbed carries every synthesized base."""
    repo, pristine, bug = toolz
    base = commit_base(repo, pristine, bug, (TESTS,), ref="synth-e2e")
    context = tmp_path / "image"
    context.mkdir()
    git(repo, "bundle", "create", "-q", str(context / "synth.bundle"), "refs/heads/synth-e2e")
    (context / "Dockerfile").write_text(
        "FROM ares-swe/toolz:1.2.0\nCOPY synth.bundle /tmp/synth.bundle\n"
        "RUN git -C /testbed fetch -q /tmp/synth.bundle 'refs/heads/*:refs/heads/*' && rm /tmp/synth.bundle\n"
    )
    image = "localhost/ares-test/synth-toolz:1"
    await local_builder().build(context, tags=(image,))
    project = {
        "name": "toolz",
        "version": "1.2.0",
        "licence": "BSD",
        "pristine": pristine,
        "repo": "pytoolz/toolz",
    }
    outcome = Outcome((f"{TESTS}::test_first",), (f"{TESTS}::test_second", f"{TESTS}::test_last"))
    statement = statements.template_statement("toolz", outcome.fail_to_pass, {}, tests_visible=False)
    row = instance_row(
        project=project, bug=bug, outcome=outcome, base=base, image=image, test_paths=[TESTS],
        statement=statement, tests_visible=False,
    )  # fmt: skip
    path = write_instances([row], tmp_path / "instances.jsonl")
    (loaded,) = load_swe_instances(path)
    assert loaded.format == "swebench5" and loaded.metadata["synth"]["strategy"] == "change_slice"
    rewards = {}
    for policy in ("oracle", "null"):
        async with make("swebench", path=path) as env:
            result = await run_episode(env, make_policy(policy), index=0, task=0, seed=0)
        assert result.status == "finished", result.record.get("error")
        rewards[policy] = result.reward
    assert rewards == {"oracle": 1.0, "null": 0.0}


def test_stats_summarize_a_set(toolz: tuple[Path, str, Bug], tmp_path: Path) -> None:
    repo, pristine, bug = toolz
    project = {"name": "toolz", "version": "1.2.0", "pristine": pristine}
    rows = []
    for strategy, visible in (("change_slice", False), ("combo:flip_comparison+off_by_one", True)):
        marked = Bug(strategy, bug.path, bug.qualname, bug.description, bug.after + f"\n# {strategy}\n")
        base = commit_base(repo, pristine, marked, (TESTS,))
        outcome = Outcome((f"{TESTS}::test_first",), (f"{TESTS}::test_second",))
        rows.append(
            instance_row(
                project=project,
                bug=marked,
                outcome=outcome,
                base=base,
                image="x/y:1",
                test_paths=[TESTS],
                statement="first is broken",
                tests_visible=visible,
            )
        )
    write_instances([*rows, {**ROW, "repo": "pytoolz/toolz"}], tmp_path / "instances.jsonl")
    done = subprocess.run(
        [sys.executable, "-m", "ares.cli.main", "tasks", "stats", str(tmp_path), "--json"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    summary = json.loads(done.stdout)
    assert summary["instances"] == 3 and summary["combinations"] == 1 and summary["tests_visible"] == 1
    assert summary["by_project"] == {"pytoolz/toolz": 1, "toolz": 2}
    assert summary["by_strategy"] == {"change_slice": 1, "combo:flip_comparison+off_by_one": 1, "other": 1}
    assert summary["fail_to_pass"] == {"min": 1.0, "median": 1.0, "max": 3.0}
    table = subprocess.run(
        [sys.executable, "-m", "ares.cli.main", "tasks", "stats", str(tmp_path)],
        capture_output=True,
        text=True,
    )
    assert table.returncode == 0 and "3 instances, 1 combinations" in table.stdout
    missing = subprocess.run(
        [sys.executable, "-m", "ares.cli.main", "tasks", "stats", str(tmp_path / "nope")],
        capture_output=True, text=True,
    )  # fmt: skip
    assert missing.returncode == 2 and "does not exist" in missing.stderr
