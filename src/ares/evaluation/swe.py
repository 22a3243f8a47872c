"""Grade existing SWE-bench predictions (from any agent) as ``ares run swebench`` grades its agents.

Each non-empty prediction is one episode of a ``CodeEnvironment`` over the instance's task (its
image, /testbed at ``base_commit``), played by ``prediction_agent``: the patch is applied with the
harness's cascade, then the task's own ``SweVerification`` grades /testbed's diff in a fork of the
pristine image, on the host. Episodes run in parallel through ``rollout.runner.run_episodes``.

Empty predictions (``None``/``""``) are not run, as in the harness. The outcome per instance and
the run report follow the official shapes (``eval_report``); files (``write_eval``):

    OUT/report.json                      the run report (make_run_report's fields)
    OUT/<instance_id>/report.json        the instance report (get_eval_report's shape)
    OUT/<instance_id>/patch.diff         the prediction as given
    OUT/<instance_id>/model.patch        what reached the grader (minus files it always resets)
    OUT/<instance_id>/test_output.txt    the eval script's log, as the harness names it
    OUT/<instance_id>/apply.log          the apply cascade's output
    OUT/<instance_id>/error.txt          why the instance errored, when it did
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ares.core.status import EpisodeStatus
from ares.envs.code_env import CodeEnvironment
from ares.policies.scripted import null_policy
from ares.rollout.results import EpisodeResult
from ares.rollout.runner import run_episodes
from ares.sandbox.base import SandboxFactory
from ares.sandbox.local import LocalSandbox
from ares.tasks.model import Task
from ares.tasks.swe.eval_report import (
    InstanceResult,
    InstanceStatus,
    graded_report,
    run_report,
    ungraded_report,
)
from ares.tasks.swe.prediction_agent import ApplyOutcome, PredictionAgentFactory
from ares.tasks.swe.predictions import Prediction, PredictionsError

DEFAULT_CONCURRENCY = 8
_SHOWN_IDS = 5


@dataclass(frozen=True)
class EvalRun:
    """Every prediction's result (in prediction order), the run report, and how long it took."""

    results: tuple[InstanceResult, ...]
    report: dict[str, Any] = field(default_factory=dict)
    wall_time_s: float = 0.0

    @property
    def errored(self) -> list[InstanceResult]:
        return [r for r in self.results if r.status is InstanceStatus.ERROR]


def tasks_for(predictions: Sequence[Prediction], tasks: Sequence[Task]) -> list[Task]:
    """The tasks of the predicted instances, in ``tasks`` order; PredictionsError naming ids the
    instance file does not have."""
    by_id = {task.id: task for task in tasks}
    unknown = [p for p in predictions if p.instance_id not in by_id]
    if unknown:
        shown = ", ".join(f"{p.instance_id!r} ({p.where})" for p in unknown[:_SHOWN_IDS])
        more = f" and {len(unknown) - _SHOWN_IDS} more" if len(unknown) > _SHOWN_IDS else ""
        raise PredictionsError(
            f"{len(unknown)} predicted instance ids are not in the instance file: {shown}{more}; "
            "check --path and --split"
        )
    wanted = {p.instance_id for p in predictions}
    return [task for task in tasks if task.id in wanted]


