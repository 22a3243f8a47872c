"""The terminal agent's action language: a JSON reply of keystrokes, and how keystrokes become keys.

A reply is one JSON object (bare, or in one ```json block, or with text around it)::

    {"analysis": "...", "plan": "...",
     "commands": [{"keystrokes": "ls -la\\n", "duration": 0.5}],
     "task_complete": false}

``commands`` run in order; each is typed, then the agent waits ``duration`` seconds (default 1, bounded
by the agent's limit). A command may add ``"wait_for": TEXT``: the wait then ends as soon as TEXT
appears in the terminal's new output (``duration`` is the most it waits). ``task_complete: true``
ends the run after the commands of the same reply have run.

The keys rule: a ``keystrokes`` string that is exactly one key name (``SPECIAL_KEY``: ``C-c``,
``C-d``, ``M-b``, ``Enter``, ``Escape``, ``Tab``, ``Up``, ``PageDown``, ``F5``, ...) presses that key;
any other string is typed literally, each newline pressed as Enter. So ``"C-c"`` interrupts and
``"echo C-c\\n"`` types the text.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ares.agents.bash_parser import FormatError, code_blocks

#: Named tmux keys a ``keystrokes`` string may consist of, optionally with C-/M-/S- modifiers.
_NAMED_KEYS = (
    "Enter|Escape|Tab|BTab|BSpace|Space|Up|Down|Left|Right|Home|End|IC|DC|Insert|Delete|"
    "PageUp|PageDown|PgUp|PgDn|PPage|NPage|F[1-9]|F1[0-2]"
)
#: The whole-string pattern of a special key: a named key, or a modified single character (C-c).
SPECIAL_KEY = re.compile(rf"(?:(?:[CMS]-)*(?:{_NAMED_KEYS})|(?:[CMS]-)+[!-~])")
#: Default seconds to wait after a command that gives no duration.
DEFAULT_DURATION_S = 1.0
_FIELDS = ("analysis", "plan", "commands", "task_complete")
_HOW = (
    'Reply with one JSON object: {"analysis": "...", "plan": "...", "commands": '
    '[{"keystrokes": "ls -la\\n", "duration": 0.5}], "task_complete": false}.'
)


@dataclass(frozen=True, slots=True)
class Key:
    """One tmux send: ``text`` typed literally, or (``literal`` False) the key named ``text``."""

    text: str
    literal: bool


@dataclass(frozen=True, slots=True)
class Command:
    """Keystrokes to send, how long to wait after them, and optionally what ends the wait early."""

    keystrokes: str
    duration_s: float = DEFAULT_DURATION_S
    wait_for: str | None = None

    def keys(self) -> list[Key]:
        return keys_of(self.keystrokes)

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"keystrokes": self.keystrokes, "duration": self.duration_s}
        if self.wait_for is not None:
            data["wait_for"] = self.wait_for
        return data


@dataclass(frozen=True, slots=True)
class Reply:
    """A parsed reply: the commands to run and whether the model is done."""

    commands: tuple[Command, ...]
    task_complete: bool
    analysis: str = ""
    plan: str = ""

    def to_json(self) -> str:
        """The reply as a model would write it (what the action formats send)."""
        return json.dumps(
            {
                "analysis": self.analysis,
                "plan": self.plan,
                "commands": [command.to_json() for command in self.commands],
                "task_complete": self.task_complete,
            },
            indent=2,
        )


def keys_of(keystrokes: str) -> list[Key]:
    """The tmux sends for ``keystrokes`` under the keys rule (module doc)."""
    if SPECIAL_KEY.fullmatch(keystrokes):
        return [Key(keystrokes, literal=False)]
    keys: list[Key] = []
    lines = keystrokes.replace("\r\n", "\n").split("\n")
    for index, line in enumerate(lines):
        if line:
            keys.append(Key(line, literal=True))
        if index < len(lines) - 1:
            keys.append(Key("Enter", literal=False))
    return keys


def parse_reply(text: str | None) -> Reply:
    """The reply's commands; ``FormatError`` (a message the model can act on) when it does not fit."""
    if text is None or not text.strip():
        raise FormatError(f"Your reply was empty. {_HOW}")
    data = _json_object(text)
    commands = data.get("commands", [])
    if not isinstance(commands, list):
        raise FormatError(f'"commands" must be a list of objects, got {_kind(commands)}. {_HOW}')
    complete = data.get("task_complete", False)
    if not isinstance(complete, bool):
        raise FormatError(f'"task_complete" must be true or false, got {_kind(complete)}. {_HOW}')
    for name in ("analysis", "plan"):
        if not isinstance(data.get(name, ""), str):
            raise FormatError(f'"{name}" must be a string, got {_kind(data[name])}. {_HOW}')
    parsed = tuple(_command(index, item) for index, item in enumerate(commands))
    if not parsed and not complete:
        raise FormatError(
            'Your reply has no commands and "task_complete" is false, so nothing would happen. '
            'To only wait, send {"keystrokes": "", "duration": 5}. ' + _HOW
        )
    return Reply(parsed, complete, data.get("analysis", ""), data.get("plan", ""))


def _json_object(text: str) -> Mapping[str, Any]:
    """The reply's JSON object: its one ```json block, else the text from its first { to its last }."""
    blocks = [block.body for block in code_blocks(text) if block.language in ("json", "")]
    candidate = blocks[0] if len(blocks) == 1 else text
    start, end = candidate.find("{"), candidate.rfind("}")
    if start < 0 or end < start:
        raise FormatError(f"Your reply has no JSON object. {_HOW}")
    try:
        data = json.loads(candidate[start : end + 1])
    except json.JSONDecodeError as error:
        raise FormatError(f"Your reply's JSON does not parse ({error}). {_HOW}") from None
    if not isinstance(data, dict):
        raise FormatError(f"Your reply's JSON must be an object, got {_kind(data)}. {_HOW}")
    if not any(name in data for name in _FIELDS):
        raise FormatError(f"Your reply's JSON object has none of the fields {', '.join(_FIELDS)}. {_HOW}")
    return data


def _command(index: int, item: object) -> Command:
    where = f"commands[{index}]"
    if not isinstance(item, dict):
        raise FormatError(f'{where} must be an object with "keystrokes", got {_kind(item)}. {_HOW}')
    keystrokes = item.get("keystrokes")
    if not isinstance(keystrokes, str):
        raise FormatError(f'{where} needs "keystrokes" as a string, got {_kind(keystrokes)}. {_HOW}')
    if "\0" in keystrokes:
        raise FormatError(f"{where}'s keystrokes contain a NUL character, which a terminal cannot be sent.")
    duration = item.get("duration", DEFAULT_DURATION_S)
    if isinstance(duration, bool) or not isinstance(duration, int | float) or not math.isfinite(duration):
        raise FormatError(f'{where}\'s "duration" must be a number of seconds, got {_kind(duration)}.')
    if duration < 0:
        raise FormatError(f'{where}\'s "duration" must not be negative, got {duration}.')
    wait_for = item.get("wait_for")
    if wait_for is not None and (not isinstance(wait_for, str) or not wait_for.strip()):
        raise FormatError(f'{where}\'s "wait_for" must be a non-empty string, got {_kind(wait_for)}.')
    return Command(keystrokes, float(duration), wait_for)


def _kind(value: object) -> str:
    """How an error shows a wrong value: scalars as JSON, containers by kind."""
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return json.dumps(value)[:60]
