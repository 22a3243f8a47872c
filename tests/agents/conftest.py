"""A host-shell sandbox double: real subprocesses in a temp dir, no isolation, for agent tests."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import time
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import Self

import pytest

from ares.sandbox.base import ExecResult, FileMap, SandboxSpec


class ShellSandbox:
    """Runs each command with ``asyncio.create_subprocess_shell``; sandbox paths are host paths."""

    def __init__(self, root: Path) -> None:
        self.spec = SandboxSpec(workdir=str(root))
        self.commands: list[str] = []

    async def start(self) -> None:
        pass

    async def stop(self) -> None:
        pass

    async def exec(
        self,
        cmd: str,
        *,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        timeout_s: float | None = None,
        stdin: bytes | None = None,
    ) -> ExecResult:
        self.commands.append(cmd)
        started = time.monotonic()
        proc = await asyncio.create_subprocess_shell(
            cmd,
            cwd=cwd or self.spec.workdir,
            env={**os.environ, **(env or {})},
            stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,  # its own process group, so a timeout kills the whole tree
        )
        timed_out = False
        try:
            out, err = await asyncio.wait_for(proc.communicate(stdin), timeout_s)
        except TimeoutError:
            timed_out = True
            os.killpg(proc.pid, signal.SIGKILL)
            out, err = await proc.communicate()
        return ExecResult(
            stdout=out.decode(errors="replace"),
            stderr=err.decode(errors="replace"),
            exit_code=proc.returncode if proc.returncode is not None else -1,
            timed_out=timed_out,
            duration_s=time.monotonic() - started,
        )

    async def upload(self, src: Path | FileMap, dest: str) -> None:
        await asyncio.to_thread(_copy_in, src, Path(dest))

    async def download(self, src: str, dest: Path) -> None:
        await asyncio.to_thread(_copy_in, Path(src), dest)

    async def read_file(self, path: str) -> bytes:
        return await asyncio.to_thread(Path(path).read_bytes)

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()


def _copy_in(src: Path | FileMap, dest: Path) -> None:
    """Blocking copy of a file, a directory or in-memory files; run in a thread."""
    if isinstance(src, Path):
        (shutil.copytree if src.is_dir() else shutil.copy)(src, dest)
        return
    for rel, content in src.items():
        path = dest / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content.encode() if isinstance(content, str) else content)


@pytest.fixture
def shell_sandbox(tmp_path: Path) -> ShellSandbox:
    return ShellSandbox(tmp_path)
