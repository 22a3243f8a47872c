"""R2E-Gym instances: hidden tests from the row, a gold patch from the commit, expected-output grading.

An R2E-Gym image holds the repository at the old (buggy) commit in ``/testbed``, its generated tests
in ``/r2e_tests`` and the test command in ``/testbed/run_tests.sh``. R2E-Gym's own runtime moves those
to ``/root`` inside the agent's container, where the agent can still read them. ARES instead:

* takes the hidden tests from the row (``execution_result_content``: ``test_file_names`` and
  ``test_file_codes``), so they exist only on the host and, at grading time, in the grader's fork;
* runs the image through the history clean-up (``hygiene``) plus :data:`HIDE_STEPS`, which delete
  ``/r2e_tests`` and move ``run_tests.sh`` to ``/root`` (outside ``/testbed``, so an agent's edit of
  it is never carried to the grader);
* rebuilds the gold patch from ``parsed_commit_content`` (the commit's non-test file diffs, from their
  old and new contents), so the oracle can show that an instance is solvable;
* grades like R2E-Gym: the test log's ``short test summary info`` lines parsed into ``{test: status}``
  must equal ``expected_output_json`` exactly (same tests, same statuses), else 0.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from typing import Any

from ares.tasks.swe import markers
from ares.tasks.swe.grading import ResolvedStatus, SweGrade, SweGradingError, TestStatus

#: Where the image keeps its hidden tests and test command, and where the grader puts them back.
TESTS_DIR = "r2e_tests"
RUN_TESTS = "/root/run_tests.sh"
HIDE_STEPS = (
    "mkdir -p /root",
    f"if [ -f /testbed/run_tests.sh ]; then mv -f /testbed/run_tests.sh {RUN_TESTS}; fi",
    "rm -rf /r2e_tests /testbed/r2e_tests /root/r2e_tests",
)
_STATUSES = ("PASSED", "FAILED", "ERROR")
_ANSI = re.compile(r"\x1b\[\d+m")


def is_test_path(path: str) -> bool:
    """R2E-Gym's rule for a test file in a commit (kept out of the gold patch)."""
    parts = path.split("/")
    name = parts[-1]
    return (
        path.endswith("_test.py")
        or name.startswith("test_")
        or any(part in ("tests", "Tests", "test", "Test") for part in parts[:-1])
    )


def gold_patch(parsed_commit: Mapping[str, Any]) -> str:
    """The commit's non-test changes as a unified diff (``git apply``-able), from each file's contents."""
    out: list[str] = []
    for diff in parsed_commit.get("file_diffs") or []:
        path = str(((diff.get("header") or {}).get("file") or {}).get("path") or "")
        if not path or is_test_path(path) or diff.get("is_binary_file"):
            continue
        old, new = str(diff.get("old_file_content") or ""), str(diff.get("new_file_content") or "")
        if old == new:
            continue
        before = f"a/{path}" if old else "/dev/null"
        after = f"b/{path}" if new else "/dev/null"
        lines = difflib.unified_diff(
            old.splitlines(keepends=True), new.splitlines(keepends=True), before, after, n=3
        )
        body = "".join(
            line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines
        )
        mode = "new file mode 100644\n" if not old else "deleted file mode 100644\n" if not new else ""
        out.append(f"diff --git a/{path} b/{path}\n{mode}{body}")
    return "".join(out)


def hidden_tests(execution_result: Mapping[str, Any]) -> dict[str, str]:
    """``{file name: code}`` of the generated tests; names are plain file names (no directories)."""
    names, codes = execution_result.get("test_file_names"), execution_result.get("test_file_codes")
    if not isinstance(names, list) or not isinstance(codes, list) or len(names) != len(codes) or not names:
        raise ValueError("needs test_file_names and test_file_codes, two lists of the same non-zero length")
    tests: dict[str, str] = {}
    for name, code in zip(names, codes, strict=True):
        if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_.-]*\.py", name):
            raise ValueError(f"test file name {name!r} must be a plain .py file name")
        if not isinstance(code, str):
            raise ValueError(f"the code of {name} must be text")
        tests[name] = code
    return tests


def eval_script(test_cmd: str, tests_dir: str) -> str:
    """Put the hidden tests (bound read-only at ``tests_dir``) in /testbed and run the test command."""
    return "\n".join(
        [
            "cd /testbed",
            f"rm -rf {TESTS_DIR} && cp -r {tests_dir}/{TESTS_DIR} {TESTS_DIR}",
            f"echo '{markers.START_TEST_OUTPUT}'",
            test_cmd,
            f'echo "{markers.TEST_EXIT_CODE}: $?"',
            f"echo '{markers.END_TEST_OUTPUT}'",
            "",
        ]
    )


def parse_log(log: str) -> dict[str, str]:
    """R2E-Gym's pytest rule: ``STATUS path::Class::test`` lines after ``short test summary info``;
    the test is named by the parts after the file joined with dots (``Class.test``), ANSI codes and
    a `` - message`` tail removed."""
    if "short test summary info" not in log:
        return {}
    statuses: dict[str, str] = {}
    for line in log.split("short test summary info", 1)[1].splitlines():
        status = next((s for s in _STATUSES if s in line), None)
        if status is None:
            continue
        name = ".".join(_ANSI.sub("", line).split("::")[1:]).split(" - ")[0].strip()
        statuses[name] = status
    return statuses


def grade_expected(log: str, expected: Mapping[str, str]) -> SweGrade:
    """Resolved iff the run's statuses equal ``expected`` (R2E-Gym's rule). The matched tests are
    reported as ``f2p_passed`` and the others as ``f2p_failed`` (one list: every test counts)."""
    section = log.split(markers.START_TEST_OUTPUT, 1)[-1].split(markers.END_TEST_OUTPUT, 1)[0]
    if markers.END_TEST_OUTPUT not in log:
        raise SweGradingError("markers_missing", "the test output's end marker is missing")
    got = {_clean(k): v for k, v in parse_log(section).items()}
    if not got:
        raise SweGradingError("no_tests_ran", "no 'short test summary info' results in the log")
    want = {_clean(k): v for k, v in expected.items()}
    matched = tuple(sorted(k for k, v in want.items() if got.get(k) == v))
    missed = tuple(sorted({*(k for k in want if got.get(k) != want[k]), *(k for k in got if k not in want)}))
    resolved = not missed
    typed = {k: TestStatus(v) for k, v in got.items() if v in TestStatus.__members__}
    return SweGrade(
        resolved, ResolvedStatus.FULL if resolved else ResolvedStatus.NO, matched, missed, (), (), typed
    )


def _clean(name: str) -> str:
    return _ANSI.sub("", name).split(" - ")[0]
