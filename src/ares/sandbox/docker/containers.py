"""What a sandbox's container is made of: image, pid 1, workdir, env, labels, network and limits."""

from __future__ import annotations

import logging
import secrets
from collections.abc import Sequence

import docker
import docker.errors
import requests.exceptions

from ares.errors import SandboxError, SandboxUnavailableError
from ares.sandbox.base import BindMount, SandboxSpec
from ares.sandbox.docker import janitor, seccomp_files
from ares.sandbox.docker.client import api_message
from ares.sandbox.docker.engine import DockerEngine
from ares.sandbox.docker.limits import container_limits, is_storage_refusal
from ares.sandbox.local import seccomp

log = logging.getLogger(__name__)

#: pid 1: sleep, and reap whatever gets re-parented to it while waiting; exit at once on SIGTERM.
PID1 = 'trap "exit 0" TERM; while :; do sleep 86400 & wait $!; done'


def create_container(
    client: docker.DockerClient,
    engine: DockerEngine,
    spec: SandboxSpec,
    image: str,
    shell: Sequence[str] = ("/bin/sh", "-c"),
    pid1: str = PID1,
    binds: Sequence[BindMount] = (),
) -> str:
    """Create (not start) the container of ``spec`` and hand it to the janitor. Blocking.

    Its pid 1 is ``shell`` (a shell's command line up to ``-c``) running ``pid1``; ``binds`` are host
    dirs of the engine's host (a verifier fork's). A storage limit
    the engine cannot apply is dropped with one warning per engine, or is a SandboxUnavailableError
    with ``strict_storage``; any other refusal is a SandboxError.
    """
    storage = spec.resources.storage_mb is not None and engine.storage_supported is not False
    try:
        container = _create(client, engine, spec, image, storage=storage, init=(shell, pid1), binds=binds)
    except docker.errors.APIError as exc:
        if not (storage and is_storage_refusal(exc)):
            raise _refused(spec, exc, storage=storage) from exc
        engine.storage_supported = False
        if engine.config.strict_storage:
            raise SandboxUnavailableError(
                f"this engine cannot limit storage (the spec asks for {spec.resources.storage_mb} MB): "
                f"{api_message(exc)}. Use a storage driver with quotas, or strict_storage=False."
            ) from exc
        log.warning(
            "the Docker engine cannot limit container storage (%s); sandboxes run without a storage limit",
            api_message(exc),
        )
        try:
            container = _create(client, engine, spec, image, storage=False, init=(shell, pid1), binds=binds)
        except docker.errors.APIError as again:
            raise _refused(spec, again, storage=False) from again
    if storage and engine.storage_supported is None:
        engine.storage_supported = True
    janitor.track_container(container, engine.connector())
    return container


def _create(
    client: docker.DockerClient,
    engine: DockerEngine,
    spec: SandboxSpec,
    image: str,
    *,
    storage: bool,
    init: tuple[Sequence[str], str],
    binds: Sequence[BindMount],
) -> str:
    api = client.api
    network = engine.config.network_mode if spec.network else "none"
    limits = container_limits(spec.resources, storage=storage)
    mounts = [f"{b.source}:{b.target}:{'ro' if b.read_only else 'rw'}" for b in binds]
    while True:  # twice at most: an engine that takes a generated profile only as a file (podman)
        security = seccomp.docker_security_opt(spec.seccomp)
        if engine.seccomp_as_file:
            security = seccomp_files.as_files(security)
        host_config = api.create_host_config(
            network_mode=network, security_opt=security, binds=mounts or None, **limits
        )
        try:
            created = api.create_container(
                image, command=[init[1]], entrypoint=list(init[0]), working_dir=spec.workdir,
                environment=dict(spec.env), hostname=spec.hostname, labels=janitor.owner_labels(),
                host_config=host_config, name=f"ares-{secrets.token_hex(6)}", detach=True,
            )  # fmt: skip
        except docker.errors.APIError as exc:
            if engine.seccomp_as_file or not seccomp_files.refused_inline(exc):
                raise
            engine.seccomp_as_file = True
            continue
        except (docker.errors.DockerException, requests.exceptions.RequestException) as exc:
            raise SandboxUnavailableError(f"cannot create the sandbox container: {exc}") from exc
        return str(created["Id"])


def _refused(spec: SandboxSpec, exc: docker.errors.APIError, *, storage: bool) -> SandboxError:
    limits = container_limits(spec.resources, storage=storage)
    return SandboxError(
        f"the engine refused to create the sandbox container (limits {limits or 'none'}, "
        f"network {'on' if spec.network else 'off'}): {api_message(exc)}"
    )
