"""Grading SWE-bench-style logs: real pytest runs, a real eval script in a git repo, harness cross-checks.

Every log graded here is also graded by the official ``swebench`` ``get_eval_report`` on the same bytes,
and the two must agree (resolved, per-list outcome, and "not gradable" vs graded).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ares.tasks.swe import markers
from ares.tasks.swe.grading import (
    ResolvedStatus,
    SweGrade,
    SweGradingError,
    TestStatus,
    grade,
    grade_log,
    parse_log,
)
from ares.tasks.swe.harness import load_harness, swebench_available

needs_swebench = pytest.mark.skipif(
    not swebench_available(), reason="swebench==5.0.2 + unidiff not installed (pip install 'ares[swe]')"
)
pytestmark = needs_swebench

PYTEST = f"{sys.executable} -m pytest -rA -p no:cacheprovider -p no:randomly"

MODULE = """\
def add(a, b):
    return a + b


def div(a, b):
    return a / b
"""

TESTS = """\
import pytest

from mod import add, div


def test_add():
    assert add(1, 2) == 3


def test_fails():
    assert add(1, 1) == 3


@pytest.fixture
def broken():
    raise RuntimeError("fixture broke")


def test_errors(broken):
    pass


@pytest.mark.skip(reason="not today")
def test_skipped():
    pass


@pytest.mark.xfail(reason="known")
def test_xfail():
    assert div(1, 0)


@pytest.mark.parametrize("text", ["a b", "x[1]", "plain"])
def test_param(text):
    assert text != "plain"
"""


def _official(log: str, f2p: list[str], p2p: list[str], parser: str = "parse_log_pytest") -> dict:
    """swebench's own get_eval_report on the same log."""
    h = load_harness()
    spec = h.test_spec_cls(
        instance_id="demo__demo-1",
        image="",
        eval_script_list=[],
        repo="demo/demo",
        version="0.0",
        FAIL_TO_PASS=f2p,
        PASS_TO_PASS=p2p,
        log_parser=parser,
        eval_type="pass_and_fail",
    )
    import tempfile

    with tempfile.NamedTemporaryFile("w", suffix=".log", delete=False) as f:
        f.write(log)
    try:
        pred = {"instance_id": spec.instance_id, "model_name_or_path": "m", "model_patch": "diff"}
        return h.grading.get_eval_report(spec, pred, f.name, include_tests_status=True)[spec.instance_id]
    finally:
        os.unlink(f.name)


def _check_against_harness(
    log: str, f2p: list[str], p2p: list[str], parser: str = "pytest"
) -> SweGrade | None:
    """Grade with ARES and with the harness; assert they agree; return ARES's grade (None: error)."""
    official = _official(log, f2p, p2p, "parse_log_" + parser)
    try:
        ours = grade_log(log, f2p, p2p, parser)
    except SweGradingError:
        assert official["patch_successfully_applied"] is False
        assert official["resolved"] is False
        return None
    assert official["patch_successfully_applied"] is True
    assert ours.resolved is official["resolved"]
    ts = official["tests_status"]
    assert ours.tests_status() == {k: ts[k] for k in ("FAIL_TO_PASS", "PASS_TO_PASS")}
    return ours


def _git(cwd: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t"}
    env["GIT_COMMITTER_EMAIL"] = "t@t"
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True).stdout


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    (root / "tests").mkdir(parents=True)
    (root / "pytest.ini").write_text("[pytest]\npythonpath = .\n")
    (root / "mod.py").write_text(MODULE)
    (root / "tests" / "test_mod.py").write_text(TESTS)
    return root


def _pytest_log(root: Path) -> str:
    proc = subprocess.run([*PYTEST.split(), "tests"], cwd=root, capture_output=True, text=True, timeout=120)
    return proc.stdout + proc.stderr


def test_markers_are_the_harness_constants() -> None:
    c = load_harness().constants
    for name in (
        "START_TEST_OUTPUT",
        "END_TEST_OUTPUT",
        "TEST_EXIT_CODE",
        "APPLY_PATCH_FAIL",
        "APPLY_PATCH_PASS",
        "RESET_FAILED",
        "TESTS_ERROR",
        "TESTS_TIMEOUT",
    ):
        assert getattr(markers, name) == getattr(c, name), name
    assert {s.value for s in TestStatus} == {s.value for s in c.TestStatus}
    assert {s.value for s in ResolvedStatus} == {s.value for s in c.ResolvedStatus}


