"""``direct_argv`` (the init's shortcut past bash) against ``bash -c`` itself.

The contract (``init/commands.py``): a command made only of plain words, whose first word is no shell
keyword or builtin, no assignment and no option, and names an executable file (by path, or found on
the request's PATH, looked up from the command's cwd, where the shepherd calls it) is exec'd
directly, with the environment bash would export to a command it execs in place; anything else is
refused (None) and goes to bash. So whatever it takes must print and exit as ``bash -c`` does, and
everything it refuses is shell syntax, a builtin, or not an executable.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from ares.sandbox.local import LocalSandbox
from ares.sandbox.local.init.commands import direct_argv

BASH = "/bin/bash"
pytestmark = pytest.mark.skipif(not os.access(BASH, os.X_OK), reason="needs bash")

PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
#: The sandbox's default environment (``sandbox.DEFAULT_ENV``), with a dir of test tools first.
BASE_ENV = {"HOME": "/root", "LANG": "C.UTF-8", "TERM": "dumb"}
TOOL = '#!/bin/sh\nprintf "%s|" "$0" "$@" "$_"; echo\n'


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A cwd with ``tool`` in ``bin/`` and in the dir itself, a file and a dir to list; the test
    process moves into it, as the shepherd does before it calls ``direct_argv``."""
    for path in (tmp_path / "bin" / "tool", tmp_path / "tool"):
        path.parent.mkdir(exist_ok=True)
        path.write_text(TOOL)
        path.chmod(0o755)
    (tmp_path / "data.txt").write_text("data\n")
    (tmp_path / "sub").mkdir()
    monkeypatch.chdir(tmp_path)
    return tmp_path


def env_with(workdir: Path, **extra: str) -> dict[str, str]:
    return {"PATH": f"{workdir}/bin:{PATH}", **BASE_ENV, **extra}


def direct(cmd: str, env: dict[str, str], cwd: Path | str) -> tuple[int, bytes] | None:
    """What the shepherd does with ``cmd`` (from the test's cwd, which is ``cwd``): None if
    ``direct_argv`` refuses it, else the exit code and stdout of its ``posix_spawn``."""
    assert os.path.samefile(os.getcwd(), cwd)
    spec = direct_argv({"cmd": cmd, "env": env, "cwd": str(cwd)})
    if spec is None:
        return None
    path, argv, full_env = spec
    out_r, out_w = os.pipe()
    actions = [(os.POSIX_SPAWN_OPEN, 0, "/dev/null", os.O_RDONLY, 0), (os.POSIX_SPAWN_DUP2, out_w, 1)]
    actions.append((os.POSIX_SPAWN_OPEN, 2, "/dev/null", os.O_WRONLY, 0))
    try:
        child = os.posix_spawn(path, argv, full_env, file_actions=actions, setsid=True)
    except OSError as exc:  # the shepherd answers exit code 126
        return 126, f"cannot start the command: {exc.strerror}".encode()
    finally:
        os.close(out_w)
    with os.fdopen(out_r, "rb") as out:
        stdout = out.read()
    return os.waitstatus_to_exitcode(os.waitpid(child, 0)[1]), stdout


def bash(cmd: str, env: dict[str, str], cwd: Path | str) -> tuple[int, bytes]:
    done = subprocess.run([BASH, "-c", cmd], env=env, cwd=cwd, capture_output=True)
    return done.returncode, done.stdout


def sorted_lines(result: tuple[int, bytes] | None) -> tuple[int, list[bytes]] | None:
    """An ``env`` listing compared as a set of lines: the order of environ is not part of the result."""
    return None if result is None else (result[0], sorted(result[1].splitlines()))


# ---------------------------------------------------------------------------- taken, same as bash
TAKEN = [
    "tool",
    "tool a b c",
    "  tool padded  ",
    "tool a=b --flag=value -x",
    "tool %s @at +plus ,comma :colon 1.5 a/b",
    "./tool from-cwd",
    "bin/tool by-relative-path",
    "ls -a sub",
    "ls data.txt sub",
    "cat data.txt",
    "cat missing-file",
    "/bin/cat data.txt",
    "env -u HOME printenv LANG",
    "sh -c true",
    "printenv _",
    "printenv PWD",
    "printenv SHLVL",
    "id -u",
]


@pytest.mark.parametrize("cmd", TAKEN)
def test_a_plain_command_runs_as_bash_would_run_it(workdir: Path, cmd: str) -> None:
    env = env_with(workdir)
    got = direct(cmd, env, workdir)
    assert got is not None, f"direct_argv refused {cmd!r}"
    assert got == bash(cmd, env, workdir)


@pytest.mark.parametrize(
    "extra",
    [{}, {"SHLVL": "3"}, {"SHLVL": "x"}, {"SHLVL": "-2"}, {"OLDPWD": "/"}, {"PWD": "/elsewhere"}],
    ids=["plain", "shlvl", "shlvl-junk", "shlvl-negative", "oldpwd", "stale-pwd"],
)
def test_the_environment_it_exports_matches_bash(workdir: Path, extra: dict[str, str]) -> None:
    env = env_with(workdir, **extra)
    assert sorted_lines(direct("env", env, workdir)) == sorted_lines(bash("env", env, workdir))


@pytest.mark.parametrize(
    "path", ["bin:{PATH}", "{PATH}:.", "{PATH}:{workdir}/bin"], ids=["relative", "dot", "later"]
)
def test_path_lookup_matches_bash(workdir: Path, path: str) -> None:
    env = {**BASE_ENV, "PATH": path.format(PATH=PATH, workdir=workdir)}
    for cmd in ("tool x", "env"):
        got = direct(cmd, env, workdir)
        assert got is not None, f"direct_argv refused {cmd!r} with PATH={path!r}"
        assert sorted_lines(got) == sorted_lines(bash(cmd, env, workdir))


