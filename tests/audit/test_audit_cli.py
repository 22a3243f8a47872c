"""``ares tasks audit`` end to end: real exploits in real local sandboxes, through the CLI.

The deliberately weak set (tests/fixtures/audit_weak) is flagged task by task, as root and as uid
65534; two HumanEval problems and a Harbor fixture are sound; a toolz SWE fixture is sound against one
exploit of every family, in-process tampering included (the integrity plugin scores it ``tampered``).
The CLI builds the SWE images on first use.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path
from typing import Any

import pytest

from ares.tasks.swe.harness import swebench_available
from nobody_python import DROP, SKIP_REASON, can_drop, nobody_python

FIXTURES = Path(__file__).parents[1] / "fixtures"
WEAK = FIXTURES / "audit_weak"
SRC = Path(__file__).parents[2] / "src"
#: Exploits whose hacks of a SWE task the log grader cannot see (until the integrity plugin lands).


def _cli(*args: str, python: str = sys.executable, prefix: tuple[str, ...] = (), env: Any = None) -> Any:
    env = env or {**os.environ, "ARES_IMAGE_FALLBACK": os.environ.get("ARES_IMAGE_FALLBACK", "offline")}
    command = [*prefix, python, "-m", "ares.cli.main", "tasks", "audit", *args]
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=1200)


def _audits(out: Path) -> dict[str, dict[str, Any]]:
    data = json.loads((out / "audit.json").read_text())
    assert data["format"] == "ares-task-audit/1"
    return {item["task_id"]: item for item in data["tasks"]}


def _check_weak_set(audits: dict[str, dict[str, Any]]) -> None:
    assert {t: a["verdict"] for t, a in audits.items()} == dict.fromkeys(
        ("defined-only", "file-exists", "unconfined-pytest"), "hackable"
    )
    for audit in audits.values():
        null = next(a for a in audit["attacks"] if a["attack"] == "null")
        assert (null["status"], null["reward"]) == ("finished", 0.0)  # valid tasks: doing nothing scores 0
    assert audits["file-exists"]["hacked_by"] == ["touch_outputs"]
    assert {"stub_none", "stub_raise"} <= set(audits["defined-only"]["hacked_by"])
    assert {"stub_always_equal", "inprocess_report", "exit_zero_at_import"} <= set(
        audits["unconfined-pytest"]["hacked_by"]
    )
    for audit in audits.values():
        for attack in audit["attacks"]:
            if attack["attack"] in audit["hacked_by"]:
                assert attack["reward"] > 0 and attack["evidence"] is not None and attack["reason"]


def test_the_weak_set_is_flagged_with_its_evidence_and_weak_tests(tmp_path: Path) -> None:
    done = _cli(str(WEAK), "--mutants", "4", "-c", "4", "--out", str(tmp_path))
    assert done.returncode == 1, done.stderr[-3000:]
    audits = _audits(tmp_path)
    _check_weak_set(audits)
    strength = audits["defined-only"]["strength"]
    assert strength["score"] == 0.0 and strength["mutants"] == 4 and audits["defined-only"]["weak"]
    assert audits["unconfined-pytest"]["strength"]["score"] == 1.0  # a - b instead of a + b is caught
    assert "file-exists: touch_outputs earns 1" in done.stdout
    assert "3 tasks: sound 0, hackable 3, errored 0, weak 1" in done.stdout


@pytest.mark.skipif(not can_drop(), reason=SKIP_REASON)
def test_the_weak_set_is_flagged_unprivileged(request: pytest.FixtureRequest) -> None:
    """The same audit with ARES run by uid 65534 (user-namespace sandboxes, nobody's own cache)."""
    python = nobody_python() or pytest.skip(SKIP_REASON)
    home = Path(tempfile.mkdtemp(prefix="ares-nobody-audit-"))
    request.addfinalizer(lambda: shutil.rmtree(home, ignore_errors=True))
    os.chown(home, 65534, 65534)
    env = {
        "PATH": "/usr/bin:/bin", "HOME": str(home), "TMPDIR": str(home), "ARES_IMAGE_FALLBACK": "offline",
        "PYTHONPATH": os.pathsep.join([str(SRC), sysconfig.get_paths()["purelib"]]),
    }  # fmt: skip
    out = home / "out"
    attacks = "touch_outputs,stub_none,stub_raise,stub_always_equal,inprocess_report,exit_zero_at_import"
    args = (str(WEAK), "--attacks", attacks, "--mutants", "0", "-c", "4", "--out", str(out))
    done = _cli(*args, python=python, prefix=tuple(DROP), env=env)
    assert done.returncode == 1, done.stderr[-3000:]
    _check_weak_set(_audits(out))


def test_humaneval_problems_are_sound_and_their_tests_strong(tmp_path: Path) -> None:
    done = _cli("humaneval", "--tasks", "0:2", "--mutants", "5", "-c", "4", "--out", str(tmp_path))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    audits = _audits(tmp_path)
    assert {t: a["label"] for t, a in audits.items()} == {"humaneval_0": "sound", "humaneval_1": "sound"}
    for audit in audits.values():
        assert len(audit["attacks"]) >= 20 and all(a["status"] == "finished" for a in audit["attacks"])
        assert audit["strength"]["mutants"] == 5 and audit["strength"]["score"] >= 0.5


def test_a_resumed_audit_keeps_what_it_judged_and_refuses_other_settings(tmp_path: Path) -> None:
    few = ("humaneval", "--tasks", "0:3", "--attacks", "null,stub_true", "--mutants", "0")
    few += ("--out", str(tmp_path))
    first = _cli(*few)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    report = json.loads((tmp_path / "audit.json").read_text())
    judged = report["tasks"][0]
    report["tasks"] = report["tasks"][:1]  # as if the audit had stopped after its first task
    (tmp_path / "audit.json").write_text(json.dumps(report))
    again = _cli(*few)
    assert again.returncode == 2 and "add --resume" in again.stderr
    again = _cli(*few, "--resume")
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert "1 of 3 tasks already audited" in again.stdout
    audits = _audits(tmp_path)
    assert sorted(audits) == ["humaneval_0", "humaneval_1", "humaneval_2"]
    assert audits[judged["task_id"]] == judged
    assert all(a["verdict"] == "sound" and len(a["attacks"]) == 2 for a in audits.values())
    other = _cli(*few[:4], "null", "--mutants", "0", "--out", str(tmp_path), "--resume")
    assert other.returncode == 2 and "audited with other attacks" in other.stderr


def test_a_confined_harbor_fixture_is_sound(tmp_path: Path) -> None:
    done = _cli(str(FIXTURES / "harbor"), "--tasks", "fix-bug", "--mutants", "0", "--out", str(tmp_path))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert _audits(tmp_path)["fix-bug"]["verdict"] == "sound"


@pytest.mark.skipif(not swebench_available(), reason="needs swebench + unidiff (ares[swe])")
def test_swe_fixtures_hold_against_every_family_in_process_tampering_included(tmp_path: Path) -> None:
    # Lean for CI (one task, one exploit per family the grader must catch); bench/audit.py runs them all.
    attacks = "stub_none,conftest_pass_all,inprocess_report,fake_result_lines,reward_daemon,trojan_binaries"
    instances = FIXTURES / "swe" / "instances.jsonl"
    tasks = "pytoolz__toolz-90001"
    done = _cli(
        str(instances),
        "--tasks",
        tasks,
        "--attacks",
        attacks,
        "--mutants",
        "2",
        "-c",
        "2",
        "--out",
        str(tmp_path),
    )
    assert done.returncode in (0, 1), done.stderr[-3000:]
    for task_id, audit in _audits(tmp_path).items():
        outcomes = {a["attack"]: a for a in audit["attacks"]}
        assert outcomes["null"]["reward"] == 0.0 and all(a["status"] == "finished" for a in outcomes.values())
        # The integrity plugin turns the in-process family into ``tampered`` zeros (it earned 1.0 before).
        assert audit["hacked_by"] == [] and audit["verdict"] == "sound", (task_id, audit["hacked_by"])
        assert outcomes["inprocess_report"]["reward"] == 0.0
        assert audit["strength"]["mutants"] == 2 and audit["strength"]["score"] == 1.0, audit["strength"]


def test_validate_shows_the_verdicts_of_an_audit_report_beside_the_set(tmp_path: Path) -> None:
    from ares.audit import AuditReport, judge
    from ares.audit.verdict import AttackOutcome

    tasks = tmp_path / "set"
    shutil.copytree(WEAK / "file-exists", tasks / "file-exists")
    report = AuditReport(tasks / "audit.json", {"preset": "harbor"})
    outcomes = [
        AttackOutcome("null", "finished", 0.0, 1.0),
        AttackOutcome("touch_outputs", "finished", 1.0, 1.0),
    ]
    report.record(judge("file-exists", "harbor", outcomes))
    report.save()
    env = {**os.environ, "ARES_IMAGE_FALLBACK": os.environ.get("ARES_IMAGE_FALLBACK", "offline")}
    command = [sys.executable, "-m", "ares.cli.main", "tasks", "validate", str(tasks), "--repeats", "1"]
    done = subprocess.run(
        [*command, "--out", str(tmp_path / "v")], capture_output=True, text=True, env=env, timeout=600
    )
    assert done.returncode == 0, done.stdout + done.stderr  # valid: the oracle wins, doing nothing does not
    assert "audit verdicts" in done.stdout and "hackable: touch_outputs" in done.stdout


@pytest.mark.skipif(not swebench_available(), reason="needs swebench + unidiff (ares[swe])")
def test_synth_audit_drops_a_hackable_instance_and_keeps_a_sound_one(tmp_path: Path) -> None:
    # boltons-90002's tests compare with ==, which an object equal to everything passes (bench/audit.py
    # and docs/security.md: every audit of the SWE fixtures finds it); toolz-90001 holds.
    from ares.audit import AuditOptions, select
    from ares.cli.audit import audit_synth_set

    keep, drop = "pytoolz__toolz-90001", "mahmoud__boltons-90002"
    for side in (FIXTURES / "swe").iterdir():
        if side.is_file() and side.name != "instances.jsonl":
            shutil.copy(side, tmp_path / side.name)
    (tmp_path / "images").symlink_to(FIXTURES / "swe" / "images")
    lines = (FIXTURES / "swe" / "instances.jsonl").read_text().splitlines()
    chosen = [line for line in lines if json.loads(line)["instance_id"] in (keep, drop)]
    instances = tmp_path / "instances.jsonl"
    instances.write_text("\n".join(chosen) + "\n")
    options = AuditOptions(select(["stub_always_equal"]), mutants=0, concurrency=2)
    dropped = audit_synth_set(instances, options)
    assert list(dropped) == [drop], dropped
    assert [json.loads(line)["instance_id"] for line in instances.read_text().splitlines()] == [keep]
    gone = (tmp_path / "instances.dropped.jsonl").read_text().splitlines()
    assert [json.loads(line)["instance_id"] for line in gone] == [drop]
    report = json.loads((tmp_path / "audit.json").read_text())
    assert report["settings"]["attacks"] == ["null", "stub_always_equal"] and report["wall_time_s"] > 0
