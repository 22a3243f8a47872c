"""A tmux session inside the sandbox, driven only through ``sandbox.exec`` (every call is short).

The server listens on a private socket (``SOCKET``) so nothing else the sandbox runs shares it; the
window has a fixed size, no status line, a bounded scrollback, and ``remain-on-exit`` so a shell that
exits leaves its last screen readable. The shell is bash (sh without it), with no history file.
Keys go in with ``send-keys`` (``-l`` for literal text, in chunks below tmux's message size limit)
and never wait for what they start: a blocking program keeps running in the pane while captures go
on. The server is a process of the sandbox: it dies with it, and a snapshot (which stops every
process) ends it too; ``alive()`` tells.
"""

from __future__ import annotations

import asyncio
import secrets
import shlex
from collections.abc import Sequence
from dataclasses import dataclass

from ares.agents.terminal.keys import Key
from ares.errors import AgentError
from ares.sandbox.base import ExecResult, Sandbox

SOCKET_DIR = "/tmp/ares-tmux"
SOCKET = f"{SOCKET_DIR}/sock"
SESSION = "ares"
#: Characters of literal text per ``send-keys`` call: tmux refuses commands over ~16 KiB of UTF-8.
CHUNK_CHARS = 2000
#: Bytes of ``send-keys`` calls per exec: one shell argument may not pass 128 KiB.
BATCH_BYTES = 64_000
#: Exit code of the start script when the image has no tmux.
_NO_TMUX = 127
_TMUX = f"tmux -S {SOCKET}"


class TmuxMissingError(AgentError):
    """The task's image has no tmux, which the terminal agent needs."""


@dataclass(frozen=True, slots=True)
class Capture:
    """What the terminal shows: scrollback lines new since a mark, then the visible screen.

    ``history_size`` is the mark for the next capture; ``history_size + cursor_y`` is the cursor's
    line counted from the top of the scrollback; ``pane_dead``: the shell has exited.
    """

    scrollback: str
    screen: str
    history_size: int
    cursor_y: int
    pane_dead: bool

    @property
    def cursor_line(self) -> int:
        return self.history_size + self.cursor_y

    @property
    def text(self) -> str:
        return f"{self.scrollback}\n{self.screen}" if self.scrollback else self.screen


class TmuxSession:
    """One tmux server and session in ``sandbox``, its shell started in ``workdir``."""

    def __init__(
        self,
        sandbox: Sandbox,
        workdir: str,
        *,
        width: int = 160,
        height: int = 40,
        history_limit: int = 10_000,
        timeout_s: float = 30.0,
    ) -> None:
        self.sandbox = sandbox
        self.workdir = workdir
        self.width = width
        self.height = height
        self.history_limit = history_limit
        self.timeout_s = timeout_s
        self._separator = f"--ares-screen-{secrets.token_hex(6)}--"

    async def start(self, ready_timeout_s: float = 10.0) -> None:
        """Start a fresh server (after killing any old one) and wait until the shell draws its prompt."""
        options = (
            f"set -g history-limit {self.history_limit} \\; set -g remain-on-exit on \\; "
            f"set -g status off \\; set -g default-size {self.width}x{self.height}"
        )
        script = f"""
command -v tmux >/dev/null 2>&1 || exit {_NO_TMUX}
mkdir -p {SOCKET_DIR} && chmod 700 {SOCKET_DIR} || exit 1
{_TMUX} kill-server 2>/dev/null
rm -f {SOCKET}
if command -v bash >/dev/null 2>&1; then shell="env HISTFILE= bash"; else shell=sh; fi
exec {_TMUX} -f /dev/null {options} \\; new-session -d -s {SESSION} -x {self.width} -y {self.height} \
 -c {shlex.quote(self.workdir)} "$shell"
"""
        result = await self._exec(script)
        if result.exit_code == _NO_TMUX:
            raise TmuxMissingError(
                "the terminal agent needs tmux in the sandbox, and the task's image has none on its PATH "
                "(install tmux in the image, or use another agent)"
            )
        if not result.ok:
            raise AgentError(f"could not start tmux in the sandbox: {_why(result)}")
        await self._wait_ready(ready_timeout_s)

    async def _wait_ready(self, timeout_s: float) -> None:
        """Typing before the shell has set up its line editor can lose keys: wait for the prompt."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while loop.time() < deadline:
            capture = await self.capture()
            if capture.screen.strip() or capture.pane_dead:
                return
            await asyncio.sleep(0.05)

    async def alive(self) -> bool:
        """Whether the server and session are still there (a snapshot or ``kill-server`` ends them)."""
        return (await self._exec(f"{_TMUX} has-session -t {SESSION} 2>/dev/null")).exit_code == 0

    async def send(self, keys: Sequence[Key]) -> bool:
        """Send ``keys`` in order without waiting for what they start; False if the session is gone."""
        calls = []
        for key in keys:
            if not key.literal:
                calls.append(f"{_TMUX} send-keys -t {SESSION} {shlex.quote(key.text)}")
                continue
            for start in range(0, len(key.text), CHUNK_CHARS):
                chunk = key.text[start : start + CHUNK_CHARS]
                calls.append(f"{_TMUX} send-keys -t {SESSION} -l -- {shlex.quote(chunk)}")
        for batch in _batches(calls):
            if (await self._exec(" && ".join(batch))).exit_code != 0:
                return False
        return True

    async def capture(self, since: int | None = None, max_scrollback_lines: int = 1000) -> Capture:
        """The visible screen, plus the scrollback lines added since history size ``since`` (at most
        ``max_scrollback_lines``, the newest). Wrapped lines are joined, trailing blanks dropped."""
        mark = -1 if since is None else since
        script = f"""
