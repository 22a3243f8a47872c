"""Tasks: the Task model and loaders for Harbor-format directories and HumanEval."""

from ares.tasks.harbor import load_harbor_dataset, load_harbor_task
from ares.tasks.humaneval import load_humaneval
from ares.tasks.model import VERIFIER_MODES, FileSource, Task, VerifierMode

__all__ = [
    "VERIFIER_MODES",
    "FileSource",
    "Task",
    "VerifierMode",
    "load_harbor_dataset",
    "load_harbor_task",
    "load_humaneval",
]
