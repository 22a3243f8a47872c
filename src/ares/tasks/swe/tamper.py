"""Checks ARES adds on top of the harness's grading: logs whose results the test run did not produce.

The harness grades whatever status lines the log holds. The agent's library code runs inside the test
process, so it can print lines of its own; these checks catch the crude forms, each one a reward of 0
with its own reward term (the name returned with the reason):

* ``forged_report``: the test command exited non-zero while the log shows no failing test (fake
  ``PASSED`` lines printed next to the real results);
* ``results_after_session``: status lines after pytest's final summary line, where a real run prints
  nothing (fake lines printed at exit, with the exit status forced to 0);
* ``f2p_xfail``: a FAIL_TO_PASS test reported XFAIL, which the harness counts as passed; it is what
  ``pytest.xfail()`` called from the agent's code produces. A real fix makes such a test pass.

Stricter than the harness, on purpose; a legitimate run is never affected. Code that rewrites pytest's
reporter from inside the process is beyond any log grader: the verifier resets everything that steers
the test tools (``changes``) and arms the integrity plugin (``ares.tasks.integrity``) for pytest runs.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

from ares.tasks.swe import markers
from ares.tasks.swe.grading import SweGrade, TestStatus

#: pytest's last line: ``==== 1 failed, 49 passed in 0.12s ====`` (also "no tests ran in ...").
_PYTEST_SESSION_END = re.compile(r"^=+ .*\bin \d+(\.\d+)?s\b.* =+$")


#: Statuses a piece of log holds, by the instance's parser; None where the parser is not pytest's.
Parse = Callable[[str], Mapping[str, object] | None]


def rejection(log: str, grade: SweGrade, parse: Parse) -> tuple[str, str] | None:
    """``(reward term, reason)`` when the log's results are not the run's own, else None."""
    mismatch = _exit_status_contradicts(log, grade)
    if mismatch:
        return "forged_report", mismatch
    late = _results_after_session(log, parse)
    if late:
        return (
            "results_after_session",
            f"test results printed after pytest's final summary: {', '.join(late)}",
        )
    xfailed = [name for name in grade.f2p_passed if grade.statuses.get(name) == TestStatus.XFAIL]
    if grade.resolved and xfailed:
        return "f2p_xfail", f"FAIL_TO_PASS tests reported XFAIL, not PASSED: {', '.join(xfailed)}"
    return None


def _exit_status_contradicts(log: str, grade: SweGrade) -> str | None:
    line = next((ln for ln in log.splitlines() if ln.startswith(markers.TEST_EXIT_CODE)), None)
    if line is None:
        return None
    code = line.partition(":")[2].strip()
    failing = any(status.value in ("FAILED", "ERROR") for status in grade.statuses.values())
    if code not in ("0", "") and not failing:
        return f"the test command exited {code} but the log reports no failing test"
    return None


def _results_after_session(log: str, parse: Parse) -> list[str]:
    """Tests named by status lines between pytest's last summary line and the end-of-output marker."""
    lines = log.split(markers.END_TEST_OUTPUT, 1)[0].splitlines()
    ends = [i for i, line in enumerate(lines) if _PYTEST_SESSION_END.match(line.strip())]
    if not ends:
        return []
    return sorted(parse("\n".join(lines[ends[-1] + 1 :])) or {})
