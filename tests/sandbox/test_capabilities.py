"""Capabilities are declared, never discovered: every backend and wrapper says what it can do, defines
each declared method itself, and refuses what it does not declare.

These hold on every supported Python: nothing here (or in the code under test) asks ``isinstance``
of a runtime-checkable protocol, whose answer for ``__getattr__`` forwarders changed in 3.12.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from collections import Counter
from pathlib import Path

import pytest

import ares
from ares.envs.command_log import CommandLog, CommandRecord
from ares.sandbox import SandboxSpec
from ares.sandbox.capabilities import (
    METHODS,
    Capability,
    CapabilityError,
    SnapshottingSandbox,
    declared,
    require,
    supports,
)
from ares.sandbox.forwarding import ForwardingSandbox
from ares.sandbox.lifecycle import StartStopContext
from ares.sandbox.local import LocalSandbox
from ares.sandbox.warm_pool import PooledSandbox, WarmPool

ALL = frozenset(Capability)
#: Where a module-level ``__getattr__`` is a lazy import of optional extras, not a forwarder.
LAZY_MODULES = {"ares", "ares.agents.mini_swe"}


BACKENDS = {
    "local": ("ares.sandbox.local", "LocalSandbox"),
    "docker": ("ares.sandbox.docker.sandbox", "DockerSandbox"),
    "docker-factory": ("ares.sandbox.docker.factory", "DockerSandboxFactory"),
    "cloud": ("ares.sandbox.cloud.base", "CloudSandbox"),
}


@pytest.mark.parametrize("backend", sorted(BACKENDS))
def test_each_backend_defines_every_method_it_declares(backend: str) -> None:
    module, name = BACKENDS[backend]
    cls: type = getattr(pytest.importorskip(module), name)  # docker needs the docker extra
    value = inspect.getattr_static(cls, "capabilities")
    assert isinstance(value, frozenset) and value, f"{cls.__name__} declares nothing"
    for capability in value:
        for method in METHODS[capability]:
            inspect.getattr_static(cls, method)  # defined on the class, not reached through a lookup hook
            assert callable(getattr(cls, method)), (cls, capability, method)


def test_what_each_backend_declares() -> None:
    pytest.importorskip("docker.errors")  # the docker extra (tests/sandbox/docker shadows a bare "docker")
    from ares.sandbox.cloud.base import CloudSandbox
    from ares.sandbox.docker.factory import DockerSandboxFactory
    from ares.sandbox.docker.sandbox import DockerSandbox

    C = Capability
    assert LocalSandbox.capabilities == {C.VERIFIER_FORK, C.FROZEN_FORK, C.SNAPSHOT, C.RESTORE, C.LOOPBACK}
    assert DockerSandbox.capabilities == {
        C.OUTPUTS_FORK, C.FULL_FORK, C.FROZEN_FORK, C.HALT, C.SNAPSHOT, C.LOOPBACK, C.VERIFIER_FORK,
        C.ARCHIVE,
    }  # fmt: skip
    assert DockerSandboxFactory.capabilities == {C.RESTORE}
    assert CloudSandbox.capabilities == {C.OUTPUTS_FORK, C.ARCHIVE}


def test_a_class_that_declares_a_capability_without_its_methods_is_refused() -> None:
    with pytest.raises(TypeError, match="declares 'snapshot' but does not define"):

        class Boasting(StartStopContext):
            capabilities = frozenset({Capability.SNAPSHOT})

    with pytest.raises(TypeError, match="fork_verifier"):

        class Forwarding(StartStopContext):  # a __getattr__ forwarder declares in vain
            capabilities = frozenset({Capability.VERIFIER_FORK})

            def __getattr__(self, name: str) -> object:
                raise AttributeError(name)


def test_a_declaration_must_be_a_frozenset_of_capabilities() -> None:
    class Sloppy:
        capabilities = {"verifier-fork"}

    with pytest.raises(TypeError, match="frozenset of Capability"):
        declared(Sloppy())
    assert declared(object()) == frozenset()  # declaring nothing is declaring no capability


def test_a_set_of_plain_strings_equal_to_a_checked_declaration_is_still_refused() -> None:
    """Capability is a StrEnum, so {"archive"} == {Capability.ARCHIVE}: the check that a declaration
    was already validated goes by identity, never by equality."""

    class Good:
        capabilities = frozenset({Capability.ARCHIVE})

    class Strings:
        capabilities = frozenset({"archive"})

    assert Strings.capabilities == Good.capabilities
    assert declared(Good()) is Good.capabilities and declared(Good()) is Good.capabilities
    with pytest.raises(TypeError, match="frozenset of Capability"):
        declared(Strings())


def test_require_names_the_backend_and_what_it_declares() -> None:
    class Bare:
        capabilities = frozenset({Capability.HALT})

    with pytest.raises(
        CapabilityError, match=r"the Bare backend does not declare the 'snapshot'.*\['halt'\]"
    ):
        require(Bare(), Capability.SNAPSHOT, SnapshottingSandbox)
    assert supports(LocalSandbox, Capability.RESTORE) and not supports(Bare(), Capability.RESTORE)


def test_no_class_in_ares_forwards_attributes_through_getattr() -> None:
    """The class of hole, closed for good: no ARES class answers attribute lookups it does not
    define (a forwarder hides what it can do from declarations and from static lookups)."""
    offenders = []
    for info in pkgutil.walk_packages(ares.__path__, "ares."):
        try:
            module = importlib.import_module(info.name)
        except ImportError:  # an optional extra that is not installed
            continue
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if cls.__module__ == module.__name__ and "__getattr__" in cls.__dict__:
                offenders.append(f"{module.__name__}.{cls.__qualname__}")
        if "__getattr__" in vars(module) and module.__name__ not in LAZY_MODULES:
            offenders.append(f"{module.__name__} (module)")
    assert offenders == []


# ---------------------------------------------------------------------------------------- wrappers
async def test_a_pooled_sandbox_declares_its_backends_capabilities_once_started() -> None:
    async with WarmPool(LocalSandbox, size=1) as pool:
        lease = pool(SandboxSpec())
        assert declared(lease) == frozenset()
        with pytest.raises(CapabilityError, match="PooledSandbox"):
            await lease.fork_frozen()
        async with lease:
            assert declared(lease) == LocalSandbox.capabilities - {Capability.RESTORE}
            for capability in declared(lease):
                for method in METHODS[capability]:
                    assert method in vars(ForwardingSandbox)  # defined, not reached through lookup
            fork = await lease.fork_verifier(outputs=None)
            async with fork.sandbox:
                assert (await fork.sandbox.exec("echo ok")).stdout == "ok\n"
            with pytest.raises(CapabilityError, match="'halt'"):
                await lease.halt()  # the local backend has no halt, and the pool does not pretend


async def test_the_command_log_passes_on_only_the_loopback(tmp_path: Path) -> None:
    async with LocalSandbox(SandboxSpec()) as sandbox:
        log: list[CommandRecord] = []
        view = CommandLog(sandbox, Counter(), log)
        assert declared(view) == {Capability.LOOPBACK}
        for refused in (view.fork_verifier(outputs=None), view.snapshot(), view.fork_frozen()):
            with pytest.raises(CapabilityError, match="CommandLog"):
                await refused
        with pytest.raises(CapabilityError):
            view.host_dir("x")
        listener = await view.listen_loopback()
        listener.close()
        await view.exec("true")
        assert [r.cmd for r in log] == ["true"] and view.spec is sandbox.spec


def test_a_forwarder_before_it_has_a_target_declares_nothing() -> None:
    pooled = PooledSandbox(WarmPool(LocalSandbox), SandboxSpec())
    assert pooled.capabilities == frozenset() and pooled.running is False
    assert PooledSandbox.passes == ALL - {Capability.RESTORE} and CommandLog.passes == {Capability.LOOPBACK}
