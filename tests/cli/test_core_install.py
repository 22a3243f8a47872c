"""README's main job needs only the core install: ``ares run humaneval --policy oracle`` works with
every optional and dev-only package unimportable (as after ``pip install -e .``)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"
#: Top-level modules that only extras (or typer's old dependency, click) bring.
NOT_IN_CORE = (
    "click", "docker", "pyarrow", "datasets", "gymnasium", "dm_env", "daytona", "e2b", "pytest",
    "hypothesis", "playwright", "ruff",
)  # fmt: skip

BLOCKER = f"""
import importlib.abc, sys
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {NOT_IN_CORE!r}:
            raise ImportError(f"{{name}} is not part of the core install")
sys.meta_path.insert(0, Block())
from ares.cli.main import main
sys.argv = ["ares", *sys.argv[1:]]
main()
"""


def test_readme_main_job_installs_the_core_only() -> None:
    blocks = re.findall(r"```bash\n(.*?)```", README.read_text(), flags=re.DOTALL)
    main_job = blocks[0].strip()
    tests = next(b.strip() for b in blocks if b.strip().endswith(".venv/bin/pytest"))
    assert "pip install -q -e . &&" in main_job and "ares run humaneval --policy oracle" in main_job
    assert "[dev]" not in main_job and "'.[dev]'" in tests and tests.endswith(".venv/bin/pytest")


def test_the_main_job_runs_without_optional_packages(tmp_path: Path) -> None:
    args = ["run", "humaneval", "--policy", "oracle", "--tasks", "0:2", "--out", str(tmp_path)]
    result = subprocess.run(
        [sys.executable, "-c", BLOCKER, *args], capture_output=True, text=True, timeout=300, cwd=tmp_path
    )
    assert result.returncode == 0, result.stderr
    assert "pass rate" in result.stdout and "100.0%" in result.stdout
