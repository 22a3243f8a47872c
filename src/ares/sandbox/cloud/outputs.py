"""The verifier's fork on a cloud backend: a fresh remote sandbox of the task's image holding only the
agent's output paths, carried through the host.

A cloud sandbox cannot be frozen or bind-mounted, but a new one of the same spec is pristine: its
shell, interpreters, site dirs and start-up hooks are the image's. Each output path is packed in the
agent's sandbox (by its ``tar``: whatever it produces is only ever the agent's outputs), unpacked on
the host with tarfile's ``data`` filter (no absolute paths, no ``..``, no links that leave the
output), and packed again into the fresh sandbox by its own ``tar``. As on the other backends, an
output that is a symlink in the agent's sandbox is not carried (the image's version stays) and one
the agent deleted is deleted. Full mode (the agent's whole filesystem) cannot be carried this way.
"""

from __future__ import annotations

import asyncio
import contextlib
import shlex
import shutil
import tarfile
import tempfile
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Literal

from ares.errors import SandboxError
from ares.sandbox.base import DiffSummary, Sandbox
from ares.sandbox.files import extract_tar
from ares.sandbox.output_paths import output_roots

#: Bound on packing one output in the agent's sandbox (its programs may be the agent's).
PACK_TIMEOUT_S = 300.0
#: Bound on the fresh sandbox's own commands (clearing and unpacking).
PLACE_TIMEOUT_S = 300.0

Carried = tuple[str, Literal["carry", "deleted", "link"], Path | None]


@dataclass(frozen=True, slots=True)
class CloudFork:
    """A started fresh sandbox for a task's tests. ``outside`` is unknown on cloud backends (no
    filesystem diff is available), and the fork's own bash is the image's (``shell_argv``: None)."""

    sandbox: Sandbox
    outside: DiffSummary | None = None

    def shell_argv(self, *args: str) -> list[str] | None:
        return None


async def fork_with_outputs(
    source: Sandbox, fork: Sandbox, outputs: Sequence[str], fresh: Sequence[str]
) -> CloudFork:
    """Start ``fork`` (an unstarted sandbox of ``source``'s spec) holding ``source``'s ``outputs``,
    with each ``fresh`` dir empty. The caller stops the fork; on failure it is stopped here."""
    roots = output_roots(outputs)
    staging = Path(await asyncio.to_thread(tempfile.mkdtemp, prefix="ares-cloud-outputs-"))
    try:
        carried = [await _pack(source, path, staging / str(i)) for i, path in enumerate(roots)]
        await fork.start()
        try:
            await _clear(fork, [*fresh, *(path for path, state, _ in carried if state != "link")])
            await _mkdirs(fork, fresh)
            for path, state, local in carried:
                if state == "carry" and local is not None:
                    await fork.upload(local, path)  # a dir's contents into it, a file to its path
        except BaseException:
            await fork.stop()
            raise
    finally:
        await asyncio.to_thread(shutil.rmtree, staging, ignore_errors=True)
    return CloudFork(fork)


async def _pack(source: Sandbox, path: str, dest: Path) -> Carried:
    """``path`` of the agent's sandbox on the host at ``dest``, or why it is not carried."""
    target = PurePosixPath(path)
    staged = f"/tmp/.ares-outputs-{uuid.uuid4().hex}.tar"
    quoted = shlex.quote(path)
    script = (
        f"if [ -L {quoted} ]; then echo link; elif [ -e {quoted} ]; then "
        f"tar -cf {shlex.quote(staged)} -C {shlex.quote(str(target.parent))} {shlex.quote(target.name)} "
        "&& echo carry; else echo deleted; fi"
    )
    result = await source.exec(script, cwd="/", timeout_s=PACK_TIMEOUT_S)
    state = result.stdout.strip().splitlines()[-1:] if result.ok else []
    if state == ["link"] or state == ["deleted"]:
        return path, state[0], None  # type: ignore[return-value]
    if state != ["carry"]:
        raise SandboxError(
            f"could not pack the output {path} in the agent's sandbox for the verifier: "
            f"{(result.stderr.strip() or result.stdout.strip() or f'exit code {result.exit_code}')[-500:]}"
        )
    try:
        archive = await source.read_file(staged)
    finally:
        with contextlib.suppress(SandboxError):
            await source.exec(f"rm -f -- {shlex.quote(staged)}", cwd="/", timeout_s=PACK_TIMEOUT_S)
    unpacked = dest.with_name(dest.name + ".unpacked")
    try:
        await asyncio.to_thread(extract_tar, archive, unpacked)
        await asyncio.to_thread((unpacked / target.name).rename, dest)
    except (tarfile.TarError, OSError) as exc:  # paths or links that leave the output, or no output
        raise SandboxError(f"the agent's output {path} cannot be carried to the verifier: {exc}") from exc
    return path, "carry", dest


async def _clear(fork: Sandbox, paths: Sequence[str]) -> None:
    if paths:
        quoted = " ".join(shlex.quote(p) for p in paths)
        await _run(fork, f"rm -rf -- {quoted}", "clear the outputs' place")


async def _mkdirs(fork: Sandbox, paths: Sequence[str]) -> None:
    if paths:
        await _run(fork, "mkdir -p -- " + " ".join(shlex.quote(p) for p in paths), "make the fresh dirs")


async def _run(fork: Sandbox, cmd: str, what: str) -> None:
    result = await fork.exec(cmd, cwd="/", timeout_s=PLACE_TIMEOUT_S)
    if not result.ok:
        raise SandboxError(f"could not {what} in the verifier's sandbox: {result.stderr.strip()[-500:]}")
