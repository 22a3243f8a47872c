"""flow_id: the same number in every process and run, JSON-exact, never from Python's salted hash()."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from ares import tracing

PARTS = [("episode", "run-7", 3), ("dispatch", 0), ("x", 1.5, None, True, (1, "a"))]


def test_flow_ids_agree_across_processes_and_hash_seeds() -> None:
    mine = [tracing.flow_id(*p) for p in PARTS]
    code = (
        f"import json; from ares import tracing; print(json.dumps([tracing.flow_id(*p) for p in {PARTS!r}]))"
    )
    env = {**os.environ, "PYTHONHASHSEED": "12345"}  # this process's hash() differs: flow ids must not
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == mine


def test_flow_ids_are_positive_json_exact_and_distinguish_types() -> None:
    ids = {tracing.flow_id("episode", i) for i in range(1000)}
    assert len(ids) == 1000
    assert all(0 < i < 2**53 for i in ids)
    assert tracing.flow_id(1) != tracing.flow_id("1")
    assert tracing.flow_id("a", "b") != tracing.flow_id("ab")


def test_objects_without_a_stable_repr_are_refused() -> None:
    with pytest.raises(TypeError, match="differs in every process"):
        tracing.flow_id("episode", object())
    with pytest.raises(TypeError):
        tracing.flow_id()
