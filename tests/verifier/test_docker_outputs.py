"""The verifier's ``outputs`` mode on the docker backend, against a real engine (podman here).

The tests run in a fresh container of the pristine image with only the task's outputs copied from
the stopped agent container, so a replaced shell or interpreter, a planted ``.pth`` or a background
process never reach them, and what the agent changed elsewhere is listed on the verdict. ``full``
mode still runs them on a commit of the agent's whole container.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

import pytest

import ares
from ares.core.status import EpisodeStatus
from ares.envs.code_env import CodeEnvironment
from ares.errors import OutputRefusedError, SandboxError, VerifierError
from ares.llm.types import LLMRequest
from ares.policies import make_policy
from ares.sandbox import ImageSpec, SandboxSpec
from ares.sandbox.docker import DockerSandbox, DockerSandboxFactory
from ares.sandbox.docker.outputs import summarize_changes
from ares.tasks.model import Task
from ares.tasks.verifier import verify
from engine_kit import docker_kit

TESTS = Path(__file__).resolve().parents[1]
KIT = TESTS / "sandbox" / "docker" / "docker_engine_kit.py"
FIXBUG = TESTS / "fixtures" / "harbor" / "fix-bug"

#: The image's workdir has files of its own, so that a deletion by the agent means something.
DOCKERFILE = """\
FROM {base}
RUN mkdir -p /app /opt/keep && echo image > /app/deleted.txt && echo image > /app/kept.txt \\
 && echo image > /opt/out.txt && echo image > /opt/keep/file
"""

WRONG_STATS = """\
def mean(values):
    return sum(values) / len(values)


