"""Images for the docker backend: Dockerfile dirs built once per content hash, named images checked.

A Dockerfile dir is hashed (Dockerfile, every context file's path, mode and content, and the build
args) and built into ``ares-build:<hash prefix>``. The tag lives in the engine, so later resets and
later processes reuse it; concurrent requests for one hash in this process wait for a single build.
Nothing is pulled from a registry: a named image must already be in the engine.

Shared layers are built once. The engine's own cache only helps once a step has finished: tasks
whose Dockerfiles start alike (``FROM python:3.11-slim`` + ``RUN pip install pytest``) and that are
built at the same time would each run the shared steps. So the part of a Dockerfile before its first
COPY/ADD (which reads no context files) is built first, one image per RUN step, tagged
``ares-layer:<key>`` where the key chains the base image's id, the build args and the steps' text;
the rest of the Dockerfile is then built ``FROM`` the last of them with the task's context. Builds
of one key in one engine wait for each other (an in-process lock per engine and key), so N
concurrent tasks run each shared step once. Dockerfiles this does not apply to (several stages,
flags on the shared steps, ONBUILD, a base image not in the engine) are built in one go as before.

Progress is reported as ``BuildEvent``s (``ares.images.progress``): one step per shared
layer plus one for the rest of the Dockerfile. The content hash and the layer plan are read from the
Dockerfile dir by ``dockerfiles.py``.
"""

from __future__ import annotations

import io
import json
import secrets
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import docker
import docker.errors
import requests.exceptions

from ares.errors import ImageBuildError, SandboxError
from ares.images.progress import (
    BuildEvent,
    BuildListener,
    BuildState,
    context_label,
    current_listener,
    emit,
)
from ares.sandbox.addon_cache import content_dir, ensure_addon
from ares.sandbox.addons import AddonLayer
from ares.sandbox.base import ImageSpec
from ares.sandbox.docker.client import api_message, run_blocking
from ares.sandbox.docker.dockerfiles import context_hash, plan_layers

BUILD_REPOSITORY = "ares-build"


HASH_LABEL = "ares.build.hash"


#: Images with an agent's add-on layer over a task image (``SandboxSpec.addons``).
ADDON_REPOSITORY = "ares-addon"
ADDON_LABEL = "ares.addon"

#: Images of shared Dockerfile prefixes (one per RUN step before the first COPY/ADD).
LAYER_REPOSITORY = "ares-layer"


LAYER_LABEL = "ares.build.layer"


#: Lines of build output quoted in a build error.
LOG_TAIL = 60


#: One lock per (engine URL, build key): concurrent builds of one image or shared layer wait for
#: the first, then find its tag.
_build_locks: dict[tuple[str, str], threading.Lock] = {}


_build_locks_guard = threading.Lock()


def _build_lock(engine: str, key: str) -> threading.Lock:
    with _build_locks_guard:
        return _build_locks.setdefault((engine, key), threading.Lock())


class DockerBuildError(ImageBuildError):
    """An image build failed; the message ends with the tail of the build log."""

    def __init__(self, message: str, log: list[str]) -> None:
        self.log = log
        tail = "".join(log[-LOG_TAIL:]).rstrip()
        super().__init__(f"{message}\n--- build log (last {LOG_TAIL} lines) ---\n{tail}" if tail else message)