async def evaluate_predictions(
    predictions: Sequence[Prediction],
    tasks: Sequence[Task],
    *,
    sandbox_factory: SandboxFactory = LocalSandbox,
    concurrency: int = DEFAULT_CONCURRENCY,
    on_result: Callable[[InstanceResult], None] | None = None,
) -> EvalRun:
    """Grade ``predictions`` against ``tasks`` (every task of the instance file, e.g. from
    ``load_swe_tasks``); ``on_result`` is called as each instance is done."""
    started = time.perf_counter()
    chosen = tasks_for(predictions, tasks)
    by_id = {p.instance_id: p for p in predictions}
    results: dict[str, InstanceResult] = {}

    def done(result: InstanceResult) -> None:
        results[result.instance_id] = result
        if on_result is not None:
            on_result(result)

    for prediction in predictions:
        if prediction.empty:
            done(InstanceResult(prediction.instance_id, InstanceStatus.EMPTY_PATCH, prediction))
    to_run = [task for task in chosen if not by_id[task.id].empty]
    if to_run:
        factory = PredictionAgentFactory({t.id: by_id[t.id].model_patch or "" for t in to_run})

        def make_env() -> CodeEnvironment:
            return CodeEnvironment(
                to_run, agent_factory=factory, sandbox_factory=sandbox_factory, step_limit=1,
                name="swebench-eval",
            )  # fmt: skip

        def episode_done(episode: EpisodeResult) -> None:
            prediction = by_id[episode.task_id]
            done(_instance_result(episode, prediction, factory.outcomes.get(episode.task_id)))

        await run_episodes(
            make_env, null_policy, episodes=len(to_run), concurrency=concurrency, num_tasks=len(to_run),
            on_result=episode_done, keep_records=False,
        )  # fmt: skip
    ordered = tuple(results[p.instance_id] for p in predictions)
    report = run_report(ordered, [task.id for task in tasks], predictions)
    return EvalRun(ordered, report, time.perf_counter() - started)


def _instance_result(
    episode: EpisodeResult, prediction: Prediction, outcome: ApplyOutcome | None
) -> InstanceResult:
    """An episode of the prediction agent as the harness would count it (``eval_report``)."""
    files = episode.record.get("verifier_files") or {}
    common: dict[str, Any] = {
        "eval_log": files.get("swe/eval.log", ""),
        "apply_log": "" if outcome is None else outcome.log,
        "graded_patch": files.get("swe/model.patch", ""),
        "duration_s": episode.duration_s,
    }
    iid = prediction.instance_id
    if outcome is not None and not outcome.applied:  # the model's patch is at fault: unresolved
        report = ungraded_report(outcome.log)
        return InstanceResult(iid, InstanceStatus.UNRESOLVED, prediction, report, **common)
    graded = episode.status in (EpisodeStatus.FINISHED, EpisodeStatus.TRUNCATED)
    if graded and "swe/grade.json" in files:
        grade = json.loads(files["swe/grade.json"])
        resolved = episode.reward == 1.0
        status = InstanceStatus.RESOLVED if resolved else InstanceStatus.UNRESOLVED
        # a grade with an error: the patch broke the test run (a 0), the log has no gradable results
        ungradable = "error" in grade
        report = ungraded_report(common["eval_log"]) if ungradable else graded_report(grade, resolved)
        return InstanceResult(iid, status, prediction, report, **common)
    error = (episode.error or {}).get("message") or f"the episode ended {episode.status}"
    return InstanceResult(iid, InstanceStatus.ERROR, prediction, error=str(error), **common)


def write_eval(run: EvalRun, out_dir: Path) -> Path:
    """Write the run report and each instance's files under ``out_dir`` (see the module docstring);
    the run report's path. Blocking: call it through ``asyncio.to_thread`` from async code."""
    out_dir.mkdir(parents=True, exist_ok=True)
    for result in run.results:
        if result.status is InstanceStatus.EMPTY_PATCH:
            continue  # not run: no logs, as in the harness
        where = out_dir / result.instance_id
        where.mkdir(parents=True, exist_ok=True)
        files = {
            "patch.diff": result.prediction.model_patch or "",
            "model.patch": result.graded_patch,
            "test_output.txt": result.eval_log,
            "apply.log": result.apply_log,
            "error.txt": result.error or "",
        }
        for name, text in files.items():
            if text:
                _write(where / name, text)
        report = result.report_json()
        if report is not None:
            _write(where / "report.json", json.dumps(report, indent=4))
    path = out_dir / "report.json"
    _write(path, json.dumps(run.report, indent=4))
    return path


def _write(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8", errors="surrogateescape")
    os.replace(tmp, path)