def median(values):
    ordered = sorted(values)
    return ordered[len(ordered) // 2]
"""

FORGE = "#!/bin/sh\nmkdir -p /logs/verifier; echo 1 > /logs/verifier/reward.txt; exit 0\n"
FORGE_PTH = (
    "import os; os.makedirs('/logs/verifier', exist_ok=True);"
    " open('/logs/verifier/reward.txt', 'w').write('1')\n"
)
PTH = "/usr/lib/python3/dist-packages/zz-forge.pth"
REPLACE_PYTHON = (
    f"rm -f /usr/bin/python3 && printf '%s' '{FORGE}' > /usr/bin/python3 && chmod 755 /usr/bin/python3"
)
#: Every attack: the interpreter and the shell the tests use replaced by scripts writing reward 1, a
#: start-up hook in site-packages, and a background process writing reward 1 forever.
ATTACKS = f"""
set -e
{REPLACE_PYTHON}
rm -f /usr/bin/bash && printf '%s' '{FORGE}' > /usr/bin/bash && chmod 755 /usr/bin/bash
printf '%s' "{FORGE_PTH}" > {PTH}
setsid sh -c 'while :; do mkdir -p /logs/verifier; echo 1 > /logs/verifier/reward.txt; sleep 0.05; done' \
  </dev/null >/dev/null 2>&1 &
"""


@pytest.fixture(scope="module")
def image_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    context = tmp_path_factory.mktemp("outputs-image")
    (context / "Dockerfile").write_text(DOCKERFILE.format(base=docker_kit().BASE_IMAGE))
    return context


@pytest.fixture
async def agent(factory: DockerSandboxFactory, image_dir: Path) -> AsyncIterator[DockerSandbox]:
    sb = factory(SandboxSpec(image=ImageSpec(dockerfile_dir=image_dir), workdir="/app"))
    await sb.start()
    yield sb
    await sb.stop()


async def check(sb: DockerSandbox, cmd: str) -> str:
    result = await sb.exec(cmd, cwd="/")
    assert result.ok, result
    return result.stdout


# --------------------------------------------------------------------------- fork_outputs itself
async def test_docker_outputs_are_carried_with_modes_links_and_deletions(agent: DockerSandbox) -> None:
    await check(
        agent,
        "cd /app && rm deleted.txt && echo agent > kept.txt && printf '#!/bin/sh\\n' > tool.sh"
        " && chmod 4750 tool.sh && ln -s kept.txt link && ln -s /etc/passwd abs-link"
        " && mkdir -p nested/deep && chmod 700 nested && echo n > nested/deep/f"
        " && rm /opt/out.txt && mkdir -p /srv/made /new/parent && echo s > /srv/made/f"
        " && echo p > /new/parent/f && ln -s /srv/made /opt/link-out && echo changed > /opt/keep/file"
        " && echo planted > /etc/planted.conf",
    )
    outputs = ["/app", "/opt/out.txt", "/srv/made", "/new/parent/f", "/opt/link-out", "/app/nested"]
    fork = await agent.fork_outputs(outputs)
    try:
        listing = await check(
            fork.sandbox,
            "cd /app && stat -c '%n %a %F' kept.txt tool.sh nested nested/deep/f link abs-link"
            " && readlink link abs-link && cat kept.txt /srv/made/f /new/parent/f /opt/keep/file"
            " && ls /app /opt && echo planted: $(cat /etc/planted.conf 2>/dev/null || echo absent)",
        )
    finally:
        await fork.sandbox.stop()
    assert "kept.txt 644 regular file" in listing
    assert "tool.sh 4750 regular file" in listing
    assert "nested 700 directory" in listing and "nested/deep/f 644 regular file" in listing
    assert "link 777 symbolic link" in listing and "kept.txt\n/etc/passwd\n" in listing
    assert "agent\ns\np\nimage\n" in listing  # /opt/keep/file is not an output: the image's version
    files = listing.split("image\n", 1)[1]
    assert "deleted.txt" not in files and "out.txt" not in files  # deletions carried
    assert "link-out" not in files  # an output that is a symlink is not carried (as in local mode)
    assert "planted: absent" in listing
    assert fork.outside.paths == ("/etc/planted.conf", "/opt/keep/file")
    assert fork.outside.count == 2 and not fork.outside.truncated
    with pytest.raises(SandboxError, match="halted"):
        await agent.exec("true")  # the agent's processes are gone for good
    assert await agent.read_file("/app/kept.txt") == b"agent\n"  # its files stay readable


async def test_docker_outputs_a_deleted_workdir_stays_deleted(agent: DockerSandbox) -> None:
    await check(agent, "rm -rf /app")
    fork = await agent.fork_outputs(["/app"])
    try:
        assert (await check(fork.sandbox, "test -e /app && echo present || echo absent")) == "absent\n"
    finally:
        await fork.sandbox.stop()
    assert fork.outside.count == 0


async def test_docker_outputs_a_huge_sparse_output_is_refused_by_its_header(agent: DockerSandbox) -> None:
    """The archive API would stream every zero of a sparse file: the carry reads its tar header and
    refuses it (a 0 for the verifier) before the fork sees a byte of it."""
    await check(agent, "cd /app && truncate -s 300G huge.bin && echo agent > kept.txt")
    with pytest.raises(OutputRefusedError) as refused:
        await agent.fork_outputs(["/app"])
    assert refused.value.reason == "file_too_large" and "/app/huge.bin" in refused.value.detail


async def test_docker_halt_kills_background_processes_and_keeps_files(agent: DockerSandbox) -> None:
    await check(
        agent,
        # Renamed into place, so that halting it between a truncate and a write cannot leave /tmp/n empty.
        "setsid sh -c 'i=0; while :; do i=$((i+1)); echo $i > /tmp/n.new; mv /tmp/n.new /tmp/n;"
        " sleep 0.01; done' >/dev/null 2>&1 &",
    )
    await asyncio.sleep(0.3)
    await agent.halt()
    first = await agent.read_file("/tmp/n")
    await asyncio.sleep(0.5)
    assert await agent.read_file("/tmp/n") == first and int(first) > 0


def test_docker_change_summary_labels_like_the_local_diff() -> None:
    changes = [
        {"Path": "/etc", "Kind": 0},
        {"Path": "/etc/passwd", "Kind": 2},
        {"Path": "/usr", "Kind": 0},
        {"Path": "/usr/share", "Kind": 0},
        {"Path": "/usr/share/doc", "Kind": 2},
        {"Path": "/usr/share/doc/z", "Kind": 1},
        {"Path": "/usr/share/empty", "Kind": 1},
        {"Path": "/usr-b", "Kind": 1},
        {"Path": "/app", "Kind": 1},
        {"Path": "/app/x", "Kind": 1},
        {"Path": "/tmp", "Kind": 0},
        {"Path": "/tmp/.ares-exec-0123", "Kind": 1},
        {"Path": "/root", "Kind": 0},
    ]
    summary = summarize_changes(changes, ["/app"], baseline=[{"Path": "/root", "Kind": 0}], keep=4)
    assert summary.paths == (
        "/etc/passwd (deleted)",
        "/usr/share/doc (replaced)",
        "/usr/share/doc/z",
        "/usr/share/empty",
    )
    assert summary.count == 5 and not summary.truncated  # and /usr-b, after /usr in a pre-order walk


# --------------------------------------------------------------------------- through verify()
async def play_null(env: CodeEnvironment, ts: ares.TimeStep) -> ares.TimeStep:
    assert env.task is not None
    policy = make_policy("null")(env.task, env.action_format)
    while not ts.last():
        assert isinstance(ts.observation, LLMRequest)
        ts = await env.step(await policy.act(ts.observation))
    return ts


async def episode(factory: DockerSandboxFactory, mode: str, solution: str, attacks: str) -> CodeEnvironment:
    """A fix-bug episode on the docker backend: after reset, the agent's sandbox gets ``solution``
    (the oracle's solve.sh or a wrong stats.py) and then ``attacks``; the null policy ends it."""
    env = ares.make("harbor", path=FIXBUG, verifier_mode=mode, sandbox_factory=factory)
    await env.__aenter__()
    ts = await env.reset(task=0)
    sandbox = env.sandbox
    assert isinstance(sandbox, DockerSandbox)
    if solution == "oracle":
        await sandbox.upload(FIXBUG / "solution", "/solution")
        assert (await sandbox.exec("bash /solution/solve.sh")).ok
    else:
        await sandbox.upload({"stats.py": WRONG_STATS}, "/app")
    assert (await sandbox.exec(attacks)).ok
    ts = await play_null(env, ts)
    assert ts.last()
    return env


@pytest.mark.parametrize(("solution", "reward"), [("wrong", 0.0), ("oracle", 1.0)])
async def test_docker_outputs_mode_harbor_task_ignores_every_system_attack(
    factory: DockerSandboxFactory, solution: str, reward: float
) -> None:
    env = await episode(factory, "outputs", solution, ATTACKS)
    try:
        ep = env.episode
        assert ep is not None and ep.status is EpisodeStatus.FINISHED, ep and ep.error
        assert ep.reward == reward and ep.verifier_mode == "outputs"
        assert ep.changed_outside is not None
        outside = set(ep.changed_outside.paths)
        assert {"/usr/bin/python3", "/usr/bin/bash", PTH, "/logs/verifier/reward.txt"} <= outside
        assert not any(p.startswith("/app") for p in outside)
    finally:
        await env.close()


async def test_docker_full_mode_sees_the_agents_system_changes(factory: DockerSandboxFactory) -> None:
    # The replaced interpreter is what full mode runs the checker with: a wrong solution is rewarded.
    # This is why outputs is the default mode.
    env = await episode(factory, "full", "wrong", REPLACE_PYTHON)
    try:
        ep = env.episode
        assert ep is not None and ep.status is EpisodeStatus.FINISHED, ep and ep.error
        assert ep.reward == 1.0 and ep.verifier_mode == "full"
        assert ep.changed_outside is not None and "/usr/bin/python3" in ep.changed_outside.paths
    finally:
        await env.close()


# --------------------------------------------------------------------------- the reward channel
PROBE = Task(
    id="probe",
    instruction="-",
    workdir="/app",
    tests={
        "test.sh": "set -u\nout=/logs/verifier\n"
        "echo extra: $(cat /etc/extra.conf 2>/dev/null || echo absent)\n"
        '[ "$(cat solution.txt 2>/dev/null)" = right ] && r=1 || r=0\n'
        "echo $r > $out/other.txt\n"
        "ln -s other.txt $out/reward.txt\n"
    },
)


async def test_docker_outputs_a_linked_reward_is_an_error_with_evidence(agent: DockerSandbox) -> None:
    await check(agent, "echo right > /app/solution.txt && echo planted > /etc/extra.conf")
    with pytest.raises(VerifierError) as caught:
        await verify(PROBE, agent)
    evidence = caught.value.evidence
    assert evidence is not None and evidence.mode == "outputs"
    assert evidence.output.stdout == "extra: absent\n"
    assert evidence.outside is not None and evidence.outside.paths == ("/etc/extra.conf",)


async def test_docker_full_mode_probe_sees_system_files(agent: DockerSandbox) -> None:
    await check(agent, "echo right > /app/solution.txt && echo planted > /etc/extra.conf")
    task = replace(
        PROBE, tests={"test.sh": "echo extra: $(cat /etc/extra.conf)\necho 1 > /logs/verifier/reward.txt\n"}
    )
    verdict = await verify(replace(task, verifier_mode="full"), agent)
    assert verdict.reward == 1.0 and verdict.mode == "full"
    assert verdict.output is not None and verdict.output.stdout == "extra: planted\n"
    assert verdict.outside is not None and verdict.outside.paths == ("/etc/extra.conf",)
