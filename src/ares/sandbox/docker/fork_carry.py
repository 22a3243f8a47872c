"""What a docker verifier fork carries over from the agent's halted container, and how.

The agent's changes against the pristine image (a sandbox made from a snapshot adds the changes the
snapshot's image already holds), a ``fork_verifier`` fork's outputs spooled and screened on the host
before the fork exists (``verifier_fork.py``) and carried in once it started, and a ``fork_outputs``
fork's outputs replaced by the agent's versions under the carry bounds (``carry_bounds.py``).

A base of ``DockerSandbox`` (``sandbox.py``), which sets every attribute declared here.
"""

from __future__ import annotations

import asyncio
import logging
import posixpath
from collections.abc import Callable, Collection, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ares.errors import SandboxError, SandboxUnavailableError
from ares.sandbox.base import BindMount, ExecResult
from ares.sandbox.carry_bounds import CarryBudget
from ares.sandbox.docker import verifier_fork
from ares.sandbox.docker.carry import CarryLimits
from ares.sandbox.docker.client import api_message, run_blocking
from ares.sandbox.docker.container_calls import ContainerCalls
from ares.sandbox.docker.execution import API_ERRORS
from ares.sandbox.docker.outputs import OutputState, clear_script, output_roots
from ares.sandbox.docker.snapshot import Change, changes_as_dicts, merge_changes

log = logging.getLogger("ares.sandbox.docker.sandbox")  # the sandbox's log


def check_binds(binds: Sequence[BindMount], base_url: str) -> None:
    """Host binds need the engine on this host, and paths that fit the engine's ``src:dst`` form."""
    if binds and not base_url.startswith("unix://"):
        raise SandboxUnavailableError(
            f"host binds need the Docker engine on this host (a unix:// socket), not {base_url}"
        )
    for bind in binds:
        if ":" in str(bind.source) or ":" in bind.target:
            raise SandboxError(f"a bind path may not contain ':': {bind.source} -> {bind.target}")


def changed_paths(changes: list[dict[str, Any]] | None) -> set[str] | None:
    """The paths the engine's diff names (None: it could not list them)."""
    return None if changes is None else {posixpath.normpath(str(c["Path"])) for c in changes}


class ForkCarry(ContainerCalls):
    """The carrying half of the verifier forks (see the module docstring)."""

    _base: str | None
    _inherited: list[Change] | None
    _pending: verifier_fork.PendingCarry | None

    if TYPE_CHECKING:

        async def exec(
            self,
            cmd: str,
            *,
            cwd: str | None = None,
            timeout_s: float | None = None,
            stdin: bytes | None = None,
        ) -> ExecResult: ...

        def host_dir(self, name: str) -> Path: ...

    def _pristine_changes(self, diff: list[dict[str, Any]] | None) -> list[dict[str, Any]] | None:
        """The engine's diff of this container, against the pristine image (see from_snapshot)."""
        if self._base is None:
            return diff
        if self._inherited is None:
            log.warning("the snapshot of this sandbox has no list of changes; summarizing only later ones")
            return diff
        return changes_as_dicts(merge_changes(self._inherited, diff))

    async def _listed_changes(self, container: str) -> list[dict[str, Any]] | None:
        """``_pristine_changes`` of the halted ``container``, None when the engine cannot list them."""
        assert self._client is not None
        try:
            return self._pristine_changes(await run_blocking(self._client.api.diff, container))
        except API_ERRORS as exc:  # Podman's diff fails on some type changes; the summary says so
            log.warning("the engine could not list the sandbox's changes: %s", api_message(exc))
            return None

    async def _spool_outputs(
        self,
        container: str,
        outputs: Sequence[str],
        drop: Callable[[str], bool] | None,
        changes: list[dict[str, Any]] | None,
    ) -> verifier_fork.PendingCarry:
        """Spool each output of the halted ``container`` to the host, screened by the carry bounds
        (``OutputRefusedError`` past one), for a ``fork_verifier`` fork to carry in when it starts."""
        assert self._client is not None
        api = self._client.api
        scratch = self.host_dir("verifier-carry")
        pending = verifier_fork.PendingCarry([], drop, scratch, changes)
        changed = changed_paths(changes)
        for index, root in enumerate(output_roots(outputs)):
            spool = scratch / f"agent-{index}.tar"
            output = await self._api(
                f"read {root}", verifier_fork.spool_outputs, api, container, root, spool, pending.limits,
                changed, pending.budget,
            )  # fmt: skip
            pending.outputs.append(output)
        return pending

    async def _carry(
        self, source: str, states: Mapping[str, OutputState], scratch: Path, changed: Collection[str] | None
    ) -> None:
        """Replace each output path here by the stopped container ``source``'s version, spooled on
        the host under the carry bounds first (``OutputRefusedError`` past one: a flooded, huge or
        sparse output is refused by its tar headers before the fork sees a byte of it)."""
        limits, budget = CarryLimits(), CarryBudget()
        script = clear_script(states)
        if script is not None:
            cleared = await self.exec(script, cwd="/", timeout_s=120)
            if not cleared.ok:
                raise SandboxError(
                    f"could not clear the outputs in the verifier's sandbox: {cleared.stderr.strip()}"
                )
        assert self._client is not None and self._container is not None
        api = self._client.api
        for index, (path, state) in enumerate(states.items()):
            if state == "carry":
                spool = scratch / f"output-{index}.tar"
                read = verifier_fork.spool_archive
                await self._api(f"read {path}", read, api, source, path, spool, limits, changed, budget)
                into = posixpath.dirname(path)
                await self._api(f"carry {path}", verifier_fork.put_file, api, self._container, spool, into)
                await asyncio.to_thread(spool.unlink)

    async def _carry_in(self, pending: verifier_fork.PendingCarry) -> None:
        assert self._client is not None and self._container is not None
        api = self._client.api
        baseline = await self._api("read the fork's changes", api.diff, self._container)
        await verifier_fork.carry_in(pending, api, self._container, self._api, self.exec, asyncio.to_thread)
        pending.outside = verifier_fork.outside_summary(pending, baseline)
