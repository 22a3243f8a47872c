"""The single-turn agent: one LLM call that answers a function-level task with the whole solution.

Small models cannot follow a multi-turn tool protocol, but many can write a function when asked once.
This agent shows the task's instruction and the current content of its solution file
(``Task.solution_file``, e.g. HumanEval's ``solution.py`` holding signature + docstring), asks for
the complete file in one reply, writes the code it extracts from that reply (``extract_solution``)
to the file and ends: the episode goes to the verifier. It runs no commands.
"""

from __future__ import annotations

import ast
import posixpath
import re
import textwrap
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from ares.agents.rendering import compile_template, default_template, render
from ares.errors import AgentError, PolicyError, SandboxCrashedError, SandboxError
from ares.llm.interceptor import LLMClient
from ares.llm.types import LLMRequest, LLMResponse, SamplingParams, user
from ares.sandbox.base import Sandbox
from ares.tasks.model import Task

#: How ``SingleTurnAgent.run`` ended: code was written, or the reply changed nothing (e.g. it held no
#: code) and the file was left as it was.
SingleTurnExitStatus = Literal["submitted", "unchanged"]

#: Fence info strings taken as Python; blocks tagged otherwise (bash, text, ...) are used only when
#: the reply has no Python block.
_PYTHON_TAGS = frozenset({"", "python", "py", "python3", "py3"})
_FENCE_OPEN = re.compile(r"^[ \t]{0,3}(?P<fence>`{3,}|~{3,})[ \t]*(?P<info>[^`\s]*)[^`]*$")
_TOP_LEVEL_CODE = re.compile(r"^(?:import |from |def |async def |class |@)", re.MULTILINE)
_TOP_LEVEL_DEF = re.compile(r"^(?:async[ \t]+)?def[ \t]+(\w+)[ \t]*\(", re.MULTILINE)


def extract_solution(reply: str, stub: str, entry_point: str | None = None) -> str:
    """The solution file's new content, from a model's reply and the file's current content (the stub).

    1. The code: with fenced blocks (``` or ~~~; one cut off at the end of the reply counts, for
       replies stopped by the length limit), the last block that defines the entry point at top
       level, else the longest block; Python-tagged or untagged blocks are preferred over others.
       Without fences, the whole reply, starting at its first top-level ``import``/``def``/``class``
       line when it defines the entry point (prose before the code is dropped). The code is dedented.
       The entry point is ``entry_point``, else the stub's last top-level function.
    2. A reply without code (empty, or blank) gives the stub back unchanged.
    3. Code that defines the entry point is the whole file, preceded by the stub's top-level
       imports, functions and classes that it does not define itself (small models drop
       ``from typing import List`` or a helper the stub defines).
    4. Code that does not define it is the function's body, the usual small-model answer: it
       replaces the stub function's statements after its docstring, indented to the function's body
       level. A stub without that function gets the code appended.
    """
    name = entry_point or _last_function(stub)
    code = _code(reply.replace("\r\n", "\n"), name)
    if not code.strip():
        return stub
    if name is None:
        return _joined(stub, code)
    if _defines(code, name):
        return _with_stub_context(code, stub, name)
    return _with_body(stub, name, code)


def _code(reply: str, name: str | None) -> str:
    blocks = _fenced_blocks(reply)
    if not blocks:
        found = _TOP_LEVEL_CODE.search(reply)
        text = reply[found.start() :] if found and _defines(reply, name) else reply
        return _dedent(text).strip("\n")
    python = [code for info, code in blocks if info.lower() in _PYTHON_TAGS]
    candidates = [_dedent(code).strip("\n") for code in (python or [code for _, code in blocks])]
    defining = [code for code in candidates if _defines(code, name)]
    if defining:
        return defining[-1]
    return max(reversed(candidates), key=lambda code: len(code.strip()))  # ties: the last block


def _dedent(code: str) -> str:
    """Remove the indentation all non-blank lines share; unlike ``textwrap.dedent``, blank lines keep
    their whitespace (it may sit inside a string literal) unless it is part of that indentation."""
    lines = code.split("\n")
    indents = [len(line) - len(line.lstrip()) for line in lines if line.strip()]
    width = min(indents, default=0)
    if width == 0:
        return code
    prefix = next(line[:width] for line in lines if line.strip())
    if any(line.strip() and not line.startswith(prefix) for line in lines):
        return code  # mixed tabs and spaces: leave it to the interpreter to judge
    return "\n".join(line[width:] if line.startswith(prefix) else line.lstrip(" \t") for line in lines)


