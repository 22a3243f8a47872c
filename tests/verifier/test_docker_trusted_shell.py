"""Docker ``full`` mode starts test.sh from a trusted shell, against a real engine (podman here).

The full-mode fork is a commit of the agent's container, so everything in it is the agent's. Its pid
1, the exec wrapper, the test script's shell and the timeout sweeper run on the image's own bash
(captured from a pristine container, put in before the fork starts, run through its own loader);
/etc/ld.so.preload is emptied, /tests and /logs are recreated by the archive API. So an agent that
replaced bash, sh, ``timeout``, ``cat`` or ``mkdir``, or preloads a library, no longer forges its
reward. ``trusted=False`` runs the same attacks with the trusted shell turned off (the behaviour
before it existed): there each one scores 1, which shows that the attack is real.
"""

from __future__ import annotations

import asyncio
import io
import shutil
import subprocess
import tarfile
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

import pytest

import ares
from ares.core.status import EpisodeStatus
from ares.envs.code_env import CodeEnvironment
from ares.errors import SandboxError
from ares.llm.types import LLMRequest
from ares.policies import make_policy
from ares.sandbox.docker import DockerSandbox, DockerSandboxFactory, janitor
from ares.sandbox.docker import sandbox as docker_sandbox
from ares.sandbox.docker.containers import create_container
from ares.sandbox.docker.outputs import MODE_SYMLINK, stat_path
from ares.sandbox.docker.trusted import TrustedShell, image_shell, prepare
from ares.tasks.model import Task
from ares.tasks.verifier import verify

TESTS = Path(__file__).resolve().parents[1]
KIT = TESTS / "sandbox" / "docker" / "docker_engine_kit.py"
FIXBUG = TESTS / "fixtures" / "harbor" / "fix-bug"

WRONG_STATS = """\
def mean(values):
    return sum(values) / len(values)


def median(values):
    ordered = sorted(values)
    return ordered[len(ordered) // 2]
"""

#: Rewards 1 iff solution.txt says "right", with bash builtins only: whatever else runs is not the
#: test's doing.
PROBE = Task(
    id="trusted-probe",
    instruction="write right into solution.txt",
    workdir="/app",
    verifier_mode="full",
    verifier_timeout_s=60,
    tests={
        "test.sh": 'echo "shell: $BASH" > /logs/verifier/test-output.txt\n'
        '[[ "$(<solution.txt)" == right ]] && r=1 || r=0\n'
        "echo $r > /logs/verifier/reward.txt\n"
    },
)

REWARD = "/logs/verifier/reward.txt"
REWARD_JSON = "/logs/verifier/reward.json"


def forger(path: str, original: str | None = None, *, before_tests: bool = False) -> str:
    """Shell that replaces ``path`` by a script that runs ``original`` (default: a copy of ``path``
    kept as ``path.orig``) and then writes reward 1 into reward.txt; with ``before_tests`` (a tool
    the verifier runs before test.sh) into reward.json instead, which outranks the reward.txt that
    test.sh writes later: the forgery then holds without racing the tests or the halt."""
    keep = "" if original is not None else f"cp -p {path} {path}.orig && "
    original = original or f"{path}.orig"
    forge = f"echo 1 2>/dev/null > {REWARD}"
    if before_tests:
        forge = f'printf "{{\\"reward\\": 1}}" 2>/dev/null > {REWARD_JSON}'
    script = f'#!/usr/bin/dash\n"{original}" "$@"; rc=$?\n{forge}\nexit $rc\n'
    return f"{keep}printf '%s' '{script}' > {path}.new && chmod 755 {path}.new && mv -f {path}.new {path}"


PRELOAD_SOURCE = r"""
#include <fcntl.h>
#include <unistd.h>
__attribute__((destructor)) static void forge(void) {
    int fd = open("/logs/verifier/reward.txt", O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) { (void)!write(fd, "1\n", 2); close(fd); }
}
"""

