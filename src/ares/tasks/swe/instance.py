"""One SWE task instance, whatever dataset shape it was read from.

Every supported dataset (SWE-bench 4.x and 5.x, SWE-Gym, SWE-smith, SWE-rebench, R2E-Gym) is parsed
into this one value so that the environment, the hygiene step and the grader never look at a raw
row. Fields a format does not have keep their neutral default; what a format has beyond these fields
stays in ``metadata`` so nothing is lost. ``formats.py`` documents how each format maps here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

#: The dataset shape a row came from (``formats.detect_format`` decides it).
SweFormat = Literal["swebench", "swebench5", "swegym", "swesmith", "swerebench", "r2egym"]
SWE_FORMATS: tuple[SweFormat, ...] = ("swebench", "swebench5", "swegym", "swesmith", "swerebench", "r2egym")


@dataclass(frozen=True)
class SweInstance:
    """A repository-level task: the repo at ``base_commit`` in an image, an issue text, hidden tests.

    ``patch`` is the gold fix (the oracle's answer) as a unified diff against ``base_commit`` (for
    R2E-Gym, rebuilt from ``parsed_commit_content``).
    ``bug_patch`` is set only for synthetic-bug datasets (SWE-smith), whose rows carry the diff that
    *introduces* the bug; there ``patch`` is that diff reversed, so every format has the fix in the
    same place. ``test_patch`` adds or updates the hidden tests; it is applied only by the verifier.

    Grading: ``fail_to_pass``/``pass_to_pass`` are test ids as the log parser names them. R2E-Gym
    instead grades by ``expected_output`` (test id -> status, the whole map must match) after adding
    ``hidden_tests``, and keeps F2P/P2P empty. ``eval_script``/``test_cmd``/``log_parser`` are set
    when the row says how its tests run (SWE-bench 5.x, SWE-rebench, R2E-Gym); otherwise the grader
    uses the harness's per-repo specs.

    ``image`` is the row's own image name (``None`` when the format has none); ``images.image_for``
    resolves the final name, applying templates.
    """

    instance_id: str
    repo: str
    base_commit: str
    problem_statement: str
    format: SweFormat = "swebench"
    hints_text: str = ""
    patch: str = ""
    test_patch: str = ""
    fail_to_pass: tuple[str, ...] = ()
    pass_to_pass: tuple[str, ...] = ()
    version: str = ""
    environment_setup_commit: str = ""
    image: str | None = None
    eval_script: str | None = None
    test_cmd: str | None = None
    log_parser: str | None = None
    bug_patch: str | None = None
    expected_output: Mapping[str, str] | None = None
    #: Hidden test files the grader adds (R2E-Gym's generated tests: file name -> code); host only.
    hidden_tests: Mapping[str, str] | None = None
    #: Where the row came from ("file.jsonl:12"), for error messages and reports.
    source: str = ""
    #: The row's other fields, unchanged (created_at, install_config, meta, ...).
    metadata: Mapping[str, Any] = field(default_factory=dict)

    @property
    def has_gold_patch(self) -> bool:
        """Whether an oracle can solve the instance by applying ``patch``."""
        return bool(self.patch.strip())