# ---------------------------------------------------------------------------- refused: bash's job
REFUSED = {
    # builtins and keywords (an executable of the same name may exist; bash would not run it)
    "builtin": ["echo hi", "printf x", "cd sub", "pwd", "kill -0 1", "test -e data.txt", "type ls"],
    "exec": ["exec ls", "exec tool"],
    "keyword": ["time ls", "if true", "for x", "while true", "function f", "coproc ls", "[[ x"],
    "source": ["source data.txt", ". data.txt"],
    "assignment": ["A=1 env", "A=1", "PATH=/x ls"],
    # shell syntax anywhere in the line
    "quoting": ["ls 'sub'", 'ls "sub"', "ls s\\ub", "ls $'sub'"],
    "expansion": [
        "ls $HOME",
        "ls ${HOME}",
        "ls `pwd`",
        "ls $(pwd)",
        "ls ~",
        "ls ~/x",
        "ls {a,b}",
        "ls $((1))",
    ],
    "glob": ["ls *", "ls d?ta.txt", "ls [ds]*", "ls sub/*"],
    "redirection": ["ls > out", "ls >> out", "ls < data.txt", "ls 2>&1", "ls &> out", "cat <<<x"],
    "pipeline": ["ls | cat", "ls |& cat", "! ls"],
    "list": ["ls; ls", "ls && ls", "ls || ls", "ls &", "(ls)", "{ ls; }"],
    "comment": ["ls # note", "#ls"],
    "spacing": ["ls  sub", "ls\tsub", "ls\nls", ""],
    # not a command bash could exec
    "option": ["-ls", "--help"],
    "missing": ["no-such-command-xyz", "./no-such-file", "sub", "data.txt"],
}


@pytest.mark.parametrize(
    "cmd", [cmd for cmds in REFUSED.values() for cmd in cmds], ids=lambda c: repr(c)[1:-1][:40] or "empty"
)
def test_shell_syntax_builtins_and_non_executables_go_to_bash(workdir: Path, cmd: str) -> None:
    assert direct_argv({"cmd": cmd, "env": env_with(workdir), "cwd": str(workdir)}) is None


def test_a_relative_path_is_looked_up_from_the_commands_cwd(workdir: Path) -> None:
    """The shepherd calls ``direct_argv`` after entering the command's cwd: elsewhere, no ``./tool``."""
    os.chdir(workdir / "sub")
    assert direct_argv({"cmd": "./tool", "env": env_with(workdir), "cwd": str(workdir)}) is None


# ---------------------------------------------------------------------------- where it is not bash
def plant(workdir: Path, name: str, script: str = "#!/bin/sh\necho planted\n") -> None:
    path = workdir / "bin" / name
    path.write_text(script)
    path.chmod(0o755)


DIVERGES = [
    pytest.param("env", {}, "sub/", id="pwd-trailing-slash"),
    pytest.param("env", {}, "sub/../sub", id="pwd-dotdot"),
    pytest.param("env", {}, "link", id="pwd-through-symlink"),
    pytest.param("env", {"SHLVL": "999"}, ".", id="shlvl-too-high"),
    pytest.param("tool", {"BASH_ENV": "{workdir}/data.txt"}, ".", id="bash-env-file"),
    pytest.param("tool", {"BASH_FUNC_tool%%": "() {  echo function\n}"}, ".", id="exported-function"),
    pytest.param("noshebang", {}, ".", id="script-without-shebang"),
    pytest.param("fi", {}, ".", id="executable-named-like-a-keyword"),
    pytest.param("true", {}, ".", id="executable-shadowing-a-builtin"),
    pytest.param("tool", {"PATH": f":{PATH}"}, ".", id="empty-path-entry-argv0"),
]


@pytest.mark.parametrize(("cmd", "extra", "cwd"), DIVERGES)
def test_where_exec_in_place_would_differ_from_bash_bash_runs_it(
    workdir: Path, cmd: str, extra: dict[str, str], cwd: str
) -> None:
    """Each case would end differently if it were exec'd in place, so it is left to bash: the cwd as
    given (bash exports it resolved) in PWD, SHLVL past bash's reset, BASH_ENV and exported functions
    (bash reads them), a file without #! or ELF magic (bash runs it as a script), an executable named
    like a keyword or builtin, and a command found through an empty PATH entry (bash runs ``./tool``)."""
    (workdir / "link").symlink_to(workdir / "sub")
    plant(workdir, "noshebang", "echo ran-as-a-script\n")
    plant(workdir, "fi")
    plant(workdir, "true")
    (workdir / "data.txt").write_text("echo from-bash-env\n")
    env = env_with(workdir, **{k: v.replace("{workdir}", str(workdir)) for k, v in extra.items()})
    given = f"{workdir}/{cwd}" if cwd != "." else str(workdir)  # as the caller wrote it
    os.chdir(given)
    assert direct(cmd, env, given) is None, f"direct_argv took {cmd!r}, which bash runs differently"


# ---------------------------------------------------------------------------- inside a sandbox
@pytest.mark.parametrize("cmd", ["env", "ls -a /", "id", "printenv PWD SHLVL _", "cat /etc/hostname"])
async def test_in_a_sandbox_a_plain_command_matches_its_bash(sandbox: LocalSandbox, cmd: str) -> None:
    """End to end: ``exec(cmd)`` (direct) and ``bash -c cmd`` run exactly (``argv``), in one sandbox."""
    taken = await sandbox.exec(cmd)
    shelled = await sandbox.exec(cmd, argv=[BASH, "-c", cmd])
    assert (taken.exit_code, sorted(taken.stdout.splitlines())) == (
        shelled.exit_code,
        sorted(shelled.stdout.splitlines()),
    )
