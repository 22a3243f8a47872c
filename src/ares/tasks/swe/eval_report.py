"""``ares eval`` reports in the official harness's shapes (swebench 5.0.2), from ARES's verdicts.

* Per instance, ``{instance_id: {...}}`` as ``grading.get_eval_report`` writes it: ``patch_is_None``,
  ``patch_exists``, ``patch_successfully_applied`` (the harness's meaning: the log had gradable test
  results), ``resolved``, ``infra_failure`` (+ ``infra_failure_reason``) and, when graded,
  ``tests_status`` with FAIL_TO_PASS / PASS_TO_PASS / FAIL_TO_FAIL / PASS_TO_FAIL success and failure
  lists. ``resolved`` is the SWE verifier's reward, which is the harness's decision on the same log
  except where ARES is stricter (a log whose test command's exit status contradicts its results).
* Per run, ``reporting.make_run_report``'s fields (schema_version 2), in its order.

Where ARES departs from the harness, on purpose: a prediction that does not apply is an
*unresolved* instance with ``patch_successfully_applied: false`` (the harness raises and counts it
as an error, with no report): the model's patch is at fault, not the infrastructure, and
``error_instances`` is kept for the infrastructure's faults (what makes ``ares eval`` exit 1).
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from ares.tasks.swe.harness import load_harness
from ares.tasks.swe.predictions import Prediction

SCHEMA_VERSION = 2
_EMPTY_LISTS: dict[str, list[str]] = {"success": [], "failure": []}


class InstanceStatus(StrEnum):
    """Where an instance lands in the run report."""

    RESOLVED = "resolved"
    UNRESOLVED = "unresolved"
    EMPTY_PATCH = "empty_patch"
    ERROR = "error"


@dataclass(frozen=True)
class InstanceResult:
    """One prediction evaluated: its status, its per-instance report body and the logs behind it.

    ``report`` is None for an empty patch (not run, as in the harness) and for an error.
    ``graded_patch`` is the change the verifier carried to the grader (``swe/model.patch``): the
    prediction minus the files the grader always resets (``changes.dropped``).
    """

    instance_id: str
    status: InstanceStatus
    prediction: Prediction
    report: Mapping[str, Any] | None = None
    eval_log: str = ""
    apply_log: str = ""
    graded_patch: str = ""
    error: str | None = None
    duration_s: float = 0.0

    def report_json(self) -> dict[str, Any] | None:
        """The per-instance report file's content: ``{instance_id: report}``."""
        return None if self.report is None else {self.instance_id: dict(self.report)}


def classify(text: str) -> tuple[str, str] | None:
    """The harness's advisory infrastructure classification of a log: (reason, tier), or None."""
    load_harness()  # registers the light swebench.harness package first
    infra = importlib.import_module("swebench.harness.infra_failure")
    found = infra.classify_text(text)
    return None if found is None else (str(found[0]), str(found[1]))


def _environment_tier() -> str:
    load_harness()
    return str(importlib.import_module("swebench.harness.infra_failure").TIER_ENVIRONMENT)


def graded_report(grade: Mapping[str, Any], resolved: bool) -> dict[str, Any]:
    """The report of an instance whose log was graded (``grade``: the verifier's swe/grade.json)."""
    status = grade.get("tests_status") or {}
    tests_status = {
        key: {k: list(v) for k, v in (status.get(key) or _EMPTY_LISTS).items()}
        for key in ("FAIL_TO_PASS", "PASS_TO_PASS", "FAIL_TO_FAIL", "PASS_TO_FAIL")
    }
    return {
        "patch_is_None": False,
        "patch_exists": True,
        "patch_successfully_applied": True,
        "resolved": resolved,
        "infra_failure": False,
        "tests_status": tests_status,
    }


def ungraded_report(log: str) -> dict[str, Any]:
    """The report of an instance without gradable test results (the patch did not apply, or the log
    shows no tests ran): resolved false, no ``tests_status``, the harness's advisory classification."""
    report: dict[str, Any] = {
        "patch_is_None": False,
        "patch_exists": True,
        "patch_successfully_applied": False,
        "resolved": False,
        "infra_failure": False,
    }
    found = classify(log)
    if found is not None:
        report["infra_failure"] = found[1] == _environment_tier()
        report["infra_failure_reason"] = found[0]
    return report


def run_report(
    results: Iterable[InstanceResult], instance_ids: Sequence[str], predictions: Sequence[Prediction]
) -> dict[str, Any]:
    """``make_run_report``'s fields over ``results``; ``instance_ids``: every instance of the dataset."""
    by_status: dict[InstanceStatus, set[str]] = {status: set() for status in InstanceStatus}
    failing: list[InstanceResult] = []
    for result in results:
        by_status[result.status].add(result.instance_id)
        if result.status in (InstanceStatus.UNRESOLVED, InstanceStatus.ERROR):
            failing.append(result)
    reasons: dict[str, str] = {}
    infra: set[str] = set()
    ambiguous: set[str] = set()
    environment = _environment_tier()
    for result in failing:
        found = classify("\n".join([result.eval_log, result.apply_log, result.error or ""]))
        if found is None:
            continue
        reasons[result.instance_id] = found[0]
        (infra if found[1] == environment else ambiguous).add(result.instance_id)
    predicted = {p.instance_id for p in predictions}
    resolved, unresolved = by_status[InstanceStatus.RESOLVED], by_status[InstanceStatus.UNRESOLVED]
    completed = resolved | unresolved
    return {
        "total_instances": len(instance_ids),
        "submitted_instances": len(predictions),
        "completed_instances": len(completed),
        "resolved_instances": len(resolved),
        "unresolved_instances": len(unresolved),
        "infra_failure_instances": len(infra),
        "ambiguous_failure_instances": len(ambiguous),
        "empty_patch_instances": len(by_status[InstanceStatus.EMPTY_PATCH]),
        "error_instances": len(by_status[InstanceStatus.ERROR]),
        "completed_ids": sorted(completed),
        "incomplete_ids": sorted(i for i in instance_ids if i not in predicted),
        "empty_patch_ids": sorted(by_status[InstanceStatus.EMPTY_PATCH]),
        "submitted_ids": sorted(predicted),
        "resolved_ids": sorted(resolved),
        "unresolved_ids": sorted(unresolved),
        "infra_failure_ids": sorted(infra),
        "ambiguous_failure_ids": sorted(ambiguous),
        "failure_reasons": dict(sorted(reasons.items())),
        "error_ids": sorted(by_status[InstanceStatus.ERROR]),
        "schema_version": SCHEMA_VERSION,
    }
