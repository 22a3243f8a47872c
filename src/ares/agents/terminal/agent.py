"""The built-in terminal agent: keystrokes into a tmux session, screen captures back (Terminus style).

Each episode starts a tmux session in the sandbox (``tmux.TmuxSession``); the first user message is
the task and the initial screen. Each turn the model replies with a JSON object of keystroke commands
(``keys.parse_reply``); the agent types them in order, waits after each (``asyncio.sleep``, or until a
``wait_for`` text shows up), then sends the screen (new scrollback lines plus the visible screen) back.
``task_complete`` ends the run; so do too many malformed replies in a row and an optional step limit.

Snapshots: ``state()`` is the conversation and counters, as for the bash agent. The tmux server is a
process: a snapshot stops it (the local sandbox stops every process to freeze the files) and a
restore does not bring it back. So before typing, the agent checks that its session is alive, and if
not starts a new shell in the workdir and says so at the top of the next observation, in both the
original episode and every restored copy (the same note, so branches see the same thing).
"""

from __future__ import annotations

import asyncio
import itertools
from dataclasses import dataclass, field

from ares.agents.bash_parser import FormatError
from ares.agents.loop import ConversationLoop, LoopSettings, Turn, check_config
from ares.agents.rendering import default_template, render, truncate_middle
from ares.agents.terminal.action_format import TerminalActionFormat
from ares.agents.terminal.keys import DEFAULT_DURATION_S, Command, parse_reply
from ares.agents.terminal.tmux import TmuxSession
from ares.llm.interceptor import LLMClient
from ares.llm.types import LLMResponse, Message, user
from ares.sandbox.base import Sandbox
from ares.tasks.model import Task

#: The note that opens the first observation after the tmux session was found gone.
RESTARTED_NOTE = (
    "The terminal session had ended: a snapshot or restore keeps files but stops every process. "
    "A new shell was started in {workdir}; earlier programs, the current directory and shell "
    "variables are gone"
)
_POLL_S = (0.05, 0.1, 0.2, 0.4, 0.8, 1.0)


@dataclass(frozen=True, slots=True)
class TerminalAgentConfig(LoopSettings):
    """How the terminal agent talks to its model and sizes its terminal. Templates are Jinja2.

    Template variables: system ``width``, ``height``, ``default_duration``, ``max_duration_s``;
    instance ``instruction``, ``workdir``, ``task``; observation ``screen``, ``notes``; format error
    ``error``, ``cut_off``.
    """

    system_template: str = field(default_factory=lambda: default_template("terminal_system.j2"))
    instance_template: str = field(default_factory=lambda: default_template("terminal_instance.j2"))
    observation_template: str = field(default_factory=lambda: default_template("terminal_observation.j2"))
    format_error_template: str = field(default_factory=lambda: default_template("terminal_format_error.j2"))
    width: int = 160
    height: int = 40
    #: Scrollback lines tmux keeps; a capture shows at most ``max_scrollback_lines`` new ones.
    history_limit: int = 50_000
    max_scrollback_lines: int = 1000
    #: An observation beyond this many characters is cut in the middle.
    max_output_chars: int = 10_000
    #: The longest wait after one command; None: the task's per-command timeout.
    max_duration_s: float | None = None

    def __post_init__(self) -> None:
        positive = ("width", "height", "max_scrollback_lines", "max_output_chars", "max_format_errors")
        templates = (
            self.system_template,
            self.instance_template,
            self.observation_template,
            self.format_error_template,
        )
        check_config(self, positive, templates)
        if self.history_limit < self.max_scrollback_lines:
            raise ValueError(
                f"history_limit ({self.history_limit}) must be at least max_scrollback_lines "
                f"({self.max_scrollback_lines})"
            )
        if self.max_duration_s is not None and self.max_duration_s <= 0:
            raise ValueError(f"max_duration_s must be None or positive, got {self.max_duration_s}")


