"""Parse a test log and grade it exactly as the SWE-bench harness does, in ARES types.

The decisions are the harness's own (``swebench.harness.grading`` and ``log_parsers``, loaded by
:mod:`ares.tasks.swe.harness`), so a reward here and the official ``get_eval_report`` can never disagree
on the same log. What ARES adds on top:

* typed results (:class:`TestStatus`, frozen :class:`SweGrade`) instead of nested dicts of strings;
* a distinct :class:`SweGradingError` with a machine-readable ``reason`` where the harness only says
  "not found": a log that shows the tests never ran (patch failed, reset failed, markers missing, no
  results, exit status contradicting the printed results) is an errored episode, not a reward of 0.

Harness rules, for reference: resolved iff every FAIL_TO_PASS test passes (PASSED or XFAIL) and every
PASS_TO_PASS test still passes (a skipped P2P is kept; a skipped F2P counts as failed); a test absent
from the log counts as failed.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from ares.errors import VerifierError
from ares.tasks.swe import markers
from ares.tasks.swe.harness import load_harness


class TestStatus(StrEnum):
    """One test's outcome as the harness's parsers report it (values equal the harness's)."""

    __test__ = False  # not a pytest test class

    PASSED = "PASSED"
    FAILED = "FAILED"
    SKIPPED = "SKIPPED"
    ERROR = "ERROR"
    XFAIL = "XFAIL"


class ResolvedStatus(StrEnum):
    """The harness's resolution levels (``get_resolution_status``)."""

    FULL = "RESOLVED_FULL"
    PARTIAL = "RESOLVED_PARTIAL"
    NO = "RESOLVED_NO"


class EvalType(StrEnum):
    """How statuses are read: both ways (Python sets) or failures only (parsers that print only failures)."""

    PASS_AND_FAIL = "pass_and_fail"
    FAIL_ONLY = "fail_only"


GRADING_ERROR_REASONS = (
    "patch_apply_failed",
    "reset_failed",
    "tests_errored",
    "tests_timed_out",
    "markers_missing",
    "no_tests_ran",
    "exit_code_mismatch",
)


class SweGradingError(VerifierError):
    """The log cannot be graded: the tests did not (verifiably) run. The verifier records an error.

    ``reason`` is one of :data:`GRADING_ERROR_REASONS`; ``infra_reason`` is the harness's advisory
    classification of the log (e.g. ``out_of_memory``), when it has one.
    """

    def __init__(self, reason: str, detail: str, infra_reason: str | None = None) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail
        self.infra_reason = infra_reason


@dataclass(frozen=True)
class SweGrade:
    """One graded run: the harness's per-list outcome and resolution status."""

    resolved: bool
    status: ResolvedStatus
    f2p_passed: tuple[str, ...]
    f2p_failed: tuple[str, ...]
    p2p_passed: tuple[str, ...]
    p2p_failed: tuple[str, ...]
    statuses: Mapping[str, TestStatus] = field(default_factory=dict, compare=False, repr=False)

    @property
    def reward(self) -> float:
        """1.0 iff fully resolved: partial resolution earns nothing, as in the harness's score."""
        return 1.0 if self.resolved else 0.0

    def tests_status(self) -> dict[str, dict[str, list[str]]]:
        """The harness's ``tests_status`` shape (for reports that match the official fields)."""
        return {
            "FAIL_TO_PASS": {"success": list(self.f2p_passed), "failure": list(self.f2p_failed)},
            "PASS_TO_PASS": {"success": list(self.p2p_passed), "failure": list(self.p2p_failed)},
        }

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready summary for the episode record: counts, lists and the parsed statuses."""
        return {
            "resolved": self.resolved,
            "status": self.status.value,
            "f2p": {"passed": len(self.f2p_passed), "total": len(self.f2p_passed) + len(self.f2p_failed)},
            "p2p": {"passed": len(self.p2p_passed), "total": len(self.p2p_passed) + len(self.p2p_failed)},
            "tests_status": self.tests_status(),
            "statuses": {k: v.value for k, v in self.statuses.items()},
        }


def parser_names() -> list[str]:
    """Every parser the installed harness knows, by its registry name (``parse_log_pytest``, ...)."""
    return sorted(load_harness().log_parsers.PARSER_REGISTRY)


def resolve_parser_name(parser: str) -> str:
    """Accept ``pytest`` as well as the registry's ``parse_log_pytest``; reject unknown names clearly."""
    registry = load_harness().log_parsers.PARSER_REGISTRY
    name = parser if parser.startswith("parse_log_") else f"parse_log_{parser}"
    if name not in registry:
        raise ValueError(f"unknown log parser {parser!r}; known: {', '.join(sorted(registry))}")
    return name


def _test_spec(
    parser: str,
    fail_to_pass: Iterable[str] = (),
    pass_to_pass: Iterable[str] = (),
    eval_type: EvalType | str = EvalType.PASS_AND_FAIL,
    instance_id: str = "ares__instance-0",
    version: str = "0.0",
) -> Any:
    """A harness TestSpec carrying just what grading reads (a few JS/Ruby parsers read id/version)."""
    h = load_harness()
    return h.test_spec_cls(
        instance_id=instance_id,
        image="",
        eval_script_list=[],
        repo="",
        version=version,
        FAIL_TO_PASS=list(fail_to_pass),
        PASS_TO_PASS=list(pass_to_pass),
        log_parser=resolve_parser_name(parser),
        eval_type=EvalType(eval_type).value,
    )


def _typed(status_map: Mapping[str, str]) -> dict[str, TestStatus]:
    return {name: TestStatus(value) for name, value in status_map.items()}


def parse_log(
    log: str, parser: str = "pytest", *, instance_id: str = "", version: str = ""
) -> dict[str, TestStatus]:
    """Parse test-runner output (the whole text given, markers or not) into per-test statuses."""
    h = load_harness()
    spec = _test_spec(parser, instance_id=instance_id or "ares__instance-0", version=version or "0.0")
    return _typed(h.log_parsers.PARSER_REGISTRY[spec.log_parser](log, spec))


def grade(
    statuses: Mapping[str, TestStatus | str],
    fail_to_pass: Iterable[str],
    pass_to_pass: Iterable[str],
    eval_type: EvalType | str = EvalType.PASS_AND_FAIL,
) -> SweGrade:
    """Grade parsed statuses against the instance's F2P/P2P lists with the harness's rules."""
    h = load_harness()
    f2p, p2p = list(fail_to_pass), list(pass_to_pass)
    raw = {name: TestStatus(value).value for name, value in statuses.items()}
    gold = {"instance_id": "ares", "FAIL_TO_PASS": f2p, "PASS_TO_PASS": p2p}
    report = h.grading.get_eval_tests_report(
        raw, gold, eval_type=h.constants.EvalType(EvalType(eval_type).value)
    )
    status = ResolvedStatus(h.grading.get_resolution_status(report))
    return SweGrade(
        resolved=status is ResolvedStatus.FULL,
        status=status,
        f2p_passed=tuple(report["FAIL_TO_PASS"]["success"]),
        f2p_failed=tuple(report["FAIL_TO_PASS"]["failure"]),
        p2p_passed=tuple(report["PASS_TO_PASS"]["success"]),
        p2p_failed=tuple(report["PASS_TO_PASS"]["failure"]),
        statuses=_typed(raw),
    )


def _diagnose(log: str, statuses_found: bool) -> str:
    """Name why the harness refused the log (it only says "not found"); first matching cause wins."""
    for marker, reason in (
        (markers.APPLY_PATCH_FAIL, "patch_apply_failed"),
        (markers.RESET_FAILED, "reset_failed"),
        (markers.TESTS_ERROR, "tests_errored"),
        (markers.TESTS_TIMEOUT, "tests_timed_out"),
    ):
        if marker in log:
            return reason
    if markers.START_TEST_OUTPUT not in log or markers.END_TEST_OUTPUT not in log:
        return "markers_missing"
    return "exit_code_mismatch" if statuses_found else "no_tests_ran"


def statuses_from_log(
    log: str,
    parser: str = "pytest",
    *,
    eval_type: EvalType | str = EvalType.PASS_AND_FAIL,
    instance_id: str = "",
    version: str = "",
) -> dict[str, TestStatus]:
    """The harness's ``get_logs_eval`` on a whole eval-script log; SweGradingError when it is unusable."""
    h = load_harness()
    spec = _test_spec(
        parser, eval_type=eval_type, instance_id=instance_id or "ares__instance-0", version=version or "0.0"
    )
    fd, path = tempfile.mkstemp(prefix="ares-swe-log-", suffix=".txt")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", errors="surrogateescape") as f:
            f.write(log)
        status_map, found = h.grading.get_logs_eval(spec, path)
        if not found:
            classified = h.grading.classify_logs(path)
    finally:
        os.unlink(path)
    if found:
        return _typed(status_map)
    parsed_any = bool(h.log_parsers.PARSER_REGISTRY[spec.log_parser](log, spec))
    reason = _diagnose(log, parsed_any)
    detail = {
        "patch_apply_failed": "a patch did not apply",
        "reset_failed": "the test files could not be reset",
        "tests_errored": "the test command errored",
        "tests_timed_out": "the test command timed out",
        "markers_missing": "the log lacks the start/end test-output markers",
        "no_tests_ran": "no test results and no sign the suite ran",
        "exit_code_mismatch": "the test command exited non-zero yet the log reports no failure",
    }[reason]
    raise SweGradingError(reason, detail, infra_reason=classified[0] if classified else None)


def grade_log(
    log: str,
    fail_to_pass: Iterable[str],
    pass_to_pass: Iterable[str],
    parser: str = "pytest",
    *,
    eval_type: EvalType | str = EvalType.PASS_AND_FAIL,
    instance_id: str = "",
    version: str = "",
) -> SweGrade:
    """Grade a whole eval-script log (markers included) as ``get_eval_report`` does."""
    statuses = statuses_from_log(log, parser, eval_type=eval_type, instance_id=instance_id, version=version)
    return grade(statuses, fail_to_pass, pass_to_pass, eval_type=eval_type)
