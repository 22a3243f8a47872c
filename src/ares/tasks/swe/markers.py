"""Log markers shared by the eval-script writer and the grader.

The strings are the SWE-bench harness's own (``swebench.harness.constants``), written here so that the
eval script can be produced without ``swebench`` installed, and so that a log ARES produces can be graded
by the official ``get_eval_report`` unchanged (the tests check both sets are equal).
"""

from __future__ import annotations

# The test runner's output sits between these two lines; the parser only reads that slice.
START_TEST_OUTPUT = ">>>>> Start Test Output"
END_TEST_OUTPUT = ">>>>> End Test Output"
# Written after the end marker: the test command's own exit status (catches printed fake PASSED lines).
TEST_EXIT_CODE = ">>>>> Test Exit Code"
# Any of these anywhere in a log makes the run ungradable (the harness returns "not found").
APPLY_PATCH_FAIL = ">>>>> Patch Apply Failed"
APPLY_PATCH_PASS = ">>>>> Applied Patch"
RESET_FAILED = ">>>>> Reset Failed"
TESTS_ERROR = ">>>>> Tests Errored"
TESTS_TIMEOUT = ">>>>> Tests Timed Out"

BAD_RUN_MARKERS: tuple[str, ...] = (APPLY_PATCH_FAIL, RESET_FAILED, TESTS_ERROR, TESTS_TIMEOUT)
