"""The integrity plugin in a real pytest process against in-process attacks, as root and as uid 65534.

Each attack (``inprocess_attacks``) is planted in the library module of a small project. Run without
the plugin, the log that a grader parses says the FAIL_TO_PASS test passed (the attack earns 1.0); run
armed, the grader's check (``judge``) finds it ``tampered``. The fixed library, armed, is clean.
"""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from inprocess_attacks import ATTACKS, BUGGY, F2P, FIX_TEST, FIXED, P2P, SMOKE, InProcessAttack

from ares.tasks.integrity.arming import CHANGED_FILE, PLUGIN_SOURCE, Arming, arm
from ares.tasks.integrity.check import IntegrityResult, judge
from ares.tasks.swe.grading import parse_log
from ares.tasks.swe.verification import read_report
from nobody_python import SKIP_REASON, can_drop, nobody_python

NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
SITE = sysconfig.get_paths()["purelib"]


@pytest.fixture
def scratch() -> Iterator[Path]:
    """A dir uid 65534 can use too (pytest's tmp_path is root's own)."""
    path = Path(tempfile.mkdtemp(prefix="ares-integrity-"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def _project(root: Path, library: str) -> Path:
    project = root / "project"
    (project / "tests").mkdir(parents=True)
    (project / "calc.py").write_text(library)
    (project / "tests" / "test_a_smoke.py").write_text(SMOKE)
    (project / "tests" / "test_b_fix.py").write_text(FIX_TEST)
    (project / "pytest.ini").write_text("[pytest]\npythonpath = .\n")
    for path in [project, *project.rglob("*")]:
        path.chmod(0o777 if path.is_dir() else 0o666)
    return project


def _run(root: Path, library: str, *, armed: bool, user: list[str]) -> tuple[str, IntegrityResult | None]:
    project = _project(root, library)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "ARES_", "PYTHONPATH"))}
    python = sys.executable
    paths = []
    if user:  # nobody cannot run pyenv's interpreters in place: a copy of this one, on this venv's site
        python = nobody_python() or pytest.skip(SKIP_REASON)
        paths.append(SITE)
    arming = None
    if armed:
        plugin_dir, out_dir = root / "plugin", root / "out"
        plugin_dir.mkdir(mode=0o755)
        out_dir.mkdir()
        arming = arm(plugin_dir, out_dir, ["tests"])
        (out_dir / CHANGED_FILE).write_text("calc.py\n")
        (out_dir / CHANGED_FILE).chmod(0o666)
        env |= {"ARES_INTEGRITY_OUT": str(out_dir), "PYTEST_ADDOPTS": f"-p {arming.module}"}
        paths.insert(0, str(plugin_dir))
    if paths:
        env["PYTHONPATH"] = os.pathsep.join(paths)
    command = [*user, python, "-m", "pytest", "-rA", "-p", "no:cacheprovider", "tests"]
    done = subprocess.run(command, cwd=project, env=env, capture_output=True, text=True, timeout=120)
    log = done.stdout + done.stderr
    if arming is None:
        return log, None
    report = arming.report_path.read_bytes() if arming.report_path.exists() else None
    return log, judge(log, report, arming.nonce, parse_log(log, "pytest"), [F2P, P2P])


def _users() -> list[tuple[str, list[str]]]:
    users = [("root", [])]
    if can_drop():
        users.append(("nobody", NOBODY))
    return users


@pytest.mark.parametrize(("user", "prefix"), _users(), ids=[u for u, _ in _users()])
@pytest.mark.parametrize("attack", ATTACKS, ids=lambda a: a.name)
def test_attack_earns_a_pass_unarmed_and_is_tampered_armed(
    scratch: Path, attack: InProcessAttack, user: str, prefix: list[str]
) -> None:
    library = BUGGY + attack.code
    log, _ = _run(scratch / "plain", library, armed=False, user=prefix)
    assert str(parse_log(log, "pytest").get(F2P)) in ("TestStatus.PASSED", "PASSED"), log[-3000:]
    log, result = _run(scratch / "armed", library, armed=True, user=prefix)
    assert result is not None and result.armed, log[-3000:]
    assert result.tampered, (attack.name, log[-3000:])


@pytest.mark.parametrize(("user", "prefix"), _users(), ids=[u for u, _ in _users()])
def test_the_fix_armed_is_clean(scratch: Path, user: str, prefix: list[str]) -> None:
    log, result = _run(scratch, FIXED, armed=True, user=prefix)
    assert result is not None and result.armed and not result.tampered, (result, log[-3000:])
    assert result.tests_seen == 2
    assert parse_log(log, "pytest")[F2P].value == "PASSED"


def test_the_bug_armed_is_not_tampered_but_fails(scratch: Path) -> None:
    log, result = _run(scratch, BUGGY, armed=True, user=[])
    assert result is not None and not result.tampered, result
    assert parse_log(log, "pytest")[F2P].value == "FAILED"


def test_a_report_without_the_plugin_line_is_graded_from_the_log_and_says_so() -> None:
    result = judge("PASSED a::b\n", b"{}", "n", {}, ["a::b"])
    assert not result.armed and "log alone" in result.note


def test_an_armed_run_without_a_report_is_tampered() -> None:
    result = judge("ares-integrity: armed\nPASSED a::b\n", None, "n", {}, ["a::b"])
    assert result.tampered and result.findings[0]["kind"] == "no_report"


def test_a_report_with_another_nonce_is_tampered() -> None:
    report = b'{"nonce": "other", "status": "complete", "tests": {}, "tampered": []}'
    assert judge("ares-integrity: armed\n", report, "n", {}, []).tampered


def test_log_names_match_node_ids_as_the_parsers_write_them() -> None:
    tests = {"r2e_tests/test_x.py::TestA::test_b": {"setup": "passed", "call": "passed"}}
    report = json.dumps({"nonce": "n", "status": "complete", "tests": tests, "tampered": []}).encode()
    for name in ("r2e_tests/test_x.py::TestA::test_b", "TestA.test_b", "r2e_tests/test_x.py::TestA"):
        assert not judge("ares-integrity: armed\n", report, "n", {name: "PASSED"}, [name]).tampered, name
    assert judge("ares-integrity: armed\n", report, "n", {"test_c": "PASSED"}, ["test_c"]).tampered


def test_the_plugin_is_plain_python_3_5_that_old_images_can_import() -> None:
    ast.parse(PLUGIN_SOURCE.read_text(), feature_version=(3, 5))


def test_pytest_leaves_the_plugin_unrewritten() -> None:
    # As a ``-p`` plugin it would be assertion-rewritten: a parse and a compile per run, since its
    # read-only dir keeps no pyc. Its docstring opts out; the rewriter's own check says whether it does.
    from _pytest.assertion.rewrite import AssertionRewriter

    tree = ast.parse(PLUGIN_SOURCE.read_text())
    docstring = ast.get_docstring(tree, clean=False)
    assert docstring is not None and AssertionRewriter.is_rewrite_disabled(docstring)


def test_the_host_never_follows_or_blocks_on_what_the_sandbox_left_as_the_report(scratch: Path) -> None:
    arming = Arming("n" * 32, scratch / "plugin", scratch)
    secret = scratch / "host-secret"
    secret.write_text('{"nonce": "n"}')
    arming.report_path.symlink_to(secret)
    assert read_report(arming) is None  # a symlink to a host file is not read
    arming.report_path.unlink()
    os.mkfifo(arming.report_path)
    assert read_report(arming) is None  # a FIFO neither blocks nor counts
    arming.report_path.unlink()
    arming.report_path.write_bytes(b"x" * 10)
    assert read_report(arming) == b"x" * 10
