"""The backend registry of the sandbox conformance suite.

Every backend runs the same tests (``test_sandbox_conformance.py``). To add a backend:

1. Write a factory builder: a zero-argument callable returning an *async context manager* that yields a
   ``SandboxFactory`` (``spec -> unstarted Sandbox``). Set up and tear down whatever the backend needs
   (an engine, a client, a fake server) inside it. Raise ``pytest.skip("why")`` there, or return a
   reason from ``unavailable``, when a prerequisite is missing: the backend then skips with that reason.
   Put a larger builder in a helper module next to this file, named ``conformance_<backend>.py`` (test
   basenames must be unique across tests/, and the ``conformance_`` prefix keeps pytest from
   collecting it as tests).
2. Add ONE entry to ``REGISTRY`` below: ``"name": Backend(builder, Capabilities(...), unavailable)``
   (``Backend`` and ``Capabilities`` live in ``conformance_kit.py``; import helpers the same way).
   Declare only the limits the backend really enforces; tests marked ``@pytest.mark.limit("memory")``
   (etc.) skip for backends that do not declare that limit.

Run one backend with ``pytest tests/sandbox/conformance -k "local and not pool"`` (the backend name
is the test id).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator

import pytest
from conformance_cloud import cloud_fake_unavailable, daytona_fake_factory, e2b_fake_factory
from conformance_docker import docker_factory, docker_unavailable, engine_is_local
from conformance_kit import LIMITS, Backend, BackendUnderTest, Capabilities

from ares.sandbox import Sandbox, SandboxFactory
from ares.sandbox.local import LocalSandbox
from ares.sandbox.warm_pool import WarmPool


# ---------------------------------------------------------------------------------------- builders
@contextlib.asynccontextmanager
async def _local() -> AsyncIterator[SandboxFactory]:
    yield LocalSandbox


@contextlib.asynccontextmanager
async def _local_pool() -> AsyncIterator[SandboxFactory]:
    async with WarmPool(LocalSandbox, size=1) as pool:
        yield pool


def _local_unavailable() -> str | None:
    if not os.path.exists("/proc/self/ns/user"):
        return "the local sandbox needs Linux user namespaces"
    return None


# ---------------------------------------------------------------------------------------- registry
#: What the local backend enforces (cgroups, or rlimits and a tmpfs: see ares.sandbox.local.limits).
LOCAL = Capabilities(limits=frozenset({"memory", "pids", "disk"}))
#: What the docker backend enforces here: storage needs quota support the engine may lack (docs/sandbox.md).
DOCKER = Capabilities(limits=frozenset({"memory", "pids"}), host_processes=engine_is_local())
#: The cloud adapters against fake services whose sandboxes are local sandboxes on this host (so their
#: processes are too). The network flag travels in the create request and the fake applies it; no limit
#: does (Daytona sends resources only for image sandboxes, E2B never), and neither adapter can report
#: ``limit_hit`` because neither SDK says which limit stopped a command.
CLOUD_FAKE = Capabilities()

REGISTRY: dict[str, Backend] = {
    "local": Backend(_local, LOCAL, _local_unavailable),
    "local+pool": Backend(_local_pool, LOCAL, _local_unavailable),
    "docker": Backend(docker_factory, DOCKER, docker_unavailable),
    "daytona-fake": Backend(daytona_fake_factory, CLOUD_FAKE, cloud_fake_unavailable("daytona")),
    "e2b-fake": Backend(e2b_fake_factory, CLOUD_FAKE, cloud_fake_unavailable("e2b")),
}


# ---------------------------------------------------------------------------------------- fixtures
def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "limit(name): the test needs a backend that enforces this resource limit"
    )


@pytest.fixture(params=sorted(REGISTRY))
async def sandbox_backend(request: pytest.FixtureRequest) -> AsyncIterator[BackendUnderTest]:
    name: str = request.param
    entry = REGISTRY[name]
    reason = entry.unavailable()
    if reason:
        pytest.skip(f"backend {name!r} unavailable: {reason}")
    for marker in request.node.iter_markers("limit"):
        needed = set(marker.args)
        if unknown := needed - LIMITS:
            raise ValueError(f"unknown limit(s) {sorted(unknown)}; known: {sorted(LIMITS)}")
        if missing := needed - entry.capabilities.limits:
            pytest.skip(f"backend {name!r} does not enforce the {', '.join(sorted(missing))} limit")
    async with entry.builder() as factory:
        backend = BackendUnderTest(name, entry.capabilities, factory)
        try:
            yield backend
        finally:
            for sandbox in backend.created:
                await sandbox.stop()


@pytest.fixture
async def sandbox(sandbox_backend: BackendUnderTest) -> Sandbox:
    """A started sandbox with the default spec."""
    return await sandbox_backend.start()
