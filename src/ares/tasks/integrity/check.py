"""The grader's side of integrity: the plugin's report against the log it graded.

A run is *armed* when the plugin announced itself on stdout (``ares-integrity: armed``, printed at
import, before any of the agent's code ran). An armed run scores only if the report exists, carries
this verification's nonce, was written at the end of the session, lists no tampering, and every test
the log counts as passing (``PASSED``, ``XPASS``, ``XFAIL``) among the graded ones ran and passed (or
xfailed) by the plugin's own account of each phase. Anything else is ``tampered``, with what was seen.
A run the plugin could not arm (no audit hooks before Python 3.8, a test command that is not pytest)
is graded from the log alone and says so.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

ARMED_LINE = "ares-integrity: armed"
DISARMED_PREFIX = "ares-integrity: disarmed"
#: Far above any real suite's report (a few hundred bytes per test); past it the report is not the plugin's.
MAX_REPORT_BYTES = 64 * 1024 * 1024
PASSING = {"PASSED", "XPASS"}
XFAILING = {"XFAIL"}


@dataclass(frozen=True)
class IntegrityResult:
    """``armed`` and, when the run was tampered with, what gave it away (``findings``)."""

    armed: bool
    findings: tuple[dict[str, str], ...] = ()
    note: str = ""
    tests_seen: int = 0
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def tampered(self) -> bool:
        return bool(self.findings)

    def to_dict(self) -> dict[str, Any]:
        return {
            "armed": self.armed,
            "tampered": list(self.findings),
            "note": self.note,
            "tests_seen": self.tests_seen,
        }


def judge(
    log: str,
    report: bytes | None,
    nonce: str,
    statuses: Mapping[str, object],
    graded: Iterable[str],
) -> IntegrityResult:
    """The integrity verdict on one run: ``log`` as graded, the plugin's ``report`` (None if absent),
    the log's ``statuses`` by the instance's parser and the ``graded`` test names."""
    if ARMED_LINE not in log:
        disarmed = next((ln for ln in log.splitlines() if ln.startswith(DISARMED_PREFIX)), "")
        note = disarmed or "the integrity plugin did not load (not pytest, or an interpreter it cannot serve)"
        return IntegrityResult(False, note=f"graded from the log alone: {note}")
    document, problem = _read(report, nonce)
    if document is None:
        return IntegrityResult(True, ({"kind": "no_report", "detail": problem},))
    tests: Mapping[str, Mapping[str, Any]] = document.get("tests") or {}
    findings = [dict(f) for f in document.get("tampered") or [] if isinstance(f, dict)]
    for name in sorted(set(graded)):
        status = getattr(statuses.get(name), "value", statuses.get(name))
        if status in PASSING | XFAILING:
            problem = _disagreement(name, str(status), tests)
            if problem:
                findings.append({"kind": "log_disagrees", "detail": problem})
    return IntegrityResult(True, tuple(findings[:100]), tests_seen=len(tests))


def _read(report: bytes | None, nonce: str) -> tuple[dict[str, Any] | None, str]:
    if report is None:
        return None, "the test process ended without the plugin's report (an exit that skipped pytest's end)"
    if len(report) > MAX_REPORT_BYTES:
        return None, f"the report has {len(report)} bytes"
    try:
        document = json.loads(report)
    except ValueError as exc:
        return None, f"the report is not the plugin's JSON ({exc})"
    if not isinstance(document, dict) or document.get("nonce") != nonce:
        return None, "the report does not carry this verification's nonce"
    if document.get("status") != "complete":
        return None, f"the report's status is {document.get('status')!r}"
    return document, ""


def _records(name: str, tests: Mapping[str, Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The plugin's records a log's test name can mean: the node id itself, the parts after the file
    joined with dots (R2E-Gym's names: ``Class.test``), or a node id the name is cut from."""
    if name in tests:
        return [tests[name]]
    dotted = [r for key, r in tests.items() if ".".join(key.split("::")[1:]) == name]
    return dotted or [r for key, r in tests.items() if key.startswith(name)]


def _disagreement(name: str, status: str, tests: Mapping[str, Mapping[str, Any]]) -> str:
    """Why the plugin's record contradicts the log's ``status`` for test ``name`` ('' if it does not)."""
    records = _records(name, tests)
    if not records:
        return f"{name}: the log says {status}, but no such test ran"
    for record in records:
        phases = (record.get("setup"), record.get("call"))
        if status in PASSING and phases == ("passed", "passed"):
            return ""
        if status in XFAILING and (
            "xfailed" in phases or (record.get("xfail_marked") and "failed" in phases)
        ):
            return ""
    return f"{name}: the log says {status}, the test process saw setup={phases[0]}, call={phases[1]}"
