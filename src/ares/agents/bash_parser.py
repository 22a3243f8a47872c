"""Turns a model reply into the one shell command it asks for.

The action language is Markdown: a short thought and exactly one fenced block labelled ``bash``
(``sh`` and ``shell`` are accepted too, case-insensitively). Fences follow CommonMark: an opening
line of three or more backticks (indented by at most three spaces) with an optional info string,
closed by a line of at least as many backticks. A command that itself contains a line of three
backticks is therefore sent inside a longer fence (````bash ... ````).

Bare ``` blocks and blocks in other languages are never run: models use them to quote files and
output in their thoughts, and guessing which one is "the command" would make actions ambiguous.
When a reply has no shell block but does have a bare one, the error says to label it ``bash``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ares.errors import AgentError

#: Languages of a fenced block whose content is run as a command.
SHELL_LANGUAGES = frozenset({"bash", "sh", "shell"})

_OPEN = re.compile(r"^(?P<indent> {0,3})(?P<fence>`{3,})(?P<info>[^`]*)$")
_CLOSE = re.compile(r"^ {0,3}(?P<fence>`{3,})[ \t]*$")
_HOW = "Reply with a short thought followed by exactly one ```bash block holding the command to run."


class FormatError(AgentError):
    """A reply did not contain exactly one usable shell block; the message tells the model why."""


@dataclass(frozen=True, slots=True)
class CodeBlock:
    """One fenced block: ``language`` is the info string's first word, lowercased ("" if bare)."""

    language: str
    body: str
    closed: bool


def code_blocks(text: str) -> list[CodeBlock]:
    """Every top-level fenced block of ``text``, in order. Fences inside a block are its content."""
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    blocks: list[CodeBlock] = []
    i = 0
    while i < len(lines):
        opening = _OPEN.match(lines[i])
        i += 1
        if opening is None:
            continue
        width, indent = len(opening["fence"]), len(opening["indent"])
        info = opening["info"].split()
        body: list[str] = []
        closed = False
        while i < len(lines):
            line = lines[i]
            i += 1
            closing = _CLOSE.match(line)
            if closing is not None and len(closing["fence"]) >= width:
                closed = True
                break
            # CommonMark: content loses up to as many leading spaces as the opening fence had.
            body.append(line[min(indent, len(line) - len(line.lstrip(" "))) :])
        blocks.append(CodeBlock(info[0].lower() if info else "", "\n".join(body), closed))
    return blocks


def parse_action(text: str) -> str:
    """The command in the reply's single shell block, stripped of surrounding whitespace.

    Raises FormatError when there is no shell block, more than one, or the one is unclosed or empty.
    """
    blocks = code_blocks(text)
    shell = [block for block in blocks if block.language in SHELL_LANGUAGES]
    if not shell:
        if any(block.language == "" for block in blocks):
            raise FormatError(
                "Your reply has a code block without a language, which is never run. "
                f"Label the command's block ```bash. {_HOW}"
            )
        raise FormatError(f"Your reply has no ```bash block, so there was nothing to run. {_HOW}")
    if len(shell) > 1:
        raise FormatError(
            f"Your reply has {len(shell)} ```bash blocks; only one command runs per reply. "
            f"Join the steps into one command (with && or a script) or run them over several replies. {_HOW}"
        )
    block = shell[0]
    if not block.closed:
        raise FormatError(
            "Your ```bash block is never closed: end it with a line of backticks as long as the opening "
            f"fence. If your reply was cut off, keep the thought shorter. {_HOW}"
        )
    command = block.body.strip()
    if not command:
        raise FormatError(f"Your ```bash block is empty. {_HOW}")
    return command
