"""The built-in tool-calling agent: templates, three function tools, the shared loop (``agents.loop``).

The model acts through OpenAI-style function tools sent with every request: ``bash`` (one command in
the task's workdir), ``file`` (view, create and edit files; see ``file_tool``) and ``submit``. Each
turn is one LLM call; every tool call of the reply runs in order and is answered by its own tool
message, so the conversation is valid to resend to any chat API. A call the model got wrong (unknown
tool, arguments that are not JSON or do not fit the schema) is answered with an error it can act on.
The agent stops when the model calls ``submit``, after too many replies in a row with no usable call,
or at an optional step limit. With a ``ContextConfig`` it compacts long conversations as the bash
agent does (``ares.agents.context``); the summary request keeps the tools, so it extends the prompt
it summarizes, and only the reply's text is kept as the summary.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ares.agents.file_tool import FILE_TOOL, FILE_TOOL_SCHEMA, FileTool, ToolCallError
from ares.agents.loop import ConversationLoop, LoopSettings, Turn, check_config
from ares.agents.rendering import command_output, default_template, render
from ares.llm.interceptor import LLMClient
from ares.llm.types import LLMResponse, Message, ToolCall, assistant, user
from ares.sandbox.base import Sandbox
from ares.tasks.model import Task

BASH_TOOL = "bash"
SUBMIT_TOOL = "submit"

TOOLS: tuple[Mapping[str, Any], ...] = (
    {
        "type": "function",
        "function": {
            "name": BASH_TOOL,
            "description": (
                "Run one bash command in a fresh shell that starts in the working directory, and get its "
                "exit code and output. Nothing but files persists between calls. No input, no terminal."
            ),
            "parameters": {
                "type": "object",
                "properties": {"command": {"type": "string", "description": "The command to run."}},
                "required": ["command"],
                "additionalProperties": False,
            },
        },
    },
    FILE_TOOL_SCHEMA,
    {
        "type": "function",
        "function": {
            "name": SUBMIT_TOOL,
            "description": "Finish: your work is checked as it is now and you get no further turns.",
            "parameters": {"type": "object", "properties": {}, "additionalProperties": False},
        },
    },
)

_TOOL_NAMES = {"bash_tool": BASH_TOOL, "file_tool": FILE_TOOL, "submit_tool": SUBMIT_TOOL}
_SCHEMAS = {tool["function"]["name"]: tool["function"]["parameters"] for tool in TOOLS}
#: JSON schema type -> (Python type, how an error names it)
_JSON_TYPES: dict[str, tuple[type, str]] = {
    "string": (str, "a string"), "integer": (int, "an integer"), "boolean": (bool, "a boolean"),
}  # fmt: skip


@dataclass(frozen=True, slots=True)
class ToolAgentConfig(LoopSettings):
    """How the tool agent talks to its model. Templates are Jinja2 sources (StrictUndefined).

    Template variables: system and format error ``bash_tool``, ``file_tool``, ``submit_tool`` (and
    ``cut_off`` for the format error); instance ``instruction``, ``workdir``, ``timeout_s``, ``task``;
    bash output ``output``, ``exit_code``, ``timed_out``, ``timeout_s``, ``duration_s``; call error
    ``error``, ``cut_off``.
    """

    system_template: str = field(default_factory=lambda: default_template("tool_system.j2"))
    instance_template: str = field(default_factory=lambda: default_template("tool_instance.j2"))
    bash_output_template: str = field(default_factory=lambda: default_template("tool_bash_output.j2"))
    call_error_template: str = field(default_factory=lambda: default_template("tool_call_error.j2"))
    format_error_template: str = field(default_factory=lambda: default_template("tool_format_error.j2"))
    #: A tool result beyond this many characters is cut in the middle.
    max_output_chars: int = 10_000
    #: Files larger than this the file tool refuses to load (the model is pointed to bash instead).
    max_file_bytes: int = 1_000_000

    def __post_init__(self) -> None:
        templates = (
            self.system_template,
            self.instance_template,
            self.bash_output_template,
            self.call_error_template,
            self.format_error_template,
        )
        check_config(self, ("max_output_chars", "max_file_bytes", "max_format_errors"), templates)


class ToolAgent(ConversationLoop):
    """Drives one sandbox for one task through tool calls. ``exit_status`` says why ``run`` returned.

    ``state()`` / ``load_state()`` work as the bash agent's: the conversation and counters between two
    LLM calls, JSON-serializable; a loaded agent re-issues the same pending request first.
    """

    AGENT = "tool"
    STATE_VERSION = 1
    TOOLS = TOOLS
    config: ToolAgentConfig

    def __init__(self, sandbox: Sandbox, llm: LLMClient, task: Task, config: ToolAgentConfig) -> None:
        super().__init__(sandbox, llm, task, config)
        self._file_tool = FileTool(
            sandbox, task.workdir, task.command_timeout_s, config.max_output_chars, config.max_file_bytes
        )

    def system_prompt(self) -> str:
        return render(self.config.system_template, **_TOOL_NAMES)

    def instance(self) -> str:
        task = self.task
        return render(
            self.config.instance_template,
            instruction=task.instruction,
            workdir=task.workdir,
            timeout_s=task.command_timeout_s,
            task=task,
        )

    def reply_message(self, response: LLMResponse) -> Message:
        """Text and calls as they came; a reply with neither keeps "" so turns still alternate."""
        reply = response.message()
        return reply if reply.content is not None or reply.tool_calls else assistant("")

    async def act(self, response: LLMResponse) -> Turn:
        """Run every call of the reply in order, each answered by its own tool message; ``submit``
        ends the run at once. A reply is malformed when none of its calls was usable."""
        cut_off = response.finish_reason == "length"
        answers: list[Message] = []
        usable = False
        for call in response.tool_calls:
            try:
                name, args = parse_call(call)
            except ToolCallError as error:
                answers.append(self._tool_message(call, self._call_error(error, cut_off)))
                continue
            usable = True
            if name == SUBMIT_TOOL:
                return Turn("submitted", tuple(answers))
            answers.append(self._tool_message(call, await self._run_tool(name, args)))
        if usable:
            return Turn("acted", tuple(answers))
        correction = None
        if not response.tool_calls:
            correction = user(render(self.config.format_error_template, cut_off=cut_off, **_TOOL_NAMES))
        return Turn("malformed", tuple(answers), correction, error="no usable tool call")

    async def _run_tool(self, name: str, args: Mapping[str, Any]) -> str:
        if name == FILE_TOOL:
            try:
                return await self._file_tool(args)
            except ToolCallError as error:
                return self._call_error(error, cut_off=False)
        task = self.task
        result = await self.sandbox.exec(args["command"], cwd=task.workdir, timeout_s=task.command_timeout_s)
        return render(
            self.config.bash_output_template,
            output=command_output(result, task.resources, self.config.max_output_chars),
            exit_code=result.exit_code,
            timed_out=result.timed_out,
            timeout_s=task.command_timeout_s,
            duration_s=result.duration_s,
        )

    def _call_error(self, error: ToolCallError, cut_off: bool) -> str:
        return render(self.config.call_error_template, error=str(error), cut_off=cut_off)

    @staticmethod
    def _tool_message(call: ToolCall, content: str) -> Message:
        return Message("tool", content, tool_call_id=call.id)


def parse_call(call: ToolCall) -> tuple[str, dict[str, Any]]:
    """The call's tool and arguments, checked against its schema (``ToolCallError`` if they do not fit)."""
    schema = _SCHEMAS.get(call.name)
    if schema is None:
        raise ToolCallError(f"there is no tool named {call.name!r}; the tools are {', '.join(_SCHEMAS)}")
    try:
        args = json.loads(call.arguments) if call.arguments.strip() else {}
    except json.JSONDecodeError as error:
        raise ToolCallError(f"the arguments of this {call.name} call are not valid JSON ({error})") from None
    if not isinstance(args, dict):
        raise ToolCallError(
            f"the arguments of a {call.name} call must be a JSON object, not {type(args).__name__}"
        )
    properties: Mapping[str, Any] = schema["properties"]
    unknown = sorted(set(args) - set(properties))
    if unknown:
        allowed = ", ".join(properties) or "none"
        raise ToolCallError(f"{call.name} has no argument {', '.join(unknown)} (its arguments: {allowed})")
    missing = [name for name in schema.get("required", ()) if name not in args]
    if missing:
        raise ToolCallError(f"{call.name} needs the argument {', '.join(missing)}")
    for name, value in args.items():
        spec = properties[name]
        expected, described = _JSON_TYPES[spec["type"]]
        if not isinstance(value, expected) or (expected is int and isinstance(value, bool)):
            raise ToolCallError(
                f"{call.name}'s argument {name} must be {described}, got {json.dumps(value)[:80]}"
            )
        if "enum" in spec and value not in spec["enum"]:
            raise ToolCallError(
                f"{call.name}'s argument {name} must be one of {', '.join(spec['enum'])}, not {value!r}"
            )
    return call.name, args


