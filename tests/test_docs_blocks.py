"""The code blocks of README.md and docs/**/*.md do what the docs say: runnable Python runs, fragments
compile, ``ares`` commands name real subcommands and options, and documented files work.

How a doc marks a block (the convention lives in tests/docs_blocks.py): a ```` ```python ```` block
runs unless the line before its fence is ``<!-- fragment: WHY -->``; ``<!-- file: NAME -->`` makes a
block the content of file NAME, and the document's ``ares`` commands that name that file are run
against it (a trailing ``# reward X`` comment on such a line is checked too). A block that needs
torch, a GPU, an API key, a registry or the network, or objects the reader brings, is a fragment.
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import typer

from ares.cli.main import app
from docs_blocks import ALL_BLOCKS, Block, ares_commands, block_env, command_lines, run_block

PYTHON = [b for b in ALL_BLOCKS if b.language == "python"]
RUNNABLE = [b for b in PYTHON if b.marker is None]
FRAGMENTS = [b for b in PYTHON if b.marker == "fragment"]
WITH_COMMANDS = [b for b in ALL_BLOCKS if any(ares_commands(line) for line in command_lines(b))]
FILES = [b for b in ALL_BLOCKS if b.marker == "file"]
ROOT_COMMAND = typer.main.get_command(app)


def ids(blocks: list[Block]) -> list[str]:
    return [b.where for b in blocks]


def test_every_python_block_runs_or_says_why_it_is_a_fragment() -> None:
    assert RUNNABLE and FRAGMENTS and FILES  # the scan found the docs' blocks at all
    assert [b.where for b in PYTHON if b.marker not in (None, "fragment")] == []
    assert [b.where for b in FRAGMENTS if not b.marker_value] == []


@pytest.mark.parametrize("block", FRAGMENTS, ids=ids(FRAGMENTS))
def test_python_fragment_compiles(block: Block) -> None:
    compile(block.body, block.where, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT, dont_inherit=True)


@pytest.mark.parametrize("block", RUNNABLE, ids=ids(RUNNABLE))
def test_python_block_runs(block: Block) -> None:
    result = run_block(block)
    assert result.returncode == 0, f"{block.where}:\n{result.stderr}"
    assert "Traceback" not in result.stderr


def cli_problems(args: list[str]) -> list[str]:
    """What in ``ares ARGS`` the CLI does not know: an unknown subcommand or option. (Typer builds
    its own click objects: a group is a command with ``commands``.)"""
    command: Any = ROOT_COMMAND
    words = list(args)
    while getattr(command, "commands", None) and words and not words[0].startswith("-"):
        if words[0] not in command.commands:
            return [f"unknown command {words[0]!r} (of {sorted(command.commands)})"]
        command, words = command.commands[words[0]], words[1:]
    known = {name for p in command.params for name in (*p.opts, *p.secondary_opts)}
    known |= set(command.get_help_option_names(command.context_class(command)))
    problems = []
    for word in words:
        if word == "--":
            break
        name = word.split("=", 1)[0]
        if word.startswith("-") and not re.fullmatch(r"-[\d.:]*", word) and name not in known:
            problems.append(f"{command.name}: no option {name}")
    return problems


def test_cli_problems_sees_unknown_commands_and_options() -> None:
    assert cli_problems(["run", "humaneval", "--policy", "oracle", "-c", "2", "--tasks=0:2"]) == []
    assert cli_problems(["images", "pull", "python:3.12-slim"]) == []
    assert cli_problems(["run", "humaneval", "--polcy", "x"]) == ["run: no option --polcy"]
    assert cli_problems(["imgs", "list"])[0].startswith("unknown command 'imgs'")


@pytest.mark.parametrize("block", WITH_COMMANDS, ids=ids(WITH_COMMANDS))
def test_ares_commands_in_docs_name_real_commands_and_options(block: Block) -> None:
    problems = [
        f"{line!r}: {problem}"
        for line in command_lines(block)
        for args in ares_commands(line)
        for problem in cli_problems(args)
    ]
    assert problems == [], block.where


def documented_runs(file_block: Block) -> list[tuple[list[str], float | None]]:
    """The ``ares`` commands of the file's document that name the file, with the reward they claim."""
    runs = []
    for block in (b for b in ALL_BLOCKS if b.path == file_block.path):
        for line in command_lines(block):
            claimed = re.search(r"#\s*reward ([\d.]+)", line)
            for args in ares_commands(line):
                if file_block.marker_value in args:
                    runs.append((args, float(claimed[1]) if claimed else None))
    return runs


@pytest.mark.parametrize("block", FILES, ids=ids(FILES))
def test_documented_file_works_with_the_documents_commands(block: Block, tmp_path: Path) -> None:
    if block.language == "jsonl":
        assert all(isinstance(json.loads(line), dict) for line in block.body.splitlines() if line.strip())
    (tmp_path / block.marker_value).write_text(block.body)
    runs = documented_runs(block)
    assert runs, f"{block.where}: no ares command of the document uses {block.marker_value}"
    for number, (args, reward) in enumerate(runs):
        out = tmp_path / f"out{number}"
        result = subprocess.run(
            [sys.executable, "-m", "ares.cli.main", *args, "--out", str(out)], capture_output=True,
            text=True, timeout=300, cwd=tmp_path, env=block_env(), check=False,
        )  # fmt: skip
        assert result.returncode == 0, f"ares {' '.join(args)}:\n{result.stderr}"
        records = [json.loads(p.read_text()) for p in sorted((out / "episodes").glob("*.json"))]
        assert records and {r["status"] for r in records} == {"finished"}
        if reward is not None:
            assert [r["reward"] for r in records] == [reward] * len(records), args
