"""Every test module is collected: none sits below a directory pytest is told not to enter.

pytest skips ``build``, ``dist``, ``venv``... (``norecursedirs``) without a word, so a test folder with
such a name would silently drop its tests from every run. ``fixtures`` is skipped on purpose (task
dirs with their own ``tests/``).
"""

from __future__ import annotations

import fnmatch
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ON_PURPOSE = {"fixtures"}


def test_no_test_module_is_hidden_by_norecursedirs() -> None:
    patterns = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"][
        "norecursedirs"
    ]
    hidden = [
        str(path.relative_to(ROOT))
        for path in (ROOT / "tests").rglob("test_*.py")
        if any(
            fnmatch.fnmatch(part, pattern) and part not in ON_PURPOSE
            for part in path.relative_to(ROOT / "tests").parts[:-1]
            for pattern in patterns
        )
    ]
    assert hidden == [], f"pytest never collects these (rename their folder): {hidden}"
