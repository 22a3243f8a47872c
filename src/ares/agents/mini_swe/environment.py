"""mini's Environment protocol over an ARES sandbox: each action is one ``sandbox.exec``.

Output, exit code and the submission check follow mini's own environments: stdout and stderr are
one text, a killed command reports exit code -1 with a note, and a command whose output starts with
``COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT`` (exit code 0) ends the run as submitted. Sandbox errors are
not turned into output: they propagate and end the episode as errored.
"""

from __future__ import annotations

import platform
from collections.abc import Mapping
from typing import Any

from ares.agents.bash import combine_output, limit_note
from ares.agents.mini_swe import _mini
from ares.agents.mini_swe.bridge import Bridge
from ares.sandbox.base import ExecResult, Sandbox
from ares.tasks.model import Task

#: The first output line by which mini's agent says it is done (what its submit command prints).
SUBMIT_MARKER = "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"


class SandboxEnvironment:
    """mini's Environment protocol; ``execute`` runs in mini's thread and awaits the sandbox."""

    def __init__(self, sandbox: Sandbox, task: Task, bridge: Bridge, env_vars: Mapping[str, str]) -> None:
        self.config: dict[str, Any] = {
            "cwd": task.workdir,
            "timeout": task.command_timeout_s,
            "env": dict(env_vars),
        }
        self._sandbox = sandbox
        self._task = task
        self._bridge = bridge
        self._env = dict(env_vars) or None

    def execute(
        self, action: dict[str, Any], cwd: str = "", *, timeout: float | None = None
    ) -> dict[str, Any]:
        command = str(action.get("command", ""))
        timeout_s = timeout or self._task.command_timeout_s
        result: ExecResult = self._bridge.call(
            lambda: self._sandbox.exec(
                command, cwd=cwd or self._task.workdir, env=self._env, timeout_s=timeout_s
            )
        )
        notes = (
            [f"The command timed out after {timeout_s:g} seconds and was killed."] if result.timed_out else []
        )
        if note := limit_note(result, self._task.resources):
            notes.append(note)
        output = {
            "output": combine_output(result),
            "returncode": -1 if result.timed_out else result.exit_code,
            "exception_info": " ".join(notes),
        }
        _raise_if_submitted(output)
        return output

    def get_template_vars(self, **kwargs: Any) -> dict[str, Any]:
        """The config and, like mini's Docker environment, the host's ``platform.uname()`` fields."""
        return {**self.config, **platform.uname()._asdict(), **kwargs}

    def serialize(self) -> dict[str, Any]:
        kind = f"ares sandbox ({type(self._sandbox).__name__})"
        return {"info": {"config": {"environment": dict(self.config), "environment_type": kind}}}


def _raise_if_submitted(output: dict[str, Any]) -> None:
    """mini's submission protocol: the marker as first line of a successful command's output."""
    first, _, rest = output["output"].lstrip().partition("\n")
    if first.strip() == SUBMIT_MARKER and output["returncode"] == 0:
        raise _mini.Submitted(
            {"role": "exit", "content": rest, "extra": {"exit_status": "Submitted", "submission": rest}}
        )