class ImageResolver:
    """Turns an ImageSpec into an image id in one engine, building Dockerfile dirs at most once."""

    def __init__(
        self,
        client: docker.DockerClient,
        *,
        default_image: str,
        build_args: Mapping[str, str],
        build_network: str | None,
        build_timeout_s: float,
        on_event: BuildListener | None = None,
    ) -> None:
        self._client = client
        self._default_image = default_image
        self._build_args = dict(build_args)
        self._build_network = build_network
        self._build_timeout_s = build_timeout_s
        self._engine = _engine_id(client)
        #: Build progress; None: the listener of the context that asks for an image (if any).
        self.on_event = on_event
        #: Tags this resolver built (not reused), in order: lets callers see that caching works.
        self.built: list[str] = []
        #: Shared-layer tags this resolver built (see the module doc), in order.
        self.layers_built: list[str] = []

    async def resolve(self, spec: ImageSpec) -> str:
        if spec.dockerfile_dir is not None:
            # The build runs on a plain thread, which does not see this context: pass the listener.
            listener = self.on_event or current_listener()
            return await run_blocking(self._build_once, Path(spec.dockerfile_dir), listener)
        return await run_blocking(self._local_image, spec.name or self._default_image)

    async def with_addons(self, image_id: str, addons: Sequence[AddonLayer]) -> str:
        """``image_id`` with ``addons`` copied in on top: one derived image per (add-on, image), built
        once from the host's cached add-on files and tagged ``ares-addon/<key>:<image id>``."""
        for addon in addons:
            files = content_dir(await ensure_addon(addon), addon)
            image_id = await run_blocking(self._derive_once, image_id, addon, files)
        return image_id

    def _derive_once(self, base_id: str, addon: AddonLayer, files: Path) -> str:
        tag = f"{ADDON_REPOSITORY}/{addon.key.lower()}:{base_id.removeprefix('sha256:')[:20]}"
        with _build_lock(self._engine, tag):
            image_id = self._image_id(tag)
            if image_id is not None:
                return image_id
            name = f".ares-dockerfile-{secrets.token_hex(8)}"  # see _Rest: never the SDK's own
            copies = [
                f"COPY {json.dumps([e.name, f'{addon.mount}/{e.name}'])}" for e in sorted(files.iterdir())
            ]
            text = "\n".join([f"FROM {base_id}", *copies]) + "\n"  # each entry: not the Dockerfile itself
            archive = docker.utils.tar(str(files), dockerfile=(name, text))
            try:
                deadline = time.monotonic() + self._build_timeout_s
                image_id = self._build(
                    files, tag, {ADDON_LABEL: addon.key}, deadline, log_name=f"add-on {addon.key}",
                    fileobj=archive, custom_context=True, dockerfile=name,
                )  # fmt: skip
            finally:
                archive.close()
            self.built.append(tag)
            return image_id

    def _local_image(self, name: str) -> str:
        try:
            return str(self._client.api.inspect_image(name)["Id"])
        except docker.errors.ImageNotFound:
            raise SandboxError(
                f"image {name!r} is not in the engine, and ARES never pulls from a registry. Load or build "
                f"it first (`docker load`, `podman pull`, or `docker build -t {name} DIR`), or give the task "
                "a Dockerfile dir."
            ) from None
        except docker.errors.APIError as exc:
            raise SandboxError(f"cannot inspect image {name!r}: {api_message(exc)}") from exc

    def _image_id(self, name: str) -> str | None:
        try:
            return str(self._client.api.inspect_image(name)["Id"])
        except docker.errors.ImageNotFound:
            return None

    def _build_once(self, context: Path, listener: BuildListener | None = None) -> str:
        dockerfile = context / "Dockerfile"
        if not dockerfile.is_file():
            raise SandboxError(f"cannot build an image from {context}: there is no Dockerfile in it")
        key = context_hash(context, self._build_args)
        tag = f"{BUILD_REPOSITORY}:{key[:20]}"
        progress = _Progress(listener, context_label(context))
        with _build_lock(self._engine, key):  # one build per hash in this process; waiters find the tag
            image_id = self._image_id(tag)
            if image_id is not None:
                progress.image("cached", total=1)
                return image_id
            deadline = time.monotonic() + self._build_timeout_s
            rest: _Rest | None = None
            try:
                parent, rest = self._shared_layers(context, dockerfile, progress, deadline)
                progress.step(rest.label, "building")
                source = rest.source(context, parent)
                image_id = self._build(
                    context, tag, {HASH_LABEL: key}, deadline, log_name=str(context), **source
                )
            except BaseException:
                progress.fail()
                raise
            finally:
                if rest is not None:
                    rest.close()
            progress.step(rest.label, "done")
            progress.image("done")
            self.built.append(tag)
            return image_id

    def _shared_layers(
        self, context: Path, dockerfile: Path, progress: _Progress, deadline: float
    ) -> tuple[str | None, _Rest]:
        """Build (or find) the shared layers of ``dockerfile``: the image to build the rest FROM."""
        text = dockerfile.read_text()
        plan = plan_layers(text, self._build_args)
        base_id = self._image_id(plan.base) if plan is not None else None
        if plan is None or base_id is None:
            progress.total = 1
            progress.image("building")
            return None, _Rest(text, "docker build (whole Dockerfile)")
        keys = plan.keys(base_id, self._build_args)
        progress.total = len(keys) + 1
        progress.image("building")
        parent = plan.base
        for step, key in zip(plan.shared, keys, strict=True):
            tag = f"{LAYER_REPOSITORY}:{key[:20]}"
            if self._image_id(tag) is None:
                progress.step(step.label, "building")  # or waiting for another task's build of it
                with _build_lock(self._engine, key):
                    if self._image_id(tag) is None:
                        source = plan.dockerfile(parent, step.args, step.body).encode()
                        self._build(
                            context, tag, {LAYER_LABEL: key}, deadline, log_name=f"{context} ({step.label})",
                            fileobj=io.BytesIO(source),
                        )  # fmt: skip
                        self.layers_built.append(tag)
                        progress.step(step.label, "done")
                        parent = tag
                        continue
            progress.step(step.label, "cached")
            parent = tag
        return parent, _Rest(plan.dockerfile(parent, plan.rest_args, plan.rest), plan.rest_label)

    def _build(
        self,
        context: Path,
        tag: str,
        labels: dict[str, str],
        deadline: float,
        *,
        log_name: str,
        **source: Any,
    ) -> str:
        """Run one engine build of ``source`` (``path``+``dockerfile`` or ``fileobj``) into ``tag``."""
        log: list[str] = []
        timeout = max(deadline - time.monotonic(), 1.0)
        try:
            stream = self._client.api.build(
                tag=tag, rm=True, forcerm=True, pull=False, decode=True,
                buildargs=self._build_args or None, network_mode=self._build_network,
                labels=labels, timeout=timeout, **source,
            )  # fmt: skip
            for chunk in stream:
                _collect(chunk, log)
                if "error" in chunk or "errorDetail" in chunk:
                    detail = chunk.get("error") or chunk.get("errorDetail", {}).get("message", "")
                    raise DockerBuildError(f"building {log_name} failed: {str(detail).strip()}", log)
                if time.monotonic() > deadline:
                    raise DockerBuildError(
                        f"building {context} took longer than {self._build_timeout_s:g}s", log
                    )
        except DockerBuildError:
            raise
        except (docker.errors.DockerException, requests.exceptions.RequestException, OSError) as exc:
            raise DockerBuildError(f"building {log_name} failed: {api_message(exc)}", log) from exc
        image_id = self._image_id(tag)
        if image_id is None:
            raise DockerBuildError(f"building {log_name} reported success but produced no {tag}", log)
        return image_id


