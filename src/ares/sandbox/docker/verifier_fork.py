"""A docker verifier fork with host binds (``Capability.VERIFIER_FORK``): the moving parts.

``DockerSandbox.fork_verifier`` halts the agent's container and spools its archive of each output dir
to the host (``spool_outputs``; an output that is a symlink or not a dir is not carried: the archive
API would follow the link). The fork is a new container of the pristine image with the binds
mounted read-only and no network; when it starts, ``carry_in`` lists the fork's own (pristine) dir,
compares it with the agent's on the host (``carry.py``), deletes what the agent deleted with the
image's ``rm`` before anything of the agent's is in the fork, then puts the re-packed tar. No program
of the agent's container runs, and nothing of it but those re-packed files reaches the fork.
"""

from __future__ import annotations

import logging
import os
import posixpath
import tarfile
import time
from collections.abc import Awaitable, Callable, Collection, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, Literal

import docker
import docker.errors

from ares.errors import OutputRefusedError, SandboxError
from ares.sandbox.base import DiffSummary, ExecResult
from ares.sandbox.carry_bounds import CarryBudget
from ares.sandbox.docker.carry import (
    CarryLimits,
    CarryPlan,
    CarryRefused,
    Listing,
    check_plan,
    list_archive,
    plan_carry,
    write_carry,
)
from ares.sandbox.docker.client import api_message
from ares.sandbox.docker.outputs import MODE_SYMLINK, stat_path, summarize_changes

log = logging.getLogger(__name__)

AgentState = Literal["dir", "missing", "not-dir"]
PUT_ATTEMPTS = 3
_CHUNK = 1 << 20


@dataclass(slots=True)
class Output:
    """One output dir of the agent: how it was found, and its spooled archive (state ``dir``)."""

    root: str
    state: AgentState
    spool: Path
    why: str = ""


@dataclass(slots=True)
class PendingCarry:
    """What a verifier fork's ``start`` carries in, and what it needs for the ``outside`` summary."""

    outputs: list[Output]
    drop: Callable[[str], bool] | None
    scratch: Path
    changes: list[Mapping[str, Any]] | None
    limits: CarryLimits = field(default_factory=CarryLimits)
    outside: DiffSummary | None = None
    #: The bounds of the whole carry (its clock starts when the agent's archive is read).
    budget: CarryBudget = field(default_factory=CarryBudget)


def spool_outputs(
    api: docker.APIClient,
    container: str,
    root: str,
    spool: Path,
    limits: CarryLimits,
    changed: Collection[str] | None = None,
    budget: CarryBudget | None = None,
) -> Output:
    """Spool the stopped ``container``'s archive of the dir ``root`` into ``spool``. Blocking.

    The tar headers are read as the archive streams: a file the engine lists as ``changed`` whose
    header size breaks ``budget``'s bound is refused (``OutputRefusedError``) before its bytes are
    fetched, as are more members than ``limits`` allow and a stream slower than the deadline."""
    stat = stat_path(api, container, root)
    if stat is None:
        return Output(root, "missing", spool)
    if not _real_dir(stat, root):
        return Output(root, "not-dir", spool, f"{root} is a symlink or not a directory")
    spool_archive(api, container, root, spool, limits, changed, budget)
    return Output(root, "dir", spool)


def spool_archive(
    api: docker.APIClient,
    container: str,
    root: str,
    spool: Path,
    limits: CarryLimits,
    changed: Collection[str] | None = None,
    budget: CarryBudget | None = None,
) -> None:
    """Spool the engine's archive of ``root`` (a dir or a file) into ``spool``, screened as
    ``spool_outputs`` says (``OutputRefusedError`` past a bound, before the bytes are fetched where
    the header tells). Blocking."""
    budget = budget or CarryBudget()
    stream, _ = api.get_archive(container, root, chunk_size=_CHUNK)
    try:
        with open(spool, "wb") as out:
            tee = _ChunkReader(iter(stream), out, limits.max_archive_bytes, budget)
            with tarfile.open(fileobj=tee, mode="r|") as tar:  # type: ignore[call-overload]
                _screen(tar, root, limits, changed, budget)
            while tee.read(_CHUNK):  # the archive's trailing blocks
                pass
    except tarfile.TarError as exc:
        raise CarryRefused(f"the archive of {root} is malformed: {exc}") from exc
    finally:
        close = getattr(stream, "close", None)
        if close is not None:
            close()