def test_harness_import_avoids_heavy_dependencies() -> None:
    code = (
        "import sys; from ares.tasks.swe.grading import parse_log; parse_log('PASSED a::b')\n"
        "heavy = [m for m in ('docker', 'modal', 'datasets') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
        "import swebench.harness.constants as c; assert c.START_TEST_OUTPUT"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_real_pytest_run_parsed(project: Path) -> None:
    log = _pytest_log(project)
    st = parse_log(log, "pytest")
    f = "tests/test_mod.py::"
    assert st[f + "test_add"] is TestStatus.PASSED
    assert st[f + "test_fails"] is TestStatus.FAILED
    assert st[f + "test_errors"] is TestStatus.ERROR
    assert st[f + "test_xfail"] is TestStatus.XFAIL
    assert st[f + "test_param[x[1]]"] is TestStatus.PASSED
    assert st[f + "test_param[plain]"] is TestStatus.FAILED
    # The harness splits on whitespace: an id with a space is known by its first word (as upstream).
    assert st[f + "test_param[a"] is TestStatus.PASSED
    # pytest -rA reports the skip by location, not by test id: the test is absent, hence failed as F2P.
    assert f + "test_skipped" not in st
    assert parse_log(log, "parse_log_pytest") == st


def test_real_pytest_run_graded_like_harness(project: Path) -> None:
    body = _pytest_log(project)
    log = f"setup noise\n{markers.START_TEST_OUTPUT}\n{body}\n{markers.END_TEST_OUTPUT}\n"
    log += f"{markers.TEST_EXIT_CODE}: 1\n"
    f = "tests/test_mod.py::"
    cases = [
        ([f + "test_add", f + "test_xfail"], [f + "test_param[x[1]]"], ResolvedStatus.FULL),
        ([f + "test_add", f + "test_fails"], [f + "test_param[x[1]]"], ResolvedStatus.PARTIAL),
        ([f + "test_add"], [f + "test_errors"], ResolvedStatus.NO),
        ([f + "test_skipped"], [], ResolvedStatus.NO),
        ([f + "test_gone"], [f + "test_add"], ResolvedStatus.NO),
        ([f + "test_param[a b]"], [], ResolvedStatus.NO),  # whitespace ids are lost, as in the harness
    ]
    for f2p, p2p, expected in cases:
        ours = _check_against_harness(log, f2p, p2p)
        assert ours is not None and ours.status is expected, (f2p, p2p)


def test_grade_rules() -> None:
    st = {
        "t::a": TestStatus.PASSED,
        "t::b": TestStatus.FAILED,
        "t::s": TestStatus.SKIPPED,
        "t::x": TestStatus.XFAIL,
        "t::e": TestStatus.ERROR,
    }
    full = grade(st, ["t::a", "t::x"], ["t::a", "t::s"])
    assert full.resolved and full.status is ResolvedStatus.FULL and full.reward == 1.0
    assert full.p2p_passed == ("t::a", "t::s")  # a skipped P2P is not a regression
    skipped_f2p = grade(st, ["t::s"], [])
    assert not skipped_f2p.resolved and skipped_f2p.f2p_failed == ("t::s",)
    missing = grade(st, ["t::a", "t::missing"], [])
    assert missing.status is ResolvedStatus.PARTIAL and missing.f2p_failed == ("t::missing",)
    assert missing.reward == 0.0
    p2p_broken = grade(st, ["t::a"], ["t::b", "t::e", "t::gone"])
    assert p2p_broken.status is ResolvedStatus.NO and p2p_broken.p2p_failed == ("t::b", "t::e", "t::gone")
    assert grade({"t::a": "PASSED"}, ["t::a"], []).to_dict()["f2p"] == {"passed": 1, "total": 1}


def _harness_log(body: str, exit_code: int | None = 0) -> str:
    log = f"+ git apply -v -\nChecking patch tests/test_x.py...\n{markers.START_TEST_OUTPUT}\n{body}"
    log += f"\n{markers.END_TEST_OUTPUT}\n"
    if exit_code is not None:
        log += f"{markers.TEST_EXIT_CODE}: {exit_code}\n"
    return log


SUMMARY = """\
============================= test session starts ==============================
collected 3 items

tests/test_x.py ..F                                                      [100%]
=========================== short test summary info ============================
PASSED tests/test_x.py::test_one
PASSED tests/test_x.py::test_two[1-2]
FAILED tests/test_x.py::test_three - AssertionError: boom
========================= 1 failed, 2 passed in 0.10s ==========================
"""


@pytest.mark.parametrize(
    ("log", "reason"),
    [
        (_harness_log("collected 0 items\n\n===== no tests ran in 0.01s =====", exit_code=5), "no_tests_ran"),
        (SUMMARY, "markers_missing"),
        (markers.APPLY_PATCH_FAIL + "\n" + _harness_log(SUMMARY), "patch_apply_failed"),
        (_harness_log(SUMMARY) + markers.TESTS_TIMEOUT + "\n", "tests_timed_out"),
        (
            _harness_log(
                SUMMARY.replace(
                    "FAILED tests/test_x.py::test_three - Ass", "PASSED tests/test_x.py::test_three #"
                )
            ),
            None,
        ),
        (
            _harness_log("PASSED tests/test_x.py::test_one\nPASSED tests/test_x.py::test_three", 1),
            "exit_code_mismatch",
        ),
        ("", "markers_missing"),
    ],
)
def test_ungradable_logs_are_errors(log: str, reason: str | None) -> None:
    f2p, p2p = ["tests/test_x.py::test_three"], ["tests/test_x.py::test_one"]
    _check_against_harness(log, f2p, p2p)
    if reason is None:
        assert grade_log(log, f2p, p2p).resolved
        return
    with pytest.raises(SweGradingError) as info:
        grade_log(log, f2p, p2p)
    assert info.value.reason == reason


def test_hand_made_harness_log() -> None:
    log = _harness_log(SUMMARY, exit_code=1)
    ours = _check_against_harness(log, ["tests/test_x.py::test_two[1-2]"], ["tests/test_x.py::test_one"])
    assert ours is not None and ours.resolved
    ours = _check_against_harness(log, ["tests/test_x.py::test_three"], ["tests/test_x.py::test_one"])
    assert ours is not None and ours.status is ResolvedStatus.NO


DJANGO = """\
Testing against Django installed in '/testbed/django'
Importing application queries
Skipping setup of unused database(s): other.
test_basic (queries.test_q.QTests.test_basic) ... ok
test_combine (queries.test_q.QTests.test_combine) ... FAIL
test_deconstruct (queries.test_q.QTests.test_deconstruct) ... ERROR
test_skip (queries.test_q.QTests.test_skip) ... skipped 'no db feature'
test_slow (queries.test_q.QTests.test_slow) ... Some output here
ok

======================================================================
FAIL: test_combine (queries.test_q.QTests.test_combine)
----------------------------------------------------------------------
Traceback (most recent call last):
AssertionError: 1 != 2

----------------------------------------------------------------------
Ran 5 tests in 0.012s

FAILED (failures=1, errors=1, skipped=1)
"""


def test_django_log() -> None:
    st = parse_log(DJANGO, "django")
    base = "(queries.test_q.QTests.test_{})"
    assert st["test_basic " + base.format("basic")] is TestStatus.PASSED
    assert st["test_combine " + base.format("combine")] is TestStatus.FAILED
    assert st["test_deconstruct " + base.format("deconstruct")] is TestStatus.ERROR
    assert st["test_skip " + base.format("skip")] is TestStatus.SKIPPED
    assert st["test_slow " + base.format("slow")] is TestStatus.PASSED
    log = _harness_log(DJANGO, exit_code=1)
    ok = _check_against_harness(
        log, ["test_slow " + base.format("slow")], ["test_skip " + base.format("skip")], "django"
    )
    assert ok is not None and ok.resolved
    bad = _check_against_harness(log, ["test_skip " + base.format("skip")], [], "django")
    assert bad is not None and not bad.resolved


def test_unknown_parser_is_named() -> None:
    with pytest.raises(ValueError, match="unknown log parser 'nope'"):
        parse_log("", "nope")
