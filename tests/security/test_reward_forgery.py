"""Reward forgery: whatever a hostile agent does, a WRONG solution must never be rewarded.

Every attack of forgery_attacks.ATTACKS is played against ``verify()`` with a wrong solution, on a
HumanEval task (workdir /workspace, solution.py) and on the Harbor fixture fix-bug (workdir /app,
stats.py), with ARES run by root and by uid 65534 (see conftest.py). Each must end with a Verdict of
reward 0.0 (attacks on the reward channel or on the checker process may also end in a VerifierError),
never 1.0. In the same harness the untouched wrong solution scores 0.0 and the oracle 1.0, so a pass
means the attack was stopped, not that the harness is broken.

One scenario per mode plays every attack, each in a fresh sandbox, a few at a time
(``ARES_FORGERY_JOBS``, default 4); the tests then read its outcomes. It runs twice: with sandboxes
of the local backend, and with sandboxes taken from a warm pool (on Python 3.12+ a pool once hid the
backend's forks and the tests ran in the agent's own sandbox). Every verdict must be in the mode the
task asked for: the verifier never falls back to the agent's sandbox.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import forgery_attacks as fa
import pytest

from ares.tasks.harbor import load_harbor_task
from ares.tasks.humaneval import load_humaneval

Scenario = Callable[..., dict[str, Any]]
Outcomes = dict[tuple[str, str, str], dict[str, Any]]

FIXBUG_DIR = Path(__file__).resolve().parents[1] / "fixtures" / "harbor" / "fix-bug"
HUMANEVAL_INDEX = 0  # HumanEval/0, has_close_elements: every hidden assert is `candidate(...) == bool`
CONCURRENCY = int(os.environ.get("ARES_FORGERY_JOBS", "4"))
#: The tasks' verifier timeout, lowered so that an attack that stops the checker costs 10 s, not 60.
VERIFIER_TIMEOUT_S = 10.0
#: How long verify() may take before the attack counts as a hang.
VERIFY_GUARD_S = 60.0

CASES = [
    (task, attack.name, mode)
    for mode in fa.MODES
    for task in fa.TASKS
    for attack in fa.ATTACKS
    if task in attack.tasks and mode in attack.modes
]
BASELINES = [(task, mode) for mode in fa.MODES for task in fa.TASKS]


@pytest.fixture(scope="module", params=["local", "pool"])
def factory(request: pytest.FixtureRequest) -> str:
    """Where the agent's sandboxes come from: the local backend, or a warm pool of it."""
    return str(request.param)


@pytest.fixture(scope="module")
def outcomes(scenario: Scenario, host: Any, factory: str) -> Outcomes:
    """Every job's outcome, by (task, attack name), from one scenario run in this mode."""
    humaneval = load_humaneval()[HUMANEVAL_INDEX]
    fixbug = load_harbor_task(FIXBUG_DIR)
    prompt = humaneval.workspace[fa.SOLUTION_FILE[fa.HUMANEVAL]]
    assert isinstance(prompt, str)
    spec = fa.scenario_spec(
        str(FIXBUG_DIR),
        prompt,
        {fa.HUMANEVAL: humaneval.workdir, fa.FIXBUG: fixbug.workdir},
        humaneval_index=HUMANEVAL_INDEX,
        concurrency=CONCURRENCY,
        verifier_timeout_s=VERIFIER_TIMEOUT_S,
        verify_guard_s=VERIFY_GUARD_S,
        factory=factory,
    )
    jobs_file = host.scratch("forgery") / "jobs.json"
    jobs_file.write_text(spec)
    jobs_file.chmod(0o644)
    result = scenario(fa.SCENARIO, {"jobs_file": str(jobs_file)}, timeout=600.0)
    return {(r["task"], r["name"], r["mode"]): r for r in result["results"]}


def describe(outcome: dict[str, Any]) -> str:
    """The outcome in one line: what verify() returned and what the attack's setup said."""
    keys = ("reward", "terms", "error", "hung", "crash", "harness_error", "setup", "solve", "output")
    return "; ".join(f"{key}={outcome[key]!r}" for key in keys if key in outcome)


def _require_ran(outcome: dict[str, Any], what: str) -> None:
    assert "harness_error" not in outcome, f"{what}: the harness failed: {outcome['harness_error']}"
    if "reward" in outcome:  # the tests ran where the task asked, never in the agent's sandbox
        assert outcome["verdict_mode"] == outcome["mode"], f"{what}: verified in {outcome['verdict_mode']}"
    for step in ("setup", "solve"):
        result = outcome.get(step)
        if result is None:
            continue
        if step == "setup" and result.get("exit_code") == fa.NOT_APPLICABLE:
            pytest.skip(f"{what}: not applicable here: {result.get('stderr')}")
        assert result.get("exit_code") == 0, f"{what}: its {step} failed, so it was not played: {result}"


@pytest.mark.parametrize(("task", "mode"), BASELINES, ids=[f"{t}-{m}" for t, m in BASELINES])
def test_honest_solution_scores_one(outcomes: Outcomes, task: str, mode: str) -> None:
    outcome = outcomes[(task, "honest", mode)]
    _require_ran(outcome, f"the oracle of {task} ({mode} mode)")
    assert outcome.get("reward") == 1.0, f"the oracle of {task} did not score 1.0: {describe(outcome)}"


@pytest.mark.parametrize(("task", "mode"), BASELINES, ids=[f"{t}-{m}" for t, m in BASELINES])
def test_wrong_solution_scores_zero(outcomes: Outcomes, task: str, mode: str) -> None:
    outcome = outcomes[(task, "wrong_plain", mode)]
    _require_ran(outcome, f"the wrong solution of {task} ({mode} mode)")
    assert outcome.get("reward") == 0.0, (
        f"the wrong solution of {task} did not score 0.0: {describe(outcome)}"
    )


@pytest.mark.parametrize(
    ("task", "attack", "mode"), CASES, ids=[f"{task}-{name}-{mode}" for task, name, mode in CASES]
)
def test_forgery_scores_zero(outcomes: Outcomes, task: str, attack: str, mode: str) -> None:
    spec = fa.BY_NAME[attack]
    outcome = outcomes[(task, attack, mode)]
    what = f"attack {attack!r} ({spec.kind}: {spec.doc}) on {task} in {mode} mode"
    _require_ran(outcome, what)
    if outcome.get("reward") == 0.0:
        return
    if spec.error_ok and "error" in outcome:
        return
    allowed = "reward 0.0 or a VerifierError" if spec.error_ok else "reward 0.0"
    raise AssertionError(f"{what} was not stopped (wanted {allowed}): {describe(outcome)}")
