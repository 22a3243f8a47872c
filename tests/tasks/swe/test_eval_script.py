"""The eval script and apply cascade, run for real with bash and git on a tiny repository.

The repository plays /testbed: base commit with a bug, a gold ``patch`` fixing it, a ``test_patch`` adding
the F2P test and editing an existing test file. The agent's "change" is applied with the cascade script,
then the eval script runs pytest between the markers; the log is graded by ARES and by swebench.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ares.tasks.swe import markers
from ares.tasks.swe.eval_script import (
    APPLY_FAILED_EXIT_CODE,
    OFFICIAL_ENV_SETUP,
    PatchFile,
    apply_cascade_script,
    make_eval_script,
    patch_files,
    runner_args,
)
from ares.tasks.swe.grading import ResolvedStatus, SweGradingError, grade_log
from ares.tasks.swe.harness import swebench_available

PYTEST = f"{sys.executable} -m pytest -rA -p no:cacheprovider"
F2P = ["tests/test_new.py::test_mul_negative"]
P2P = ["tests/test_calc.py::test_add", "tests/test_calc.py::test_mul"]


def _git(cwd: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t"}
    env |= {"GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True).stdout


def _bash(script: str, tmp: Path, name: str) -> subprocess.CompletedProcess[str]:
    path = tmp / name
    path.write_text(script)
    return subprocess.run(["bash", str(path)], capture_output=True, text=True, timeout=120)


@pytest.fixture
def repo(tmp_path: Path) -> dict:
    """A git repo at base_commit, plus its gold patch and test_patch made by real commits."""
    root = tmp_path / "testbed"
    (root / "tests").mkdir(parents=True)
    _git(root, "init", "-q")
    (root / "pytest.ini").write_text("[pytest]\npythonpath = .\n")
    (root / "calc.py").write_text(
        "def add(a, b):\n    return a + b\n\n\ndef mul(a, b):\n    return abs(a * b)\n"
    )
    test_calc = "from calc import add, mul\n\n\ndef test_add():\n    assert add(1, 2) == 3\n\n\n"
    test_calc += "def test_mul():\n    assert mul(2, 3) == 6\n"
    (root / "tests" / "test_calc.py").write_text(test_calc)
    _git(root, "add", "-A")
    _git(root, "commit", "-qm", "base")
    base = _git(root, "rev-parse", "HEAD").strip()
    (root / "calc.py").write_text("def add(a, b):\n    return a + b\n\n\ndef mul(a, b):\n    return a * b\n")
    patch = _git(root, "diff")
    _git(root, "checkout", "-q", "--", ".")
    (root / "tests" / "test_new.py").write_text(
        "from calc import mul\n\n\ndef test_mul_negative():\n    assert mul(-2, 3) == -6\n"
    )
    (root / "tests" / "test_calc.py").write_text(
        test_calc + "\n\ndef test_add_zero():\n    assert add(0, 0) == 0\n"
    )
    _git(root, "add", "-A")
    test_patch = _git(root, "diff", "--cached")
    _git(root, "reset", "-q", "--hard")
    assert not (root / "tests" / "test_new.py").exists()
    return {"root": root, "base": base, "patch": patch, "test_patch": test_patch, "tmp": tmp_path}


def test_patch_files_from_headers(repo: dict) -> None:
    files = patch_files(repo["test_patch"])
    assert files == [PatchFile("tests/test_calc.py"), PatchFile("tests/test_new.py", added=True)]
    gone = (
        "diff --git a/x.py b/x.py\ndeleted file mode 100644\n--- a/x.py\n+++ /dev/null\n@@ -1 +0,0 @@\n-x\n"
    )
    assert patch_files(gone) == [PatchFile("x.py", deleted=True)]
    assert runner_args(["a/test_x.py", "a/data.json"]) == ["a/test_x.py"]
    assert runner_args(["tests/queries/test_q.py"], "django") == ["queries.test_q"]
    unidiff = pytest.importorskip("unidiff", reason="unidiff not installed: cross-check skipped")
    ps = unidiff.PatchSet(repo["test_patch"])
    assert [(f.path, f.is_added_file) for f in ps] == [(f.path, f.added) for f in files]


def _run(repo: dict, agent_patch: str, name: str) -> str:
    root, tmp = repo["root"], repo["tmp"]
    (tmp / f"{name}.diff").write_text(agent_patch)
    applied = _bash(
        apply_cascade_script(str(tmp / f"{name}.diff"), workdir=str(root)), tmp, f"{name}-apply.sh"
    )
    assert applied.returncode == 0, applied.stdout + applied.stderr
    script = make_eval_script(repo["base"], repo["test_patch"], PYTEST, workdir=str(root))
    proc = _bash(script, tmp, f"{name}-eval.sh")
    return proc.stdout + proc.stderr


@pytest.mark.skipif(not swebench_available(), reason="swebench==5.0.2 + unidiff not installed")
def test_gold_patch_resolves_and_null_does_not(repo: dict) -> None:
    from test_grading import _check_against_harness  # same directory; rootdir import mode

    log = _run(repo, repo["patch"], "gold")
    assert markers.START_TEST_OUTPUT in log and f"{markers.TEST_EXIT_CODE}: 0" in log
    gold = _check_against_harness(log, F2P, P2P)
    assert gold is not None and gold.status is ResolvedStatus.FULL
    # the eval script put the test files back afterwards
    assert not (repo["root"] / "tests" / "test_new.py").exists()
    assert _git(repo["root"], "status", "--porcelain") == " M calc.py\n"

    _git(repo["root"], "checkout", "-q", "--", ".")
    null = _check_against_harness(_run(repo, "", "null"), F2P, P2P)
    assert null is not None and null.status is ResolvedStatus.NO and null.f2p_failed == tuple(F2P)


@pytest.mark.skipif(not swebench_available(), reason="swebench==5.0.2 + unidiff not installed")
def test_agent_edits_to_test_files_are_reset(repo: dict) -> None:
    root = repo["root"]
    # The agent "fixes" nothing but rewrites the tests: a passing F2P file and a weakened P2P file.
    (root / "tests" / "test_new.py").write_text("def test_mul_negative():\n    pass\n")
    (root / "tests" / "test_calc.py").write_text("def test_add():\n    pass\n\n\ndef test_mul():\n    pass\n")
    log = _run(repo, "", "cheat")
    grade = grade_log(log, F2P, P2P)
    assert not grade.resolved and grade.f2p_failed == tuple(F2P)


def test_apply_cascade_reports_unapplicable_patch(repo: dict) -> None:
    bogus = "--- a/calc.py\n+++ b/calc.py\n@@ -1,2 +1,2 @@\n-def nothing_like_this():\n-    pass\n+x\n+y\n"
    (repo["tmp"] / "bogus.diff").write_text(bogus)
    script = apply_cascade_script(str(repo["tmp"] / "bogus.diff"), workdir=str(repo["root"]))
    proc = _bash(script, repo["tmp"], "bogus.sh")
    assert proc.returncode == APPLY_FAILED_EXIT_CODE
    assert markers.APPLY_PATCH_FAIL in proc.stdout


def test_fuzzy_patch_applies_through_the_cascade(repo: dict) -> None:
    root = repo["root"]
    shifted = repo["patch"].replace("@@ -2,5 +2,5 @@", "@@ -3,5 +3,5 @@")
    (repo["tmp"] / "shifted.diff").write_text(shifted)
    proc = _bash(apply_cascade_script(str(repo["tmp"] / "shifted.diff"), str(root)), repo["tmp"], "s.sh")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "return a * b" in (root / "calc.py").read_text()


@pytest.mark.skipif(not swebench_available(), reason="swebench==5.0.2 + unidiff not installed")
def test_unapplicable_test_patch_is_an_error(repo: dict) -> None:
    script = make_eval_script(
        repo["base"],
        repo["test_patch"].replace("    assert mul(2, 3) == 6", "    assert mul(7, 7) == 1"),
        PYTEST,
    )
    script = script.replace("cd /testbed", f"cd {repo['root']}")
    log = _bash(script, repo["tmp"], "badtp.sh").stdout
    with pytest.raises(SweGradingError) as info:
        grade_log(log, F2P, P2P)
    assert info.value.reason == "patch_apply_failed"


def test_env_setup_lines_come_first(repo: dict) -> None:
    script = make_eval_script(repo["base"], repo["test_patch"], env_setup=OFFICIAL_ENV_SETUP)
    lines = script.splitlines()
    assert lines[2:4] == list(OFFICIAL_ENV_SETUP) and lines[4].startswith("cd /testbed")
    assert "pytest -rA tests/test_calc.py tests/test_new.py" in script
    assert script.count(markers.START_TEST_OUTPUT) == 1 and "set -x" not in script


def test_the_script_is_a_function_of_the_instance_and_its_delimiter_is_not_in_the_patch() -> None:
    patch = "diff --git a/t.py b/t.py\n--- a/t.py\n+++ b/t.py\n@@ -1 +1 @@\n-x\n+y\n"
    script = make_eval_script("abc123", patch)
    assert script == make_eval_script("abc123", patch)  # a synthesized set is byte-for-byte reproducible
    tag = script.split("<<'", 1)[1].split("'", 1)[0]
    hostile = patch + f"+{tag}\n"  # a patch that quotes the delimiter of the plain one
    other = make_eval_script("abc123", hostile).split("<<'", 1)[1].split("'", 1)[0]
    assert other.startswith("ARES_EOF_") and other not in hostile