def _screen(
    tar: tarfile.TarFile, root: str, limits: CarryLimits, changed: Collection[str] | None, budget: CarryBudget
) -> None:
    """Read the members' headers (tarfile skips each content, which the tee spools meanwhile)."""
    parent, bound = posixpath.dirname(root), budget.bounds.max_file_bytes
    for count, member in enumerate(tar, 1):
        if count > limits.max_members:
            why = f"the archive of {root} has more than {limits.max_members} entries"
            raise CarryRefused(why, "too_many_entries")
        if count % 256 == 0:
            budget.clock()
        if member.isreg() and member.size > bound and changed is not None:
            path = posixpath.join(parent, member.name)
            if path in changed:
                raise OutputRefusedError("file_too_large", f"{path} is {member.size} bytes (over {bound})")


def _real_dir(stat: Mapping[str, Any], root: str) -> bool:
    """The archive API's stat names a directory (Podman follows a final symlink in both the stat and
    the archive, but keeps the link's mode bit and the target in ``linkTarget``)."""
    mode = int(stat.get("mode", 0))
    target = str(stat.get("linkTarget") or root)
    return bool(stat.get("isDir")) and not mode & MODE_SYMLINK and posixpath.normpath(target) == root


def image_listing(
    api: docker.APIClient, container: str, root: str, drop: Callable[[str], bool] | None, limits: CarryLimits
) -> Listing:
    """The pristine fork's listing of ``root`` (streamed, nothing kept but hashes). Blocking."""
    stat = stat_path(api, container, root)
    if stat is None:
        return Listing()
    if not _real_dir(stat, root):
        raise SandboxError(
            f"the image's {root} is a symlink or not a directory; cannot carry outputs into it"
        )
    stream, _ = api.get_archive(container, root, chunk_size=_CHUNK)
    try:
        with tarfile.open(fileobj=_ChunkReader(iter(stream)), mode="r|") as tar:  # type: ignore[call-overload]
            return list_archive(tar, root, drop, limits, keep_members=False)
    finally:
        close = getattr(stream, "close", None)
        if close is not None:
            close()


def plan_output(
    output: Output,
    image: Listing,
    drop: Callable[[str], bool] | None,
    limits: CarryLimits,
    tar_out: Path,
    budget: CarryBudget | None = None,
) -> CarryPlan:
    """The plan for one output and, in ``tar_out``, the tar of what it carries; the plan is held
    against ``budget`` first (``OutputRefusedError``). Blocking."""
    budget = budget or CarryBudget()
    if output.state == "missing":
        agent = Listing()
        plan = plan_carry(agent, image, output.root)
        check_plan(agent, plan, output.root, budget)
        return plan
    with tarfile.open(output.spool, mode="r:") as tar:
        agent = list_archive(tar, output.root, drop, limits, keep_members=True)
        plan = plan_carry(agent, image, output.root)
        check_plan(agent, plan, output.root, budget)
        if plan.carry:
            with open(tar_out, "wb") as out:
                write_carry(tar, agent, plan, out, limits)
    return plan