def _fenced_blocks(text: str) -> list[tuple[str, str]]:
    """(info string, content) of each fenced block, in order; an unclosed last block runs to the end."""
    blocks: list[tuple[str, str]] = []
    opened: tuple[str, str] | None = None  # (fence, info)
    lines: list[str] = []
    for line in text.split("\n"):
        if opened is None:
            match = _FENCE_OPEN.match(line)
            if match:
                opened, lines = (match["fence"], match["info"]), []
            continue
        fence = opened[0]
        stripped = line.strip()
        if stripped.startswith(fence) and not stripped.strip(fence[0]):
            blocks.append((opened[1], "\n".join(lines)))
            opened = None
        else:
            lines.append(line)
    if opened is not None:
        blocks.append((opened[1], "\n".join(lines)))
    return blocks


def _last_function(stub: str) -> str | None:
    names = _TOP_LEVEL_DEF.findall(stub)
    return names[-1] if names else None


def _defines(code: str, name: str | None) -> bool:
    """Whether ``code`` defines function ``name`` at top level (any function when ``name`` is None)."""
    names = _TOP_LEVEL_DEF.findall(code)
    return bool(names) if name is None else name in names


def _joined(first: str, second: str) -> str:
    return (
        f"{first.rstrip()}\n\n\n{second.strip(chr(10))}\n" if first.strip() else f"{second.strip(chr(10))}\n"
    )


def _with_stub_context(code: str, stub: str, entry_point: str) -> str:
    """``code`` preceded by what the stub defines at top level and the code lacks (never the entry
    point). Code or a stub that does not parse is left alone: it fails the same either way."""
    try:
        stub_tree, code_tree = ast.parse(stub), ast.parse(code)
    except SyntaxError:
        return code + "\n"
    bound = {name for node in code_tree.body for name in _bound_names(node)}
    stub_lines = stub.splitlines()
    kept: list[str] = []
    for node in stub_tree.body:
        names = _bound_names(node)
        if not names or entry_point in names or names <= bound:
            continue
        if isinstance(
            node, ast.Import | ast.ImportFrom | ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef
        ):
            start = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))])
            kept.append("\n".join(stub_lines[start - 1 : node.end_lineno]))
    return _joined("\n".join(kept), code) if kept else code + "\n"


def _bound_names(node: ast.stmt) -> set[str]:
    if isinstance(node, ast.Import | ast.ImportFrom):
        return {(alias.asname or alias.name).split(".")[0] for alias in node.names}
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return {node.name}
    if isinstance(node, ast.Assign):
        return {target.id for target in node.targets if isinstance(target, ast.Name)}
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
        return {node.target.id}
    return set()


def _with_body(stub: str, entry_point: str, body: str) -> str:
    """The stub with ``body`` as the entry point's statements after its docstring."""
    try:
        tree = ast.parse(stub)
    except SyntaxError:
        return _joined(stub, body)
    functions = [
        node
        for node in tree.body
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == entry_point
    ]
    if not functions:
        return _joined(stub, body)
    function, lines = functions[-1], stub.splitlines()
    first = function.body[0]
    has_docstring = isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
    has_docstring = has_docstring and isinstance(first.value.value, str)  # type: ignore[attr-defined]
    head_end = first.end_lineno if has_docstring else first.lineno - 1
    if head_end is None or head_end < function.lineno or first.lineno == function.lineno:
        return _joined(stub, body)  # a one-line ``def f(): ...`` has no body line to replace
    indent = lines[first.lineno - 1][: first.col_offset]
    new_body = textwrap.indent(body, indent)
    tail = lines[function.end_lineno :] if function.end_lineno is not None else []
    return "\n".join([*lines[:head_end], new_body, *tail]).rstrip("\n") + "\n"


@dataclass(frozen=True, slots=True)
class SingleTurnAgentConfig:
    """How the single-turn agent asks. Templates are Jinja2 sources (StrictUndefined).

    Template variables: system ``language``; instance ``instruction``, ``solution_file``, ``path``,
    ``stub``, ``show_stub`` (false when the instruction already quotes the stub), ``entry_point``,
    ``language`` (the fence tag for the file, e.g. ``python``), ``task``.
    """

    system_template: str = field(default_factory=lambda: default_template("single_system.j2"))
    instance_template: str = field(default_factory=lambda: default_template("single_instance.j2"))
    sampling: SamplingParams = field(default_factory=SamplingParams)
    model: str | None = None

    def __post_init__(self) -> None:
        for source in (self.system_template, self.instance_template):
            compile_template(source)  # a template syntax error surfaces here, not mid-episode


_LANGUAGES = {".py": "python", ".js": "javascript", ".ts": "typescript", ".sh": "bash", ".rs": "rust"}


