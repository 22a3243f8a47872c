"""The fenced code blocks of README.md and docs/**/*.md, read the way tests/test_docs_blocks.py checks them.

The marker convention (an HTML comment, invisible on GitHub, on the last non-blank line before a fence):

- ```` ```python ```` runs as written, in a subprocess, from an empty temporary directory, offline.
- ``<!-- fragment: WHY -->`` before a ```` ```python ```` block: it is a fragment (it needs torch, a
  GPU, an API key, a registry or the network, or names objects it does not define), so it is only
  compiled (top-level ``await`` allowed). WHY is required: the reader learns what the block needs.
- ``<!-- file: NAME -->`` before a block: the block is the content of file NAME, which commands of
  the same document use (tests/test_docs_blocks.py runs those commands against it).
- Every ``ares ...`` invocation in a ``bash``/``sh`` block, and every line of any other block that
  starts with ``ares `` or ``$ ares``, must name real subcommands and options of the CLI; none is run.
"""

from __future__ import annotations

import functools
import os
import re
import shlex
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import ares

ROOT = Path(__file__).resolve().parents[1]
DOCS = (ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md")))

_OPEN = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})(?P<info>[^`]*)$")
_MARKER = re.compile(r"^\s*<!--\s*(?P<kind>fragment|file)\s*:\s*(?P<value>.*?)\s*-->\s*$")
_SHELL = frozenset({"bash", "sh", "shell", "console"})
_OPERATORS = frozenset({"&&", "||", "|", ";", "&", "(", ")", ";;"})


@dataclass(frozen=True, slots=True)
class Block:
    """One fenced block: where it is, its language (the info string's first word), its marker."""

    path: Path
    line: int  # of the opening fence, 1-based
    language: str
    body: str
    marker: str | None = None  # "fragment" or "file"
    marker_value: str = ""

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def read_blocks(path: Path) -> list[Block]:
    """The fenced blocks of one Markdown file (CommonMark fences; a list item's indent is removed)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    blocks: list[Block] = []
    index = 0
    while index < len(lines):
        opened = _OPEN.match(lines[index])
        if opened is None:
            index += 1
            continue
        fence, indent = opened["fence"], len(opened["indent"])
        close = re.compile(rf"^[ \t]*{re.escape(fence[0])}{{{len(fence)},}}[ \t]*$")
        end = index + 1
        while end < len(lines) and not close.match(lines[end]):
            end += 1
        body = "\n".join(
            line[indent:] if line[:indent].isspace() else line for line in lines[index + 1 : end]
        )
        before = next((lines[i] for i in range(index - 1, -1, -1) if lines[i].strip()), "")
        marked = _MARKER.match(before)
        blocks.append(
            Block(
                path, index + 1, (opened["info"].split() or [""])[0].lower(), body + "\n",
                marked["kind"] if marked else None, marked["value"] if marked else "",
            )
        )  # fmt: skip
        index = end + 1
    return blocks


ALL_BLOCKS = [block for path in DOCS for block in read_blocks(path)]


def command_lines(block: Block) -> list[str]:
    """The shell lines of a block that a reader would type (continuations joined, prompts removed)."""
    text = block.body.replace("\\\n", " ")
    typed = []
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("$ "):
            typed.append(stripped[2:])
        elif (block.language in _SHELL and block.language != "console") or stripped.startswith("ares "):
            typed.append(stripped)
    return typed


def ares_commands(line: str) -> list[list[str]]:
    """The argument lists of the ``ares`` invocations on one shell line (``.venv/bin/ares`` too)."""
    lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    tokens = list(lexer)
    found: list[list[str]] = []
    segment: list[str] = []
    for token in [*tokens, ";"]:
        if token not in _OPERATORS:
            segment.append(token)
            continue
        words = [w for w in segment if not re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", w)] if segment else []
        if words and Path(words[0]).name == "ares":
            found.append(words[1:])
        segment = []
    return found


def block_env() -> dict[str, str]:
    """The environment a runnable block gets: this checkout's ``ares`` first, no network wanted."""
    env = dict(os.environ)
    source = str(Path(ares.__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join([source, *filter(None, [env.get("PYTHONPATH")])])
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", HF_DATASETS_OFFLINE="1")
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "DAYTONA_API_KEY", "E2B_API_KEY"):
        env.pop(name, None)
    return env


@functools.cache
def run_block(block: Block, timeout_s: float = 180) -> subprocess.CompletedProcess[str]:
    """Run a block once per test session (README tests and the docs test share the result)."""
    with tempfile.TemporaryDirectory(prefix="ares-doc-block-", ignore_cleanup_errors=True) as cwd:
        return subprocess.run(
            [sys.executable, "-c", block.body], capture_output=True, text=True, timeout=timeout_s,
            cwd=cwd, env=block_env(), check=False,
        )  # fmt: skip