class _Rest:
    """The build source of the rest of a Dockerfile dir: as is, or with a Dockerfile FROM a layer.

    A generated Dockerfile is added to the uploaded context under a name of its own (the context dir
    is never written to). The SDK can do that itself, but then sends the ``dockerfile`` parameter
    twice, and Podman reads the wrong one.
    """

    def __init__(self, text: str, label: str) -> None:
        self.text = text
        self.label = label
        self._archive: Any = None

    def source(self, context: Path, parent: str | None) -> dict[str, Any]:
        if parent is None:
            return {"path": str(context)}
        name = f".ares-dockerfile-{secrets.token_hex(8)}"
        ignore = context / ".dockerignore"
        exclude = None
        if ignore.is_file():  # as the SDK reads it
            lines = (line.strip() for line in ignore.read_text().splitlines())
            exclude = [line for line in lines if line and not line.startswith("#")]
        self._archive = docker.utils.tar(str(context), exclude=exclude, dockerfile=(name, self.text))
        return {"fileobj": self._archive, "custom_context": True, "dockerfile": name}

    def close(self) -> None:
        if self._archive is not None:
            self._archive.close()


class _Progress:
    """The build events of one Dockerfile dir: one step per shared layer, one for the rest."""

    def __init__(self, listener: BuildListener | None, image: str) -> None:
        self.listener = listener
        self.image_name = image
        self.total = 1
        self.index = 0
        self.started = time.monotonic()
        self.step_started = self.started
        self.building: str | None = None
        self.counts = {"done": 0, "cached": 0}

    def step(self, label: str, state: BuildState) -> None:
        now = time.monotonic()
        if state == "building":
            self.index += 1
            self.step_started, self.building = now, label
            elapsed = 0.0
        else:
            if self.building != label:  # a step that never had to build (cached)
                self.index += 1
            self.building = None
            self.counts[state] = self.counts.get(state, 0) + 1
            elapsed = now - self.step_started if state != "cached" else 0.0
        emit(self.listener, BuildEvent(self.image_name, label, self.index, self.total, state, elapsed))

    def image(self, state: BuildState, total: int | None = None) -> None:
        if total is not None:
            self.total = total
        done, cached = self.counts["done"], self.counts["cached"]
        if state == "cached" and total is not None:
            cached = total  # the whole image was in the engine
        elapsed = time.monotonic() - self.started if state != "building" else 0.0
        index = done + cached
        event = BuildEvent(self.image_name, None, index, self.total, state, elapsed, done, cached)
        emit(self.listener, event)

    def fail(self) -> None:
        if self.building is not None:
            self.step(self.building, "failed")
        self.image("failed")


def _engine_id(client: docker.DockerClient) -> str:
    """Which engine a client talks to (unix-socket clients all have the same base URL)."""
    adapter = getattr(client.api, "_custom_adapter", None)
    return f"{client.api.base_url} {getattr(adapter, 'socket_path', '')}"


def _collect(chunk: Mapping[str, Any], log: list[str]) -> None:
    for key in ("stream", "status", "error"):
        text = chunk.get(key)
        if isinstance(text, str) and text:
            log.append(text if text.endswith("\n") else text + "\n")
