"""What the Ray tests of this folder share: a real local Ray instance per test module."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture(scope="module")
def ray_instance() -> Iterator[None]:
    """A local Ray instance of 2 CPUs for the module's tests (skipped without the ``ray`` extra)."""
    ray = pytest.importorskip("ray")
    # Ray runs its workers at nice 15: on a machine busy with other work (other test runs) they would
    # wait behind every ordinary process, and a worker that starts in half a second takes ten.
    ray.init(
        num_cpus=2, include_dashboard=False, log_to_driver=False, namespace="ares-tests",
        _system_config={"worker_niceness": 0},
    )  # fmt: skip
    yield
    ray.shutdown()
