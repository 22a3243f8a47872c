"""SWE-bench predictions from recorded SWE episodes: what ``ares eval`` or the official harness grade.

The model patch is the agent's change exactly as the SWE verifier recorded it (log file
``swe/model.patch`` of the episode: its /testbed diff against ``base_commit``, computed from the
sandbox's filesystem, never by the agent's git). It sits in the record's environment episode
(``metadata["episode"]["verifier_files"]``), where ``CodeEnvironment`` keeps a ``Verdict``'s files.

One prediction per instance: a run with several episodes of an instance (``--group-size``, more
episodes than tasks) exports the first of them. Episodes without a recorded patch are skipped and
counted by reason: not a SWE episode, or a SWE episode whose verifier never ran (it errored before).
A patch cut at the record's size bound is skipped too (it would not apply).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ares.llm.types import LLMResponse
from ares.records.model import EpisodeRecord
from ares.tasks.swe.predictions import Prediction, write_predictions

MODEL_PATCH_FILE = "swe/model.patch"
#: What ``swe.verification._bounded`` leaves in a patch it had to cut.
_CUT_MARK = " characters cut ...]\n"


@dataclass(frozen=True)
class PredictionExport:
    """The predictions of some episodes and, per reason, how many episodes gave none."""

    predictions: tuple[Prediction, ...]
    skipped: Mapping[str, int] = field(default_factory=dict)

    def notes(self) -> list[str]:
        """One human line per skip reason."""
        return [f"{count} episodes skipped: {reason}" for reason, count in sorted(self.skipped.items())]


def episode_patch(episode: EpisodeRecord) -> str | None:
    """The agent's diff the SWE verifier recorded for ``episode``; None when there is none."""
    summary = episode.metadata.get("episode") if isinstance(episode.metadata, Mapping) else None
    files = summary.get("verifier_files") if isinstance(summary, Mapping) else None
    patch = files.get(MODEL_PATCH_FILE) if isinstance(files, Mapping) else None
    return patch if isinstance(patch, str) else None


def episode_model(episode: EpisodeRecord) -> str | None:
    """The model the episode's LLM responses name (the most frequent one), if any does."""
    names = Counter(
        step.action.model
        for step in episode.steps
        if isinstance(step.action, LLMResponse) and step.action.model
    )
    return names.most_common(1)[0][0] if names else None


def swebench_predictions(
    episodes: Iterable[EpisodeRecord], *, model_name: str | None = None, default_model: str = "ares"
) -> PredictionExport:
    """One prediction per SWE instance among ``episodes`` (in their order; see the module docstring).

    ``model_name_or_path`` is ``model_name`` when given, else the model the episode's responses name,
    else ``default_model`` (the CLI passes the run's policy).
    """
    predictions: dict[str, Prediction] = {}
    skipped: Counter[str] = Counter()
    for episode in episodes:
        patch = episode_patch(episode)
        if patch is None:
            skipped[_why_no_patch(episode)] += 1
            continue
        if _CUT_MARK in patch:
            skipped["patch cut at the record's size bound (it would not apply)"] += 1
            continue
        instance_id = str(episode.task_id)
        if instance_id in predictions:
            skipped["another episode of the same instance was exported (one prediction per instance)"] += 1
            continue
        model = model_name or episode_model(episode) or default_model
        predictions[instance_id] = Prediction(instance_id, patch, model, f"episode {episode.episode_id}")
    return PredictionExport(tuple(predictions.values()), dict(skipped))


def _why_no_patch(episode: EpisodeRecord) -> str:
    env: Any = episode.env
    name = str(env.get("name", "")) if isinstance(env, Mapping) else ""
    if name.startswith("swebench"):
        return f"SWE episode without a recorded patch (status {episode.status}: the verifier did not run)"
    return "not a SWE episode (no swe/model.patch recorded)"


def write_swebench_predictions(
    episodes: Iterable[EpisodeRecord],
    path: Path,
    *,
    model_name: str | None = None,
    default_model: str = "ares",
) -> PredictionExport:
    """Write ``predictions.jsonl`` for ``episodes`` at ``path``; what was written and skipped."""
    export = swebench_predictions(episodes, model_name=model_name, default_model=default_model)
    write_predictions(export.predictions, path)
    return export
