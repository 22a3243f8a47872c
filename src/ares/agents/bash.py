"""The built-in bash agent: templates, one parser, the shared loop (``ares.agents.loop``).

Each turn the agent asks its LLM for a reply, parses the single ```bash command out of it, runs that
command in the sandbox and sends the output back as the next user message. It stops when the model
submits (a block holding only ``SUBMIT_COMMAND``); after too many malformed replies in a row; or at
an optional step limit. With a ``ContextConfig`` it summarizes and starts over from the task and
the summary when its conversation would pass a token budget (``ares.agents.context``). Episode
limits (time, turns, tokens) belong to the environment, not here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ares.agents.bash_parser import FormatError, parse_action
from ares.agents.loop import ConversationLoop, LoopSettings, Turn, check_config
from ares.agents.loop import ExitStatus as ExitStatus
from ares.agents.rendering import combine_output as combine_output
from ares.agents.rendering import command_output, default_template, render
from ares.agents.rendering import limit_note as limit_note
from ares.agents.rendering import truncate_middle as truncate_middle
from ares.llm.interceptor import LLMClient
from ares.llm.types import LLMResponse, user
from ares.sandbox.base import ExecResult, Sandbox
from ares.tasks.model import Task

#: The whole command a model sends to finish. It is never run: the episode goes to the verifier.
SUBMIT_COMMAND = "echo ARES_SUBMIT"


@dataclass(frozen=True, slots=True)
class BashAgentConfig(LoopSettings):
    """How the bash agent talks to its model. Templates are Jinja2 sources (StrictUndefined).

    Template variables: system ``submit_command``; instance ``instruction``, ``workdir``,
    ``timeout_s``, ``task``, ``submit_command``; observation ``output``, ``exit_code``,
    ``timed_out``, ``timeout_s``, ``duration_s``; format error ``error``, ``cut_off``,
    ``submit_command``.
    """

    system_template: str = field(default_factory=lambda: default_template("bash_system.j2"))
    instance_template: str = field(default_factory=lambda: default_template("bash_instance.j2"))
    observation_template: str = field(default_factory=lambda: default_template("bash_observation.j2"))
    format_error_template: str = field(default_factory=lambda: default_template("bash_format_error.j2"))
    #: Command output beyond this many characters is cut in the middle.
    max_output_chars: int = 10_000

    def __post_init__(self) -> None:
        templates = (
            self.system_template,
            self.instance_template,
            self.observation_template,
            self.format_error_template,
        )
        check_config(self, ("max_output_chars", "max_format_errors"), templates)


class BashAgent(ConversationLoop):
    """Drives one sandbox for one task. ``exit_status`` says why ``run`` returned.

    ``state()`` / ``load_state()`` capture the agent between two LLM calls (its conversation and
    counters, JSON-serializable): an agent loaded with a state re-issues the same pending request
    first, then goes on as the original would have.
    """

    AGENT = "bash"
    STATE_VERSION = 1
    config: BashAgentConfig

    def __init__(self, sandbox: Sandbox, llm: LLMClient, task: Task, config: BashAgentConfig) -> None:
        super().__init__(sandbox, llm, task, config)

    def system_prompt(self) -> str:
        return render(self.config.system_template, submit_command=SUBMIT_COMMAND)

    def instance(self) -> str:
        task = self.task
        return render(
            self.config.instance_template,
            instruction=task.instruction,
            workdir=task.workdir,
            timeout_s=task.command_timeout_s,
            task=task,
            submit_command=SUBMIT_COMMAND,
        )

    async def act(self, response: LLMResponse) -> Turn:
        """Run the reply's one command; the submit command is never run."""
        try:
            command = _command(response)
        except FormatError as error:
            return Turn("malformed", correction=user(self._format_error(error, response)), error=str(error))
        if command == SUBMIT_COMMAND:
            return Turn("submitted")
        task = self.task
        result = await self.sandbox.exec(command, cwd=task.workdir, timeout_s=task.command_timeout_s)
        return Turn("acted", (user(self._observation(result)),))

    def _observation(self, result: ExecResult) -> str:
        return render(
            self.config.observation_template,
            output=command_output(result, self.task.resources, self.config.max_output_chars),
            exit_code=result.exit_code,
            timed_out=result.timed_out,
            timeout_s=self.task.command_timeout_s,
            duration_s=result.duration_s,
        )

    def _format_error(self, error: FormatError, response: LLMResponse) -> str:
        return render(
            self.config.format_error_template,
            error=str(error),
            cut_off=response.finish_reason == "length",
            submit_command=SUBMIT_COMMAND,
        )


def _command(response: LLMResponse) -> str:
    """The reply's command; whitespace inside the submit command is not significant."""
    if response.content is None:
        raise FormatError("Your reply had no text. Reply with a short thought and one ```bash block.")
    command = parse_action(response.content)
    return SUBMIT_COMMAND if " ".join(command.split()) == SUBMIT_COMMAND else command


_BACKTICK_RUN = re.compile(r"`+")


class BashActionFormat:
    """Speaks the bash agent's language for scripted policies (oracle, null, replay)."""

    def command(self, command: str) -> LLMResponse:
        """A reply whose block runs ``command``; the fence outgrows any backtick run inside it.

        ``parse_action`` gives back ``command`` exactly, up to surrounding whitespace and CR line ends.
        """
        longest = max((len(run) for run in _BACKTICK_RUN.findall(command)), default=0)
        fence = "`" * max(3, longest + 1)
        return LLMResponse(content=f"Running the next step.\n\n{fence}bash\n{command}\n{fence}\n")

    def submit(self) -> LLMResponse:
        return self.command(SUBMIT_COMMAND)


class BashAgentFactory:
    """Builds one BashAgent per episode, all sharing one config."""

    def __init__(self, config: BashAgentConfig | None = None) -> None:
        self.config = config if config is not None else BashAgentConfig()
        self.action_format: BashActionFormat = BashActionFormat()

    def __call__(self, *, sandbox: Sandbox, llm: LLMClient, task: Task) -> BashAgent:
        return BashAgent(sandbox, llm, task, self.config)
