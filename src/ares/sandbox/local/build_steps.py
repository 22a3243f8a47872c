"""The local sandbox as the Dockerfile builder's step runner (``ares.images.build.steps``)."""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from ares.errors import ImageBuildError
from ares.images.build.copying import export_command
from ares.images.build.steps import BuildCommand, StepOutcome
from ares.images.config import ImageConfig
from ares.images.rootfs import RootfsPlan
from ares.sandbox.base import Resources, SandboxSpec
from ares.sandbox.local import workspace
from ares.sandbox.local.sandbox import LocalSandbox

#: Build steps get the default memory and process limits, but no disk tmpfs: their diff is committed
#: by renaming it into the cache, which must be on the same filesystem.
BUILD_RESOURCES = Resources(memory_mb=8192, pids=4096)


class LocalStepRunner:
    """Runs each build command in a fresh local sandbox (network on) and commits its upper dirs."""

    async def run(self, command: BuildCommand) -> StepOutcome:
        spec = SandboxSpec(network=command.network, workdir=command.workdir, hostname="ares-build")
        sandbox = LocalSandbox(
            spec,
            plan=command.plan,
            image_config=replace(command.config, env={}),
            scratch_dir=command.scratch_dir,
            default_resources=BUILD_RESOURCES,
        )
        await sandbox.start()
        try:
            result = await sandbox.exec(
                command.command,
                env=dict(command.env),
                timeout_s=command.timeout_s,
                stdin=command.stdin,
                user=command.user,
            )
            outcome = StepOutcome(result.exit_code, result.stdout, result.stderr, result.timed_out)
            if outcome.ok:
                await sandbox.commit(command.diff_dir)
            return outcome
        finally:
            await sandbox.stop()

    async def export(self, plan: RootfsPlan, paths: Sequence[str], scratch_dir: Path) -> bytes:
        """Tar ``paths`` in a sandbox of ``plan`` (network off, root) into a file its upper dir keeps,
        read back as bytes; the sandbox and its upper dir are thrown away."""
        spec = SandboxSpec(network=False, workdir="/", hostname="ares-build")
        sandbox = LocalSandbox(
            spec,
            plan=plan,
            image_config=ImageConfig(),
            scratch_dir=scratch_dir,
            default_resources=BUILD_RESOURCES,
        )
        out = f"/.ares-export-{secrets.token_hex(6)}.tar"
        await sandbox.start()
        try:
            script = f"{export_command(list(paths))} > {out}"
            result = await sandbox.exec(script, argv=["/bin/sh", "-c", script], user="0")
            if not result.ok:
                raise ImageBuildError(
                    f"COPY --from: cannot read {' '.join(paths)} from the source: "
                    f"{result.stderr.strip()[-500:]}"
                )
            return await sandbox.read_file(out)
        finally:
            await sandbox.stop()

    async def host_base(self) -> RootfsPlan:
        return await workspace.host_base_plan_async()
