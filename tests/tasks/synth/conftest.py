"""The five fixture projects' full sources, from the SWE fixtures' bundles."""

from __future__ import annotations

from pathlib import Path

import pytest
from synth_sources import BUNDLES, PROJECTS, git


@pytest.fixture(scope="session")
def clones(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Each project's release tree: a clone of the first branch of its fixture bundle (one commit)."""
    base = tmp_path_factory.mktemp("clones")
    out: dict[str, Path] = {}
    for name in PROJECTS:
        bundle = BUNDLES / name / f"{name}.bundle"
        branch = git(base, "bundle", "list-heads", str(bundle)).split()[1].removeprefix("refs/heads/")
        git(base, "clone", "-q", "-b", branch, str(bundle), name)
        out[name] = base / name
    return out
