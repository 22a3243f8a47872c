"""Every configuration mistake of ``ares run`` is one line on stderr, exit code 2, naming the fix.

The command runs in-process through the real entry point (``app(args=...)``, the same object the
``ares`` script calls), so Typer's own usage errors go through the one-line formatting too.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ares.cli import main as cli_main
from ares.cli.common import fail
from ares.cli.main import app
from ares.sandbox.backends import UnknownBackendError

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
HARBOR = str(FIXTURES / "harbor")


def invoke(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exited:
        app(args=list(args), prog_name="ares")
    captured = capsys.readouterr()
    return int(exited.value.code or 0), captured.out, captured.err


def run_options() -> set[str]:
    command = __import__("typer").main.get_command(app).commands["run"]  # type: ignore[attr-defined]
    return {"--help"} | {opt for param in command.params for opt in (*param.opts, *param.secondary_opts)}


CASES = {
    "unknown preset": (["run", "nope"], "unknown preset 'nope'; available presets: humaneval, harbor"),
    "unknown policy": (["run", "humaneval", "-p", "nope"], "choose one of: oracle, null, scripted, openai"),
    "task index": (["run", "humaneval", "--tasks", "999"], "task index 999 is out of range (0..163)"),
    "task slice": (["run", "humaneval", "--tasks", "5:x"], "use START:STOP[:STEP]"),
    "task id": (["run", "humaneval", "--tasks", "nope_1"], "ids look like: humaneval_0"),
    "shard range": (["run", "humaneval", "--shard", "3/2"], "need 0 <= INDEX < COUNT"),
    "shard syntax": (["run", "humaneval", "--shard", "x"], "use INDEX/COUNT, e.g. 0/4"),
    "empty selection": (["run", "humaneval", "--tasks", "5:5"], "the task selection '5:5' matches none of"),
    "empty shard": (
        ["run", "humaneval", "--tasks", "0:2", "--shard", "3/4"],
        "the task selection '0:2' with shard '3/4' matches none of the 164 tasks",
    ),
    "backend": (["run", "humaneval", "--sandbox", "vmware"], "choose one of: local, docker, daytona, e2b"),
    "daytona credentials": (["run", "humaneval", "--sandbox", "daytona"], "export DAYTONA_API_KEY="),
    "e2b credentials": (["run", "humaneval", "--sandbox", "e2b"], "export E2B_API_KEY="),
    "openai model": (["run", "humaneval", "-p", "openai"], "pass --model NAME"),
    "openai key": (["run", "humaneval", "-p", "openai", "--model", "gpt-4o"], "set OPENAI_API_KEY (or name"),
    "openai url": (
        ["run", "humaneval", "-p", "openai", "--model", "m", "--base-url", "localhost:8000"],
        "base_url must be an http(s) URL",
    ),
    "openai host": (
        ["run", "humaneval", "-p", "openai", "--model", "m", "--base-url", "http://no-such-host.invalid/v1"],
        "cannot resolve host 'no-such-host.invalid'",
    ),
    "api key env": (
        ["run", "humaneval", "-p", "openai", "--model", "m", "--api-key-env", "ARES_TEST_NO_SUCH_KEY"],
        "$ARES_TEST_NO_SUCH_KEY is not set (or empty); export ARES_TEST_NO_SUCH_KEY=",
    ),
    "openai option elsewhere": (
        ["run", "humaneval", "--model", "m"],
        "--model applies to --policy openai only",
    ),
    "openai options elsewhere": (
        ["run", "humaneval", "--temperature", "0.5", "--max-tokens", "9", "--timeout", "3"],
        "--max-tokens, --temperature, --timeout apply to --policy openai only",
    ),
    "scripted without script": (["run", "humaneval", "-p", "scripted"], "needs --script FILE.jsonl"),
    "script missing": (
        ["run", "humaneval", "-p", "scripted", "--script", "/nonexistent.jsonl"],
        "/nonexistent.jsonl does not exist (pass --script FILE.jsonl",
    ),
    "script elsewhere": (
        ["run", "humaneval", "--script", "x.jsonl"],
        "--script applies to --policy scripted",
    ),
    "harbor without path": (
        ["run", "harbor"],
        "the harbor preset needs a dataset: --path DIR or --dataset NAME@VERSION",
    ),
    "harbor bad path": (
        ["run", "harbor", "--path", "/nonexistent"],
        "--path /nonexistent is not a directory",
    ),
    "harbor broken task": (
        ["run", "harbor", "--path", str(FIXTURES / "harbor_broken" / "bad-toml")],
        "task.toml",
    ),
    "path elsewhere": (
        ["run", "humaneval", "--path", HARBOR],
        "--path applies to the harbor and swebench presets (harbor, harbor-*, swebench, swebench-*) only",
    ),
    "verifier mode": (
        ["run", "harbor", "--path", HARBOR, "--verifier-mode", "bogus"],
        "--verifier-mode must be one of: outputs, full, in-place; got 'bogus'",
    ),
    "trace": (
        ["run", "humaneval", "--rollout-trace", "loud"],
        "--rollout-trace must be one of: off, basic, full",
    ),
    "resume": (["run", "humaneval", "--resume"], "--resume needs --out DIR"),
    "groups": (
        ["run", "humaneval", "-n", "5", "--group-size", "2"],
        "-n 5 is not a multiple of --group-size 2",
    ),
    "bad value": (["run", "humaneval", "-c", "0"], "Invalid value for '--concurrency' / '-c'"),
    "bad number": (
        ["run", "humaneval", "-p", "openai", "--temperature", "hot"],
        "Invalid value for '--temperature'",
    ),
    "unknown option": (["run", "humaneval", "--bogus"], "No such option: --bogus"),
    "missing preset": (["run"], "Missing argument"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_configuration_mistakes_are_one_line_exit_2(
    case: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("OPENAI_API_KEY", "OPENAI_MODEL", "OPENAI_BASE_URL", "ARES_TEST_NO_SUCH_KEY", "E2B_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    for name in ("DAYTONA_API_KEY", "DAYTONA_JWT_TOKEN", "DAYTONA_ORGANIZATION_ID"):
        monkeypatch.delenv(name, raising=False)
    args, expected = CASES[case]
    code, out, err = invoke(capsys, *args)
    assert code == 2, (out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert expected in lines[0]
    assert "Traceback" not in err + out and out == ""
    # Every option a message names exists (messages used to say "--option script=...").
    named = set(re.findall(r"(?<![\w-])--[a-z][a-z-]+", lines[0])) - set(args)
    assert named <= run_options(), named - run_options()


def test_a_docker_backend_without_an_engine_fails_at_start(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    pytest.importorskip("docker")
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")
    code, _out, err = invoke(capsys, "run", "humaneval", "--tasks", "0", "--sandbox", "docker")
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "cannot reach a Docker API engine" in err and "DOCKER_HOST" in err


def test_install_hints_keep_their_brackets(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def missing(name: str) -> None:
        raise UnknownBackendError(f"the {name} sandbox backend needs: pip install 'ares[{name}]' (No module)")

    monkeypatch.setattr(cli_main, "make_sandbox_factory", missing)
    code, _out, err = invoke(capsys, "run", "humaneval", "--tasks", "0", "--sandbox", "docker")
    assert code == 2 and "pip install 'ares[docker]'" in err
    with pytest.raises(Exception):  # noqa: B017 - typer.Exit
        raise fail("pip install 'ares[parquet]' or ares[hf]\n(second line)")
    err = capsys.readouterr().err
    assert err == "error: pip install 'ares[parquet]' or ares[hf] (second line)\n"


def test_no_source_hint_names_the_old_option_syntax() -> None:
    source = Path(cli_main.__file__).resolve().parents[1]
    offenders = [p for p in source.rglob("*.py") if "--option" in p.read_text()]
    assert offenders == []


def test_an_empty_selection_without_a_shard_does_not_mention_one(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = invoke(capsys, "run", "humaneval", "--tasks", "5:5")
    assert code == 2
    assert err.strip() == "error: the task selection '5:5' matches none of the 164 tasks"
