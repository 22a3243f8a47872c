"""Help texts and messages of ``ares`` come out as written: nothing is read as Rich console markup.

Bracketed text is common here (``os/arch[/variant]``, ``oci:PATH[:TAG]``, ``pip install
'ares[docker]'``, exception texts): read as markup it is swallowed (``[docker]``) or crashes the
command (``[/variant]`` closes no tag).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from ares.cli import doctor as doctor_cli
from ares.cli.common import fail
from ares.cli.main import app
from ares.doctor import report
from ares.doctor.check import Check

runner = CliRunner()
#: The SDKs the doctor imports in a child process; each is installed by the ARES extra of its name.
SHADOWED = ("docker", "daytona", "e2b")
BROKEN = "broken on purpose [/x] [bold]not bold[/bold]"


def commands(command: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    """Every command of the tree, with the words that name it under ``ares``."""
    yield path, command
    for name, sub in getattr(command, "commands", {}).items():
        yield from commands(sub, (*path, name))


ALL_COMMANDS = list(commands(typer.main.get_command(app)))


def squeezed(text: str) -> str:
    """``text`` without whitespace: line wrapping (which may also break after a hyphen) is not a change."""
    return "".join(text.split())


def test_the_tree_has_every_command_group() -> None:
    names = {" ".join(path) for path, _ in ALL_COMMANDS}
    assert {"run", "doctor", "images pull", "images build", "tasks validate", "sandboxes gc"} <= names
    assert len(names) >= 20


@pytest.mark.parametrize("path", [path for path, _ in ALL_COMMANDS], ids=lambda p: " ".join(p) or "ares")
def test_every_help_renders_its_texts_literally(path: tuple[str, ...]) -> None:
    command = dict(ALL_COMMANDS)[path]
    result = runner.invoke(app, [*path, "--help"])
    assert result.exception is None and result.exit_code == 0, result.output
    shown = squeezed(result.stdout)
    assert shown.startswith("Usage:")
    texts = [command.help or "", command.epilog or ""]
    texts += [getattr(param, "help", None) or "" for param in command.params]
    for text in texts:
        assert squeezed(text) in shown, text


def test_images_pull_help_keeps_its_brackets() -> None:
    result = runner.invoke(app, ["images", "pull", "--help"])
    assert result.exit_code == 0, result.output
    assert "os/arch[/variant]" in result.stdout and "oci:PATH[:TAG]" in result.stdout


def test_a_group_lists_each_command_with_its_whole_first_sentence() -> None:
    result = runner.invoke(app, ["--help"])
    assert result.exit_code == 0
    assert squeezed("Datasets of a Harbor registry (for `ares run harbor --dataset`).") in squeezed(
        result.stdout
    )
    assert "..." not in result.stdout.partition("Commands:")[2]


def failing_checks() -> list[Check]:
    return [
        Check(
            "docker-sdk",
            False,
            f"the docker SDK does not import: ImportError: {BROKEN}",
            "pip install 'ares[docker]'",
        ),
        Check("daytona-sdk", False, "the daytona SDK is not installed", "pip install 'ares[daytona]'"),
        Check("e2b-sdk", False, "the e2b SDK is not installed", "pip install 'ares[e2b]'"),
    ]


def test_the_doctor_report_shows_remedies_with_brackets(capsys: pytest.CaptureFixture[str]) -> None:
    doctor_cli._print(report.assess(failing_checks(), root=True))
    out = capsys.readouterr().out
    for extra in SHADOWED:
        assert f"'ares[{extra}]'" in out
    assert "  pip install 'ares[docker,daytona,e2b]'\n" in out
    assert "[/x]" in squeezed(out) and "[bold]not" in squeezed(out)


def shadowing(tmp_path: Path) -> dict[str, str]:
    """An environment in which the doctor's import probes find SDKs that fail to import, with brackets
    in the error, and the cloud API keys are set (so the cloud SDKs are imported at all)."""
    shadow = tmp_path / "shadow"
    for module in SHADOWED:
        (shadow / module).mkdir(parents=True)
        (shadow / module / "__init__.py").write_text(f"raise ImportError({BROKEN!r})\n")
    path = os.pathsep.join(filter(None, [str(shadow), os.environ.get("PYTHONPATH")]))
    return {"PYTHONPATH": path, "DAYTONA_API_KEY": "test-key", "E2B_API_KEY": "test-key"}


def test_ares_doctor_prints_its_remedies_literally(tmp_path: Path) -> None:
    env = shadowing(tmp_path)
    result = runner.invoke(app, ["doctor"], env=env)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    out = result.stdout
    for extra in SHADOWED:
        assert f"'ares[{extra}]'" in out, out
    assert "  pip install 'ares[docker,daytona,e2b]'\n" in out
    assert "[/x]" in squeezed(out)

    as_json = runner.invoke(app, ["doctor", "--json"], env=env)
    data = json.loads(as_json.stdout)
    assert "pip install 'ares[docker,daytona,e2b]'" in data["install"]
    assert {data["checks"][f"{m}-sdk"]["fix"] for m in SHADOWED} == {
        f"pip install 'ares[{e}]'" for e in SHADOWED
    }
    assert BROKEN in data["checks"]["docker-sdk"]["detail"]


def invoke(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """``ares ARGS`` through the entry point itself (its one-line errors), in this process."""
    with pytest.raises(SystemExit) as exited:
        app(args=list(args), prog_name="ares")
    captured = capsys.readouterr()
    return int(exited.value.code or 0), captured.out, captured.err


def error_line(err: str) -> str:
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    return lines[0]


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["run", "harbor", "--path", "/nonexistent[/x]"], "--path /nonexistent[/x] is not a directory"),
        (["run", "humaneval", "--[/x]"], "No such option: --[/x]"),
        (
            ["images", "pull", "--platform", "linux", "x"],
            "--platform expects os/arch[/variant] (e.g. linux/arm64/v8)",
        ),
        (["images", "pull", "oci:/nonexistent[bold]/[/x]"], "/nonexistent[bold]/[/x]"),
    ],
    ids=["run path", "usage error", "pull platform", "pull reference"],
)
def test_error_lines_keep_their_brackets(
    capsys: pytest.CaptureFixture[str], args: list[str], expected: str
) -> None:
    code, _out, err = invoke(capsys, *args)
    assert code == 2 and expected in error_line(err)


def test_the_common_error_helper_prints_brackets_literally(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(typer.Exit):
        raise fail(f"cannot start: {BROKEN}\n:thumbs_up: see ares[docker]")
    assert capsys.readouterr().err == f"error: cannot start: {BROKEN} :thumbs_up: see ares[docker]\n"


def test_no_cli_module_prints_through_a_markup_console() -> None:
    """New output code uses ``plain_console``; a ``Console(`` of its own would read markup again."""
    source = Path(doctor_cli.__file__).parent
    offenders = [
        p.name
        for p in source.glob("*.py")
        if re.search(r"\bConsole\(", p.read_text()) and p.name != "common.py"
    ]
    assert offenders == []
