"""The verifier on every backend (``conftest.REGISTRY``): which mode the tests ran in is what the
backend declares, never a silent fallback, and a hostile agent's tampering never reaches them.

The agent's sandbox gets a wrong answer, a planted reward, a ``grep`` that lies and a background
process that keeps rewriting the reward. ``outputs`` mode must give 0.0 on every backend (the tests
run in a fresh sandbox of the image holding only the workdir); ``full`` mode runs where a backend
can fork its whole filesystem and is a clear error where it cannot (cloud); ``in-place`` runs only
because the task asks for it.
"""

from __future__ import annotations

import dataclasses
import io
import tarfile

import pytest
from conformance_kit import BackendUnderTest

from ares.errors import SandboxError, VerifierError
from ares.sandbox import Sandbox
from ares.tasks.model import Task
from ares.tasks.verifier import verify

TEST_SH = """#!/bin/bash
mkdir -p /logs/verifier
if grep -qx 42 /workspace/answer.txt; then r=1; else r=0; fi
echo "$r" > /logs/verifier/reward.txt
"""
TASK = Task(
    id="answer", instruction="write 42 to answer.txt", tests={"test.sh": TEST_SH}, verifier_timeout_s=60
)
#: A grep that always finds what it is asked for, put where the tests' grep is.
LYING_GREP = (
    "printf '#!/bin/sh\\nexit 0\\n' > /tmp/grep && chmod +x /tmp/grep && cp /tmp/grep \"$(command -v grep)\""
)
REWRITER = (
    "mkdir -p /logs/verifier && echo 1 > /logs/verifier/reward.txt && "
    "(nohup sh -c 'while :; do echo 1 > /logs/verifier/reward.txt 2>/dev/null; sleep 0.01; done' "
    ">/dev/null 2>&1 &)"
)
#: The backends whose forks can carry the agent's whole filesystem.
FULL_FORKS = {"local", "local+pool", "docker"}


async def agent_leaves(backend: BackendUnderTest, answer: str, *, hostile: bool, lying_grep: bool) -> Sandbox:
    sandbox = await backend.start(TASK.sandbox_spec())
    await sandbox.upload({"answer.txt": answer}, "/workspace")
    if hostile:
        for step in (REWRITER, LYING_GREP) if lying_grep else (REWRITER,):
            result = await sandbox.exec(step, cwd="/", timeout_s=30)
            assert result.ok, (step, result)
    return sandbox


async def test_outputs_mode_is_what_every_backend_runs_and_tampering_earns_nothing(
    sandbox_backend: BackendUnderTest,
) -> None:
    hostile = await agent_leaves(sandbox_backend, "41", hostile=True, lying_grep=True)
    assert (await hostile.exec("grep -qx 42 /workspace/answer.txt", cwd="/")).ok  # the lie holds here
    verdict = await verify(TASK, hostile)
    assert (verdict.reward, verdict.mode) == (0.0, "outputs")
    honest = await agent_leaves(sandbox_backend, "42", hostile=False, lying_grep=False)
    verdict = await verify(TASK, honest)
    assert (verdict.reward, verdict.mode) == (1.0, "outputs")


async def test_full_mode_runs_only_where_the_backend_can_fork_everything(
    sandbox_backend: BackendUnderTest,
) -> None:
    task = dataclasses.replace(TASK, verifier_mode="full")
    hostile = await agent_leaves(sandbox_backend, "41", hostile=True, lying_grep=False)
    if sandbox_backend.name not in FULL_FORKS:
        with pytest.raises(VerifierError, match=r"full-fork.*in-place"):
            await verify(task, hostile)
        return
    verdict = await verify(task, hostile)
    assert (verdict.reward, verdict.mode) == (0.0, "full")


async def test_in_place_runs_only_when_the_task_asks(sandbox_backend: BackendUnderTest) -> None:
    sandbox = await agent_leaves(sandbox_backend, "42", hostile=False, lying_grep=False)
    verdict = await verify(dataclasses.replace(TASK, verifier_mode="in-place"), sandbox)
    assert (verdict.reward, verdict.mode) == (1.0, "in-place")


def evil_archive() -> bytes:
    """What a hostile ``tar -c`` of the workdir answers: a wrong answer, a member that climbs out of the
    output to replace the tests' grep, and a link to a host path."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, data in (
            ("workspace/answer.txt", b"41\n"),
            ("workspace/../usr/bin/grep", b"#!/bin/sh\nexit 0\n"),
        ):
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o755
            tar.addfile(info, io.BytesIO(data))
        link = tarfile.TarInfo("workspace/passwd")
        link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
        tar.addfile(link)
    return buf.getvalue()


async def test_a_hostile_tar_in_the_agents_sandbox_carries_nothing_out_of_the_outputs(
    sandbox_backend: BackendUnderTest,
) -> None:
    """The cloud fork packs the outputs with the agent's ``tar``: whatever it answers, nothing lands
    outside the output in the fork (the episode errors, or scores 0). Other backends never run it."""
    sandbox = await agent_leaves(sandbox_backend, "41", hostile=False, lying_grep=False)
    await sandbox.upload({"evil.tar": evil_archive()}, "/opt")
    fake_tar = "printf '#!/bin/sh\\ncp /opt/evil.tar \"$2\"\\n' > /tmp/tar && chmod +x /tmp/tar"
    replace = f'{fake_tar} && cp /tmp/tar "$(readlink -f "$(command -v tar)")"'
    assert (await sandbox.exec(replace, cwd="/", timeout_s=30)).ok
    try:
        verdict = await verify(TASK, sandbox)
    except SandboxError as exc:
        assert "cannot be carried" in str(exc)
    else:
        assert (verdict.reward, verdict.mode) == (0.0, "outputs")
