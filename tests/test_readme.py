"""What the README claims beyond "its blocks run" (tests/test_docs_blocks.py runs them): the Python
example prints what it says, and the local-model command is the one docs/benchmarks.md measured."""

from __future__ import annotations

from pathlib import Path

from docs_blocks import ALL_BLOCKS, ROOT, ares_commands, command_lines, run_block

README = ROOT / "README.md"
BENCHMARKS = ROOT / "docs" / "benchmarks.md"


def commands_in(path: Path, *, policy: str) -> list[list[str]]:
    """The ``ares run`` argument lists in ``path``'s blocks that pass ``--policy POLICY``."""
    return [
        args
        for block in ALL_BLOCKS
        if block.path == path
        for line in command_lines(block)
        for args in ares_commands(line)
        if args[:1] == ["run"] and "--policy" in args and args[args.index("--policy") + 1] == policy
    ]


def test_readme_python_example_runs_one_episode_to_a_pass() -> None:
    (block,) = [b for b in ALL_BLOCKS if b.path == README and b.language == "python"]
    result = run_block(block)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "finished 1.0"


def without(args: list[str], *options: str) -> list[str]:
    """``args`` with each of ``options`` and its value left out."""
    kept: list[str] = []
    skip = False
    for word in args:
        if skip:
            skip = False
        elif word in options:
            skip = True
        else:
            kept.append(word)
    return kept


def test_readme_local_model_command_is_the_measured_one() -> None:
    """The README quotes the benchmark's pass count and time: its command must be the one measured,
    up to ``-n 164`` (the default, one episode per task) and where the records go."""
    (readme,) = commands_in(README, policy="local")
    measured = [args for args in commands_in(BENCHMARKS, policy="local") if "164" in args]
    assert measured, "docs/benchmarks.md no longer holds the 164-task local-model run"
    assert without(readme, "--out") == without(measured[0], "-n", "--out")
