"""The local sandbox as the Dockerfile builder's step runner (``ares.images.build.steps``)."""

from __future__ import annotations

from dataclasses import replace

from ares.images.build.steps import BuildCommand, StepOutcome
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

    async def host_base(self) -> RootfsPlan:
        return await workspace.host_base_plan_async()