async def carry_in(
    pending: PendingCarry,
    api: docker.APIClient,
    container: str,
    call: Callable[..., Awaitable[Any]],
    run: Callable[..., Awaitable[ExecResult]],
    to_thread: Callable[..., Awaitable[Any]],
) -> None:
    """Carry each output into the started fork ``container`` (``call``: the sandbox's API wrapper,
    ``run``: its ``exec``, ``to_thread``: how host work leaves the loop)."""
    for index, output in enumerate(pending.outputs):
        if output.state == "not-dir":
            log.warning("the agent's %s is not carried into the verifier (%s)", output.root, output.why)
            continue
        image = await call(
            f"list the image's {output.root}",
            image_listing,
            api,
            container,
            output.root,
            pending.drop,
            pending.limits,
        )
        tar_out = pending.scratch / f"carry-{index}.tar"
        try:
            plan = await to_thread(
                plan_output, output, image, pending.drop, pending.limits, tar_out, pending.budget
            )
        except tarfile.TarError as exc:
            raise CarryRefused(f"the archive of {output.root} is malformed: {exc}") from exc
        if plan.delete:
            listing = b"".join(os.fsencode(p) + b"\0" for p in plan.delete)
            done = await run("xargs -0 -r rm -rf --", cwd="/", stdin=listing, timeout_s=300)
            if not done.ok:
                raise SandboxError(
                    f"could not delete the agent's deletions in the verifier: {done.stderr.strip()[:500]}"
                )
        if plan.carry:
            await call(f"carry {output.root}", put_file, api, container, tar_out)


def refused_paths(pending: PendingCarry) -> tuple[str, ...]:
    """The outputs that were not carried, as ``DiffSummary`` paths with the reason."""
    return tuple(f"{o.root} (not carried: {o.why})" for o in pending.outputs if o.state == "not-dir")


def outside_summary(pending: PendingCarry, baseline: list[Mapping[str, Any]] | None) -> DiffSummary:
    """What the agent changed outside its outputs (engine noise of a fresh container aside), plus a
    line for each output that was not carried."""
    roots = [o.root for o in pending.outputs]
    refused = refused_paths(pending)
    if pending.changes is None:
        return DiffSummary(len(refused), refused, truncated=True)
    summary = summarize_changes(pending.changes, roots, baseline=baseline)
    return DiffSummary(summary.count + len(refused), refused + summary.paths, summary.truncated)


def put_file(api: docker.APIClient, container: str, path: Path, into: str = "/") -> None:
    """``put_archive`` of the tar at ``path`` into ``into``, tried again after an engine error
    (Podman's extraction helper now and then dies mid-stream; the tar is idempotent). Blocking."""
    for attempt in range(PUT_ATTEMPTS):
        try:
            with open(path, "rb") as data:
                api.put_archive(container, into, data)
            return
        except docker.errors.APIError as exc:
            if exc.status_code is None or exc.status_code < 500 or attempt == PUT_ATTEMPTS - 1:
                raise
            log.warning("the engine failed to extract an archive (%s); trying again", api_message(exc))
            time.sleep(0.2 * (attempt + 1))


class _ChunkReader:
    """An iterator of byte chunks as a file for tarfile's stream mode; with ``out``, every chunk
    is also written there (at most ``limit`` bytes, on ``budget``'s clock)."""

    def __init__(
        self,
        chunks: Iterator[bytes],
        out: BinaryIO | None = None,
        limit: int | None = None,
        budget: CarryBudget | None = None,
    ) -> None:
        self._chunks = chunks
        self._chunk = b""
        self._at = 0
        self._out, self._limit, self._budget, self._seen = out, limit, budget, 0

    def _next(self) -> bytes | None:
        chunk = next(self._chunks, None)
        if chunk is None or self._out is None:
            return chunk
        self._seen += len(chunk)
        if self._limit is not None and self._seen > self._limit:
            raise OutputRefusedError("too_large", f"the archive is larger than {self._limit} bytes")
        if self._budget is not None:
            self._budget.clock()
        self._out.write(chunk)
        return chunk

    def read(self, size: int = -1) -> bytes:
        parts: list[bytes] = []
        wanted = size
        while wanted != 0:
            if self._at >= len(self._chunk):
                chunk = self._next()
                if chunk is None:
                    break
                self._chunk, self._at = chunk, 0
                continue
            end = len(self._chunk) if wanted < 0 else min(len(self._chunk), self._at + wanted)
            parts.append(self._chunk[self._at : end])
            if wanted > 0:
                wanted -= end - self._at
            self._at = end
        return b"".join(parts)
