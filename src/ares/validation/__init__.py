"""Task validation: does each task of a source give its reference solution 1, an untouched workspace 0,
and the same reward every time? (``ares tasks validate``)."""

from ares.validation.play import validate_tasks
from ares.validation.report import REPORT_NAME, ReportError, ValidationReport
from ares.validation.source import preset_for_path
from ares.validation.verdict import VERDICTS, RunOutcome, TaskValidation, Verdict, judge

__all__ = [
    "REPORT_NAME",
    "VERDICTS",
    "ReportError",
    "RunOutcome",
    "TaskValidation",
    "ValidationReport",
    "Verdict",
    "judge",
    "preset_for_path",
    "validate_tasks",
]
