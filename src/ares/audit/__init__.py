"""Task audit (``ares tasks audit``): can a task be won without doing it, and do its tests notice a
wrong fix? Generic exploits that know nothing of the fix run on every task through the ordinary
runner (``exploits``, adapted per task kind by ``target``; played by ``play``), each task is judged
``sound`` or ``hackable`` (``verdict``), its tests are scored against mutants of the fix
(``strength``), and the set gets one JSON report (``report``)."""

from ares.audit.exploits import EXPLOITS, NAMES, Exploit, select
from ares.audit.play import AuditOptions, audit_tasks
from ares.audit.report import REPORT_NAME, AuditReport, condemned, load_audits, report_next_to
from ares.audit.target import Target, target_of
from ares.audit.verdict import AttackOutcome, Strength, TaskAudit, judge

__all__ = [
    "EXPLOITS",
    "NAMES",
    "REPORT_NAME",
    "AttackOutcome",
    "AuditOptions",
    "AuditReport",
    "Exploit",
    "Strength",
    "Target",
    "TaskAudit",
    "audit_tasks",
    "condemned",
    "judge",
    "load_audits",
    "report_next_to",
    "select",
    "target_of",
]