class SingleTurnAgent:
    """Asks once, writes the solution file, ends. ``exit_status`` says whether code was written.

    Its state while waiting for the reply is only its kind: the request is rebuilt from the task and
    the solution file, which the snapshot's files hold, so a restored agent asks exactly the same.
    """

    STATE_VERSION = 1

    def __init__(self, sandbox: Sandbox, llm: LLMClient, task: Task, config: SingleTurnAgentConfig) -> None:
        if task.solution_file is None:
            raise AgentError(
                f"task {task.id} declares no solution file, so the single-turn agent has nothing to "
                'write; declare one (Harbor: [ares.agent] solution_file = "solution.py" in task.toml) '
                "or use a multi-turn agent (the bash or tool agent)"
            )
        self.sandbox = sandbox
        self.llm = llm
        self.task = task
        self.config = config
        self.path = posixpath.join(task.workdir, task.solution_file)
        self.exit_status: SingleTurnExitStatus | None = None
        self._waiting = False

    def state(self) -> dict[str, Any]:
        """The agent as it waits for its one reply (there is no state before or after that call)."""
        if not self._waiting:
            raise AgentError("the single-turn agent has no pending LLM call: its state exists only then")
        return {"agent": "single_turn", "version": self.STATE_VERSION}

    def load_state(self, state: Mapping[str, Any]) -> None:
        """Check ``state`` is this agent's; ``run()`` then re-issues the same request."""
        if state.get("agent") != "single_turn" or state.get("version") != self.STATE_VERSION:
            raise AgentError(
                f"not a single_turn agent state of version {self.STATE_VERSION}: "
                f"agent={state.get('agent')!r} version={state.get('version')!r}"
            )

    async def run(self) -> None:
        """One LLM call; its code goes to the solution file. LLM and sandbox errors propagate."""
        config, task = self.config, self.task
        stub = await self._current_content()
        entry_point = task.metadata.get("entry_point")
        entry_point = entry_point if isinstance(entry_point, str) and entry_point else None
        language = _LANGUAGES.get(posixpath.splitext(self.path)[1], "")
        prompt = render(
            config.instance_template,
            instruction=task.instruction,
            solution_file=task.solution_file,
            path=self.path,
            stub=stub.rstrip("\n"),
            show_stub=bool(stub.strip()) and stub.strip() not in task.instruction,
            entry_point=entry_point or _last_function(stub),
            language=language,
            task=task,
        )
        request = LLMRequest(
            messages=(user(prompt),),
            system_prompt=render(config.system_template, language=language),
            sampling=config.sampling,
            model=config.model,
            metadata={"agent": "single_turn", "turn": 0},
        )
        self._waiting = True
        response = await self.llm(request)
        self._waiting = False
        solution = extract_solution(response.content or "", stub, entry_point)
        if solution == stub:
            self.exit_status = "unchanged"
            return
        folder, name = posixpath.split(self.path)
        await self.sandbox.upload({name: solution}, folder)
        self.exit_status = "submitted"

    async def _current_content(self) -> str:
        """The file as the task left it; a file the task does not create yet reads as empty."""
        try:
            data = await self.sandbox.read_file(self.path)
        except SandboxCrashedError:
            raise
        except SandboxError:
            return ""
        return data.decode("utf-8", errors="replace")


class SingleTurnActionFormat:
    """Speaks the single-turn agent's language for scripted policies: a reply holding code.

    The agent runs no commands, so ``command`` is refused; the oracle uses ``solution`` with the
    task's reference solution file instead (``ares.agents.base.SolutionFormat``).
    """

    def solution(self, code: str) -> LLMResponse:
        """A reply whose only block is ``code``, fenced longer than any backtick run inside it."""
        longest = max((len(run) for run in re.findall(r"`+", code)), default=0)
        fence = "`" * max(3, longest + 1)
        return LLMResponse(content=f"{fence}python\n{code.rstrip(chr(10))}\n{fence}\n")

    def command(self, command: str) -> LLMResponse:
        raise PolicyError(
            "the single-turn agent runs no commands; answer it with the solution's code "
            "(SingleTurnActionFormat.solution) or use the bash or tool agent"
        )

    def submit(self) -> LLMResponse:
        """An empty reply: the agent writes nothing and the episode is verified as it stands."""
        return LLMResponse(content="")


class SingleTurnAgentFactory:
    """Builds one SingleTurnAgent per episode, all sharing one config."""

    def __init__(self, config: SingleTurnAgentConfig | None = None) -> None:
        self.config = config if config is not None else SingleTurnAgentConfig()
        self.action_format: SingleTurnActionFormat = SingleTurnActionFormat()

    def __call__(self, *, sandbox: Sandbox, llm: LLMClient, task: Task) -> SingleTurnAgent:
        return SingleTurnAgent(sandbox, llm, task, self.config)