info=$({_TMUX} display-message -p -t {SESSION} '#{{history_size}} #{{cursor_y}} #{{pane_dead}}') || exit 1
set -- $info
echo "$1 $2 $3"
n=$(( $1 - {mark} )); [ {mark} -lt 0 ] && n=0; [ $n -gt {max_scrollback_lines} ] && n={max_scrollback_lines}
[ $n -gt 0 ] && {{ {_TMUX} capture-pane -p -J -t {SESSION} -S -$n -E -1 || exit 1; }}
echo {self._separator}
{_TMUX} capture-pane -p -J -t {SESSION}
"""
        result = await self._exec(script)
        header, _, rest = result.stdout.partition("\n")
        scrollback, separator, screen = rest.rpartition(f"{self._separator}\n")
        fields = header.split()
        if result.exit_code != 0 or not separator or len(fields) != 3 or not fields[0].isdigit():
            raise AgentError(f"could not capture the tmux screen: {_why(result)}")
        return Capture(_tidy(scrollback), _tidy(screen), int(fields[0]), int(fields[1]), fields[2] == "1")

    async def output_since(self, line: int, max_lines: int = 1000) -> str:
        """The text from ``line`` (a ``Capture.cursor_line``) to the bottom of the screen, at most the
        last ``max_lines`` lines of it (wrapped lines joined)."""
        script = f"""
h=$({_TMUX} display-message -p -t {SESSION} '#{{history_size}}') || exit 1
start=$(( {line} - h )); [ $start -lt -{max_lines} ] && start=-{max_lines}
exec {_TMUX} capture-pane -p -J -t {SESSION} -S $start
"""
        result = await self._exec(script)
        if result.exit_code != 0:
            raise AgentError(f"could not capture the tmux screen: {_why(result)}")
        return result.stdout

    async def respawn(self) -> None:
        """Start a new shell in a pane whose shell has exited."""
        result = await self._exec(f"{_TMUX} respawn-pane -t {SESSION} -c {shlex.quote(self.workdir)}")
        if not result.ok:
            raise AgentError(f"could not restart the terminal's shell: {_why(result)}")

    async def kill(self) -> None:
        """Stop the server (and every program in its panes); a server already gone is fine."""
        await self._exec(f"{_TMUX} kill-server 2>/dev/null; rm -f {SOCKET}")

    async def _exec(self, script: str) -> ExecResult:
        return await self.sandbox.exec(script, cwd="/", timeout_s=self.timeout_s)


def _batches(calls: list[str]) -> list[list[str]]:
    """``calls`` in groups small enough for one ``sh -c`` argument (Linux caps one at 128 KiB)."""
    batches: list[list[str]] = []
    size = BATCH_BYTES
    for call in calls:
        length = len(call.encode()) + 4
        if size + length > BATCH_BYTES:
            batches.append([])
            size = 0
        batches[-1].append(call)
        size += length
    return batches


def _tidy(text: str) -> str:
    """Lines without trailing blanks, and no blank lines at the end (an idle screen is mostly empty)."""
    return "\n".join(line.rstrip() for line in text.splitlines()).rstrip("\n")


def _why(result: ExecResult) -> str:
    if result.timed_out:
        return "tmux did not answer in time"
    return (result.stderr or result.stdout).strip()[-300:] or f"exit code {result.exit_code}"