class ToolActionFormat:
    """Speaks the tool agent's language for scripted policies (oracle, null, replay).

    Call ids are derived from the call, so the same action is always the same response.
    """

    def command(self, command: str) -> LLMResponse:
        """A reply with one ``bash`` call running ``command``."""
        return self.call(BASH_TOOL, {"command": command})

    def submit(self) -> LLMResponse:
        return self.call(SUBMIT_TOOL, {})

    def call(self, name: str, arguments: Mapping[str, Any]) -> LLMResponse:
        """A reply with one call of tool ``name``."""
        return tool_calls_response(tool_call(name, arguments))


def tool_call(name: str, arguments: Mapping[str, Any], call_id: str | None = None) -> ToolCall:
    """A call of tool ``name``; the id defaults to one derived from the call itself."""
    text = json.dumps(dict(arguments))
    if call_id is None:
        call_id = "call_" + hashlib.sha256(f"{name}\0{text}".encode()).hexdigest()[:16]
    return ToolCall(id=call_id, name=name, arguments=text)


def tool_calls_response(*calls: ToolCall, content: str | None = None) -> LLMResponse:
    """A reply made of ``calls`` (parallel calls when there are several)."""
    return LLMResponse(content=content, tool_calls=calls, finish_reason="tool_calls")


class ToolAgentFactory:
    """Builds one ToolAgent per episode, all sharing one config."""

    def __init__(self, config: ToolAgentConfig | None = None) -> None:
        self.config = config if config is not None else ToolAgentConfig()
        self.action_format: ToolActionFormat = ToolActionFormat()

    def __call__(self, *, sandbox: Sandbox, llm: LLMClient, task: Task) -> ToolAgent:
        return ToolAgent(sandbox, llm, task, self.config)
