"""``tests/oracle_openai.py`` run as a subprocess a test can kill and start again on the same port."""

from __future__ import annotations

import asyncio
import socket
import sys
from pathlib import Path

SERVER = Path(__file__).parent / "oracle_openai.py"


class ServerProcess:
    """``tests/oracle_openai.py`` in a subprocess on a fixed port: started, killed, started again."""

    def __init__(self, script: Path, hold_file: Path) -> None:
        self.script, self.hold_file = script, hold_file
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.proc: asyncio.subprocess.Process | None = None

    async def start(self) -> None:
        self.proc = await asyncio.create_subprocess_exec(
            sys.executable, str(SERVER), "--port", str(self.port), "--script", str(self.script),
            "--hold-file", str(self.hold_file), stdout=asyncio.subprocess.PIPE,
        )  # fmt: skip
        assert await self.line() == f"LISTENING {self.port}"

    async def line(self) -> str:
        assert self.proc is not None and self.proc.stdout is not None
        return (await self.proc.stdout.readline()).decode().strip()

    async def kill(self) -> None:
        if self.proc is not None and self.proc.returncode is None:
            self.proc.kill()  # SIGKILL: connections reset, the port refuses from now on
            await self.proc.wait()
