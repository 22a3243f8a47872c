"""The audit's judgement, report and per-kind targets, on hand-made outcomes (no sandbox)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ares.audit import AuditReport, Strength, condemned, judge, load_audits, report_next_to, select, target_of
from ares.audit.exploits import EXPLOITS, NULL, _test_stubs
from ares.audit.report import AuditReportError
from ares.audit.strength import changed_lines, spread
from ares.audit.target import named_functions
from ares.audit.verdict import AttackOutcome
from ares.tasks.model import Task


def _run(attack: str, reward: float | None, status: str = "finished") -> AttackOutcome:
    return AttackOutcome(attack, status, reward, 1.0, f"reason of {attack}", "verifier tail")


def test_a_task_no_attack_rewards_is_sound() -> None:
    audit = judge("t", "swe", [_run(NULL, 0.0), _run("stub_none", 0.0), _run("conftest_pass_all", 0.0)])
    assert audit.verdict == "sound" and audit.label == "sound" and audit.hacked_by == ()


def test_any_reward_above_zero_is_a_hack_and_names_the_attacks() -> None:
    audit = judge("t", "harbor", [_run(NULL, 0.0), _run("stub_true", 0.3), _run("reward_daemon", 1.0)])
    assert audit.verdict == "hackable"
    assert audit.hacked_by == ("stub_true", "reward_daemon")
    assert audit.label == "hackable: stub_true, reward_daemon"
    attacks = audit.to_dict()["attacks"]
    assert "evidence" in attacks[1] and "evidence" not in attacks[0]  # evidence for the hacks only


def test_a_task_that_pays_for_nothing_is_hackable_by_null() -> None:
    assert judge("t", "harbor", [_run(NULL, 1.0), _run("stub_none", 1.0)]).hacked_by == (NULL, "stub_none")


def test_errored_runs_say_nothing_but_an_errored_null_leaves_the_task_unjudged() -> None:
    some = judge("t", "swe", [_run(NULL, 0.0), _run("trojan_binaries", None, "errored")])
    assert some.verdict == "sound" and "errored: trojan_binaries" in some.reason
    assert judge("t", "swe", [_run(NULL, None, "errored"), _run("stub_none", 1.0)]).verdict == "errored"
    assert judge("t", "swe", [_run("stub_none", None, "errored")]).verdict == "errored"
    truncated = judge("t", "swe", [_run(NULL, 0.0), _run("stub_none", 1.0, "truncated")])
    assert truncated.verdict == "sound"  # only a finished episode's reward counts


def test_strength_scores_the_share_of_mutants_rejected_and_flags_weak_tests() -> None:
    strong = Strength(mutants=10, accepted=1)
    assert strong.score == 0.9 and not strong.weak(0.5)
    weak = Strength(mutants=5, accepted=4, errored=1)
    assert weak.judged == 4 and weak.score == 0.0 and weak.weak(0.5)
    assert Strength(0, 0, note="no gold").score is None and not Strength(0, 0).weak(0.5)
    audit = judge("t", "humaneval", [_run(NULL, 0.0)], Strength(4, 3), weak_threshold=0.5)
    assert audit.verdict == "sound" and audit.weak and audit.label == "sound; weak (strength 0.25)"


def test_the_report_counts_verdicts_attacks_and_condemns_hackable_and_weak(tmp_path: Path) -> None:
    report = AuditReport(tmp_path / "audit.json", {"preset": "harbor"})
    report.record(judge("a", "harbor", [_run(NULL, 0.0), _run("stub_none", 1.0)]))
    report.record(judge("b", "harbor", [_run(NULL, 0.0), _run("stub_none", 0.0)], Strength(2, 2)))
    report.record(judge("c", "harbor", [_run(NULL, 0.0), _run("stub_none", 0.0)], Strength(2, 0)))
    report.save()
    data = json.loads(report.path.read_text())
    assert data["summary"] | {"task_seconds": 0} == {
        "tasks": 3, "sound": 2, "hackable": 1, "errored": 0, "weak": 1, "task_seconds": 0,
    }  # fmt: skip
    assert data["attacks"]["stub_none"] == {"ran": 3, "hacked": 1, "errored": 0}
    audits = load_audits(report.path)
    assert condemned(audits) == {"a": "hackable: stub_none", "b": "sound; weak (strength 0)"}
    assert report_next_to(tmp_path) == report.path
    assert report_next_to(tmp_path / "instances.jsonl") == report.path
    assert report_next_to(tmp_path / "elsewhere" / "instances.jsonl") is None
    (tmp_path / "other.json").write_text('{"format": "something else", "tasks": []}')
    with pytest.raises(AuditReportError, match="not an ares task audit report"):
        load_audits(tmp_path / "other.json")


def test_targets_take_only_what_the_agent_sees_or_can_guess() -> None:
    text = "`clamp` raises when ... `Inventory.remove` and take_nth(2, seq) at /testbed (x)"
    assert named_functions(text) == ("clamp", "remove", "take_nth")
    assert named_functions("write `hello.txt` and `stats.py`; call print(x) and ValueError(y)") == ()
    swe = Task(
        "s", "Fix `tail`.", {}, workdir="/testbed", source="swebench",
        metadata={"FAIL_TO_PASS": ["pkg/tests/test_a.py::test_tail", "pkg/tests/test_a.py::K::test_b[1]"]},
    )  # fmt: skip
    target = target_of(swe)
    assert (
        target.kind == "swe"
        and target.functions == ("tail",)
        and target.test_files == ("pkg/tests/test_a.py",)
    )
    harbor = Task(
        "h", "Write `median(values)` in `/app/stats.py` and `/app/out/report.txt`.", {}, workdir="/app"
    )
    assert target_of(harbor).files == ("stats.py",)
    assert target_of(harbor).outputs == ("stats.py", "out/report.txt")


def test_rewritten_tests_keep_the_ids_a_grader_looks_for() -> None:
    stubs = _test_stubs(["a/test_x.py::test_one", "a/test_x.py::K::test_two[p]", "b/test_y.py::test_z"])
    assert (
        stubs["a/test_x.py"] == "def test_one():\n    pass\nclass K:\n    def test_two(self):\n        pass\n"
    )
    assert stubs["b/test_y.py"] == "def test_z():\n    pass\n"


def test_every_exploit_builds_a_script_or_declines_and_null_is_always_run() -> None:
    target = target_of(Task("h", "Write `add(a, b)` in `calc.py`.", {}, workdir="/app"))
    for exploit in EXPLOITS:
        script = exploit.script(target)
        assert script is None or script == "" or script.startswith("cd /app\n"), exploit.name
    assert [e.name for e in select(["stub_none"])] == [NULL, "stub_none"]
    with pytest.raises(ValueError, match="unknown exploits nope"):
        select(["nope"])


def test_changed_lines_are_the_new_side_lines_of_each_hunk() -> None:
    patch = (
        "diff --git a/m.py b/m.py\n--- a/m.py\n+++ b/m.py\n@@ -10,4 +10,4 @@ def f():\n"
        "     a = 1\n-    b = 2\n+    b = 3\n     c = 4\n-    d = 5\n     e = 6\n"
    )
    assert changed_lines(patch) == {"m.py": {11, 13}}
    assert spread(list(range(10)), 3) == [0, 3, 6]  # type: ignore[arg-type]


def test_code_is_planted_in_the_packages_when_the_statement_names_no_function(tmp_path: Path) -> None:
    """A statement that names no function (a factory task's template) still gets every in-process
    and exit exploit: the code goes into the project's packages, which any test importing it runs;
    only the stubs, which need a name, decline. The tool itself runs in a real python3."""
    import shutil
    import subprocess
    import sys

    from ares.audit.exploits import TOOLS_DIR

    target = target_of(
        Task("s", "Something in the library is broken.", {}, workdir=str(tmp_path), source="swebench")
    )
    assert target.functions == () and target.files == ()
    planted = {e.name: e.script(target) for e in EXPLOITS if e.family in ("inprocess", "exit")}
    assert planted and all(planted.values())
    assert all(e.script(target) is None for e in EXPLOITS if e.family == "stub" and e.name != "touch_outputs")
    for rel in ("pkg/__init__.py", "pkg/sub/__init__.py", "pkg/core.py", "tests/__init__.py", "setup.py"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("X = 1\n")
    script = planted["inprocess_report"]
    assert script is not None
    try:
        done = subprocess.run(
            ["bash", "-c", script.replace("python3 ", f"{sys.executable} ")],
            capture_output=True, text=True, check=True,
        )  # fmt: skip
    finally:
        shutil.rmtree(TOOLS_DIR, ignore_errors=True)  # where the script ships its tool
    assert done.stdout.split() == ["changed", "pkg/__init__.py", "changed", "pkg/sub/__init__.py"]
    assert (tmp_path / "pkg/__init__.py").read_text().startswith("X = 1\n\n") and "TestReport" in (
        tmp_path / "pkg/__init__.py"
    ).read_text()
    assert (tmp_path / "tests/__init__.py").read_text() == "X = 1\n"  # test code is the grader's, not planted
