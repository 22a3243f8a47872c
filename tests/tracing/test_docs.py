"""The Python examples in docs/tracing.md run as written."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from ares import tracing

DOCS = Path(__file__).resolve().parents[2] / "docs" / "tracing.md"
BLOCKS = re.findall(r"```python\n(.*?)```", DOCS.read_text(), flags=re.DOTALL)


def test_there_are_examples() -> None:
    assert len(BLOCKS) == 2


@pytest.mark.parametrize("code", BLOCKS, ids=[f"block{i}" for i in range(len(BLOCKS))])
def test_docs_python_block_runs(code: str, tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    if "write_trace" in code:
        events = tracing.read_trace(tmp_path / "trace.json")
        assert sum(e["ph"] == "X" for e in events) == 3
        assert sum(e["ph"] == "f" for e in events) == 2 and sum(e["ph"] == "s" for e in events) == 2
