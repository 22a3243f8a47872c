"""A check's result, and the throwaway child processes that risky probes run in.

Probes that unshare namespaces, mount filesystems or install a seccomp filter do it in a child
process, never in the caller: the child's namespaces, mounts and filter die with it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: A probe child that takes longer than this is killed and its check fails.
CHILD_TIMEOUT_S = 10.0
#: The dir that holds the ``ares`` package, for children that import it.
PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])


@dataclass(frozen=True, slots=True)
class Check:
    """One fact about this machine: whether it holds, what was found, and the command that fixes it."""

    name: str
    ok: bool
    detail: str
    fix: str | None = None


def run_python(args: list[str], timeout_s: float = CHILD_TIMEOUT_S) -> dict[str, Any]:
    """Run this interpreter with ``args``; the JSON object the child printed last, with at least
    ``ok`` and ``detail`` (a crash or timeout becomes ``ok: false`` with what the child said)."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [PACKAGE_ROOT, os.environ.get("PYTHONPATH")])),
    }
    try:
        done = subprocess.run(
            [sys.executable, *args], capture_output=True, text=True, timeout=timeout_s, env=env
        )
    except subprocess.TimeoutExpired:
        return {"ok": False, "detail": f"the probe did not finish within {timeout_s:.0f} s"}
    except OSError as exc:
        return {"ok": False, "detail": f"cannot start {sys.executable}: {exc.strerror or exc}"}
    for line in reversed(done.stdout.splitlines()):
        if line.startswith("{"):
            try:
                result: dict[str, Any] = json.loads(line)
            except json.JSONDecodeError:
                break
            return result
    said = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
    return {"ok": False, "detail": f"the probe crashed: {said}"}
