"""Arming a grader's sandbox with the integrity plugin: files on the host, binds, and the shell lines.

The plugin lives in a read-only bind (``PLUGIN_DIR``) under a module name drawn per verification, so
nothing the agent left in the repository can shadow it; its report goes to a second, writable bind
(``OUT_DIR``) that only this fork sees. The eval script exports ``PYTEST_ADDOPTS=-p <module>`` and
puts ``PLUGIN_DIR`` first on ``PYTHONPATH``: pytest imports the plugin while it parses its options,
before conftest files, entry-point plugins or any project module.
"""

from __future__ import annotations

import secrets
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ares.sandbox.base import BindMount
from ares.sandbox.files import write_files

PLUGIN_DIR = "/ares-integrity"
OUT_DIR = "/ares-integrity-out"
REPORT_FILE = "report.json"
CHANGED_FILE = "changed.txt"
PLUGIN_SOURCE = Path(__file__).with_name("plugin.py")


@dataclass(frozen=True)
class Arming:
    """One verification's plugin: its module name, the nonce its report must carry, its host dirs."""

    nonce: str
    plugin_dir: Path
    out_dir: Path

    @property
    def module(self) -> str:
        return f"ares_integrity_{self.nonce[:16]}"

    @property
    def report_path(self) -> Path:
        return self.out_dir / REPORT_FILE

    def binds(self) -> list[BindMount]:
        return [BindMount(self.plugin_dir, PLUGIN_DIR), BindMount(self.out_dir, OUT_DIR, read_only=False)]

    def shell_lines(self) -> list[str]:
        """Bash that loads the plugin into every pytest the eval script starts."""
        return [
            f"export ARES_INTEGRITY_OUT={OUT_DIR}",
            f'export PYTHONPATH={PLUGIN_DIR}"${{PYTHONPATH:+:$PYTHONPATH}}"',
            f'export PYTEST_ADDOPTS="-p {self.module}${{PYTEST_ADDOPTS:+ $PYTEST_ADDOPTS}}"',
        ]

    def changed_files_line(self, git: str, base: str, excludes: str) -> str:
        """Bash (run by the diff script after ``git add -A`` on its throwaway index) that lists the
        agent's Python files for the plugin: changed or added, and ignored ones git does not add."""
        out = shlex.quote(f"{OUT_DIR}/{CHANGED_FILE}")
        return (
            f"{{ {git} diff --cached --name-only --no-renames {base} -- . {excludes}; "
            f"{git} ls-files --others --ignored --exclude-standard -- '*.py'; }} > {out}"
        )


def arm(plugin_dir: Path, out_dir: Path, test_roots: Sequence[str]) -> Arming:
    """Write the plugin and its inputs into two fresh host dirs (bind sources of the fork)."""
    arming = Arming(secrets.token_hex(16), plugin_dir, out_dir)
    write_files(plugin_dir, {f"{arming.module}.py": PLUGIN_SOURCE.read_text()})
    write_files(out_dir, {"nonce": arming.nonce, "roots.txt": "".join(f"{r}\n" for r in test_roots)})
    out_dir.chmod(0o777)  # the test process may run as any user of the image; only this fork binds it
    for name in ("nonce", "roots.txt"):
        (out_dir / name).chmod(0o666)
    return arming