#: Each attack, as the agent's last command. The forgers run the original, so the agent's own
#: commands (and the verifier's, before) still work.
ATTACKS = {
    "bash": forger("/usr/bin/bash"),
    "sh": forger("/usr/bin/sh", "/usr/bin/dash"),  # a link to dash in the image
    "path-bash": forger("/usr/local/bin/bash", "/usr/bin/bash"),  # ahead of /usr/bin in PATH
    "timeout": forger("/usr/bin/timeout"),
    "cat": forger("/usr/bin/cat"),
    "mkdir": forger("/usr/bin/mkdir", before_tests=True),
    "preload": "echo /usr/lib/ares-forge.so > /etc/ld.so.preload",
}
#: What fix-bug's own test.sh does not run (it runs mkdir, dirname and python3 itself: in full mode
#: those are the agent's, and a forging mkdir would forge through them).
HARBOR_ATTACKS = ("bash", "sh", "path-bash", "timeout", "cat", "preload")


@pytest.fixture
async def agent(factory: DockerSandboxFactory) -> AsyncIterator[DockerSandbox]:
    sb = factory(PROBE.sandbox_spec())
    await sb.start()
    yield sb
    await sb.stop()


@pytest.fixture(scope="module")
def forging_library(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    """A library whose destructor writes reward 1, built by the host's gcc: the Debian image has
    none, and the host is the same Debian release (its glibc symbols are all the image has)."""
    gcc = shutil.which("gcc")
    if gcc is None:
        pytest.skip("no gcc in the image nor on the host to build the preloaded library")
    folder = tmp_path_factory.mktemp("forge-lib")
    (folder / "forge.c").write_text(PRELOAD_SOURCE)
    subprocess.run(
        [gcc, "-shared", "-fPIC", "-O2", "-o", str(folder / "forge.so"), str(folder / "forge.c")], check=True
    )
    return (folder / "forge.so").read_bytes()


@pytest.fixture(params=[True, False], ids=["trusted", "before"])
def trusted(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> bool:
    """False: the full-mode fork gets no trusted shell, as before it existed."""
    if not request.param:

        async def no_shell(*_: object) -> None:
            return None

        monkeypatch.setattr(docker_sandbox, "image_shell", no_shell)
    return bool(request.param)


async def check(sb: DockerSandbox, cmd: str) -> str:
    result = await sb.exec(cmd, cwd="/")
    assert result.ok, result
    return result.stdout


async def attack(sb: DockerSandbox, name: str, library: bytes | None) -> None:
    if name == "preload":
        assert library is not None
        await sb.upload({"ares-forge.so": library}, "/usr/lib")
    await check(sb, ATTACKS[name])


# --------------------------------------------------------------------------- each attack, probe task
@pytest.mark.parametrize("name", list(ATTACKS))
async def test_full_mode_attack_does_not_forge_the_reward(
    agent: DockerSandbox, request: pytest.FixtureRequest, trusted: bool, name: str
) -> None:
    library = request.getfixturevalue("forging_library") if name == "preload" else None
    await check(agent, "echo wrong > /app/solution.txt")
    await attack(agent, name, library)
    verdict = await verify(PROBE, agent)
    assert verdict.mode == "full"
    if trusted:
        assert verdict.reward == 0.0, verdict.output
        assert verdict.files.files["test-output.txt"].startswith("shell: /.ares-shell-")
    else:
        assert verdict.reward == 1.0, verdict.output  # the attack is real


async def test_full_mode_oracle_passes_despite_every_attack(
    agent: DockerSandbox, forging_library: bytes
) -> None:
    await check(agent, "echo right > /app/solution.txt")
    for name in ATTACKS:
        await attack(agent, name, forging_library)
    verdict = await verify(PROBE, agent)
    assert verdict.reward == 1.0 and verdict.mode == "full"
    assert verdict.outside is not None
    assert {"/usr/bin/bash", "/usr/local/bin/bash", "/etc/ld.so.preload"} <= set(verdict.outside.paths)


# --------------------------------------------------------------------------- a Harbor task
async def play_null(env: CodeEnvironment, ts: ares.TimeStep) -> ares.TimeStep:
    assert env.task is not None
    policy = make_policy("null")(env.task, env.action_format)
    while not ts.last():
        assert isinstance(ts.observation, LLMRequest)
        ts = await env.step(await policy.act(ts.observation))
    return ts


@pytest.mark.parametrize(("solution", "reward"), [("wrong", 0.0), ("oracle", 1.0)])
async def test_full_mode_harbor_task_with_shell_attacks(
    factory: DockerSandboxFactory, forging_library: bytes, solution: str, reward: float
) -> None:
    """fix-bug in full mode: its checker runs on the agent's python3 (that is what full mode means),
    while everything around test.sh that the agent replaced no longer counts."""
    env = ares.make("harbor", path=FIXBUG, verifier_mode="full", sandbox_factory=factory)
    await env.__aenter__()
    try:
        ts = await env.reset(task=0)
        sandbox = env.sandbox
        assert isinstance(sandbox, DockerSandbox)
        if solution == "oracle":
            await sandbox.upload(FIXBUG / "solution", "/solution")
            assert (await sandbox.exec("bash /solution/solve.sh")).ok
        else:
            await sandbox.upload({"stats.py": WRONG_STATS}, "/app")
        for name in HARBOR_ATTACKS:
            await attack(sandbox, name, forging_library)
        ts = await play_null(env, ts)
        ep = env.episode
        assert ep is not None and ep.status is EpisodeStatus.FINISHED, ep and ep.error
        assert ep.reward == reward and ep.verifier_mode == "full"
    finally:
        await env.close()


async def test_full_mode_task_may_use_what_the_agent_installed(agent: DockerSandbox) -> None:
    await check(
        agent,
        "printf 'def answer():\\n    return 42\\n' > /usr/lib/python3/dist-packages/agentlib.py",
    )
    task = replace(
        PROBE,
        tests={
            "test.sh": "python3 -c 'import agentlib; assert agentlib.answer() == 42'"
            f" && echo 1 > {REWARD} || echo 0 > {REWARD}\n"
        },
    )
    verdict = await verify(task, agent)
    assert verdict.reward == 1.0, verdict.output


# --------------------------------------------------------------------------- the trusted exec
HANG = """\
echo started
/usr/bin/sleep 300 &
/usr/bin/setsid /usr/bin/sleep 301 &
(/usr/bin/sleep 302 &)
/usr/bin/sleep 303
"""
#: Lists every process's argv[0] with builtins only.
LIST = 'for c in /proc/[0-9]*/cmdline; do IFS= read -r -d "" a < "$c" && printf "%s\\n" "${a##*/}"; done; :'


async def test_trusted_exec_timeout_output_and_errors(agent: DockerSandbox) -> None:
    with pytest.raises(SandboxError, match="trusted shell"):
        await agent.exec("x", argv=["/usr/bin/true"])  # an agent's own sandbox has none
    await check(agent, "rm -f /usr/bin/timeout /usr/bin/cat /usr/bin/mkdir")  # not needed any more
    fork = await agent.fork_outputs(None, fresh=("/tests",))
    try:
        sb = fork.sandbox
        shell = fork.shell_argv
        assert shell() is not None
        await sb.upload({"hang.sh": HANG}, "/tests")
        hung = await sb.exec("hang", argv=shell("/tests/hang.sh"), cwd="/", timeout_s=2)
        assert hung.timed_out and hung.exit_code == 137, hung
        assert 2 <= hung.duration_s < 10 and hung.stdout == "started\n"
        listed = await sb.exec("list", argv=shell("-c", LIST), cwd="/")
        assert listed.ok and "sleep" not in listed.stdout.split(), listed  # group and setsid'd one
        printed = await sb.exec(
            "print", argv=shell("-c", "printf 'a\\0b\\n\\n\\xff'; echo err >&2; exit 3"), cwd="/tmp"
        )
        assert printed.stdout == "a\0b\n\n\ufffd" and printed.stderr == "err\n"
        assert printed.exit_code == 3 and not printed.timed_out
        lost = await sb.exec("cwd", argv=shell("-c", "true"), cwd="/no/such/dir")
        assert lost.exit_code == 126 and "no such directory" in lost.stderr
        with pytest.raises(SandboxError, match="absolute"):
            await sb.exec("rel", argv=["bash", "-c", "true"])
    finally:
        await fork.sandbox.stop()


# --------------------------------------------------------------------------- preparing the fork
async def test_full_mode_links_at_the_prepared_paths_are_replaced_not_followed(
    agent: DockerSandbox, tmp_path: Path
) -> None:
    marker = tmp_path / "host-file"
    marker.write_text("host\n")
    await check(
        agent,
        f"echo right > /app/solution.txt && ln -s /../../../..{marker} /etc/ld.so.preload"
        " && mkdir -p /srv/keep && echo keep > /srv/keep/file && ln -s /srv/keep /logs"
        " && ln -s /srv/keep /tests",
    )
    task = replace(
        PROBE,
        tests={
            "test.sh": 'echo "preload:[$(</etc/ld.so.preload)] keep:$(</srv/keep/file)"\n'
            "[[ -L /etc/ld.so.preload || -L /logs || -L /tests ]] && r=0 || r=1\n"
            f"echo $r > {REWARD}\n"
        },
    )
    verdict = await verify(task, agent)
    assert verdict.reward == 1.0, verdict.output
    assert verdict.output is not None and verdict.output.stdout == "preload:[] keep:keep\n"
    assert marker.read_text() == "host\n"


def _member(api: object, container: str, path: str) -> tarfile.TarInfo:
    stream, _ = api.get_archive(container, path)  # type: ignore[attr-defined]
    with tarfile.open(fileobj=io.BytesIO(b"".join(stream))) as tar:
        member = tar.next()
    assert member is not None
    return member


async def test_prepare_resolves_a_linked_etc_inside_the_container(
    agent: DockerSandbox, tmp_path: Path
) -> None:
    """An image whose /etc is a link to a path that exists on the host as well: the empty
    ld.so.preload lands inside the container, the host's directory stays empty. (A running
    container cannot do this to its /etc, which holds the engine's mounts; an image can.)"""
    outside = tmp_path / "etc"
    outside.mkdir()
    image, pristine = agent._started_from or "", replace(agent.spec, network=False)
    bundle = await image_shell(
        agent._engine.base_url, image, lambda: DockerSandbox(pristine, engine=agent._engine, image=image)
    )
    assert bundle is not None
    await check(agent, f"mkdir -p {outside}")
    frozen = await agent.fork_frozen()
    client = await agent._engine.client()
    api = client.api
    container = await asyncio.to_thread(
        create_container, client, agent._engine, agent.spec, frozen._image or ""
    )
    try:
        link = io.BytesIO()
        with tarfile.open(fileobj=link, mode="w") as tar:
            info = tarfile.TarInfo("etc")
            info.type, info.linkname = tarfile.SYMTYPE, f"/../../../..{outside}"
            tar.addfile(info)
        await asyncio.to_thread(api.put_archive, container, "/", link.getvalue())
        linked = await asyncio.to_thread(stat_path, api, container, "/etc")
        assert linked is not None and int(linked["mode"]) & MODE_SYMLINK, linked
        shell = TrustedShell.fresh(bundle)
        await asyncio.to_thread(prepare, api, container, shell, ("/logs/verifier",))
        placed = _member(api, container, f"{outside}/ld.so.preload")
        assert placed.isfile() and placed.size == 0
        assert _member(api, container, shell.dir + "/bash").mode & 0o777 == 0o555
        assert list(outside.iterdir()) == []
    finally:
        await asyncio.to_thread(api.remove_container, container, force=True)
        janitor.untrack_container(container)
        await frozen.stop()