class TerminalAgent(ConversationLoop):
    """Drives one tmux session for one task. ``exit_status`` says why ``run`` returned; the tmux
    server is stopped when the loop ends by itself."""

    AGENT = "terminal"
    STATE_VERSION = 1
    config: TerminalAgentConfig

    def __init__(self, sandbox: Sandbox, llm: LLMClient, task: Task, config: TerminalAgentConfig) -> None:
        super().__init__(sandbox, llm, task, config)
        self.session = TmuxSession(
            sandbox,
            task.workdir,
            width=config.width,
            height=config.height,
            history_limit=config.history_limit,
        )
        self.max_duration_s = min(config.max_duration_s or task.command_timeout_s, task.command_timeout_s)
        self._mark = 0  # history size at the last capture: the next shows the scrollback after it
        self._session_started = False

    def system_prompt(self) -> str:
        config = self.config
        return render(
            config.system_template,
            width=config.width,
            height=config.height,
            default_duration=DEFAULT_DURATION_S,
            max_duration_s=self.max_duration_s,
        )

    def instance(self) -> str:
        task = self.task
        return render(
            self.config.instance_template, instruction=task.instruction, workdir=task.workdir, task=task
        )

    async def opening(self, instance: str) -> list[Message]:
        """The task and the first screen of a fresh session."""
        await self._start_session()
        return [user(f"{instance}\n\n{await self._observation([])}")]

    async def act(self, response: LLMResponse) -> Turn:
        """Type the reply's keystrokes; the screen afterwards is the next observation."""
        try:
            reply = parse_reply(response.content)
        except FormatError as error:
            return Turn("malformed", correction=user(self._format_error(error, response)), error=str(error))
        notes = await self._type(reply.commands)
        if reply.task_complete:
            return Turn("submitted")
        return Turn("acted", (user(await self._observation(notes)),))

    async def on_stop(self) -> None:
        await self.session.kill()

    async def _start_session(self) -> None:
        await self.session.start()
        self._mark = 0
        self._session_started = True

    async def _type(self, commands: tuple[Command, ...]) -> list[str]:
        """Send each command and wait after it; notes for the next observation."""
        notes: list[str] = []
        if not self._session_started or not await self.session.alive():
            await self._start_session()
            notes.append(RESTARTED_NOTE.format(workdir=self.task.workdir))
        for command in commands:
            wait = min(command.duration_s, self.max_duration_s)
            if command.duration_s > self.max_duration_s and command.wait_for is None:
                notes.append(f"a duration of {command.duration_s:g}s was cut to the limit of {wait:g}s")
            before = await self.session.capture(self._mark) if command.wait_for is not None else None
            if not await self.session.send(command.keys()):
                notes.append("the keystrokes could not be sent: the terminal session has ended")
                break
            if before is None or command.wait_for is None:
                await asyncio.sleep(wait)
            elif not await self._wait_for(command.wait_for, before.cursor_line, wait):
                notes.append(
                    f"{command.wait_for!r} did not appear within {wait:g}s; the command may still be running"
                )
        return notes

    async def _wait_for(self, text: str, line: int, timeout_s: float) -> bool:
        """Poll the output below ``line`` (the line the keys were typed on) until ``text`` shows."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        for attempt in itertools.count():
            output = await self.session.output_since(line, self.config.max_scrollback_lines)
            if text in output.partition("\n")[2]:
                return True
            left = deadline - loop.time()
            if left <= 0:
                return False
            await asyncio.sleep(min(_POLL_S[min(attempt, len(_POLL_S) - 1)], left))
        raise AssertionError("unreachable")

    async def _observation(self, notes: list[str]) -> str:
        capture = await self.session.capture(self._mark, self.config.max_scrollback_lines)
        self._mark = capture.history_size
        if capture.pane_dead:
            await self.session.respawn()
            notes = [*notes, f"the shell exited; a new one was started in {self.task.workdir}"]
        return render(
            self.config.observation_template,
            screen=truncate_middle(capture.text, self.config.max_output_chars),
            notes=notes,
        )

    def _format_error(self, error: FormatError, response: LLMResponse) -> str:
        return render(
            self.config.format_error_template, error=str(error), cut_off=response.finish_reason == "length"
        )


class TerminalAgentFactory:
    """Builds one TerminalAgent per episode, all sharing one config."""

    def __init__(self, config: TerminalAgentConfig | None = None) -> None:
        self.config = config if config is not None else TerminalAgentConfig()
        self.action_format: TerminalActionFormat = TerminalActionFormat()

    def __call__(self, *, sandbox: Sandbox, llm: LLMClient, task: Task) -> TerminalAgent:
        return TerminalAgent(sandbox, llm, task, self.config)
